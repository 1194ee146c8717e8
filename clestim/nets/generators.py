"""Generators for generative replay: torch modules that learn to synthesise inputs.

A generator usable by :class:`clestim.GR` is an ``nn.Module`` with

* ``loss(x)``: the scalar training loss of a batch ``(N, C, L)``;
* ``sample(n, generator=None)``: ``n`` synthetic inputs ``(n, C, L)``, drawn with the
  given ``torch.Generator``;
* optionally ``reconstruct(x)``: used for early stopping on the mean squared
  reconstruction error (without it, on ``loss``).
"""

from __future__ import annotations

import torch
from torch import nn


class TimeVAE(nn.Module):
    """A convolutional variational autoencoder for time series (Desai et al. 2021).

    The TimeVAE-like generator of TSCIL's generative replay (Qiao et al. 2024):

    * encoder: ``Conv1d(k=3, stride=2, pad=1) -> ReLU`` blocks with ``hidden``
      channels (each halves the length, rounding up), flatten, two linear maps to the
      latent mean and log-variance;
    * decoder: ``Linear(latent -> hidden[-1] * L_last) -> ReLU``, transposed
      convolutions (``k=3, stride=2, pad=1, output_pad=1``, ReLU except the last)
      back to ``n_channels``, each cropped to the encoder's length, then a final
      ``Linear(C*L -> C*L)`` on the flattened series.

    The loss of a batch is summed over its samples, as TimeVAE's::

        loss = recon_weight * ( sum (x - x')^2 + sum_{n,c} (mean_t x - mean_t x')^2 )
               + sum KL( N(mu, sigma^2) || N(0, I) )

    Parameters
    ----------
    n_channels, n_timepoints : int
        Shape of one input series.
    latent_dim : int, default=128
    hidden : tuple of int, default=(64, 128, 256, 512)
    recon_weight : float, default=0.1
        Weight of the reconstruction terms: TSCIL's default, tuned per run over
        1e-3, 1e-2, 0.1, 1, 10. The errors are summed in the data's units, so the
        weight sets the balance with the KL term: too large for the data's scale and
        the latent codes drift from ``N(0, I)``, so :meth:`sample` decodes
        off-distribution series (on raw DSA windows, values up to 120, a weight of 1
        gives samples the previous network labels all as one class).
    """

    def __init__(
        self,
        n_channels: int,
        n_timepoints: int,
        latent_dim: int = 128,
        hidden: tuple[int, ...] = (64, 128, 256, 512),
        recon_weight: float = 0.1,
    ):
        super().__init__()
        self.n_channels, self.n_timepoints = n_channels, n_timepoints
        self.latent_dim, self.recon_weight = latent_dim, recon_weight
        lengths = [n_timepoints]
        encoder = []
        for c_in, c_out in zip((n_channels, *hidden[:-1]), hidden):
            encoder += [nn.Conv1d(c_in, c_out, 3, stride=2, padding=1), nn.ReLU()]
            lengths.append(-(-lengths[-1] // 2))
        self.encoder = nn.Sequential(*encoder, nn.Flatten())
        self._lengths = lengths
        flat = hidden[-1] * lengths[-1]
        self.mean = nn.Linear(flat, latent_dim)
        self.log_var = nn.Linear(flat, latent_dim)
        self.expand = nn.Sequential(nn.Linear(latent_dim, flat), nn.ReLU())
        outs = (*reversed(hidden[:-1]), n_channels)
        self.deconvs = nn.ModuleList(
            nn.ConvTranspose1d(c_in, c_out, 3, stride=2, padding=1, output_padding=1)
            for c_in, c_out in zip(reversed(hidden), outs)
        )
        self.output = nn.Linear(n_channels * n_timepoints, n_channels * n_timepoints)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(x)
        return self.mean(h), self.log_var(h)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        h = self.expand(z).view(len(z), -1, self._lengths[-1])
        for k, deconv in enumerate(self.deconvs):
            h = deconv(h)[..., : self._lengths[-2 - k]]
            if k < len(self.deconvs) - 1:
                h = torch.relu(h)
        return self.output(h.flatten(1)).view(len(z), self.n_channels, self.n_timepoints)

    def forward(self, x: torch.Tensor):
        """``(reconstruction, mu, log_var)``; ``z`` is sampled in training mode, else ``mu``."""
        mu, log_var = self.encode(x)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var) if self.training else mu
        return self.decode(z), mu, log_var

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)[0]

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        recon, mu, log_var = self.forward(x)
        error = (x - recon).pow(2).sum() + (x.mean(-1) - recon.mean(-1)).pow(2).sum()
        kl = -0.5 * (1 + log_var - mu.pow(2) - log_var.exp()).sum()
        return self.recon_weight * error + kl

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Decode ``n`` draws of ``z ~ N(0, I)``."""
        z = torch.randn(n, self.latent_dim, generator=generator)
        return self.decode(z.to(self.output.weight.device))
