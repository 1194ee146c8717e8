"""Each method's own loss term, on a tiny network and a fixed batch.

Every expected value is computed here with plain torch from the estimator's
current networks (``module_``, the frozen teacher, the memory), not with the
method's code, so a method whose loss term is dropped, reweighted or fed the wrong
network fails here, in a second, instead of only in an end-to-end threshold.
"""

import copy

import numpy as np
import pytest
import torch
from helpers import ProcessCache
from torch import nn
from torch.nn import functional as F

from clestim import DER, DT2W, EWC, GR, MAS, DERpp, LwF
from clestim.losses import soft_dtw
from clestim.methods.clops import CLOPS
from clestim.methods.replay import _pad_to

# a tiny CNN, no input normalisation (passed explicitly: its default may change)
TINY = dict(
    backbone_params={"channels": (4, 4)},
    input_norm=None,
    max_epochs=1,
    patience=None,
    validation_fraction=0.0,
    random_state=0,
)


def _tasks(n_per_class=6, n_channels=3, length=16):
    """Two tasks of two classes each; class c has mean c on every channel."""
    rng = np.random.default_rng(0)
    tasks = []
    for classes in ([0, 1], [2, 3]):
        y = np.repeat(classes, n_per_class)
        X = rng.normal(size=(len(y), n_channels, length)) + y[:, None, None]
        tasks.append((X.astype(np.float32), y))
    return tasks


def _fit(est, n_tasks=2):
    for X, y in _tasks()[:n_tasks]:
        est.partial_fit_task(X, y)
    return est


def _batch(n=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, 16, generator=g) + 1.5
    y = torch.arange(n) % 4
    return X, y


def _ce(logits, y):
    """Cross-entropy by hand."""
    return -(logits.log_softmax(1)[torch.arange(len(y)), y]).mean()


def _kd(student, teacher, T):
    """KL(softmax(teacher / T) || softmax(student / T)), summed over classes, batch mean."""
    p = torch.softmax(teacher / T, 1)
    return (p * (p.log() - torch.log_softmax(student / T, 1))).sum(1).mean()


def _as_during_second_task(est):
    """The state of the estimator while it learns the second task (0-based t = 1)."""
    est.n_tasks_seen_ = 1
    est.module_.train()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():  # move the student away from its teacher: every term matters
        for p in est.module_.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return est


# ------------------------------------------------------------------------ LwF
@pytest.mark.parametrize("adaptive", [True, False])
def test_lwf_loss_is_ce_plus_distillation_with_temperature(adaptive):
    est = _fit(LwF(lambda_kd=3.0, temperature=4.0, adaptive_weight=adaptive, **TINY))
    _as_during_second_task(est)
    X, y = _batch()
    with torch.no_grad():
        logits, old = est.module_(X), est.teacher_(X)
        assert old.shape == (8, 2) and logits.shape == (8, 4)
        ce, kd = _ce(logits, y), _kd(logits[:, :2], old, 4.0)
        loss = est._training_loss(X, y)
    assert kd > 1e-3  # the teacher and the student differ, so the term matters
    expected = 0.5 * ce + 0.5 * 3.0 * kd if adaptive else ce + 3.0 * kd
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_lwf_teacher_is_the_network_after_the_previous_task():
    est = _fit(LwF(**TINY))
    after_first = est.snapshots_[0]
    teacher = est.teacher_.state_dict()
    assert all(torch.equal(teacher[k], v) for k, v in after_first.items())
    assert est.n_tasks_seen_ == 2 and not est.teacher_.training


def test_lwf_adaptive_weight_follows_the_task_index():
    est = _fit(LwF(lambda_kd=2.0, **TINY))
    X, y = _batch()
    est.n_tasks_seen_ = 3  # as while learning the fourth task: w = 1/4
    with torch.no_grad():
        logits, old = est.module_(X), est.teacher_(X)
        expected = 0.25 * _ce(logits, y) + 0.75 * 2.0 * _kd(logits[:, :2], old, 2.0)
        assert float(est._training_loss(X, y)) == pytest.approx(float(expected), rel=1e-5)


