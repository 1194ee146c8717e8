"""MAS and EWC: the shared quadratic penalty, importances, head growth, real UCI-HAR."""

import numpy as np
import pytest
import torch
from helpers import task
from torch.nn import functional as F

from clestim import EWC, MAS, Naive
from clestim.evaluation import evaluate_stream
from clestim.methods.regularization import _per_sample_grads
from clestim.streams import ClassIncremental

FAST = dict(max_epochs=4, random_state=0, backbone_params={"channels": (32, 64)})
TINY = dict(max_epochs=1, random_state=0, backbone_params={"channels": (8, 8)})



def _first_task(est, data):
    X, y = task(data, range(4), n=30)
    return est.partial_fit_task(X[y < 2], y[y < 2])


@pytest.mark.parametrize(
    "make", [lambda: MAS(**TINY), lambda: EWC(**TINY), lambda: EWC(mode="online", **TINY)]
)
def test_penalty_zero_at_the_anchor_and_positive_away(make, uci_har_small):
    est = _first_task(make(), uci_har_small)
    assert est.penalty().item() == 0.0
    head = est.module_.head
    with torch.no_grad():
        head.weight[0, 0] += 0.5
    assert est.penalty().item() > 0.0
    with torch.no_grad():
        head.weight[0, 0] -= 0.5
        head.grow(2)  # new rows are free
        head.weight[2:] += 1.0
    assert est.penalty().item() == 0.0
    conv = est.module_.backbone.blocks[0].weight
    with torch.no_grad():
        conv.add_(0.1)
    assert est.penalty().item() > 0.0


def test_penalty_formula(uci_har_small):
    est = _first_task(MAS(**TINY), uci_har_small)
    anchors, importance = est.penalty_terms_[0]
    params = dict(est.module_.named_parameters())
    with torch.no_grad():
        for p in params.values():
            p.add_(0.01)
    expected = sum(
        (importance[n] * (params[n] - anchors[n]) ** 2).sum().item() for n in anchors
    )
    assert est.penalty().item() == pytest.approx(expected, rel=1e-5)
    X, y = task(uci_har_small, range(4), n=30)
    Xt, yt = torch.from_numpy(X[:16]), torch.from_numpy(est._encode(y[:16]))
    loss = est._training_loss(Xt, yt).item()
    ce = F.cross_entropy(est.module_(Xt), yt).item()
    assert loss == pytest.approx(ce + est.lambda_reg * expected, rel=1e-4)


def test_mas_importance_and_moving_average_across_head_growth(uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    est = MAS(**TINY).partial_fit_task(X[y < 2], y[y < 2])
    _, first = est.penalty_terms_[0]
    assert first["head.weight"].shape == (2, est.module_.head.in_features)
    assert all((v >= 0).all() for v in first.values())
    # one batch: the importance is |d mean_x ||f(x)||_2 / d theta|
    Xt = torch.from_numpy(X[:40])
    importance = est._importance(Xt, torch.zeros(40, dtype=torch.long))
    est.module_.zero_grad()
    est.module_(Xt).norm(dim=1).mean().backward()
    for n, p in est.module_.named_parameters():
        torch.testing.assert_close(importance[n], p.grad.abs())
    est.module_.zero_grad()

    est.partial_fit_task(X[y >= 2], y[y >= 2])
    anchors, merged = est.penalty_terms_[0]
    assert merged["head.weight"].shape == anchors["head.weight"].shape == (4, 8)
    # the merge, by hand: alpha * old (zero-padded) + (1 - alpha) * new
    old = {"w": torch.ones(2, 3)}
    new = {"w": torch.full((4, 3), 2.0)}
    (_, got), = est._merge([({}, old)], {}, new)
    np.testing.assert_allclose(got["w"][:2], 0.8 * 1 + 0.2 * 2)
    np.testing.assert_allclose(got["w"][2:], 0.2 * 2)


def test_ewc_per_sample_fisher_and_modes(uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    est = EWC(**TINY).partial_fit_task(X[y < 2], y[y < 2])
    module = est.module_.eval()
    params = {n: p for n, p in module.named_parameters()}
    Xt, yt = torch.from_numpy(X[:5]), torch.from_numpy(est._encode(y[:5]))
    grads = _per_sample_grads(module, params, Xt, yt)
    for i in range(5):  # vmap's per-sample gradients equal one backward per sample
        module.zero_grad()
        F.cross_entropy(module(Xt[i : i + 1]), yt[i : i + 1]).backward()
        for n, p in params.items():
            torch.testing.assert_close(grads[n][i], p.grad, rtol=1e-4, atol=1e-6)
    module.zero_grad()
    fisher = est.penalty_terms_[0][1]
    assert min(f.min() for f in fisher.values()) == 0.0
    assert max(f.max() for f in fisher.values()) == pytest.approx(1.0)

    est.partial_fit_task(X[y >= 2], y[y >= 2])
    assert len(est.penalty_terms_) == 2  # separate: one term per task
    assert est.penalty_terms_[0][0]["head.weight"].shape[0] == 2
    assert est.penalty_terms_[1][0]["head.weight"].shape[0] == 4

    online = EWC(mode="online", decay=0.5, **TINY)
    old = {"w": torch.ones(2, 3)}
    (_, got), = online._merge([({}, old)], {}, {"w": torch.full((4, 3), 2.0)})
    np.testing.assert_allclose(got["w"][:2], 0.5 + 2.0)
    np.testing.assert_allclose(got["w"][2:], 2.0)


def _stream(est, data):
    (X, y), (X_test, y_test) = data["train"], data["test"]
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    return evaluate_stream(est, stream, X, y, X_test, y_test).metrics


@pytest.fixture(scope="module")
def naive_forgetting(uci_har_small):
    return _stream(Naive(**FAST), uci_har_small)["average_forgetting"]


@pytest.mark.parametrize(
    "make",
    [lambda: MAS(lambda_reg=1e3, **FAST), lambda: EWC(lambda_reg=1e4, **FAST)],
    ids=["MAS", "EWC"],
)
def test_learns_above_chance_and_forgets_less_than_naive(make, uci_har_small, naive_forgetting):
    metrics = _stream(make(), uci_har_small)
    assert metrics["average_accuracy"] > 0.35  # chance: 1/6
    assert metrics["average_forgetting"] < naive_forgetting - 0.1


@pytest.mark.parametrize("make", [lambda: MAS(**TINY), lambda: EWC(mode="online", **TINY)])
def test_same_random_state_same_predictions(make, uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    preds = [make().fit(X, y).predict_proba(X) for _ in range(2)]
    np.testing.assert_array_equal(preds[0], preds[1])


@pytest.mark.parametrize(
    "est,match",
    [
        (MAS(lambda_reg=-1), "lambda_reg"),
        (MAS(alpha=1.5), "alpha"),
        (EWC(mode="offline"), "mode"),
        (EWC(decay=2), "decay"),
    ],
)
def test_bad_parameters(est, match, uci_har_small):
    X, y = task(uci_har_small, range(4), n=30)
    with pytest.raises(ValueError, match=match):
        est.partial_fit_task(X, y)
