"""Cells per hour of ``clestim bench`` with ``--n-jobs 1`` and ``--n-jobs 2``.

The same small grid (UCI-HAR, LN, several methods, few epochs) runs into a fresh
results folder once per setting, the settings alternating (1, 2, 1, 2, ...). The
torch threads per job are the cores divided by the jobs: with one job the process
uses all ``--cores`` threads; with two, each joblib worker uses ``cores // 2``
(set through ``OMP_NUM_THREADS`` before the workers start, which torch reads).

Usage::

    python benchmarks/njobs_throughput.py [--cores 2] [--repeats 1] [--max-epochs 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

from clestim.benchmark import BenchmarkConfig, run_benchmark


def one(config, n_jobs: int, cores: int) -> float:
    """Seconds to run the grid with ``n_jobs`` jobs of ``cores // n_jobs`` threads."""
    threads = max(1, cores // n_jobs)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # inherited by the joblib workers
    torch.set_num_threads(threads)  # n_jobs=1 runs in this process
    with tempfile.TemporaryDirectory() as results:
        start = time.perf_counter()
        run_benchmark(config, results, n_jobs=n_jobs, progress=False, log=lambda m: None)
        return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-epochs", type=int, default=1)
    parser.add_argument("--methods", default="Naive,ER,LwF,DER")
    args = parser.parse_args(argv)
    config = BenchmarkConfig(datasets=["uci_har"], methods=args.methods.split(","),
                             settings={"norm": ["layer"]}, max_epochs=args.max_epochs)
    n_cells = len(config.cells())
    walls = {1: [], 2: []}
    for r in range(args.repeats):
        for n_jobs in ((1, 2) if r % 2 == 0 else (2, 1)):
            walls[n_jobs].append(one(config, n_jobs, args.cores))
            print(f"repeat {r}: n_jobs {n_jobs} ({max(1, args.cores // n_jobs)} threads each): "
                  f"{n_cells} cells in {walls[n_jobs][-1]:.0f} s = "
                  f"{3600 * n_cells / walls[n_jobs][-1]:.1f} cells/hour", flush=True)
    rates = {n: 3600 * n_cells / float(np.median(w)) for n, w in walls.items()}
    print(f"median cells/hour: n_jobs 1: {rates[1]:.1f}, n_jobs 2: {rates[2]:.1f} "
          f"(ratio {rates[2] / rates[1]:.2f})")


if __name__ == "__main__":
    main()
