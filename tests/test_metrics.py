"""Tests of clestim.metrics on hand-computed matrices (expected values derived by hand)."""

import numpy as np
import pytest

from clestim import metrics as M

# A[i, j]: accuracy on task j after task i (0-based). Values chosen so that the
# 'paper' and 'tscil' forgetting conventions differ (task 1 improves after task 3).
A = np.array(
    [
        [0.75, 0.25, 0.0],
        [0.5, 1.0, 0.125],
        [0.875, 0.75, 0.5],
    ]
)
EXACT = dict(abs=1e-15, rel=0)


def test_average_accuracy_by_hand():
    # A_1 = 0.75; A_2 = (0.5 + 1.0) / 2; A_3 = (0.875 + 0.75 + 0.5) / 3 = 17/24
    assert M.average_accuracy(A, task=0) == 0.75
    assert M.average_accuracy(A, task=1) == 0.75
    assert M.average_accuracy(A) == pytest.approx(17 / 24, **EXACT)
    np.testing.assert_allclose(M.average_accuracies(A), [0.75, 0.75, 17 / 24], rtol=0, atol=1e-15)
    assert M.last_accuracy(A) == pytest.approx(17 / 24, **EXACT)
    # (0.75 + 0.75 + 17/24) / 3 = 53/72
    assert M.average_incremental_accuracy(A) == pytest.approx(53 / 72, **EXACT)


def test_forgetting_conventions_by_hand():
    # F_2: f_21 = a11 - a21 = 0.75 - 0.5 (same in both conventions: max(0.75, 0.5) = 0.75)
    assert M.average_forgetting(A, task=1) == 0.25
    assert M.average_forgetting(A, task=1, convention="tscil") == 0.25
    # paper, F_3: f_31 = max(a11, a21) - a31 = 0.75 - 0.875 = -0.125
    #             f_32 = a22 - a32 = 1.0 - 0.75 = 0.25      -> mean 0.0625
    assert M.average_forgetting(A) == 0.0625
    # tscil, F_3: f_31 = max(0.75, 0.5, 0.875) - 0.875 = 0; f_32 = 0.25 -> 0.125
    assert M.average_forgetting(A, convention="tscil") == 0.125
    assert M.average_forgetting(A, task=0) == 0.0
    with pytest.raises(ValueError, match="convention"):
        M.average_forgetting(A, convention="max")


def test_learning_and_current_accuracy_by_hand():
    # A_cur = (0.75 + 1.0 + 0.5) / 3
    assert M.learning_accuracy(A) == 0.75
    assert M.current_accuracy(A) == 0.75
    assert M.current_accuracy(A, task=1) == 0.875  # (0.75 + 1.0) / 2
    assert M.current_accuracy(A, task=0) == 0.75


def test_transfer_by_hand():
    # GEM BWT: ((a31 - a11) + (a32 - a22)) / 2 = (0.125 - 0.25) / 2
    assert M.backward_transfer(A) == -0.0625
    # all pairs: (a21-a11) + (a31-a11) + (a32-a22) = -0.25 + 0.125 - 0.25 = -0.375; / 3
    assert M.backward_transfer(A, convention="continuum") == -0.125
    # Continuum FWT: (a12 + a23) / 2 = (0.25 + 0.125) / 2
    assert M.forward_transfer(A) == 0.1875
    # GEM FWT, b = (0.5, 0.125, 0.0): ((0.25 - 0.125) + (0.125 - 0.0)) / 2
    assert M.forward_transfer(A, baseline=[0.5, 0.125, 0.0]) == 0.125
    assert M.backward_transfer([[0.5]]) == 0.0 and M.forward_transfer([[0.5]]) == 0.0
    with pytest.raises(ValueError, match="shape \\(3,\\)"):
        M.forward_transfer(A, baseline=[0.1, 0.2])
    with pytest.raises(ValueError, match="NaN there"):
        M.forward_transfer([[0.5, np.nan], [0.5, 0.5]])


