"""Classifier heads whose output grows when new classes arrive.

A head maps embeddings ``(N, D)`` to logits ``(N, n_classes)`` and has
``grow(n_new)``, which appends ``n_new`` freshly initialised outputs while keeping
the rows of the classes already learned.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import torch
from torch import nn


class GrowingHead(nn.Module, metaclass=ABCMeta):
    """A head whose per-class parameters (rows) grow with new classes.

    Subclasses name their per-class parameters in ``row_params`` and implement
    :meth:`new_rows` (the initial values of ``n_new`` rows per parameter) and
    ``forward``. Growing keeps the old rows; loading a state dict with fewer rows
    (a snapshot taken before later classes arrived) shrinks the head first.
    """

    row_params: tuple = ("weight",)

    def __init__(self, in_features: int, n_classes: int = 0):
        super().__init__()
        self.in_features = in_features
        self.weight = nn.Parameter(torch.empty(0, in_features))

    @property
    def n_classes(self) -> int:
        return self.weight.shape[0]

    @abstractmethod
    def new_rows(self, n_new: int) -> dict:
        """``{name: tensor}`` of the fresh rows of every per-class parameter."""

    @torch.no_grad()
    def grow(self, n_new: int) -> None:
        """Append ``n_new`` outputs; the old rows are kept."""
        if n_new <= 0:
            return
        fresh = self.new_rows(n_new)
        for name in self.row_params:
            old = getattr(self, name)
            rows = fresh[name].to(old.device, old.dtype)
            setattr(self, name, nn.Parameter(torch.cat([old.detach(), rows])))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        n = state_dict[prefix + "weight"].shape[0]
        if n != self.n_classes:
            for name in self.row_params:
                old = getattr(self, name)
                setattr(self, name, nn.Parameter(old.new_empty(n, *old.shape[1:])))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, n_classes={self.n_classes}"


class GrowingLinear(GrowingHead):
    """A linear head ``W h + b`` that grows by copying its old rows.

    New rows are initialised as TSCIL's ``update_head`` does: from a Xavier-uniform
    initialisation of the whole grown matrix, with ``nn.Linear``'s bias init.

    Parameters
    ----------
    in_features : int
    n_classes : int, default=0
        A head may start empty and grow with the first task.
    """

    row_params = ("weight", "bias")

    def __init__(self, in_features: int, n_classes: int = 0):
        super().__init__(in_features)
        self.bias = nn.Parameter(torch.empty(0))
        self.grow(n_classes)

    def new_rows(self, n_new: int) -> dict:
        fresh = nn.Linear(self.in_features, self.n_classes + n_new)
        nn.init.xavier_uniform_(fresh.weight)
        return {"weight": fresh.weight[self.n_classes :], "bias": fresh.bias[self.n_classes :]}

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(h, self.weight, self.bias)


class SplitCosineLinear(GrowingHead):
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
        super().__init__(in_features)
        self.sigma = nn.Parameter(torch.ones(1))
        self.grow(n_classes)

    def new_rows(self, n_new: int) -> dict:
        bound = 1.0 / self.in_features**0.5
        return {"weight": torch.empty(n_new, self.in_features).uniform_(-bound, bound)}

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        cos = nn.functional.linear(
            nn.functional.normalize(h, dim=1), nn.functional.normalize(self.weight, dim=1)
        )
        return self.sigma * cos
