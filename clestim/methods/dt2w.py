"""DT2W: soft-DTW distillation of temporal feature maps, with LwF and prototypes."""

from __future__ import annotations

import numpy as np
import torch

from .. import _precision
from ..losses import soft_dtw
from .lwf import LwF


class DT2W(LwF):
    """Dynamic Temporal Time Warping distillation (Qiao et al., IJCNN 2023).

    :class:`~clestim.methods.LwF` extended with a soft-DTW distillation of the
    backbone's final feature maps and prototype augmentation for the head (Zhu et
    al. 2021). From the second task, with ``t`` the 0-based task index::

        L_fmap  = mean_x soft_dtw_gamma(phi(x)^T, phi*(x)^T)
        L_lwf   = KL(softmax(f*(x) / T) || softmax(f(x)[:, old] / T))
        L_proto = CE(h(mu_c + r * eps), c),  c ~ U(old classes), eps ~ N(0, I)
        L_reg   = lambda_fmap * L_fmap + lambda_kd * L_lwf + lambda_proto * L_proto
        w       = 1 / (t + 1)
        loss    = w * CE(f(x), y) + (1 - w) * L_reg      (adaptive_weight=True)
        loss    = CE(f(x), y) + L_reg                     (adaptive_weight=False)

    ``phi`` are the final feature maps ``module_.feature_maps`` (``(N, C', L')``, time
    last; compared as sequences of ``L'`` vectors with the squared-Euclidean
    soft-DTW of :func:`clestim.losses.soft_dtw`, unnormalised), ``phi*`` and ``f*``
    the frozen network of the previous task, ``h`` the head. After each task the
    class means ``mu_c`` of the pooled features of its training split are stored;
    the radius is computed once, on the first task::

        r = sqrt( mean_c trace(Cov_c) / D )

    (``Cov_c`` with ``ddof=1``, ``D`` the embedding size). Each step draws
    ``batch_size`` pseudo features.

    As TSCIL's code (Qiao et al. 2024): the feature maps and the logits come from
    two student passes (the LwF term's and the feature maps'), the KD term has no
    ``T**2`` factor, task 1 is plain CE. Deviations: the teacher runs in eval mode
    (TSCIL: train mode), and prototypes use all training samples (TSCIL drops the
    last partial batch).

    With ``precision='bf16'``/``'fp16'`` the feature maps come from autocast forward
    passes but the soft-DTW recursion runs in **float32**: its soft minimum is a
    ``logsumexp`` of accumulated costs, which autocast would leave in the low
    precision, where costs of hundreds lose their units digit.

    Parameters
    ----------
    lambda_fmap : float, default=1e-2
        Weight of the soft-DTW feature-map distillation (``lambda_1``; TSCIL grid
        1e-1, 1e-2 for UCI-HAR, 1e-1, 1e-2, 1e-3 otherwise).
    lambda_kd : float, default=1.0
        Weight of the LwF logit distillation (``lambda_2``, ``lambda_lwf`` in TSCIL;
        grid 1, 10).
    lambda_proto : float, default=10.0
        Weight of the prototype-augmentation loss (``lambda_3``; grid 10, 100).
    gamma : float, default=1.0
        Soft-DTW smoothing.
    temperature : float, default=2.0
    adaptive_weight : bool, default=True
        TSCIL turns it off on DSA.
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier` (patience 5).

    Attributes
    ----------
    prototypes_ : Tensor of shape (n_classes_seen, n_features)
        Class means of the embeddings, rows in encoded-label order.
    radius_ : float
        The augmentation radius ``r``, from the first task.

    Examples
    --------
    >>> from clestim import DT2W
    >>> est = DT2W(lambda_fmap=1e-2, lambda_proto=10, random_state=0)  # doctest: +SKIP
    >>> est.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """

    def __init__(self, *, lambda_fmap=1e-2, lambda_proto=10.0, gamma=1.0, **params):
        super().__init__(**params)
        self.lambda_fmap = lambda_fmap
        self.lambda_proto = lambda_proto
        self.gamma = gamma

    def _check_params(self):
        super()._check_params()
        for name in ("lambda_fmap", "lambda_kd", "lambda_proto"):
            if not float(getattr(self, name)) >= 0:
                raise ValueError(f"{name} must be non-negative, got {getattr(self, name)!r}")
        if not float(self.gamma) > 0:
            raise ValueError(f"gamma must be positive, got {self.gamma!r}")

    def _training_loss(self, X, y):
        loss = super()._training_loss(X, y)  # CE and the LwF term, weighted
        if self.teacher_ is None:
            return loss
        student = self.module_.feature_maps(X).transpose(1, 2)
        with torch.no_grad():
            teacher = self.teacher_.feature_maps(X).transpose(1, 2)
        with _precision.full_precision(self.device):
            fmap = soft_dtw(student.float(), teacher.float(), self.gamma).mean()
        extra = self.lambda_fmap * fmap
        extra = extra + self.lambda_proto * self._prototype_loss()
        if not self.adaptive_weight:
            return loss + extra
        return loss + (1.0 - 1.0 / (self.n_tasks_seen_ + 1)) * extra

    def _prototype_loss(self) -> torch.Tensor:
        """CE of the head on ``batch_size`` noisy prototypes of old classes."""
        protos = self.prototypes_
        labels = torch.randint(len(protos), (self.batch_size,), generator=self._generator)
        noise = torch.randn(self.batch_size, protos.shape[1], generator=self._generator)
        features = protos[labels] + self.radius_ * noise.to(protos.device)
        return self._criterion(self.module_.head(features), labels.to(protos.device))

    def _after_task(self, X, y, groups):
        features = self._eval_forward(self._tensor(X), self.module_.features)
        if not hasattr(self, "prototypes_"):
            self.prototypes_ = features.new_zeros(0, features.shape[1])
        new = [c for c in np.unique(y) if c >= len(self.prototypes_)]
        means = [features[torch.as_tensor(y == c, device=features.device)].mean(0) for c in new]
        if new:
            self.prototypes_ = torch.cat([self.prototypes_, torch.stack(means)])
        if not hasattr(self, "radius_"):
            f = features.double().cpu().numpy()
            traces = [np.trace(np.atleast_2d(np.cov(f[y == c].T))) for c in np.unique(y)]
            self.radius_ = float(np.sqrt(np.nanmean(traces) / f.shape[1]))
