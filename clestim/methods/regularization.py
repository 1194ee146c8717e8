"""Parameter regularisation: MAS and EWC share one quadratic penalty.

After each task a method stores *anchors* ``theta*`` (the best weights) and
*importances* ``Omega`` of every parameter; while learning later tasks the loss is::

    loss = CE(f(x), y) + lambda_reg * sum_terms sum_k Omega_k * (theta_k - theta*_k)^2

:class:`QuadraticPenalty` holds the terms and adds the penalty; a method says only
how the importance of a task is computed (:meth:`~QuadraticPenalty._importance`) and
how it joins the stored terms (:meth:`~QuadraticPenalty._merge`).

Head growth: a parameter that grew since a term was stored (the rows of a
:class:`~clestim.nets.GrowingLinear` head) is penalised on its first rows only, the
ones the anchor has; the rows of new classes are free. Parameters that did not exist
when a term was stored are not penalised. When importances of different widths are
merged, the older one is zero-padded (a row has no importance before its class
exists).
"""

from __future__ import annotations

import numbers
from abc import ABCMeta, abstractmethod

import torch
from torch.nn import functional as F

from ..base import ContinualClassifier

EWC_MODES = ("separate", "online")
_IMPORTANCE_BATCH = 64


class QuadraticPenalty(ContinualClassifier, metaclass=ABCMeta):
    """Base class of methods that anchor parameters with a weighted quadratic penalty.

    ``loss = CE + lambda_reg * sum_terms sum_k Omega_k (theta_k - theta*_k)^2``, where
    each stored term is a pair ``(theta*, Omega)`` of dicts keyed by parameter name.
    The penalty starts with the second task. Subclasses implement
    :meth:`_importance` and :meth:`_merge`.

    Parameters
    ----------
    lambda_reg : float, default=1e3
        Weight of the penalty.
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier` (patience 5, as
        TSCIL's regularisation methods).

    Attributes
    ----------
    penalty_terms_ : list of (dict, dict)
        The stored ``(anchors, importances)`` pairs, tensors keyed by parameter name.
    """

    def __init__(self, *, lambda_reg=1e3, **params):
        super().__init__(**params)
        self.lambda_reg = lambda_reg

    def _check_params(self):
        super()._check_params()
        if not isinstance(self.lambda_reg, numbers.Real) or self.lambda_reg < 0:
            raise ValueError(f"lambda_reg must be a non-negative number, got {self.lambda_reg!r}")

    # -- what subclasses define ---------------------------------------------------
    @abstractmethod
    def _importance(self, X: torch.Tensor, y: torch.Tensor) -> dict:
        """The importance of every trainable parameter on one task's training data."""

    @abstractmethod
    def _merge(self, terms: list, anchors: dict, importance: dict) -> list:
        """The stored terms after a task with ``anchors`` and ``importance``."""

    # -- the shared mechanism ---------------------------------------------------------
    def penalty(self) -> torch.Tensor:
        """``sum_terms sum_k Omega_k (theta_k - theta*_k)^2`` at the current weights."""
        total = torch.zeros((), device=self.device)
        params = dict(self.module_.named_parameters())
        for anchors, importance in getattr(self, "penalty_terms_", []):
            for name, anchor in anchors.items():
                p = params.get(name)
                if p is None or not _grown_from(p, anchor):
                    continue
                if p.shape != anchor.shape:  # a grown head: the old rows only
                    p = p[: anchor.shape[0]]
                total = total + (importance[name] * (p - anchor).pow(2)).sum()
        return total

    def _training_loss(self, X, y):
        loss = super()._training_loss(X, y)
        if getattr(self, "penalty_terms_", None):
            loss = loss + self.lambda_reg * self.penalty()
        return loss

    def _after_task(self, X, y, groups):
        X, y = self._tensor(X), self._tensor(y, torch.long)
        importance = self._importance(X, y)
        anchors = {
            name: p.detach().clone()
            for name, p in self.module_.named_parameters()
            if p.requires_grad
        }
        self.penalty_terms_ = self._merge(getattr(self, "penalty_terms_", []), anchors, importance)

    def _batches(self, X: torch.Tensor, y: torch.Tensor, shuffle: bool = True):
        """``(X, y)`` mini-batches of ``batch_size`` in an order from ``random_state``."""
        order = (
            torch.randperm(len(y), generator=self._generator).to(y.device)
            if shuffle
            else torch.arange(len(y), device=y.device)
        )
        for start in range(0, len(y), self.batch_size):
            idx = order[start : start + self.batch_size]
            yield X[idx], y[idx]

    def _trainable(self) -> dict:
        return {n: p for n, p in self.module_.named_parameters() if p.requires_grad}


