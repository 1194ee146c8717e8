"""Tables and plots of a benchmark results folder (``clestim report``).

Writes, for the cells in ``RESULTS/cells``:

* ``table.md`` and ``table.csv``: mean ± 95% CI of A_T, F_T and A_cur (percent)
  per dataset, setting and method, laid out like Table 3 of TSCIL (Qiao et al.
  2024), with the paper's published numbers and our difference beside them where
  the paper has the dataset;
* ``average_accuracy_<dataset>_<setting>.png``: the A_i evolution of every method
  with a CI band over runs (the paper's Figure 2);
* ``accuracy_matrix_<dataset>_<setting>_<method>.png``: heatmaps of the mean
  accuracy matrix;
* ``memory_budget_<dataset>_<setting>.png``, where cells differ only in their
  memory budget: A_T against the budget (the paper's Section 5.1).

A method run with fixed parameters (``--set``) or tuned (``--tune``) is its own
column, labelled with them. The paper's numbers come from
:func:`clestim.reference_results.published`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .benchmark import (
    available_methods,
    cell_params,
    load_results,
    summary_frame,
    variant_label,
)
from .evaluation import MIN_RUNS_FOR_CI, interval_bounds
from .reference_results import published

METRICS = ("A_T", "F_T", "A_cur")


def _slug(text: str) -> str:
    import re

    safe = "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text)
    return re.sub("_+", "_", safe).strip("_")


def _label(method: str, variant: str) -> str:
    return f"{method} ({variant})" if variant else method


def method_label(record: dict) -> str:
    """The method and its variant, as the table's column: 'ER (memory_subjects=2)'."""
    return _label(record["method"], variant_label(record))


def report_frame(records: list[dict]):
    """The summary frame with the paper's mean, CI and our difference beside ours."""
    frame = summary_frame(records)
    by_row = {(r["dataset"], r["setting"], r["method"], variant_label(r)): r for r in records}
    rows = [by_row[key] for key in
            zip(frame["dataset"], frame["setting"], frame["method"], frame["variant"])]
    for metric in METRICS:
        paper = [
            published(r["dataset"], r["method"], r["settings"], cell_params(r)).get(
                metric, (np.nan, np.nan))
            for r in rows
        ]
        frame[f"paper_{metric}"] = [p[0] for p in paper]
        frame[f"paper_{metric}_ci"] = [p[1] for p in paper]
        frame[f"diff_{metric}"] = frame[metric] - frame[f"paper_{metric}"]
        lo, hi = interval_bounds(frame[metric], frame[f"{metric}_ci"])
        frame[f"{metric}_lo"], frame[f"{metric}_hi"] = lo, hi
        frame[f"flag_{metric}"] = [
            paper_flag(m, low, high, p, p_ci)
            for m, low, high, p, p_ci in zip(frame[metric], lo, hi, frame[f"paper_{metric}"],
                                             frame[f"paper_{metric}_ci"])
        ]
    return frame


#: Marks beside a cell: our interval misses the paper's / our mean lies outside the
#: paper's interval (though the intervals overlap) / fewer runs than MIN_RUNS_FOR_CI.
DISAGREES, OUTSIDE, FEW_RUNS = "✗", "~", "†"


def paper_flag(mean, low, high, paper, paper_ci) -> str:
    """:data:`DISAGREES` when ``[low, high]`` does not overlap ``paper ± paper_ci``,
    :data:`OUTSIDE` when only ``mean`` lies outside it, '' otherwise (or no paper value)."""
    if np.isnan(paper):
        return ""
    if high < paper - paper_ci or low > paper + paper_ci:
        return DISAGREES
    return OUTSIDE if abs(mean - paper) > paper_ci else ""


def _ours(row, metric) -> str:
    """'85.0 ± 3.1'; the clipped bounds '85.0 [21.5, 100.0]' where the interval
    leaves the metric's range; † for an interval of fewer than MIN_RUNS_FOR_CI runs
    (one run shows none)."""
    mean, half = row[metric], row[f"{metric}_ci"]
    low, high = row[f"{metric}_lo"], row[f"{metric}_hi"]
    text = f"{mean:.1f}"
    if row["runs"] > 1:  # one run has no interval
        clipped = not np.isclose([low, high], [mean - half, mean + half]).all()
        text += f" [{low:.1f}, {high:.1f}]" if clipped else f" ± {half:.1f}"
    return text + (FEW_RUNS if 1 < row["runs"] < MIN_RUNS_FOR_CI else "")


