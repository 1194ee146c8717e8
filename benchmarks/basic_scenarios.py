"""The basic-scenario experiment of Szadkowski et al. (ICANN 2019) on real MNIST.

Runs SNG, ENS, ENSGEN, ENSGENDEL, ER, DER and LwF on ADD, EXP, INC and SEP with the
MNIST assignments 021 and 197 (``assignment = (C10, C02, third set)`` as
:class:`clestim.BasicScenario` reads it), several seeds, and prints the paper's
Table 3 (overall accuracy) and Table 4 (accuracy per base set after T2) as
mean ± std over seeds, with a figure. ``--methods ENS-present`` adds ENS training
only the units of each task's labels, as the authors' code does.

Every cell (method, scenario, assignment, seed) is a JSON file written atomically
under ``<results>/cells/``; a cell already there is skipped, so a killed run
resumes. The file name carries a hash of the protocol (sizes, epoch caps, latent
draws). A folder holds one protocol: the script stops rather than mix two in one
table, so give another protocol its own ``--results`` folder.

    python benchmarks/basic_scenarios.py --seeds 0 1 2            # run (resumes)
    python benchmarks/basic_scenarios.py --report-only            # tables + figure
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from clestim import DER, ENS, ENSGEN, ENSGENDEL, ER, BasicScenario, LwF, Naive
from clestim.datasets import load_mnist
from clestim.scenarios import BASE_SETS, evaluate_basic_scenario

METHODS = ("SNG", "ENS", "ENSGEN", "ENSGENDEL", "ER", "DER", "LwF")
# not run by default: ENS training only the units of the task's labels (the authors' code)
VARIANTS = ("ENS-present",)
SCENARIOS = ("ADD", "EXP", "INC", "SEP")
ASSIGNMENTS = {"021": (0, 2, 1), "197": (1, 9, 7)}
RESULTS = Path(__file__).parent / "results" / "basic_scenarios"


def make_estimator(method: str, seed: int, args):
    """The paper's networks: MLPs without normalisation on raw pixels, Adam 1e-4."""
    mlp = dict(backbone="mlp", backbone_params={"hidden": (500, 500)}, norm=None,
               input_norm=None, lr=1e-4, max_epochs=args.epochs, random_state=seed)
    if method == "SNG":  # 784-500-500-2, softmax, cross-entropy
        return Naive(**mlp)
    if method == "ER":
        return ER(**mlp)
    if method == "DER":
        return DER(**mlp)
    if method == "LwF":
        return LwF(**mlp)
    if method in ("ENS", "ENS-present"):
        units = "present" if method == "ENS-present" else "all"
        return ENS(max_epochs=args.ens_cap, train_units=units, random_state=seed)
    if method == "ENSGEN":
        return ENSGEN(max_epochs=args.gen_cap, n_generated=args.n_generated, random_state=seed)
    if method == "ENSGENDEL":
        return ENSGENDEL(max_epochs=args.gen_cap, n_generated=args.n_generated,
                         random_state=seed)
    raise ValueError(f"unknown method {method!r}; choose from {METHODS + VARIANTS}")


def protocol(args) -> dict:
    return {"n_train": args.n_train, "epochs": args.epochs, "ens_cap": args.ens_cap,
            "gen_cap": args.gen_cap, "n_generated": args.n_generated}


def cell_path(folder: Path, method, scenario, assignment, seed, proto) -> Path:
    digest = hashlib.sha1(json.dumps(proto, sort_keys=True).encode()).hexdigest()[:8]
    return folder / "cells" / f"{method}_{scenario}_{assignment}_s{seed}_{digest}.json"


def subsample(X, y, digits, n, seed):
    """At most ``n`` samples of each digit (all of them when n is None)."""
    rng = np.random.RandomState(seed)
    idx = [rng.permutation(np.flatnonzero(y == d))[:n] for d in digits]
    idx = np.sort(np.concatenate(idx))
    return X[idx], y[idx]


def run_cell(method, scenario, assignment, seed, data, args) -> dict:
    digits = ASSIGNMENTS[assignment] if scenario != "ADD" else ASSIGNMENTS[assignment][:2]
    Xtr, ytr = subsample(data.X_train, data.y_train, digits, args.n_train, seed)
    Xte, yte = subsample(data.X_test, data.y_test, digits, None, seed)
    sc = BasicScenario(scenario, assignment=digits)
    cpu = time.process_time()
    frame = evaluate_basic_scenario(make_estimator(method, seed, args), sc, Xtr, ytr, Xte, yte)
    row = frame.iloc[0].to_dict()
    row["cpu_time"] = time.process_time() - cpu  # CPU seconds of this process (1 thread)
    row.update(method=method, assignment=assignment, seed=seed, protocol=protocol(args))
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}


def write_atomic(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=1, default=float))
    os.replace(tmp, path)


def load_cells(folder: Path) -> pd.DataFrame:
    rows = [json.loads(p.read_text()) for p in sorted((folder / "cells").glob("*.json"))]
    return pd.DataFrame(rows)


def _mean_std(values: pd.Series) -> str:
    values = values.dropna()
    if not len(values):
        return ""
    return f"{values.mean():.2f} ± {values.std(ddof=0):.2f} ({len(values)})"


