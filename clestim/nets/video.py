"""R(2+1)D backbones for clips ``(N, C, T, H, W)`` and the clip training protocol.

R(2+1)D (Tran et al., CVPR 2018) factorises each 3x3x3 convolution into a 1x3x3
spatial and a 3x1x1 temporal convolution with a BatchNorm and ReLU between them.
The video continual-learning paper (``video-action-recognition-cl``) trains it from
scratch. :class:`R2Plus1D` with its defaults is torchvision's ``r2plus1d_18``
layout (stem 45 -> 64 channels, four stages of two basic blocks with 64, 128,
256 and 512 channels, the same ``midplanes`` rule, 31.3 M parameters without the
classifier), written here with the same module names so a torchvision
``state_dict`` without ``fc`` loads into it. torchvision itself is not used: its
PyPI wheel is built against CUDA torch and does not import with the CPU torch
this project pins.

``'r2plus1d_small'`` is the same design with two stages of one block and 16/32
channels: it trains in minutes on a CPU.

Both take the clip protocol of the paper (:class:`ClipAugment`): in training mode
a random temporal crop of ``clip_length`` frames, a random ``crop_size`` spatial
crop and a horizontal flip; in eval mode the centre crop of the chosen window.
"""

from __future__ import annotations

import torch
from torch import nn


def _norm3d(kind: str, n_channels: int) -> nn.Module:
    """``'batch'``: BatchNorm3d (the paper's); ``'layer'``: GroupNorm with one group."""
    if kind == "batch":
        return nn.BatchNorm3d(n_channels)
    if kind == "layer":
        return nn.GroupNorm(1, n_channels)
    raise ValueError(f"norm must be one of ('batch', 'layer'), got {kind!r}")


class Conv2Plus1D(nn.Sequential):
    """``Conv(1x3x3) -> Norm -> ReLU -> Conv(3x1x1)``: one factorised 3x3x3 convolution."""

    def __init__(self, c_in: int, c_out: int, c_mid: int, stride: int = 1, norm: str = "batch"):
        super().__init__(
            nn.Conv3d(c_in, c_mid, (1, 3, 3), (1, stride, stride), (0, 1, 1), bias=False),
            _norm3d(norm, c_mid),
            nn.ReLU(inplace=True),
            nn.Conv3d(c_mid, c_out, (3, 1, 1), (stride, 1, 1), (1, 0, 0), bias=False),
        )


