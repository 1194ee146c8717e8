"""Plots of continual-learning results (matplotlib; safe under the Agg backend).

- :func:`plot_average_accuracy`: the evolution of average accuracy
  :math:`\\mathcal{A}_i` over tasks, one line per method, with a confidence band
  over runs (TSCIL, Figures 2 and 3).
- :func:`plot_accuracy_matrix`: a heatmap of one accuracy matrix.
- :func:`plot_memory_budget`: final average accuracy against the memory budget
  (TSCIL, Section 5.1).
- :func:`plot_dmi_matrix`: the DMI (clustering-accuracy) matrix beside the accuracy
  matrix (SLU paper, Figure 2); returns a figure.
- :func:`plot_embeddings`: t-SNE of the test embeddings after each task, one panel
  per task, coloured by class; returns a figure.

Both functions draw on a given ``ax`` (or a new figure) and return the
:class:`matplotlib.axes.Axes`; ``ax.figure`` is the figure. Nothing is shown or
saved: call ``ax.figure.savefig(...)``.
"""

from __future__ import annotations

import textwrap

import numpy as np

from .evaluation import MIN_RUNS_FOR_CI, confidence_interval, interval_bounds
from .metrics import average_accuracies, check_accuracy_matrix

__all__ = [
    "plot_average_accuracy",
    "plot_accuracy_matrix",
    "plot_memory_budget",
    "plot_dmi_matrix",
    "plot_embeddings",
]


_MARKERS = "osD^v"
_LINESTYLES = ("-", "--", ":", "-.")


def _style(i: int) -> dict:
    """A look of its own for the i-th line: colour, marker and dash all change from
    one line to the next, and hollow markers shrink, so that lines which coincide
    (LwF on Naive, say) still show one under the other."""
    return {"color": f"C{i % 10}", "marker": _MARKERS[i % len(_MARKERS)],
            "linestyle": _LINESTYLES[i % len(_LINESTYLES)], "fillstyle": "none",
            "markersize": 9 - 2 * (i % 3)}


def _runs_title(n_runs: list) -> str | None:
    """The legend's title when some method has too few runs for a meaningful band."""
    if min(n_runs) >= MIN_RUNS_FOR_CI:
        return None
    if max(n_runs) == 1:
        return "1 run: no CI band"
    return f"fewer than {MIN_RUNS_FOR_CI} runs: CI too wide to mean much"


#: Legend labels longer than this wrap onto more lines, so that a label with its
#: parameters ('GR (generator_epochs=500, ...)') does not squeeze the axes.
LEGEND_WIDTH = 28


def _finish(ax, n_runs=(MIN_RUNS_FOR_CI,)):
    """Legend beside the axes (it never hides a line), long labels wrapped, titled
    with a warning when ``n_runs`` (per line) holds fewer than 3; light grid."""
    handles, labels = ax.get_legend_handles_labels()
    labels = [textwrap.fill(label, LEGEND_WIDTH, break_long_words=False, break_on_hyphens=False)
              for label in labels]
    ax.legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0, title=_runs_title(list(n_runs)), title_fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def _axes(ax, figsize):
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    # a Figure not attached to pyplot: no GUI backend, no global state
    fig = Figure(figsize=figsize, layout="constrained")
    return fig.add_subplot()


def plot_average_accuracy(
    results, *, confidence=0.95, percent=True, ax=None, markers=True, figsize=(6.5, 3.5)
):
    """Plot :math:`\\mathcal{A}_i` against the task index, one line per method.

    Parameters
    ----------
    results : dict
        Method name to either a list of accuracy matrices (one per run), a single
        accuracy matrix, a 2-D array of ``A_i`` curves (runs x tasks), or an object
        with an ``accuracy_matrices`` attribute (:class:`clestim.evaluation.RunsResult`)
        or an ``accuracy_matrix`` attribute (:class:`~clestim.evaluation.StreamResult`).
    confidence : float, default=0.95
        Level of the t-distribution band over runs (no band for one run), clipped
        to [0, 100]%; the legend's title says when a method has fewer than 3 runs.
    percent : bool, default=True
        Plot accuracies in percent.
    ax : matplotlib Axes, default=None
    markers : bool, default=True

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import numpy as np
    >>> runs = [np.array([[0.9, 0.0], [0.5, 0.8]]), np.array([[1.0, 0.0], [0.4, 0.9]])]
    >>> ax = plot_average_accuracy({"Naive": runs})
    >>> ax.get_lines()[0].get_ydata().round(2).tolist()
    [95.0, 65.0]
    """
    if not results:
        raise ValueError("results is empty: give at least one method.")
    ax = _axes(ax, figsize)
    scale = 100.0 if percent else 1.0
    n_runs = []
    for i, (name, res) in enumerate(results.items()):
        curves = _curves(res) * scale
        n_runs.append(curves.shape[0])
        mean, half = confidence_interval(curves, confidence=confidence)
        x = np.arange(1, curves.shape[1] + 1)
        style = _style(i) | ({} if markers else {"marker": None})
        ax.plot(x, mean, label=str(name), **style)
        if curves.shape[0] > 1:  # the band stays within [0, 100]%
            ax.fill_between(x, *interval_bounds(mean, half, 0.0, scale), color=style["color"],
                            alpha=0.15)
    ax.set_xlabel("task $i$")
    ax.set_ylabel("average accuracy $\\mathcal{A}_i$" + (" (%)" if percent else ""))
    ax.set_xticks(x)
    return _finish(ax, n_runs)


