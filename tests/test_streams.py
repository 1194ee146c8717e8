"""Tests of clestim.streams: coverage, determinism, class groups and bad input."""

import numpy as np
import pytest
from sklearn.base import clone

from clestim.streams import (
    BasicScenario,
    Blurry,
    ClassIncremental,
    DomainIncremental,
    StreamPart,
    TaskPool,
    unique_in_order,
    validation_experiment_split,
)

SEEDS = [0, 1, 7, 1234, 2024]


def _labels(seed, n_classes=6, n=90):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    y[:n_classes] = np.arange(n_classes)  # every class present
    return rng.permutation(y)


def _assert_partition(tasks, n):
    allidx = np.concatenate(tasks)
    assert allidx.size == n, "every sample exactly once"
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))


# ------------------------------------------------------------------ ClassIncremental
@pytest.mark.parametrize("seed", SEEDS)
def test_class_incremental_partition_and_determinism(seed):
    y = _labels(seed)
    stream = ClassIncremental(classes_per_task=2, random_state=seed)
    tasks = list(stream.split(np.zeros((len(y), 3)), y))
    assert len(tasks) == 3 == stream.get_n_splits(y=y)
    _assert_partition(tasks, len(y))
    # disjoint class groups, each task holds exactly the samples of its classes
    groups = stream.task_classes_
    assert sorted(np.concatenate(groups).tolist()) == list(range(6))
    for idx, g in zip(tasks, groups):
        assert set(y[idx].tolist()) == set(g.tolist())
        assert len(g) == 2
        assert np.all(np.diff(idx) > 0)
    # same seed -> same tasks; clone -> same tasks
    again = list(clone(stream).split(None, y))
    for a, b in zip(tasks, again):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(stream.class_order_, np.concatenate(groups))


def test_class_incremental_order_depends_on_seed_not_sample_order():
    y = _labels(0)
    orders = {tuple(ClassIncremental(random_state=s).task_classes(y)[0]) for s in range(20)}
    assert len(orders) > 5  # the first group varies with the seed
    perm = np.random.default_rng(3).permutation(len(y))
    a = ClassIncremental(random_state=5).task_classes(y)
    b = ClassIncremental(random_state=5).task_classes(y[perm])
    assert [g.tolist() for g in a] == [g.tolist() for g in b]


def test_class_incremental_first_appearance_without_shuffle():
    y = np.array(["walk", "sit", "walk", "run", "lie", "sit", "stand", "jump"])
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    tasks = list(stream.split(None, y))
    assert [g.tolist() for g in stream.task_classes_] == [
        ["walk", "sit"],
        ["run", "lie"],
        ["stand", "jump"],
    ]
    assert [t.tolist() for t in tasks] == [[0, 1, 2, 5], [3, 4], [6, 7]]
    assert unique_in_order([3, 1, 3, 2]).tolist() == [3, 1, 2]


def test_class_incremental_explicit_orders():
    y = np.repeat([0, 1, 2, 3, 4, 5], 2)
    s = ClassIncremental(class_order=[5, 4, 3, 2, 1, 0], classes_per_task=3)
    assert [g.tolist() for g in s.task_classes(y)] == [[5, 4, 3], [2, 1, 0]]
    s = ClassIncremental(class_order=[[5], [0, 1, 2], [3, 4]])
    assert s.get_n_splits() == 3
    tasks = list(s.split(None, y))
    assert [t.tolist() for t in tasks] == [[10, 11], [0, 1, 2, 3, 4, 5], [6, 7, 8, 9]]
    s = ClassIncremental(n_tasks=3, shuffle=False)
    assert [g.tolist() for g in s.task_classes(y)] == [[0, 1], [2, 3], [4, 5]]
    assert s.get_n_splits() == 3