class BasicBlock(nn.Module):
    """A residual block of two :class:`Conv2Plus1D` (torchvision's ``BasicBlock``)."""

    def __init__(self, c_in: int, c_out: int, stride: int, norm: str):
        super().__init__()
        # as torchvision: both (2+1)D pairs use the width that gives the first the
        # parameters of a full 3x3x3 convolution
        mid = (c_in * c_out * 27) // (c_in * 9 + 3 * c_out)
        self.conv1 = nn.Sequential(
            Conv2Plus1D(c_in, c_out, mid, stride, norm), _norm3d(norm, c_out), nn.ReLU(inplace=True)
        )
        self.conv2 = nn.Sequential(Conv2Plus1D(c_out, c_out, mid, 1, norm), _norm3d(norm, c_out))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv3d(c_in, c_out, 1, stride=stride, bias=False), _norm3d(norm, c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(self.conv2(self.conv1(x)) + identity)


class ClipAugment(nn.Module):
    """The clip protocol of the paper, as the first layer of a video backbone.

    Training mode, per sample: a random window of ``clip_length`` frames, a random
    ``crop_size`` x ``crop_size`` crop and (``flip``) a horizontal flip with
    probability 1/2, drawn from torch's global RNG, which the estimator seeds from
    its ``random_state`` for every task. Eval mode: the centre crop of window
    ``window`` (None: the centre window; see :func:`clestim.video.windowed_predict_proba`).
    ``None`` for ``clip_length`` or ``crop_size`` keeps that axis whole.
    """

    def __init__(self, clip_length: int | None = None, crop_size: int | None = None,
                 flip: bool = False):
        super().__init__()
        for name, v in (("clip_length", clip_length), ("crop_size", crop_size)):
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive int or None, got {v!r}")
        self.clip_length, self.crop_size, self.flip = clip_length, crop_size, bool(flip)
        self.window = None

    def n_windows(self, n_frames: int) -> int:
        """Number of non-overlapping windows of ``clip_length`` in ``n_frames`` frames."""
        return 1 if self.clip_length is None else max(n_frames // self.clip_length, 1)

    def _sizes(self, x: torch.Tensor) -> tuple[int, int, int]:
        T, H, W = x.shape[2:]
        length = T if self.clip_length is None else self.clip_length
        crop = None if self.crop_size is None else self.crop_size
        if length > T or (crop is not None and crop > min(H, W)):
            raise ValueError(
                f"clips of shape (T, H, W)={(T, H, W)} are smaller than clip_length="
                f"{self.clip_length} / crop_size={self.crop_size}"
            )
        return length, (H if crop is None else crop), (W if crop is None else crop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length, ch, cw = self._sizes(x)
        T, H, W = x.shape[2:]
        if not self.training:
            w = self.window
            t0 = (T - length) // 2 if w is None else min(w * length, T - length)
            return x[:, :, t0 : t0 + length, (H - ch) // 2 : (H - ch) // 2 + ch,
                     (W - cw) // 2 : (W - cw) // 2 + cw]
        n = len(x)
        t0 = torch.randint(T - length + 1, (n,)).tolist()
        h0 = torch.randint(H - ch + 1, (n,)).tolist()
        w0 = torch.randint(W - cw + 1, (n,)).tolist()
        flip = (torch.rand(n) < 0.5).tolist() if self.flip else [False] * n
        out = []
        for i in range(n):
            clip = x[i, :, t0[i] : t0[i] + length, h0[i] : h0[i] + ch, w0[i] : w0[i] + cw]
            out.append(clip.flip(-1) if flip[i] else clip)
        return torch.stack(out)


class R2Plus1D(nn.Module):
    """An R(2+1)D-ResNet for clips ``(N, C, T, H, W)``; defaults: ``r2plus1d_18``.

    Parameters
    ----------
    in_channels : int
        Colour channels of the clips.
    norm : {'batch', 'layer'}, default='batch'
        BatchNorm3d (as the paper), or GroupNorm with one group.
    dropout : float, default=0.0
        Dropout on the pooled embedding.
    channels : tuple of int, default=(64, 128, 256, 512)
        Channels of each stage (one stride-2 stage after the first).
    blocks : tuple of int, default=(2, 2, 2, 2)
        Basic blocks per stage.
    stem_channels : tuple of int, default=(45, 64)
        Channels after the stem's 1x7x7 (stride 1x2x2) and 3x1x1 convolutions.
    clip_length, crop_size, flip
        The clip protocol (:class:`ClipAugment`); default: the whole clip, unflipped.
    """

    def __init__(
        self,
        in_channels: int,
        norm: str = "batch",
        dropout: float = 0.0,
        channels: tuple[int, ...] = (64, 128, 256, 512),
        blocks: tuple[int, ...] = (2, 2, 2, 2),
        stem_channels: tuple[int, int] = (45, 64),
        clip_length: int | None = None,
        crop_size: int | None = None,
        flip: bool = False,
    ):
        super().__init__()
        if len(channels) != len(blocks) or not channels:
            raise ValueError(f"channels {channels} and blocks {blocks} need the same length")
        self.clip = ClipAugment(clip_length, crop_size, flip)
        s0, s1 = stem_channels
        self.stem = nn.Sequential(
            nn.Conv3d(in_channels, s0, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False),
            _norm3d(norm, s0),
            nn.ReLU(inplace=True),
            nn.Conv3d(s0, s1, (3, 1, 1), 1, (1, 0, 0), bias=False),
            _norm3d(norm, s1),
            nn.ReLU(inplace=True),
        )
        c_in = s1
        for i, (c_out, n_blocks) in enumerate(zip(channels, blocks), start=1):
            layer = []
            for b in range(n_blocks):
                stride = 2 if (i > 1 and b == 0) else 1
                layer.append(BasicBlock(c_in, c_out, stride, norm))
                c_in = c_out
            self.add_module(f"layer{i}", nn.Sequential(*layer))
        self.n_stages = len(channels)
        self.drop = nn.Dropout(dropout)
        self.out_features = channels[-1]
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv3d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _maps(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 5:
            raise ValueError(
                f"R(2+1)D needs clips (n_samples, channels, frames, height, width), got a "
                f"tensor of shape {tuple(x.shape)}"
            )
        h = self.stem(self.clip(x))
        for i in range(1, self.n_stages + 1):
            h = getattr(self, f"layer{i}")(h)
        return h

    def feature_maps(self, x: torch.Tensor) -> torch.Tensor:
        """The last maps pooled over space: ``(N, C', T')``."""
        return self._maps(x).mean(dim=(3, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self._maps(x).mean(dim=(2, 3, 4)))


def r2plus1d_small(in_channels: int, norm: str = "batch", dropout: float = 0.0, **params):
    """A small R(2+1)D for CPU: stages of (16, 32) channels, one block each, stem (8, 16).

    Any :class:`R2Plus1D` parameter may be overridden through ``params``.
    """
    params = {"channels": (16, 32), "blocks": (1, 1), "stem_channels": (8, 16), **params}
    return R2Plus1D(in_channels, norm=norm, dropout=dropout, **params)
