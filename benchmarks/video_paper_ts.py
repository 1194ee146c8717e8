"""Tables 1 and 2 of the video continual-learning paper (Villa et al. 2022) on
time series, with the fixed TaskPool protocol.

The classes are grouped once into a pool of pairs and ``--problems`` problems of
``--n-tasks`` tasks are drawn once from seed 0 (:class:`clestim.TaskPool`); every
method learns the same problems with the estimator seeded ``1234 + problem``.
Each problem reports, after the last task, the class-incremental accuracy
(C-IL: predictions over all classes, averaged over tasks) and the task-incremental
accuracy (T-IL: predictions within each task's classes), and the memory in
elements and bytes (``memory_nbytes_``). Tables are mean ± std over problems, as
the paper's. Backbone: TSCIL's 1D-CNN with LayerNorm and input LN; buffers are
counts (200 for Table 1). As in the paper, each class gives 100 training and 30
test samples (``--train-per-class``, ``--test-per-class``; drawn once, seed 0).
Each finished (method, problem) is written at once to
``OUT/cells/``; running again skips it, so a run can stop anywhere and resume.

Usage::

    python benchmarks/video_paper_ts.py table1 --dataset uci_har --n-tasks 3
    python benchmarks/video_paper_ts.py table1 --dataset dsa --n-tasks 5
    python benchmarks/video_paper_ts.py table2 --dataset uci_har --n-tasks 3
    python benchmarks/video_paper_ts.py summary
    # a subset of the methods, elsewhere (e.g. with more epochs)
    python benchmarks/video_paper_ts.py table1 --dataset dsa --n-tasks 5 --methods DER,ER \
        --max-epochs 20 --problems 4 --out benchmarks/results/video_paper_ts/epochs20
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

import clestim
from clestim.benchmark import memory_label, write_json_atomic
from clestim.evaluation import evaluate_stream
from clestim.reference_results import TSCIL_DROPOUT

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "video_paper_ts"
TABLE1 = ["DERpp", "DER", "ER", "FDR", "HAL", "GSS", "AGEM", "LwF", "GEM", "EWC"]


def table1():
    return [(m, m, {"memory_size": 200} if m not in ("LwF", "EWC") else {}) for m in TABLE1]


def table2_label(method, size, delta=None) -> str:
    """The label of a Table 2 cell; ``delta=None`` is the cell without the CDR gate."""
    return f"{method} {size} delta={delta or '-'}"


def table2():
    cells = []
    for method in ("DERpp", "DER"):
        for size in (500, 200, 100):
            for delta in (None, 0.6, 0.7, 0.8):
                gate = {} if delta is None else {"memory_gate": "confidence",
                                                 "confidence_threshold": delta}
                cells.append((table2_label(method, size, delta), method,
                              {"memory_size": size, **gate}))
    return cells


def subsample(X, y, per_class, seed=0):
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), min(per_class, (y == c).sum()),
                                     replace=False) for c in np.unique(y)])
    idx.sort()
    return X[idx], y[idx]


def evaluate_problem(est, stream, X, y, X_test, y_test) -> dict:
    """Learn one problem; its C-IL and T-IL accuracy after the last task and memory."""
    start = time.perf_counter()
    result = evaluate_stream(est, stream, X, y, X_test, y_test, return_estimator=True)
    fitted = result.estimator
    til = [np.mean(fitted.predict(X_test[idx], task=j) == y_test[idx])
           for j, idx in enumerate(stream.task_indices(y_test))]
    return {"task_classes": [np.asarray(c).tolist() for c in result.task_classes],
            "C-IL": float(result.metrics["average_accuracy"]),
            "T-IL": float(np.mean(til)),
            "memory_nbytes": result.memory_nbytes,
            "memory_elements": result.memory_elements,
            "wall_s": time.perf_counter() - start}


def mean_std(records, key) -> str:
    """``mean ± std`` (sample std; 0 for one record) of ``100 * record[key]``."""
    v = 100 * np.array([r[key] for r in records])
    return f"{v.mean():.1f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.1f}"


def buffer_label(records) -> str:
    """The mean buffer as the paper writes it, ``'200 (0.9 GB)'``; '-' without one."""
    nbytes = [r["memory_nbytes"] for r in records if r["memory_nbytes"] is not None]
    if not nbytes:
        return "-"
    return memory_label(np.mean([r["memory_elements"] for r in records]), np.mean(nbytes))


def run(args, cells):
    from clestim import TaskPool
    from clestim.datasets import load_dataset

    data = load_dataset(args.dataset, data_home=args.data_home)
    X, y = subsample(data.X_train, data.y_train, args.train_per_class)
    X_test, y_test = subsample(data.X_test, data.y_test, args.test_per_class)
    pool = TaskPool(classes_per_task=2, n_tasks=args.n_tasks, n_problems=args.problems,
                    random_state=0)
    out = Path(args.out) / "cells"
    out.mkdir(parents=True, exist_ok=True)
    for e, stream in enumerate(pool.problems()):
        for label, method, params in cells:
            key = f"{args.table}__{args.dataset}__{label.replace(' ', '_')}__p{e}"
            if (out / f"{key}.json").exists():
                continue
            est = getattr(clestim, method)(
                max_epochs=args.max_epochs, dropout=TSCIL_DROPOUT.get(args.dataset, 0.0),
                random_state=1234 + e, **params)
            record = {"table": args.table, "dataset": args.dataset, "label": label,
                      "method": method, "params": params, "problem": e,
                      **evaluate_problem(est, stream, X, y, X_test, y_test),
                      "max_epochs": args.max_epochs}
            write_json_atomic(out / f"{key}.json", record)
            print(f"{key}: C-IL {100 * record['C-IL']:.1f} T-IL {100 * record['T-IL']:.1f} "
                  f"({record['wall_s']:.0f} s)", flush=True)


def load_cells(out) -> list[dict]:
    """The records of ``OUT/cells/*.json``."""
    return [json.loads(p.read_text()) for p in sorted((Path(out) / "cells").glob("*.json"))]


def write_table(out, header, rows) -> None:
    """Write and print ``OUT/table.md``: a markdown table of ``header`` and ``rows``."""
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    text = "\n".join(lines) + "\n"
    (Path(out) / "table.md").write_text(text)
    print(text)


def paired_gain(group, ungated) -> str:
    """Mean C-IL gain (points) of a CDR cell over the same problems without the gate."""
    base = {r["problem"]: r["C-IL"] for r in ungated}
    gains = [100 * (r["C-IL"] - base[r["problem"]]) for r in group if r["problem"] in base]
    return f"{np.mean(gains):+.1f}" if gains else ""


def summary(args):
    groups = {}
    for r in load_cells(args.out):
        groups.setdefault((r["table"], r["dataset"], r["label"]), []).append(r)
    order = {label: i for i, (label, _, _) in enumerate(table1() + table2())}
    rows = []
    for (table, dataset, label), group in sorted(
            groups.items(), key=lambda kv: (kv[0][:2], order[kv[0][2]])):
        params = group[0]["params"]
        gain = ""
        if "memory_gate" in params:
            ungated = table2_label(group[0]["method"], params["memory_size"])
            gain = paired_gain(group, groups.get((table, dataset, ungated), []))
        rows.append((table, dataset, label, buffer_label(group), len(group),
                     mean_std(group, "C-IL"), mean_std(group, "T-IL"), gain))
    write_table(args.out, ["table", "dataset", "method", "buffer", "problems", "C-IL", "T-IL",
                           "C-IL gain of CDR (paired)"], rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=["table1", "table2", "summary"])
    parser.add_argument("--dataset", default="uci_har")
    parser.add_argument("--problems", type=int, default=10)
    parser.add_argument("--n-tasks", type=int, default=3)
    parser.add_argument("--max-epochs", type=int, default=5)
    parser.add_argument("--train-per-class", type=int, default=100)
    parser.add_argument("--test-per-class", type=int, default=30)
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--methods", default=None,
                        help="comma-separated subset of the table's methods (default: all)")
    args = parser.parse_args(argv)
    if args.table == "summary":
        return summary(args)
    cells = table1() if args.table == "table1" else table2()
    if args.methods:
        chosen = args.methods.split(",")
        unknown = set(chosen) - {method for _, method, _ in cells}
        if unknown:
            parser.error(f"--methods: {sorted(unknown)} not in {args.table}")
        cells = [cell for cell in cells if cell[1] in chosen]
    run(args, cells)


if __name__ == "__main__":
    main()
