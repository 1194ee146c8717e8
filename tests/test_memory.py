"""Memory buffer and policies: invariants, herding order, KNN-Shapley, subjects."""

import itertools
import math

import numpy as np
import pytest
import torch

from clestim.memory import (
    ASERRetrieval,
    HerdingSelection,
    ImportanceSelection,
    MemoryBuffer,
    Reservoir,
    SubjectBalancedRetrieval,
    SubjectSubset,
    UncertaintyRetrieval,
    bald,
    check_class_quota,
    herding_order,
    knn_shapley,
)


def _fields(y, groups=None, score=None):
    y = torch.as_tensor(y, dtype=torch.long)
    fields = {"X": torch.arange(len(y), dtype=torch.float32)[:, None] + 100 * y[:, None], "y": y}
    if groups is not None:
        fields["group"] = torch.as_tensor(groups, dtype=torch.long)
    if score is not None:
        fields["score"] = torch.as_tensor(score, dtype=torch.float64)
    return fields


# --------------------------------------------------------------------- herding
def test_herding_order_hand_checked():
    # a=(1,0), b=(0,1), c=(1,1)/sqrt2, d=(2,1)/sqrt5; mu = (.6504, .5386).
    # k=1: |mu-phi| = .642, .797, .178, .261            -> c
    # k=2: |mu-(phi+c)/2| = .275 (a), .433 (b), .155 (d) -> d
    # k=3: |mu-(phi+c+d)/3| = .266 (a), .214 (b)          -> b, then a
    features = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    assert herding_order(features).tolist() == [2, 3, 1, 0]
    assert herding_order(features, m=2).tolist() == [2, 3]
    # the scale of a feature does not matter (features are L2-normalised)
    assert herding_order(features * torch.tensor([[5.0], [1.0], [3.0], [0.1]])).tolist() == [
        2, 3, 1, 0
    ]


def test_herding_order_minimises_the_mean_gap_greedily():
    features = torch.randn(30, 5, generator=torch.Generator().manual_seed(0))
    order = herding_order(features, m=6)
    phi = torch.nn.functional.normalize(features.double(), dim=1)
    mu = phi.mean(0)
    for k in range(1, 7):
        prefix = phi[order[: k - 1]].sum(0)
        gaps = [
            float(torch.linalg.vector_norm(mu - (phi[i] + prefix) / k))
            for i in range(30)
            if i not in order[: k - 1].tolist()
        ]
        assert float(torch.linalg.vector_norm(mu - (phi[order[k - 1]] + prefix) / k)) == min(gaps)


def test_class_balanced_herding_quota_and_order_kept():
    # features are the inputs themselves: class c's samples are 2-D points
    buffer = MemoryBuffer(6, update=HerdingSelection(lambda X: X))
    gen = torch.Generator().manual_seed(0)
    X0 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]])
    buffer.add(gen, X=X0, y=torch.zeros(4, dtype=torch.long))  # one class: quota 6, all 4 kept
    assert buffer["X"].tolist() == X0[[2, 3, 1, 0]].tolist()
    X1 = torch.randn(10, 2, generator=gen)
    buffer.add(gen, X=X1, y=torch.ones(10, dtype=torch.long))  # 2 classes: quota 3
    assert buffer["y"].tolist() == [0] * 3 + [1] * 3
    assert buffer["X"][:3].tolist() == X0[[2, 3, 1]].tolist()  # the last exemplar dropped
    assert buffer["X"][3:].tolist() == X1[herding_order(X1, 3)].tolist()
    buffer.add(gen, X=torch.randn(2, 2), y=torch.full((2,), 7))  # uneven: class 7 has 2 < quota
    assert buffer["y"].tolist() == [0, 0, 1, 1, 7, 7]
    assert buffer["X"][:2].tolist() == X0[[2, 3]].tolist()


def test_class_quota_error():
    assert check_class_quota(10, 3) == 3
    with pytest.raises(ValueError, match="at least one per class"):
        check_class_quota(2, 3)
    buffer = MemoryBuffer(2, update=ImportanceSelection())
    with pytest.raises(ValueError, match="at least one per class"):
        buffer.add(None, **_fields([0, 1, 2], score=[1.0, 2.0, 3.0]))


