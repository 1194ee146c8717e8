"""Learning without Forgetting."""

import torch

from ..base import ContinualClassifier
from ..losses import distillation_loss


class LwF(ContinualClassifier):
    """Learning without Forgetting (Li & Hoiem, ECCV 2016 / TPAMI 2017).

    Before each task the current network is frozen as a teacher. Training adds a
    distillation term on the old classes' logits::

        KD   = KL(softmax(f_old(x) / T) || softmax(f(x)[:, old] / T))
        w    = 1 / (t + 1)
        loss = w * CE(f(x), y) + (1 - w) * lambda_kd * KD

    with ``t`` the 0-based task index (TSCIL's adaptive weighting). Without adaptive
    weighting the loss is ``CE + lambda_kd * KD``. The KD term has no ``T**2``
    factor, as in TSCIL's code; unlike that code the teacher runs in eval mode.

    Parameters
    ----------
    lambda_kd : float, default=1.0
        Weight of the distillation term (TSCIL grid: 1, 10, 1e2, 1e3, 1e4).
    temperature : float, default=2.0
    adaptive_weight : bool, default=True
        Weight CE by ``1/(t+1)`` and KD by ``1 - 1/(t+1)`` (TSCIL turns it off on DSA).
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.
    """

    def __init__(self, *, lambda_kd=1.0, temperature=2.0, adaptive_weight=True, **params):
        super().__init__(**params)
        self.lambda_kd = lambda_kd
        self.temperature = temperature
        self.adaptive_weight = adaptive_weight

    def _before_task(self, X, y, groups):
        self.teacher_ = self._frozen_copy() if self.n_tasks_seen_ else None

    def _training_loss(self, X, y):
        logits = self.module_(X)
        ce = self._criterion(logits, y)
        if self.teacher_ is None:
            return ce
        with torch.no_grad():
            old = self.teacher_(X)
        kd = self.lambda_kd * distillation_loss(logits[:, : old.shape[1]], old, self.temperature)
        if not self.adaptive_weight:
            return ce + kd
        w = 1.0 / (self.n_tasks_seen_ + 1)
        return w * ce + (1.0 - w) * kd