def _curves(res) -> np.ndarray:
    if hasattr(res, "accuracy_matrices"):
        res = list(res.accuracy_matrices)
    elif hasattr(res, "accuracy_matrix"):
        res = [res.accuracy_matrix]
    if isinstance(res, (list, tuple)):
        curves = [average_accuracies(A) for A in res]
        if len({len(c) for c in curves}) != 1:
            raise ValueError("All runs of a method must have the same number of tasks.")
        return np.vstack(curves)
    arr = np.asarray(res, dtype=float)
    if arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
        return average_accuracies(arr)[None, :]
    if arr.ndim == 2:
        return arr
    if arr.ndim == 3:
        return np.vstack([average_accuracies(A) for A in arr])
    raise ValueError(
        "Each method needs accuracy matrices (T x T), a list of them, or A_i curves "
        f"(runs x T); got an array of shape {arr.shape}."
    )


def plot_accuracy_matrix(
    A,
    *,
    percent=True,
    annotate=True,
    ax=None,
    cmap="viridis",
    task_labels=None,
    figsize=(4, 3.5),
):
    """Heatmap of an accuracy matrix: row ``i`` = after task ``i``, column ``j`` = task ``j``.

    ``NaN`` cells (tasks not evaluated) are left blank.

    Parameters
    ----------
    A : array-like of shape (T, T)
        Accuracies in [0, 1].
    percent : bool, default=True
    annotate : bool, default=True
        Write the value in each cell.
    ax : matplotlib Axes, default=None
    cmap : str, default='viridis'
    task_labels : list of str, default=None
        Tick labels; ``1 .. T`` by default.

    Returns
    -------
    matplotlib.axes.Axes
    """
    A = check_accuracy_matrix(A)
    T = A.shape[0]
    if task_labels is not None and len(task_labels) != T:
        raise ValueError(f"task_labels needs {T} labels; got {len(task_labels)}.")
    ax = _axes(ax, figsize)
    scale = 100.0 if percent else 1.0
    data = np.ma.masked_invalid(A * scale)
    im = ax.imshow(data, cmap=cmap, vmin=0, vmax=scale)
    ax.figure.colorbar(im, ax=ax, label="accuracy" + (" (%)" if percent else ""))
    labels = task_labels if task_labels is not None else [str(k + 1) for k in range(T)]
    ax.set_xticks(range(T), labels)
    ax.set_yticks(range(T), labels)
    ax.set_xlabel("evaluated on task $j$")
    ax.set_ylabel("after training task $i$")
    if annotate:
        for i in range(T):
            for j in range(T):
                if not np.isnan(A[i, j]):
                    v = A[i, j] * scale
                    ax.text(
                        j,
                        i,
                        f"{v:.0f}" if percent else f"{v:.2f}",
                        ha="center",
                        va="center",
                        color="white" if v < 0.5 * scale else "black",
                        fontsize=8,
                    )
    return ax