class MAS(QuadraticPenalty):
    """Memory Aware Synapses (Aljundi et al., ECCV 2018), as in TSCIL (Qiao et al. 2024).

    Importance is the sensitivity of the output's L2 norm to each parameter,
    averaged over the task's training batches::

        Omega^t_k = mean_batches | d/d theta_k  mean_{x in batch} ||f(x)||_2 |
        Omega_k   = alpha * Omega_k + (1 - alpha) * Omega^t_k
        loss      = CE + lambda_reg * sum_k Omega_k (theta_k - theta*_k)^2

    ``f(x)`` are the logits over all classes seen so far and ``theta*`` the weights
    after the last task. As TSCIL's code: the *unsquared* L2 norm (Aljundi et al.
    use its square), the gradient of the batch mean (not a per-sample mean of
    absolute gradients) over mini-batches of ``batch_size``, and one moving-average
    term with ``alpha = 0.8`` (after the first task ``Omega = 0.2 * Omega^1``).

    Deviations from TSCIL's code: importance is computed in **eval mode** (no
    dropout, BatchNorm running statistics untouched; TSCIL uses train mode), and the
    head rows of classes learned in the last task enter the average as
    ``(1 - alpha) * Omega^t`` like every other parameter (TSCIL copies their
    unscaled ``Omega^t``). Their effect on TSCIL's benchmarks is measured by
    ``benchmarks/mas_importance_mode.py`` (``benchmarks/README.md``).

    The importances are computed in **float32** whatever ``precision`` (after the
    task's training, outside autocast): averaged absolute gradients of small
    magnitude would lose most of their digits in bfloat16.

    Parameters
    ----------
    lambda_reg : float, default=1e3
        Penalty weight (TSCIL grid: 1e2, 1e3, 1e4).
    alpha : float, default=0.8
        Weight of the old importance in the moving average.
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.

    Attributes
    ----------
    penalty_terms_ : list of one (dict, dict)
        The anchors and the moving-average importances.

    Examples
    --------
    >>> from clestim import MAS
    >>> est = MAS(lambda_reg=1e3, max_epochs=5, random_state=0)  # doctest: +SKIP
    >>> est.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """

    def __init__(self, *, alpha=0.8, **params):
        super().__init__(**params)
        self.alpha = alpha

    def _check_params(self):
        super()._check_params()
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha!r}")

    def _importance(self, X, y):
        params = self._trainable()
        importance = {n: torch.zeros_like(p) for n, p in params.items()}
        was_training = self.module_.training
        self.module_.eval()
        n_batches = 0
        for xb, _ in self._batches(X, y):
            self.module_.zero_grad()
            self.module_(xb).norm(p=2, dim=1).mean().backward()
            for n, p in params.items():
                if p.grad is not None:
                    importance[n] += p.grad.abs()
            n_batches += 1
        self.module_.zero_grad()
        self.module_.train(was_training)
        return {n: imp / n_batches for n, imp in importance.items()}

    def _merge(self, terms, anchors, importance):
        old = terms[0][1] if terms else {}
        merged = {
            n: self.alpha * _carried(old, n, imp) + (1.0 - self.alpha) * imp
            for n, imp in importance.items()
        }
        return [(anchors, merged)]