def test_dmi_and_clustering_accuracy_by_hand():
    d = M.dmi(A)
    assert d.stability == pytest.approx(17 / 24, **EXACT)  # (0.5 + 0.875 + 0.75) / 3
    assert d.plasticity == 0.75
    assert d.generalizability == 0.125  # (0.25 + 0.0 + 0.125) / 3
    # clusters {1: [0, 0], 0: [1], 2: [1, 2, 2]} -> best map 1->0, 2->2, 0->1: 5 of 6
    assert M.clustering_accuracy([0, 0, 1, 1, 2, 2], [1, 1, 0, 2, 2, 2]) == 5 / 6
    with pytest.raises(ValueError, match="at least 2 tasks"):
        M.dmi([[1.0]])


def test_class_and_task_incremental_accuracy_by_hand():
    y = np.array([0, 0, 1, 1, 2, 3])
    pred = np.array([0, 1, 1, 1, 3, 3])
    # task {0,1}: 3 of 4 right; task {2,3}: 1 of 2 -> mean 0.625
    assert M.class_incremental_accuracy(y, pred, [[0, 1], [2, 3]]) == 0.625
    scores = np.array(
        [
            [0.2, 0.1, 0.6, 0.1],  # true 0: over all -> 2, within {0,1} -> 0 (right)
            [0.6, 0.3, 0.0, 0.1],  # true 0: right
            [0.1, 0.2, 0.0, 0.7],  # true 1: within {0,1} -> 1 (right)
            [0.5, 0.4, 0.0, 0.1],  # true 1: -> 0 (wrong)
            [0.9, 0.0, 0.04, 0.06],  # true 2: within {2,3} -> 3 (wrong)
            [0.9, 0.0, 0.0, 0.1],  # true 3: -> 3 (right)
        ]
    )
    # task {0,1}: 3/4, task {2,3}: 1/2
    assert M.task_incremental_accuracy(y, scores, [0, 1, 2, 3], [[0, 1], [2, 3]]) == 0.625
    with pytest.raises(ValueError, match="shape"):
        M.task_incremental_accuracy(y, scores[:, :3], [0, 1, 2, 3], [[0, 1], [2, 3]])


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((2, 3)), "square"),
        (np.zeros((0, 0)), "square"),
        (np.zeros(3), "square"),
        ([[0.5, 0.2], [np.nan, 0.4]], "NaN at A\\[1, 0\\]"),
        ([[np.nan, 0.2], [0.1, 0.4]], "NaN at A\\[0, 0\\]"),
        ([[0.5, 0.2], [1.2, 0.4]], "\\[0, 1\\]"),
        ([[50.0, 20.0], [10.0, 40.0]], "percentages"),
        ([[0.5, -0.1], [0.1, 0.4]], "\\[0, 1\\]"),
        ([[0.5, np.inf], [0.1, 0.4]], "infinite"),
        ([["a", "b"], ["c", "d"]], "numeric"),
    ],
)
def test_bad_matrices_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        M.average_accuracy(bad)


def test_nan_above_diagonal_is_allowed_where_not_read():
    B = np.array([[0.5, np.nan], [0.25, 1.0]])
    assert M.average_accuracy(B) == 0.625
    assert M.average_forgetting(B) == 0.25
    out = M.compute_metrics(B)
    assert np.isnan(out["forward_transfer"])
    assert out["average_accuracy"] == 0.625
    with pytest.raises(ValueError, match="future tasks"):
        M.dmi(B)


def test_compute_metrics_matches_functions():
    out = M.compute_metrics(A, forgetting_convention="tscil", fwt_baseline=[0.5, 0.125, 0.0])
    assert set(out) == set(M.METRICS)
    assert out["average_forgetting"] == 0.125
    assert out["forward_transfer"] == 0.125
    assert out["backward_transfer"] == -0.0625


