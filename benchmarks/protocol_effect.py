"""Paired effect of a protocol change: the same cells (dataset, method, setting, run,
so the same class order and seed) in two results folders, side by side.

    python benchmarks/protocol_effect.py benchmarks/results/tscil_v0/layer \
        benchmarks/results/tscil_layer

prints A_T / F_T of every cell both folders hold, the paired difference (new - old)
and its mean per dataset. Only untuned cells without fixed parameters other than
those both folders share are paired (a variant is its own row).
"""

from __future__ import annotations

import argparse

import numpy as np

from clestim.benchmark import load_results, variant_label


def _cells(folder) -> dict:
    return {(r["dataset"], r["method"], variant_label(r), r["setting"], r["run"]): r
            for r in load_results(folder)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    args = parser.parse_args(argv)
    old, new = _cells(args.old), _cells(args.new)
    both = sorted(old.keys() & new.keys())
    if not both:
        raise SystemExit("the two folders share no cell")
    print("| dataset | method | run | old A_T / F_T | new A_T / F_T | Δ A_T |")
    print("|---|---|---|---|---|---|")
    diffs = {}
    for key in both:
        dataset, method, variant, _, run = key
        a, b = (100 * np.array([c[key]["metrics"]["average_accuracy"],
                                c[key]["metrics"]["average_forgetting"]]) for c in (old, new))
        diffs.setdefault(dataset, []).append(b[0] - a[0])
        name = f"{method} ({variant})" if variant else method
        print(f"| {dataset} | {name} | {run} | {a[0]:.1f} / {a[1]:.1f} | "
              f"{b[0]:.1f} / {b[1]:.1f} | {b[0] - a[0]:+.1f} |")
    for dataset, d in diffs.items():
        print(f"\n{dataset}: {len(d)} paired cells, mean Δ A_T {np.mean(d):+.2f}, "
              f"median {np.median(d):+.2f}, range [{min(d):+.1f}, {max(d):+.1f}]")


if __name__ == "__main__":
    main()