def test_class_incremental_remainder_policies():
    y = np.repeat(np.arange(7), 3)
    with pytest.raises(ValueError, match="do not divide evenly.*remainder='last'"):
        ClassIncremental(classes_per_task=2, shuffle=False).task_classes(y)
    last = ClassIncremental(classes_per_task=2, shuffle=False, remainder="last")
    assert [g.tolist() for g in last.task_classes(y)] == [[0, 1], [2, 3], [4, 5, 6]]
    drop = ClassIncremental(classes_per_task=2, shuffle=False, remainder="drop")
    tasks = list(drop.split(None, y))
    assert [g.tolist() for g in drop.task_classes_] == [[0, 1], [2, 3], [4, 5]]
    assert sum(len(t) for t in tasks) == 18  # class 6 left out
    n3 = ClassIncremental(n_tasks=3, shuffle=False, remainder="last")
    assert [len(g) for g in n3.task_classes(y)] == [2, 2, 3]
    with pytest.raises(ValueError, match="remainder must be one of"):
        ClassIncremental(remainder="spread").task_classes(y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_tasks=5), "n_tasks=5 is larger than the number of classes available \\(4\\)"),
        (dict(classes_per_task=6), "classes_per_task=6 is larger"),
        (dict(class_order=[0, 1, 2, 9]), "do not occur in the data: \\[9\\]"),
        (dict(class_order=[0, 1, 2]), "misses classes \\[3\\]"),
        (dict(class_order=[[0, 1], [1, 2, 3]]), "more than once.*overlapping"),
        (dict(class_order=[0, 1, 1, 2, 3]), "more than once"),
        (dict(n_tasks=0), "positive integer"),
    ],
)
def test_class_incremental_bad_input(kwargs, match):
    y = np.repeat([0, 1, 2, 3], 2)
    with pytest.raises(ValueError, match=match):
        list(ClassIncremental(**kwargs).split(None, y))


def test_stream_checks_lengths_and_fitted_state():
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        list(ClassIncremental().split(np.zeros((3, 2)), np.arange(4)))
    with pytest.raises(ValueError, match="needs the labels"):
        list(ClassIncremental().split(None, None))
    with pytest.raises(ValueError, match="split yet"):
        ClassIncremental().task_indices(np.arange(4))
    with pytest.raises(ValueError, match="needs y"):
        ClassIncremental().get_n_splits()


def test_task_indices_use_the_training_order():
    y_train = np.array([3, 3, 1, 2, 0])
    y_test = np.array([0, 1, 2, 3, 0])  # other order of first appearance
    s = ClassIncremental(shuffle=False)
    list(s.split(None, y_train))
    assert [t.tolist() for t in s.task_indices(y_test)] == [[1, 3], [0, 2, 4]]


# ------------------------------------------------------------------ Blurry
@pytest.mark.parametrize("seed", SEEDS)
def test_blurry_partition_and_leak(seed):
    y = _labels(seed, n_classes=6, n=120)
    stream = Blurry(blurry=0.25, random_state=seed)
    tasks = list(stream.split(None, y))
    _assert_partition(tasks, len(y))
    base = ClassIncremental(random_state=seed)
    pure = list(base.split(None, y))
    # the major class groups are those of ClassIncremental with the same seed
    assert [g.tolist() for g in stream.task_classes_] == [g.tolist() for g in base.task_classes_]
    np.testing.assert_array_equal(stream.n_leaked_, [int(0.25 * len(p)) for p in pure])
    for t, (idx, g) in enumerate(zip(tasks, stream.task_classes_)):
        minor = ~np.isin(y[idx], g)
        stay = len(pure[t]) - stream.n_leaked_[t]
        assert np.isin(y[idx], g).sum() == stay
        assert minor.sum() == len(idx) - stay
    assert stream.n_leaked_.sum() > 0
    again = list(clone(stream).split(None, y))
    for a, b in zip(tasks, again):
        np.testing.assert_array_equal(a, b)
    # test tasks follow the major groups, without leakage
    for a, b in zip(stream.task_indices(y), pure):
        np.testing.assert_array_equal(a, b)


def test_blurry_bad_input():
    y = np.repeat([0, 1, 2, 3], 5)
    with pytest.raises(ValueError, match="fraction in \\[0, 1\\)"):
        list(Blurry(blurry=1.0).split(None, y))
    with pytest.raises(ValueError, match="at least 2 tasks"):
        list(Blurry(classes_per_task=4, blurry=0.1).split(None, y))
    zero = list(Blurry(blurry=0.0, shuffle=False).split(None, y))
    assert [t.tolist() for t in zero] == [list(range(10)), list(range(10, 20))]


