"""Windowing of long recordings and subject-wise train/test splits."""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import GroupShuffleSplit

LABEL_RULES = ("majority", "first", "last", "center", "pure")


def _window_label(lab: np.ndarray, rule: str):
    if rule == "first":
        return lab[0], True
    if rule == "last":
        return lab[-1], True
    if rule == "center":
        return lab[len(lab) // 2], True
    values, first_idx, counts = np.unique(lab, return_index=True, return_counts=True)
    if rule == "pure":
        return lab[0], len(values) == 1
    # majority; ties go to the label that appears first in the window
    best = np.flatnonzero(counts == counts.max())
    return values[best[np.argmin(first_idx[best])]], True


def sliding_windows(signal, labels, window: int, step: int | None = None, *,
                    label_rule: str = "majority", subjects=None, channel_axis: int = 0,
                    pad_remainder: bool = False, pad_value: float = 0.0):
    """Cut one long recording into fixed-length windows.

    Parameters
    ----------
    signal : array-like of shape (n_channels, n_timepoints) or (n_timepoints,)
        The recording. Use ``channel_axis=1`` for ``(n_timepoints, n_channels)``.
    labels : scalar or array-like of shape (n_timepoints,)
        One label for the whole recording, or one label per time step.
    window : int
        Window length in time steps.
    step : int, default=None
        Hop between window starts; ``None`` means ``window`` (no overlap).
    label_rule : {"majority", "first", "last", "center", "pure"}, default="majority"
        How a window's label is derived from per-step labels. "majority" takes the
        most frequent one (ties: the one seen first in the window); "first", "last"
        and "center" take that time step's label; "pure" keeps only windows whose
        steps all share one label and drops the others.
    subjects : scalar or array-like of shape (n_timepoints,), default=None
        Subject id(s), windowed like the labels (majority rule). When given, the
        subject of each window is returned.
    channel_axis : {0, 1}, default=0
        Axis of ``signal`` that holds channels.
    pad_remainder : bool, default=False
        When True, a last partial window is padded at the end with ``pad_value``
        (its label uses only the real steps). When False the tail shorter than a
        window is dropped.
    pad_value : float, default=0.0
        Padding value.

    Returns
    -------
    X : ndarray of shape (n_windows, n_channels, window), float32
    y : ndarray of shape (n_windows,)
    subject : ndarray of shape (n_windows,) or None
        None when ``subjects`` is None.

    Raises
    ------
    ValueError
        If the window is longer than the signal, the labels do not match the
        number of time steps, the signal holds NaN, or a parameter is invalid.

    Examples
    --------
    >>> import numpy as np
    >>> from clestim.datasets import sliding_windows
    >>> sig = np.arange(10.0)[None, :]
    >>> X, y, s = sliding_windows(sig, [0] * 6 + [1] * 4, window=4, step=3, subjects=7)
    >>> X[:, 0, 0], y, s
    (array([0., 3., 6.], dtype=float32), array([0, 0, 1]), array([7, 7, 7]))
    """
    sig = np.asarray(signal, dtype=np.float64)
    if sig.ndim == 1:
        sig = sig[None, :]
    elif sig.ndim != 2:
        raise ValueError(f"signal must be 1-D or 2-D, got shape {sig.shape}")
    elif channel_axis in (1, -1):
        sig = sig.T
    elif channel_axis != 0:
        raise ValueError(f"channel_axis must be 0 or 1, got {channel_axis!r}")
    n = sig.shape[1]
    if not np.isfinite(sig).all():
        raise ValueError("signal contains NaN or infinite values")
    if label_rule not in LABEL_RULES:
        raise ValueError(f"label_rule must be one of {LABEL_RULES}, got {label_rule!r}")
    if int(window) != window or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    window = int(window)
    step = window if step is None else step
    if int(step) != step or step < 1:
        raise ValueError(f"step must be a positive integer, got {step!r}")
    step = int(step)
    if window > n:
        raise ValueError(f"window={window} is longer than the signal ({n} time steps)")

    def per_step(v, what):
        v = np.asarray(v)
        if v.ndim == 0:
            return np.full(n, v.item(), dtype=v.dtype)
        if v.ndim != 1 or len(v) != n:
            raise ValueError(f"{what} must be a scalar or have one entry per time step "
                             f"({n}), got shape {v.shape}")
        return v

    lab = per_step(labels, "labels")
    sub = None if subjects is None else per_step(subjects, "subjects")

    starts = list(range(0, n - window + 1, step))
    if pad_remainder and starts[-1] + window < n:
        starts.append(starts[-1] + step)
    Xs, ys, ss = [], [], []
    for s in starts:
        stop = min(s + window, n)
        y_w, keep = _window_label(lab[s:stop], label_rule)
        if not keep:
            continue
        w = sig[:, s:stop]
        if w.shape[1] < window:
            w = np.concatenate([w, np.full((w.shape[0], window - w.shape[1]), pad_value)], 1)
        Xs.append(w)
        ys.append(y_w)
        if sub is not None:
            ss.append(_window_label(sub[s:stop], "majority")[0])
    C = sig.shape[0]
    X = np.stack(Xs).astype(np.float32) if Xs else np.empty((0, C, window), np.float32)
    y = np.asarray(ys, dtype=lab.dtype)
    s_out = None if sub is None else np.asarray(ss, dtype=sub.dtype)
    return X, y, s_out


def tscil_windows(record: np.ndarray, window: int, stride: int) -> np.ndarray:
    """Windows exactly as TSCIL makes them with ``tsai.SlidingWindow``.

    TSCIL calls ``SlidingWindow(window, stride, pad_remainder=True,
    padding_value=0, add_padding_feature=False)`` with the default
    ``horizon=1``. That gives ``1 + max(0, ceil((n - 1 - window) / stride))``
    windows starting at ``0, stride, 2*stride, ...``, the last one zero-padded at
    the end when the record runs out. (Because of the horizon, a record of
    ``k * stride + 1`` steps yields ``k`` windows, not ``k + 1``.)

    Parameters
    ----------
    record : ndarray of shape (n_timepoints, n_channels)
    window, stride : int

    Returns
    -------
    ndarray of shape (n_windows, n_channels, window), float64
    """
    record = np.asarray(record, dtype=np.float64)
    n = len(record)
    n_win = 1 + max(0, int(np.ceil((n - 1 - window) / stride)))
    need = window + (n_win - 1) * stride
    if n < need:
        pad = np.zeros((need - n,) + record.shape[1:])
        record = np.concatenate([record, pad])
    idx = np.arange(window)[None, :] + (np.arange(n_win) * stride)[:, None]
    return np.transpose(record[idx], (0, 2, 1))


def subject_train_test_split(X, y, subjects, *, test_size=0.25, test_subjects=None,
                             random_state=None):
    """Split so that no subject appears in both train and test.

    Parameters
    ----------
    X : array-like of shape (n_samples, ...)
    y : array-like of shape (n_samples,)
    subjects : array-like of shape (n_samples,)
        Subject id of each sample.
    test_size : float or int, default=0.25
        Fraction (float) or number (int) of *subjects* held out; ignored when
        ``test_subjects`` is given.
    test_subjects : array-like, default=None
        Explicit test subjects (e.g. the official UCI-HAR ones).
    random_state : int, RandomState instance or None, default=None
        Seed of the subject draw.

    Returns
    -------
    X_train, X_test, y_train, y_test, subject_train, subject_test : ndarrays

    Examples
    --------
    >>> import numpy as np
    >>> from clestim.datasets import subject_train_test_split
    >>> X, y, s = np.zeros((6, 1, 4)), np.array([0, 1, 0, 1, 0, 1]), np.array([1, 1, 2, 2, 3, 3])
    >>> parts = subject_train_test_split(X, y, s, test_subjects=[2])
    >>> parts[4], parts[5]
    (array([1, 1, 3, 3]), array([2, 2]))
    """
    X = np.asarray(X)
    y = np.asarray(y)
    subjects = np.asarray(subjects)
    if not (len(X) == len(y) == len(subjects)):
        raise ValueError(f"X, y and subjects have different lengths: "
                         f"{len(X)}, {len(y)}, {len(subjects)}")
    uniq = np.unique(subjects)
    if test_subjects is not None:
        test_subjects = np.asarray(test_subjects)
        unknown = np.setdiff1d(test_subjects, uniq)
        if unknown.size:
            raise ValueError(f"test_subjects {unknown.tolist()} are not in subjects")
        test_mask = np.isin(subjects, test_subjects)
        if test_mask.all():
            raise ValueError("test_subjects cover every subject; nothing left to train on")
        tr, te = np.flatnonzero(~test_mask), np.flatnonzero(test_mask)
    else:
        if len(uniq) < 2:
            raise ValueError("a subject-wise split needs at least 2 subjects")
        gss = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=random_state)
        tr, te = next(gss.split(X, y, groups=subjects))
    return X[tr], X[te], y[tr], y[te], subjects[tr], subjects[te]