# ------------------------------------------------------------------ scorers
class SnapshotStub:
    """A fitted 'estimator' whose per-task snapshots are fixed score tables.

    X holds sample ids; classes [0, 1, 2, 3]; tasks {0, 1} then {2, 3}. After task
    i only the classes learnt so far can be predicted.
    """

    classes_ = np.array([0, 1, 2, 3])
    task_classes_ = [np.array([0, 1]), np.array([2, 3])]
    n_tasks_seen_ = 2
    scores = [
        np.array(
            [
                [0.9, 0.1, 0, 0],  # true 0 -> 0 right
                [0.2, 0.8, 0, 0],  # true 1 -> 1 right
                [0.3, 0.7, 0, 0],  # true 0 -> 1 wrong
                [0.5, 0.5, 0, 0],  # true 2 -> unseen, wrong
                [0.5, 0.5, 0, 0],  # true 3 -> wrong
                [0.5, 0.5, 0, 0],  # true 2 -> wrong
            ]
        ),
        np.array(
            [
                [0.1, 0.2, 0.6, 0.1],  # true 0: CIL 2 wrong; TIL 1 wrong
                [0.1, 0.5, 0.3, 0.1],  # true 1: CIL right; TIL right
                [0.4, 0.1, 0.45, 0.05],  # true 0: CIL 2 wrong; TIL 0 right
                [0.0, 0.0, 0.7, 0.3],  # true 2: right; right
                [0.5, 0.0, 0.2, 0.3],  # true 3: CIL 0 wrong; TIL 3 right
                [0.0, 0.0, 0.1, 0.9],  # true 2: wrong; wrong
            ]
        ),
    ]

    def predict(self, X, task=None, after_task=None):
        i = self.n_tasks_seen_ - 1 if after_task is None else after_task
        known = np.concatenate(self.task_classes_[: i + 1])
        cols = known if task is None else self.task_classes_[task]
        s = self.scores[i][np.asarray(X)][:, cols]
        return np.asarray(cols)[np.argmax(s, axis=1)]


Y_STUB = np.array([0, 1, 0, 2, 3, 2])


def test_snapshot_accuracy_matrix_class_and_task_mode():
    est = SnapshotStub()
    X = np.arange(6)
    A_cil = M.snapshot_accuracy_matrix(est, X, Y_STUB)
    np.testing.assert_allclose(A_cil, [[2 / 3, 0.0], [1 / 3, 1 / 3]], rtol=0, atol=1e-15)
    A_til = M.snapshot_accuracy_matrix(est, X, Y_STUB, mode="task")
    assert np.isnan(A_til[0, 1])
    np.testing.assert_allclose(A_til[[0, 1, 1], [0, 0, 1]], [2 / 3, 2 / 3, 2 / 3], atol=1e-15)
    # samples of classes never learnt are ignored
    A_more = M.snapshot_accuracy_matrix(est, np.r_[X, 0], np.r_[Y_STUB, 9])
    np.testing.assert_array_equal(A_more, A_cil)


def test_stream_scorers_signs_and_values():
    est, X = SnapshotStub(), np.arange(6)
    # A = [[2/3, 0], [1/3, 1/3]]: A_T = 1/3, F_T = 2/3 - 1/3, A_cur = 1/2, FWT = 0
    assert M.make_stream_scorer("average_accuracy")(est, X, Y_STUB) == pytest.approx(1 / 3)
    f = M.make_stream_scorer("average_forgetting")
    assert f.sign == -1.0
    assert f(est, X, Y_STUB) == pytest.approx(-1 / 3, abs=1e-15)
    assert M.make_stream_scorer("learning_accuracy")(est, X, Y_STUB) == pytest.approx(0.5)
    assert M.make_stream_scorer("forward_transfer")(est, X, Y_STUB) == 0.0
    til = M.make_stream_scorer("average_accuracy", mode="task")
    assert til(est, X, Y_STUB) == pytest.approx(2 / 3, abs=1e-15)
    assert "greater_is_better=False" in repr(f)
    with pytest.raises(ValueError, match="Unknown metric"):
        M.make_stream_scorer("accuracy")
    with pytest.raises(ValueError, match="no sample of task 1"):
        f(est, X[:3], Y_STUB[:3])


def test_scorer_rejects_overlapping_tasks_and_unfitted():
    est = SnapshotStub()
    est.task_classes_ = [np.array([0, 1]), np.array([1, 2])]
    with pytest.raises(ValueError, match="share classes"):
        M.snapshot_accuracy_matrix(est, np.arange(6), Y_STUB)
    with pytest.raises(ValueError, match="not fitted"):
        M.snapshot_accuracy_matrix(object(), np.arange(6), Y_STUB)
