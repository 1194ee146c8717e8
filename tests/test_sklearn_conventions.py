"""scikit-learn conventions that sklearn's own checks do not pin down (issue 13):
sorted ``classes_`` with scorers, binary ``decision_function``, a declared label
space, full signatures, no global RNG touched, data-driven defaults."""

import inspect
import random
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_iris, make_blobs
from sklearn.exceptions import DataConversionWarning
from sklearn.metrics import get_scorer, log_loss, roc_auc_score
from sklearn.model_selection import cross_val_score

from clestim import ER, ClassIncremental, Naive
from clestim.base import ContinualClassifier
from clestim.nets import MLP

TAB = dict(backbone="mlp", backbone_params={"hidden": (32,)}, max_epochs=10, lr=1e-2)


@pytest.fixture(scope="module")
def blobs4():
    """4 separable classes whose order of first appearance is not sorted."""
    X, y = make_blobs(200, n_features=4, centers=4, cluster_std=1.5, random_state=0)
    y = np.array([2, 0, 3, 1])[y]
    assert list(dict.fromkeys(y.tolist())) != sorted(set(y.tolist()))
    return X.astype(np.float32), y


@pytest.fixture(scope="module")
def fitted4(blobs4):
    X, y = blobs4
    return Naive(**TAB, random_state=0).partial_fit_task(X, y)


def test_classes_sorted_and_scorers_use_them(fitted4, blobs4):
    X, y = blobs4
    est = fitted4
    np.testing.assert_array_equal(est.classes_, [0, 1, 2, 3])
    assert est.task_classes_[0].tolist() == list(dict.fromkeys(y.tolist()))  # stream order
    proba = est.predict_proba(X)
    np.testing.assert_array_equal(est.classes_[proba.argmax(1)], est.predict(X))
    np.testing.assert_array_equal(est.classes_[est.decision_function(X).argmax(1)], est.predict(X))
    assert est.score(X, y) > 0.9
    # scorers index the columns by classes_: their value equals the direct computation
    expected = -log_loss(y, proba, labels=est.classes_)
    assert get_scorer("neg_log_loss")(est, X, y) == pytest.approx(expected)
    assert expected > -0.5
    auc = get_scorer("roc_auc_ovr")(est, X, y)
    assert auc == pytest.approx(roc_auc_score(y, proba, multi_class="ovr")) and auc > 0.95


def test_binary_decision_function_is_the_score_of_classes_1():
    X, y = make_blobs(90, centers=2, random_state=1)
    y = np.where(y == 0, "pos", "neg")  # 'neg' < 'pos': classes_[1] is 'pos'
    est = Naive(**TAB, random_state=0).partial_fit_task(X, y)
    assert est.classes_.tolist() == ["neg", "pos"]
    d = est.decision_function(X)
    proba = est.predict_proba(X)
    assert d.shape == (len(X),)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-d)), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(est.predict(X), np.where(d > 0, "pos", "neg"))
    scores = cross_val_score(clone(est), X, (y == "pos").astype(int), cv=2, scoring="roc_auc")
    assert np.isfinite(scores).all() and scores.min() > 0.9


def test_declared_classes_size_the_head_at_once():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    est = Naive(backbone="mlp", max_epochs=2, random_state=0)
    est.partial_fit_task(X, np.zeros(40, dtype=int), classes=[0, 1])
    assert est.module_.n_classes == 2 and est.classes_.tolist() == [0, 1]
    assert est.predict_proba(X).shape == (40, 2)
    assert min(row["train_loss"] for row in est.history_[0]) > 0  # 2 outputs: CE not 0
    state = {k: v.clone() for k, v in est.module_.state_dict().items()}
    with pytest.raises(ValueError, match=r"labels \[2\] outside the declared classes"):
        est.partial_fit_task(X, np.full(40, 2))
    with pytest.raises(ValueError, match="differs from the classes declared"):
        est.partial_fit_task(X, np.ones(40, dtype=int), classes=[0, 1, 2])
    assert est.n_tasks_seen_ == 1 and est.classes_.tolist() == [0, 1]
    assert all(torch.equal(v, est.module_.state_dict()[k]) for k, v in state.items())
    est.partial_fit_task(X, np.ones(40, dtype=int), classes=[1, 0])  # same set: fine
    assert est.n_tasks_seen_ == 2 and est.module_.n_classes == 2
    with pytest.raises(ValueError, match="not in classes"):
        Naive(backbone="mlp").partial_fit_task(X, np.arange(40) % 3, classes=[0, 1])


