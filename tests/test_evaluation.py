"""Tests of clestim.evaluation and clestim.plotting with a tiny numpy learner.

The learner is a nearest-centroid classifier that follows the clestim estimator
contract; on well-separated blobs its accuracy matrices are known exactly.
"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.base import BaseEstimator  # noqa: E402

from clestim.evaluation import (  # noqa: E402
    RunsResult,
    confidence_interval,
    evaluate_runs,
    evaluate_stream,
    load_progress,
    saved_tasks,
)
from clestim.plotting import (  # noqa: E402
    plot_accuracy_matrix,
    plot_average_accuracy,
    plot_memory_budget,
)
from clestim.streams import (  # noqa: E402
    BasicScenario,
    ClassIncremental,
    DomainIncremental,
    unique_in_order,
)


class CentroidCL(BaseEstimator):
    """Nearest class centroid, learnt task by task, with per-task snapshots.

    ``forget=True`` keeps only the centroids of the latest task (catastrophic
    forgetting, like Naive fine-tuning on disjoint classes).
    """

    def __init__(self, forget=False, stream=None, random_state=None):
        self.forget = forget
        self.stream = stream
        self.random_state = random_state

    def fit(self, X, y, groups=None):
        for k in [k for k in vars(self) if k.endswith("_")]:
            delattr(self, k)
        stream = self.stream or ClassIncremental(shuffle=False)
        for idx in stream.split(X, y, groups):
            self.partial_fit_task(X[idx], y[idx])
        return self

    def partial_fit_task(self, X, y, groups=None):
        if not hasattr(self, "snapshots_"):
            self.snapshots_, self.task_classes_, self.classes_ = [], [], np.empty(0)
            self.centroids_ = {}
        X, y = np.asarray(X, dtype=float), np.asarray(y)
        if self.forget:
            self.centroids_ = {}
        for c in unique_in_order(y):
            self.centroids_[c] = X[y == c].mean(axis=0)
        self.classes_ = unique_in_order(np.r_[self.classes_, unique_in_order(y)])
        self.task_classes_.append(unique_in_order(y))
        self.snapshots_.append(dict(self.centroids_))
        self.n_tasks_seen_ = len(self.snapshots_)
        return self

    def predict(self, X, task=None, after_task=None):
        snap = self.snapshots_[-1 if after_task is None else after_task]
        labels = list(snap)
        if task is not None:
            labels = [c for c in labels if c in set(self.task_classes_[task].tolist())]
            if not labels:
                return np.full(len(X), self.task_classes_[task][0])
        C = np.stack([snap[c] for c in labels])
        d = ((np.asarray(X, dtype=float)[:, None, :] - C[None]) ** 2).sum(-1)
        return np.asarray(labels)[d.argmin(1)]

    def score(self, X, y):
        return float(np.mean(self.predict(X) == np.asarray(y)))


def blobs(n_classes=6, n_per_class=10, seed=0):
    """Classes centred 10 apart on a line, noise 0.1: nearest centroid is perfect."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = np.c_[10.0 * y, np.zeros_like(y)] + 0.1 * rng.standard_normal((len(y), 2))
    perm = rng.permutation(len(y))
    return X[perm], y[perm]


@pytest.fixture(scope="module")
def data():
    Xtr, ytr = blobs(seed=0)
    Xte, yte = blobs(n_per_class=5, seed=1)
    return Xtr, ytr, Xte, yte


def test_evaluate_stream_exact_matrices(data):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(classes_per_task=2, random_state=0)
    keep = evaluate_stream(CentroidCL(), stream, Xtr, ytr, Xte, yte)
    # remembers everything, unseen classes are always wrong: lower triangle = 1
    np.testing.assert_array_equal(keep.accuracy_matrix, np.tril(np.ones((3, 3))))
    assert keep.metrics["average_accuracy"] == 1.0
    assert keep.metrics["average_forgetting"] == 0.0
    # the head grows per task, so A[i-1, i] = 0 by construction: FWT is undefined
    assert np.isnan(keep.metrics["forward_transfer"])
    forget = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte)
    np.testing.assert_array_equal(forget.accuracy_matrix, np.eye(3))
    # A_T = 1/3, F_T = (1 + 1)/2, A_cur = 1, BWT = -1
    assert forget.metrics["average_accuracy"] == pytest.approx(1 / 3, abs=1e-15)
    assert forget.metrics["average_forgetting"] == 1.0
    assert forget.metrics["learning_accuracy"] == 1.0
    assert forget.metrics["backward_transfer"] == -1.0
    # class groups follow the stream; the stream was split on the training data
    assert [c.tolist() for c in forget.task_classes] == [
        c.tolist() for c in ClassIncremental(random_state=0).task_classes(ytr)
    ]
    assert forget.fit_time.shape == (3,) and (forget.fit_time >= 0).all()


