"""Generative replay and its VAE on real UCI-HAR windows."""

import copy
import functools

import numpy as np
import pytest
import torch
from helpers import task
from torch import nn

from clestim import GR, Naive
from clestim.evaluation import evaluate_stream
from clestim.nets.generators import TimeVAE
from clestim.streams import ClassIncremental

FAST = dict(max_epochs=4, random_state=0, backbone_params={"channels": (32, 64)})
SMALL_VAE = functools.partial(TimeVAE, latent_dim=16, hidden=(16, 32))
TINY = dict(
    max_epochs=1,
    random_state=0,
    backbone_params={"channels": (8, 8)},
    generator=SMALL_VAE,
    generator_epochs=2,
)



@pytest.mark.parametrize("length", [128, 125, 7])
def test_time_vae_shapes_and_loss(length):
    vae = TimeVAE(3, length, latent_dim=8, hidden=(8, 16))
    x = torch.randn(5, 3, length)
    assert vae.reconstruct(x).shape == x.shape
    assert vae.sample(4, torch.Generator().manual_seed(0)).shape == (4, 3, length)
    vae.eval()
    recon, mu, log_var = vae(x)
    error = ((x - recon) ** 2).sum() + ((x.mean(-1) - recon.mean(-1)) ** 2).sum()
    kl = -0.5 * (1 + log_var - mu**2 - log_var.exp()).sum()
    assert vae.loss(x).item() == pytest.approx((0.1 * error + kl).item(), rel=1e-5)
    assert torch.equal(vae.sample(2, torch.Generator().manual_seed(1)),
                       vae.sample(2, torch.Generator().manual_seed(1)))


def test_time_vae_standardizes_per_channel_so_units_do_not_matter():
    x = torch.randn(20, 3, 16)
    units = torch.tensor([1.0, 10.0, 100.0]).view(3, 1)
    torch.manual_seed(0)
    vae = TimeVAE(3, 16, latent_dim=4, hidden=(8,), standardize=True).adapt(x).eval()
    assert torch.allclose(vae.loc.squeeze(1), x.mean(dim=(0, 2)))
    assert torch.allclose(vae.scale.squeeze(1), x.std(dim=(0, 2)))
    scaled = copy.deepcopy(vae).adapt(x * units + 5.0)  # the same VAE, other units
    assert scaled.loss(x * units + 5.0).item() == pytest.approx(vae.loss(x).item(), rel=1e-4)
    assert torch.allclose(scaled.reconstruct(x * units + 5.0), vae.reconstruct(x) * units + 5.0,
                          rtol=1e-4, atol=1e-3)
    draws = [vae.sample(3, torch.Generator().manual_seed(2)),
             scaled.sample(3, torch.Generator().manual_seed(2))]
    assert torch.allclose(draws[1], draws[0] * units + 5.0, rtol=1e-4, atol=1e-3)
    raw = TimeVAE(3, 16, latent_dim=4, hidden=(8,), standardize=False).adapt(x * units)
    assert torch.equal(raw.loc, torch.zeros(3, 1)) and torch.equal(raw.scale, torch.ones(3, 1))
    assert TimeVAE(3, 16).standardize  # the default; False is TSCIL's VAE


def test_gr_learns_and_forgets_less_than_naive(uci_har_small):
    (X, y), (X_test, y_test) = uci_har_small["train"], uci_har_small["test"]
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    naive = evaluate_stream(Naive(**FAST), stream, X, y, X_test, y_test).metrics
    vae = functools.partial(TimeVAE, latent_dim=32, hidden=(32, 64))
    gr = GR(generator=vae, generator_epochs=20, generator_patience=5, **FAST)
    result = evaluate_stream(gr, stream, X, y, X_test, y_test, return_estimator=True)
    assert result.metrics["average_accuracy"] > 0.45  # chance: 1/6
    assert result.metrics["average_forgetting"] < naive["average_forgetting"] - 0.2
    _assert_no_raw_samples(result.estimator, X)


def _assert_no_raw_samples(est, X):
    """No fitted attribute holds arrays of input samples."""
    for name, value in vars(est).items():
        if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == X.ndim:
            assert tuple(value.shape[1:]) != X.shape[1:], name
    assert not hasattr(est, "_valid_X")


class _GaussianGenerator(nn.Module):
    """A minimal generator: one learnable mean series plus unit noise."""

    def __init__(self, n_channels, n_timepoints):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(n_channels, n_timepoints))

    def loss(self, x):
        return ((x - self.mean) ** 2).mean()

    @torch.no_grad()
    def sample(self, n, generator=None):
        return self.mean + torch.randn(n, *self.mean.shape, generator=generator)


