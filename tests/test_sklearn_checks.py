"""scikit-learn's own estimator checks on every public clestim estimator.

The estimators are discovered from ``clestim.__all__`` (every concrete subclass of
``ContinualClassifier`` but the base class itself), so a method added later is
checked without editing this file. Each runs in a fast configuration: a one-layer
MLP on sklearn's small 2-D data, a few epochs, no validation split; ``FAST_PARAMS``
holds the few per-method additions. ``EXPECTED_FAILED`` lists the checks that
cannot hold for a continual learner, each with its reason; docs/sklearn_conventions.md
explains them.
"""

import inspect

import torch
from sklearn.utils.estimator_checks import parametrize_with_checks
from torch import nn

import clestim
from clestim.base import ContinualClassifier


class TabularGaussian(nn.Module):
    """A diagonal Gaussian over flat samples: GR's generator interface on 2-D data."""

    def __init__(self, n_features: int):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(n_features))
        self.log_scale = nn.Parameter(torch.zeros(n_features))

    def loss(self, x):
        z = (x - self.loc) * torch.exp(-self.log_scale)
        return (0.5 * z.pow(2) + self.log_scale).sum(1).mean()

    @torch.no_grad()
    def sample(self, n, generator=None):
        noise = torch.randn(n, len(self.loc), generator=generator)
        return self.loc + noise * torch.exp(self.log_scale)


#: Every estimator: a small MLP trained briefly (sklearn's data is small and easy).
GENERIC_FAST = dict(
    backbone="mlp",
    backbone_params={"hidden": (16,)},
    max_epochs=3,
    batch_size=64,
    lr=5e-2,
    validation_fraction=0.0,
    grad_clip=None,
    memory_size=20,  # replay methods: a fixed memory, one sample per class or more
    random_state=0,
)
#: What a method needs on top of GENERIC_FAST (by class name).
FAST_PARAMS = {
    "GR": dict(generator=TabularGaussian, generator_epochs=2, replay_batch_size=8),
}

#: check name -> reason, for checks a continual learner cannot pass (see the docs page).
EXPECTED_FAILED = {}


def public_estimators():
    """The concrete ContinualClassifier subclasses that clestim exports."""
    found = []
    for name in clestim.__all__:
        obj = getattr(clestim, name)
        if (
            isinstance(obj, type)
            and issubclass(obj, ContinualClassifier)
            and obj is not ContinualClassifier
            and not inspect.isabstract(obj)
        ):
            found.append(obj)
    return found


def fast(cls):
    accepted = set(cls._get_param_names())
    params = {**GENERIC_FAST, **FAST_PARAMS.get(cls.__name__, {})}
    return cls(**{k: v for k, v in params.items() if k in accepted})


def expected_failed_checks(estimator):
    return EXPECTED_FAILED


def test_every_public_estimator_is_checked():
    names = {cls.__name__ for cls in public_estimators()}
    assert {"Naive", "ER", "LwF", "GR", "Offline"} <= names


@parametrize_with_checks(
    [fast(cls) for cls in public_estimators()],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_check(estimator, check):
    check(estimator)