LEGEND = (
    f"{FEW_RUNS}: fewer than {MIN_RUNS_FOR_CI} runs, the interval is too wide to mean much "
    "(one run shows none). "
    "[low, high]: the interval clipped to the metric's range [0, 100]. "
    f"{DISAGREES}: our interval does not overlap the paper's; "
    f"{OUTSIDE}: the intervals overlap but our mean lies outside the paper's interval.\n"
)


def markdown_table(frame) -> str:
    """Table 3 layout: per dataset and setting, metrics as rows and methods as columns."""
    lines = []
    for (dataset, setting), block in frame.groupby(["dataset", "setting"], sort=True):
        methods = [_label(m, v) for m, v in zip(block["method"], block["variant"])]
        runs = sorted(set(block["runs"]))
        lines += [f"### {dataset} ({setting}; runs: {', '.join(map(str, runs))})", ""]
        lines.append("| metric | " + " | ".join(methods) + " |")
        lines.append("|---" * (len(methods) + 1) + "|")
        for metric in METRICS:
            cells = []
            for _, row in block.iterrows():
                ours = _ours(row, metric)
                if not np.isnan(row[f"paper_{metric}"]):
                    ours += (
                        f" (paper {row[f'paper_{metric}']:.1f} ± {row[f'paper_{metric}_ci']:.1f},"
                        f" Δ {row[f'diff_{metric}']:+.1f}){row[f'flag_{metric}']}"
                    )
                cells.append(ours)
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write_report(results, out=None) -> list[Path]:
    """Write the tables and plots of ``results`` into ``out`` (default: ``results``)."""
    from .plotting import plot_accuracy_matrix, plot_average_accuracy, plot_memory_budget

    records = load_results(results)
    if not records:
        raise ValueError(f"{results} has no finished cells to report")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    frame = report_frame(records)
    written = [out / "table.md", out / "table.csv"]
    header = ("# clestim benchmark\n\nMean ± 95% CI (t distribution) over runs, in percent. "
              + LEGEND + "\n")
    written[0].write_text(header + markdown_table(frame))
    frame.to_csv(written[1], index=False)
    groups = {}
    for r in records:
        groups.setdefault((r["dataset"], r["setting"]), {}).setdefault(method_label(r), []).append(
            np.asarray(r["accuracy_matrix"], dtype=float)
        )
    for (dataset, setting), methods in sorted(groups.items()):
        ax = plot_average_accuracy(methods)
        ax.set_title(f"{dataset} ({setting})")
        path = out / f"average_accuracy_{_slug(dataset)}_{_slug(setting)}.png"
        ax.figure.savefig(path, dpi=120)
        written.append(path)
        for method, matrices in sorted(methods.items()):
            ax = plot_accuracy_matrix(np.mean(matrices, axis=0))
            ax.set_title(f"{method} on {dataset}")
            path = out / f"accuracy_matrix_{_slug(dataset)}_{_slug(setting)}_{_slug(method)}.png"
            ax.figure.savefig(path, dpi=120)
            written.append(path)
    for (dataset, setting), curves in sorted(_budget_curves(records).items()):
        ax = plot_memory_budget(curves)
        ax.set_title(f"{dataset} ({setting})")
        path = out / f"memory_budget_{_slug(dataset)}_{_slug(setting)}.png"
        ax.figure.savefig(path, dpi=120)
        written.append(path)
    return written


def _budget_percent(value) -> float | None:
    """A memory_size setting in percent of the training samples, where it is one."""
    if value == "tscil":
        return 5.0
    if isinstance(value, str) and value.endswith("%"):
        return float(value[:-1])
    if isinstance(value, float):
        return 100 * value
    return None  # a count: not comparable across datasets


def _budget_curves(records) -> dict:
    """``{(dataset, other settings): {method: {percent: [A_T, ...]}}}`` for every group
    of cells that differ only in their memory budget (two budgets or more)."""
    methods = available_methods()
    curves = {}
    for r in records:
        settings = dict(r["settings"])
        has_memory = "memory_size" in methods[r["method"]]._get_param_names()
        # a replay cell without the setting ran with TSCIL's budget (make_estimator)
        percent = _budget_percent(settings.pop("memory_size", "tscil" if has_memory else None))
        if percent is None:
            continue
        rest = ", ".join(f"{k}={v}" for k, v in settings.items()) or "default"
        method = method_label(r)
        curves.setdefault((r["dataset"], rest), {}).setdefault(method, {}).setdefault(
            percent, []).append(100 * r["metrics"]["average_accuracy"])
    return {key: {m: points for m, points in methods.items() if len(points) > 1}
            for key, methods in curves.items()
            if any(len(points) > 1 for points in methods.values())}
