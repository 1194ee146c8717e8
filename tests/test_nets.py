"""The input normalisation and the channel LayerNorm, against formulas written here."""

import pytest
import torch

from clestim.nets import InputNorm
from clestim.nets.norms import ChannelLayerNorm, feature_norm

EPS = 1e-5  # torch's default for LayerNorm and InstanceNorm


def _standardise(x, dim):
    mean = x.mean(dim, keepdim=True)
    var = ((x - mean) ** 2).mean(dim, keepdim=True)  # biased, as the norm layers
    return (x - mean) / torch.sqrt(var + EPS)


@pytest.fixture
def x():
    g = torch.Generator().manual_seed(0)
    scale = torch.tensor([1.0, 10.0, 100.0])[None, :, None]
    return torch.randn(4, 3, 7, generator=g) * scale + 5.0  # (N, C, L), channels apart


def test_input_norm_layer_normalises_the_channels_at_each_time_step(x):
    norm = InputNorm("layer", 3)
    out = norm(x)
    torch.testing.assert_close(out, _standardise(x, dim=1))
    assert list(norm.parameters()) == []  # nothing to train
    flat = x[:, :, 0]  # (N, features): the features of each sample
    torch.testing.assert_close(norm(flat), _standardise(flat, dim=1))


def test_input_norm_instance_normalises_each_channel_over_time(x):
    norm = InputNorm("instance", 3)
    torch.testing.assert_close(norm(x), _standardise(x, dim=2))
    assert list(norm.parameters()) == [] and list(norm.buffers()) == []
    norm.train()
    first = norm(x)
    norm.eval()  # no running statistics: train and eval agree
    torch.testing.assert_close(norm(x), first)
    with pytest.raises(ValueError, match="needs \\(n_samples, n_channels, n_timepoints\\)"):
        norm(x[:, :, 0])


def test_input_norm_none_is_the_identity_and_bad_kind(x):
    assert torch.equal(InputNorm(None, 3)(x), x)
    with pytest.raises(ValueError, match="input_norm must be one of"):
        InputNorm("batch", 3)


def test_channel_layer_norm_with_affine_parameters(x):
    norm = ChannelLayerNorm(3)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, -1.0]))
        norm.bias.copy_(torch.tensor([0.0, 0.5, 3.0]))
    expected = _standardise(x, 1) * norm.weight[None, :, None] + norm.bias[None, :, None]
    torch.testing.assert_close(norm(x), expected)
    assert norm(x).shape == x.shape
    flat = x[:, :, 0]
    torch.testing.assert_close(norm(flat), _standardise(flat, 1) * norm.weight + norm.bias)


def test_feature_norm_kinds():
    assert isinstance(feature_norm("layer", 4), ChannelLayerNorm)
    assert isinstance(feature_norm("batch", 4), torch.nn.BatchNorm1d)
    with pytest.raises(ValueError, match="norm must be one of"):
        feature_norm("group", 4)
