"""Time GR on DSA with and without ``retained_heap`` (what every benchmark cell runs in).

GR (TSCIL's TimeVAE, LN, input LN) learns the first two tasks of DSA's TSCIL stream
(run 0's class order, experiment part) with a short protocol: ``--epochs`` learner
epochs and ``--generator-epochs`` generator epochs per task, no early stopping. The
TimeVAE's output layer is 5625 x 5625 (126 MiB), so without the retained heap glibc
maps and unmaps its gradient and Adam's temporaries at every step. The two settings
alternate (plain, retained, retained, plain, ...), each fit's wall time is printed,
and the medians are compared; every fit must end with the same generator and network
weights, bit for bit, or the script fails.

Usage::

    python benchmarks/heap_speed.py [--repeats 2] [--data-home ../shared/data]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from clestim import GR
from clestim._heap import retained_heap
from clestim.datasets import load_dataset
from clestim.streams import ClassIncremental, StreamPart

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def fit_two_tasks(tasks, epochs: int, generator_epochs: int, retained: bool):
    """Seconds for GR to learn ``tasks``, and a digest of every weight it ends with."""
    est = GR(max_epochs=epochs, patience=None, generator_epochs=generator_epochs,
             generator_patience=None, generator_params={"standardize": False},
             random_state=1234, verbose=0)
    start = time.perf_counter()
    with retained_heap() if retained else contextlib.nullcontext():
        for X, y in tasks:
            est.partial_fit_task(X, y)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for module in (est.module_, est.generator_):
        for tensor in module.state_dict().values():
            digest.update(tensor.numpy().tobytes())
    return seconds, digest.hexdigest()[:16]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--generator-epochs", type=int, default=2)
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "1")))
    # two generator epochs make a poor generator: GR says so; beside the point here
    warnings.filterwarnings("ignore", message="GR: the network labels all")

    data = load_dataset("dsa", data_home=args.data_home)
    X, y = data.X_train.astype(np.float32), data.y_train
    stream = StreamPart(ClassIncremental(classes_per_task=2, random_state=1234,
                                         remainder="drop"), part="experiment")
    tasks = [(X[idx], y[idx]) for idx in list(stream.split(X, y))[:2]]
    print(f"GR on DSA, tasks of {[len(t[1]) for t in tasks]} windows, {args.epochs} learner "
          f"and {args.generator_epochs} generator epochs a task, "
          f"{torch.get_num_threads()} thread(s)")
    times = {False: [], True: []}
    digests = set()
    for repeat in range(args.repeats):
        for retained in ((False, True) if repeat % 2 == 0 else (True, False)):
            seconds, digest = fit_two_tasks(tasks, args.epochs, args.generator_epochs, retained)
            times[retained].append(seconds)
            digests.add(digest)
            print(f"repeat {repeat}: {'retained heap' if retained else 'plain malloc '} "
                  f"{seconds:6.1f} s  weights {digest}")
    if len(digests) != 1:
        raise SystemExit(f"the fits ended with different weights: {sorted(digests)}")
    plain, retained = statistics.median(times[False]), statistics.median(times[True])
    print(f"medians: plain {plain:.1f} s, retained heap {retained:.1f} s, "
          f"ratio {retained / plain:.3f}; identical weights in all {2 * args.repeats} fits")


if __name__ == "__main__":
    main()
