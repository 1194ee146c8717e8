"""Herding, ASER, CLOPS, subject-aware replay and online mode on real UCI-HAR windows.

A small CNN (channels 32, 64) and 4 epochs per task keep each stream to seconds;
3 tasks of 2 classes, LayerNorm, 60 memory slots (10 per class at the end).
"""

import numpy as np
import pytest
import torch

from clestim import ASER, CLOPS, ER, Herding, Naive
from clestim.evaluation import evaluate_stream
from clestim.streams import ClassIncremental

FAST = dict(max_epochs=4, random_state=0, backbone_params={"channels": (32, 64)})
TINY = dict(max_epochs=1, random_state=0, backbone_params={"channels": (8, 8)})


def _stream_result(est, data):
    (X, y), (X_test, y_test) = data["train"], data["test"]
    return evaluate_stream(
        est, ClassIncremental(classes_per_task=2, shuffle=False), X, y, X_test, y_test
    )


@pytest.fixture(scope="module")
def naive_forgetting(uci_har_small):
    return _stream_result(Naive(**FAST), uci_har_small).metrics["average_forgetting"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Herding(memory_size=60, **FAST),
        lambda: ASER(memory_size=60, **FAST),
        lambda: CLOPS(memory_size=60, **FAST),
        lambda: ER(memory_size=60, online=True, **{**FAST, "random_state": 1}),
    ],
    ids=["Herding", "ASER", "CLOPS", "ER-online"],
)
def test_learns_above_chance_and_forgets_less_than_naive(make, uci_har_small, naive_forgetting):
    metrics = _stream_result(make(), uci_har_small).metrics
    assert metrics["average_accuracy"] > 0.4  # chance: 1/6
    assert metrics["average_forgetting"] < naive_forgetting - 0.2


def _two_tasks(data, n=40):
    X, y = data["train"]
    idx = np.concatenate([np.flatnonzero(y == c)[:n] for c in range(4)])
    return X[idx], y[idx]


@pytest.mark.parametrize(
    "make",
    [
        lambda: Herding(memory_size=16, **TINY),
        lambda: ASER(memory_size=16, **TINY),
        lambda: CLOPS(memory_size=16, retrieval="uncertainty", **TINY),
        lambda: ER(memory_size=16, retrieval="subject_balanced", online=True, **TINY),
    ],
    ids=["Herding", "ASER", "CLOPS-mc", "ER-sub-online"],
)
def test_same_random_state_same_predictions(make, uci_har_small):
    X, y = _two_tasks(uci_har_small)
    groups = np.arange(len(y)) % 5
    preds = [make().fit(X, y, groups).predict_proba(X) for _ in range(2)]
    np.testing.assert_array_equal(preds[0], preds[1])


def test_herding_memory_quota_with_any_labels(uci_har_small):
    X, y = _two_tasks(uci_har_small)
    names = np.array(["walk", "up", "down", "sit"])[y - 1 if y.min() == 1 else y]
    est = Herding(memory_size=10, **TINY).partial_fit_task(X[:80], names[:80])
    assert torch.bincount(est.memory_["y"]).tolist() == [5, 5]
    first = est.memory_["X"].clone()
    est.partial_fit_task(X[80:], names[80:])
    assert torch.bincount(est.memory_["y"]).tolist() == [2, 2, 2, 2]  # 10 // 4
    # old classes keep their first exemplars in herding order
    assert torch.equal(est.memory_["X"][:2], first[:2])
    assert torch.equal(est.memory_["X"][2:4], first[5:7])


def test_budget_smaller_than_classes_fails_before_training(uci_har_small):
    X, y = _two_tasks(uci_har_small)
    est = Herding(memory_size=3, **TINY)
    with pytest.raises(ValueError, match="at least one per class"):
        est.partial_fit_task(X, y)
    assert not hasattr(est, "module_")
    with pytest.raises(ValueError, match="at least one per class"):
        CLOPS(memory_size=3, **TINY).fit(X, y, None)


@pytest.mark.parametrize(
    "est",
    [ER(memory_subjects=2), ER(retrieval="subject_balanced"), Herding(memory_subjects=[1])],
)
def test_subjects_needed_but_none_given(est, uci_har_small):
    X, y = _two_tasks(uci_har_small)
    with pytest.raises(ValueError, match="needs subject ids"):
        est.set_params(**TINY).partial_fit_task(X[:80], y[:80])
    assert not hasattr(est, "module_")


