"""Analogues of Tables 1 and 2 of the SLU continual-learning paper (DMI, KD, task orders).

Table 1: UCI-HAR and DSA (LayerNorm), rows Naive, ER (random memory, 1%),
ER (herding, 1%), ER + feature KD, ER + logit KD, ER + both KDs. Table 2: DSA,
ER with the frequency, close-semantic and diverse-semantic task orders. Columns:
last-ACC, BWT (GEM's last row and the all-pairs mean), DMI (stability,
plasticity, generalisation) and FWT where it is defined.

Each (table, dataset, row, run) is one cell, written to ``OUT/cells/*.json`` as it
finishes; finished cells are skipped, so the script can be stopped and resumed.
Cells run in the order run 0 of everything, then run 1, ..., so a stopped run
still covers every row. ``--summarise`` writes ``OUT/table.md`` and the DMI /
accuracy heatmaps from the cells.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/slu_dmi.py --data-home ../shared/data \
        --max-epochs 5 --runs 3 --train-per-class 100 --test-per-class 60
    python benchmarks/slu_dmi.py --summarise
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "slu_dmi"

TABLE1_ROWS = {
    "Naive": ("Naive", {}),
    "ER (random, 1%)": ("ER", {}),
    "ER (herding, 1%)": ("Herding", {}),
    "ER + feature KD": ("ER", {"kd": "features"}),
    "ER + logit KD": ("ER", {"kd": "logits"}),
    "ER + both KD": ("ER", {"kd": "both"}),
}
TABLE2_ORDERS = ("frequency", "close_semantic", "diverse_semantic")
COLUMNS = {
    "last_accuracy": "last-ACC",
    "backward_transfer_gem": "BWT (GEM)",
    "backward_transfer_all_pairs": "BWT (all pairs)",
    "dmi_stability": "DMI stab",
    "dmi_plasticity": "DMI plas",
    "dmi_generalisation": "DMI gen",
    "forward_transfer": "FWT",
}


def cells(runs, datasets):
    """(key, table, dataset, row, run) of every cell, run-major."""
    out = []
    for run in range(runs):
        for dataset in datasets:
            for row in TABLE1_ROWS:
                out.append((f"t1__{dataset}__{_slug(row)}__run{run}", 1, dataset, row, run))
        if "dsa" in datasets:
            for order in TABLE2_ORDERS:
                out.append((f"t2__dsa__{order}__run{run}", 2, "dsa", order, run))
    return out


def _slug(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text).strip("_")


_DATA = {}


def _load(load_dataset, dataset, data_home):
    if dataset not in _DATA:
        _DATA[dataset] = load_dataset(dataset, data_home=data_home)
    return _DATA[dataset]


def _subset(X, y, per_class):
    """The first ``per_class`` samples of each class in a fixed random order (seed 0);
    everything with None."""
    if per_class is None:
        return X, y
    order = np.random.RandomState(0).permutation(len(y))
    keep = np.sort(np.concatenate([order[y[order] == c][:per_class] for c in np.unique(y)]))
    return X[keep], y[keep]


def run_cell(table, dataset, row, run, args):
    import torch

    from clestim import ER, Herding, Naive
    from clestim.datasets import load_dataset
    from clestim.evaluation import evaluate_stream
    from clestim.reference_results import TSCIL_DROPOUT
    from clestim.streams import ClassIncremental, StreamPart

    torch.set_num_threads(args.threads)
    data = _load(load_dataset, dataset, args.data_home)
    X_train, y_train = _subset(data.X_train, data.y_train, args.train_per_class)
    X_test, y_test = _subset(data.X_test, data.y_test, args.test_per_class)
    seed = 1234 + run
    if table == 1:
        full = ClassIncremental(classes_per_task=2, random_state=seed, remainder="drop")
        n_tasks = len(np.unique(data.y_train)) // 2
        stream = StreamPart(full, part="experiment") if n_tasks > 4 else full
        method, extra = TABLE1_ROWS[row]
    else:  # the whole 9-task stream, so that the semantic groups stay whole
        stream = ClassIncremental(classes_per_task=2, random_state=seed, order=row)
        method, extra = "ER", {}
    # the budget is 1% of the whole stream's training samples, as at full scale
    # (also when the tasks are trained on a subset)
    n_stream = sum(len(idx) for idx in stream.split(data.X_train, data.y_train))
    cls = {"Naive": Naive, "ER": ER, "Herding": Herding}[method]
    params = dict(
        max_epochs=args.max_epochs,
        random_state=seed,
        dropout=TSCIL_DROPOUT[dataset],
        norm="layer",
        **extra,
    )
    if method != "Naive":
        params["memory_size"] = max(1, round(0.01 * n_stream))
    est = cls(**params)
    start = time.perf_counter()
    res = evaluate_stream(est, stream, X_train, y_train, X_test, y_test, dmi=True)
    return {
        "table": table,
        "dataset": dataset,
        "row": row,
        "run": run,
        "method": method,
        "params": {k: v for k, v in params.items()},
        "train_per_class": args.train_per_class,
        "test_per_class": args.test_per_class,
        "wall_s": time.perf_counter() - start,
        **res.to_dict(),
    }


def summarise(out: Path):
    from clestim.evaluation import confidence_interval
    from clestim.plotting import plot_dmi_matrix

    records = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    lines = [
        "# SLU DMI benchmark (Tables 1 and 2 analogues)",
        "",
        "Mean ± 95% CI (t distribution) over runs, in percent. FWT is NaN where it is "
        "undefined (class-incremental head that grows per task).",
        "",
    ]
    blocks = {}
    for r in records:
        blocks.setdefault((r["table"], r["dataset"]), {}).setdefault(r["row"], []).append(r)
    order = list(TABLE1_ROWS) + list(TABLE2_ORDERS)
    for (table, dataset), rows in sorted(blocks.items()):
        first = next(iter(rows.values()))[0]
        lines += [
            f"## Table {table}: {dataset} (LN, max_epochs {first['params']['max_epochs']}, "
            f"train/test samples per class: {first.get('train_per_class') or 'all'}/"
            f"{first.get('test_per_class') or 'all'})",
            "",
        ]
        lines.append("| row | runs | " + " | ".join(COLUMNS.values()) + " |")
        lines.append("|---" * (len(COLUMNS) + 2) + "|")
        for row in sorted(rows, key=order.index):
            rs = rows[row]
            cells_ = []
            for key in COLUMNS:
                vals = np.array([r["metrics"].get(key, np.nan) for r in rs], dtype=float) * 100
                if np.isnan(vals).all():
                    cells_.append("n/a")
                    continue
                m, h = confidence_interval(vals)
                cells_.append(f"{m:.1f} ± {h:.1f}" if len(vals) > 1 else f"{m:.1f}")
            lines.append(f"| {row} | {len(rs)} | " + " | ".join(cells_) + " |")
            A = np.mean([r["accuracy_matrix"] for r in rs], axis=0)
            D = np.mean([r["dmi_matrix"] for r in rs], axis=0)
            fig = plot_dmi_matrix(D, accuracy_matrix=A)
            fig.suptitle(f"{row} on {dataset}")
            fig.savefig(out / f"dmi_{table}_{dataset}_{_slug(row)}.png", dpi=100)
        lines.append("")
    (out / "table.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--data-home", default=None)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--max-epochs", type=int, default=100)
    p.add_argument("--datasets", default="uci_har,dsa")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-per-class", type=int, default=None,
                   help="a fixed class-balanced subset of the training set (all by default)")
    p.add_argument("--test-per-class", type=int, default=None)
    p.add_argument("--shard", default="0/1",
                   help="i/n: run every n-th cell from the i-th (parallel workers)")
    p.add_argument("--summarise", action="store_true")
    args = p.parse_args(argv)
    if args.summarise:
        return summarise(args.out)
    (args.out / "cells").mkdir(parents=True, exist_ok=True)
    i, n = map(int, args.shard.split("/"))
    for key, table, dataset, row, run in cells(args.runs, args.datasets.split(","))[i::n]:
        path = args.out / "cells" / f"{key}.json"
        if path.exists():
            continue
        record = run_cell(table, dataset, row, run, args)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)
        print(f"{key}: {record['wall_s']:.0f} s, last-ACC {record['metrics']['last_accuracy']:.3f}",
              flush=True)


if __name__ == "__main__":
    main()