def plot_memory_budget(curves, *, confidence=0.95, ax=None, figsize=(6.5, 3.5)):
    """Plot the final average accuracy :math:`\\mathcal{A}_T` against the memory budget.

    Parameters
    ----------
    curves : dict
        Method name to ``{budget_percent: [A_T of each run, in percent]}``.
    confidence : float, default=0.95
        Level of the t-distribution error bars over runs (none for one run).
    ax : matplotlib Axes, default=None

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> ax = plot_memory_budget({"ER": {1: [60.0, 64.0], 5: [90.0, 92.0]}})
    >>> ax.get_lines()[0].get_ydata().tolist()
    [62.0, 91.0]
    """
    if not curves:
        raise ValueError("curves is empty: give at least one method.")
    ax = _axes(ax, figsize)
    budgets = sorted({b for points in curves.values() for b in points})
    n_runs = []
    for i, (name, points) in enumerate(curves.items()):
        x = sorted(points)
        stats = [confidence_interval(np.asarray(points[b], float), confidence=confidence)
                 for b in x]
        mean = np.array([m for m, _ in stats])
        half = np.array([h if len(points[b]) > 1 else 0.0 for b, (_, h) in zip(x, stats)])
        low, high = interval_bounds(mean, half)  # bars stay within [0, 100]%
        n_runs.append(min(len(points[b]) for b in x))
        ax.errorbar(x, mean, yerr=[mean - low, high - mean], capsize=3, label=str(name),
                    **_style(i))
    ax.set_xscale("log")
    ax.set_xticks(budgets, [f"{b:g}%" for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("memory budget (% of the training samples)")
    ax.set_ylabel("final average accuracy $\\mathcal{A}_T$ (%)")
    return _finish(ax, n_runs)


def plot_dmi_matrix(D, *, accuracy_matrix=None, percent=True, figsize=None):
    """Heatmap of a DMI matrix, beside the accuracy matrix when one is given.

    Parameters
    ----------
    D : array-like of shape (T, T)
        Clustering accuracies (:func:`clestim.metrics.dmi_matrix`); its three
        regions are DMI's stability (below the diagonal), plasticity (diagonal)
        and generalisation (above).
    accuracy_matrix : array-like of shape (T, T), default=None
    percent : bool, default=True
    figsize : tuple, default=None

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure

    from .metrics import dmi

    panels = [("DMI matrix", D)]
    if accuracy_matrix is not None:
        panels.insert(0, ("accuracy matrix", accuracy_matrix))
    fig = Figure(figsize=figsize or (4.2 * len(panels), 3.6), layout="constrained")
    for k, (title, M) in enumerate(panels):
        ax = plot_accuracy_matrix(M, percent=percent, ax=fig.add_subplot(1, len(panels), k + 1))
        if title == "DMI matrix" and len(M) > 1:
            stab, plas, gen = dmi(M)
            scale = 100 if percent else 1
            title += f"\nstab {stab * scale:.1f}, plas {plas * scale:.1f}, gen {gen * scale:.1f}"
        ax.set_title(title, fontsize="medium")
    return fig


def plot_embeddings(
    estimator, X, y, *, tasks=None, max_samples=1000, perplexity=30.0, max_iter=1000,
    random_state=0, panel_size=3.0,
):
    """t-SNE (:class:`sklearn.manifold.TSNE`) of the embeddings after each task.

    One panel per weight snapshot (``estimator.transform(X, after_task=i)``), points
    coloured by class, as the SLU paper's embedding figures.

    Parameters
    ----------
    estimator : fitted clestim estimator
    X, y : test data
    tasks : list of int, default=None
        The snapshots to draw; all by default.
    max_samples : int, default=1000
        A seeded random subset of at most this many samples (the same in every panel).
    perplexity : float, default=30.0
        Clipped below the number of samples.
    max_iter : int, default=1000
        t-SNE iterations (at least 250).
    random_state : int, default=0
        Seeds the subset and t-SNE.
    panel_size : float, default=3.0
        Inches per panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.figure import Figure
    from sklearn.manifold import TSNE
    from sklearn.utils import _safe_indexing

    y = np.asarray(y)
    tasks = list(range(estimator.n_tasks_seen_)) if tasks is None else list(tasks)
    rng = np.random.RandomState(random_state)
    keep = np.sort(rng.permutation(len(y))[:max_samples])
    Xk, yk = _safe_indexing(X, keep), y[keep]
    classes, codes = np.unique(yk, return_inverse=True)
    fig = Figure(figsize=(panel_size * len(tasks) + 1.2, panel_size), layout="constrained")
    for k, task in enumerate(tasks):
        emb = estimator.transform(Xk, after_task=task)
        points = TSNE(
            perplexity=min(perplexity, len(yk) - 1), max_iter=max_iter,
            random_state=random_state, init="pca",
        ).fit_transform(emb)
        ax = fig.add_subplot(1, len(tasks), k + 1)
        for c in range(len(classes)):
            sel = codes == c
            ax.scatter(*points[sel].T, s=4, color=f"C{c % 10}", label=str(classes[c]))
        ax.set_title(f"after task {task + 1}", fontsize="medium")
        ax.set_xticks([])
        ax.set_yticks([])
    ax.legend(fontsize="x-small", markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
