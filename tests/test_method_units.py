"""Unit tests of the helpers behind each method's loss and memory (issue #22).

Each function is pinned against a value computed here with plain torch (or by
hand), on the tiny network and batches of ``test_method_losses.py``: ER's KD
variants, GEM / A-GEM's gradient surgery, GSS's per-sample gradients, HAL's anchors
and look-ahead drift, FDR's stored outputs and function-distance step, ASER's
joint cross-entropy, Offline's data union, memory sizes in bytes. Every test runs
well under a second (fitted estimators are cached and deep-copied).
"""

import copy

import numpy as np
import pytest
import torch
from helpers import ProcessCache
from test_method_losses import TINY, _as_during_second_task, _batch, _ce, _fit, _kd, _tasks
from torch.func import functional_call
from torch.nn import functional as F

from clestim import AGEM, ASER, ER, FDR, GEM, GSS, HAL, Herding
from clestim.losses import replay_distillation_loss
from clestim.memory import ASERRetrieval, GSSGreedy, RandomRetrieval
from clestim.memory.buffer import parse_nbytes
from clestim.memory.policies import HerdingSelection
from clestim.methods import gss as gss_module
from clestim.methods.gem import _flat_grad, _with_gradient, gem_project
from clestim.methods.gss import _per_sample_grads
from clestim.methods.offline import Offline, _union
from clestim.methods.regularization import _looped_grads, _vmapped_grads

_CACHE = ProcessCache()  # refitted in each mutmut child process


def _fitted(key, make, n_tasks=2):
    """A deep copy of an estimator fitted once per session on ``_tasks()``."""
    if key not in _CACHE:
        _CACHE[key] = _fit(make(), n_tasks)
    est = copy.deepcopy(_CACHE[key])
    est._generator = torch.Generator().manual_seed(7)  # not copied
    return est


def _mse(a, b):
    return ((a - b) ** 2).mean()


def _params(net):
    return [p for p in net.parameters() if p.requires_grad]


def _flat(grads):
    return torch.cat([g.reshape(-1) for g in grads])


# ------------------------------------------------------------- memory sizes
@pytest.mark.parametrize(
    "text, expected",
    [("50MB", 50_000_000), ("1.5 GB", 1_500_000_000), ("512KiB", 512 * 1024),
     (" 2 mib ", 2 * 2**20), ("3GiB", 3 * 2**30), ("7B", 7), ("1kb", 1000), (".5KB", 500),
     ("2.5KiB", 2560)],
)
def test_parse_nbytes_values(text, expected):
    got = parse_nbytes(text)
    assert got == expected and type(got) is int


@pytest.mark.parametrize("text", ["0MB", "0.0KB", "50", "MB", "50 parsecs", "-1MB", "1e3MB",
                                  "5 M B", "1.2.3MB", "", "50MBs"])
def test_parse_nbytes_rejects(text):
    with pytest.raises(ValueError) as info:
        parse_nbytes(text)
    message = str(info.value)
    assert repr(text) in message and "positive size in bytes such as '50MB'" in message
    assert "(units: B, KB, MB, GB, KiB, MiB, GiB)" in message


# ---------------------------------------------------------------- ER: KD
def test_replay_distillation_loss_variants():
    g = torch.Generator().manual_seed(0)
    h, h_old = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    z, z_old = torch.randn(5, 6, generator=g), torch.randn(5, 3, generator=g)
    mse = float(((h - h_old) ** 2).sum()) / 20
    kd = float(_kd(z[:, :3], z_old, 2.5))
    assert min(mse, kd) > 1e-2
    got = {k: float(replay_distillation_loss(k, h, z, h_old, z_old, 2.5))
           for k in ("features", "logits", "both")}
    assert got["features"] == pytest.approx(mse, rel=1e-6)
    assert got["logits"] == pytest.approx(kd, rel=1e-6)
    assert got["both"] == pytest.approx(mse + kd, rel=1e-6)
    # the default temperature is 2
    assert float(replay_distillation_loss("logits", h, z, h_old, z_old)) == pytest.approx(
        float(_kd(z[:, :3], z_old, 2.0)), rel=1e-6)
    for kind in (None, "feature", "all"):
        with pytest.raises(ValueError, match=r"kind must be one of \('features', 'logits', "
                                             r"'both'\), got " + repr(repr(kind))[1:-1]):
            replay_distillation_loss(kind, h, z, h_old, z_old)


def _er_kd(norm=None):
    """ER with KD after two tasks; ``norm='batch'``: a BatchNorm backbone."""
    extra = {} if norm is None else {"norm": norm}
    return _fitted(f"er_kd_{norm}", lambda: ER(kd="both", memory_size=6, replay_batch_size=6,
                                               **extra, **TINY))


@pytest.mark.parametrize("kind, norm", [("features", None), ("logits", None), ("both", None),
                                        ("both", "batch")])
