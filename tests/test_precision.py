"""Mixed precision (``precision='fp32'|'bf16'|'fp16'``) on every method."""

import functools
import hashlib
import pickle
import warnings

import numpy as np
import pytest
import torch
from helpers import task
from sklearn.base import clone

import clestim
from clestim import _precision
from clestim.nets.generators import TimeVAE

TASKS = ([0, 3], [1, 5])
TINY_VAE = functools.partial(TimeVAE, latent_dim=8, hidden=(8, 8))
SMALL = dict(backbone_params={"channels": (8, 8)}, norm="layer", input_norm="layer",
             batch_size=32, random_state=0)
EXTRA = {  # what a method needs to train on two tiny tasks
    "ER": dict(memory_size=40), "DER": dict(memory_size=40), "DERpp": dict(memory_size=40),
    "Herding": dict(memory_size=40), "ASER": dict(memory_size=40),
    "CLOPS": dict(memory_size=40), "GR": dict(generator=TINY_VAE, generator_epochs=1),
    # defaults that hold a tiny network too firmly to learn the second task (fp32 too)
    "MAS": dict(lambda_reg=1.0), "DT2W": dict(lambda_fmap=1e-3, lambda_proto=1.0),
}


def _make(name, **params):
    cls = getattr(clestim, name)
    return cls(**SMALL, **EXTRA.get(name, {}), **params)


