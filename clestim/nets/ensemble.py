"""Torch modules of the ensemble learners ENS, ENSGEN and ENSGENDEL.

Szadkowski, Drchal and Faigl, "Basic Evaluation Scenarios for Incrementally
Trained Classifiers", ICANN 2019, Sect. 3: one binary MLP ``f_l`` per label and,
for the generative variants, one autoencoder ``d_l o e_l`` per label.
"""

from __future__ import annotations

import torch
from torch import nn

from .backbones import MLP
from .heads import GrowingLinear
from .network import ContinualNetwork
from .norms import InputNorm


def _relu_stack(sizes) -> list:
    """``Linear -> ReLU`` for every consecutive pair of ``sizes`` but the last,
    which is a bare ``Linear``."""
    layers = []
    for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(d_in, d_out))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return layers


class Autoencoder(nn.Module):
    """``d(e(x))`` with a sigmoid latent space ``Z = [0, 1]^N``.

    The encoder is ``in -> hidden... -> latent`` with ReLU hidden layers and a
    sigmoid output; the decoder mirrors it (``latent -> reversed(hidden) -> in``,
    ReLU hidden layers, linear output). The paper's: 784-500-200-8 and 8-200-500-784.

    Parameters
    ----------
    in_features : int
    hidden : tuple of int, default=(500, 200)
    latent : int, default=8
    """

    def __init__(self, in_features: int, hidden=(500, 200), latent: int = 8):
        super().__init__()
        self.latent = latent
        self.encoder = nn.Sequential(*_relu_stack((in_features, *hidden, latent)), nn.Sigmoid())
        self.decoder = nn.Sequential(*_relu_stack((latent, *reversed(tuple(hidden)), in_features)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    @staticmethod
    def loss(x: torch.Tensor, reconstruction: torch.Tensor, reduction="mean") -> torch.Tensor:
        """Squared reconstruction error summed over the features, per sample (or its mean)."""
        per_sample = ((reconstruction - x) ** 2).sum(1)
        return per_sample.mean() if reduction == "mean" else per_sample


class UnitEnsemble(nn.Module):
    """One binary unit per label, and optionally one autoencoder per label.

    The ensemble grows like a classifier head (``head.grow(n)``, ``n_classes``):
    ``grow(n)`` appends ``n`` units. ``forward(x)`` gives the units' logits,
    shape ``(N, n_classes)``; ``sigmoid`` of column ``l`` is ``f_l(x)``. Input is
    flattened.

    Parameters
    ----------
    in_features : int
        Size of the flattened input.
    hidden : tuple of int
        Hidden layers of each unit ``f_l`` (ReLU), followed by one sigmoid output.
    norm, dropout, input_norm
        As :class:`~clestim.nets.MLP` and :class:`~clestim.nets.InputNorm`.
    autoencoder : dict, optional
        Keyword arguments of :class:`Autoencoder` (``hidden``, ``latent``); None:
        no autoencoders (ENS).
    """

    def __init__(self, in_features, hidden, norm=None, dropout=0.0, input_norm=None,
                 autoencoder=None):
        super().__init__()
        self.in_features = in_features
        self.config = dict(hidden=tuple(hidden), norm=norm, dropout=dropout, input_norm=input_norm)
        self.autoencoder_config = None if autoencoder is None else dict(autoencoder)
        self.units = nn.ModuleList()
        self.autoencoders = nn.ModuleList()

    @property
    def head(self) -> UnitEnsemble:
        """The ensemble itself: it grows as a head does."""
        return self

    @property
    def n_classes(self) -> int:
        return len(self.units)

    def _new_unit(self) -> ContinualNetwork:
        c = self.config
        backbone = MLP(self.in_features, norm=c["norm"], dropout=c["dropout"], hidden=c["hidden"])
        head = GrowingLinear(backbone.out_features)
        head.grow(1)
        return ContinualNetwork(backbone, InputNorm(c["input_norm"], self.in_features), head)

    def grow(self, n_new: int) -> None:
        """Append ``n_new`` freshly initialised units (and autoencoders)."""
        for _ in range(max(n_new, 0)):
            self.units.append(self._new_unit())
            if self.autoencoder_config is not None:
                self.autoencoders.append(Autoencoder(self.in_features, **self.autoencoder_config))

    def unit_logit(self, label: int, x: torch.Tensor) -> torch.Tensor:
        """The logit of ``f_label`` for each sample, shape ``(N,)``."""
        return self.units[label](x.flatten(1))[:, 0]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The embedding: every unit's last hidden layer, concatenated in unit order."""
        x = x.flatten(1)
        return torch.cat([unit.features(x) for unit in self.units], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        if not len(self.units):
            return x.new_zeros(len(x), 0)
        return torch.cat([unit(x) for unit in self.units], dim=1)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Load weights, first dropping the units added after they were saved."""
        n = len({k.split(".")[1] for k in state_dict if k.startswith("units.")})
        del self.units[n:]
        del self.autoencoders[n:]
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


def subtract_neighbourhoods(points: torch.Tensor, centers: torch.Tensor, epsilon: float,
                            chunk: int = 1024) -> torch.Tensor:
    """A boolean mask of the ``points`` that lie at distance ``>= epsilon`` from every center.

    The distance is the root-mean-square difference per feature,
    ``||p - c||_2 / sqrt(n_features)`` (the Euclidean distance scaled so that it does
    not grow with the input size); a point is removed when it lies in the open ball
    ``{p : d(p, c) < epsilon}`` of a center (the paper's footnote 1).
    """
    keep = torch.ones(len(points), dtype=torch.bool, device=points.device)
    if not len(points) or not len(centers):
        return keep
    scale = points.shape[1] ** 0.5
    for start in range(0, len(centers), chunk):
        d = torch.cdist(points, centers[start : start + chunk]) / scale
        keep &= (d >= epsilon).all(1)
    return keep