# ------------------------------------------------------------------ DomainIncremental
@pytest.mark.parametrize("seed", SEEDS)
def test_domain_incremental_partition(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=60)
    subj = rng.permutation(np.repeat(np.array(["s1", "s2", "s3", "s4"]), 15))
    stream = DomainIncremental(groups_per_task=2, shuffle=True, random_state=seed)
    tasks = list(stream.split(None, y, subj))
    _assert_partition(tasks, 60)
    for idx, g in zip(tasks, stream.task_groups_):
        assert set(subj[idx].tolist()) == set(g.tolist())
    assert sorted(np.concatenate(stream.task_groups_).tolist()) == ["s1", "s2", "s3", "s4"]
    for a, b in zip(stream.task_indices(y, subj), tasks):
        np.testing.assert_array_equal(a, b)


def test_domain_incremental_order_and_errors():
    y = np.array([0, 1, 0, 1, 0, 1])
    g = np.array([9, 9, 4, 4, 7, 7])
    s = DomainIncremental()
    assert [t.tolist() for t in s.split(None, y, g)] == [[0, 1], [2, 3], [4, 5]]
    assert [c.tolist() for c in s.task_classes_] == [[0, 1]] * 3
    s = DomainIncremental(group_order=[7, 9, 4])
    assert [t.tolist() for t in s.split(None, y, g)] == [[4, 5], [0, 1], [2, 3]]
    with pytest.raises(ValueError, match="groups=None"):
        list(DomainIncremental().split(None, y))
    with pytest.raises(ValueError, match="overlapping"):
        list(DomainIncremental(group_order=[[9, 4], [4, 7]]).split(None, y, g))
    with pytest.raises(ValueError, match="do not occur.*\\[5\\]"):
        list(DomainIncremental(group_order=[9, 4, 7, 5]).split(None, y, g))
    with pytest.raises(ValueError, match="do not divide evenly"):
        list(DomainIncremental(groups_per_task=2).split(None, y, g))


# ------------------------------------------------------------------ TaskPool
@pytest.mark.parametrize("seed", SEEDS)
def test_task_pool(seed):
    y = _labels(seed, n_classes=11, n=200)
    pool = TaskPool(classes_per_task=2, n_tasks=3, n_problems=4, random_state=seed)
    streams = pool.problems()
    assert [s.problem for s in streams] == [0, 1, 2, 3]
    chosen = []
    for s in streams:
        tasks = list(s.split(None, y))
        assert len(tasks) == 3 == s.get_n_splits()
        # the pool: 5 disjoint tasks of 2 classes, one class left out, same for all problems
        assert len(s.pool_) == 5 and all(len(g) == 2 for g in s.pool_)
        assert len(np.unique(np.concatenate(s.pool_))) == 10
        assert [g.tolist() for g in s.pool_] == [g.tolist() for g in streams[0].pool_]
        # tasks cover exactly the samples of their classes, no sample twice
        allidx = np.concatenate(tasks)
        assert len(allidx) == len(np.unique(allidx))
        np.testing.assert_array_equal(
            np.sort(allidx), np.flatnonzero(np.isin(y, np.concatenate(s.task_classes_)))
        )
        pool_sets = [set(g.tolist()) for g in s.pool_]
        assert all(set(g.tolist()) in pool_sets for g in s.task_classes_)
        chosen.append(tuple(s.problems_[s.problem]))
    assert len(set(chosen)) > 1  # problems differ
    again = TaskPool(classes_per_task=2, n_tasks=3, n_problems=4, random_state=seed)
    list(again.split(None, y))
    assert [g.tolist() for g in again.task_classes_] == [
        g.tolist() for g in streams[0].task_classes_
    ]


def test_task_pool_errors():
    y = np.repeat(np.arange(6), 2)
    with pytest.raises(ValueError, match="n_tasks must be an integer in \\[1, 3\\]"):
        list(TaskPool(classes_per_task=2, n_tasks=4).split(None, y))
    with pytest.raises(ValueError, match="problem must be"):
        list(TaskPool(n_problems=2, problem=2).split(None, y))
    with pytest.raises(ValueError, match="pool would be empty"):
        list(TaskPool(classes_per_task=7).split(None, y))