def test_er_kd_training_loss(kind, norm):
    """With BatchNorm the new and the memory batch each get their own pass."""
    est = _er_kd(norm).set_params(kd=kind, kd_weight=0.7, kd_temperature=3.0)
    assert est._batch_coupled() == (norm == "batch")
    _as_during_second_task(est)
    X, y = _batch()
    mem_X, mem_y = est.memory_["X"], est.memory_["y"]
    net, teacher = est.module_, est.teacher_
    with torch.no_grad():
        loss = est._training_loss(X, y)
        h, h_mem = net.features(X), net.features(mem_X)
        ce = _ce(net.head(h), y) + _ce(net.head(h_mem), mem_y)
        # the KD term runs over the memory and the new batch together
        h_all, h_old = torch.cat([h_mem, h]), teacher.features(torch.cat([mem_X, X]))
        z_all, z_old = net.head(h_all), teacher.head(h_old)
        assert z_old.shape == (14, 2) and z_all.shape == (14, 4)
        feat, logit = _mse(h_all, h_old), _kd(z_all[:, :2], z_old, 3.0)
    assert min(float(feat), float(logit)) > 1e-3
    kd = {"features": feat, "logits": logit, "both": feat + logit}[kind]
    assert float(loss) == pytest.approx(float(ce + 0.7 * kd), rel=1e-5)


def test_er_kd_without_memory_distils_the_new_batch_only():
    est = _er_kd().set_params(kd="both", kd_weight=1.3, kd_temperature=0.5)
    _as_during_second_task(est)
    est.memory_.fields = {}  # an empty memory: sample() gives None
    X, y = _batch()
    with torch.no_grad():
        loss = est._training_loss(X, y)
        h, h_old = est.module_.features(X), est.teacher_.features(X)
        z, z_old = est.module_.head(h), est.teacher_.head(h_old)
        expected = _ce(z, y) + 1.3 * (_mse(h, h_old) + _kd(z[:, :2], z_old, 0.5))
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)


def test_er_kd_weight_zero_and_first_task_are_plain_er():
    est = _er_kd()
    _as_during_second_task(est)
    X, y = _batch()
    with torch.no_grad():
        plain = _ce(est.module_(X), y) + _ce(est.module_(est.memory_["X"]), est.memory_["y"])
        assert float(est.set_params(kd_weight=0.0)._training_loss(X, y)) == pytest.approx(
            float(plain), rel=1e-5)
        assert float(est.set_params(kd=None)._training_loss(X, y)) == pytest.approx(
            float(plain), rel=1e-5)
    first = _fitted("er_kd_1", lambda: ER(kd="features", kd_weight=5.0, memory_size=6,
                                          replay_batch_size=6, **TINY), n_tasks=1)
    assert first.teacher_ is None
    y = y % 2
    with torch.no_grad():
        expected = _ce(first.module_(X), y) + _ce(first.module_(first.memory_["X"]),
                                                  first.memory_["y"])
        assert float(first._training_loss(X, y)) == pytest.approx(float(expected), rel=1e-5)


# -------------------------------------------------- ER: subjects and scores
def test_er_draw_subjects():
    many = np.repeat(np.arange(40, 10, -2), 2)  # 15 subjects, each twice
    est = ER(memory_subjects=5)
    est._generator = torch.Generator().manual_seed(11)
    g = torch.Generator().manual_seed(11)
    got = est._draw_subjects(many)
    seed = int(torch.randint(2**31 - 1, (1,), generator=g))
    pick = np.sort(np.random.RandomState(seed).choice(15, 5, replace=False))
    np.testing.assert_array_equal(got, np.arange(40, 10, -2)[pick])  # first-appearance order
    assert len(set(got.tolist())) == 5 and list(got) == sorted(got, reverse=True)
    groups = np.array([5, 3, 5, 9, 3, 7])
    est.memory_subjects = 2
    got = est._draw_subjects(groups)
    assert got.dtype == groups.dtype and len(set(got.tolist())) == 2
    # every subject can be drawn, and each draw is a sorted pick
    draws = set()
    for seed in range(30):
        est._generator = torch.Generator().manual_seed(seed)
        draws |= set(est._draw_subjects(groups).tolist())
    assert draws == {3, 5, 7, 9}
    est.memory_subjects = 4  # all of them, in first-appearance order
    np.testing.assert_array_equal(est._draw_subjects(groups), [5, 3, 9, 7])
    strings = np.array(["s2", "s1", "s2"])
    est.memory_subjects = 1
    assert est._draw_subjects(strings).dtype == strings.dtype
    est.memory_subjects = ["s9", "s3"]  # given ids are kept as given
    np.testing.assert_array_equal(est._draw_subjects(groups), ["s9", "s3"])
    est.memory_subjects = 5
    with pytest.raises(ValueError, match=r"memory_subjects=5 but the first task has only 4 "
                                         r"subjects"):
        est._draw_subjects(groups)


def test_er_group_codes_in_order_of_first_appearance():
    est = ER()
    est._group_index_state = {}
    codes = est._group_codes(np.array(["b", "a", "b", "c"]))
    assert codes.dtype == torch.long and codes.tolist() == [0, 1, 0, 2]
    assert est._group_codes(["c", "d", "a"]).tolist() == [2, 3, 1]  # codes are kept
    assert est._group_index_state == {"b": 0, "a": 1, "c": 2, "d": 3}


