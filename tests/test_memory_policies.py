"""Each memory policy's selection rule on a constructed case with a known answer."""

import numpy as np
import pytest
import torch
from scipy import stats

from clestim.memory import (
    ASERRetrieval,
    ASERUpdate,
    ImportanceSelection,
    MemoryBuffer,
    RandomRetrieval,
    Reservoir,
    SubjectBalancedRetrieval,
    SubjectSubset,
    knn_shapley,
    memory_capacity,
)


# ------------------------------------------------------------------------ ASER
def _aser_case():
    """Two old classes in memory (5 samples each), an incoming batch of both."""
    g = torch.Generator().manual_seed(0)
    y = torch.tensor([0] * 5 + [1] * 5)
    X = torch.randn(10, 2, generator=g) + 1.5 * y[:, None]
    buffer = MemoryBuffer(10)
    buffer.add(None, X=X, y=y)
    buffer.n_seen = 50  # offered more than it holds: ASER ranks
    new_X = torch.randn(6, 2, generator=g) + 0.75
    new_y = torch.tensor([0, 1, 0, 1, 0, 1])
    return buffer, new_X, new_y


def test_aser_retrieves_the_candidates_of_highest_adversarial_shapley_value():
    buffer, new_X, new_y = _aser_case()
    policy = ASERRetrieval(lambda x: x, k=2, n_smp_per_class=3)
    gen = torch.Generator().manual_seed(1)
    idx = policy.retrieve(buffer, 4, gen, X=new_X, y=new_y)
    # candidates: 3 per class; cooperative set: the other 2 per class
    y = buffer["y"]
    cand, coop = _draws(y, 3, torch.Generator().manual_seed(1))
    assert set(idx.tolist()) <= set(cand.tolist()) and len(idx) == 4
    X = buffer["X"]
    asv = knn_shapley(X[cand], y[cand], X[coop], y[coop], 2).mean(0) - knn_shapley(
        X[cand], y[cand], new_X, new_y, 2
    ).mean(0)
    assert idx.tolist() == cand[torch.argsort(asv, descending=True)[:4]].tolist()
    value = dict(zip(cand.tolist(), asv.tolist()))
    picked = sorted(value[i] for i in idx.tolist())
    left = [v for i, v in value.items() if i not in idx.tolist()]
    assert picked[0] >= max(left)  # the retrieved are the most valuable candidates
    assert [value[i] for i in idx.tolist()] == sorted(picked, reverse=True)
    assert max(asv) - min(asv) > 1e-3  # not a tie: the ranking decides


def _draws(y, per_class, gen):
    """The candidate and cooperative draws ASER makes with ``gen`` (class-balanced,
    random within each class)."""
    def draw(labels):
        picks = []
        for c in torch.unique(labels).tolist():
            slots = torch.nonzero(labels == c).flatten()
            picks.append(slots[torch.randperm(len(slots), generator=gen)[:per_class]])
        return torch.cat(picks)

    cand = draw(y)
    rest = torch.ones(len(y), dtype=torch.bool)
    rest[cand] = False
    rest = torch.nonzero(rest).flatten()
    return cand, rest[draw(y[rest])]


def test_aser_prefers_a_sample_the_new_batch_interferes_with():
    # K=1, no cooperative set: ASV(i) = -mean_k s_k(i). The new samples are all of
    # class 0 and lie next to the class-1 memory sample at 5.0, so the class-0
    # memory samples are their only (and nearest-first) matches: positive s, low ASV.
    # The class-1 samples have s = 0 for every new sample; the ranking must put them
    # first.
    y = torch.tensor([0, 0, 1, 1])
    X = torch.tensor([[0.0], [1.0], [5.0], [9.0]])
    buffer = MemoryBuffer(4)
    buffer.add(None, X=X, y=y)
    buffer.n_seen = 40
    new_X, new_y = torch.tensor([[4.9], [5.1]]), torch.tensor([0, 0])
    policy = ASERRetrieval(lambda x: x, k=1, n_smp_per_class=2)
    idx = policy.retrieve(buffer, 2, torch.Generator().manual_seed(0), X=new_X, y=new_y)
    assert sorted(idx.tolist()) == [2, 3]