def test_initialize_gives_zero_shot_scores_for_declared_classes():
    X = np.random.default_rng(0).normal(size=(10, 3, 16)).astype(np.float32)
    est = Naive(random_state=0).initialize(X, classes=["b", "a", "c"])
    assert est.n_tasks_seen_ == 0 and est.classes_.tolist() == ["a", "b", "c"]
    scores = est.decision_function(X)
    assert scores.shape == (10, 3) and np.isfinite(scores).all()
    assert set(est.predict(X)) <= {"a", "b", "c"}
    with pytest.raises(ValueError, match="outside the declared classes"):
        est.partial_fit_task(X, np.array(["d"] * 10))


def test_every_parameter_visible_and_changed_only_repr():
    sig = inspect.signature(ER)
    params = ER().get_params()
    assert set(sig.parameters) == set(params)
    assert all(p.default is not p.empty for p in sig.parameters.values())
    assert sig.parameters["lr"].default == 1e-3  # the base class's
    assert sig.parameters["batch_size"].default == 32  # ER's own default
    assert "memory_size" in sig.parameters and "params" not in sig.parameters
    assert repr(ER(memory_size=10)) == "ER(memory_size=10)"
    assert repr(ER(batch_size=64, max_epochs=3)) == "ER(batch_size=64, max_epochs=3)"


def _global_rng_states():
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def _assert_same_rng(a, b):
    assert torch.equal(a[0], b[0])
    assert a[1][0] == b[1][0] and np.array_equal(a[1][1], b[1][1]) and a[1][2:] == b[1][2:]
    assert a[2] == b[2]


def test_fit_and_predict_leave_global_rng_alone(blobs4):
    X, y = blobs4
    torch.manual_seed(123)
    before = _global_rng_states()
    est = Naive(**{**TAB, "max_epochs": 2, "dropout": 0.5}, random_state=None).fit(X, y)
    est.predict_proba(X), est.transform(X)
    Naive(**{**TAB, "max_epochs": 2}, random_state=0).partial_fit_task(X, y)
    _assert_same_rng(before, _global_rng_states())
    # results depend on random_state only, not on the global state
    torch.manual_seed(1)
    first = Naive(**{**TAB, "max_epochs": 2, "dropout": 0.5}, random_state=0).fit(X, y)
    torch.manual_seed(2)
    second = Naive(**{**TAB, "max_epochs": 2, "dropout": 0.5}, random_state=0).fit(X, y)
    np.testing.assert_array_equal(first.decision_function(X), second.decision_function(X))


def test_fit_clones_the_stream(blobs4):
    X, y = blobs4
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    est = Naive(**{**TAB, "max_epochs": 1}, stream=stream, random_state=0).fit(X, y)
    assert not hasattr(stream, "task_classes_") and est.stream is stream
    order = list(dict.fromkeys(y.tolist()))
    assert [c.tolist() for c in est.stream_.task_classes_] == [order[:2], order[2:]]


def test_column_y_warns_and_is_ravelled(blobs4):
    X, y = blobs4
    with pytest.warns(DataConversionWarning):
        est = Naive(**{**TAB, "max_epochs": 1}, random_state=0).partial_fit_task(X, y[:, None])
    assert est.classes_.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda X, y: (X, np.linspace(0, 1, len(y))), ValueError, "Unknown label type"),
        (lambda X, y: (X.astype(complex), y), ValueError, "Complex"),
        (lambda X, y: (X[:, :0], y), ValueError, "0 feature"),
        (lambda X, y: (X[:, :, None][:, :, :0], y), ValueError, "at least one entry"),
    ],
)
def test_unfitted_rejections(blobs4, make, error, match):
    X, y = blobs4
    est = Naive()
    with pytest.raises(error, match=match):
        est.fit(*make(X, y))
    assert not hasattr(est, "module_") and not hasattr(est, "n_features_in_")


def test_n_features_in():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 10)
    est = Naive(max_epochs=1, random_state=0).fit(rng.normal(size=(20, 3, 16)), y)
    assert (est.n_features_in_, est.n_timepoints_in_, est.input_shape_) == (3, 16, (3, 16))
    est = Naive(max_epochs=1, random_state=0).fit(rng.normal(size=(20, 5)), y)
    assert (est.n_features_in_, est.n_timepoints_in_) == (5, None)


@pytest.mark.parametrize(
    "shape, expected",
    [((3, 32), "layer"), ((1, 32), "instance"), ((6,), None)],
)
def test_input_norm_auto_chooses_by_the_data(shape, expected):
    X = np.random.default_rng(0).normal(size=(20, *shape)).astype(np.float32)
    est = Naive(max_epochs=1, random_state=0).partial_fit_task(X, np.repeat([0, 1], 10))
    assert est.input_norm_ == expected
    assert est.module_.input_norm.kind == expected