# ------------------------------------------------------------------ validation/experiment
def test_validation_experiment_split():
    y = np.repeat(np.arange(18), 2)  # 9 tasks, like DSA
    full = ClassIncremental(random_state=3)
    val, exp = validation_experiment_split(full)
    v = list(val.split(None, y))
    e = list(exp.split(None, y))
    f = list(full.split(None, y))
    assert len(v) == 3 and len(e) == 6
    for a, b in zip(v + e, f):
        np.testing.assert_array_equal(a, b)
    assert val.get_n_splits(y=y) == 3 and exp.get_n_splits(y=y) == 6
    assert exp.tasks_.tolist() == [3, 4, 5, 6, 7, 8]
    # task_indices of the experiment stream follow its own numbering
    np.testing.assert_array_equal(exp.task_indices(y)[0], f[3])
    # short streams (UCI-HAR: 3 tasks) are used whole
    y6 = np.repeat(np.arange(6), 2)
    assert len(list(val.split(None, y6))) == 3 and len(list(exp.split(None, y6))) == 3
    # cloneable with nested params
    assert clone(exp).get_params()["stream__random_state"] == 3


def test_stream_part_errors():
    y = np.repeat(np.arange(18), 2)
    with pytest.raises(ValueError, match="integer random_state"):
        list(StreamPart(ClassIncremental(shuffle=True)).split(None, y))
    with pytest.raises(ValueError, match="part must be"):
        list(StreamPart(ClassIncremental(shuffle=False), part="test").split(None, y))
    with pytest.raises(ValueError, match="min_tasks"):
        list(StreamPart(ClassIncremental(shuffle=False), min_tasks=3).split(None, y))


# ------------------------------------------------------------------ basic scenarios
def test_basic_scenarios_tasks_and_labels():
    # classes: 0 -> C10, 2 -> C02, 1 -> third set, 5 -> never presented (C00)
    y = np.array([0, 2, 1, 5, 0, 2, 1, 5])
    expected = {
        # scenario: (T1 indices, T1 labels, T2 indices, T2 labels)
        "ADD": ([0, 4], [1, 1], [1, 5], [2, 2]),
        "EXP": ([0, 4], [1, 1], [1, 2, 5, 6], [2, 1, 2, 1]),
        "INC": ([0, 2, 4, 6], [1, 2, 1, 2], [1, 2, 5, 6], [2, 1, 2, 1]),
        "SEP": ([0, 2, 4, 6], [1, 1, 1, 1], [1, 2, 5, 6], [2, 2, 2, 2]),
    }
    for name, (i1, l1, i2, l2) in expected.items():
        assign = (0, 2) if name == "ADD" else (0, 2, 1)
        s = BasicScenario(name, assignment=assign)
        t1, t2 = s.split(None, y)
        assert s.get_n_splits() == 2
        assert t1.tolist() == i1 and t2.tolist() == i2, name
        assert s.relabel(y[t1], 0).tolist() == l1, name
        assert s.relabel(y[t2], 1).tolist() == l2, name
        sets = s.base_sets(y)
        assert sets["C10"].tolist() == [0, 4] and sets["C02"].tolist() == [1, 5]
        # test tasks: same definition
        assert [t.tolist() for t in s.task_indices(y)] == [i1, i2]


def test_basic_scenario_errors():
    y = np.array([0, 1, 2, 0, 1, 2])
    with pytest.raises(ValueError, match="disjoint"):
        list(BasicScenario("INC", assignment=(0, 0, 1)).split(None, y))
    with pytest.raises(ValueError, match="assigns 3 classes"):
        list(BasicScenario("SEP", assignment=(0, 1)).split(None, y))
    with pytest.raises(ValueError, match="absent from y"):
        list(BasicScenario("ADD", assignment=(0, 9)).split(None, y))
    with pytest.raises(ValueError, match="scenario must be one of"):
        list(BasicScenario("DEL").split(None, y))
    s = BasicScenario("ADD")
    list(s.split(None, y))
    assert s.base_classes_ == {"C10": 0, "C02": 1}
    with pytest.raises(ValueError, match="not presented in task 0"):
        s.relabel(np.array([1]), 0)