def _fingerprint(est, data) -> str:
    """SHA-256 of the weights and test probabilities after two small tasks (1 thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for classes in TASKS:
                est.partial_fit_task(*task(data, classes, n=40))
        h = hashlib.sha256()
        for k, v in est.module_.state_dict().items():
            h.update(k.encode())
            h.update(v.detach().cpu().numpy().tobytes())
        # in head order, as the code before precision computed predict_proba's columns
        X_test = task(data, TASKS[0] + TASKS[1], "test", n=20)[0]
        scores = torch.from_numpy(est._head_scores(X_test))
        h.update(torch.softmax(scores, dim=1).numpy().tobytes())
        return h.hexdigest()[:16]
    finally:
        torch.set_num_threads(threads)


#: computed with the code before mixed precision existed (commit 4c7cc8f), torch
#: 2.13.0+cpu on this project's AMD EPYC machine, 1 thread
FP32_BEFORE = {"ER": "de68b1ced861aa47", "DT2W": "ef69f0b43b8b1e91", "GR": "3cb01319bb60d2ef"}


@pytest.mark.parametrize("name", sorted(FP32_BEFORE))
def test_fp32_is_bit_for_bit_the_code_before_precision(name, uci_har_small, monkeypatch):
    if torch.__version__ != "2.13.0+cpu" or _precision.cpu_supports_bf16():
        pytest.skip("the stored fingerprints are of torch 2.13.0+cpu on an AVX2 CPU")
    # fp32 must not even enter autocast or build a gradient scaler
    def refuse(*args, **kwargs):
        raise AssertionError("fp32 entered a mixed-precision code path")

    monkeypatch.setattr(torch.amp, "GradScaler", refuse)
    monkeypatch.setattr(_precision.torch, "autocast", refuse)
    # the code before precision had only TSCIL's VAE (raw input), not the standardising default
    raw_vae = functools.partial(TINY_VAE, standardize=False)
    extra = {"ER": dict(memory_size=40), "GR": dict(generator=raw_vae, generator_epochs=1)}
    est = getattr(clestim, name)(**SMALL, **extra.get(name, {}), max_epochs=2)
    assert _fingerprint(est, uci_har_small) == FP32_BEFORE[name]


@pytest.fixture
def native_bf16(monkeypatch):
    """Make this CPU count as bf16-capable, so bf16 really runs (emulated, slowly)."""
    monkeypatch.setattr(_precision, "cpu_supports_bf16", lambda: True)


METHODS = ["ASER", "CLOPS", "DER", "DERpp", "DT2W", "ER", "EWC", "GR", "Herding", "LwF",
           "MAS", "Naive", "Offline"]


@pytest.mark.parametrize("name", METHODS)
def test_every_method_learns_two_tasks_in_bf16(name, uci_har_small, native_bf16):
    est = _make(name, max_epochs=4, lr=3e-3, precision="bf16")
    first = task(uci_har_small, TASKS[0], n=80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GR's replay-coverage warning on a tiny VAE
        est.partial_fit_task(*first)
        seen = []
        conv = est.module_.backbone.blocks[0]
        hook = conv.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
        est.partial_fit_task(*task(uci_har_small, TASKS[1], n=80))
        hook.remove()
    assert torch.bfloat16 in seen  # the second task's steps ran under bf16 autocast
    assert all(p.dtype == torch.float32 for p in est.module_.parameters())
    X_test, y_test = task(uci_har_small, TASKS[0] + TASKS[1], "test")
    assert est.predict_proba(X_test).dtype == np.float32
    assert est.score(X_test, y_test) > 0.4  # chance: 0.25
    if hasattr(est, "memory_"):  # replay inputs stored in bf16, read back as float32
        assert est.memory_.fields["X"].dtype == torch.bfloat16
        assert est.memory_["X"].dtype == torch.float32


def test_bf16_falls_back_to_fp32_without_native_support(uci_har_small, monkeypatch):
    monkeypatch.setattr(_precision, "cpu_supports_bf16", lambda: False)
    monkeypatch.setattr(_precision, "_warned", set())
    est = _make("ER", max_epochs=1, precision="bf16")
    with pytest.warns(UserWarning, match="no native bfloat16"):
        est.partial_fit_task(*task(uci_har_small, TASKS[0], n=20))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        est.partial_fit_task(*task(uci_har_small, TASKS[1], n=20))
    assert est.memory_.fields["X"].dtype == torch.float32
    assert isinstance(est._autocast(), type(_precision.autocast("fp32", "cpu")))


def test_fp16_on_cpu_and_unknown_precision_are_clear_errors(uci_har_small):
    X, y = task(uci_har_small, TASKS[0], n=10)
    for precision, match in (("fp16", "needs a GPU"), ("half", "precision must be one of")):
        est = _make("ER", max_epochs=1, precision=precision)
        with pytest.raises(ValueError, match=match):
            est.partial_fit_task(X, y)
        assert not hasattr(est, "module_")  # nothing was fitted
    fitted = _make("ER", max_epochs=1).partial_fit_task(X, y)
    weights = {k: v.clone() for k, v in fitted.module_.state_dict().items()}
    with pytest.raises(ValueError, match="needs a GPU"):
        fitted.set_params(precision="fp16").partial_fit_task(X, y)
    assert fitted.n_tasks_seen_ == 1
    assert all(torch.equal(v, weights[k]) for k, v in fitted.module_.state_dict().items())


def test_clone_and_pickle_keep_precision(uci_har_small, native_bf16):
    est = _make("DER", max_epochs=1, precision="bf16")
    assert clone(est).precision == "bf16" and est.get_params()["precision"] == "bf16"
    est.partial_fit_task(*task(uci_har_small, TASKS[0], n=20))
    restored = pickle.loads(pickle.dumps(est))
    assert restored.precision == "bf16"
    assert restored.memory_.fields["X"].dtype == torch.bfloat16
    X_test = task(uci_har_small, TASKS[0], "test", n=10)[0]
    np.testing.assert_array_equal(restored.predict_proba(X_test), est.predict_proba(X_test))
    restored.partial_fit_task(*task(uci_har_small, TASKS[1], n=20))  # keeps learning in bf16
    assert restored.memory_.fields["X"].dtype == torch.bfloat16


def test_memory_stores_bf16_inputs_and_returns_float32():
    from clestim.memory import MemoryBuffer

    buffer = MemoryBuffer(4, input_dtype=torch.bfloat16)
    X = torch.tensor([[1.0, 1.0 + 2**-10], [3.0, -2.5]])
    buffer.add(torch.Generator().manual_seed(0), X=X, y=torch.tensor([0, 1]))
    assert buffer.fields["X"].dtype == torch.bfloat16
    assert buffer.fields["X"].element_size() * buffer.fields["X"].numel() == 8  # half of fp32
    # 1 + 2**-10 is below bf16's resolution at 1 (2**-7): stored rounded, read as float32
    expected = torch.tensor([[1.0, 1.0], [3.0, -2.5]])
    assert buffer["X"].dtype == torch.float32 and torch.equal(buffer["X"], expected)
    assert torch.equal(buffer.take(torch.tensor([1]))["X"], expected[1:])


def test_bench_precision_option_cell_keys_and_report_labels():
    from clestim.benchmark import BenchmarkConfig, summary_frame, variant_label
    from clestim.cli import _config, _parser

    def keys(*flags):
        args = _parser().parse_args(["bench", "--datasets", "uci_har", "--methods", "ER",
                                     "--norm", "layer", "--lr-schedule", "none",
                                     "--holdout", "0", *flags])  # the pre-#20 protocol
        return [c.key for c in _config(args).cells()]

    # fp32 cells keep the key they had before the option existed (computed then)
    assert keys() == keys("--precision", "fp32") == ["uci_har__ER__norm-layer__c2f41328__run0"]
    assert keys("--precision", "bf16") != keys()
    with pytest.raises(ValueError, match="needs a GPU"):
        BenchmarkConfig.from_dict({"methods": ["ER"], "precision": "fp16"})
    record = {"dataset": "uci_har", "setting": "norm=layer", "method": "ER", "protocol": {},
              "metrics": {"average_accuracy": 0.9, "average_forgetting": 0.1,
                          "learning_accuracy": 0.95}}
    old = dict(record)  # a cell written before the option: fp32
    bf16 = {**record, "precision": "bf16", "precision_used": "bf16"}
    fallback = {**record, "precision": "bf16", "precision_used": "fp32"}
    assert [variant_label(r) for r in (old, bf16, fallback)] == ["", "bf16", "bf16, ran fp32"]
    frame = summary_frame([old, bf16, fallback])
    assert sorted(frame["precision"]) == ["bf16", "fp32", "fp32"]


def test_fp16_gradient_scaler_path(uci_har_small, monkeypatch):
    """The fp16 machinery (scaled backward, unscale before clipping, scaler step),
    run on a CPU with the GPU-only check lifted (CPU autocast does float16)."""
    from clestim import _training

    monkeypatch.setattr(_precision, "check_precision", lambda precision, device: None)
    scalers = []

    def spy(precision, device):
        scalers.append(torch.amp.GradScaler("cpu"))
        return scalers[-1]

    monkeypatch.setattr(_training._precision, "grad_scaler", spy)
    est = _make("ER", max_epochs=1, precision="fp16")
    est.partial_fit_task(*task(uci_har_small, TASKS[0], n=40))
    before = {k: v.clone() for k, v in est.module_.state_dict().items()}
    est.partial_fit_task(*task(uci_har_small, TASKS[1], n=40))
    assert len(scalers) == 2  # one per task, as the optimizer
    assert all(s._scale is not None for s in scalers)  # every task's loss was scaled
    after = est.module_.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert any(not torch.equal(before[k], after[k][: len(before[k])]) for k in before)
