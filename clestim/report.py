"""Tables and plots of a benchmark results folder (``clestim report``).

Writes, for the cells in ``RESULTS/cells``:

* ``table.md`` and ``table.csv``: mean ± 95% CI of A_T, F_T and A_cur (percent)
  per dataset, setting and method, laid out like Table 3 of TSCIL (Qiao et al.
  2024), with the paper's published numbers and our difference beside them where
  the paper has the dataset; then the hyperparameters every column ran with and
  the machines that computed the cells;
* ``average_accuracy_<dataset>_<setting>.png``: the A_i evolution of every method
  with a CI band over runs (the paper's Figure 2);
* ``accuracy_matrix_<dataset>_<setting>_<method>.png``: heatmaps of the mean
  accuracy matrix; where cells hold a DMI matrix (SLU paper), the table gains
  DMI_stab/plas/gen rows and ``dmi_matrix_<...>.png`` shows it beside the accuracy
  matrix;
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
#: DMI rows of the table (SLU paper), where the cells hold them (``evaluate_stream(dmi=True)``).
DMI_ROWS = {"DMI_stab": "dmi_stability", "DMI_plas": "dmi_plasticity",
            "DMI_gen": "dmi_generalisation"}


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
    _add_dmi(frame, records)
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
    low = row.get(f"{metric}_lo", max(mean - half, 0.0))  # percentages: clip to [0, 100]
    high = row.get(f"{metric}_hi", min(mean + half, 100.0))
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


def _add_dmi(frame, records) -> None:
    """Mean and CI of the DMI scores (percent) per row, where cells hold them."""
    from .evaluation import confidence_interval

    if not any(DMI_ROWS["DMI_stab"] in r["metrics"] for r in records):
        return
    groups = {}
    for r in records:
        key = (r["dataset"], r["setting"], r["method"], variant_label(r))
        groups.setdefault(key, []).append(r)
    keys = zip(frame["dataset"], frame["setting"], frame["method"], frame["variant"])
    values = [groups[key] for key in keys]
    for label, metric in DMI_ROWS.items():
        stats = [confidence_interval([100 * r["metrics"].get(metric, np.nan) for r in group])
                 for group in values]
        frame[label] = [float(m) for m, _ in stats]
        frame[f"{label}_ci"] = [float(h) for _, h in stats]


def markdown_table(frame) -> str:
    """Table 3 layout: per dataset and setting, metrics as rows and methods as columns."""
    lines = []
    for (dataset, setting), block in frame.groupby(["dataset", "setting"], sort=True):
        methods = [_label(m, v) for m, v in zip(block["method"], block["variant"])]
        runs = sorted(set(block["runs"]))
        precisions = ", ".join(sorted(set(block["precision"])))
        lines += [f"### {dataset} ({setting}; runs: {', '.join(map(str, runs))}; "
                  f"precision: {precisions})", ""]
        lines.append("| metric | " + " | ".join(methods) + " |")
        lines.append("|---" * (len(methods) + 1) + "|")
        dmi_rows = tuple(m for m in DMI_ROWS if m in block and block[m].notna().any())
        for metric in METRICS + dmi_rows:
            cells = []
            for _, row in block.iterrows():
                ours = _ours(row, metric)
                if not np.isnan(row.get(f"paper_{metric}", np.nan)):
                    ours += (
                        f" (paper {row[f'paper_{metric}']:.1f} ± {row[f'paper_{metric}_ci']:.1f},"
                        f" Δ {row[f'diff_{metric}']:+.1f}){row[f'flag_{metric}']}"
                    )
                cells.append(ours)
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        if block["memory"].astype(bool).any():  # beside A_T, as '200 (0.9 GB)'
            lines.append("| memory | " + " | ".join(block["memory"]) + " |")
        lines.append("")
    return "\n".join(lines)


#: Parameters that say nothing about a method's configuration (or vary by run by design).
_UNREPORTED = {"random_state", "device"}


def hyperparameters(records: list[dict]) -> str:
    """What every column ran with, from the cells' ``estimator_params``: per dataset
    and setting, the parameters shared by every column on one line, then each
    column's own (``a|b`` where runs differed, as tuned ones do)."""
    blocks = {}
    for r in records:
        blocks.setdefault((r["dataset"], r["setting"]), {}).setdefault(
            method_label(r), []).append(r.get("estimator_params"))
    lines = []
    for (dataset, setting), columns in sorted(blocks.items()):
        lines += [f"### Hyperparameters: {dataset} ({setting})", ""]
        values = {}  # column -> name -> sorted distinct values over its runs
        for column, runs in columns.items():
            if any(p is None for p in runs):
                lines.append(f"- {column}: not recorded "
                             "(cells older than the record of estimator_params)")
                continue
            names = dict.fromkeys(k for p in runs for k in p if k not in _UNREPORTED)
            values[column] = {k: sorted({repr(p.get(k)) for p in runs}) for k in names}
        common = {}
        if values:
            first, *rest = values.values()
            common = {k: v for k, v in first.items() if all(o.get(k) == v for o in rest)}
        if common:
            lines.append("- every column: " + ", ".join(
                f"{k}={'|'.join(v)}" for k, v in sorted(common.items())))
        for column, own in values.items():
            text = ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(own.items())
                             if k not in common)
            lines.append(f"- {column}: {text or 'nothing else'}")
        lines.append("")
    return "\n".join(lines)


def machines(records: list[dict]) -> str:
    """Which machines computed the cells, from each cell's ``hardware``: per dataset
    and setting, the cells of each CPU (its model and kernels' instruction set) and
    GPU. Numbers are bit-for-bit reproducible only on the same kernels
    (:func:`clestim.benchmark.hardware`)."""
    blocks = {}
    for r in records:
        hw = r.get("hardware")
        label = "not recorded (cells older than the record of hardware)" if hw is None else (
            f"{hw['cpu']} ({hw['cpu_capability']})" + (f", {hw['gpu']}" if "gpu" in hw else ""))
        counts = blocks.setdefault((r["dataset"], r["setting"]), {})
        counts[label] = counts.get(label, 0) + 1
    lines = []
    for (dataset, setting), counts in sorted(blocks.items()):
        lines += [f"### Computed on: {dataset} ({setting})", ""]
        lines += [f"- {label}: {n} cell{'s' * (n != 1)}" for label, n in sorted(counts.items())]
        lines.append("")
    return "\n".join(lines)


def write_report(results, out=None) -> list[Path]:
    """Write the tables and plots of ``results`` into ``out`` (default: ``results``)."""
    from .plotting import (
        plot_accuracy_matrix,
        plot_average_accuracy,
        plot_dmi_matrix,
        plot_memory_budget,
    )

    records = load_results(results)
    if not records:
        raise ValueError(f"{results} has no finished cells to report")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    frame = report_frame(records)
    written = [out / "table.md", out / "table.csv"]
    header = ("# clestim benchmark\n\nMean ± 95% CI (t distribution) over runs, in percent. "
              + LEGEND + "\n")
    written[0].write_text(header + markdown_table(frame) + "\n" + hyperparameters(records)
                         + "\n" + machines(records))
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
            dmi = [r["dmi_matrix"] for r in records if "dmi_matrix" in r
                   and (r["dataset"], r["setting"], method_label(r)) == (dataset, setting, method)]
            if dmi:
                fig = plot_dmi_matrix(np.mean(dmi, axis=0), accuracy_matrix=np.mean(matrices, 0))
                fig.suptitle(f"{method} on {dataset}")
                path = out / f"dmi_matrix_{_slug(dataset)}_{_slug(setting)}_{_slug(method)}.png"
                fig.savefig(path, dpi=120)
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
