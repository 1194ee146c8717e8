"""The shared task lifecycle: sklearn behaviour, labels, heads, snapshots, bad input."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from helpers import task
from scipy import sparse
from sklearn.base import clone

from clestim import ER, LwF, Naive
from clestim.nets import GrowingLinear
from clestim.nets.backbones import MLP, TransformerEncoder

FAST = dict(max_epochs=3, random_state=0)



def test_growing_head_keeps_old_rows():
    torch.manual_seed(0)
    head = GrowingLinear(8, 2)
    w, b = head.weight.detach().clone(), head.bias.detach().clone()
    head.grow(3)
    assert head.n_classes == 5
    assert torch.equal(head.weight[:2], w) and torch.equal(head.bias[:2], b)
    assert not torch.equal(head.weight[2:], torch.zeros(3, 8))
    head.grow(0)
    assert head.n_classes == 5


def test_learns_above_chance_and_returns_original_labels(uci_har_small):
    names = np.array(["walk", "up", "down", "sit", "stand", "lie"], dtype=object)
    X, y = task(uci_har_small, [0, 3, 5])
    Xt, yt = task(uci_har_small, [0, 3, 5], "test")
    est = Naive(**FAST).partial_fit_task(X, names[y])
    assert list(est.classes_) == sorted(set(names[y]))  # sorted, as np.unique
    pred = est.predict(Xt)
    assert set(pred) <= {"walk", "sit", "lie"}
    assert est.score(Xt, names[yt]) > 0.7  # chance is 1/3
    proba = est.predict_proba(Xt)
    assert proba.shape == (len(Xt), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    assert est.transform(Xt).shape == (len(Xt), 128)
    assert est.n_tasks_seen_ == 1 and [list(c) for c in est.task_classes_] == [
        list(dict.fromkeys(names[y]))
    ]


def test_task_and_snapshot_prediction(uci_har_small):
    est = Naive(**FAST)
    X1, y1 = task(uci_har_small, [0, 1])
    X2, y2 = task(uci_har_small, [2, 3])
    Xt, _ = task(uci_har_small, [0, 1, 2, 3], "test")
    est.partial_fit_task(X1, y1)
    after_first = est.predict(Xt)
    proba_first = est.predict_proba(Xt)
    est.partial_fit_task(X2, y2)
    np.testing.assert_array_equal(est.predict(Xt, after_task=0), after_first)
    np.testing.assert_allclose(est.predict_proba(Xt, after_task=0)[:, :2], proba_first, rtol=1e-5)
    assert (est.predict_proba(Xt, after_task=0)[:, 2:] == 0).all()
    assert set(est.predict(Xt, task=0)) <= {0, 1}
    assert set(est.predict(Xt, task=1)) <= {2, 3}
    with pytest.raises(ValueError, match="after_task"):
        est.predict(Xt, after_task=5)
    with pytest.raises(ValueError, match="task must be"):
        est.predict(Xt, task=2)


def test_snapshots_on_disk(uci_har_small, tmp_path):
    est = Naive(max_epochs=1, random_state=0, snapshot_dir=tmp_path)
    for classes in ([0, 1], [2, 3]):
        est.partial_fit_task(*task(uci_har_small, classes))
    (fit_dir,) = tmp_path.iterdir()  # a folder of this fit's own
    assert fit_dir.name.startswith("fit-")
    assert sorted(p.name for p in fit_dir.iterdir()) == ["task_000.pt", "task_001.pt"]
    Xt, _ = task(uci_har_small, [0, 1], "test")
    in_memory = Naive(max_epochs=1, random_state=0)
    for classes in ([0, 1], [2, 3]):
        in_memory.partial_fit_task(*task(uci_har_small, classes))
    expected = in_memory.predict(Xt, after_task=0)
    np.testing.assert_array_equal(est.predict(Xt, after_task=0), expected)
    # a clone, and a refit, with the same snapshot_dir never touch est's files
    blobs = {p: open(p, "rb").read() for p in est.snapshots_}
    other = clone(est).set_params(random_state=1)
    for classes in ([0, 1], [2, 3]):
        other.partial_fit_task(*task(uci_har_small, classes))
    other.partial_fit_task(*task(uci_har_small, [0, 1]))
    refit = clone(est)
    refit.partial_fit_task(*task(uci_har_small, [2, 3]))
    assert {p: open(p, "rb").read() for p in est.snapshots_} == blobs
    assert len(list(tmp_path.iterdir())) == 3
    assert not set(est.snapshots_) & set(other.snapshots_ + refit.snapshots_)
    fresh = pickle.loads(pickle.dumps(est))  # no cached network: reads the files
    np.testing.assert_array_equal(fresh.predict(Xt, after_task=0), expected)
    other_first = open(other.snapshots_[0], "rb").read()
    assert other_first != blobs[est.snapshots_[0]]  # an overwrite would have changed est


def test_same_random_state_same_predictions(uci_har_small):
    Xt, _ = task(uci_har_small, [0, 1, 2, 3], "test")

    def run(seed):
        est = ER(max_epochs=2, random_state=seed, memory_size=40)
        for classes in ([0, 1], [2, 3]):
            est.partial_fit_task(*task(uci_har_small, classes))
        return est.predict_proba(Xt)

    first = run(3)
    np.testing.assert_array_equal(first, run(3))
    assert not np.array_equal(first, run(4))


def test_clone_pickle_and_params(uci_har_small):
    est = ER(memory_size=50, max_epochs=1, lr=2e-3)
    params = est.get_params()
    assert params["memory_size"] == 50 and params["lr"] == 2e-3 and params["batch_size"] == 32
    assert params["patience"] == 20 and Naive().get_params()["patience"] == 5
    est.partial_fit_task(*task(uci_har_small, [0, 1]))
    fresh = clone(est)
    assert not hasattr(fresh, "module_") and fresh.get_params() == est.get_params()
    restored = pickle.loads(pickle.dumps(est))
    Xt, _ = task(uci_har_small, [0, 1], "test")
    np.testing.assert_array_equal(restored.predict_proba(Xt), est.predict_proba(Xt))
    restored.partial_fit_task(*task(uci_har_small, [2, 3]))  # keeps learning after a reload
    assert list(restored.classes_) == [0, 1, 2, 3]


def test_architecture_change_is_not_silently_reused(uci_har_small):
    est = Naive(max_epochs=1, random_state=0).partial_fit_task(*task(uci_har_small, [0, 1]))
    est.set_params(norm="batch")
    with pytest.raises(ValueError, match="norm changed"):
        est.partial_fit_task(*task(uci_har_small, [2, 3]))
    est.set_params(lr=5e-4)  # training hyperparameters may change between tasks
    X, y = task(uci_har_small, [0, 1, 2, 3])
    est.fit(X, y)  # fit starts over with the new architecture
    assert est.n_tasks_seen_ == 2
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in est.module_.modules())


def test_fit_runs_the_default_stream(uci_har_small):
    X, y = uci_har_small["train"]
    est = Naive(max_epochs=1, random_state=0).fit(X, y)
    assert est.n_tasks_seen_ == 3
    order = list(dict.fromkeys(y.tolist()))  # classes in order of first appearance
    assert [c.tolist() for c in est.task_classes_] == [order[:2], order[2:4], order[4:]]


def test_validation_split_and_early_stopping(uci_har_small):
    X, y = task(uci_har_small, [0, 1])
    est = Naive(max_epochs=40, patience=2, lr=3e-3, random_state=0).partial_fit_task(X, y)
    history = est.history_[0]
    losses = [row["valid_loss"] for row in history]
    best = int(np.argmin(losses))
    assert len(history) < 40, "should stop early"
    assert len(history) == best + 1 + 2  # stopped `patience` epochs after the best
    train_idx, valid_idx = est._validation_split(np.repeat([0, 1], [120, 7]))
    assert len(valid_idx) == (120 - int(0.9 * 120)) + (7 - int(0.9 * 7))
    assert len(np.intersect1d(train_idx, valid_idx)) == 0


# the learning rate each schedule sets: tests/test_schedules.py


def test_tiny_task_trains_without_validation():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(2, 3, 16)).astype(np.float32), np.array([0, 1])
    with pytest.warns(UserWarning, match="too small for a validation split"):
        est = Naive(max_epochs=2, random_state=0).partial_fit_task(X, y)
    assert len(est.history_[0]) == 2


@pytest.mark.parametrize("backbone, cls", [("transformer", TransformerEncoder), ("mlp", MLP)])
def test_other_backbones(backbone, cls, uci_har_small):
    params = {"d_model": 32, "n_layers": 1} if backbone == "transformer" else {}
    est = LwF(backbone=backbone, backbone_params=params, max_epochs=2, lr=3e-3, batch_size=32,
              input_norm="layer", random_state=0)
    est.partial_fit_task(*task(uci_har_small, [0, 3]))
    est.partial_fit_task(*task(uci_har_small, [1, 5]))
    assert isinstance(est.module_.backbone, cls) and isinstance(est.teacher_.backbone, cls)
    # the first task was learned: always predicting one class scores 0.5
    # (transformer 0.84, MLP 0.86 after 2 epochs)
    X0, y0 = task(uci_har_small, [0, 3], "test")
    assert np.mean(est.predict(X0, after_task=0) == y0) > 0.7
    # the teacher is the network after the first task, so the distillation term works
    X = torch.from_numpy(X0[:16])
    with torch.no_grad():
        old, new = est.teacher_(X), est.module_(X)[:, :2]
    assert old.shape == new.shape and (old - new).abs().max() > 1e-3
    teacher = est.teacher_.state_dict()
    assert all(torch.equal(teacher[k], v) for k, v in est.snapshots_[0].items())


def test_user_module_backbone(uci_har_small):
    module = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(9 * 128, 16), torch.nn.ReLU())
    est = Naive(backbone=module, max_epochs=2, random_state=0)
    est.partial_fit_task(*task(uci_har_small, [0, 1]))
    assert est.transform(uci_har_small["test"][0][:4]).shape == (4, 16)
    assert est.module_.backbone is not module  # the user's module is never trained in place


class TestBadInput:
    @pytest.fixture(scope="class")
    def fitted(self, uci_har_small):
        return Naive(max_epochs=1, random_state=0).partial_fit_task(*task(uci_har_small, [0, 1]))

    @pytest.mark.parametrize(
        "make, error, match",
        [
            (lambda X, y: (X[:, 0], y), ValueError, "3-D"),
            (lambda X, y: (X[:, :5], y), ValueError, "X has 5 features, but Naive is expecting 9"),
            (lambda X, y: (X[:, :, :64], y), ValueError, "per-sample shape"),
            (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), y),
             ValueError, "NaN"),
            (lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.inf, X), y),
             ValueError, "infinity"),
            (lambda X, y: (X[:0], y[:0]), ValueError, "0 sample"),
            (lambda X, y: (X, y[:-1]), ValueError, "labels but X has"),
            (lambda X, y: (X, np.c_[y, y]), ValueError, "1d array"),
            (lambda X, y: (X, np.where(np.arange(len(y)) == 0, np.nan, y.astype(float))),
             ValueError, "NaN"),
            (lambda X, y: ([["a"]] * len(y), y), ValueError, "convert"),
            (lambda X, y: (X.astype(complex), y), ValueError, "Complex data not supported"),
            (lambda X, y: (sparse.csr_matrix(X[:, 0]), y), TypeError, "dense data is required"),
            (lambda X, y: (X, y + 0.5), ValueError, "Unknown label type: continuous"),
            (lambda X, y: (X, np.array(["a", "b"])[y - 2]), ValueError, "cannot be mixed"),
            (lambda X, y: (X, y, None, [2, 3]), ValueError, "leaves out classes already learned"),
        ],
    )
    def test_rejected_and_state_unchanged(self, fitted, uci_har_small, make, error, match):
        X, y = task(uci_har_small, [2, 3])
        Xt = uci_har_small["test"][0][:20]
        before = fitted.predict_proba(Xt)
        state = {k: v.clone() for k, v in fitted.module_.state_dict().items()}
        with pytest.raises(error, match=match):
            fitted.partial_fit_task(*make(X, y))
        assert fitted.n_tasks_seen_ == 1 and list(fitted.classes_) == [0, 1]
        assert all(torch.equal(v, fitted.module_.state_dict()[k]) for k, v in state.items())
        np.testing.assert_array_equal(fitted.predict_proba(Xt), before)

    def test_bad_parameters(self, uci_har_small):
        X, y = task(uci_har_small, [0, 1])
        for params, match in [
            ({"batch_size": 0}, "batch_size"),
            ({"lr_schedule": "cosine"}, "lr_schedule"),
            ({"norm": "group"}, "norm"),
            ({"backbone": "resnet"}, "backbone"),
            ({"validation_fraction": 1.0}, "validation_fraction"),
        ]:
            with pytest.raises(ValueError, match=match):
                Naive(**params).partial_fit_task(X, y)
        with pytest.raises(ValueError, match="memory_size"):
            ER(memory_size=1.5).partial_fit_task(X, y)
        with pytest.raises(ValueError, match="memory_update"):
            ER(memory_update="sometimes").partial_fit_task(X, y)

    def test_predict_before_fit(self, uci_har_small):
        from sklearn.exceptions import NotFittedError

        with pytest.raises(NotFittedError):
            Naive().predict(uci_har_small["test"][0][:2])


def test_verbose_progress_bar(uci_har_small, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Naive(max_epochs=1, verbose=1, random_state=0).partial_fit_task(
            *task(uci_har_small, [0, 1])
        )
    assert "Naive task 1" in capsys.readouterr().err