def test_lwf_first_task_is_plain_cross_entropy():
    est = _fit(LwF(lambda_kd=5.0, **TINY), n_tasks=1)
    assert est.teacher_ is None
    X, y = _batch()
    y = y % 2
    with torch.no_grad():
        assert float(est._training_loss(X, y)) == pytest.approx(
            float(_ce(est.module_(X), y)), rel=1e-6
        )


# ------------------------------------------------------------------- DER(++)
def test_pad_to():
    z = torch.tensor([[1.0, -2.0]])
    assert torch.equal(_pad_to(z, 4), torch.tensor([[1.0, -2.0, 0.0, 0.0]]))
    assert _pad_to(z, 2) is z and _pad_to(z, 1) is z


def test_der_replay_is_alpha_mse_to_stored_logits_padded_to_the_grown_head():
    est = _fit(DER(alpha=0.3, memory_size=6, **TINY), n_tasks=1)
    assert est.memory_["logits"].shape == (6, 2)
    est.module_.head.grow(2)  # as when the second task starts
    memory = est.memory_.take(torch.arange(6))
    with torch.no_grad():
        logits = est.module_(memory["X"])
        z = torch.cat([memory["logits"], torch.zeros(6, 2)], 1)
        expected = 0.3 * ((logits - z) ** 2).mean()
        assert float(est._replay_loss(logits, memory)) == pytest.approx(float(expected), rel=1e-6)


def test_der_training_loss_adds_the_replay_term_to_the_new_batch_ce():
    est = _fit(DER(alpha=0.7, memory_size=6, replay_batch_size=6, **TINY))
    assert est.memory_["logits"].shape == (6, 4)  # stored logits padded when the head grew
    X, y = _batch()
    mem_X, mem_z = est.memory_["X"], est.memory_["logits"]
    with torch.no_grad():
        expected = _ce(est.module_(X), y) + 0.7 * ((est.module_(mem_X) - mem_z) ** 2).mean()
        # replay_batch_size == memory size: the memory batch is the whole memory
        assert float(est._training_loss(X, y)) == pytest.approx(float(expected), rel=1e-5)


def test_derpp_adds_beta_ce_of_a_second_memory_batch():
    est = _fit(DERpp(alpha=0.2, beta=0.9, memory_size=6, replay_batch_size=6, **TINY))
    memory = est.memory_.take(torch.arange(6))
    with torch.no_grad():
        logits = est.module_(memory["X"])
        mse = ((logits - memory["logits"]) ** 2).mean()
        ce = _ce(logits, memory["y"])  # the second batch is the whole memory too
        expected = 0.2 * mse + 0.9 * ce
        assert float(est._replay_loss(logits, memory)) == pytest.approx(float(expected), rel=1e-5)
        assert ce > 1e-3


# ------------------------------------------------------------------ MAS / EWC
@pytest.mark.parametrize("cls", [MAS, EWC])
def test_quadratic_penalty_from_given_importances_and_anchors(cls):
    est = _fit(cls(lambda_reg=7.0, **TINY), n_tasks=1)
    est.module_.head.grow(2)
    params = dict(est.module_.named_parameters())
    g = torch.Generator().manual_seed(3)
    terms, expected = [], torch.zeros((), dtype=torch.float64)
    for _ in range(2):  # two stored terms (EWC 'separate' keeps one per task)
        anchors, importance = {}, {}
        for name in ("head.weight", "head.bias", "backbone.blocks.0.weight"):
            p = params[name].detach()
            shape = (2, *p.shape[1:]) if name.startswith("head") else p.shape  # 2 old rows
            anchors[name] = torch.randn(shape, generator=g)
            importance[name] = torch.rand(shape, generator=g)
            old = p[: shape[0]].double()
            expected += (importance[name].double() * (old - anchors[name].double()) ** 2).sum()
        terms.append((anchors, importance))
    est.penalty_terms_ = terms
    with torch.no_grad():
        assert float(est.penalty()) == pytest.approx(float(expected), rel=1e-5)
        X, y = _batch()
        loss = est._training_loss(X, y)
        assert float(loss) == pytest.approx(float(_ce(est.module_(X), y) + 7.0 * expected),
                                            rel=1e-5)


