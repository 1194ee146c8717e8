"""The ``clestim`` command: ``bench``, ``report`` and ``datasets``.

Examples::

    clestim bench --datasets basic_motions --methods Naive,ER --max-epochs 30
    clestim bench --config grid.toml --results results/ --n-jobs 2
    clestim report results/
    clestim datasets
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def _value(text: str):
    """A command-line value as int, float, bool, a JSON object or str."""
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{text!r} is not a JSON object: {exc}") from None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def _list(text: str) -> list:
    return [_value(v) for v in text.split(",") if v]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clestim", description="Continual-learning benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True)

    bench = sub.add_parser("bench", help="run a grid of datasets x methods x settings x runs")
    bench.add_argument("--config", help="TOML file with the grid (flags override it)")
    bench.add_argument("--datasets", type=lambda s: s.split(","),
                       help="comma-separated names (see `clestim datasets`)")
    bench.add_argument("--methods", type=lambda s: s.split(","),
                       help="comma-separated estimator names, e.g. Naive,LwF,ER,DER; "
                       "reported in this order")
    bench.add_argument("--runs", type=int,
                       help="repetitions per cell, each with its own class order and seed "
                       "(default 1; 3 or more for a meaningful CI)")
    bench.add_argument("--seed", type=int, help="run r uses seed + r (default 1234)")
    for name, example in (("norm", "layer,batch"), ("input-norm", "layer,instance,none"),
                          ("memory-size", "tscil,500,0.1,5%%"),
                          ("classifier", "softmax,bce,cosine,ncm"),
                          ("backbone", "cnn,transformer,mlp")):
        bench.add_argument(f"--{name}", type=_list,
                           help=f"comma-separated values to cross, e.g. {example}")
    bench.add_argument("--max-epochs", type=int,
                       help="epochs per task, with early stopping (default 100)")
    bench.add_argument("--problems", type=int,
                       help="fixed TaskPool protocol: this many problems drawn once (Villa 2022)")
    bench.add_argument("--n-tasks", type=int, help="tasks per fixed problem")
    bench.add_argument("--lr-schedule",
                       metavar="{step15,step10,onecycle,tscil-step15,tscil-step10,none}",
                       help="every estimator's LR schedule unless --set or --tune sets it "
                       "(default step15, TSCIL's untuned runs; tscil-*: with each task's "
                       "first epoch at lr/25, as TSCIL's code runs them)")
    bench.add_argument("--holdout", type=_value, metavar="FRACTION",
                       help="training set held out before tasks are cut, and --tune's "
                       "validation set on short streams (default 'tscil': 0.1 on UCI-HAR "
                       "and UWave, else 0)")
    bench.add_argument("--tune", action="store_true", default=None,
                       help="search each method's grid on the validation stream first")
    bench.add_argument("--set", action="append", default=[], metavar="METHOD.PARAM=VALUE",
                       help="a fixed method parameter, e.g. --set LwF.lambda_kd=1e4")
    bench.add_argument("--data-home", help="folder of the benchmark datasets (default: "
                       "$CLESTIM_DATA, $CLESTIM_SHARED_DATA, ../shared/data, ~/.cache/clestim)")
    bench.add_argument("--device", help="torch device, e.g. cpu or cuda (default cpu)")
    bench.add_argument("--precision", choices=("fp32", "bf16", "fp16"),
                       help="mixed precision of every estimator (default: fp32)")
    bench.add_argument("--results", default="clestim_results", help="results folder")
    bench.add_argument("--n-jobs", type=int, default=1, help="cells run in parallel (joblib)")
    bench.add_argument("--threads", type=lambda s: s if s == "auto" else int(s),
                       help="torch threads per cell, part of its protocol (default 1; "
                       "'auto': cores // n-jobs)")
    bench.add_argument("--scheduler", help="Dask scheduler address, or 'local'")
    bench.add_argument("--no-progress", action="store_true",
                       help="no progress bars (on a terminal) or per-cell lines (elsewhere)")

    report = sub.add_parser("report", help="tables and plots of a results folder")
    report.add_argument("results", help="a results folder of clestim bench")
    report.add_argument("--out", help="output folder (default: the results folder)")

    datasets = sub.add_parser("datasets", help="list the datasets and where they are found")
    datasets.add_argument("--data-home", help="folder to look in (default: $CLESTIM_DATA, "
                          "$CLESTIM_SHARED_DATA, ../shared/data, ~/.cache/clestim)")
    return parser


def _config(args):
    from .benchmark import BenchmarkConfig

    values = {}
    if args.config:
        import tomllib

        with open(args.config, "rb") as f:
            values = tomllib.load(f)
    for key in ("datasets", "methods", "runs", "seed", "max_epochs", "tune", "data_home",
                "device", "threads", "precision", "problems", "n_tasks", "holdout"):
        if getattr(args, key) is not None:
            values[key] = getattr(args, key)
    if args.lr_schedule is not None:  # 'none': a constant rate
        values["lr_schedule"] = None if args.lr_schedule.lower() == "none" else args.lr_schedule
    settings = dict(values.get("settings", {}))
    for key in ("norm", "input_norm", "memory_size", "classifier", "backbone"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    values["settings"] = settings
    params = {k: dict(v) for k, v in values.get("params", {}).items()}
    for item in args.set:
        name, sep, value = item.partition("=")
        method, dot, param = name.partition(".")
        if not (sep and dot):
            raise ValueError(f"--set takes METHOD.PARAM=VALUE, got {item!r}")
        params.setdefault(method, {})[param] = _value(value)
    values["params"] = params
    return BenchmarkConfig.from_dict(values)


def bench(args) -> int:
    from .benchmark import run_benchmark, summary_frame

    config = _config(args)
    records = run_benchmark(
        config, args.results, n_jobs=args.n_jobs, scheduler=args.scheduler,
        progress=not args.no_progress, log=lambda msg: print(msg, file=sys.stderr),
    )
    keys = {c.key for c in config.cells()}
    records = [r for r in records if r["key"] in keys]
    order = {m: i for i, m in enumerate(config.methods)}  # as given in --methods
    if config.runs == 1:
        for r in sorted(records, key=lambda r: (r["dataset"], r["setting"], order[r["method"]])):
            A = np.asarray(r["accuracy_matrix"]) * 100
            print(f"\n{r['method']} on {r['dataset']} ({r['setting']}), "
                  f"tasks {r['task_classes']}: accuracy matrix (%), row i = after task i")
            print(np.array2string(A, precision=1, suppress_small=True, floatmode="fixed"))
    frame = summary_frame(records)
    frame = frame.iloc[sorted(range(len(frame)), key=lambda i: (
        frame["dataset"].iat[i], frame["setting"].iat[i], order[frame["method"].iat[i]]))]
    spread = "_std" if config.problems else "_ci"  # the fixed protocol reports the std
    frame = frame.drop(columns=[c for c in frame if c.endswith(("_ci", "_std"))
                                and not (c.endswith(spread) and (frame["runs"] > 1).any())])
    print("\nmean ± std over fixed problems (%)" if config.problems else
          "\nmean ± 95% CI over runs (%)" if config.runs > 1 else "\nmetrics (%)")
    if not config.problems and 1 < config.runs < 3:
        print("(with 2 runs the t-interval is 12.7 standard errors wide: use --runs 3 or "
              "more for a meaningful CI; `clestim report` clips it to [0, 100])")
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return 0


def report(args) -> int:
    from .report import write_report

    for path in write_report(args.results, args.out):
        print(path)
    return 0


def datasets(args) -> int:
    from .datasets import list_datasets

    for name, info in list_datasets(args.data_home).items():
        print(f"{name:16s} {info.get('shape', '')!s:18s} {info.get('n_classes', ''):>3} classes  "
              f"{info.get('where', '')}")
        print(f"{'':16s} {info.get('citation', '')}; licence: {info.get('license', '')}")
    return 0


def main(argv=None) -> int:
    import warnings

    from .benchmark import ResultsWarning

    args = _parser().parse_args(argv)
    show = warnings.showwarning

    def show_warning(message, category, *rest, **kwargs):
        if issubclass(category, ResultsWarning):  # a plain line, no source location
            print(f"clestim {args.command}: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *rest, **kwargs)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            warnings.simplefilter("always", ResultsWarning)
            return {"bench": bench, "report": report, "datasets": datasets}[args.command](args)
    except (ValueError, ConnectionError, FileNotFoundError) as exc:
        print(f"clestim {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
