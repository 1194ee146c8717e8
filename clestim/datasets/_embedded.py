"""Small real datasets that ship inside dependencies (no download, no cache).

sktime 1.2 ships BasicMotions, JapaneseVowels, ACSF1 and OSULeaf as ``.ts`` files
with their official train/test splits; scikit-learn ships the digits. They are the
defaults for quick runs and tests.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import train_test_split

from ._base import make_bunch
from ._info import INFO


def _descr(name: str, extra: str = "") -> str:
    info = INFO[name]
    return (f"{info['summary']}.\nShape (train / test): {info['shape']}. Default: "
            f"{info['n_tasks']} tasks of {info['n_classes'] // info['n_tasks']} classes.{extra}")


def _sorted_classes(y_train, y_test):
    labels = np.union1d(y_train, y_test)
    try:
        labels = sorted(labels, key=float)
    except ValueError:
        labels = sorted(labels)
    return [str(c) for c in labels]


def _encode(y, classes):
    lookup = {c: i for i, c in enumerate(classes)}
    return np.array([lookup[str(v)] for v in y], dtype=np.int64)


def _sktime_equal(name: str, loader, channel_names=None):
    X_tr, y_tr = loader(split="train", return_type="numpy3D")
    X_te, y_te = loader(split="test", return_type="numpy3D")
    classes = _sorted_classes(y_tr, y_te)
    info = INFO[name]
    return make_bunch(
        name=name, X_train=X_tr, y_train=_encode(y_tr, classes), X_test=X_te,
        y_test=_encode(y_te, classes), channel_names=channel_names, class_names=classes,
        n_tasks=info["n_tasks"], descr=_descr(name, " Official archive train/test split."),
        citation=info["citation"], license=info["license"], source="sktime.datasets",
    )


def load_basic_motions():
    """Load UEA BasicMotions (40/40 series, 6 channels, length 100, 4 classes).

    Accelerometer and gyroscope xyz of a smartwatch during standing, walking,
    running and badminton; official split; ships with sktime.

    Returns
    -------
    data : sklearn.utils.Bunch
        Labels are indices into ``class_names`` (sorted names); ``n_tasks=2``.

    Examples
    --------
    >>> from clestim.datasets import load_basic_motions
    >>> bm = load_basic_motions()
    >>> bm.X_train.shape, bm.class_names
    ((40, 6, 100), ['badminton', 'running', 'standing', 'walking'])
    """
    from sktime.datasets import load_basic_motions as _load

    names = ["acc_x", "acc_y", "acc_z", "gyro_x", "gyro_y", "gyro_z"]
    return _sktime_equal("basic_motions", _load, names)


def load_acsf1():
    """Load UCR ACSF1 (100/100 univariate series of length 1460, 10 appliance classes).

    Returns
    -------
    data : sklearn.utils.Bunch
        Official split, ``n_tasks=5``.

    Examples
    --------
    >>> from clestim.datasets import load_acsf1
    >>> load_acsf1().X_test.shape
    (100, 1, 1460)
    """
    from sktime.datasets import load_acsf1 as _load

    return _sktime_equal("acsf1", _load, ["power"])


def load_osuleaf():
    """Load UCR OSULeaf (200/242 univariate series of length 427, 6 leaf classes).

    Returns
    -------
    data : sklearn.utils.Bunch
        Official split, ``n_tasks=3``.

    Examples
    --------
    >>> from clestim.datasets import load_osuleaf
    >>> load_osuleaf().X_train.shape
    (200, 1, 427)
    """
    from sktime.datasets import load_osuleaf as _load

    return _sktime_equal("osuleaf", _load, ["outline"])


def load_japanese_vowels(length: int = 29, *, pad_mode: str = "constant",
                         pad_value: float = 0.0):
    """Load JapaneseVowels (270/370 utterances, 12 channels, 9 speakers).

    The series have unequal lengths (7 to 29 steps). Each is brought to
    ``length`` steps: longer ones are truncated at the end, shorter ones are
    padded at the end, with ``pad_value`` (``pad_mode="constant"``) or by
    repeating their last step (``pad_mode="edge"``). The original lengths are in
    ``lengths_train`` / ``lengths_test``.

    Parameters
    ----------
    length : int, default=29
        Target length; 29 (the maximum) loses nothing.
    pad_mode : {"constant", "edge"}, default="constant"
    pad_value : float, default=0.0
        Used when ``pad_mode="constant"``.

    Returns
    -------
    data : sklearn.utils.Bunch
        Official split, labels 0..8 (speakers 1..9), ``n_tasks=3``.

    Examples
    --------
    >>> from clestim.datasets import load_japanese_vowels
    >>> jv = load_japanese_vowels()
    >>> jv.X_train.shape, int(jv.lengths_train.min()), int(jv.lengths_train.max())
    ((270, 12, 29), 7, 26)
    """
    from sktime.datasets import load_japanese_vowels as _load

    if int(length) != length or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if pad_mode not in ("constant", "edge"):
        raise ValueError(f"pad_mode must be 'constant' or 'edge', got {pad_mode!r}")
    length = int(length)
    parts = {}
    for split in ("train", "test"):
        df, y = _load(split=split)
        n, C = df.shape
        X = np.empty((n, C, length), dtype=np.float32)
        lengths = np.empty(n, dtype=np.int64)
        for i in range(n):
            series = np.stack([np.asarray(df.iloc[i, c], dtype=np.float64) for c in range(C)])
            L = series.shape[1]
            lengths[i] = L
            if L >= length:
                X[i] = series[:, :length]
            else:
                fill = series[:, -1:] if pad_mode == "edge" else np.full((C, 1), pad_value)
                X[i, :, :L] = series
                X[i, :, L:] = fill
        parts[split] = (X, np.asarray(y), lengths)
    classes = _sorted_classes(parts["train"][1], parts["test"][1])
    info = INFO["japanese_vowels"]
    return make_bunch(
        name="japanese_vowels",
        X_train=parts["train"][0], y_train=_encode(parts["train"][1], classes),
        X_test=parts["test"][0], y_test=_encode(parts["test"][1], classes),
        channel_names=[f"lpc_{i}" for i in range(1, 13)], class_names=classes,
        n_tasks=info["n_tasks"],
        descr=_descr("japanese_vowels", f" Official split. Unequal lengths brought to "
                     f"{length} steps (pad_mode={pad_mode!r}, truncation at the end)."),
        citation=info["citation"], license=info["license"], source="sktime.datasets",
        lengths_train=parts["train"][2], lengths_test=parts["test"][2],
    )


def load_digits(*, flatten: bool = True, scale: bool = True, test_size: float = 0.25,
                random_state: int = 0):
    """Load scikit-learn's 8x8 digits (1,797 images, 10 classes).

    There is no official split; a stratified split with fixed ``random_state``
    makes it deterministic (1,347 train / 450 test by default).

    Parameters
    ----------
    flatten : bool, default=True
        True gives ``(n, 64)``; False gives images ``(n, 1, 8, 8)``.
    scale : bool, default=True
        Divide pixel values (0..16) by 16.
    test_size : float, default=0.25
    random_state : int, default=0

    Returns
    -------
    data : sklearn.utils.Bunch
        ``n_tasks=5``; ``channel_names`` is ``None`` (image data).

    Examples
    --------
    >>> from clestim.datasets import load_digits
    >>> d = load_digits()
    >>> d.X_train.shape, d.X_test.shape
    ((1347, 64), (450, 64))
    """
    from sklearn.datasets import load_digits as _load
    from sklearn.utils import Bunch

    raw = _load()
    X = raw.images.astype(np.float32)
    if scale:
        X /= 16.0
    X = X.reshape(len(X), -1) if flatten else X[:, None]
    X_tr, X_te, y_tr, y_te = train_test_split(X, raw.target.astype(np.int64),
                                              test_size=test_size, random_state=random_state,
                                              stratify=raw.target)
    info = INFO["digits"]
    descr = _descr("digits", f" Stratified split, test_size={test_size}, "
                   f"random_state={random_state}.")
    return Bunch(
        name="digits", X_train=X_tr, y_train=y_tr, X_test=X_te, y_test=y_te,
        subject_train=None, subject_test=None, channel_names=None,
        class_names=[str(i) for i in range(10)], n_tasks=info["n_tasks"], class_order=None,
        sampling_rate=None, citation=info["citation"], license=info["license"],
        source="sklearn.datasets",
        DESCR=f"{descr}\n\nCitation\n--------\n{info['citation']}\n\nLicence\n-------\n"
        f"{info['license']}\n",
    )