def _er1():
    return _fitted("er_1", lambda: ER(memory_size=6, **TINY), n_tasks=1)


def test_er_true_class_proba_embed_and_memory_samples():
    est = _er1()
    X, y = _batch()
    y = torch.tensor([1, 0, 0, 1, 1, 0, 1, 0])
    est.module_.train()
    with torch.no_grad():
        logits = est.module_(X)
        features = est.module_.features(X)
    p = torch.softmax(logits, 1)[torch.arange(8), y]
    got = est._true_class_proba(X, y)
    assert got.shape == (8,) and est.module_.training  # the training mode is restored
    np.testing.assert_allclose(got.numpy(), p.numpy(), rtol=1e-6)
    assert not torch.allclose(got, 1 - p)
    est.classifier = "bce"  # independent sigmoids, normalised over the classes
    s = torch.sigmoid(logits)
    np.testing.assert_allclose(est._true_class_proba(X, y).numpy(),
                               (s[torch.arange(8), y] / s.sum(1)).numpy(), rtol=1e-6)
    np.testing.assert_allclose(est._embed(X).numpy(), features.numpy(), rtol=1e-6)
    mem_X, mem_y = est._memory_samples()
    assert torch.equal(mem_X, est.memory_["X"]) and torch.equal(mem_y, est.memory_["y"])
    assert len(mem_y) == 6


def test_herding_selects_by_the_network_embedding():
    est = Herding()
    policy = est._update_policy()
    assert isinstance(policy, HerdingSelection) and policy.embed == est._embed


# ------------------------------------------------------------------- ASER
def _aser():
    return _fitted("aser", lambda: ASER(aser_update=False, retrieval="random", memory_size=6,
                                        replay_batch_size=6, **TINY))


def test_aser_loss_is_one_cross_entropy_over_new_and_memory():
    est = _aser()
    X, y = _batch()
    mem_X, mem_y = est.memory_["X"], est.memory_["y"]
    with torch.no_grad():
        loss = est._training_loss(X, y)
        joint = _ce(est.module_(torch.cat([X, mem_X])), torch.cat([y, mem_y]))
        separate = _ce(est.module_(X), y) + _ce(est.module_(mem_X), mem_y)
        assert float(loss) == pytest.approx(float(joint), rel=1e-5)
        assert abs(float(joint - separate)) > 1e-2
        est.memory_.fields = {}  # an empty memory: the new batch alone
        assert float(est._training_loss(X, y)) == pytest.approx(
            float(_ce(est.module_(X), y)), rel=1e-5)


def test_aser_policies_and_parameter_checks():
    est = ASER(k=4, n_smp_per_class=5)
    retrieval = est._retrieval_policy()
    assert isinstance(retrieval, ASERRetrieval)
    assert (retrieval.k, retrieval.n_smp_per_class) == (4, 5) and retrieval.embed == est._embed
    assert isinstance(est.set_params(retrieval="random")._retrieval_policy(), RandomRetrieval)
    ASER(k=1, n_smp_per_class=1)._check_params()
    for name in ("k", "n_smp_per_class"):
        for bad in (0, -2, True, 2.0, "3"):
            with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got "
                                                 f"{repr(bad)}$"):
                ASER(**{name: bad})._check_params()
    with pytest.raises(ValueError, match="replay_batch_size"):  # ER's checks still run
        ASER(replay_batch_size=0)._check_params()


# ------------------------------------------------------------- GEM / A-GEM
def test_flat_grad_and_with_gradient():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    unused = torch.ones(2, requires_grad=True)
    loss = (a**2).sum() + 3 * b.sum()
    flat = _flat_grad(loss, [a, unused, b])
    torch.testing.assert_close(flat, torch.tensor([2.0, 4, 6, 8, 0, 0, 3, 3, 3]))
    direction = torch.arange(9.0)
    loss = (a**2).sum() + 3 * b.sum()
    surrogate = _with_gradient(loss, [a, unused, b], direction)
    assert float(surrogate.detach()) == float(loss.detach()) == 30 + 4.5
    surrogate.backward()
    torch.testing.assert_close(a.grad, torch.tensor([[0.0, 1], [2, 3]]))
    torch.testing.assert_close(unused.grad, torch.tensor([4.0, 5]))
    torch.testing.assert_close(b.grad, torch.tensor([6.0, 7, 8]))


def _gem(cls, **params):
    return _fitted(cls.__name__, lambda: cls(memory_size=6, replay_batch_size=6, **params,
                                             **TINY))


def _conflicting_batch(est):
    """The first task's memory samples labelled 3: a gradient against the memory."""
    X = est.memory_["X"][est.memory_["task"] == 0]
    return X, torch.full((len(X),), 3)


def test_gem_memory_is_per_task_with_task_ids():
    est = _gem(GEM, margin=0.5)
    task, y = est.memory_["task"], est.memory_["y"]
    assert task.dtype == torch.long and sorted(task.tolist()) == [0, 0, 0, 1, 1, 1]
    assert set(y[task == 0].tolist()) <= {0, 1} and set(y[task == 1].tolist()) <= {2, 3}
    assert GEM(margin=0.2).margin == 0.2 and GEM().margin == 0.5
    assert GEM(memory_size=9).get_params()["memory_size"] == 9


