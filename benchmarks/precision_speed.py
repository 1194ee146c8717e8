"""Mixed precision side by side: ER epochs, whole ER runs and A_T in fp32 vs bf16/fp16.

Four parts, each interleaving its variants (A B C, A B C, ...) so that drifts in
the machine's speed hit all variants alike; medians are reported.

``step``
    Bare training steps (Adam, batch 64) of the TSCIL 1D-CNN with and without
    ``torch.autocast(dtype=bfloat16)``: whether this CPU gains from bf16 at all.
``epoch``
    One ER training epoch on a UCI-HAR task (classes 2-5, memory of 366 full, as
    ``epoch_speed.py``) through clestim in each precision, and the bare fp32 torch
    loop of ``epoch_speed.py``. ``--n-train`` subsamples the task (for the slow
    emulated bf16 of CPUs without native bf16).
``run``
    A whole ER run on UCI-HAR (the protocol of ``run_speed.py``: LN, memory 366,
    seed 1234, early stopping) in each precision, and the bare fp32 loop with the
    epochs the fp32 run took. ``--max-epochs`` shortens every variant alike.
``accuracy``
    A_T of ``--methods`` on UCI-HAR (LN, seed 1234, ``clestim bench``'s cells) in
    each precision.

Each line says which precision actually ran: ``bf16`` on a CPU without native
bfloat16 kernels falls back to fp32 (see ``clestim._precision``);
``--force-bf16`` runs the emulation anyway, to measure it.

Usage::

    python benchmarks/precision_speed.py step --repeats 2
    python benchmarks/precision_speed.py epoch --repeats 3 [--force-bf16 --n-train 640]
    python benchmarks/precision_speed.py run --repeats 1 [--max-epochs 5]
    python benchmarks/precision_speed.py accuracy --methods ER,DER,LwF [--max-epochs 5]
    # on a GPU:
    python benchmarks/precision_speed.py run --device cuda --precisions fp32,fp16,bf16
    python benchmarks/precision_speed.py accuracy --device cuda --precisions fp32,fp16,bf16
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # epoch_speed, run_speed

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
NAMES = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _used(precision: str, device: str) -> str:
    from clestim._precision import amp_dtype

    return NAMES[amp_dtype(precision, device)]


def step_part(args, precisions):
    from torch.nn import functional as F

    from clestim.nets import CNN1D, ContinualNetwork, InputNorm

    torch.manual_seed(0)
    net = ContinualNetwork(CNN1D(9, norm="layer"), InputNorm("layer", 9)).to(args.device)
    net.head.grow(6)
    optimizer = torch.optim.Adam(net.parameters())
    X, y = torch.randn(64, 9, 128, device=args.device), torch.randint(6, (64,), device=args.device)
    dtypes = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

    def steps(dtype, n=10):
        start = time.perf_counter()
        for _ in range(n):
            with torch.autocast(torch.device(args.device).type, dtype=dtype,
                                enabled=dtype is not None):
                loss = F.cross_entropy(net(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return 1000 * (time.perf_counter() - start) / n

    times = {p: [] for p in precisions}
    for r in range(args.repeats):
        for p in precisions:
            steps(dtypes[p], 1)  # warm-up
            times[p].append(steps(dtypes[p]))
        print(f"repeat {r}: " + ", ".join(f"{p} {v[-1]:.0f} ms/step" for p, v in times.items()),
              flush=True)
    print("medians: " + ", ".join(f"{p} {np.median(v):.0f} ms/step" for p, v in times.items()))


def epoch_part(args, precisions):
    from epoch_speed import bare_epoch

    from clestim import ER
    from clestim.datasets import load_dataset

    data = load_dataset("uci_har", data_home=args.data_home)
    X, y = data.X_train, data.y_train
    first = np.flatnonzero(np.isin(y, [0, 1]))
    second = np.flatnonzero(np.isin(y, [2, 3, 4, 5]))
    if args.n_train:
        second = np.sort(np.random.RandomState(0).choice(second, args.n_train, replace=False))
    common = dict(memory_size=366, max_epochs=1, patience=None, validation_fraction=0.0,
                  random_state=0, device=args.device)
    warm = ER(**common).partial_fit_task(X[first], y[first])
    module = copy.deepcopy(warm.module_)
    module.head.grow(4)
    memory = {k: v.clone() for k, v in warm.memory_.fields.items()}
    Xt = torch.as_tensor(X[second])
    yt = torch.as_tensor(np.searchsorted([2, 3, 4, 5], y[second]) + 2)
    print(f"ER epoch on {len(second)} UCI-HAR windows (32 new + 32 replayed per step), "
          f"device {args.device}, {torch.get_num_threads()} threads", flush=True)

    times = {p: [] for p in [*precisions, "bare fp32"]}
    for r in range(args.repeats):
        for p in precisions:
            est = copy.deepcopy(warm).set_params(precision=p)
            est.partial_fit_task(X[second], y[second])
            times[p].append(est.history_[-1][0]["dur"])
        if args.device == "cpu":
            times["bare fp32"].append(bare_epoch(copy.deepcopy(module), memory, Xt, yt,
                                                 torch.Generator().manual_seed(r)))
        print(f"repeat {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items() if v),
              flush=True)
    _summary(times, args.device)


def run_part(args, precisions):
    from run_speed import run_bare, run_clestim

    walls, epochs = {p: [] for p in [*precisions, "bare fp32"]}, {}
    extra = {} if args.max_epochs is None else {"max_epochs": args.max_epochs}
    for r in range(args.repeats):
        for p in precisions:
            out = run_clestim(args.data_home, precision=p, device=args.device, **extra)
            walls[p].append(out["wall"])
            epochs[p] = out["epochs"]
            print(f"repeat {r}: ER {p} (ran {_used(p, args.device)}) {out['wall']:.1f} s, "
                  f"epochs per task {out['epochs']}", flush=True)
        if args.device == "cpu":
            fp32_epochs = epochs.get("fp32") or epochs[precisions[0]]
            walls["bare fp32"].append(run_bare(args.data_home, fp32_epochs)["wall"])
            print(f"repeat {r}: bare fp32 loop, epochs {fp32_epochs}: "
                  f"{walls['bare fp32'][-1]:.1f} s", flush=True)
    _summary(walls, args.device)


def accuracy_part(args, precisions):
    from clestim.benchmark import BenchmarkConfig, run_cell

    results = {}
    for method in args.methods.split(","):
        for p in precisions:
            config = BenchmarkConfig(
                datasets=["uci_har"], methods=[method], settings={"norm": ["layer"]},
                seed=1234, max_epochs=args.max_epochs or 100, precision=p, device=args.device,
                data_home=args.data_home,
            )
            (cell,) = config.cells()
            record = run_cell(cell, config)
            results[method, p] = 100 * record["metrics"]["average_accuracy"]
            print(f"{method} {p} (ran {record['precision_used']}): A_T {results[method, p]:.2f}, "
                  f"{record['wall_s']:.0f} s", flush=True)
    for method in args.methods.split(","):
        base = results[method, precisions[0]]
        print(f"{method}: " + ", ".join(
            f"{p} {results[method, p]:.2f} ({results[method, p] - base:+.2f})" for p in precisions))


def _summary(times: dict, device: str) -> None:
    medians = {k: float(np.median(v)) for k, v in times.items() if v}
    print("medians: " + ", ".join(f"{k} {v:.2f} s" for k, v in medians.items()))
    if "bare fp32" in medians:
        bare = medians["bare fp32"]
        print("ratio to the bare fp32 loop: " + ", ".join(
            f"{k} {v / bare:.3f}" for k, v in medians.items() if k != "bare fp32"))
    print(json.dumps({"device": device, "medians_s": medians}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["step", "epoch", "run", "accuracy"])
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-train", type=int, help="epoch: subsample the task")
    parser.add_argument("--max-epochs", type=int, help="run/accuracy: epochs per task")
    parser.add_argument("--methods", default="ER,DER,LwF")
    parser.add_argument("--force-bf16", action="store_true",
                        help="run bf16 even on a CPU without native bfloat16 (emulated)")
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "2")))
    if args.force_bf16:
        from clestim import _precision

        _precision.cpu_supports_bf16 = lambda: True
    precisions = args.precisions.split(",")
    parts = {"step": step_part, "epoch": epoch_part, "run": run_part, "accuracy": accuracy_part}
    parts[args.part](args, precisions)


if __name__ == "__main__":
    main()
