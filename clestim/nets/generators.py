"""Generators for generative replay: torch modules that learn to synthesise inputs.

A generator usable by :class:`clestim.GR` is an ``nn.Module`` with

* ``loss(x)``: the scalar training loss of a batch ``(N, C, L)``;
* ``sample(n, generator=None)``: ``n`` synthetic inputs ``(n, C, L)``, drawn with the
  given ``torch.Generator``;
* optionally ``reconstruct(x)``: used for early stopping on the mean squared
  reconstruction error (without it, on ``loss``);
* optionally ``adapt(x)``: called once, with the first task's training inputs,
  before the generator trains (TimeVAE takes its per-channel scaling from them).
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

    By default ``x`` is the input standardised per channel with the mean and standard
    deviation of the data given to :meth:`adapt` (GR passes the first task's
    inputs); :meth:`sample` and :meth:`reconstruct` still return series in the data's
    units, so the weight that balances the two terms does not depend on them. With
    ``standardize=False`` (TSCIL's VAE) ``x`` is the raw input, and the weight depends
    on the data's units and is tuned per dataset: on raw DSA windows (values up to
    120) a weight of 1 gives samples that the previous network labels all as one
    class. In TSCIL's protocol (five runs of GR, LayerNorm, 500 generator epochs) the
    standardising VAE is ahead on UCI-HAR and DSA (``benchmarks/README.md``), hence
    the default.

    Parameters
    ----------
    n_channels, n_timepoints : int
        Shape of one input series.
    latent_dim : int, default=128
    hidden : tuple of int, default=(64, 128, 256, 512)
    recon_weight : float, default=0.1
        Weight of the reconstruction terms against the KL term: TSCIL's default,
        tuned per run over 1e-3, 1e-2, 0.1, 1, 10.
    standardize : bool, default=True
        Standardise each channel inside the VAE (see above); False is TSCIL's VAE.
    """

    def __init__(
        self,
        n_channels: int,
        n_timepoints: int,
        latent_dim: int = 128,
        hidden: tuple[int, ...] = (64, 128, 256, 512),
        recon_weight: float = 0.1,
        standardize: bool = True,
    ):
        super().__init__()
        self.n_channels, self.n_timepoints = n_channels, n_timepoints
        self.latent_dim, self.recon_weight = latent_dim, recon_weight
        self.standardize = standardize
        self.register_buffer("loc", torch.zeros(n_channels, 1))
        self.register_buffer("scale", torch.ones(n_channels, 1))
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

    @torch.no_grad()
    def adapt(self, x: torch.Tensor) -> TimeVAE:
        """Take the per-channel mean and standard deviation of ``x`` ``(N, C, L)``."""
        if self.standardize:
            x = torch.as_tensor(x, dtype=self.loc.dtype, device=self.loc.device)
            self.loc.copy_(x.mean(dim=(0, 2)).unsqueeze(1))
            self.scale.copy_(x.std(dim=(0, 2)).clamp_min(1e-6).unsqueeze(1))
        return self

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean and log-variance of standardised series."""
        h = self.encoder(x)
        return self.mean(h), self.log_var(h)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Standardised series decoded from latent codes."""
        h = self.expand(z).view(len(z), -1, self._lengths[-1])
        for k, deconv in enumerate(self.deconvs):
            h = deconv(h)[..., : self._lengths[-2 - k]]
            if k < len(self.deconvs) - 1:
                h = torch.relu(h)
        return self.output(h.flatten(1)).view(len(z), self.n_channels, self.n_timepoints)

    def forward(self, x: torch.Tensor):
        """``(reconstruction, mu, log_var)`` of ``x`` standardised; ``z`` is sampled in
        training mode, else ``mu``."""
        mu, log_var = self.encode(x)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var) if self.training else mu
        return self.decode(z), mu, log_var

    def _standardized(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.loc) / self.scale if self.standardize else x

    def _in_data_units(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + self.loc if self.standardize else x

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        return self._in_data_units(self.forward(self._standardized(x))[0])

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        x = self._standardized(x)
        recon, mu, log_var = self.forward(x)
        error = (x - recon).pow(2).sum() + (x.mean(-1) - recon.mean(-1)).pow(2).sum()
        kl = -0.5 * (1 + log_var - mu.pow(2) - log_var.exp()).sum()
        return self.recon_weight * error + kl

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Decode ``n`` draws of ``z ~ N(0, I)``."""
        z = torch.randn(n, self.latent_dim, generator=generator)
        return self._in_data_units(self.decode(z.to(self.output.weight.device)))