def test_gem_reference_losses_are_per_task_memory_losses():
    est = _gem(GEM, margin=0.5)
    X, y, task = est.memory_["X"], est.memory_["y"], est.memory_["task"]
    with torch.no_grad():
        got = [float(r) for r in est._reference_losses()]
        expected = [float(_ce(est.module_(X[task == t]), y[task == t])) for t in (0, 1)]
    assert got == pytest.approx(expected, rel=1e-5)
    assert abs(expected[0] - expected[1]) > 1e-3


def _gem_step(est, X, y):
    """The gradient the training loss hands the optimizer, its value and the raw ones."""
    params = _params(est.module_)
    est.module_.zero_grad()
    loss = est._training_loss(X, y)
    loss.backward()
    step = _flat([p.grad for p in params])
    est.module_.zero_grad()
    g = _flat(torch.autograd.grad(_ce(est.module_(X), y), params))
    return float(loss.detach()), step, g, params


def test_gem_training_loss_hands_over_the_projected_gradient():
    est = _gem(GEM, margin=0.5)
    X, y = _conflicting_batch(est)
    value, step, g, params = _gem_step(est, X, y)
    mem_X, mem_y, task = est.memory_["X"], est.memory_["y"], est.memory_["task"]
    G = torch.stack([
        _flat(torch.autograd.grad(_ce(est.module_(mem_X[task == t]), mem_y[task == t]), params))
        for t in (0, 1)
    ])
    with torch.no_grad():
        assert value == pytest.approx(float(_ce(est.module_(X), y)), rel=1e-6)
    assert (G @ g < 0).any()  # a violated constraint: the projection matters
    assert (G @ step >= -1e-4 * step.norm() * G.norm(dim=1)).all()
    # the dual of GEM with margin 0.5: step = g + G' v, v >= 0.5, complementary slackness
    v = torch.linalg.lstsq(G.T.double(), (step - g).double()[:, None]).solution[:, 0]
    torch.testing.assert_close((G.T.double() @ v).float(), step - g, atol=1e-4, rtol=1e-3)
    assert (v >= 0.5 - 1e-3).all()
    torch.testing.assert_close(step, gem_project(g, G, 0.5), atol=1e-5, rtol=1e-4)
    est.memory_.fields = {}  # no memory: the plain gradient
    _, step, g, _ = _gem_step(est, X, y)
    torch.testing.assert_close(step, g)


def test_agem_reference_loss_is_a_random_memory_batch():
    est = _gem(AGEM).set_params(replay_batch_size=4)
    state = est._generator.get_state()
    with torch.no_grad():
        (got,) = est._reference_losses()
        g = torch.Generator()
        g.set_state(state)
        idx = torch.randperm(6, generator=g)[:4]
        expected = _ce(est.module_(est.memory_["X"][idx]), est.memory_["y"][idx])
        whole = _ce(est.module_(est.memory_["X"]), est.memory_["y"])
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    assert abs(float(expected - whole)) > 1e-4


def test_agem_training_loss_hands_over_the_projected_gradient():
    est = _gem(AGEM)  # replay_batch_size = memory size: the reference is the whole memory
    X, y = _conflicting_batch(est)
    value, step, g, params = _gem_step(est, X, y)
    ref = _flat(torch.autograd.grad(_ce(est.module_(est.memory_["X"]), est.memory_["y"]),
                                    params))
    assert float(g @ ref) < 0
    expected = g - (g @ ref) / (ref @ ref) * ref
    torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-4)
    assert abs(float(step @ ref)) < 1e-4 * float(step.norm() * ref.norm())


# -------------------------------------------------------------------- GSS
def _tiny_net():
    return copy.deepcopy(_er1().module_)


def _loop_grads(net, X, y):
    params = _params(net)
    return torch.stack([
        _flat(torch.autograd.grad(F.cross_entropy(net(X[i : i + 1]), y[i : i + 1]), params))
        for i in range(len(X))
    ])


@pytest.mark.parametrize("vmap", [True, False])
def test_gss_per_sample_grads_equal_a_loop_of_autograd(vmap, monkeypatch):
    net = _tiny_net()
    net.head.bias.requires_grad_(False)  # frozen parameters are left out
    X, y = _batch(5)
    y = y % 2
    expected = _loop_grads(net, X, y)
    assert expected.shape == (5, sum(p.numel() for p in _params(net)))
    if not vmap:  # an operation vmap does not support: the per-sample fallback
        def unsupported(*args, **kwargs):
            raise RuntimeError("not supported by vmap")
        monkeypatch.setattr(torch.func, "vmap", unsupported)
    got = _per_sample_grads(net, F.cross_entropy, X, y)
    torch.testing.assert_close(got, expected, atol=5e-5, rtol=1e-4)