def test_evaluate_stream_counts_where_each_class_went(data):
    Xtr, ytr, Xte, yte = data  # classes 10 apart on a line, 5 test samples each
    stream = ClassIncremental(class_order=range(6))  # tasks {0, 1}, {2, 3}, {4, 5}
    res = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, confusion=True)
    np.testing.assert_array_equal(res.confusion_labels, np.arange(6))
    # knowing only the last task's two centroids, every class goes to the nearer one
    nearest = [[0, 1, 1, 1, 1, 1], [2, 2, 2, 3, 3, 3], [4, 4, 4, 4, 4, 5]]
    expected = np.zeros((3, 6, 6), dtype=int)
    for i, row in enumerate(nearest):
        expected[i, np.arange(6), row] = 5
    np.testing.assert_array_equal(res.confusion, expected)
    diagonal = np.einsum("tcc->tc", res.confusion).reshape(3, 3, 2).sum(-1) / 10
    np.testing.assert_array_equal(diagonal, res.accuracy_matrix)
    assert res.to_dict()["confusion"] == expected.tolist()
    task = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, mode="task",
                           confusion=True)  # only the tasks learnt so far are counted
    assert task.confusion.sum(axis=(1, 2)).tolist() == [10, 20, 30]
    assert "confusion" not in evaluate_stream(CentroidCL(), stream, Xtr, ytr, Xte, yte).to_dict()


class SessionEnded(Exception):
    pass


def test_evaluate_stream_resumes_from_its_checkpoint(data, tmp_path, monkeypatch):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(class_order=range(6))  # tasks {0, 1}, {2, 3}, {4, 5}
    path = tmp_path / "progress" / "run.pkl"
    learned, learn, end_at = [], CentroidCL.partial_fit_task, [3]

    def partial_fit_task(self, X, y, groups=None):
        learned.append(sorted(set(y.tolist())))
        if len(learned) == end_at[0]:
            raise SessionEnded
        return learn(self, X, y, groups)

    monkeypatch.setattr(CentroidCL, "partial_fit_task", partial_fit_task)
    run = dict(confusion=True, checkpoint=path)
    with pytest.raises(SessionEnded):
        evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, **run)
    assert saved_tasks(path) == 2 and saved_tasks(tmp_path / "none.pkl") == 0
    saved = load_progress(path)  # what the cell holds mid-stream
    assert saved["tasks_done"] == 2 and saved["estimator"].n_tasks_seen_ == 2
    assert saved["A"][0, 0] > 0 and saved["A"][1, 1] > 0 and np.isnan(saved["A"][2:]).all()
    with pytest.raises(FileNotFoundError):
        load_progress(tmp_path / "none.pkl")
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_progress(tmp_path / "junk.pkl")
    learned.clear()
    end_at[0] = None
    est = CentroidCL(forget=True)
    res = evaluate_stream(est, stream, Xtr, ytr, Xte, yte, clone_estimator=False, **run)
    assert learned == [[4, 5]]  # only the task not saved
    assert res.resumed_tasks == 2 and res.to_dict()["resumed_tasks"] == 2
    assert est.n_tasks_seen_ == 3  # the caller's estimator holds the whole stream
    assert not path.exists()  # deleted once complete
    fresh = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, confusion=True)
    assert fresh.resumed_tasks == 0 and "resumed_tasks" not in fresh.to_dict()
    np.testing.assert_array_equal(res.accuracy_matrix, np.eye(3))
    np.testing.assert_array_equal(res.confusion, fresh.confusion)
    np.testing.assert_equal(res.metrics, fresh.metrics)
    np.testing.assert_array_equal(res.fit_time > 0, [True, True, True])


