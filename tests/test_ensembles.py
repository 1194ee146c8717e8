"""ENS, ENSGEN, ENSGENDEL (Szadkowski et al. 2019) and the per-base-set evaluation."""

import inspect
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

from clestim import ENS, ENSGEN, ENSGENDEL, BasicScenario, ContinualClassifier, Naive
from clestim.nets.ensemble import Autoencoder, subtract_neighbourhoods
from clestim.scenarios import (
    base_set_accuracy,
    base_set_label,
    evaluate_basic_scenario,
    subsample_base_sets,
)

TINY = dict(hidden=(32,), lr=1e-3, batch_size=64, random_state=0)
TINY_GEN = dict(TINY, autoencoder_hidden=(32,), latent=4, n_generated=100, theta_ae=1e9)
LEARNERS = {
    "ENS": lambda **kw: ENS(**{"max_epochs": 15, **TINY, **kw}),
    "ENSGEN": lambda **kw: ENSGEN(**{"max_epochs": 15, **TINY_GEN, **kw}),
    "ENSGENDEL": lambda **kw: ENSGENDEL(**{"max_epochs": 15, **TINY_GEN, **kw}),
}
needs_classes = pytest.mark.skipif(
    "classes" not in inspect.signature(ContinualClassifier.partial_fit_task).parameters,
    reason="needs the declared label space partial_fit_task(..., classes=)",
)


@pytest.fixture(scope="module")
def mnist(shared_data):
    """Real MNIST digits 0, 1, 2: 100 train / 100 test images each, 2x2-average-pooled
    to 14 x 14 (fast), pixels in [0, 1]."""
    if not (shared_data / "mnist.npz").is_file():
        pytest.skip("mnist.npz not found")
    rng = np.random.default_rng(0)
    out = {}
    with np.load(shared_data / "mnist.npz") as d:
        for part, n in (("train", 100), ("test", 100)):
            X, y = d[f"X_{part}"], d[f"y_{part}"]
            idx = np.sort(np.concatenate(
                [rng.choice(np.flatnonzero(y == c), n, replace=False) for c in (0, 1, 2)]))
            pooled = X[idx].reshape(len(idx), 14, 2, 14, 2).mean((2, 4)) / 255.0
            out[part] = (pooled.reshape(len(idx), -1).astype(np.float32), y[idx])
    return out


def _digits(data, digits):
    X, y = data
    keep = np.isin(y, digits)
    return X[keep], y[keep]


def _state(est):
    return {k: v.clone() for k, v in est.module_.state_dict().items()}


# ---------------------------------------------------------------- learning
@pytest.mark.parametrize("name", ["ENS", "ENSGEN", "ENSGENDEL", "SNG"])
def test_learns_a_two_label_task(mnist, name):
    X, y = _digits(mnist["train"], (0, 2))
    Xt, yt = _digits(mnist["test"], (0, 2))
    if name == "SNG":
        est = Naive(backbone="mlp", backbone_params={"hidden": (32,)}, norm=None,
                    input_norm=None, max_epochs=8, random_state=0)
    else:
        est = LEARNERS[name]()
    est.partial_fit_task(X, np.where(y == 0, "zero", "two"))
    assert np.mean(est.predict(Xt) == np.where(yt == 0, "zero", "two")) >= 0.9
    proba = est.predict_proba(Xt)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)


@needs_classes
def test_ensgen_keeps_t1_better_than_ens_in_add(mnist):
    # ADD-02: T1 zeros as L1, T2 twos as L2. ENS's f_L1 sees only negatives in T2 and
    # forgets; ENSGEN's f_L1 gets its autoencoder's zeros as positives.
    scenario = BasicScenario("ADD", assignment=(0, 2))
    small = dict(hidden=(32,), lr=1e-3, batch_size=32, max_epochs=80, random_state=0)
    learners = {"ENS": ENS(**small),
                "ENSGEN": ENSGEN(autoencoder_hidden=(64,), latent=8, n_generated=200,
                                 theta_ae=3.0, **small)}
    c10 = {name: evaluate_basic_scenario(est, scenario, *mnist["train"], *mnist["test"])
           ["C10"].item() for name, est in learners.items()}
    assert c10["ENSGEN"] >= 0.85
    assert c10["ENSGEN"] > c10["ENS"] + 0.5


