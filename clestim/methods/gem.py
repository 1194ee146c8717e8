"""Gradient Episodic Memory (GEM) and Averaged GEM (A-GEM).

Both keep an episodic memory per task (:class:`~clestim.memory.TaskBalanced`:
``memory_size // n_tasks`` samples of each task, filled after the task) and do
not replay the memory's loss: they change the direction of the new batch's
gradient so that it does not increase the loss on the memory. The projected
gradient is handed back to the lifecycle as a surrogate loss whose gradient is
exactly that vector (and whose value is the batch's loss), so the optimizer,
gradient clipping and early stopping stay the base class's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ..memory import TaskBalanced
from .replay import ER


def gem_project(g: torch.Tensor, G: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    r"""GEM's projection of gradient ``g`` (P,) against task gradients ``G`` (K, P).

    When ``G g >= 0`` the gradient is returned unchanged. Otherwise, as in GEM's
    code (Lopez-Paz and Ranzato 2017, Eq. 10-11, with Mammoth's ``gamma`` lower
    bound on the dual variables),

    .. math:: v^* = \arg\min_{v \ge \gamma} \tfrac12 v^\top G G^\top v + g^\top G^\top v,
              \qquad \tilde g = G^\top v^* + g .

    The dual is solved exactly as the non-negative least-squares problem
    :math:`\min_{w \ge 0} \|G^\top w + (g + \gamma G^\top 1)\|` with
    ``v = gamma + w`` (scipy's ``nnls``), whose optimality conditions give
    :math:`G \tilde g \ge 0`. GEM's code adds ``1e-3 I`` to :math:`GG^\top` for
    quadprog, which lets :math:`G\tilde g` be slightly negative.
    """
    from scipy.optimize import nnls

    if not bool((G @ g < 0).any()):
        return g
    A = G.double().cpu().numpy().T
    b = -(g.double().cpu().numpy() + margin * A.sum(1))
    w, _ = nnls(A, b, maxiter=50 * A.shape[1])
    v = torch.as_tensor(margin + w, dtype=G.dtype, device=G.device)
    return g + G.T @ v


def agem_project(g: torch.Tensor, g_ref: torch.Tensor) -> torch.Tensor:
    r"""A-GEM's projection (Chaudhry et al. 2019, Eq. 11): when
    :math:`g^\top g_{ref} < 0`, :math:`\tilde g = g - \frac{g^\top g_{ref}}
    {g_{ref}^\top g_{ref}} g_{ref}`; otherwise ``g``."""
    dot = g @ g_ref
    return g - (dot / (g_ref @ g_ref)) * g_ref if dot < 0 else g


class _GradientEpisodicMemory(ER, ABC):
    """What GEM and A-GEM share: the per-task memory and the gradient surgery."""

    def _update_policy(self):
        return TaskBalanced()

    def _memory_fields(self, X, y, groups, index=None):
        fields = super()._memory_fields(X, y, groups, index)
        fields["task"] = torch.full_like(y, self.n_tasks_seen_)
        return fields

    def _training_loss(self, X, y):
        loss = self._criterion(self.module_(X), y)
        if len(self.memory_) == 0:
            return loss
        params = [p for p in self.module_.parameters() if p.requires_grad]
        references = torch.stack([_flat_grad(r, params) for r in self._reference_losses()])
        g = self._project(_flat_grad(loss, params), references)
        return _with_gradient(loss, params, g)

    @abstractmethod
    def _reference_losses(self) -> list:
        """The memory losses whose gradients constrain the update."""

    @abstractmethod
    def _project(self, g, references):
        """The update direction from the new gradient ``g`` and the memory's ``references``."""


class GEM(_GradientEpisodicMemory):
    """Gradient Episodic Memory (Lopez-Paz and Ranzato, NeurIPS 2017).

    Each step computes the gradient of the loss on every stored task's memory
    samples (all of them, as Mammoth) and projects the new batch's gradient with
    :func:`gem_project` when it has a negative dot product with any of them.

    Parameters
    ----------
    margin : float, default=0.5
        GEM's ``gamma`` (Mammoth's default), the lower bound of the dual variables.
    **params
        The parameters of :class:`~clestim.ER` (``memory_size`` is the total of the
        per-task memories).
    """

    def __init__(self, *, margin=0.5, **params):
        super().__init__(**params)
        self.margin = margin

    def _reference_losses(self):
        X, y, task = self.memory_["X"], self.memory_["y"], self.memory_["task"]
        return [self._criterion(self.module_(X[task == t]), y[task == t])
                for t in torch.unique(task).tolist()]

    def _project(self, g, references):
        return gem_project(g, references, float(self.margin))


class AGEM(_GradientEpisodicMemory):
    """Averaged GEM (Chaudhry et al., ICLR 2019).

    One reference gradient per step, from a random memory batch of
    ``replay_batch_size`` samples; the new batch's gradient is projected with
    :func:`agem_project` when it points against it.

    Parameters
    ----------
    **params
        The parameters of :class:`~clestim.ER`.
    """

    def _reference_losses(self):
        memory = self.memory_.sample(self.replay_batch_size, self._generator)
        return [self._criterion(self.module_(memory["X"]), memory["y"])]

    def _project(self, g, references):
        return agem_project(g, references[0])


def _flat_grad(loss: torch.Tensor, params: list) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([
        (torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)
    ])


def _with_gradient(loss: torch.Tensor, params: list, flat: torch.Tensor) -> torch.Tensor:
    """A tensor with the value of ``loss`` whose gradient w.r.t. ``params`` is ``flat``."""
    flat = flat.detach()
    sizes = [p.numel() for p in params]
    surrogate = sum((p * g.view_as(p)).sum() for p, g in zip(params, flat.split(sizes)))
    return loss.detach() + surrogate - surrogate.detach()


__all__ = ["AGEM", "GEM", "agem_project", "gem_project"]
