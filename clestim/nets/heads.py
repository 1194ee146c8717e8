"""Classifier heads whose output grows when new classes arrive.

A head maps embeddings ``(N, D)`` to logits ``(N, n_classes)`` and has
``grow(n_new)``, which appends ``n_new`` freshly initialised outputs while keeping
the rows of the classes already learned.
"""

from __future__ import annotations

import torch
from torch import nn


class GrowingLinear(nn.Module):
    """A linear head ``W h + b`` that grows by copying its old rows.

    Parameters
    ----------
    in_features : int
    n_classes : int, default=0
        A head may start empty and grow with the first task.
    """

    def __init__(self, in_features: int, n_classes: int = 0):
        super().__init__()
        self.in_features = in_features
        self.weight = nn.Parameter(torch.empty(0, in_features))
        self.bias = nn.Parameter(torch.empty(0))
        if n_classes:
            self.grow(n_classes)

    @property
    def n_classes(self) -> int:
        return self.weight.shape[0]

    @torch.no_grad()
    def grow(self, n_new: int) -> None:
        """Append ``n_new`` outputs; the old rows are kept.

        As TSCIL's ``update_head``: the new rows come from a Xavier-uniform
        initialisation of the whole grown matrix, the new biases from ``nn.Linear``'s.
        """
        if n_new <= 0:
            return
        fresh = nn.Linear(self.in_features, self.n_classes + n_new)
        nn.init.xavier_uniform_(fresh.weight)
        fresh = fresh.to(self.weight.device, self.weight.dtype)
        n_old = self.n_classes
        self.weight = nn.Parameter(torch.cat([self.weight.detach(), fresh.weight[n_old:]]))
        self.bias = nn.Parameter(torch.cat([self.bias.detach(), fresh.bias[n_old:]]))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # a snapshot may hold fewer classes than the current head: resize first
        n = state_dict[prefix + "weight"].shape[0]
        if n != self.n_classes:
            self.weight = nn.Parameter(self.weight.new_empty(n, self.in_features))
            self.bias = nn.Parameter(self.bias.new_empty(n))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(h, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, n_classes={self.n_classes}"


class SplitCosineLinear(nn.Module):
    """The split cosine classifier of LUCIR (Hou et al., CVPR 2019).

    ::

        z_c = sigma * <h / ||h||, w_c / ||w_c||>

    with one learnable scale ``sigma`` (initialised to 1) shared by all classes.
    LUCIR splits the weights into the old classes' rows and the new ones; the
    output is the same as one matrix, so the rows are kept in one parameter and the
    head grows like :class:`GrowingLinear`: old rows and ``sigma`` are kept, new rows
    are drawn from ``U(-1/sqrt(D), 1/sqrt(D))`` (TSCIL's ``SplitCosineLinear``).
    TSCIL's code gives the old rows learning rate 0, but its schedulers overwrite
    that, so all rows train there as here.

    Parameters
    ----------
    in_features : int
    n_classes : int, default=0
    """

    def __init__(self, in_features: int, n_classes: int = 0):
        super().__init__()
        self.in_features = in_features
        self.weight = nn.Parameter(torch.empty(0, in_features))
        self.sigma = nn.Parameter(torch.ones(1))
        if n_classes:
            self.grow(n_classes)

    @property
    def n_classes(self) -> int:
        return self.weight.shape[0]

    @torch.no_grad()
    def grow(self, n_new: int) -> None:
        """Append ``n_new`` rows; the old rows and ``sigma`` are kept."""
        if n_new <= 0:
            return
        bound = 1.0 / self.in_features**0.5
        fresh = self.weight.new_empty(n_new, self.in_features).uniform_(-bound, bound)
        self.weight = nn.Parameter(torch.cat([self.weight.detach(), fresh]))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        n = state_dict[prefix + "weight"].shape[0]
        if n != self.n_classes:
            self.weight = nn.Parameter(self.weight.new_empty(n, self.in_features))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        cos = nn.functional.linear(
            nn.functional.normalize(h, dim=1), nn.functional.normalize(self.weight, dim=1)
        )
        return self.sigma * cos

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, n_classes={self.n_classes}"