def test_every_unit_trains_and_grows_per_label(mnist):
    # INC's T2 brings a third label; units of absent labels still train (negatives only)
    X, y = mnist["train"]
    est = ENS(max_epochs=3, **TINY)
    est.partial_fit_task(X[y != 2], np.where(y[y != 2] == 0, "a", "b"))
    est.partial_fit_task(X[y == 2], np.full((y == 2).sum(), "c"))
    assert est.module_.n_classes == 3
    trained = {h["unit"]: h for h in est.history_[1]}
    assert set(trained) == {0, 1, 2}
    a, c = est._encode(["a", "c"])
    assert trained[a]["n_positive"] == 0 and trained[a]["n_negative"] == (y == 2).sum()
    assert trained[c]["n_positive"] == (y == 2).sum() and trained[c]["n_negative"] == 0
    # the authors' code trains only the labels present: unit a keeps its T1 weights
    present = ENS(max_epochs=3, train_units="present", **TINY)
    present.partial_fit_task(X[y != 2], np.where(y[y != 2] == 0, "a", "b"))
    unit_a = {k: v.clone() for k, v in present.module_.units[a].state_dict().items()}
    present.partial_fit_task(X[y == 2], np.full((y == 2).sum(), "c"))
    assert [h["unit"] for h in present.history_[1]] == [c]
    for k, v in present.module_.units[a].state_dict().items():
        torch.testing.assert_close(v, unit_a[k])
    with pytest.raises(ValueError, match="train_units must be 'all' or 'present'"):
        clone(present).set_params(train_units="absent").partial_fit_task(X, y)


# ---------------------------------------------------------- pinned rules
def test_ens_loss_and_acceptance_rule(mnist):
    X, y = _digits(mnist["train"], (0, 2))
    est = ENS(max_epochs=4, **TINY).partial_fit_task(X, y)
    # the recorded loss is the mean BCE of f_l over the unit's positives and negatives
    z = est._head_scores(X)  # each unit's logit, columns in unit (head) order
    unit_label = {est._encode([c])[0]: c for c in est.classes_}
    for record in est.history_[0]:
        label = unit_label[record["unit"]]
        col = record["unit"]
        target = (y == label).astype(float)
        p = 1 / (1 + np.exp(-z[:, col].astype(float)))
        bce = -np.mean(target * np.log(p) + (1 - target) * np.log(1 - p))
        assert record["classifier"] == pytest.approx(bce, rel=1e-4)
        assert record["accepted"] == (bce < est.theta)
    # accepted before the first epoch: no training at all
    lazy = ENS(max_epochs=4, **{**TINY, "theta": 1e6}).partial_fit_task(X, y)
    assert all(r["epochs"] == 0 and r["accepted"] for r in lazy.history_[0])
    # the cap: a threshold no loss reaches runs exactly max_epochs epochs
    strict = ENS(max_epochs=3, **{**TINY, "theta": 1e-12}).partial_fit_task(X, y)
    assert all(r["epochs"] == 3 and not r["accepted"] for r in strict.history_[0])


