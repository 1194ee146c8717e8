"""Small helpers shared by the test modules."""

import numpy as np


def task(data, classes, part="train", n=None):
    """The samples of ``classes`` in ``data[part]``; with ``n``, the first ``n`` of each
    class, class by class."""
    X, y = data[part]
    if n is None:
        keep = np.isin(y, list(classes))
        return X[keep], y[keep]
    idx = np.concatenate([np.flatnonzero(y == c)[:n] for c in classes])
    return X[idx], y[idx]
