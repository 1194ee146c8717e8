"""GEM, A-GEM, GSS, HAL, FDR, confidence-driven rehearsal and memory bytes.

Each method's own rule is pinned against a value computed independently here;
the methods are then run on real UCI-HAR windows (small CNN, 3 tasks of 2 classes).
"""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from test_replay_methods import FAST, TINY, _stream_result, naive_forgetting  # noqa: F401

from clestim import AGEM, DER, ER, FDR, GEM, GSS, HAL, Naive
from clestim.memory import ConfidenceGate, GSSGreedy, MemoryBuffer, TaskBalanced, gss_scores
from clestim.methods.fdr import function_distance
from clestim.methods.gem import agem_project, gem_project
from clestim.streams import ClassIncremental


# ------------------------------------------------------------------ GEM / A-GEM
def test_gem_projection_satisfies_every_constraint_and_solves_the_dual():
    gen = torch.Generator().manual_seed(0)
    G = torch.randn(4, 30, generator=gen, dtype=torch.float64)
    g = -G[0] - 0.5 * G[2] + 0.1 * torch.randn(30, generator=gen, dtype=torch.float64)
    assert (G @ g < 0).any()
    P, q = (G @ G.T).numpy(), (G @ g).numpy()
    for margin in (0.0, 0.5):
        x = gem_project(g, G, margin)
        assert (G @ x >= -1e-8).all()
        # the dual solved independently: min 1/2 v'GG'v + g'G'v over v >= margin
        res = minimize(lambda v: 0.5 * v @ P @ v + q @ v, np.full(4, margin + 1.0),
                       jac=lambda v: P @ v + q, bounds=[(margin, None)] * 4, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-12})
        np.testing.assert_allclose(x.numpy(), (g + G.T @ torch.from_numpy(res.x)).numpy(),
                                   atol=1e-5)


def test_gem_projection_is_the_identity_without_violation():
    G = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    g = torch.tensor([0.5, 0.0, -3.0])
    assert gem_project(g, G, 0.5) is g
    # one violated constraint and no margin: the closed-form projection
    x = gem_project(torch.tensor([-2.0, 1.0, 1.0]), G[:1], 0.0)
    torch.testing.assert_close(x, torch.tensor([0.0, 1.0, 1.0]))


def test_agem_projection_matches_the_formula():
    g, ref = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.0, 1.0, 1.0])
    # g.ref = -1.5, ref.ref = 2: g - (-1.5 / 2) ref
    torch.testing.assert_close(agem_project(g, ref), torch.tensor([1.0, -1.25, 1.25]))
    assert agem_project(g, torch.tensor([1.0, 0.0, 0.0])) is g  # g.ref = 1 >= 0


def test_gem_steps_keep_the_memory_loss_from_rising(uci_har_small):
    """The surrogate loss hands the projected gradient to the optimizer."""
    X, y = uci_har_small["train"]
    est = GEM(memory_size=20, **TINY)
    est.partial_fit_task(X[y < 2], y[y < 2])
    est.partial_fit_task(X[(y == 2) | (y == 3)], y[(y == 2) | (y == 3)])
    assert set(est.memory_["task"].tolist()) == {0, 1}
    assert (torch.bincount(est.memory_["task"]) == 10).all()  # an equal share per task
    batch_X, batch_y = est._tensor(X[y == 4][:16]), est._tensor(y[y == 4][:16], torch.long)
    est._generator = torch.Generator().manual_seed(0)
    est.module_.head.grow(1)
    params = [p for p in est.module_.parameters() if p.requires_grad]
    est.module_.zero_grad()
    est._training_loss(batch_X, batch_y).backward()
    step = torch.cat([p.grad.reshape(-1) for p in params])
    for loss in est._reference_losses():
        ref = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)])
        assert float(step @ ref) >= -1e-5 * float(step.norm() * ref.norm())


# ------------------------------------------------------------------------ GSS
def test_gss_score_is_the_largest_cosine_with_the_memory_gradients():
    rng = np.random.default_rng(0)
    grads, memory = rng.normal(size=(5, 7)), rng.normal(size=(3, 7))
    cos = (grads @ memory.T) / np.outer(np.linalg.norm(grads, axis=1),
                                        np.linalg.norm(memory, axis=1))
    np.testing.assert_allclose(gss_scores(torch.from_numpy(grads), torch.from_numpy(memory)),
                               cos.max(1), rtol=1e-12)


def _identity_grads(X, y):
    return X  # each sample's "gradient" is its input: a constructed case


