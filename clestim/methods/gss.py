"""GSS: experience replay whose memory keeps gradient-diverse samples."""

from __future__ import annotations

import torch

from ..memory import GSSGreedy
from .replay import ER

_GRAD_CHUNK = 64


class GSS(ER):
    """Gradient-based Sample Selection, greedy version (Aljundi et al., NeurIPS 2019).

    Training is :class:`~clestim.ER`'s (``CE(new) + CE(memory)``, random
    retrieval); the memory is updated by :class:`~clestim.memory.GSSGreedy`, which
    prefers samples whose loss gradient (current network, eval mode) is unlike the
    mean gradients of random memory subsets. As in Mammoth and TSCIL, the memory is
    updated after every batch (``memory_update='per_batch'``: the first epoch of
    each task offers each sample once).

    Parameters
    ----------
    n_subsets : int, default=10
        Memory subsets compared with (TSCIL's ``gss_mem_strength``).
    subset_size : int, default=10
        Samples per subset (TSCIL's ``gss_batch_size``).
    memory_update : {'after_task', 'per_batch'}, default='per_batch'
    **params
        The parameters of :class:`~clestim.ER`.
    """

    def __init__(self, *, n_subsets=10, subset_size=10, memory_update="per_batch", **params):
        super().__init__(memory_update=memory_update, **params)
        self.n_subsets = n_subsets
        self.subset_size = subset_size

    def _update_policy(self):
        return GSSGreedy(self._sample_grads, self.n_subsets, self.subset_size, self.batch_size)

    def _sample_grads(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-sample gradients of the loss, flattened, shape (N, n_parameters)."""
        module = self.module_
        was_training = module.training
        module.eval()
        try:
            return torch.cat([
                _per_sample_grads(module, self._criterion, X[i : i + _GRAD_CHUNK],
                                  y[i : i + _GRAD_CHUNK])
                for i in range(0, len(X), _GRAD_CHUNK)
            ])
        finally:
            module.train(was_training)


def _per_sample_grads(module, criterion, X, y) -> torch.Tensor:
    from torch.func import functional_call, grad, vmap

    names = [n for n, p in module.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in module.named_parameters() if p.requires_grad}
    buffers = dict(module.named_buffers())

    def loss(p, x, t):
        return criterion(functional_call(module, (p, buffers), (x[None],)), t[None])

    try:
        grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, X, y)
        return torch.cat([grads[n].reshape(len(X), -1) for n in names], 1)
    except RuntimeError:  # an operation vmap does not support: one sample at a time
        rows = [grad(loss)(params, x, t) for x, t in zip(X, y)]
        return torch.stack([torch.cat([r[n].reshape(-1) for n in names]) for r in rows])