def test_ewc_fisher_is_the_mean_squared_per_sample_gradient_rescaled():
    est = _fit(EWC(batch_size=4, **TINY), n_tasks=1)  # 3 batches over 10 samples
    X, y = _batch(10)
    y = y % 2
    params = {n: p for n, p in est.module_.named_parameters()}
    fisher = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in params.items()}
    for i in range(10):  # one backward pass per sample
        est.module_.zero_grad()
        F.cross_entropy(est.module_(X[i : i + 1]), y[i : i + 1]).backward()
        for n, p in params.items():
            fisher[n] += p.grad.double() ** 2 / 10
    est.module_.zero_grad()
    low = min(float(f.min()) for f in fisher.values())
    high = max(float(f.max()) for f in fisher.values())
    got = est._importance(X, y)
    assert set(got) == set(params)
    for n in params:
        np.testing.assert_allclose(
            got[n].numpy(), ((fisher[n] - low) / (high - low)).numpy(), rtol=1e-3, atol=1e-6
        )


def test_ewc_online_and_mas_moving_averages_pad_old_rows():
    old = {"w": torch.tensor([[1.0], [2.0]])}
    new = {"w": torch.tensor([[10.0], [20.0], [30.0]])}
    anchors = {"w": torch.zeros(3, 1)}
    ewc = EWC(mode="online", decay=0.5)
    (_, merged), = ewc._merge([({"w": torch.zeros(2, 1)}, old)], anchors, new)
    assert torch.allclose(merged["w"], torch.tensor([[10.5], [21.0], [30.0]]))
    terms = EWC(mode="separate")._merge([("a", "b")], anchors, new)
    assert len(terms) == 2 and terms[1] == (anchors, new)
    mas = MAS(alpha=0.8)
    (anchors_out, merged), = mas._merge([({"w": torch.zeros(2, 1)}, old)], anchors, new)
    assert anchors_out is anchors
    assert torch.allclose(merged["w"], torch.tensor([[2.8], [5.6], [6.0]]))


# ----------------------------------------------------------------------- DT2W
_DT2W = ProcessCache()  # refitted in each mutmut child process


def _fitted_dt2w():
    if "est" not in _DT2W:
        _DT2W["est"] = _fit(DT2W(gamma=0.5, temperature=3.0, batch_size=6, **TINY))
    est = copy.deepcopy(_DT2W["est"])
    est._generator = torch.Generator().manual_seed(7)  # not copied
    return est


@pytest.mark.parametrize(
    "term, adaptive", [("kd", False), ("fmap", False), ("proto", False), ("all", True)]
)
def test_dt2w_loss_terms(term, adaptive):
    lam = {"lambda_kd": 2.0, "lambda_fmap": 0.3, "lambda_proto": 5.0}
    if term != "all":
        lam = {k: (v if k == f"lambda_{term}" else 0.0) for k, v in lam.items()}
    est = _fitted_dt2w().set_params(adaptive_weight=adaptive, **lam)
    _as_during_second_task(est)
    est.prototypes_ = est.prototypes_[:2]  # while learning the second task: 2 old classes
    X, y = _batch()
    state = est._generator.get_state()
    with torch.no_grad():
        loss = est._training_loss(X, y)
        logits, old = est.module_(X), est.teacher_(X)
        kd = _kd(logits[:, :2], old, 3.0)
        s = est.module_.backbone.blocks(X)  # feature maps (N, C, L): compared along time
        t = est.teacher_.backbone.blocks(X)
        fmap = soft_dtw(s.transpose(1, 2), t.transpose(1, 2), gamma=0.5).mean()
        g = torch.Generator()
        g.set_state(state)
        labels = torch.randint(2, (6,), generator=g)  # two old classes, batch_size draws
        noise = torch.randn(6, 4, generator=g)
        pseudo = est.prototypes_[labels] + est.radius_ * noise
        proto = _ce(est.module_.head(pseudo), labels)
    assert min(float(kd), float(fmap), float(proto)) > 1e-4
    reg = lam["lambda_kd"] * kd + lam["lambda_fmap"] * fmap + lam["lambda_proto"] * proto
    ce = _ce(logits, y)
    expected = 0.5 * ce + 0.5 * reg if adaptive else ce + reg
    assert float(loss) == pytest.approx(float(expected), rel=1e-4)