def tables(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 3 (T1 and T2 columns after T2, and T1 after T1) and Table 4 (base sets)."""
    keys = ["assignment", "scenario", "method"]
    order = {m: i for i, m in enumerate(METHODS + VARIANTS)}
    cells = cells.assign(_o=cells["method"].map(order)).sort_values(["assignment", "scenario",
                                                                      "_o"])
    group = cells.groupby(keys, sort=False)
    t3 = group[["T1 after T1", "T1 after T2", "T2 after T2"]].agg(_mean_std).reset_index()
    t4 = group[list(BASE_SETS)].agg(_mean_std).reset_index()
    t4 = t4.loc[:, (t4 != "").any(axis=0)]
    return t3, t4


def figure(cells: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(a, s) for a in ASSIGNMENTS for s in SCENARIOS]
    fig, axes = plt.subplots(2, 4, figsize=(16, 6.5), sharey=True)
    methods = [m for m in METHODS + VARIANTS if m in set(cells["method"])]
    width = 0.8 / max(len(methods), 1)
    for ax, (assignment, scenario) in zip(axes.flat, panels):
        sub = cells[(cells["assignment"] == assignment) & (cells["scenario"] == scenario)]
        sets = [b for b in BASE_SETS if b in sub and sub[b].notna().any()]
        for i, m in enumerate(methods):
            rows = sub[sub["method"] == m]
            if not len(rows):
                continue
            means = [rows[b].mean() for b in sets]
            stds = [rows[b].std(ddof=0) for b in sets]
            ax.bar(np.arange(len(sets)) + i * width, means, width, yerr=stds, label=m,
                   capsize=2)
        ax.set_xticks(np.arange(len(sets)) + 0.4 - width / 2, sets)
        ax.set_title(f"{scenario}-{assignment}")
        ax.set_ylim(0, 1.05)
    axes[0, 0].set_ylabel("accuracy after T2")
    axes[1, 0].set_ylabel("accuracy after T2")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(methods))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def check_one_protocol(cells: pd.DataFrame, folder: Path, proto: dict | None = None) -> None:
    """Stop when ``folder`` holds cells of several protocols (or of another than
    ``proto``): its tables would average them."""
    found = list(cells["protocol"]) if len(cells) else []
    protocols = {json.dumps(p, sort_keys=True) for p in found + ([proto] if proto else [])}
    if len(protocols) > 1:
        raise SystemExit(f"{folder} would hold cells of {len(protocols)} protocols "
                         f"({'; '.join(sorted(protocols))}): its tables would average them. "
                         "Keep one protocol per --results folder.")


def report(folder: Path) -> str:
    cells = load_cells(folder)
    if not len(cells):
        return "no cells yet"
    check_one_protocol(cells, folder)
    t3, t4 = tables(cells)
    text = ["## Table 3: overall accuracy (mean ± std over seeds, (n seeds))", "",
            t3.to_markdown(index=False), "",
            "## Table 4: accuracy per base set after T2, against its T2 label", "",
            t4.to_markdown(index=False), "",
            "## Wall time per cell (s, mean over seeds; the machine was shared)", "",
            cells.groupby(["method", "scenario"])["wall_time"].mean().unstack().round(1)
            .to_markdown(), ""]
    if "cpu_time" in cells:
        text += ["## CPU time per cell (s, one thread, mean over seeds)", "",
                 cells.groupby(["method", "scenario"])["cpu_time"].mean().unstack().round(1)
                 .to_markdown(), ""]
    (folder / "table.md").write_text("\n".join(text))
    cells.drop(columns=["protocol"]).to_csv(folder / "cells.csv", index=False)
    figure(cells, folder / "base_sets.png")
    return "\n".join(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", nargs="+", default=list(METHODS),
                   choices=METHODS + VARIANTS, metavar="METHOD")
    p.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    p.add_argument("--assignments", nargs="+", default=list(ASSIGNMENTS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--n-train", type=int, default=None,
                   help="training samples per base set (default: all, about 6000)")
    p.add_argument("--epochs", type=int, default=20, help="max epochs per task (SNG, ER, DER, LwF)")
    p.add_argument("--ens-cap", type=int, default=1000, help="ENS epoch cap M (paper: 1000)")
    p.add_argument("--gen-cap", type=int, default=10, help="ENSGEN(DEL) epoch cap M (paper: 10)")
    p.add_argument("--n-generated", type=int, default=1000, help="latent draws per label")
    p.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA"))
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    if not args.report_only:
        proto = protocol(args)
        check_one_protocol(load_cells(args.results), args.results, proto)
        data = load_mnist(args.data_home)
        for seed in args.seeds:
            for assignment in args.assignments:
                for scenario in args.scenarios:
                    for method in args.methods:
                        path = cell_path(args.results, method, scenario, assignment, seed, proto)
                        if path.exists():
                            continue
                        start = time.perf_counter()
                        row = run_cell(method, scenario, assignment, seed, data, args)
                        write_atomic(path, row)
                        print(f"{method} {scenario}-{assignment} seed {seed}: "
                              f"T1 {row['T1 after T2']:.3f} T2 {row['T2 after T2']:.3f} "
                              f"({time.perf_counter() - start:.0f} s)", flush=True)
    print(report(args.results))


if __name__ == "__main__":
    sys.exit(main())