def test_gss_per_sample_grads_use_one_vmapped_pass(monkeypatch):
    calls = []
    grad = torch.func.grad

    def counted(*args, **kwargs):
        calls.append(1)
        return grad(*args, **kwargs)

    monkeypatch.setattr(torch.func, "grad", counted)
    X, y = _batch(5)
    _per_sample_grads(_tiny_net(), F.cross_entropy, X, y % 2)
    assert len(calls) == 1  # not the per-sample fallback


def test_gss_sample_grads_in_chunks_and_eval_mode(monkeypatch):
    """Scored in eval mode: on a BatchNorm network, with its running statistics."""
    monkeypatch.setattr(gss_module, "_GRAD_CHUNK", 3)
    est = GSS(**TINY)
    est.module_ = copy.deepcopy(_er_kd("batch").module_)
    assert est._batch_coupled()
    X, y = _batch(7)
    training_mode = _loop_grads(est.module_.train(), X, y)  # moves the running statistics
    expected = _loop_grads(est.module_.eval(), X, y)
    assert not torch.allclose(training_mode, expected, atol=1e-3)
    for training in (True, False):
        est.module_.train(training)
        got = est._sample_grads(X, y)
        assert est.module_.training == training
        torch.testing.assert_close(got, expected, atol=5e-5, rtol=1e-4)


def test_gss_parameters_and_update_policy():
    est = GSS(n_subsets=3, subset_size=4, batch_size=5)
    params = est.get_params()
    assert (params["n_subsets"], params["subset_size"], params["memory_update"]) == (
        3, 4, "per_batch")
    assert GSS().get_params()["n_subsets"] == 10 and GSS().subset_size == 10
    assert GSS(memory_update="after_task").memory_update == "after_task"
    policy = est._update_policy()
    assert isinstance(policy, GSSGreedy)
    assert (policy.n_subsets, policy.subset_size, policy.batch_size) == (3, 4, 5)
    assert policy.sample_grads == est._sample_grads


# ---------------------------------------------------- regularization helper
def test_looped_grads_equal_per_sample_autograd():
    net = _tiny_net()
    net.head.bias.requires_grad_(False)
    params = dict(net.named_parameters())
    for p in _params(net):  # stale gradients must not leak in
        p.grad = torch.ones_like(p)
    X, y = _batch(4)
    y = y % 2
    got = _looped_grads(net, params, X, y)
    assert set(got) == set(params)
    assert torch.equal(got["head.bias"], torch.zeros(4, 2))  # no gradient: zeros
    assert all(p.grad is None or not p.grad.any() for p in net.parameters())
    for i in range(4):
        named = [(n, p) for n, p in params.items() if p.requires_grad]
        grads = torch.autograd.grad(F.cross_entropy(net(X[i : i + 1]), y[i : i + 1]),
                                    [p for _, p in named])
        for (n, _), g in zip(named, grads):
            torch.testing.assert_close(got[n][i], g, atol=5e-5, rtol=1e-4)
    vmapped = _vmapped_grads(net, {n: p for n, p in params.items() if p.requires_grad}, X, y)
    for n, g in vmapped.items():
        torch.testing.assert_close(got[n], g, atol=5e-5, rtol=1e-4)


# -------------------------------------------------------------------- FDR
def _fdr_after(n_tasks):
    key = f"fdr{n_tasks}"
    if key not in _CACHE:
        est = FDR(memory_size=6, **TINY)
        first = None
        for t, (X, y) in enumerate(_tasks()[:n_tasks]):
            est.partial_fit_task(X, y)
            if t == 0:
                first = copy.deepcopy(est.module_)
        _CACHE[key] = (est, first)
    est, first = copy.deepcopy(_CACHE[key])
    est._generator = torch.Generator().manual_seed(7)
    return est, first


def test_fdr_stores_the_outputs_padded_with_minus_infinity():
    est, first = _fdr_after(2)
    X, y, task, z = (est.memory_[k] for k in ("X", "y", "task", "logits"))
    assert sorted(task.tolist()) == [0, 0, 0, 1, 1, 1] and z.shape == (6, 4)
    assert set(y[task == 0].tolist()) <= {0, 1} and set(y[task == 1].tolist()) <= {2, 3}
    old, new = task == 0, task == 1
    with torch.no_grad():  # each from its task's final network
        np.testing.assert_allclose(z[old, :2].numpy(), first(X[old]).numpy(), rtol=1e-5)
        np.testing.assert_allclose(z[new].numpy(), est.module_(X[new]).numpy(), rtol=1e-5)
    assert torch.isneginf(z[old, 2:]).all() and torch.isfinite(z[new]).all()


def test_fdr_training_loss_is_the_new_batch_ce():
    est, _ = _fdr_after(2)
    X, y = _batch()
    with torch.no_grad():
        assert float(est._training_loss(X, y)) == pytest.approx(
            float(_ce(est.module_(X), y)), rel=1e-6)