def test_gss_keeps_the_budget_and_prefers_gradient_diverse_samples():
    e1 = torch.tensor([1.0, 0.0, 0.0])
    diverse_kept, redundant_kept = [], []
    for seed in range(40):
        gen = torch.Generator().manual_seed(seed)
        buffer = MemoryBuffer(20, GSSGreedy(_identity_grads, n_subsets=4, subset_size=5,
                                            batch_size=10))
        buffer.add(gen, X=e1 + 0.01 * torch.randn(20, 3, generator=gen),
                   y=torch.zeros(20, dtype=torch.long))
        assert len(buffer) == 20
        # 6 samples against the memory's gradients (cosine -1), 4 along them (cosine 1)
        X = torch.cat([-e1.repeat(6, 1), e1.repeat(4, 1)])
        buffer.add(gen, X=X, y=torch.tensor([1] * 6 + [2] * 4))
        assert len(buffer) == 20 and len(buffer["gss_score"]) == 20
        diverse_kept.append(int((buffer["y"] == 1).sum()))
        redundant_kept.append(int((buffer["y"] == 2).sum()))
    assert diverse_kept == [6] * 40  # a score of -1 always replaces
    assert np.mean(redundant_kept) / 4 < 0.8  # a score of 1 only sometimes


# ------------------------------------------------------------------------ HAL
def test_hal_anchor_objective():
    torch.manual_seed(0)
    est = HAL(gamma=0.3)
    now = torch.nn.Linear(4, 3)
    now.features = lambda e: 2 * e  # noqa: E731 - a stand-in embedding
    later = torch.nn.Linear(4, 3)
    e, phi = torch.randn(1, 4), torch.randn(4)
    expected = (
        -np.log(torch.softmax(now(e), 1)[0, 1].item())
        + np.log(torch.softmax(later(e), 1)[0, 1].item())
        + 0.3 * float(((2 * e - phi) ** 2).sum())
    )
    assert est.anchor_objective(e, 1, now, later, phi).item() == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------ FDR
def test_fdr_function_distance():
    logits = torch.tensor([[1.0, 0.0, 2.0], [0.5, 0.5, -1.0]])
    stored = torch.tensor([[0.0, 1.0], [2.0, 0.0]])  # an older, narrower head
    p = torch.softmax(logits, 1).numpy()
    q = np.c_[torch.softmax(stored, 1).numpy(), np.zeros(2)]
    expected = np.linalg.norm(p - q, axis=1).mean()
    assert function_distance(logits, stored).item() == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------------------------------ CDR
def test_confidence_gate_never_admits_a_sample_at_or_below_the_threshold():
    p = torch.tensor([0.9, 0.7, 0.71, 0.2, 0.7001, 1.0])
    buffer = MemoryBuffer(10, ConfidenceGate(lambda X, y: X[:, 0], 0.7))
    buffer.add(torch.Generator().manual_seed(0), X=p[:, None], y=torch.arange(6))
    assert sorted(buffer["y"].tolist()) == [0, 2, 4, 5]
    assert buffer.n_seen == 4  # the rest was never offered


@pytest.mark.parametrize("method", [ER, DER])
def test_cdr_stores_only_confidently_correct_samples(method, uci_har_small):
    X, y = uci_har_small["train"]
    est = method(memory_size=500, memory_gate="confidence", confidence_threshold=0.6, **TINY)
    est.partial_fit_task(X[y < 2], y[y < 2])
    with torch.no_grad():  # the network that scored them: the task's final one
        est.module_.eval()
        p_memory = torch.softmax(est.module_(est.memory_["X"]), 1)
    true = p_memory[torch.arange(len(est.memory_)), est.memory_["y"]]
    assert (true > 0.6).all()
    assert 0 < len(est.memory_) < 216  # without the gate all 216 training samples enter


def test_memory_gate_is_validated():
    with pytest.raises(ValueError, match="memory_gate"):
        ER(memory_gate="loss").partial_fit_task(np.zeros((4, 3, 8)), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="confidence_threshold"):
        ER(memory_gate="confidence", confidence_threshold=1.0).partial_fit_task(
            np.zeros((4, 3, 8)), [0, 0, 1, 1])