def test_evaluate_stream_ignores_a_checkpoint_of_another_run(data, tmp_path, monkeypatch):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(class_order=range(6))
    path = tmp_path / "run.pkl"
    learn, calls = CentroidCL.partial_fit_task, []

    def ends_at_the_third_task(self, X, y, groups=None):
        calls.append(1)
        if len(calls) == 3:
            raise SessionEnded
        return learn(self, X, y, groups)

    with monkeypatch.context() as patch:
        patch.setattr(CentroidCL, "partial_fit_task", ends_at_the_third_task)
        with pytest.raises(SessionEnded):
            evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, checkpoint=path)
    saved = path.read_bytes()  # two tasks of the forgetting learner
    # other parameters, other data, other options: each starts over
    for est, X, options in [(CentroidCL(), Xtr, {}), (CentroidCL(forget=True), Xtr + 1e-9, {}),
                            (CentroidCL(forget=True), Xtr, {"mode": "task"})]:
        path.write_bytes(saved)
        with pytest.warns(UserWarning, match="saved by a run with other parameters"):
            res = evaluate_stream(est, stream, X, ytr, Xte, yte, checkpoint=path, **options)
        assert res.resumed_tasks == 0 and not path.exists()
        if est.forget:  # a forgetting learner's full run: only the last task is known
            assert np.nanmax(res.accuracy_matrix[2, :2]) < 1
        else:
            np.testing.assert_array_equal(res.accuracy_matrix, np.tril(np.ones((3, 3))))
    path.write_bytes(saved[: len(saved) // 2])  # cut short
    with pytest.warns(UserWarning, match="unreadable"):
        res = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte,
                              checkpoint=path)
    assert res.resumed_tasks == 0
    np.testing.assert_array_equal(res.accuracy_matrix, np.eye(3))


def test_evaluate_stream_task_incremental_mode(data):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    res = evaluate_stream(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, mode="task")
    A = res.accuracy_matrix
    assert np.isnan(A[np.triu_indices(3, 1)]).all()
    # the forgotten tasks fall back to their first class: 5 of 10 test samples right
    np.testing.assert_array_equal(A[np.tril_indices(3)], [1.0, 0.5, 1.0, 0.5, 0.5, 1.0])
    assert np.isnan(res.metrics["forward_transfer"])


def test_evaluate_stream_does_not_touch_the_estimator(data):
    Xtr, ytr, Xte, yte = data
    est = CentroidCL()
    res = evaluate_stream(
        est, ClassIncremental(shuffle=False), Xtr, ytr, Xte, yte, return_estimator=True
    )
    assert not hasattr(est, "snapshots_")
    assert res.estimator.n_tasks_seen_ == 3


def test_evaluate_stream_basic_scenario_relabels(data):
    Xtr, ytr, Xte, yte = data
    # INC with classes 0 (C10), 2 (C02), 1 (C21): class 1 is learnt as L2 in T1, L1 in T2
    inc = BasicScenario("INC", assignment=(0, 2, 1))
    res = evaluate_stream(CentroidCL(), inc, Xtr, ytr, Xte, yte)
    # after T1: L1 @ class 0, L2 @ class 1 -> T1 right; on T2 class 1 (now L1) is wrong
    # after T2: L1 @ class 1, L2 @ class 2 -> class 0 still L1; the relabelled set is
    # now L1, so T1's labels are half wrong
    np.testing.assert_array_equal(res.accuracy_matrix, [[1.0, 0.5], [0.5, 1.0]])


def test_evaluate_stream_domain_incremental():
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 30)
    subj = np.repeat([0, 1, 2], 20)
    # subject s shifts the data by 100 * s: a centroid learnt on one subject fails on others
    X = np.c_[10.0 * y + 100.0 * subj, np.zeros(60)] + 0.1 * rng.standard_normal((60, 2))
    stream = DomainIncremental()
    res = evaluate_stream(CentroidCL(forget=True), stream, X, y, X, y, subj, subj)
    # after subject s only subject s's centroids exist: task j gets the nearest class,
    # which is class 1 of subject s when j > s (right on half), class 0 when j < s
    A = res.accuracy_matrix
    np.testing.assert_array_equal(np.diag(A), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(A[np.triu_indices(3, 1)], [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(A[np.tril_indices(3, -1)], [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="groups=None"):
        evaluate_stream(CentroidCL(), stream, X, y, X, y)


def test_evaluate_stream_errors(data):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(class_order=[0, 1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="no sample of task 2 \\(classes \\[4, 5\\]\\)"):
        evaluate_stream(CentroidCL(), stream, Xtr, ytr, Xte[yte < 4], yte[yte < 4])
    with pytest.raises(ValueError, match="mode"):
        evaluate_stream(CentroidCL(), stream, Xtr, ytr, Xte, yte, mode="domain")


def test_result_conversions(data):
    Xtr, ytr, Xte, yte = data
    res = evaluate_stream(CentroidCL(forget=True), ClassIncremental(class_order=range(6)), *data)
    d = res.to_dict()
    assert d["accuracy_matrix"] == np.eye(3).tolist()
    assert d["task_classes"] == [[0, 1], [2, 3], [4, 5]]
    assert set(d["metrics"]) >= {"average_accuracy", "average_forgetting", "learning_accuracy"}
    tasks = res.to_frame()
    assert list(tasks["classes"]) == [[0, 1], [2, 3], [4, 5]]
    np.testing.assert_allclose(tasks["average_accuracy"], [1.0, 0.5, 1 / 3])
    matrix = res.to_frame("matrix")
    assert matrix.index.name == "after_task" and matrix.columns.name == "task"
    np.testing.assert_array_equal(matrix.to_numpy(), np.eye(3))
    assert res.to_frame("metrics").shape == (1, len(d["metrics"]))
    with pytest.raises(ValueError, match="kind"):
        res.to_frame("long")


def test_confidence_interval_uses_t_distribution():
    vals = np.array([0.8, 0.9, 0.7, 0.85, 0.75])
    m, h = confidence_interval(vals)
    assert m == pytest.approx(0.8)
    # s = sqrt(0.025 / 4) = 0.0790569; t_{0.975, 4} = 2.7764451
    assert h == pytest.approx(2.7764451 * np.sqrt(0.025 / 4) / np.sqrt(5), rel=1e-7)
    assert h == pytest.approx(stats.t.ppf(0.975, 4) * vals.std(ddof=1) / np.sqrt(5))
    assert confidence_interval([0.5])[1] == 0.0


def test_evaluate_runs_seeds_and_summary(data):
    Xtr, ytr, Xte, yte = data
    stream = ClassIncremental(classes_per_task=2, random_state=0)
    runs = evaluate_runs(CentroidCL(forget=True), stream, Xtr, ytr, Xte, yte, n_runs=4, n_jobs=2)
    assert isinstance(runs, RunsResult)
    assert runs.seeds == [1234, 1235, 1236, 1237]
    # each run uses its seed as the class order's random_state
    for s, r in zip(runs.seeds, runs.runs):
        expected = ClassIncremental(random_state=s).task_classes(ytr)
        assert [c.tolist() for c in r.task_classes] == [c.tolist() for c in expected]
    assert len({tuple(r.task_classes[0]) for r in runs.runs}) > 1
    summary = runs.summary()
    # identical matrices in every run: zero-width interval
    assert summary.loc["average_forgetting", "mean"] == 1.0
    assert summary.loc["average_forgetting", "ci"] == 0.0
    assert summary.loc["average_accuracy", "n_runs"] == 4
    assert runs.format("average_accuracy") == "33.3 ± 0.0"
    assert runs.metrics_frame().index.tolist() == runs.seeds
    assert len(runs.to_dict()["runs"]) == 4
    with pytest.raises(ValueError, match="n_runs"):
        evaluate_runs(CentroidCL(), stream, Xtr, ytr, Xte, yte, n_runs=0)


def test_plots_return_axes():
    runs = [np.array([[0.9, 0.0], [0.5, 0.8]]), np.array([[1.0, 0.0], [0.4, 0.9]])]
    ax = plot_average_accuracy({"Naive": runs, "ER": np.array([[0.9, 0.1], [0.8, 0.85]])})
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["Naive", "ER"]
    np.testing.assert_allclose(lines[0].get_ydata(), [95.0, 65.0])
    np.testing.assert_allclose(lines[1].get_ydata(), [90.0, 82.5])
    assert len(ax.collections) == 1  # one CI band, for the method with 2 runs
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    # task 1: runs at 90 and 100 -> s / sqrt(2) = 5; 95 + t_{0.975,1} * 5 = 158.5 is
    # clipped to 100%, and 95 - 63.5 = 31.5 is not
    assert band.max() == 100.0
    assert band.min() == pytest.approx(95.0 - stats.t.ppf(0.975, 1) * 5.0)
    assert ax.get_legend().get_title().get_text().startswith("fewer than 3 runs")
    # task 2: both runs at 65 -> zero width
    assert 65.0 in band.round(10)
    ax2 = plot_accuracy_matrix(np.array([[0.9, np.nan], [0.5, 0.8]]))
    texts = [t.get_text() for t in ax2.texts]
    assert texts == ["90", "50", "80"]
    assert ax2.figure is not None
    with pytest.raises(ValueError, match="empty"):
        plot_average_accuracy({})


def test_every_line_has_a_look_of_its_own():
    # 13 methods (TSCIL's table) outnumber the 10 default colours
    results = {f"m{i}": np.array([[0.5 + i / 100]]) for i in range(13)}
    lines = plot_average_accuracy(results).get_lines()
    looks = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(looks) == 13
    budget = plot_memory_budget({f"m{i}": {1: [50.0], 5: [60.0]} for i in range(13)})
    lines = [container.lines[0] for container in budget.containers]  # the data, not the caps
    looks = {(ln.get_color(), ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(lines) == len(looks) == 13


def test_results_feed_the_plot(data):
    Xtr, ytr, Xte, yte = data
    runs = evaluate_runs(CentroidCL(forget=True), ClassIncremental(random_state=0), *data, n_runs=2)
    ax = plot_average_accuracy({"centroid": runs})
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [100.0, 50.0, 100 / 3])
    assert isinstance(runs.metrics_frame(), pd.DataFrame)
