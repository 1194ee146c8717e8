"""The network a continual estimator trains: input norm, backbone, growing head."""

from __future__ import annotations

import torch
from torch import nn

from .heads import GrowingLinear


class ContinualNetwork(nn.Module):
    """``head(backbone(input_norm(x)))``.

    Parameters
    ----------
    backbone : nn.Module
        Maps the (normalised) input to ``(N, backbone.out_features)``.
    input_norm : InputNorm
    head : nn.Module, optional
        Defaults to an empty :class:`GrowingLinear`.
    """

    def __init__(self, backbone: nn.Module, input_norm: nn.Module, head: nn.Module | None = None):
        super().__init__()
        self.input_norm = input_norm
        self.backbone = backbone
        self.head = head if head is not None else GrowingLinear(backbone.out_features)

    @property
    def n_classes(self) -> int:
        return self.head.n_classes

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The backbone's embedding ``(N, D)``."""
        return self.backbone(self.input_norm(x))

    def feature_maps(self, x: torch.Tensor) -> torch.Tensor:
        """The backbone's last feature maps ``(N, C', L')``."""
        return self.backbone.feature_maps(self.input_norm(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