@pytest.mark.parametrize(
    "est, match",
    [
        (ER(retrieval="aser"), "retrieval must be one of"),
        (ASER(k=0), "k must be"),
        (CLOPS(mc_every=0), "mc_every must be"),
        (ER(memory_subjects=0), "memory_subjects"),
        (ER(memory_subjects=[]), "memory_subjects"),
    ],
)
def test_bad_parameters(est, match, uci_har_small):
    X, y = _two_tasks(uci_har_small)
    with pytest.raises(ValueError, match=match):
        est.set_params(**TINY).partial_fit_task(X[:80], y[:80], np.zeros(80))


def test_memory_from_a_subset_of_subjects(uci_har_small):
    X, y = _two_tasks(uci_har_small)
    subjects = np.array(["s1", "s2", "s3", "s4"])[np.arange(len(y)) % 4]
    est = ER(memory_size=20, memory_subjects=["s2", "s4"], **TINY).fit(X, y, subjects)
    codes = est._group_codes(["s2", "s4"])
    assert set(est.memory_["group"].tolist()) <= set(codes.tolist()) and len(est.memory_) == 20
    drawn = [
        ER(memory_size=20, memory_subjects=2, **TINY).fit(X, y, subjects).memory_subjects_
        for _ in range(2)
    ]
    assert len(set(drawn[0])) == 2 and list(drawn[0]) == list(drawn[1])


def test_online_mode_one_epoch_and_per_batch_memory(uci_har_small):
    X, y = _two_tasks(uci_har_small)
    est = ER(memory_size=30, online=True, batch_size=16, **{**TINY, "max_epochs": 5})
    est.partial_fit_task(X[:80], y[:80])
    assert len(est.history_[0]) == 1
    assert len(est.memory_) == 30 and est.memory_.n_seen == 72  # 90% of 80 trained on
    herding = Herding(memory_size=10, online=True, **TINY).partial_fit_task(X[:80], y[:80])
    assert torch.bincount(herding.memory_["y"]).tolist() == [5, 5]


def test_clops_beta_update_and_area_score():
    est = CLOPS(beta_lr=0.5, lambda_beta=1.0)
    est._task_data((None, np.zeros(3), None), None)
    idx = torch.tensor([0, 2])
    # one step: beta <- beta - lr * (ce + 2 lambda (beta - 1)) / B, recorded per step
    est._track(idx, torch.tensor([0.8, 0.9], dtype=torch.float64))
    assert torch.allclose(est.importance_scores()[idx], torch.tensor([0.8, 0.9]).double())
    est._track(idx, torch.tensor([0.6, 0.9], dtype=torch.float64))
    est._track(idx, torch.tensor([0.5, 1.0], dtype=torch.float64))
    expected = [np.trapezoid([0.8, 0.6, 0.5]), np.trapezoid([0.9, 0.9, 1.0])]
    assert torch.allclose(est.importance_scores()[idx], torch.tensor(expected).double())
    assert est.beta_[1] == 1.0


def test_clops_beta_follows_its_gradient(uci_har_small):
    X, y = _two_tasks(uci_har_small, n=4)
    est = CLOPS(beta_lr=1.0, lambda_beta=0.0, memory_size=4, batch_size=64, **TINY)
    est.set_params(validation_fraction=0)
    est.partial_fit_task(X[:8], y[:8])
    # one step over all 8 samples at initial weights: beta_i = 1 - ce_i / 8 < 1
    assert (est.beta_ < 1).all() and (est.beta_ > 1 - 5 / 8).all()


def test_aser_one_forward_pass_over_new_and_memory_samples_with_batchnorm(uci_har_small):
    # TSCIL's ASER normalises the concatenated batch jointly; two passes would not
    X, y = _two_tasks(uci_har_small, n=8)
    est = ASER(memory_size=8, norm="batch", **TINY).partial_fit_task(X[:16], y[:16])
    Xt, yt = est._tensor(X[8:16]), torch.as_tensor(y[8:16])
    memory = {"X": est._tensor(X[:8]), "y": torch.as_tensor(y[:8])}
    est.memory_.sample = lambda *args, **kwargs: memory
    est.module_.train()
    with torch.no_grad():
        loss = est._training_loss(Xt, yt)
        labels = torch.cat([yt, memory["y"]])
        joint = est._criterion(est.module_(torch.cat([Xt, memory["X"]])), labels)
        separate = est._criterion(torch.cat(est._forward(Xt, memory["X"])), labels)
    assert torch.allclose(loss, joint)
    assert not torch.allclose(loss, separate)
