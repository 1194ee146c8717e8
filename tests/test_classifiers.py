"""Classifiers selectable on every method: softmax, sigmoid/BCE, split cosine, NCM."""

import numpy as np
import pytest
import torch
from helpers import task
from torch.nn import functional as F

from clestim import ER, Herding, LwF, Naive
from clestim.evaluation import evaluate_stream
from clestim.nets import SplitCosineLinear
from clestim.streams import ClassIncremental

SMALL = dict(max_epochs=3, random_state=0, backbone_params={"channels": (16, 32)})
TINY = dict(max_epochs=1, random_state=0, backbone_params={"channels": (8, 8)})



def test_split_cosine_head():
    head = SplitCosineLinear(4, 2)
    h = torch.randn(5, 4)
    expected = F.normalize(h, dim=1) @ F.normalize(head.weight, dim=1).T
    assert torch.allclose(head(h), expected)  # sigma starts at 1
    with torch.no_grad():
        head.sigma.fill_(3.0)
    old = head.weight.detach().clone()
    head.grow(3)
    assert head.n_classes == 5 and torch.equal(head.weight[:2], old)
    assert float(head.sigma.detach()) == 3.0
    assert head.weight[2:].abs().max() <= 0.5  # U(+-1/sqrt(4))
    assert torch.allclose(head(h)[:, :2], 3 * expected)
    small = SplitCosineLinear(4, 2)
    small.load_state_dict({"weight": old, "sigma": torch.tensor([2.0])})
    head.load_state_dict(small.state_dict())  # a snapshot with fewer classes
    assert head.n_classes == 2 and float(head.sigma.detach()) == 2.0


def test_bce_criterion_and_probabilities(uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    est = ER(classifier="bce", memory_size=10, **TINY).fit(X, y)
    logits, labels = torch.randn(4, 3), torch.tensor([0, 2, 1, 2])
    expected = F.binary_cross_entropy_with_logits(logits, F.one_hot(labels, 3).float())
    assert torch.allclose(est._criterion(logits, labels), expected)
    assert est._criterion(logits, labels, reduction="none").shape == (4,)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(1), 1, rtol=1e-5)
    sig = 1 / (1 + np.exp(-est.decision_function(X)))
    np.testing.assert_allclose(proba, sig / sig.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_array_equal(est.classes_[proba.argmax(1)], est.predict(X))
    assert (est.predict_proba(X, task=0)[:, 2:] == 0).all()


def test_ncm_uses_memory_class_means_per_snapshot(uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    est = ER(classifier="ncm", memory_size=20, **TINY).fit(X, y)
    assert len(est.class_means_) == 2 and est.class_means_[0].shape[0] == 2
    # by hand: nearest normalised class mean over the memory's embeddings
    feats = F.normalize(torch.from_numpy(est.transform(X)), dim=1)
    with torch.no_grad():
        mem = est.module_.features(est.memory_["X"])
    means = torch.stack([mem[est.memory_["y"] == c].mean(0) for c in range(4)])
    dist = torch.cdist(feats, F.normalize(means, dim=1))
    np.testing.assert_array_equal(est.predict(X), est.classes_[dist.argmin(1).numpy()])
    # after the first task only its two classes can be predicted
    assert set(est.predict(X, after_task=0)) <= set(est.task_classes_[0])
    assert np.isneginf(est.decision_function(X, after_task=0)[:, 2:]).all()


@pytest.mark.parametrize("est", [Naive(classifier="ncm"), LwF(classifier="ncm")])
def test_ncm_needs_memory(est, uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    with pytest.raises(ValueError, match="keeps no memory"):
        est.partial_fit_task(X, y)


def test_classifier_validated_and_fixed_after_fit(uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    with pytest.raises(ValueError, match="classifier must be one of"):
        ER(classifier="svm").partial_fit_task(X, y)
    est = ER(memory_size=10, **TINY).partial_fit_task(X[:60], y[:60])
    with pytest.raises(ValueError, match="classifier changed"):
        est.set_params(classifier="cosine").partial_fit_task(X[60:], y[60:])


def _four_class_stream(est, data):
    # two tasks of real UCI-HAR (4 classes) keep this fast
    (X, y), (X_test, y_test) = data["train"], data["test"]
    train, test = np.isin(y, np.unique(y)[:4]), np.isin(y_test, np.unique(y)[:4])
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    result = evaluate_stream(
        est, stream, X[train], y[train], X_test[test], y_test[test], return_estimator=True
    )
    first = np.isin(y_test, result.estimator.task_classes_[0])
    first_accuracy = result.estimator.score(X_test[first], y_test[first])
    return result.metrics["average_accuracy"], first_accuracy


@pytest.fixture(scope="module")
def naive_stream(uci_har_small):
    return _four_class_stream(Naive(**SMALL), uci_har_small)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ER(classifier="bce", memory_size=60, **SMALL),
        lambda: ER(classifier="cosine", memory_size=60, **SMALL),
        lambda: Herding(classifier="ncm", memory_size=60, **SMALL),
    ],
    ids=["bce", "cosine", "ncm"],
)
def test_classifiers_learn_a_stream(make, uci_har_small, naive_stream):
    average, first = _four_class_stream(make(), uci_har_small)
    naive_average, naive_first = naive_stream  # ~0.48 and 0
    # always predicting one old class: average accuracy 1/4, 0.5 on the first task
    assert average > max(naive_average, 0.25) + 0.1  # bce 0.74, cosine 0.61, ncm 0.75
    assert first > max(naive_first, 0.5) + 0.1  # old classes still recognised (0.63-0.73)