# ------------------------------------------------------------- class balanced
def test_class_balanced_selection_equal_quotas_and_top_scores():
    buffer = MemoryBuffer(12, update=ImportanceSelection())
    y = torch.tensor([0] * 10 + [1] * 10 + [2] * 10)
    score = torch.cat([torch.arange(10.0), 10 - torch.arange(10.0), torch.arange(10.0) % 4])
    X = torch.arange(30.0)[:, None]
    buffer.add(None, X=X, y=y, score=score)
    assert torch.bincount(buffer["y"]).tolist() == [4, 4, 4]  # 12 // 3
    assert buffer["X"][buffer["y"] == 0].flatten().tolist() == [9, 8, 7, 6]
    assert buffer["X"][buffer["y"] == 1].flatten().tolist() == [10, 11, 12, 13]
    # class 2's scores 0,1,2,3,0,1,2,3,0,1: the two 3s then the first two 2s (stable)
    assert buffer["X"][buffer["y"] == 2].flatten().tolist() == [23, 27, 22, 26]
    # a fourth class: quota 3, old classes drop their least important exemplar
    buffer.add(None, X=torch.arange(40.0, 45.0)[:, None], y=torch.full((5,), 3),
               score=torch.tensor([1.0, 5.0, 2.0, 4.0, 3.0]))
    assert torch.bincount(buffer["y"]).tolist() == [3, 3, 3, 3]
    assert buffer["X"][buffer["y"] == 0].flatten().tolist() == [9, 8, 7]
    assert buffer["X"][buffer["y"] == 2].flatten().tolist() == [23, 27, 22]
    assert buffer["X"][buffer["y"] == 3].flatten().tolist() == [41, 43, 44]


def test_class_balanced_selection_keeps_all_of_a_small_class():
    buffer = MemoryBuffer(9, update=ImportanceSelection())
    y = torch.tensor([0] * 2 + [1] * 8)
    buffer.add(None, X=torch.arange(10.0)[:, None], y=y, score=torch.arange(10.0))
    # quota 9 // 2 = 4: class 0 keeps both, class 1 its 4 best; the budget is not refilled
    assert torch.bincount(buffer["y"]).tolist() == [2, 4]
    assert buffer["X"][buffer["y"] == 1].flatten().tolist() == [9, 8, 7, 6]


# ------------------------------------------------------------------- random
def test_random_retrieval_is_uniform_without_replacement():
    buffer = MemoryBuffer(10)
    buffer.add(None, X=torch.zeros(10, 1), y=torch.arange(10))
    gen = torch.Generator().manual_seed(0)
    policy = RandomRetrieval()
    counts = np.zeros(10)
    first = np.zeros(10)
    for _ in range(3000):
        idx = policy.retrieve(buffer, 3, gen)
        assert len(idx) == 3 and len(set(idx.tolist())) == 3
        counts[idx.numpy()] += 1
        first[int(idx[0])] += 1
    # each slot is drawn with probability 3/10 (and comes first with 1/10)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.chisquare(first).pvalue > 1e-3
    assert np.abs(counts / 3000 - 0.3).max() < 0.04
    assert len(policy.retrieve(buffer, 50, gen)) == 10
    assert len(buffer.sample(1, gen)["y"]) == 1 and buffer.sample(0, gen) is None


# ----------------------------------------------------------------- capacity
@pytest.mark.parametrize(
    "memory_size, n_seen, expected",
    [(1, 10, 1), (366, 10, 366), (366, 10**6, 366), (0.05, 2440, 122), (0.05, 4880, 244),
     (0.05, 10, 1), (1.0, 37, 37), (0.1, 99, 9)],
)
def test_memory_capacity(memory_size, n_seen, expected):
    assert memory_capacity(memory_size, n_seen) == expected


@pytest.mark.parametrize("bad", [0, -3, 0.0, 1.5, True])
def test_memory_capacity_rejects(bad):
    with pytest.raises((ValueError, TypeError)):
        memory_capacity(bad, 10)


# ---------------------------------------------------------- reproducibility
def _offer(update, seed):
    g = torch.Generator().manual_seed(seed)
    buffer = MemoryBuffer(6, update=update)
    for start in range(0, 40, 8):
        y = torch.arange(start, start + 8) % 3
        buffer.add(g, X=torch.arange(start, start + 8.0)[:, None], y=y,
                   group=torch.arange(start, start + 8) % 4)
    return buffer["X"].flatten().tolist()


@pytest.mark.parametrize("make", [
    Reservoir,
    lambda: SubjectSubset([0, 2]),
    lambda: ASERUpdate(lambda x: x, k=1, n_smp_per_class=1, batch_size=4),
], ids=["reservoir", "subject_subset", "aser_update"])
def test_updates_draw_only_from_the_generator(make):
    torch.manual_seed(0)
    first = _offer(make(), 3)
    torch.manual_seed(1)  # the global generator must not matter
    assert _offer(make(), 3) == first
    assert any(_offer(make(), seed) != first for seed in (4, 5, 6))


@pytest.mark.parametrize("policy", [
    RandomRetrieval(), SubjectBalancedRetrieval(), ASERRetrieval(lambda x: x, k=1)
], ids=["random", "subject_balanced", "aser"])
def test_retrievals_draw_only_from_the_generator(policy):
    buffer, new_X, new_y = _aser_case()
    buffer.fields["group"] = torch.arange(10) % 3

    def draw(seed, global_seed):
        torch.manual_seed(global_seed)
        g = torch.Generator().manual_seed(seed)
        return policy.retrieve(buffer, 4, g, X=new_X, y=new_y).tolist()

    first = draw(0, 0)
    assert draw(0, 1) == first
    assert any(draw(seed, 0) != first for seed in (1, 2, 3, 4))
