"""Epoch time of GEM and A-GEM relative to ER (the video paper's methods; issue 15).

Each method first learns UCI-HAR classes 0-1 (one epoch, memory of 200 samples,
filled after the task), then trains one epoch on classes 2-3 (``--per-class``
training windows of each class, all by default); that epoch's time
(skorch's timer) is compared. The methods alternate within each repeat and the
medians are compared, since this machine's speed drifts. Target: A-GEM <= 1.3x ER.

Usage::

    python benchmarks/gem_speed.py [--repeats 3] [--data-home ../shared/data]
"""

from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path

import numpy as np
import torch

from clestim import AGEM, ER, GEM
from clestim.datasets import load_dataset

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = {"ER": ER, "A-GEM": AGEM, "GEM": GEM}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=None)
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "1")))
    data = load_dataset("uci_har", data_home=args.data_home)
    X, y = data.X_train, data.y_train
    if args.per_class:
        keep = np.concatenate([np.flatnonzero(y == c)[: args.per_class] for c in range(4)])
        X, y = X[keep], y[keep]
    first, second = np.isin(y, [0, 1]), np.isin(y, [2, 3])
    common = dict(memory_size=200, max_epochs=1, patience=None, validation_fraction=0.0,
                  random_state=0)
    warm = {name: cls(**common).partial_fit_task(X[first], y[first])
            for name, cls in METHODS.items()}
    times = {name: [] for name in METHODS}
    for r in range(args.repeats):
        for name, est in warm.items():
            est = copy.deepcopy(est)
            est.partial_fit_task(X[second], y[second])
            times[name].append(est.history_[-1][0]["dur"])
        print(f"repeat {r}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
              flush=True)
    er = np.median(times["ER"])
    for name, t in times.items():
        print(f"{name}: median epoch {np.median(t):.2f} s, {np.median(t) / er:.2f}x ER")


if __name__ == "__main__":
    main()