@pytest.mark.parametrize("clip", [None, 0.05])
def test_fdr_function_distance_step(clip):
    est, _ = _fdr_after(2)
    _as_during_second_task(est)  # away from the stored outputs: every distance > 0
    est.grad_clip = clip
    est._optimizer = torch.optim.SGD(est.module_.parameters(), lr=0.5)
    ref = copy.deepcopy(est.module_)
    for p in est.module_.parameters():
        p.grad = torch.full_like(p, 3.0)  # stale gradients must be cleared first
    X, y = _batch()
    est._after_batch(X, y, 0)
    mem_X, z = est.memory_["X"], est.memory_["logits"]
    target = torch.where(torch.isinf(z), 0.0, torch.exp(z - z.max(1, keepdim=True).values))
    target = target / target.sum(1, keepdim=True)
    distance = (torch.softmax(ref(mem_X), 1) - target).pow(2).sum(1).sqrt().mean()
    grads = torch.autograd.grad(distance, list(ref.parameters()))
    scale = 1.0
    if clip is not None:
        norm = float(torch.sqrt(sum((g**2).sum() for g in grads)))
        assert norm > clip
        scale = clip / (norm + 1e-6)
    for p, q, g in zip(est.module_.parameters(), ref.parameters(), grads):
        torch.testing.assert_close(p.detach(), q.detach() - 0.5 * scale * g, atol=2e-5,
                                   rtol=1e-4)
        assert p.grad is None or not p.grad.any()
    est.memory_.fields = {}  # an empty memory: no step
    before = copy.deepcopy(est.module_.state_dict())
    est._after_batch(X, y, 0)
    assert all(torch.equal(v, est.module_.state_dict()[k]) for k, v in before.items())


def test_fdr_per_batch_memory_update_still_runs():
    est, _ = _fdr_after(2)
    est.set_params(memory_update="per_batch")
    est._optimizer = torch.optim.SGD(est.module_.parameters(), lr=0.0)
    est._batch_index, est._train_groups = torch.arange(8), None
    X, y = _batch()
    n_seen = est.memory_.n_seen
    est._after_batch(X, y, 0)
    assert est.memory_.n_seen == n_seen + 8
    est._after_batch(X, y, 1)  # later epochs offer nothing
    assert est.memory_.n_seen == n_seen + 8


# -------------------------------------------------------------------- HAL
def _hal(n_tasks=2):
    """HAL after one and two tasks (one fit, cached)."""
    if "hal2" not in _CACHE:
        est = HAL(memory_size=6, replay_batch_size=6, anchor_steps=2, hal_lambda=0.4,
                  hal_lr=0.2, **TINY)
        for t, (X, y) in enumerate(_tasks()):
            est.partial_fit_task(X, y)
            _CACHE[f"hal{t + 1}"] = copy.deepcopy(est)
    est = copy.deepcopy(_CACHE[f"hal{n_tasks}"])
    est._generator = torch.Generator().manual_seed(7)
    return est


def test_hal_anchors_one_per_class_of_each_task():
    est = _hal()
    assert est.anchors_.shape == (4, 3, 16) and est.anchors_.dtype == torch.float32
    first = _hal(n_tasks=1)
    assert first.anchors_.shape == (2, 3, 16)
    assert torch.equal(first.anchors_, est.anchors_[:2])  # old anchors are kept
    X, y = _tasks()[1]
    est._before_task(X, est._encode(y), None)
    assert est._phi is None and est.anchors_.shape == (4, 3, 16)


