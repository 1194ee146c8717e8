"""DMI from a model, FWT against a zero-shot baseline, both BWT conventions, task
orders and the KD variants of replay (the SLU paper, issue #17)."""

import copy
import inspect

import numpy as np
import pytest
import torch

from clestim import DER, ER
from clestim.evaluation import evaluate_stream
from clestim.losses import replay_distillation_loss
from clestim.metrics import (
    backward_transfer,
    compute_metrics,
    dmi,
    dmi_matrix,
    dmi_row,
    make_stream_scorer,
)
from clestim.streams import ClassIncremental, DomainIncremental
from clestim.task_orders import close_semantic_groups, diverse_semantic_groups

FAST = dict(backbone="mlp", max_epochs=2, batch_size=16, random_state=0)


def _blobs(n_per_class=12, n_classes=4, seed=0, shift=3.0):
    """(n, 2, 8) inputs whose mean depends on the class: learnable in 2 epochs."""
    rng = np.random.RandomState(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    X = rng.randn(len(y), 2, 8).astype(np.float32)
    X[:, 0, :] += shift * np.cos(y)[:, None]
    X[:, 1, :] += shift * np.sin(y)[:, None]
    return X, y


class _FixedEmbeddings:
    """A stand-in for a fitted estimator: snapshot ``i`` embeds X as ``embed[i](X)``."""

    def __init__(self, embeds, task_classes):
        self.embeds = embeds
        self.task_classes_ = task_classes
        self.n_tasks_seen_ = len(embeds)

    def transform(self, X, after_task=None):
        return self.embeds[-1 if after_task is None else after_task](np.asarray(X))


# ------------------------------------------------------------------ DMI
def test_dmi_is_one_on_perfectly_separated_clusters():
    y = np.repeat([10, 20, 30, 40], 5)
    centres = {10: (0, 0), 20: (50, 0), 30: (0, 50), 40: (50, 50)}
    rng = np.random.RandomState(0)
    emb = np.array([centres[c] for c in y]) + 0.1 * rng.randn(len(y), 2)
    est = _FixedEmbeddings([lambda X: emb[X[:, 0]]] * 2, [[10, 20], [30, 40]])
    D = dmi_matrix(est, np.arange(len(y))[:, None], y)
    np.testing.assert_array_equal(D, np.ones((2, 2)))
    assert dmi(D) == (1.0, 1.0, 1.0)


def test_dmi_row_matches_a_hand_computation_when_a_cluster_merges_two_classes():
    # classes 0 and 1 sit apart; the cluster at (0, 10) holds all of class 2 and half
    # of class 3; the other half of class 3 has its own cluster. Hungarian maps the
    # merged cluster to class 2 (4 samples beat 2): class 3 loses 2 of its 4 samples.
    y = np.repeat([0, 1, 2, 3], 4)
    points = {0: (0, 0), 1: (10, 0), 2: (0, 10)}
    emb = np.array([points.get(c, (0, 10)) for c in y], dtype=float)
    emb[y == 3] = [(0, 10), (0, 10), (10, 10), (10, 10)]
    masks = [np.isin(y, [0, 1]), np.isin(y, [2, 3])]
    row = dmi_row(emb, y, masks, random_state=0)
    np.testing.assert_allclose(row, [1.0, (4 + 2) / 8])


def test_dmi_regions_of_a_model_matrix():
    # snapshot 0 separates only task 0's classes; snapshot 1 separates all four
    y = np.repeat([0, 1, 2, 3], 4)
    sep = np.array([(0, 0), (10, 0), (0, 10), (10, 10)], dtype=float)[y]
    half = sep.copy()
    half[y >= 2] = (0, 10)
    half[(y == 3)] += np.array([[0.0, 0.0], [0.0, 0.0], [1e-3, 0.0], [1e-3, 0.0]])
    est = _FixedEmbeddings([lambda X: half[X[:, 0]], lambda X: sep[X[:, 0]]], [[0, 1], [2, 3]])
    D = dmi_matrix(est, np.arange(16)[:, None], y)
    np.testing.assert_allclose(D, [[1.0, 0.75], [1.0, 1.0]])
    np.testing.assert_allclose(dmi(D), (1.0, 1.0, 0.75))


def test_dmi_from_evaluate_stream_equals_dmi_matrix_and_scorers():
    X, y = _blobs()
    res = evaluate_stream(
        ER(memory_size=8, **FAST), ClassIncremental(classes_per_task=2, random_state=0),
        X, y, X, y, dmi=True, return_estimator=True,
    )
    D = dmi_matrix(res.estimator, X, y)
    np.testing.assert_array_equal(res.dmi_matrix, D)
    stab, plas, gen = dmi(D)
    assert res.metrics["dmi_stability"] == stab
    assert res.metrics["dmi_plasticity"] == plas
    assert res.metrics["dmi_generalisation"] == gen
    assert make_stream_scorer("dmi_generalisation")(res.estimator, X, y) == gen
    assert "dmi_matrix" in res.to_dict()


def test_transform_after_task_is_the_snapshot():
    X, y = _blobs()
    est = ER(memory_size=8, **FAST)
    est.partial_fit_task(X[y < 2], y[y < 2])
    first = est.transform(X)
    est.partial_fit_task(X[y >= 2], y[y >= 2])
    np.testing.assert_array_equal(est.transform(X, after_task=0), first)
    np.testing.assert_array_equal(est.transform(X, after_task=1), est.transform(X))
    assert not np.array_equal(first, est.transform(X))


# ------------------------------------------------------------------ BWT
def test_both_bwt_conventions_by_hand():
    A = [[0.9, 0.1, 0.0], [0.6, 0.8, 0.2], [0.5, 0.7, 0.9]]
    gem = ((0.5 - 0.9) + (0.7 - 0.8)) / 2
    pairs = ((0.6 - 0.9) + (0.5 - 0.9) + (0.7 - 0.8)) / 3
    assert backward_transfer(A, "gem") == pytest.approx(gem)
    assert backward_transfer(A, "all_pairs") == pytest.approx(pairs)
    assert backward_transfer(A, "continuum") == backward_transfer(A, "all_pairs")
    m = compute_metrics(A)
    assert m["backward_transfer"] == m["backward_transfer_gem"] == pytest.approx(gem)
    assert m["backward_transfer_all_pairs"] == pytest.approx(pairs)
    with pytest.raises(ValueError, match="convention"):
        backward_transfer(A, "last")


# ------------------------------------------------------------------ FWT
class _RecordingER(ER):
    """ER that keeps the weights each task starts training from."""

    def _train(self, train, valid, description):
        self.init_states_ = getattr(self, "init_states_", []) + [
            copy.deepcopy(self.module_.state_dict())
        ]
        return super()._train(train, valid, description)


def test_fwt_against_zero_shot_on_a_domain_incremental_stream():
    X, y = _blobs(n_per_class=18, n_classes=3)
    groups = np.tile([0, 1, 2], len(y) // 3)
    X = X + groups[:, None, None].astype(np.float32)  # the domains differ
    res = evaluate_stream(
        _RecordingER(memory_size=8, **FAST), DomainIncremental(shuffle=False), X, y, X, y,
        groups=groups, groups_test=groups, return_estimator=True,
    )
    # the baseline is the network the first task started training from
    est = res.estimator
    untrained = copy.deepcopy(est.module_)
    untrained.load_state_dict(est.init_states_[0])
    untrained.eval()
    with torch.no_grad():
        pred = untrained(torch.as_tensor(X)).argmax(1).numpy()
    expected = [np.mean(est.classes_[pred[groups == g]] == y[groups == g]) for g in range(3)]
    np.testing.assert_array_equal(res.zero_shot, expected)
    A = res.accuracy_matrix
    fwt = np.mean([A[0, 1] - expected[1], A[1, 2] - expected[2]])
    assert res.metrics["forward_transfer"] == pytest.approx(fwt)
    assert np.isfinite(fwt) and fwt != 0.0


def test_fwt_is_nan_with_a_growing_head():
    X, y = _blobs()
    res = evaluate_stream(
        ER(memory_size=8, **FAST), ClassIncremental(classes_per_task=2, random_state=0),
        X, y, X, y,
    )
    assert res.accuracy_matrix[0, 1] == 0.0  # unseen classes cannot be predicted
    assert np.isnan(res.metrics["forward_transfer"])
    assert res.zero_shot is None


def test_fwt_with_a_declared_label_space():
    if "classes" not in inspect.signature(ER.partial_fit_task).parameters:
        pytest.skip("partial_fit_task(classes=...) is not available yet (issue #13)")
    X, y = _blobs()
    res = evaluate_stream(
        ER(memory_size=8, **FAST), ClassIncremental(classes_per_task=2, random_state=0),
        X, y, X, y, declare_classes=True,
    )
    assert res.zero_shot is not None
    expected = res.accuracy_matrix[0, 1] - res.zero_shot[1]
    assert res.metrics["forward_transfer"] == pytest.approx(expected)


def test_declare_classes_needs_the_classes_parameter():
    class NoClasses(ER):
        def partial_fit_task(self, X, y, groups=None):
            return super().partial_fit_task(X, y, groups)

    X, y = _blobs()
    with pytest.raises(ValueError, match="classes"):
        evaluate_stream(NoClasses(**FAST), ClassIncremental(random_state=0), X, y, X, y,
                        declare_classes=True)


# ------------------------------------------------------------------ task orders
# classes 0, 1, 2 are alike; so are 3, 4, 5; 0 and 3 are the closest of their blocks
S_BLOCKS = np.array([
    [1.0, 0.9, 0.8, 0.1, 0.0, 0.0],
    [0.9, 1.0, 0.7, 0.0, 0.1, 0.0],
    [0.8, 0.7, 1.0, 0.0, 0.0, 0.1],
    [0.1, 0.0, 0.0, 1.0, 0.95, 0.6],
    [0.0, 0.1, 0.0, 0.95, 1.0, 0.5],
    [0.0, 0.0, 0.1, 0.6, 0.5, 1.0],
])
LABELS = np.array([10, 11, 12, 13, 14, 15])  # sorted: row k of S_BLOCKS is label 10 + k


def _groups(stream, X=None, y=None):
    y = np.repeat(LABELS, 3) if y is None else y
    list(stream.split(X, y))
    return [sorted(c.tolist()) for c in stream.task_classes_]


def test_close_semantic_groups_similar_classes_together():
    stream = ClassIncremental(classes_per_task=3, order="close_semantic", similarity=S_BLOCKS)
    assert _groups(stream) == [[13, 14, 15], [10, 11, 12]]  # the closest pair (0.95) first
    pairs = ClassIncremental(classes_per_task=2, order="close_semantic", similarity=S_BLOCKS)
    assert _groups(pairs) == [[13, 14], [10, 11], [12, 15]]


def test_diverse_semantic_spreads_similar_classes():
    stream = ClassIncremental(classes_per_task=2, order="diverse_semantic", similarity=S_BLOCKS)
    groups = _groups(stream)
    assert len(groups) == 3
    for g in groups:  # one class of each block in every task
        assert sum(c <= 12 for c in g) == 1
    assert sorted(sum(groups, [])) == LABELS.tolist()


def test_semantic_group_helpers_on_indices():
    close = [sorted(g.tolist()) for g in close_semantic_groups(S_BLOCKS, 3, random_state=0)]
    assert close == [[3, 4, 5], [0, 1, 2]]
    for seed in range(3):
        diverse = [sorted(g.tolist()) for g in diverse_semantic_groups(S_BLOCKS, 2, seed)]
        assert all(g[0] <= 2 < g[1] for g in diverse)  # one class of each block
        assert sorted(sum(diverse, [])) == list(range(6))


def test_frequency_order_puts_the_most_populated_classes_first():
    y = np.repeat([7, 3, 5, 1], [2, 9, 5, 7])
    stream = ClassIncremental(classes_per_task=2, order="frequency", random_state=0)
    list(stream.split(None, y))
    assert [c.tolist() for c in stream.task_classes_] == [[3, 1], [5, 7]]


def test_similarity_from_raw_class_means_and_from_an_estimator():
    # raw class means: 10 and 11 point one way, 12 and 13 the other
    y = np.repeat([10, 11, 12, 13], 4)
    direction = {10: (1, 0.1), 11: (1, 0.0), 12: (0.0, 1), 13: (0.1, 1)}
    X = np.array([direction[c] for c in y], dtype=np.float32)
    # the two pairs are equally similar: which task comes first is a tie
    stream = ClassIncremental(classes_per_task=2, order="close_semantic")
    assert sorted(_groups(stream, X, y)) == [[10, 11], [12, 13]]
    swap = _FixedEmbeddings([lambda X: X[:, ::-1] * [1, 1] + [[0, 0]]], [[10, 11, 12, 13]])
    by_model = ClassIncremental(classes_per_task=2, order="close_semantic", similarity=swap)
    assert sorted(_groups(by_model, X, y)) == [[10, 11], [12, 13]]


def test_orders_are_deterministic_and_random_order_is_unchanged():
    y = np.repeat(np.arange(6), 4)  # balanced: frequency ties are broken at random
    a = _groups(ClassIncremental(order="frequency", random_state=3), y=y)
    b = _groups(ClassIncremental(order="frequency", random_state=3), y=y)
    assert a == b
    stream = ClassIncremental(random_state=5)  # the default order: as before
    list(stream.split(None, y))
    expected = np.random.RandomState(5).permutation(np.arange(6))
    np.testing.assert_array_equal(stream.class_order_, expected)
    with pytest.raises(ValueError, match="order"):
        list(ClassIncremental(order="alphabetic").split(None, y))
    with pytest.raises(ValueError, match="class_order"):
        list(ClassIncremental(order="frequency", class_order=list(range(6))).split(None, y))
    with pytest.raises(ValueError, match="similarity"):
        list(ClassIncremental(order="close_semantic", similarity=np.eye(3)).split(None, y))


# ------------------------------------------------------------------ KD
def _kd_terms():
    g = torch.Generator().manual_seed(0)
    f, tf = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    z, tz = torch.randn(5, 3, generator=g), torch.randn(5, 2, generator=g)
    return f, z, tf, tz


def test_feature_kd_is_the_mse_of_the_embeddings():
    f, z, tf, tz = _kd_terms()
    expected = np.mean((f.numpy() - tf.numpy()) ** 2)
    got = replay_distillation_loss("features", f, z, tf, tz)
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_logit_kd_is_the_distillation_on_the_old_classes():
    f, z, tf, tz = _kd_terms()
    T = 3.0

    def softmax(a):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    p_t = softmax(tz.numpy() / T)  # the teacher knows 2 classes: the student's first 2
    p_s = softmax(z.numpy()[:, :2] / T)
    expected = np.sum(p_t * (np.log(p_t) - np.log(p_s))) / 5
    got = replay_distillation_loss("logits", f, z, tf, tz, temperature=T)
    assert float(got) == pytest.approx(expected, rel=1e-5)
    both = replay_distillation_loss("both", f, z, tf, tz, temperature=T)
    mse = np.mean((f.numpy() - tf.numpy()) ** 2)
    assert float(both) == pytest.approx(expected + mse, rel=1e-5)
    with pytest.raises(ValueError, match="kind"):
        replay_distillation_loss(None, f, z, tf, tz)


def _weights(est):
    return {k: v.clone() for k, v in est.module_.state_dict().items()}


@pytest.mark.parametrize("method", [ER, DER])
def test_kd_with_weight_zero_is_plain_replay_bit_for_bit(method):
    X, y = _blobs()
    plain = method(memory_size=8, **FAST)
    kd = method(memory_size=8, kd="both", kd_weight=0.0, **FAST)
    for est in (plain, kd):
        est.partial_fit_task(X[y < 2], y[y < 2])
        est.partial_fit_task(X[y >= 2], y[y >= 2])
    a, b = _weights(plain), _weights(kd)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert kd.teacher_ is not None  # the KD path ran
    changed = method(memory_size=8, kd="features", kd_weight=10.0, **FAST)
    changed.partial_fit_task(X[y < 2], y[y < 2])
    changed.partial_fit_task(X[y >= 2], y[y >= 2])
    c = _weights(changed)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_er_kd_loss_adds_the_weighted_term():
    X, y = _blobs()
    est = ER(memory_size=8, kd="features", kd_weight=2.5, **FAST)
    est.partial_fit_task(X[y < 2], y[y < 2])
    teacher = est._frozen_copy()
    est.teacher_ = teacher
    est.module_.eval()
    xb = torch.as_tensor(X[y >= 2][:4])
    yb = torch.zeros(4, dtype=torch.long)
    with torch.no_grad():
        for p in est.module_.parameters():  # the student moves away from the teacher
            p.add_(0.05)
        loss = est._kd_training_loss(xb, yb, None)
        h = est.module_.features(xb)
        ce = torch.nn.functional.cross_entropy(est.module_.head(h), yb)
        mse = ((h - teacher.features(xb)) ** 2).mean()
    assert float(loss) == pytest.approx(float(ce + 2.5 * mse), rel=1e-6)
    assert float(mse) > 0


def test_kd_parameters_are_validated():
    X, y = _blobs()
    with pytest.raises(ValueError, match="kd must be"):
        ER(kd="audio", **FAST).partial_fit_task(X, y)
    with pytest.raises(ValueError, match="kd_weight"):
        ER(kd="features", kd_weight=-1, **FAST).partial_fit_task(X, y)


# ------------------------------------------------------------------ plots
def test_dmi_and_embedding_plots():
    from clestim.plotting import plot_dmi_matrix, plot_embeddings

    fig = plot_dmi_matrix([[1.0, 0.5], [0.8, 0.9]], accuracy_matrix=[[1.0, 0.0], [0.5, 0.9]])
    assert len(fig.axes) == 4  # two heatmaps and their colour bars
    assert "stab 80.0" in fig.axes[2].get_title() or "stab 80.0" in fig.axes[1].get_title()
    X, y = _blobs(n_per_class=8)
    est = ER(memory_size=8, **FAST)
    est.partial_fit_task(X[y < 2], y[y < 2])
    est.partial_fit_task(X[y >= 2], y[y >= 2])
    fig = plot_embeddings(est, X, y, perplexity=5, max_iter=250)
    panels = [ax for ax in fig.axes if ax.get_title().startswith("after task")]
    assert [ax.get_title() for ax in panels] == ["after task 1", "after task 2"]
    assert len(panels[0].collections) == 4  # one scatter per class


def test_report_shows_dmi_where_cells_hold_it(tmp_path):
    from clestim.benchmark import write_json_atomic
    from clestim.report import write_report

    (tmp_path / "cells").mkdir()
    write_json_atomic(tmp_path / "manifest.json", {"format": 1, "clestim": "test"})
    for run, stab in enumerate((0.6, 0.8)):
        D = [[0.9, 0.4], [stab, 0.7]]
        record = {"key": f"k{run}", "dataset": "dsa", "method": "ER", "run": run,
                  "settings": {}, "setting": "default", "accuracy_matrix": [[1.0, 0.0],
                                                                            [0.8, 0.9]],
                  "task_classes": [[0, 1], [2, 3]], "dmi_matrix": D,
                  "metrics": {"average_accuracy": 0.85, "average_forgetting": 0.2,
                              "learning_accuracy": 0.95, "dmi_stability": stab,
                              "dmi_plasticity": 0.8, "dmi_generalisation": 0.4}}
        write_json_atomic(tmp_path / "cells" / f"k{run}.json", record)
    written = write_report(tmp_path)
    table = (tmp_path / "table.md").read_text()
    # stab: 60 and 80 -> 70.0 ± t(0.975, 1) * 10 = 127.1
    assert "| DMI_stab | 70.0 [0.0, 100.0]† |" in table  # clipped; †: fewer than 3 runs
    assert "| DMI_gen | 40.0 ± 0.0† |" in table
    assert any(p.name == "dmi_matrix_dsa_default_ER.png" for p in written)
