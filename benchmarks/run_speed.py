"""Wall time and peak memory of one full ER run on UCI-HAR: clestim vs a bare torch loop.

clestim runs ER (LN, memory 366, the TSCIL protocol with early stopping) on the
3-task UCI-HAR stream of seed 1234. The bare loop then does the same work by hand:
per task the same number of epochs clestim ran, each epoch a pass of 32 new + 32
replayed samples per step (from the second task), a validation pass, a copy of
the best weights, the best weights restored at the end, and a reservoir update
with the task's training split. Each side runs in its own process, so each peak
resident memory is its own. Prints both wall times, their ratio and both peaks.

Usage::

    python benchmarks/run_speed.py [--data-home ../shared/data]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _tasks(data_home):
    from clestim.datasets import load_uci_har
    from clestim.streams import ClassIncremental

    data = load_uci_har(data_home)
    stream = ClassIncremental(classes_per_task=2, random_state=1234)
    return [(data.X_train[i], data.y_train[i]) for i in stream.split(None, data.y_train)]


def run_clestim(data_home, **params) -> dict:
    """One ER run; ``params`` are extra ER parameters (``precision``, ``device``...)."""
    from clestim import ER

    tasks = _tasks(data_home)
    est = ER(memory_size=366, random_state=0, **params)
    start = time.perf_counter()
    for X, y in tasks:
        est.partial_fit_task(X, y)
    return {"wall": time.perf_counter() - start, "epochs": [len(h) for h in est.history_]}


def run_bare(data_home, epochs) -> dict:
    from clestim.nets import CNN1D, ContinualNetwork, InputNorm

    tasks = _tasks(data_home)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    net = ContinualNetwork(CNN1D(9, norm="layer"), InputNorm("layer", 9))
    memory_X, memory_y, slots, n_seen, labels = None, None, [], 0, {}
    start = time.perf_counter()
    for (X, y), n_epochs in zip(tasks, epochs):
        for c in dict.fromkeys(y.tolist()):
            labels.setdefault(c, len(labels))
        net.head.grow(len(labels) - net.head.n_classes)
        y = np.array([labels[c] for c in y])
        train, valid = [], []
        for c in np.unique(y):
            idx = torch.randperm(int((y == c).sum()), generator=gen).numpy()
            members = np.flatnonzero(y == c)[idx]
            cut = int(0.9 * len(members))
            train.append(members[:cut])
            valid.append(members[cut:])
        train, valid = np.concatenate(train), np.concatenate(valid)
        Xt, yt = torch.as_tensor(X[train]), torch.as_tensor(y[train])
        Xv, yv = torch.as_tensor(X[valid]), torch.as_tensor(y[valid])
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        best, best_state = float("inf"), None
        for _ in range(n_epochs):
            net.train()
            order = torch.randperm(len(yt), generator=gen)
            for i in range(0, len(yt), 32):
                idx = order[i : i + 32]
                if memory_X is None:
                    loss = F.cross_entropy(net(Xt[idx]), yt[idx])
                else:
                    mem = torch.randperm(len(memory_y), generator=gen)[:32]
                    out = net(torch.cat([memory_X[mem], Xt[idx]]))
                    loss = F.cross_entropy(out[: len(mem)], memory_y[mem]) + F.cross_entropy(
                        out[len(mem) :], yt[idx]
                    )
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                optimizer.step()
            net.eval()
            with torch.no_grad():
                val = F.cross_entropy(net(Xv), yv).item()
            if val < best:
                best, best_state = val, copy.deepcopy(net.state_dict())
        net.load_state_dict(best_state)
        order = torch.randperm(len(yt), generator=gen)  # reservoir update, after the task
        for i in order.tolist():
            n_seen += 1
            if len(slots) < 366:
                slots.append((Xt[i], yt[i]))
            elif (j := int(torch.randint(n_seen, (1,), generator=gen))) < 366:
                slots[j] = (Xt[i], yt[i])
        memory_X = torch.stack([x for x, _ in slots])
        memory_y = torch.stack([c for _, c in slots])
    return {"wall": time.perf_counter() - start}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    parser.add_argument("--side", choices=["clestim", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--epochs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "2")))
    if args.side:
        out = (run_clestim(args.data_home) if args.side == "clestim"
               else run_bare(args.data_home, json.loads(args.epochs)))
        out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out))
        return

    def side(*extra):
        cmd = [sys.executable, __file__, "--data-home", str(args.data_home), *extra]
        return json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                         text=True).stdout.strip().splitlines()[-1])

    ours = side("--side", "clestim")
    print(f"clestim ER: {ours['wall']:.0f} s, epochs per task {ours['epochs']}, "
          f"peak memory {ours['peak_mib']:.0f} MiB", flush=True)
    bare = side("--side", "bare", "--epochs", json.dumps(ours["epochs"]))
    print(f"bare torch loop, same epochs: {bare['wall']:.0f} s, "
          f"peak memory {bare['peak_mib']:.0f} MiB")
    print(f"wall-time ratio clestim / bare: {ours['wall'] / bare['wall']:.3f}")


if __name__ == "__main__":
    main()