def test_hal_training_loss_adds_the_look_ahead_drift_on_the_anchors():
    est = _hal()
    _as_during_second_task(est)
    net = est.module_
    X, y = _batch()
    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    loss = est._training_loss(X, y)
    got_grads = torch.autograd.grad(loss, params)
    er = _ce(net(X), y) + _ce(net(est.memory_["X"]), est.memory_["y"])
    grads = torch.autograd.grad(er, params, create_graph=False, retain_graph=True)
    ahead = {n: (p - 0.2 * g).detach() for (n, p), g in zip(named, grads)}
    target = functional_call(net, ahead, (est.anchors_,))
    drift = _mse(target, net(est.anchors_))
    assert float(drift.detach()) > 1e-6
    expected = er + 0.4 * drift
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    for a, b in zip(got_grads, torch.autograd.grad(expected, params)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    est.anchors_ = est.anchors_[:0]  # no anchors yet: ER's loss
    with torch.no_grad():
        assert float(est._training_loss(X, y)) == pytest.approx(float(er), rel=1e-5)


def test_hal_running_mean_embedding():
    est = _hal().set_params(beta=0.3)
    est._phi = None
    X1, X2 = _batch(4, seed=2)[0], _batch(6, seed=3)[0]
    est._after_batch(X1, None, 0)
    with torch.no_grad():
        m1, m2 = est.module_.features(X1).mean(0), est.module_.features(X2).mean(0)
    torch.testing.assert_close(est._phi, 0.7 * m1)
    est._after_batch(X2, None, 0)
    torch.testing.assert_close(est._phi, 0.3 * 0.7 * m1 + 0.7 * m2)


def _anchor_objective(e, c, now, later, phi, gamma):
    t = torch.tensor([c])
    return (F.cross_entropy(now(e), t) - F.cross_entropy(later(e), t)
            + gamma * ((now.features(e) - phi) ** 2).sum())


def test_hal_anchor_is_sgd_from_uniform_noise():
    est = _hal().set_params(anchor_steps=3, hal_lr=0.2, gamma=0.3)
    now = est._frozen_copy()
    later = copy.deepcopy(now)
    with torch.no_grad():
        for p in later.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    phi = torch.tensor([0.5, -1.0, 2.0, 0.1])
    state = est._generator.get_state()
    got = est._anchor(1, now, later, phi)
    g = torch.Generator()
    g.set_state(state)
    e = torch.rand((1, 3, 16), generator=g)
    assert ((e >= 0) & (e < 1)).all()
    for _ in range(3):
        e = e.requires_grad_(True)
        (grad,) = torch.autograd.grad(_anchor_objective(e, 1, now, later, phi, 0.3), [e])
        e = (e - 0.2 * grad).detach()
    assert got.shape == (3, 16)
    torch.testing.assert_close(got, e[0], atol=1e-6, rtol=1e-5)
    assert float((got - e[0] + 0.2 * grad[0]).abs().max()) > 1e-4  # the steps moved it


def test_hal_finetuned_copy_takes_sgd_steps_on_the_memory():
    est = _hal().set_params(finetuning_steps=2, hal_lr=0.3, batch_size=4)
    before = copy.deepcopy(est.module_)
    state = est._generator.get_state()
    net = est._finetuned_copy()
    ref = copy.deepcopy(before)
    gen = torch.Generator()
    gen.set_state(state)
    for _ in range(2):  # random memory batches of batch_size
        idx = torch.randperm(6, generator=gen)[:4]
        loss = _ce(ref(est.memory_["X"][idx]), est.memory_["y"][idx])
        grads = torch.autograd.grad(loss, list(ref.parameters()))
        with torch.no_grad():
            for p, g in zip(ref.parameters(), grads):
                p.sub_(0.3 * g)
    assert not net.training and not any(p.requires_grad for p in net.parameters())
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q.detach(), atol=2e-5, rtol=1e-4)
    for p, b in zip(est.module_.parameters(), before.parameters()):
        assert torch.equal(p, b)  # the learner itself is untouched
    assert any(not torch.allclose(p, b) for p, b in zip(net.parameters(), before.parameters()))
    est.memory_.fields = {}  # an empty memory: an unchanged copy
    net = est._finetuned_copy()
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before.parameters()))


def test_hal_after_task_adds_an_anchor_per_class():
    est = _hal()
    old = est.anchors_.clone()
    calls = []
    later = object()

    def anchor(c, now, later_, phi):
        calls.append((c, now, later_, phi))
        return torch.full((3, 16), float(c))

    est._anchor, est._finetuned_copy = anchor, lambda: later
    est._phi = torch.full((4,), 2.0)
    X, y = _tasks()[1]
    y_enc = est._encode(y)[::-1].copy()
    n_seen = est.memory_.n_seen
    est._after_task(X, y_enc, None)
    assert est.memory_.n_seen == n_seen + len(y)  # ER's memory update ran
    assert [c for c, *_ in calls] == [2, 3]
    assert all(type(c) is int for c, *_ in calls)
    now = calls[0][1]
    assert now is not est.module_ and not now.training
    assert not any(p.requires_grad for p in now.parameters())
    assert all(torch.equal(v, est.module_.state_dict()[k]) for k, v in now.state_dict().items())
    assert calls[0][2] is later and torch.equal(calls[0][3], est._phi)
    assert torch.equal(est.anchors_[:4], old) and est.anchors_.shape == (6, 3, 16)
    assert (est.anchors_[4] == 2).all() and (est.anchors_[5] == 3).all()
    calls.clear()
    est._phi = None  # no batch seen: phi = 0
    est._after_task(X, y_enc, None)
    assert calls[0][3] == 0.0 and est.anchors_.shape == (8, 3, 16)


# ---------------------------------------------------------------- Offline
def test_offline_trains_on_the_union_of_everything_seen():
    a = (np.zeros((2, 3)), np.array([0, 1]), np.array([7, 8]))
    b = (np.ones((1, 3)), np.array([2]), np.array([9]))
    assert _union(None, a) is a
    X, y, groups = _union(a, b)
    np.testing.assert_array_equal(X, np.r_[np.zeros((2, 3)), np.ones((1, 3))])
    np.testing.assert_array_equal(y, [0, 1, 2])
    np.testing.assert_array_equal(groups, [7, 8, 9])
    assert _union(a, b[:2] + (None,))[2] is None and _union(a[:2] + (None,), b)[2] is None
    est = Offline()
    assert est.patience == 20 and Offline(patience=3).patience == 3
    assert Offline(max_epochs=7).get_params()["max_epochs"] == 7
    va, vb = (a[0][:1], a[1][:1], None), (b[0], b[1], None)
    train, valid = est._task_data(a, va)
    assert train is a and valid is va
    train, valid = est._task_data(b, vb)
    np.testing.assert_array_equal(train[1], [0, 1, 2])
    np.testing.assert_array_equal(valid[1], [0, 2])
    assert train is est.seen_train_ and valid is est.seen_valid_
    train, _ = est._task_data(a, va)
    np.testing.assert_array_equal(train[1], [0, 1, 2, 0, 1])
    np.testing.assert_array_equal(train[2], [7, 8, 9, 7, 8])


