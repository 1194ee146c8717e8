"""MAS's importance as clestim computes it against TSCIL's code, on the grid's LN cells.

clestim's :class:`~clestim.MAS` differs from TSCIL's ``agents/mas.py`` in two documented
ways (its docstring):

- ``mode``: clestim computes the importance in eval mode; TSCIL in train mode, so on
  DSA (backbone dropout 0.3) every importance batch runs through dropout. On UCI-HAR
  (dropout 0) and with LayerNorm the two modes compute the same numbers.
- ``head``: clestim averages the head rows of the classes just learned like every
  other parameter (``(1 - alpha) * Omega^t``, 0.2 of it); TSCIL copies their
  ``Omega^t`` unscaled, so the last task's class rows are anchored five times harder.

This reruns LN MAS cells of the five-run grid (same protocol, class order, seed; the
untuned ``lambda_reg = 1e3`` unless ``--set`` gives other parameters) with either or
both of TSCIL's choices patched in, and prints one JSON line per run: A_T, F_T, A_cur
and, per task, how much larger the train-mode importance is than the eval-mode one on
the same weights (sum over all parameters)::

    python benchmarks/mas_importance_mode.py --variant train --runs 0 1 2
    python benchmarks/mas_importance_mode.py --variant train+head --runs 0 1 2

``--variant eval`` is clestim's MAS, the grid's cells (``results/tscil_layer``). A tuned
cell's refit is the cell of its ``best_params``, e.g. UCI-HAR's run 4::

    python benchmarks/mas_importance_mode.py --dataset uci_har --variant head --runs 4 \
        --set lambda_reg=10000 --set lr_schedule=onecycle
"""

import argparse
import ast
import json
import time

import torch

from clestim.benchmark import BenchmarkConfig, run_cell
from clestim.methods.regularization import MAS


def install(variant: str, ratios: list) -> None:
    """Patch MAS with TSCIL's importance mode and/or head rule; ``ratios`` collects,
    per task, sum(train-mode importance) / sum(eval-mode importance)."""
    importance, merge = MAS._importance, MAS._merge

    def in_train_mode(est, X, y):
        module = est.module_
        module.eval = module.train  # the method's eval() keeps dropout on, as TSCIL
        try:
            return importance(est, X, y)
        finally:
            del module.eval

    def _importance(est, X, y):
        # both on the same shuffled batches; the one not used leaves every RNG as it was
        used, other = ((in_train_mode, importance) if "train" in variant
                       else (importance, in_train_mode))
        state = est._generator.get_state()
        with torch.random.fork_rng(devices=[]):
            discarded = other(est, X, y)
        est._generator.set_state(state)
        kept = used(est, X, y)
        trained, evaluated = (kept, discarded) if "train" in variant else (discarded, kept)
        ratios.append(float(sum(v.sum() for v in trained.values())
                            / sum(v.sum() for v in evaluated.values())))
        return kept

    def _merge(est, terms, anchors, imp):
        merged = merge(est, terms, anchors, imp)
        if "head" in variant and terms:
            old = terms[0][1]
            for name, value in merged[0][1].items():
                n_old = old[name].shape[0] if name in old else value.shape[0]
                if value.ndim and n_old < value.shape[0]:  # rows of the new classes
                    value[n_old:] = imp[name][n_old:]
        return merged

    MAS._importance, MAS._merge = _importance, _merge


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=["eval", "train", "head", "train+head"],
                        default="train")
    parser.add_argument("--runs", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--dataset", choices=["dsa", "uci_har"], default="dsa")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a MAS parameter, e.g. lambda_reg=1e4 (repeatable)")
    parser.add_argument("--data-home", default="../shared/data")
    parser.add_argument("--max-epochs", type=int, default=100,
                        help="epochs per task (100: the grid's protocol; less for a smoke test)")
    args = parser.parse_args()
    params = {}
    for item in args.set:
        name, _, value = item.partition("=")
        try:
            params[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[name] = value  # a bare string such as onecycle
    config = BenchmarkConfig.from_dict({
        "datasets": [args.dataset], "methods": ["MAS"], "settings": {"norm": ["layer"]},
        "runs": max(args.runs) + 1, "data_home": args.data_home,
        "max_epochs": args.max_epochs, "params": {"MAS": params},
    })
    cells = {cell.run: cell for cell in config.cells()}
    ratios = []
    install(args.variant, ratios)
    for run in args.runs:
        ratios.clear()
        start = time.perf_counter()
        record = run_cell(cells[run], config)
        metrics = record["metrics"]
        print(json.dumps({
            "run": run, "variant": args.variant, "key": record["key"], "params": params,
            "A_T": round(100 * metrics["average_accuracy"], 1),
            "F_T": round(100 * metrics["average_forgetting"], 1),
            "A_cur": round(100 * metrics["learning_accuracy"], 1),
            "train_over_eval_importance": [round(r, 2) for r in ratios],
            "wall_s": round(time.perf_counter() - start),
        }), flush=True)


if __name__ == "__main__":
    main()
