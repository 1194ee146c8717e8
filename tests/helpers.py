"""Small helpers shared by the test modules."""

import os

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


class ProcessCache(dict):
    """A dict of fitted estimators that starts empty in every new process.

    mutmut runs the tests once in its own process and then forks a process per
    mutant: a plain module-level cache would hand each mutant the estimators that
    the unmutated code fitted. Every lookup starts with ``key in cache``, which
    empties the cache in a process other than the one that filled it.
    """

    def __init__(self):
        super().__init__()
        self._pid = os.getpid()

    def __contains__(self, key):
        if self._pid != os.getpid():
            self.clear()
            self._pid = os.getpid()
        return super().__contains__(key)