# ------------------------------------------------------------------- DT2W state
def test_dt2w_first_task_prototypes_and_radius():
    from clestim import DT2W

    est = _fit(DT2W(**TINY), n_tasks=1)
    X, y = _tasks()[0]
    est.module_.eval()
    with torch.no_grad():
        f = est.module_.features(torch.from_numpy(X)).double()
    expected = torch.stack([f[torch.from_numpy(y == c)].mean(0) for c in (0, 1)])
    np.testing.assert_allclose(est.prototypes_.double().numpy(), expected.numpy(),
                               rtol=1e-5, atol=1e-6)
    # radius: sqrt(mean over classes of the trace of the class covariance / dimension)
    traces = []
    for c in (0, 1):
        fc = f[torch.from_numpy(y == c)]
        centred = fc - fc.mean(0)
        traces.append(float((centred**2).sum() / (len(fc) - 1)))
    assert est.radius_ == pytest.approx(np.sqrt(np.mean(traces) / f.shape[1]), rel=1e-6)
    radius = est.radius_
    est.partial_fit_task(*_tasks()[1])
    assert est.radius_ == radius  # fixed after the first task
    assert est.prototypes_.shape == (4, f.shape[1])


# ------------------------------------------------------------ IDD's parameters
@pytest.mark.parametrize(
    "shape, params, match",
    [((6, 3, 16), {"memory_frames": 4}, r"memory_motion='farneback'\) measures optical flow"),
     ((6, 3, 16), {"memory_frames": 17, "memory_motion": "diff"},
      r"keeps more frames than the input has \(16\); use at most 16 or None"),
     ((6, 48), {"memory_frames": 4, "memory_motion": "diff"},
      r"downsamples clips \(n, C, T, H, W\) or series \(n, C, T\) along T, got input of shape")],
)
def test_memory_frames_errors(shape, params, match):
    X = np.zeros(shape, dtype=np.float32)
    est = ER(**{**TINY, "backbone": "mlp" if len(shape) == 2 else "cnn"}, **params)
    with pytest.raises(ValueError, match=match):
        est._check_memory_frames(X)


def test_memory_frames_cannot_change_once_stored():
    X = _tasks()[0][0]
    est = _fit(ER(**TINY, memory_size=6, memory_frames=8, memory_motion="diff"), n_tasks=1)
    assert est.memory_.fields["X"].shape[2] == 8 and "frames" in est.memory_.fields
    est._check_memory_frames(X)  # unchanged: fine
    with pytest.raises(ValueError, match=r"memory_frames=4 but the memory already stores "
                                         r"samples with memory_frames=8"):
        est.set_params(memory_frames=4)._check_memory_frames(X)
    with pytest.raises(ValueError, match=r"memory_frames=None but the memory already stores"):
        est.set_params(memory_frames=None)._check_memory_frames(X)
    plain = _fit(ER(**TINY, memory_size=6), n_tasks=1)
    with pytest.raises(ValueError, match=r"memory_frames=8 but the memory already stores "
                                         r"samples with memory_frames=None"):
        plain.set_params(memory_frames=8, memory_motion="diff")._check_memory_frames(X)


# ------------------------------------------------------- the ensembles' parameters
@pytest.mark.parametrize(
    "params, message",
    [({"theta": 0}, "theta must be a positive number, got 0"),
     ({"theta": -0.1}, "theta must be a positive number, got -0.1"),
     ({"theta": float("nan")}, "theta must be a positive number, got nan"),
     ({"theta": True}, "theta must be a positive number, got True"),
     ({"theta": "0.1"}, "theta must be a positive number, got '0.1'"),
     ({"theta_ae": 0.0}, "theta_ae must be a positive number, got 0.0"),
     ({"latent": 0}, "latent must be a positive integer, got 0"),
     ({"latent": 2.0}, "latent must be a positive integer, got 2.0"),
     ({"n_generated": -1}, "n_generated must be a non-negative integer, got -1"),
     ({"n_generated": 1.5}, "n_generated must be a non-negative integer, got 1.5"),
     ({"epsilon": 0}, "epsilon must be a positive number, got 0"),
     ({"backbone": "cnn"}, "ENSGENDEL's units are MLPs: backbone must be 'mlp', got 'cnn'"),
     ({"classifier": "softmax"},
      "ENSGENDEL's units are sigmoid units: classifier must be 'bce', got 'softmax'")],
)
def test_ensemble_parameters_are_checked(params, message):
    from clestim import ENSGENDEL

    with pytest.raises(ValueError) as error:
        ENSGENDEL(**params)._check_params()
    assert str(error.value) == message


def test_ensemble_parameter_edges_are_accepted():
    from clestim import ENSGENDEL

    ENSGENDEL(theta=1e-9, theta_ae=1e-9, latent=1, n_generated=0, epsilon=1e-9)._check_params()