@pytest.mark.parametrize("capacity", [1, 7, 20])
def test_importance_selection_invariants(capacity):
    gen = torch.Generator().manual_seed(capacity)
    buffer = MemoryBuffer(capacity, update=ImportanceSelection())
    for classes in ([0, 1], [2, 3], [4]):
        if len(set(buffer["y"].tolist()) if len(buffer) else set()) + len(classes) > capacity:
            with pytest.raises(ValueError):
                buffer.add(gen, **_fields(classes * 5, score=torch.rand(len(classes) * 5)))
            return
        sizes = {c: 3 + 4 * i for i, c in enumerate(classes)}  # uneven class counts
        y = sum(([c] * n for c, n in sizes.items()), [])
        score = torch.rand(len(y), generator=gen)
        buffer.add(gen, **_fields(y, score=score))
        assert len(buffer) <= capacity
        counts = torch.bincount(buffer["y"])
        m = capacity // len(torch.unique(buffer["y"]))
        for c in classes:  # new classes: their top-m scores, in descending order
            kept = buffer["score"][buffer["y"] == c]
            assert len(kept) == min(m, sizes[c])
            best = sorted(score[torch.as_tensor(y) == c].tolist(), reverse=True)
            assert kept.tolist() == best[: len(kept)]
        assert (counts[counts > 0] <= m).all()


# ------------------------------------------------------------------- reservoir
def test_reservoir_capacity_and_uniformity():
    n_items, capacity, n_runs = 500, 50, 300
    counts = torch.zeros(n_items)
    gen = torch.Generator().manual_seed(0)
    for _ in range(n_runs):
        buffer = MemoryBuffer(capacity, update=Reservoir())
        for start in range(0, n_items, 32):
            y = torch.arange(start, min(start + 32, n_items))
            buffer.add(gen, X=y[:, None].float(), y=y)
            assert len(buffer) <= capacity
        assert len(buffer) == capacity and len(torch.unique(buffer["y"])) == capacity
        counts[buffer["y"]] += 1
    freq = counts / n_runs  # each item: Binomial(300, 0.1) / 300, sd ~ 0.017
    blocks = freq.reshape(10, 50).mean(1)  # per block of 50 items: sd ~ 0.0025
    assert torch.allclose(blocks, torch.full((10,), capacity / n_items), atol=0.01)
    assert abs(float(freq.std()) - math.sqrt(0.1 * 0.9 / n_runs)) < 0.005


# -------------------------------------------------------------------- subjects
def test_subject_subset_only_lets_chosen_subjects_in():
    buffer = MemoryBuffer(10, update=SubjectSubset([1, 3]))
    groups = [0, 1, 2, 3] * 10
    buffer.add(torch.Generator().manual_seed(0), **_fields([0] * 40, groups=groups))
    assert len(buffer) == 10 and set(buffer["group"].tolist()) <= {1, 3}
    assert buffer.n_seen == 20  # the reservoir only counts the chosen subjects' samples


def test_subject_balanced_retrieval():
    groups = [0] * 20 + [1] * 20 + [2] * 3 + [3] * 20
    buffer = MemoryBuffer(100)
    buffer.add(None, **_fields([0] * len(groups), groups=groups))
    policy = SubjectBalancedRetrieval()
    gen = torch.Generator().manual_seed(0)
    idx = policy.retrieve(buffer, 12, gen)
    assert torch.bincount(buffer["group"][idx]).tolist() == [3, 3, 3, 3]
    idx = policy.retrieve(buffer, 30, gen)  # subject 2 has only 3: the others make up for it
    counts = torch.bincount(buffer["group"][idx]).tolist()
    assert len(torch.unique(idx)) == 30 and counts[2] == 3 and sorted(counts) == [3, 9, 9, 9]


# ------------------------------------------------------------------------ ASER
def test_knn_shapley_hand_checked():
    # eval point 0 (label 0); train at 1 (label 0), 2 (label 1), 3 (label 0).
    # K=1, from the six orderings: a is pivotal in 5 (+1), b in 1 (-1), c in 2 (+1).
    train = torch.tensor([[1.0], [2.0], [3.0]])
    y_train = torch.tensor([0, 1, 0])
    sv = knn_shapley(train, y_train, torch.zeros(1, 1), torch.tensor([0]), k=1)
    assert torch.allclose(sv, torch.tensor([[5 / 6, -1 / 6, 1 / 3]], dtype=torch.float64))
    # K=2: s(c) = 1/3, s(b) = 1/3 - 1/2, s(a) = s(b) + 1/2; sum = U(all) = 1/2
    sv = knn_shapley(train, y_train, torch.zeros(1, 1), torch.tensor([0]), k=2)
    assert torch.allclose(sv, torch.tensor([[1 / 3, -1 / 6, 1 / 3]], dtype=torch.float64))
    # the input order does not matter
    perm = torch.tensor([2, 0, 1])
    sv_perm = knn_shapley(train[perm], y_train[perm], torch.zeros(1, 1), torch.tensor([0]), 2)
    assert torch.allclose(sv_perm, sv[:, perm])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_knn_shapley_equals_brute_force_shapley(k):
    gen = torch.Generator().manual_seed(k)
    train, y_train = torch.randn(5, 2, generator=gen), torch.tensor([0, 1, 0, 1, 1])
    test, y_test = torch.randn(2, 2, generator=gen), torch.tensor([1, 0])
    sv = knn_shapley(train, y_train, test, y_test, k)
    for e in range(2):
        dist = ((train - test[e]) ** 2).sum(1)

        def utility(subset, dist=dist, label=y_test[e]):
            near = sorted(subset, key=lambda j: float(dist[j]))[:k]
            return sum(int(y_train[j] == label) for j in near) / k

        exact = np.zeros(5)
        perms = list(itertools.permutations(range(5)))
        for perm in perms:
            for pos, j in enumerate(perm):
                exact[j] += utility(perm[: pos + 1]) - utility(perm[:pos])
        assert np.allclose(sv[e].numpy(), exact / len(perms))


