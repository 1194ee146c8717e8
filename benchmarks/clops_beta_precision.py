"""CLOPS with its importances in float64 against float32, clestim's and TSCIL's choice.

TSCIL's ``agents/clops.py`` holds each sample's ``beta`` in a float32 tensor, and so does
clestim's :class:`~clestim.CLOPS`. With the default ``beta_lr = 1e-4`` and batches of 32
a step moves ``beta`` by ``1e-4 * loss / 32``; near 1 float32 resolves steps of about 3e-8
only, so once a sample's loss falls below about 0.01 its ``beta`` stops moving and many
samples share a score (the area under the trajectory). Storage breaks those ties in
random order. In float64 every sample keeps its own score, and storage keeps each class's
samples of lowest cumulative loss.

This runs the LN UCI-HAR CLOPS cell of the five-run grid (same protocol, class order and
seed) with ``beta`` in ``--dtype`` (default float64; float32 is the grid's cell), and
reports A_T, F_T and, per task, how many distinct scores the training samples have in
either precision and how much of each class's stored set both rankings choose (a shadow
trajectory in the other precision takes the same steps)::

    python benchmarks/clops_beta_precision.py --runs 0 1 2 --data-home ../shared/data

Compare with the grid's cells in ``results/tscil_layer`` (``clestim report``).
"""

import argparse
import json
import time
from types import SimpleNamespace

import numpy as np
import torch

from clestim.benchmark import BenchmarkConfig, run_cell
from clestim.methods.clops import CLOPS


class _Precision:
    """Patches CLOPS so that ``beta`` is in ``dtype``, while a shadow in the other
    precision, stepped with the same gradients, gives the other ranking."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.shadow_dtype = torch.float32 if dtype == torch.float64 else torch.float64
        self.tasks = []

    def install(self):
        probe = self
        task_data, track, memory_fields = (
            CLOPS._task_data, CLOPS._track, CLOPS._memory_fields
        )

        def _task_data(est, train, valid):
            out = task_data(est, train, valid)
            n = len(est.beta_)
            est.beta_ = est.beta_.to(probe.dtype)
            # CLOPS's own trajectory state, in the other precision
            est._shadow = SimpleNamespace(
                beta_=torch.ones(n, dtype=probe.shadow_dtype),
                _beta_sum=torch.zeros(n, dtype=torch.float64),
                _beta_first=torch.zeros(n, dtype=torch.float64),
                _beta_count=torch.zeros(n, dtype=torch.long),
            )
            return out

        def _track(est, idx, beta):
            step = beta.double() - est.beta_[idx].double()  # -beta_lr * gradient
            track(est._shadow, idx, est._shadow.beta_[idx].double() + step)
            track(est, idx, beta)

        def _memory_fields(est, X, y, groups, index=None):
            fields = memory_fields(est, X, y, groups, index)
            shadow = CLOPS.importance_scores(est._shadow)
            scores = {
                str(probe.dtype): fields["score"].double().cpu().numpy(),
                str(probe.shadow_dtype): shadow[torch.as_tensor(index)].numpy(),
            }
            probe.tasks.append({"y": y.cpu().numpy(), "scores": scores,
                                "capacity": est.memory_.capacity})
            return fields

        CLOPS._task_data, CLOPS._track, CLOPS._memory_fields = (
            _task_data, _track, _memory_fields
        )

    def summary(self):
        """Per task: distinct scores in each precision, samples, the per-class quota,
        and the share of each class's stored set that both rankings choose."""
        rows, learned = [], 0
        for task in self.tasks:
            classes = np.unique(task["y"])
            learned += len(classes)
            k = task["capacity"] // learned
            (a, b) = task["scores"].values()
            shared = []
            for c in classes:
                m = task["y"] == c
                top_a = set(np.argsort(-a[m], kind="stable")[:k])
                top_b = set(np.argsort(-b[m], kind="stable")[:k])
                shared.append(len(top_a & top_b) / k)
            row = {f"distinct_{name.removeprefix('torch.')}": int(len(np.unique(v)))
                   for name, v in task["scores"].items()}
            row.update(samples=int(len(task["y"])), k_per_class=k,
                       shared=round(float(np.mean(shared)), 3))
            rows.append(row)
        return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--data-home", default="../shared/data")
    parser.add_argument("--max-epochs", type=int, default=100,
                        help="epochs per task (100: the grid's protocol; less for a smoke test)")
    args = parser.parse_args()
    config = BenchmarkConfig.from_dict({
        "datasets": ["uci_har"], "methods": ["CLOPS"], "settings": {"norm": ["layer"]},
        "runs": max(args.runs) + 1, "data_home": args.data_home,
        "max_epochs": args.max_epochs,
    })
    cells = {cell.run: cell for cell in config.cells()}
    probe = _Precision(getattr(torch, args.dtype))
    probe.install()
    for run in args.runs:
        probe.tasks = []
        start = time.perf_counter()
        record = run_cell(cells[run], config)
        metrics = record["metrics"]
        print(json.dumps({
            "run": run, "dtype": args.dtype, "task_classes": record["task_classes"],
            "A_T": round(100 * metrics["average_accuracy"], 1),
            "F_T": round(100 * metrics["average_forgetting"], 1),
            "last_row": [round(100 * a, 1) for a in record["accuracy_matrix"][-1]],
            "tasks": probe.summary(), "wall_s": round(time.perf_counter() - start),
        }), flush=True)


if __name__ == "__main__":
    main()
