"""Integration: real clestim estimators with scikit-learn, sktime, joblib and Dask.

Training is kept tiny (sklearn digits, a small MLP, 1-2 epochs per task); the
assertions check invariants that hold for any trained weights: the accuracy
matrix a scorer rebuilds from snapshots equals the one measured live, searches
agree across joblib backends, and fit equals task-by-task learning.
"""

import json
import pickle

import numpy as np
import pytest
from joblib import parallel_backend
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_validate

from clestim import ER, Naive
from clestim.benchmark import available_methods
from clestim.evaluation import evaluate_stream
from clestim.metrics import average_forgetting, make_stream_scorer, snapshot_accuracy_matrix
from clestim.model_selection import ContinualGridSearch
from clestim.pipeline import ContinualPipeline, make_continual_pipeline
from clestim.streams import ClassIncremental

SMALL_MLP = dict(
    backbone="mlp",
    backbone_params={"hidden": (32,)},
    input_norm=None,
    max_epochs=2,
    patience=None,
    validation_fraction=0.0,
    batch_size=32,
)


@pytest.fixture(scope="module")
def digits6():
    """Digits 0-5 (3 tasks of 2 classes), 40 train / 20 test per class."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    tr, te = [], []
    for c in range(6):
        idx = rng.permutation(np.flatnonzero(y == c))
        tr.append(idx[:40])
        te.append(idx[40:60])
    tr, te = np.sort(np.concatenate(tr)), np.sort(np.concatenate(te))
    return X[tr], y[tr], X[te], y[te]


def _manual_matrix(est, X, y):
    """The accuracy matrix rebuilt by hand from predict(after_task=i)."""
    T = est.n_tasks_seen_
    A = np.zeros((T, T))
    for i in range(T):
        pred = est.predict(X, after_task=i)
        for j, classes in enumerate(est.task_classes_):
            m = np.isin(y, classes)
            A[i, j] = np.mean(pred[m] == y[m])
    return A


def test_scorer_matrix_equals_live_evaluation(digits6):
    Xtr, ytr, Xte, yte = digits6
    stream = ClassIncremental(classes_per_task=2, random_state=1)
    est = Naive(**SMALL_MLP, random_state=0)
    live = evaluate_stream(est, stream, Xtr, ytr, Xte, yte, return_estimator=True)
    fitted = live.estimator
    rebuilt = snapshot_accuracy_matrix(fitted, Xte, yte)
    np.testing.assert_array_equal(rebuilt, live.accuracy_matrix)
    np.testing.assert_array_equal(rebuilt, _manual_matrix(fitted, Xte, yte))
    # the learnt tasks follow the stream; unseen classes are never predicted
    assert [sorted(c) for c in fitted.task_classes_] == [sorted(c) for c in live.task_classes]
    assert live.accuracy_matrix[0, 1] == 0.0 and live.accuracy_matrix[0, 2] == 0.0
    scorer = make_stream_scorer("average_forgetting")
    assert scorer(fitted, Xte, yte) == -average_forgetting(live.accuracy_matrix)
    # fit(X, y) with the same stream and seed learns the same weights
    refit = clone(est).set_params(stream=stream).fit(Xtr, ytr)
    np.testing.assert_array_equal(snapshot_accuracy_matrix(refit, Xte, yte), rebuilt)


def test_grid_search_with_forgetting_scorer_n_jobs(digits6):
    Xtr, ytr, _, _ = digits6
    est = ER(**SMALL_MLP, memory_size=0.1, random_state=0, stream=ClassIncremental(random_state=0))
    scoring = {
        "forgetting": make_stream_scorer("average_forgetting"),
        "acc": make_stream_scorer("average_accuracy"),
    }
    grid = {"lr": [1e-3, 1e-2], "replay_batch_size": [16]}
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    search = GridSearchCV(est, grid, scoring=scoring, refit="forgetting", cv=cv, n_jobs=2)
    search.fit(Xtr, ytr)
    res = search.cv_results_
    assert len(res["params"]) == 2
    assert np.all(np.isfinite(res["mean_test_forgetting"]))
    assert np.all((res["mean_test_acc"] > 0) & (res["mean_test_acc"] <= 1))
    best = int(np.argmax(res["mean_test_forgetting"]))  # least forgetting
    assert search.best_params_ == res["params"][best]
    assert search.best_estimator_.n_tasks_seen_ == 3
    # the same search in one process gives the same scores (seeded estimator)
    serial = GridSearchCV(clone(est), grid, scoring=scoring, refit=False, cv=cv, n_jobs=1)
    serial.fit(Xtr, ytr)
    np.testing.assert_array_equal(
        serial.cv_results_["split0_test_forgetting"], res["split0_test_forgetting"]
    )


def test_cross_validate_stream_scorers(digits6):
    Xtr, ytr, _, _ = digits6
    est = Naive(**SMALL_MLP, random_state=0, stream=ClassIncremental(shuffle=False))
    out = cross_validate(
        est,
        Xtr,
        ytr,
        cv=StratifiedKFold(2, shuffle=True, random_state=0),
        scoring={
            "A_T": make_stream_scorer("average_accuracy"),
            "A_cur": make_stream_scorer("learning_accuracy"),
            "F_T": make_stream_scorer("average_forgetting", convention="tscil"),
        },
        n_jobs=2,
    )
    for key in ("test_A_T", "test_A_cur", "test_F_T"):
        assert out[key].shape == (2,) and np.all(np.isfinite(out[key]))
    # tscil forgetting is never negative, so the (negated) scorer is never positive
    assert np.all(out["test_F_T"] <= 0)


_SCORED_IN = []


def _recording_scorer(estimator, X, y):
    """Average accuracy, noting the thread it ran in (module level: pickled by reference)."""
    import threading

    _SCORED_IN.append(threading.current_thread().name)
    return make_stream_scorer("average_accuracy")(estimator, X, y)


def test_dask_backend_on_local_cluster(digits6):
    distributed = pytest.importorskip("distributed")
    Xtr, ytr, _, _ = digits6
    est = Naive(**SMALL_MLP, random_state=0, stream=ClassIncremental(random_state=0))
    grid = {"lr": [1e-3, 1e-2]}
    cv = StratifiedKFold(2, shuffle=True, random_state=0)
    accuracy = make_stream_scorer("average_accuracy")
    # process workers: torch's global RNG is per process, so each fit is reproducible
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
        distributed.get_task_stream(client) as tasks,
    ):
        with parallel_backend("dask"):
            search = GridSearchCV(est, grid, scoring=accuracy, cv=cv, n_jobs=-1, refit=False)
            search.fit(Xtr, ytr)
        assert len(client.scheduler_info()["workers"]) == 2
    assert len(tasks.data) >= 4  # the 2 x 2 fits ran on the cluster's workers
    local = GridSearchCV(clone(est), grid, scoring=accuracy, cv=cv, n_jobs=1, refit=False)
    local.fit(Xtr, ytr)
    np.testing.assert_array_equal(
        search.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"]
    )


def test_continual_grid_search_validation_then_experiment():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    idx = np.sort(np.concatenate([rng.permutation(np.flatnonzero(y == c))[:30] for c in range(10)]))
    X, y = X[idx], y[idx]
    stream = ClassIncremental(classes_per_task=2, random_state=3)  # 5 tasks
    search = ContinualGridSearch(
        Naive(**SMALL_MLP, random_state=0),
        {"lr": [1e-3, 3e-3]},
        stream=stream,
        scoring="average_forgetting",
        random_state=0,
    )
    search.fit(X, y)
    groups = stream.task_classes(y)
    # tuned on the first 3 tasks, refitted on the last 2
    assert [sorted(c) for c in search.validation_stream_.task_classes_] == [
        sorted(c) for c in groups[:3]
    ]
    assert [sorted(c) for c in search.best_estimator_.task_classes_] == [
        sorted(c) for c in groups[3:]
    ]
    vals = np.array(search.cv_results_["val_average_forgetting"])
    assert search.best_score_ == vals.min()  # forgetting is minimised
    assert search.cv_results_["rank_test_score"][search.best_index_] == 1
    rebuilt = snapshot_accuracy_matrix(search.best_estimator_, X, y)
    assert rebuilt.shape == (2, 2)
    assert search.score(X, y) == -average_forgetting(rebuilt)
    exp_classes = np.concatenate(groups[3:])
    assert set(np.unique(search.predict(X))) <= set(exp_classes.tolist())


def test_continual_grid_search_resumes_from_its_saved_candidates(tmp_path, monkeypatch):
    from clestim import model_selection

    X, y = load_digits(return_X_y=True)
    X, y = (X[y < 4][:300] / 16.0).astype(np.float32), y[y < 4][:300]

    def search(estimator=None, X=X):
        est = estimator or Naive(**SMALL_MLP, random_state=0)
        return ContinualGridSearch(
            est, {"lr": [1e-3, 1e-2, 3e-2]}, refit=False, random_state=0,
            stream=ClassIncremental(classes_per_task=2, random_state=0),
            checkpoint_dir=tmp_path / "saved",
        ).fit(X, y)

    first = search()
    saved = {json.loads(f.read_text())["params"]["lr"]: f
             for f in (tmp_path / "saved").glob("*.json")}
    assert first.n_resumed_ == 0 and sorted(saved) == ["0.001", "0.01", "0.03"]
    trained = []
    evaluate = model_selection._evaluate_candidate
    monkeypatch.setattr(model_selection, "_evaluate_candidate",
                        lambda est, params, *rest: trained.append(params) or evaluate(
                            est, params, *rest))
    saved["0.01"].unlink()  # as if the search had been killed before this candidate
    again = search()
    assert trained == [{"lr": 1e-2}] and again.n_resumed_ == 2
    for name in ("params", "rank_test_score", "val_average_accuracy", "val_average_forgetting"):
        assert again.cv_results_[name] == first.cv_results_[name]
    reused = [i for i, p in enumerate(first.cv_results_["params"]) if p["lr"] != 1e-2]
    assert [again.cv_results_["fit_time"][i] for i in reused] == [
        first.cv_results_["fit_time"][i] for i in reused]
    # another estimator setting or other data never reuses a saved result
    trained.clear()
    search(Naive(**{**SMALL_MLP, "max_epochs": 1}, random_state=0))
    search(X=X * 0.5)
    assert len(trained) == 6
    # an unreadable file is computed again, with a warning naming it
    trained.clear()
    saved["0.03"].write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring the saved candidate .*computed again"):
        assert search().n_resumed_ == 2
    assert trained == [{"lr": 3e-2}]


# ------------------------------------------------------------------ sktime pipelines
@pytest.fixture(scope="module")
def vowels():
    from sktime.datasets import load_japanese_vowels

    X, y = load_japanese_vowels()
    keep = np.isin(y, ["1", "2", "3", "4"])
    X, y = X[keep].reset_index(drop=True), y[keep]
    rng = np.random.default_rng(0)
    train, test = [], []
    for c in np.unique(y):  # 25 train and 10 test series per class
        idx = rng.permutation(np.flatnonzero(y == c))
        train.append(idx[:25])
        test.append(idx[25:35])
    train, test = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    return (
        X.iloc[train].reset_index(drop=True),
        y[train],
        X.iloc[test].reset_index(drop=True),
        y[test],
    )


def _vowel_pipeline(pad_length=29):
    from sklearn.preprocessing import StandardScaler
    from sktime.transformations.padder import PaddingTransformer
    from sktime.transformations.series.adapt import TabularToSeriesAdaptor

    return make_continual_pipeline(
        PaddingTransformer(pad_length=pad_length),
        # per-series z-normalisation: each channel of each series over time
        TabularToSeriesAdaptor(StandardScaler(), fit_in_transform=True),
        ER(
            backbone="cnn",
            backbone_params={"channels": (8, 8, 8, 8)},
            max_epochs=1,
            patience=None,
            validation_fraction=0.0,
            random_state=0,
            stream=ClassIncremental(classes_per_task=2, shuffle=False),
        ),
    )


def test_sktime_pipeline_fit_equals_task_by_task(vowels):
    Xtr, ytr, Xte, yte = vowels
    assert len({len(Xtr.iloc[i, 0]) for i in range(len(Xtr))}) > 1  # unequal lengths
    pipe = _vowel_pipeline()
    pipe.fit(Xtr, ytr)
    Z = pipe.transform(Xte)
    assert Z.shape == (len(yte), 12, 29)
    np.testing.assert_allclose(Z.mean(axis=2), 0.0, atol=1e-6)
    assert pipe.n_tasks_seen_ == 2
    assert [c.tolist() for c in pipe.task_classes_] == [["1", "2"], ["3", "4"]]
    by_task = _vowel_pipeline()
    for idx in ClassIncremental(classes_per_task=2, shuffle=False).split(Xtr, ytr):
        by_task.partial_fit_task(Xtr.iloc[idx].reset_index(drop=True), ytr[idx])
    np.testing.assert_array_equal(by_task.predict_proba(Xte), pipe.predict_proba(Xte))
    np.testing.assert_array_equal(
        by_task.predict(Xte, after_task=0), pipe.predict(Xte, after_task=0)
    )
    assert set(pipe.predict(Xte, after_task=0)) <= {"1", "2"}
    # the scorers and evaluate_stream work through the pipeline
    A = snapshot_accuracy_matrix(pipe, Xte, yte)
    assert A.shape == (2, 2) and A[0, 1] == 0.0
    res = evaluate_stream(_vowel_pipeline(), ClassIncremental(shuffle=False), Xtr, ytr, Xte, yte)
    np.testing.assert_array_equal(res.accuracy_matrix, A)


def test_pipeline_fits_transformers_on_the_first_task_only(vowels):
    Xtr, ytr, _, _ = vowels
    pipe = _vowel_pipeline(pad_length=None)
    first = next(ClassIncremental(classes_per_task=2, shuffle=False).split(Xtr, ytr))
    longest_first = max(len(Xtr.iloc[i, 0]) for i in first)
    longest_all = max(len(Xtr.iloc[i, 0]) for i in range(len(Xtr)))
    pipe.partial_fit_task(Xtr.iloc[first].reset_index(drop=True), ytr[first])
    assert pipe.transformers_[0][1].pad_length_ == longest_first
    if longest_all > longest_first:  # a longer later series cannot be padded: documented
        with pytest.raises(ValueError):
            pipe.transform(Xtr)
    assert isinstance(clone(pipe), ContinualPipeline)
    assert clone(pipe).get_params()["er__max_epochs"] == 1
    with pytest.raises(ValueError, match="not fitted"):
        clone(pipe).transform(Xtr)
    with pytest.raises(TypeError, match="partial_fit_task"):
        ContinualPipeline([("a", pipe.steps[0][1]), ("b", pipe.steps[1][1])]).fit(Xtr, ytr)


def test_continual_grid_search_scores_on_given_validation_data():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    keep = y < 4
    X, y = X[keep], y[keep]
    X_fit, y_fit, X_val, y_val = X[:500], y[:500], X[500:], y[500:]
    search = ContinualGridSearch(Naive(**SMALL_MLP, random_state=0), {"lr": [1e-3, 1e-2]},
                                 stream=ClassIncremental(classes_per_task=2, random_state=0),
                                 validation_size=0, refit=False)  # unused with validation_data
    search.fit(X_fit, y_fit, validation_data=(X_val, y_val))
    # each candidate trained on every sample of X_fit, scored on X_val: refit it by hand
    best = Naive(**SMALL_MLP, random_state=0, lr=search.best_params_["lr"],
                 stream=ClassIncremental(classes_per_task=2, random_state=0)).fit(X_fit, y_fit)
    A = snapshot_accuracy_matrix(best, X_val, y_val)
    assert search.best_score_ == pytest.approx(np.mean(A[-1]))
    with pytest.raises(ValueError, match="validation_data must be a tuple"):
        search.fit(X_fit, y_fit, validation_data=X_val)
    with pytest.raises(ValueError, match="as many labels as samples, at least one; got 3"):
        search.fit(X_fit, y_fit, validation_data=(X_val[:3], y_val[:2]))


#: Every method of the library, small enough to learn two tasks in about a second.
RESUMABLE = {name: {} for name in available_methods()} | {
    "HAL": {"anchor_steps": 5},
    "GR": {"generator_epochs": 1, "generator_params": {"hidden": (8, 8), "latent_dim": 4}},
    "ENS": {"hidden": (16,), "max_epochs": 2},
    "ENSGEN": {"hidden": (16,), "max_epochs": 2, "autoencoder_hidden": (16, 8),
               "n_generated": 40},
    "ENSGENDEL": {"hidden": (16,), "max_epochs": 2, "autoencoder_hidden": (16, 8),
                  "n_generated": 40},
}


@pytest.mark.parametrize("name", sorted(RESUMABLE))
def test_every_method_continues_a_stream_from_a_pickle(name, uci_har_small):
    """A stream resumed from the estimator pickled between two tasks (what
    ``evaluate_stream(checkpoint=...)`` and ``clestim bench`` do after an
    interruption) gives exactly the predictions of a stream never interrupted: each
    task reseeds from the estimator's own state, and nothing else carries over."""
    X, y = uci_har_small["train"]
    first, second = ([np.flatnonzero(y == c)[:20] for c in pair] for pair in ([0, 1], [2, 3]))
    tasks = [(X[np.concatenate(idx)], y[np.concatenate(idx)]) for idx in (first, second)]
    cls = available_methods()[name]
    params = dict(max_epochs=1, random_state=0, lr_schedule="step15")
    if "backbone_params" in cls().get_params() and cls().get_params()["backbone"] == "cnn":
        params["backbone_params"] = {"channels": (8, 8)}
    est = cls(**{**params, **RESUMABLE[name]}).partial_fit_task(*tasks[0])
    resumed = pickle.loads(pickle.dumps(est)).partial_fit_task(*tasks[1])
    est.partial_fit_task(*tasks[1])
    X_test = uci_har_small["test"][0][::6]
    np.testing.assert_array_equal(resumed.predict_proba(X_test), est.predict_proba(X_test))
