"""User data: wrap arrays, read TSCIL's pickle layout."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ._base import DatasetNotFoundError, check_labels, load_numpy_pickle, make_bunch
from ._windows import subject_train_test_split

_AXES = {1: 1, "channels_first": 1, 2: 2, -1: 2, "channels_last": 2}


def _to_ncl(X, axis, name):
    X = np.asarray(X)
    if axis not in _AXES:
        raise ValueError(f"axis must be 1/'channels_first' for (n, channels, length) or "
                         f"2/'channels_last' for (n, length, channels); got {axis!r}")
    if X.ndim == 3 and _AXES[axis] == 2:
        X = np.transpose(X, (0, 2, 1))
    elif X.ndim not in (2, 3):
        raise ValueError(f"{name} must be 2-D (n, length) or 3-D, got shape {X.shape}")
    return X


def from_arrays(X, y, subjects=None, *, axis=1, X_test=None, y_test=None, subjects_test=None,
                test_size=None, by_subject: bool = False, random_state=0, name: str = "custom",
                channel_names=None, class_names=None, n_tasks=None, descr: str = "",
                citation: str = "", license: str = ""):
    """Validate user arrays and wrap them in the clestim dataset :class:`Bunch`.

    Parameters
    ----------
    X : array-like of shape (n, channels, length), (n, length, channels) or (n, length)
        Training series (or all series when ``test_size`` is given).
    y : array-like of shape (n,)
        Labels (any hashable values; kept as given).
    subjects : array-like of shape (n,), default=None
        Subject (or recording) id per sample.
    axis : {1, "channels_first", 2, "channels_last"}, default=1
        Axis of ``X`` (and ``X_test``) holding channels: 1 for (n, channels, length),
        2 for (n, length, channels). The output is always (n, channels, length).
    X_test, y_test, subjects_test : array-like, default=None
        An explicit test set.
    test_size : float or int, default=None
        Without an explicit test set: hold out this share. ``None`` and no test set
        gives an empty test set.
    by_subject : bool, default=False
        Hold out whole subjects (:func:`subject_train_test_split`) instead of a
        stratified split of samples.
    random_state : int, default=0
        Seed of the split.
    name, channel_names, class_names, n_tasks, descr, citation, license
        Metadata stored in the Bunch.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``/``X_test`` float32 (n, channels, length) and the usual fields.

    Raises
    ------
    ValueError
        Wrong shape, label count not matching samples, NaN or infinite values.

    Examples
    --------
    >>> import numpy as np
    >>> from clestim.datasets import from_arrays
    >>> X = np.zeros((8, 50, 3))  # (n, length, channels)
    >>> data = from_arrays(X, [0, 1] * 4, axis="channels_last", test_size=0.25)
    >>> data.X_train.shape, data.X_test.shape
    ((6, 3, 50), (2, 3, 50))
    """
    X = _to_ncl(X, axis, "X")
    y = check_labels(y, len(X), name="y")
    if subjects is not None:
        subjects = check_labels(subjects, len(X), name="subjects")
    if X_test is not None:
        if test_size is not None:
            raise ValueError("give either X_test or test_size, not both")
        if y_test is None:
            raise ValueError("X_test needs y_test")
        X_test = _to_ncl(X_test, axis, "X_test")
        y_test = check_labels(y_test, len(X_test), name="y_test")
        if subjects_test is not None:
            subjects_test = check_labels(subjects_test, len(X_test), name="subjects_test")
        if (subjects is None) != (subjects_test is None):
            raise ValueError("give subjects for both train and test, or for neither")
        X_train, y_train, s_train, s_test = X, y, subjects, subjects_test
    elif test_size is not None:
        if by_subject:
            if subjects is None:
                raise ValueError("by_subject=True needs subjects")
            X_train, X_test, y_train, y_test, s_train, s_test = subject_train_test_split(
                X, y, subjects, test_size=test_size, random_state=random_state)
        else:
            from sklearn.model_selection import train_test_split

            idx = np.arange(len(X))
            tr, te = train_test_split(idx, test_size=test_size, random_state=random_state,
                                      stratify=y)
            X_train, X_test, y_train, y_test = X[tr], X[te], y[tr], y[te]
            s_train = None if subjects is None else subjects[tr]
            s_test = None if subjects is None else subjects[te]
    else:
        X_train, y_train, s_train = X, y, subjects
        X_test, y_test, s_test = None, None, None if subjects is None else subjects[:0]
    if class_names is None:
        class_names = [str(c) for c in np.unique(np.concatenate(
            [np.asarray(y_train), np.asarray(y_test if y_test is not None else [],
                                             dtype=np.asarray(y_train).dtype)]))]
    return make_bunch(
        name=name, X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test,
        subject_train=s_train, subject_test=s_test, channel_names=channel_names,
        class_names=class_names, n_tasks=n_tasks, descr=descr or f"User dataset {name!r}.",
        citation=citation, license=license, source="arrays", allow_empty_test=True,
    )


def load_tscil_pickles(path: str | os.PathLike, *, name: str | None = None, n_tasks=None,
                       channel_names=None, class_names=None):
    """Load a dataset saved in TSCIL's pickle layout.

    The folder holds ``x_train.pkl``, ``state_train.pkl``, ``x_test.pkl``,
    ``state_test.pkl`` (arrays shaped (n, length, channels) and (n,)), and
    optionally ``subject_label_train.pkl`` / ``subject_label_test.pkl``. Only
    numpy arrays are unpickled; any other object is refused.

    Parameters
    ----------
    path : path-like
        The folder (e.g. TSCIL's ``data/saved/HAR_inertial``).
    name : str, default=None
        Dataset name; the folder name when None.
    n_tasks, channel_names, class_names
        Metadata stored in the Bunch.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``/``X_test`` float32 (n, channels, length).
    """
    path = Path(path)
    keys = ("x_train", "state_train", "x_test", "state_test")
    missing = [str(path / f"{k}.pkl") for k in keys if not (path / f"{k}.pkl").is_file()]
    if missing:
        raise DatasetNotFoundError(f"TSCIL layout: missing {missing} (need x_train.pkl, "
                                   "state_train.pkl, x_test.pkl, state_test.pkl)")
    arrays = {k: load_numpy_pickle(path / f"{k}.pkl") for k in keys}
    subs = {}
    for split in ("train", "test"):
        f = path / f"subject_label_{split}.pkl"
        subs[split] = load_numpy_pickle(f) if f.is_file() else None
    for split in ("train", "test"):
        x = arrays[f"x_{split}"]
        if x.ndim != 3:
            raise ValueError(f"x_{split}.pkl must be 3-D (n, length, channels), "
                             f"got shape {x.shape}")
    return from_arrays(
        arrays["x_train"], np.ravel(arrays["state_train"]),
        None if subs["train"] is None else np.ravel(subs["train"]),
        axis="channels_last", X_test=arrays["x_test"], y_test=np.ravel(arrays["state_test"]),
        subjects_test=None if subs["test"] is None else np.ravel(subs["test"]),
        name=name or path.name, n_tasks=n_tasks, channel_names=channel_names,
        class_names=class_names, descr=f"Dataset read from TSCIL pickles in {path}.",
    )