def test_layer_norm_on_one_channel_is_rejected():
    X = np.random.default_rng(0).normal(size=(20, 1, 32)).astype(np.float32)
    with pytest.raises(ValueError, match="single channel that sets every value to 0"):
        Naive(input_norm="layer").fit(X, np.repeat([0, 1], 10))


def test_single_channel_series_learn_with_the_defaults():
    """Digits as (n, 1, 64): 'layer' would zero them (chance); 'auto' z-normalises."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = np.concatenate([np.flatnonzero(y == c)[:40] for c in range(4)])
    X, y = X[keep][:, None, :].astype(np.float32), y[keep]
    # default input_norm and stream; a narrower CNN keeps the test fast
    est = Naive(backbone_params={"channels": (16, 16)}, max_epochs=10, lr=3e-3, random_state=0)
    est.fit(X, y)  # 2 tasks of 2 digits
    assert est.input_norm_ == "instance"
    last = np.isin(y, est.task_classes_[-1])
    assert est.score(X[last], y[last]) > 0.9


@pytest.mark.parametrize("n_classes, n_tasks", [(1, 1), (3, 1), (5, 2)])
def test_default_stream_takes_any_class_count(n_classes, n_tasks):
    X = np.random.default_rng(0).normal(size=(10 * n_classes, 4)).astype(np.float32)
    y = np.repeat(np.arange(n_classes), 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = Naive(backbone="mlp", max_epochs=1, random_state=0).fit(X, y)
    assert est.n_tasks_seen_ == n_tasks and est.classes_.tolist() == list(range(n_classes))
    assert len(est.task_classes_[-1]) == (n_classes if n_classes < 4 else 3)  # odd one last


def test_iris_with_the_default_network_and_stream():
    X, y = load_iris(return_X_y=True)
    est = Naive(max_epochs=30, random_state=0).fit(X, y)
    assert est.n_tasks_seen_ == 1 and isinstance(est.module_.backbone, MLP)
    assert est.input_norm_ is None and est.score(X, y) >= 0.9


def test_channels_last_input_gets_a_hint():
    X = np.random.default_rng(0).normal(size=(20, 128, 9)).astype(np.float32)
    est = Naive()
    with pytest.raises(ValueError, match=r"X.transpose\(0, 2, 1\)"):
        est.fit(X, np.repeat([0, 1], 10))
    assert not hasattr(est, "module_")


def test_subclass_signature_is_generated():
    class Custom(ContinualClassifier):
        def __init__(self, *, alpha=2.0, lr=0.5, **params):
            super().__init__(lr=lr, **params)
            self.alpha = alpha

    sig = inspect.signature(Custom)
    assert sig.parameters["alpha"].default == 2.0 and sig.parameters["lr"].default == 0.5
    assert "random_state" in sig.parameters and repr(Custom(alpha=3.0)) == "Custom(alpha=3.0)"
    assert clone(Custom(alpha=3.0, max_epochs=2)).get_params()["max_epochs"] == 2


def test_benchmark_keeps_tscils_network_explicitly():
    """The data-driven defaults never change a benchmark cell: TSCIL's CNN and LN."""
    from clestim.benchmark import BenchmarkConfig, make_estimator

    config = BenchmarkConfig.from_dict(
        {"datasets": ["basic_motions"], "methods": ["Naive", "ER"],
         "settings": {"input_norm": ["instance"]}}
    )
    for cell in config.cells():
        est = make_estimator(cell, config)
        assert (est.backbone, est.input_norm) == ("cnn", "instance")
    config = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["Naive"]})
    est = make_estimator(config.cells()[0], config)
    assert (est.backbone, est.input_norm) == ("cnn", "layer")


@pytest.mark.parametrize("shape", [(4,), (3, 24)])
def test_a_samples_output_does_not_depend_on_its_batch(shape):
    # CPU kernels for one or two rows round differently from batched ones (AVX-512
    # here): without padding small chunks, 1-row predictions differ in the last bits
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, *shape)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    est = Naive(max_epochs=2, random_state=0, **({"backbone": "mlp"} if len(shape) == 1 else {}))
    est.fit(X, y)
    for method in ("predict_proba", "decision_function", "transform"):
        full = getattr(est, method)(X)
        one_by_one = np.concatenate([getattr(est, method)(X[i : i + 1]) for i in range(len(X))])
        pairs = np.concatenate([getattr(est, method)(X[i : i + 2]) for i in range(0, len(X), 2)])
        np.testing.assert_array_equal(one_by_one, full, err_msg=method)
        np.testing.assert_array_equal(pairs, full, err_msg=method)
