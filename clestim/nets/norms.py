"""Normalisation layers for (N, C, L) feature maps and the non-trainable input norm.

TSCIL (Qiao et al. 2024, Sec. 5.1) normalises each input series inside the model,
with no affine parameters, instead of z-scoring the whole data set (which a
continual learner cannot see in advance):

* ``'layer'``: ``LayerNorm(C)`` over the channels at every time step;
* ``'instance'``: ``InstanceNorm1d(C)``, per channel over time.
"""

from __future__ import annotations

import torch
from torch import nn

NORMS = ("batch", "layer", None)
INPUT_NORMS = ("layer", "instance", None)


class ChannelLayerNorm(nn.LayerNorm):
    """``LayerNorm`` over the channel axis of an ``(N, C, L)`` tensor, at each time step."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            return super().forward(x)
        return super().forward(x.transpose(1, -1)).transpose(1, -1)


def feature_norm(kind: str, n_channels: int) -> nn.Module:
    """The trainable normalisation of a backbone: ``'batch'``, ``'layer'`` or None (none)."""
    if kind is None:
        return nn.Identity()
    if kind == "batch":
        return nn.BatchNorm1d(n_channels)
    if kind == "layer":
        return ChannelLayerNorm(n_channels)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")


class InputNorm(nn.Module):
    """Non-trainable per-sample input normalisation (``'layer'``, ``'instance'`` or None).

    Parameters
    ----------
    kind : {'layer', 'instance'} or None
        ``'layer'`` normalises the channels at each time step (or the features of a
        flat vector); ``'instance'`` normalises each channel over time. None is the
        identity.
    n_channels : int
        Number of channels (features for flat input).
    """

    def __init__(self, kind: str | None, n_channels: int):
        super().__init__()
        if kind not in INPUT_NORMS:
            raise ValueError(f"input_norm must be one of {INPUT_NORMS}, got {kind!r}")
        self.kind = kind
        if kind == "layer":
            self.norm = ChannelLayerNorm(n_channels, elementwise_affine=False)
        elif kind == "instance":
            self.norm = nn.InstanceNorm1d(n_channels, affine=False, track_running_stats=False)
        else:
            self.norm = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "instance" and x.dim() != 3:
            raise ValueError(
                "input_norm='instance' needs (n_samples, n_channels, n_timepoints) input, "
                f"got a tensor of shape {tuple(x.shape)}"
            )
        return self.norm(x)
