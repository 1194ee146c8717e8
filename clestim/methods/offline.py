"""Offline joint training: the upper bound."""

import numpy as np

from ..base import ContinualClassifier


class Offline(ContinualClassifier):
    """Joint training on everything seen so far: the upper bound.

    Every task trains on the union of all tasks' training splits and validates on
    the union of their validation splits, continuing from the current weights.
    After a whole stream it matches TSCIL's Offline baseline, a single model trained
    on all the data (Qiao et al. 2024). It keeps every sample it has seen.

    Parameters
    ----------
    patience : int, default=20
        TSCIL's patience for Offline.
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.
    """

    def __init__(self, *, patience=20, **params):
        super().__init__(patience=patience, **params)

    def _task_data(self, train, valid):
        self.seen_train_ = _union(getattr(self, "seen_train_", None), train)
        self.seen_valid_ = _union(getattr(self, "seen_valid_", None), valid)
        return self.seen_train_, self.seen_valid_


def _union(old, new):
    if old is None:
        return new
    groups = None if old[2] is None or new[2] is None else np.concatenate([old[2], new[2]])
    return np.concatenate([old[0], new[0]]), np.concatenate([old[1], new[1]]), groups