def test_dt2w_prototypes_are_class_means_of_the_features():
    est = _fitted_dt2w()
    feats = []
    for X, y in _tasks():
        with torch.no_grad():
            f = est.module_.features(torch.from_numpy(X))
        feats.append((f, y))
    # the last task's prototypes come from the final network
    f, y = feats[1]
    np.testing.assert_allclose(est.prototypes_[2:].numpy(),
                               torch.stack([f[y == c].mean(0) for c in (2, 3)]).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert est.prototypes_.shape == (4, 4)


# ---------------------------------------------------------------------- CLOPS
def test_clops_beta_step_and_weighted_loss():
    est = _fit(CLOPS(beta_lr=0.1, lambda_beta=2.0, memory_size=6, replay_batch_size=6, **TINY))
    X, y = _batch(8)
    n = 8
    est.beta_ = torch.linspace(0.8, 1.3, 20)  # float32, as CLOPS keeps it
    est._beta_sum = torch.zeros(20, dtype=torch.float64)
    est._beta_first = torch.zeros(20, dtype=torch.float64)
    est._beta_count = torch.zeros(20, dtype=torch.long)
    idx = torch.arange(3, 3 + n)
    est._batch_index, est._epoch = idx, 0
    beta = est.beta_[idx].clone()
    with torch.no_grad():
        ce = -(est.module_(X).log_softmax(1)[torch.arange(n), y]).double()
        replay = _ce(est.module_(est.memory_["X"]), est.memory_["y"])
        loss = est._training_loss(X, y)
    expected = (beta * ce).mean() + 2.0 * ((beta - 1) ** 2).mean() + replay
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    step = beta - 0.1 * (ce + 2 * 2.0 * (beta - 1)) / n
    np.testing.assert_allclose(est.beta_[idx].numpy(), step.numpy(), rtol=1e-6)
    untouched = torch.ones(20, dtype=torch.bool)
    untouched[idx] = False
    np.testing.assert_array_equal(est.beta_[untouched].numpy(),
                                  torch.linspace(0.8, 1.3, 20)[untouched])


def test_clops_score_is_the_area_under_the_beta_trajectory():
    est = CLOPS()
    est._task_data((None, np.zeros(3), None), None)
    trajectory = [[0.9, 1.1, 0.7], [0.5, 1.2, 0.6], [0.3, 1.0, 0.2]]
    for step, values in enumerate(trajectory):
        idx = torch.tensor([0, 1, 2]) if step < 2 else torch.tensor([0, 2])
        est._track(idx, torch.tensor(values, dtype=torch.float64)[idx])
    scores = est.importance_scores().numpy()
    assert scores[0] == pytest.approx(np.trapezoid([0.9, 0.5, 0.3]))
    assert scores[1] == pytest.approx(np.trapezoid([1.1, 1.2]))
    assert scores[2] == pytest.approx(np.trapezoid([0.7, 0.6, 0.2]))
    est._beta_count[1] = 1  # one recorded value is its own score
    assert est.importance_scores()[1] == pytest.approx(1.2)


def test_clops_beta_is_float32_so_steps_below_its_resolution_tie():
    # TSCIL's beta is a float32 tensor: near 1 a step under ~3e-8 is lost, so samples
    # whose loss has become tiny keep their score and tie (storage then breaks the tie
    # in its random order); float64 would rank them by their exact cumulative loss
    est = CLOPS()
    est._task_data((None, np.zeros(3), None), None)
    assert est.beta_.dtype == torch.float32
    idx = torch.arange(3)
    for _ in range(2):
        est._track(idx, est.beta_.double() - torch.tensor([1e-9, 2e-9, 1e-6], dtype=torch.float64))
    assert est.beta_[0] == est.beta_[1] == 1.0 and est.beta_[2] < 1.0
    scores = est.importance_scores()
    assert scores.dtype == torch.float64
    assert scores[0] == scores[1] == 1.0 and scores[2] < 1.0


# ------------------------------------------------------------------------- GR
class _Gaussian(nn.Module):
    """A generator: ``mean + noise``; its loss pulls ``mean`` to the data."""

    def __init__(self):
        super().__init__()
        self.mean = nn.Parameter(torch.zeros(3, 16))

    def loss(self, x):
        return ((x - self.mean) ** 2).mean()

    def sample(self, n, generator=None):
        return self.mean + torch.randn(n, 3, 16, generator=generator)


def test_gr_replays_the_frozen_previous_generator_labelled_by_the_frozen_network():
    est = _fit(GR(generator=_Gaussian(), generator_epochs=2, replay_ratio=0.25,
                  replay_batch_size=5, **TINY), n_tasks=1)
    X2, y2 = _tasks()[1]
    est._set_labels(est._labels.extended(np.array([2, 3]), None))
    est._before_task(X2, est._encode(y2), None)  # freezes the previous networks
    est.module_.head.grow(2)
    prev_net, prev_gen = copy.deepcopy(est.module_), copy.deepcopy(est.generator_)
    with torch.no_grad():  # the learner and the generator move on; replay must not
        est.generator_.mean.add_(5.0)
        for p in est.module_.backbone.parameters():
            p.mul_(1.5)
    assert est.previous_[1] is not est.generator_
    X, y = _batch()
    state = est._generator.get_state()
    with torch.no_grad():
        loss = est._training_loss(X, y)
        g = torch.Generator()
        g.set_state(state)
        x_rep = prev_gen.sample(5, g)
        y_rep = prev_net(x_rep)[:, :2].argmax(1)
        expected = 2 * (0.75 * _ce(est.module_(X), y) + 0.25 * _ce(est.module_(x_rep), y_rep))
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    x, labels = est._replay(64)
    assert set(labels.tolist()) <= {0, 1}  # only old classes are replayed


def test_gr_generator_replays_its_previous_version():
    est = _fit(GR(generator=_Gaussian(), generator_epochs=1, replay_ratio=0.4,
                  replay_batch_size=5, **TINY), n_tasks=1)
    X = torch.randn(4, 3, 16) + 2.0
    prev = copy.deepcopy(est.generator_)
    with torch.no_grad():
        prev.mean.fill_(-3.0)
    est.previous_ = (None, prev)
    before = est.generator_.mean.detach().clone()
    est.generator_optimizer_ = torch.optim.SGD(est.generator_.parameters(), lr=0.1)
    est.batch_size = 4  # one step
    est.generator_patience = None
    state = est._generator.get_state()
    est._train_generator(X, X[:0])
    g = torch.Generator()
    g.set_state(state)
    order = torch.randperm(4, generator=g)
    replay = prev.sample(5, g)
    mean = before.clone().requires_grad_(True)
    loss = 0.6 * ((X[order] - mean) ** 2).mean() + 0.4 * ((replay - mean) ** 2).mean()
    loss.backward()
    np.testing.assert_allclose(est.generator_.mean.detach().numpy(),
                               (before - 0.1 * mean.grad).numpy(), rtol=1e-5, atol=1e-6)