# ---------------------------------------------------------------- memory bytes
def test_memory_nbytes_counts_every_stored_tensor(uci_har_small):
    X, y = uci_har_small["train"]
    n_channels, length = X.shape[1:]
    der = DER(memory_size=30, **TINY)
    assert not hasattr(der, "memory_nbytes_")
    der.partial_fit_task(X[y < 2], y[y < 2])
    der.partial_fit_task(X[(y == 2) | (y == 3)], y[(y == 2) | (y == 3)])
    # inputs float32, labels int64, logits float32 over 4 classes
    assert der.memory_nbytes_ == 30 * (4 * n_channels * length + 8 + 4 * 4)
    hal = HAL(memory_size=30, anchor_steps=2, **TINY)
    hal.partial_fit_task(X[y < 2], y[y < 2])
    fields = sum(v.nbytes for v in hal.memory_.fields.values())
    assert hal.memory_nbytes_ == fields + 2 * 4 * n_channels * length  # one anchor per class


# ------------------------------------------------------- real data: each method
@pytest.mark.parametrize(
    "make",
    [
        lambda: GEM(memory_size=60, **FAST),
        lambda: AGEM(memory_size=60, **FAST),
        lambda: GSS(memory_size=60, **FAST),
        lambda: HAL(memory_size=60, anchor_steps=20, **FAST),
        lambda: FDR(memory_size=60, **FAST),
    ],
    ids=["GEM", "A-GEM", "GSS", "HAL", "FDR"],
)
def test_learns_above_chance_and_forgets_less_than_naive(
    make, uci_har_small, naive_forgetting  # noqa: F811 - the imported fixture
):
    metrics = _stream_result(make(), uci_har_small).metrics
    assert metrics["average_accuracy"] > 0.3  # chance: 1/6
    assert metrics["average_forgetting"] < naive_forgetting - 0.1


def test_task_balanced_memory_shares_the_budget_between_tasks():
    buffer = MemoryBuffer(9, TaskBalanced())
    buffer.add(X=torch.arange(12.0), y=torch.zeros(12, dtype=torch.long),
               task=torch.zeros(12, dtype=torch.long))
    assert buffer["X"].tolist() == list(range(9))
    buffer.add(X=torch.arange(100.0, 110.0), y=torch.ones(10, dtype=torch.long),
               task=torch.ones(10, dtype=torch.long))
    assert buffer["X"].tolist() == [0, 1, 2, 3, 100, 101, 102, 103]


# ---------------------------------------------------------- fixed TaskPool runs
def test_fixed_problems_are_drawn_once_and_shared_by_every_method():
    from clestim import TaskPool, evaluate_runs

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(8), 6)
    X = rng.normal(size=(len(y), 2, 8)).astype(np.float32) + y[:, None, None]
    pool = TaskPool(classes_per_task=2, n_tasks=2, n_problems=3, random_state=7)
    expected = [[c.tolist() for c in p.task_classes(y)] for p in pool.problems()]
    tasks = {}
    for est in (Naive(**TINY), ER(memory_size=6, **TINY)):
        result = evaluate_runs(est, pool, X, y, X, y, fixed_problems=True, seed=3)
        assert result.seeds == [3, 4, 5]
        tasks[type(est).__name__] = [[c.tolist() for c in r.task_classes] for r in result.runs]
        assert " ± " in result.format("average_accuracy", spread="std")
    assert tasks["Naive"] == tasks["ER"] == expected
    assert result.runs[0].memory_elements == 6 and result.runs[0].memory_nbytes == 6 * (
        2 * 8 * 4 + 8)
    assert result.runs[0].to_dict()["memory_nbytes"] == 6 * (2 * 8 * 4 + 8)
    with pytest.raises(ValueError, match="n_problems"):
        evaluate_runs(Naive(**TINY), pool, X, y, X, y, fixed_problems=True, n_runs=2)
    with pytest.raises(ValueError, match="TaskPool"):
        evaluate_runs(Naive(**TINY), ClassIncremental(), X, y, X, y, fixed_problems=True)


def test_memory_size_in_bytes(uci_har_small):
    from clestim.memory import memory_capacity

    assert memory_capacity("50MB", 10, slot_nbytes=1000) == 50_000
    assert memory_capacity("1KiB", 10, slot_nbytes=100) == 10
    with pytest.raises(ValueError, match="size in bytes"):
        memory_capacity("50 parsecs", 10)
    X, y = uci_har_small["train"]
    slot = 4 * X[0].size + 8  # float32 input and int64 label
    est = ER(memory_size=f"{20 * slot}B", **TINY).partial_fit_task(X[y < 2], y[y < 2])
    assert len(est.memory_) == 20 and est.memory_nbytes_ == 20 * slot