def test_ensgen_autoencoder_loss_and_generation_filter(mnist):
    X, y = _digits(mnist["train"], (0, 2))
    est = ENSGEN(max_epochs=3, **TINY_GEN).partial_fit_task(X, y)
    ae = est.module_.autoencoders[0]
    with torch.no_grad():
        pos = torch.as_tensor(X[y == 0])
        sse = ((ae(pos) - pos) ** 2).sum(1).mean().item()
    assert est.history_[0][0]["autoencoder"] == pytest.approx(sse, rel=1e-4)
    # acceptance needs both losses under their thresholds
    assert not est._accepted({"classifier": 0.05, "autoencoder": 2e9})
    assert not est._accepted({"classifier": 0.2, "autoencoder": 1.0})
    assert est._accepted({"classifier": 0.05, "autoencoder": 1.0})
    # generate: decode uniform latent draws, keep those f_l accepts (logit > 0)
    est._generator = torch.Generator().manual_seed(5)
    kept = est.generate(0, 300)
    z = torch.rand(300, 4, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        decoded = ae.decoder(z)
        expected = decoded[est.module_.unit_logit(0, decoded) > 0]
    assert 0 < len(kept) <= 300
    torch.testing.assert_close(kept, expected)


def test_subtract_neighbourhoods_on_constructed_points():
    d = 16
    centers = torch.zeros(2, d)
    centers[1] += 1.0
    # RMS distances to center 0: 0.05, 0.0999, 0.1 (kept: not < eps), 0.3; one near center 1
    points = torch.stack([torch.full((d,), v) for v in (0.05, 0.0999, 0.1, 0.3, 0.95)])
    keep = subtract_neighbourhoods(points, centers, 0.1, chunk=1)
    assert keep.tolist() == [False, False, True, True, False]
    assert subtract_neighbourhoods(points, centers[:0], 0.1).all()


def test_ensgendel_deletes_exactly_generated_points_near_other_labels():
    rng = np.random.default_rng(0)
    X = rng.random((40, 4)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    est = ENSGENDEL(max_epochs=1, epsilon=0.1, **{**TINY_GEN, "n_generated": 5})
    est.partial_fit_task(X, y)
    new_X = np.array([[0.0, 0, 0, 0], [1.0, 1, 1, 1]], dtype=np.float32)  # labels 0, 1
    # generated samples of label 0: near the new sample of label 1 or not
    gen0 = torch.tensor([[1.0, 1, 1, 1.15], [1.0, 1, 1, 1.25], [0.0, 0, 0, 0]])
    gen1 = torch.tensor([[0.0, 0, 0, 0.1], [0.5, 0.5, 0.5, 0.5], [1.0, 1, 1, 1]])
    est.generate = lambda label: (gen0, gen1)[label]
    est._before_task(new_X, np.array([0, 1]), None)
    # ||(0,0,0,.15)||/2 = 0.075 < 0.1: deleted; 0.125 kept; own-label neighbours kept
    torch.testing.assert_close(est._generated[0], gen0[[1, 2]])
    torch.testing.assert_close(est._generated[1], gen1[[1, 2]])
    assert [est._generation_log[k]["n_deleted"] for k in (0, 1)] == [1, 1]


# ------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", list(LEARNERS))
def test_bad_input_leaves_the_model_unchanged(mnist, name):
    X, y = _digits(mnist["train"], (0, 2))
    est = LEARNERS[name](max_epochs=2).partial_fit_task(X, y)
    before, classes = _state(est), est.classes_.copy()
    bad = X.copy()
    bad[0, 3] = np.nan
    inf = X.copy()
    inf[1, 0] = np.inf
    for Xb, match in ((X[:, :-1], "features"), (bad, "NaN"), (inf, "infinity")):
        with pytest.raises(ValueError, match=match):
            est.partial_fit_task(Xb, y)
    for param in ["theta"] + (["theta_ae"] if name != "ENS" else []) + (
            ["epsilon"] if name == "ENSGENDEL" else []):
        for value in (0, -1.0):
            with pytest.raises(ValueError, match=param):
                clone(est).set_params(**{param: value}).partial_fit_task(X, y)
            est.set_params(**{param: value})
            with pytest.raises(ValueError, match=param):
                est.partial_fit_task(X, y)
            est.set_params(**{param: LEARNERS[name]().get_params()[param]})
    assert est.n_tasks_seen_ == 1 and list(est.classes_) == list(classes)
    for k, v in _state(est).items():
        torch.testing.assert_close(v, before[k])


def test_ens_rejects_a_single_label_task_without_other_labels(mnist):
    X, y = _digits(mnist["train"], (0,))
    est = ENS(**TINY)
    with pytest.raises(ValueError, match="single label .* no negatives"):
        est.partial_fit_task(X, y)
    assert not hasattr(est, "module_")
    # once another label is known, a single-label task is fine
    X2, y2 = _digits(mnist["train"], (1, 2))
    est.set_params(max_epochs=1).partial_fit_task(X2, y2).partial_fit_task(X, y)
    assert est.module_.n_classes == 3


# ------------------------------------------------- clone, pickle, seeds
def test_reproducible_clone_pickle_and_snapshots(mnist):
    X, y = mnist["train"]
    Xt = mnist["test"][0]
    first, second = y != 2, y == 2

    def run():
        est = ENSGENDEL(max_epochs=2, **TINY_GEN)
        est.partial_fit_task(X[first], y[first])
        after_t1 = est._head_scores(Xt)  # per unit: binary decision_function is 1-D
        est.partial_fit_task(X[second | (y == 0)], y[second | (y == 0)])
        return est, after_t1

    a, a_t1 = run()
    b, _ = run()
    np.testing.assert_array_equal(a.decision_function(Xt), b.decision_function(Xt))
    # a snapshot taken before label 2's unit existed still loads
    old = a._encode([0, 1])  # the units of task 1
    snapshot = a._head_scores(Xt, after_task=0)
    np.testing.assert_allclose(snapshot[:, old], a_t1[:, old])
    assert np.isneginf(snapshot[:, a._encode([2])[0]]).all()
    restored = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(restored.predict(Xt), a.predict(Xt))
    c = clone(a)
    assert c.get_params() == a.get_params() and not hasattr(c, "module_")
    assert {"theta", "theta_ae", "epsilon", "n_generated", "latent", "hidden"} <= set(
        c.get_params())


# --------------------------------------------------------- evaluation
class _Oracle:
    """Predicts the label each training sample had in the last task it was seen in."""

    def partial_fit_task(self, X, y, groups=None, classes=None):
        self.table = {**getattr(self, "table", {}), **{x.tobytes(): v for x, v in zip(X, y)}}
        return self

    def predict(self, X):
        return np.array([self.table.get(x.tobytes(), -1) for x in X])


def test_base_set_labels_and_oracle_scores():
    X = np.arange(30, dtype=np.float32).reshape(-1, 1)
    y = np.repeat([0, 2, 1], [10, 8, 12])
    inc = BasicScenario("INC", assignment=(0, 2, 1))
    row = evaluate_basic_scenario(_Oracle(), inc, X, y, X, y, clone_estimator=False)
    assert base_set_label(inc, "C21", 0) == 2 and base_set_label(inc, "C21", 1) == 1
    assert base_set_label(inc, "C10", 1) == 1
    r = row.iloc[0]
    assert r["T1 after T1"] == 1.0 and r["T2 after T2"] == 1.0
    assert r["T1 after T2"] == pytest.approx(10 / 22)  # C10 kept, C21 relabelled
    assert (r["C10"], r["C02"], r["C21"]) == (1.0, 1.0, 1.0)
    assert np.isnan(r["C01"]) and np.isnan(r["C12"]) and r["assignment"] == "021"
    assert base_set_accuracy(_Oracle().partial_fit_task(X, np.ones(30)), inc, X, y, "C02") == 0
    with pytest.raises(ValueError, match="base sets"):
        base_set_label(inc, "C12")


def test_unequal_base_set_sizes():
    y = np.repeat([0, 2, 1, 5], [10, 8, 12, 3])
    sep = BasicScenario("SEP", assignment=(0, 2, 1))
    list(sep.split(None, y))
    idx = subsample_base_sets(sep, y, {"C10": 4, "C12": 0.5}, random_state=0)
    counts = {c: int(np.sum(y[idx] == c)) for c in (0, 2, 1, 5)}
    assert counts == {0: 4, 2: 8, 1: 6, 5: 3}
    np.testing.assert_array_equal(idx, subsample_base_sets(sep, y, {"C10": 4, "C12": 0.5}, 0))
    for sizes in ({"C21": 3}, {"C10": 1.5}, {"C10": -1}):
        with pytest.raises(ValueError):
            subsample_base_sets(sep, y, sizes)
    row = evaluate_basic_scenario(_Oracle(), sep, np.arange(33.0)[:, None], y,
                                  np.arange(33.0)[:, None], y, sizes={"C10": 4},
                                  declare_labels=False, random_state=0,
                                  clone_estimator=False)
    assert row["C10"].item() == pytest.approx(4 / 10)  # unseen C10 test samples miss


def test_autoencoder_loss_is_summed_squared_error():
    x = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    r = torch.tensor([[0.5, 1.0], [0.0, 0.0]])
    assert Autoencoder.loss(x, r).item() == pytest.approx((0.25 + 2.0) / 2)
    assert Autoencoder.loss(x, r, "none").tolist() == [0.25, 2.0]