class EWC(QuadraticPenalty):
    """Elastic Weight Consolidation (Kirkpatrick et al., PNAS 2017).

    Importance is the diagonal empirical Fisher information of the task, the mean
    over training samples of squared per-sample gradients of the cross-entropy::

        F^t_k = (1/N) sum_i (d CE(f(x_i), y_i) / d theta_k)^2

    rescaled to [0, 1] by its minimum and maximum over all parameters (as TSCIL's
    code, so that ``lambda_reg`` has the same grid as MAS). Two modes:

    ``'separate'``
        One term per past task, each with its own anchors:
        ``loss = CE + lambda_reg * sum_{s<t} sum_k F^s_k (theta_k - theta*^s_k)^2``.
    ``'online'`` (Schwarz et al. 2018)
        One term: ``F = decay * F + F^t`` with the latest anchors.

    Deviations from TSCIL's code (which follows Avalanche): the Fisher is the
    per-sample empirical Fisher (TSCIL sums squared *batch* gradients), computed
    with ``torch.func`` in eval mode. EWC is in TSCIL's code but not in its tables.

    The Fisher is computed in **float32** whatever ``precision`` (after the task's
    training, outside autocast): squared per-sample gradients underflow in float16
    and lose their small values to rounding in bfloat16.

    Parameters
    ----------
    lambda_reg : float, default=1e3
        Penalty weight (TSCIL grid: 1e2, 1e3, 1e4).
    mode : {'separate', 'online'}, default='separate'
    decay : float, default=0.5
        Decay of the accumulated Fisher in ``'online'`` mode.
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.

    Attributes
    ----------
    penalty_terms_ : list of (dict, dict)
        One ``(anchors, fisher)`` pair per task (``'separate'``) or one in total.

    Examples
    --------
    >>> from clestim import EWC
    >>> est = EWC(mode="online", decay=0.5, max_epochs=5, random_state=0)  # doctest: +SKIP
    >>> est.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """

    def __init__(self, *, mode="separate", decay=0.5, **params):
        super().__init__(**params)
        self.mode = mode
        self.decay = decay

    def _check_params(self):
        super()._check_params()
        if self.mode not in EWC_MODES:
            raise ValueError(f"mode must be one of {EWC_MODES}, got {self.mode!r}")
        if not 0.0 <= self.decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {self.decay!r}")

    def _importance(self, X, y):
        params = self._trainable()
        fisher = {n: torch.zeros_like(p) for n, p in params.items()}
        was_training = self.module_.training
        self.module_.eval()
        for xb, yb in self._batches(X, y, shuffle=False):
            for n, g in _per_sample_grads(self.module_, params, xb, yb).items():
                fisher[n] += g.pow(2).sum(0)
        self.module_.train(was_training)
        fisher = {n: f / len(y) for n, f in fisher.items()}
        low = min(f.min() for f in fisher.values())
        high = max(f.max() for f in fisher.values())
        return {n: (f - low) / (high - low + 1e-32) for n, f in fisher.items()}

    def _merge(self, terms, anchors, importance):
        if self.mode == "separate":
            return [*terms, (anchors, importance)]
        old = terms[0][1] if terms else {}
        merged = {n: self.decay * _carried(old, n, imp) + imp for n, imp in importance.items()}
        return [(anchors, merged)]


def _per_sample_grads(module, params: dict, X: torch.Tensor, y: torch.Tensor) -> dict:
    """Gradients of each sample's cross-entropy, stacked: ``{name: (n, *shape)}``.

    Batched with ``torch.func.vmap``; for a module vmap cannot batch (vmap raises a
    ``RuntimeError``) the same gradients come from one backward pass per sample.
    """
    try:
        return _vmapped_grads(module, params, X, y)
    except RuntimeError:
        return _looped_grads(module, params, X, y)


def _vmapped_grads(module, params: dict, X: torch.Tensor, y: torch.Tensor) -> dict:
    from torch.func import functional_call, grad, vmap

    def loss(p, x, t):
        return F.cross_entropy(functional_call(module, p, (x[None],)), t[None])

    detached = {n: p.detach() for n, p in params.items()}
    return vmap(grad(loss), in_dims=(None, 0, 0))(detached, X, y)


def _looped_grads(module, params: dict, X: torch.Tensor, y: torch.Tensor) -> dict:
    grads = {n: [] for n in params}
    for x, t in zip(X, y):
        module.zero_grad()
        F.cross_entropy(module(x[None]), t[None]).backward()
        for n, p in params.items():
            grads[n].append(torch.zeros_like(p) if p.grad is None else p.grad.clone())
    module.zero_grad()
    return {n: torch.stack(g) for n, g in grads.items()}


def _grown_from(p: torch.Tensor, anchor: torch.Tensor) -> bool:
    """Whether ``p`` has ``anchor``'s shape, possibly with rows appended."""
    if p.dim() != anchor.dim() or p.dim() == 0:
        return p.shape == anchor.shape
    return p.shape[1:] == anchor.shape[1:] and p.shape[0] >= anchor.shape[0]


def _carried(old: dict, name: str, new: torch.Tensor) -> torch.Tensor:
    """The stored importance ``old[name]`` zero-padded to ``new``'s rows (zeros if none)."""
    prev = old.get(name)
    if prev is None or not _grown_from(new, prev):
        return torch.zeros_like(new)
    if prev.shape == new.shape:
        return prev
    return F.pad(prev, [0, 0] * (prev.dim() - 1) + [0, new.shape[0] - prev.shape[0]])