def test_swappable_generator_module_and_factory(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    template = _GaussianGenerator(*X.shape[1:])
    est = GR(**{**TINY, "generator": template}).fit(X, y)
    assert isinstance(est.generator_, _GaussianGenerator) and est.generator_ is not template
    assert torch.equal(template.mean, torch.zeros_like(template.mean))  # the template is copied
    assert not torch.equal(est.generator_.mean, template.mean)  # the copy trained
    est = GR(**TINY).fit(X, y)
    assert isinstance(est.generator_, TimeVAE) and est.generator_.latent_dim == 16
    first = torch.tensor(X[np.isin(y, est.task_classes_[0])])  # the scaling of the first task
    assert torch.allclose(est.generator_.loc.squeeze(1), first.mean(dim=(0, 2)), atol=1e-5)
    est = GR(**{**TINY, "generator_params": {"standardize": False}}).fit(X, y)  # TSCIL's VAE
    assert torch.equal(est.generator_.scale, torch.ones(X.shape[1], 1))
    est = GR(**{**TINY, "generator_params": {"recon_weight": 0.01}}).fit(X, y)
    assert est.generator_.recon_weight == 0.01 and est.generator_.latent_dim == 16
    assert TimeVAE(9, 128).recon_weight == 0.1  # TSCIL's default recon_wt


class _ConstantGenerator(nn.Module):
    """A degenerate generator: every sample is the same series."""

    def __init__(self, series):
        super().__init__()
        self.register_buffer("series", torch.as_tensor(series))
        self.unused = nn.Parameter(torch.zeros(1))

    def loss(self, x):
        return (self.unused**2).sum()

    @torch.no_grad()
    def sample(self, n, generator=None):
        return self.series.expand(n, *self.series.shape).clone()


def test_warns_when_the_generator_replays_one_class(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    with pytest.warns(UserWarning, match="replay no other class") as record:
        est = GR(**{**TINY, "generator": _ConstantGenerator(X[0])}).fit(X, y)
    assert len(record) >= 1
    assert est.replay_counts_.shape == (4,) and est.replay_counts_.sum() == 512
    assert np.count_nonzero(est.replay_counts_) == 1  # one series, one label
    only = est.classes_[est.replay_counts_ > 0].tolist()[0]
    assert f"as class {only!r}" in str(record[-1].message)


def test_replayed_labels_are_old_classes(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    est = GR(**TINY).partial_fit_task(X[y < 2], y[y < 2])
    est._before_task(X[y >= 2], est._encode(y[y < 2]), None)  # as the next task starts
    est.module_.head.grow(2)
    x_replay, y_replay = est._replay(64)
    assert x_replay.shape == (64, *X.shape[1:])
    assert set(y_replay.tolist()) <= {0, 1}


def test_same_random_state_same_predictions(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    preds = [GR(**TINY).fit(X, y).predict_proba(X) for _ in range(2)]
    np.testing.assert_array_equal(preds[0], preds[1])


def test_default_generator_needs_series(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    with pytest.raises(ValueError, match="n_channels, n_timepoints"):
        GR(backbone="mlp", max_epochs=1).partial_fit_task(X[:, 0][y < 2], y[y < 2])


@pytest.mark.parametrize(
    "params,match",
    [
        ({"replay_ratio": 1.0}, "replay_ratio"),
        ({"generator": "vae"}, "generator"),
        ({"generator_epochs": 0}, "generator_epochs"),
        ({"generator_patience": 0}, "generator_patience"),
        ({"generator_params": {"recon_weight": 0.1}, "generator": nn.Linear(1, 1)},
         "generator_params"),
        ({"generator_params": 0.1}, "generator_params"),
    ],
)
def test_bad_parameters(params, match, uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    with pytest.raises(ValueError, match=match):
        GR(**params).partial_fit_task(X, y)


@pytest.mark.filterwarnings("ignore:GR. the network labels")
def test_generator_history_records_each_epoch_until_early_stopping(uci_har_small):
    X, y = task(uci_har_small, range(4), n=15)
    est = GR(**{**TINY, "generator_epochs": 30}, generator_patience=2).fit(X, y)
    assert len(est.generator_history_) == len(est.task_classes_) == 2
    for history in est.generator_history_:
        assert 3 <= len(history) < 30  # the small VAE stops early on 60 windows
        assert [h["epoch"] for h in history] == list(range(1, len(history) + 1))
        scores = [h["valid_mse"] for h in history]
        # stopped because the last 2 epochs did not beat the best before them
        assert min(scores[-2:]) >= min(scores[:-2])
        assert all(h["dur"] >= 0 for h in history)
    gaussian = {**TINY, "generator": _GaussianGenerator(*X.shape[1:]), "generator_epochs": 30}
    unstopped = GR(**gaussian, generator_patience=None).fit(X, y)
    assert [len(h) for h in unstopped.generator_history_] == [30, 30]
    assert all(h["valid_mse"] is None for h in unstopped.generator_history_[0])
