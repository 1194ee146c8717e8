"""Time one ER training epoch through clestim against a hand-written torch loop.

Both train the same 1D-CNN (LayerNorm, input LN) from the same weights on the same
UCI-HAR task (classes 2-5, about 4,900 windows) with a full memory of 366 samples:
each step is 32 new + 32 replayed samples, one concatenated forward pass, CE + CE,
gradient-norm clipping at 1 and Adam at 1e-3. clestim's epoch time is skorch's
epoch timer; the bare loop is timed with ``perf_counter``. The two alternate, and
the medians are compared, because this machine's speed drifts from minute to
minute. Peak resident memory of the process is printed at the end.

Usage::

    python benchmarks/epoch_speed.py [--repeats 3] [--data-home ../shared/data]
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from clestim import ER
from clestim.datasets import load_dataset

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def bare_epoch(module, memory, X, y, generator) -> float:
    """One epoch of ER written directly in torch; returns seconds."""
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    module.train()
    start = time.perf_counter()
    order = torch.randperm(len(y), generator=generator)
    for i in range(0, len(y), 32):
        idx = order[i : i + 32]
        mem = torch.randperm(len(memory["y"]), generator=generator)[:32]
        xb = torch.cat([memory["X"][mem], X[idx]])
        out = module(xb)
        loss = F.cross_entropy(out[:32], memory["y"][mem]) + F.cross_entropy(out[32:], y[idx])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "2")))

    data = load_dataset("uci_har", data_home=args.data_home)
    X, y = data.X_train, data.y_train
    first, second = np.isin(y, [0, 1]), np.isin(y, [2, 3, 4, 5])
    common = dict(memory_size=366, max_epochs=1, patience=None, validation_fraction=0.0,
                  random_state=0)
    warm = ER(**common).partial_fit_task(X[first], y[first])  # fills the memory
    assert len(warm.memory_) == 366

    # the bare loop's inputs: the same grown network, memory and (encoded) task
    module = copy.deepcopy(warm.module_)
    module.head.grow(4)
    memory = {k: v.clone() for k, v in warm.memory_.fields.items()}
    Xt = torch.as_tensor(X[second])
    yt = torch.as_tensor(np.searchsorted([2, 3, 4, 5], y[second]) + 2)

    ours, bare, fit_wall = [], [], []
    for r in range(args.repeats):
        est = copy.deepcopy(warm)
        start = time.perf_counter()
        est.partial_fit_task(X[second], y[second])
        fit_wall.append(time.perf_counter() - start)
        ours.append(est.history_[-1][0]["dur"])
        bare.append(bare_epoch(copy.deepcopy(module), memory, Xt, yt,
                               torch.Generator().manual_seed(r)))
        print(f"repeat {r}: clestim epoch {ours[-1]:.2f} s "
              f"(whole partial_fit_task {fit_wall[-1]:.2f} s), bare loop {bare[-1]:.2f} s",
              flush=True)
    ratio = np.median(ours) / np.median(bare)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"median epoch: clestim {np.median(ours):.2f} s, bare torch {np.median(bare):.2f} s, "
          f"ratio {ratio:.3f}")
    print(f"median partial_fit_task (1 epoch + memory update + snapshot): "
          f"{np.median(fit_wall):.2f} s")
    print(f"peak resident memory: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
