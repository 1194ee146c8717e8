"""Feature extractors: torch modules that map an input batch to ``(N, out_features)``.

Every backbone exposes ``out_features`` and two methods:

* ``feature_maps(x)``: the last temporal feature maps ``(N, C', L')`` (used by
  feature-map distillation such as DT2W; a flat MLP returns ``(N, D, 1)``);
* ``forward(x)``: the pooled embedding ``(N, out_features)``.

A user's own module works as a backbone when it has ``forward`` returning
``(N, D)``; ``out_features`` is inferred with one dummy forward pass when missing.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .norms import feature_norm
from .video import R2Plus1D, r2plus1d_small


class CNN1D(nn.Module):
    """The 1D-CNN of TSCIL (Qiao et al. 2024, Appendix B).

    Blocks of ``Conv1d(k=5, pad=2) -> ReLU -> Norm -> MaxPool(2) -> Dropout`` with
    64, 128, 256 and 128 channels, then global average pooling over time.

    Parameters
    ----------
    in_channels : int
    norm : {'batch', 'layer'}, default='batch'
    dropout : float, default=0.0
    channels : tuple of int, default=(64, 128, 256, 128)
    kernel_size : int, default=5
    """

    def __init__(
        self,
        in_channels: int,
        norm: str = "batch",
        dropout: float = 0.0,
        channels: tuple[int, ...] = (64, 128, 256, 128),
        kernel_size: int = 5,
    ):
        super().__init__()
        blocks = []
        for c_in, c_out in zip((in_channels, *channels[:-1]), channels):
            blocks += [
                nn.Conv1d(c_in, c_out, kernel_size, padding=kernel_size // 2),
                nn.ReLU(),
                feature_norm(norm, c_out),
                nn.MaxPool1d(2),
                nn.Dropout(dropout),
            ]
        self.blocks = nn.Sequential(*blocks)
        self.out_features = channels[-1]

    def feature_maps(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_maps(x).mean(dim=-1)


class _EncoderLayer(nn.Module):
    """Post-norm Transformer encoder layer whose norm can be LayerNorm or BatchNorm."""

    def __init__(self, d_model, n_heads, dim_feedforward, dropout, norm):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.ff = nn.Sequential(
            nn.Linear(d_model, dim_feedforward),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(dim_feedforward, d_model),
        )
        self.norm1 = feature_norm(norm, d_model)
        self.norm2 = feature_norm(norm, d_model)
        self.drop = nn.Dropout(dropout)

    def _norm(self, norm, h):  # h: (N, L, D); norms work on (N, D, L)
        return norm(h.transpose(1, 2)).transpose(1, 2)

    def forward(self, h):
        h = self._norm(self.norm1, h + self.drop(self.attn(h, h, h, need_weights=False)[0]))
        return self._norm(self.norm2, h + self.drop(self.ff(h)))


class TransformerEncoder(nn.Module):
    """A Transformer encoder for ``(N, C, L)`` series: linear embedding, sinusoidal
    positions, ``n_layers`` encoder layers, mean pooling over time.

    Parameters
    ----------
    in_channels : int
    norm : {'batch', 'layer'}, default='layer'
    dropout : float, default=0.0
    d_model : int, default=128
    n_layers : int, default=3
    n_heads : int, default=4
    dim_feedforward : int, default=256
    """

    def __init__(
        self,
        in_channels: int,
        norm: str = "layer",
        dropout: float = 0.0,
        d_model: int = 128,
        n_layers: int = 3,
        n_heads: int = 4,
        dim_feedforward: int = 256,
    ):
        super().__init__()
        self.embed = nn.Linear(in_channels, d_model)
        self.layers = nn.ModuleList(
            _EncoderLayer(d_model, n_heads, dim_feedforward, dropout, norm)
            for _ in range(n_layers)
        )
        self.d_model = d_model
        self.out_features = d_model

    def _positions(self, length: int, device) -> torch.Tensor:
        pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
        freq = torch.exp(
            torch.arange(0, self.d_model, 2, device=device, dtype=torch.float32)
            * (-math.log(10000.0) / self.d_model)
        )
        pe = torch.zeros(length, self.d_model, device=device)
        pe[:, 0::2] = torch.sin(pos * freq)
        pe[:, 1::2] = torch.cos(pos * freq[: self.d_model // 2])
        return pe

    def feature_maps(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x.transpose(1, 2))
        h = h + self._positions(h.shape[1], h.device)
        for layer in self.layers:
            h = layer(h)
        return h.transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_maps(x).mean(dim=-1)


class MLP(nn.Module):
    """A multilayer perceptron on flattened input: ``Linear -> ReLU -> Norm -> Dropout``.

    Parameters
    ----------
    in_features : int
        Size of the flattened input.
    norm : {'batch', 'layer'} or None, default='batch'
        None: no normalisation (an identity layer; the plain MLPs of Szadkowski et al. 2019).
    dropout : float, default=0.0
    hidden : tuple of int, default=(256, 256)
    """

    def __init__(
        self,
        in_features: int,
        norm: str = "batch",
        dropout: float = 0.0,
        hidden: tuple[int, ...] = (256, 256),
    ):
        super().__init__()
        layers = []
        for d_in, d_out in zip((in_features, *hidden[:-1]), hidden):
            layers += [nn.Linear(d_in, d_out), nn.ReLU(), feature_norm(norm, d_out),
                       nn.Dropout(dropout)]
        self.layers = nn.Sequential(nn.Flatten(), *layers)
        self.out_features = hidden[-1]

    def feature_maps(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)[:, :, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


BACKBONES = {
    "cnn": CNN1D,
    "transformer": TransformerEncoder,
    "mlp": MLP,
    "r2plus1d": R2Plus1D,  # clips (N, C, T, H, W); r2plus1d_18 by default
    "r2plus1d_small": r2plus1d_small,
}