def test_aser_retrieval():
    policy = ASERRetrieval(lambda X: X, k=1, n_smp_per_class=2)
    buffer = MemoryBuffer(8)
    y = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    X = torch.tensor([[0.0], [0.1], [0.2], [0.3], [1.0], [1.1], [1.2], [1.3]])
    buffer.add(None, X=X, y=y)
    gen = torch.Generator().manual_seed(0)
    new_X, new_y = torch.tensor([[0.05], [1.05]]), torch.tensor([2, 2])
    # not yet offered more than it holds: random retrieval of n
    assert len(policy.retrieve(buffer, 5, gen, X=new_X, y=new_y)) == 5
    buffer.n_seen = 100
    idx = policy.retrieve(buffer, 3, gen, X=new_X, y=new_y)
    assert len(idx) == 3 and len(set(idx.tolist())) == 3
    assert len(policy.retrieve(buffer, 32, gen, X=new_X, y=new_y)) == 4  # 2 per class
    # without a new batch: random
    assert len(policy.retrieve(buffer, 6, gen)) == 6


def test_bald_and_uncertainty_retrieval():
    same = torch.softmax(torch.randn(1, 4, 3), -1).expand(5, 4, 3)
    assert torch.allclose(bald(same), torch.zeros(4), atol=1e-6)
    split = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert torch.allclose(bald(split), torch.tensor([math.log(2)]))

    buffer = MemoryBuffer(6)
    buffer.add(None, X=torch.arange(6.0)[:, None], y=torch.tensor([0, 0, 0, 1, 1, 1]))
    uncertain = {1, 5}  # these two get disagreeing predictions

    def mc_probs(X):
        p = torch.full((2, len(X), 2), 0.5)
        for i, x in enumerate(X[:, 0].long().tolist()):
            if x in uncertain:
                p[:, i] = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
        return p

    policy = UncertaintyRetrieval(mc_probs, refresh_every=3)
    assert set(policy.retrieve(buffer, 2, None, epoch=0).tolist()) == uncertain
    uncertain = {0, 4}
    assert set(policy.retrieve(buffer, 2, None, epoch=1).tolist()) == {1, 5}  # kept
    assert set(policy.retrieve(buffer, 2, None, epoch=3).tolist()) == {0, 4}  # refreshed


class TestASERUpdate:
    @staticmethod
    def _buffer(capacity=8):
        from clestim.memory import ASERUpdate

        return MemoryBuffer(capacity, update=ASERUpdate(lambda X: X, k=1, n_smp_per_class=2,
                                                        batch_size=4))

    def test_fills_then_keeps_capacity(self):
        buffer = self._buffer()
        g = torch.Generator().manual_seed(0)
        X = torch.randn(20, 2, generator=g)
        y = torch.arange(20) % 2
        buffer.add(g, X=X, y=y)
        assert len(buffer) == 8 and buffer.n_seen == 20
        for row, label in zip(buffer["X"], buffer["y"]):  # every slot holds an offered sample
            match = (X == row).all(1)
            assert match.any() and y[match][0] == label

    def test_a_class_absent_from_memory_enters(self):
        buffer = self._buffer()
        g = torch.Generator().manual_seed(0)
        old = torch.randn(8, 2, generator=g) * 0.1  # class 0 around the origin
        buffer.add(g, X=old, y=torch.zeros(8, dtype=torch.long))
        new = torch.randn(4, 2, generator=g) * 0.1 + 5.0  # class 1, far away
        buffer.add(g, X=new, y=torch.ones(4, dtype=torch.long))
        assert len(buffer) == 8 and buffer.n_seen == 12
        n_new = int((buffer["y"] == 1).sum())
        assert n_new >= 1  # the minority class is evaluated on itself and gets slots
        kept_new = buffer["X"][buffer["y"] == 1]
        assert all(any(torch.equal(row, x) for x in new) for row in kept_new)

    def test_aser_method_uses_it(self):
        from clestim import ASER
        from clestim.memory import ASERUpdate

        assert isinstance(ASER()._update_policy(), ASERUpdate)
        assert not isinstance(ASER(aser_update=False)._update_policy(), ASERUpdate)
