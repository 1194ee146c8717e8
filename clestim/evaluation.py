"""Running a task stream with evaluation after every task, and repeated runs.

:func:`evaluate_stream` is the protocol of the TSCIL benchmark (Qiao et al. 2024,
Sect. 4.4): a fresh clone of the estimator learns the tasks of a stream one by one
with ``partial_fit_task``; after each task it is evaluated on the test samples of
*every* task of the stream, which fills row ``i`` of the accuracy matrix
``A[i, j]`` (accuracy on task ``j`` after task ``i``, a fraction in [0, 1]).

- Test tasks come from the stream (``stream.task_indices(y_test, groups_test)``):
  for class-incremental streams a test sample belongs to the task of its class,
  for :class:`~clestim.streams.DomainIncremental` to the task of its group.
- In class-incremental mode (``mode='class'``) future tasks are evaluated too: a
  class the head does not know yet cannot be predicted, so it counts as wrong
  (this is what forward transfer reads). In task-incremental mode
  (``mode='task'``) predictions are restricted to the classes of the evaluated
  task (``predict(X, task=j)``) and future tasks are ``NaN``.
- Labels are passed through ``stream.relabel(y, task)``, so the two-task basic
  scenarios (where a sample changes label) are evaluated with the labels of the
  task being evaluated.

:func:`evaluate_runs` repeats this with the class order and the seed varying per
run (``seed + run``, TSCIL uses 1234 + run) and aggregates each metric as the mean
and the half-width of a two-sided 95% confidence interval from the t
distribution, the paper's reporting.
"""

from __future__ import annotations

import inspect
import pickle
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.metrics import confusion_matrix as sk_confusion_matrix
from sklearn.utils import _safe_indexing

from ._atomic import write_bytes_atomic
from ._digest import digest
from .metrics import (
    average_accuracies,
    check_accuracy_matrix,
    compute_metrics,
    dmi_row,
)

__all__ = [
    "StreamResult",
    "RunsResult",
    "evaluate_stream",
    "evaluate_runs",
    "load_progress",
    "saved_tasks",
    "confidence_interval",
    "interval_bounds",
]


def confidence_interval(values, confidence=0.95, axis=0):
    r"""Mean and half-width of the two-sided t confidence interval of the mean.

    .. math:: \bar{x} \pm t_{(1+c)/2,\,n-1} \, \frac{s}{\sqrt{n}}

    with ``s`` the sample standard deviation (``ddof=1``) over ``n`` runs. One run
    gives a half-width of 0. ``NaN`` propagates.

    Parameters
    ----------
    values : array-like
        Runs along ``axis``.
    confidence : float, default=0.95
    axis : int, default=0

    Returns
    -------
    mean, half_width : float or ndarray

    Examples
    --------
    >>> m, h = confidence_interval([0.5, 0.7])
    >>> round(float(m), 6), round(float(h), 6)  # t_{0.975, 1} = 12.7062; s / sqrt(2) = 0.1
    (0.6, 1.27062)
    """
    from scipy import stats

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}.")
    x = np.asarray(values, dtype=float)
    n = x.shape[axis]
    mean = x.mean(axis=axis)
    if n < 2:
        return mean, np.zeros_like(mean)
    sem = x.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, stats.t.ppf(0.5 + confidence / 2, n - 1) * sem


#: Fewer runs than this give a t-interval too wide to mean much (t_{0.975,1} = 12.7);
#: reports and plots say so.
MIN_RUNS_FOR_CI = 3


def interval_bounds(mean, half_width, low=0.0, high=100.0):
    """The interval ``mean ± half_width`` clipped to the metric's range ``[low, high]``.

    The range is widened to hold ``mean`` itself, so a value outside it (a negative
    forgetting, say) keeps its interval around it.

    Examples
    --------
    >>> lo, hi = interval_bounds(55.4, 127.6)
    >>> float(lo), float(hi)
    (0.0, 100.0)
    """
    mean, half_width = np.asarray(mean, float), np.asarray(half_width, float)
    return (np.maximum(mean - half_width, np.minimum(low, mean)),
            np.minimum(mean + half_width, np.maximum(high, mean)))


# --------------------------------------------------------------------------- results
@dataclass
class StreamResult:
    """The outcome of one :func:`evaluate_stream` run.

    Attributes
    ----------
    accuracy_matrix : ndarray of shape (T, T)
        ``A[i, j]``, full precision, fractions in [0, 1] (``NaN`` where not
        evaluated).
    task_classes : list of ndarray
        The classes of each task, as the stream defined them.
    fit_time : ndarray of shape (T,)
        Seconds spent in ``partial_fit_task`` for each task.
    eval_time : ndarray of shape (T,)
        Seconds spent evaluating after each task.
    metrics : dict
        Every metric of :data:`clestim.metrics.METRICS`.
    mode : {'class', 'task'}
    memory_nbytes : int or None
        Bytes of everything the estimator keeps in memory after the last task
        (``memory_nbytes_``; None for methods without a memory).
    memory_elements : int or None
        Samples in memory after the last task.
    estimator : fitted estimator or None
        Only kept with ``return_estimator=True``.
    dmi_matrix : ndarray of shape (T, T) or None
        The clustering-accuracy matrix of the DMI (``dmi=True``).
    zero_shot : ndarray of shape (T,) or None
        The accuracy on each task of the network before it learnt anything, the
        forward-transfer baseline, where it was measured.
    confusion : ndarray of shape (T, C, C) or None
        ``confusion[i, a, b]``: test samples of class ``confusion_labels[a]``
        predicted as ``confusion_labels[b]`` after task ``i``, over the tasks
        evaluated then (``confusion=True``): which classes took a forgotten
        task's samples.
    confusion_labels : ndarray of shape (C,) or None
        Every label of the test tasks, sorted.
    resumed_tasks : int
        How many tasks were read from a ``checkpoint`` saved by an earlier,
        interrupted call rather than learned in this one (their ``fit_time`` and
        ``eval_time`` are those of that call).
    """

    accuracy_matrix: np.ndarray
    task_classes: list
    fit_time: np.ndarray
    eval_time: np.ndarray
    metrics: dict
    mode: str = "class"
    memory_nbytes: int | None = None
    memory_elements: int | None = None
    estimator: object = field(default=None, repr=False, compare=False)
    dmi_matrix: np.ndarray | None = None
    zero_shot: np.ndarray | None = None
    confusion: np.ndarray | None = None
    confusion_labels: np.ndarray | None = None
    resumed_tasks: int = 0

    @property
    def n_tasks(self) -> int:
        return self.accuracy_matrix.shape[0]

    @property
    def average_accuracies(self) -> np.ndarray:
        """:math:`\\mathcal{A}_i` after each task."""
        return average_accuracies(self.accuracy_matrix)

    def to_dict(self) -> dict:
        """A JSON-serialisable dict (NaN stays ``float('nan')``)."""
        out = {
            "accuracy_matrix": self.accuracy_matrix.tolist(),
            "task_classes": [np.asarray(c).tolist() for c in self.task_classes],
            "fit_time": self.fit_time.tolist(),
            "eval_time": self.eval_time.tolist(),
            "metrics": {k: float(v) for k, v in self.metrics.items()},
            "mode": self.mode,
            "memory_nbytes": self.memory_nbytes,
            "memory_elements": self.memory_elements,
        }
        for name in ("dmi_matrix", "zero_shot", "confusion", "confusion_labels"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name).tolist()
        if self.resumed_tasks:
            out["resumed_tasks"] = self.resumed_tasks
        return out

    def to_frame(self, kind="tasks"):
        """The result as a :class:`pandas.DataFrame`.

        Parameters
        ----------
        kind : {'tasks', 'matrix', 'metrics'}, default='tasks'
            ``'tasks'``: one row per task with its classes, fit time, average
            accuracy :math:`\\mathcal{A}_i` after it and its accuracy right after
            learning it (:math:`a_{i,i}`); ``'matrix'``: the accuracy matrix (rows:
            after task ``i``, columns: task ``j``); ``'metrics'``: one row of metrics.
        """
        import pandas as pd

        A = self.accuracy_matrix
        T = self.n_tasks
        if kind == "matrix":
            return pd.DataFrame(
                A,
                index=pd.Index(range(T), name="after_task"),
                columns=pd.Index(range(T), name="task"),
            )
        if kind == "metrics":
            return pd.DataFrame([self.metrics])
        if kind == "tasks":
            return pd.DataFrame(
                {
                    "classes": [np.asarray(c).tolist() for c in self.task_classes],
                    "fit_time": self.fit_time,
                    "eval_time": self.eval_time,
                    "average_accuracy": self.average_accuracies,
                    "current_task_accuracy": np.diag(A),
                },
                index=pd.Index(range(T), name="task"),
            )
        raise ValueError(f"kind must be 'tasks', 'matrix' or 'metrics'; got {kind!r}.")


@dataclass
class RunsResult:
    """Results of repeated runs (:func:`evaluate_runs`).

    Attributes
    ----------
    runs : list of StreamResult
    seeds : list of int
        The seed of each run (stream ``random_state`` and estimator ``random_state``).
    confidence : float
    """

    runs: list
    seeds: list
    confidence: float = 0.95

    @property
    def accuracy_matrices(self) -> list:
        return [r.accuracy_matrix for r in self.runs]

    def metrics_frame(self):
        """One row of metrics per run (index: the run's seed)."""
        import pandas as pd

        return pd.DataFrame([r.metrics for r in self.runs], index=pd.Index(self.seeds, name="seed"))

    def summary(self):
        """Mean, CI half-width, std and n of each metric over the runs.

        The CI is two-sided at ``confidence`` with the t distribution
        (:func:`confidence_interval`), as in TSCIL's tables ("mean ± CI").
        """
        import pandas as pd

        df = self.metrics_frame()
        rows = {}
        for name in df.columns:
            vals = df[name].to_numpy(dtype=float)
            m, h = confidence_interval(vals, self.confidence)
            rows[name] = {
                "mean": float(m),
                "ci": float(h),
                "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0,
                "n_runs": len(vals),
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    def format(self, metric, percent=True, digits=1, spread="ci") -> str:
        """``'mean ± ci'`` of one metric, e.g. ``'88.9 ± 2.7'``; ``spread='std'``
        gives the standard deviation instead (the fixed-problem protocol's)."""
        if spread not in ("ci", "std"):
            raise ValueError(f"spread must be 'ci' or 'std'; got {spread!r}.")
        row = self.summary().loc[metric]
        s = 100.0 if percent else 1.0
        return f"{row['mean'] * s:.{digits}f} ± {row[spread] * s:.{digits}f}"

    def to_dict(self) -> dict:
        return {
            "seeds": list(self.seeds),
            "confidence": self.confidence,
            "runs": [r.to_dict() for r in self.runs],
            "summary": self.summary().to_dict(orient="index"),
        }

    def to_frame(self):
        """Per-run metrics (same as :meth:`metrics_frame`)."""
        return self.metrics_frame()


# --------------------------------------------------------------------------- protocol
def evaluate_stream(
    estimator,
    stream,
    X_train,
    y_train,
    X_test,
    y_test,
    groups=None,
    groups_test=None,
    *,
    mode="class",
    forgetting_convention="paper",
    fwt_baseline="zero_shot",
    declare_classes=False,
    dmi=False,
    dmi_random_state=0,
    confusion=False,
    clone_estimator=True,
    return_estimator=False,
    checkpoint=None,
) -> StreamResult:
    """Train task by task and evaluate on every task after each one.

    Parameters
    ----------
    estimator : clestim estimator
        Anything with ``partial_fit_task(X, y, groups=None)`` and
        ``predict(X, task=None)``; cloned first unless ``clone_estimator=False``.
    stream : clestim stream
        Cuts the training data into tasks and defines the test tasks.
    X_train, y_train : training data (indexable, e.g. numpy arrays)
    X_test, y_test : test data
    groups, groups_test : array-like, default=None
        Group labels of the training / test samples (needed by domain-incremental
        streams; ``groups`` is also passed to ``partial_fit_task``).
    mode : {'class', 'task'}, default='class'
        Class-incremental (predict over all classes, future tasks evaluated) or
        task-incremental (predict within the evaluated task's classes, future tasks
        ``NaN``).
    forgetting_convention : {'paper', 'tscil'}, default='paper'
        See :func:`clestim.metrics.average_forgetting`.
    fwt_baseline : 'zero_shot', array-like of shape (T,) or None, default='zero_shot'
        The baseline of forward transfer, ``FWT = mean_{i>=2} (A[i-1, i] - b_i)``
        (GEM; Continuum; the SLU paper). ``'zero_shot'``: ``b_i`` is the accuracy on
        task ``i`` of the network before it learns anything, with the same
        initialisation (measured here, see Notes); an array gives ``b`` itself; None
        gives Continuum's FWT without baseline.
    declare_classes : bool, default=False
        Declare the stream's whole label space on the first ``partial_fit_task``
        (``classes=``, as scikit-learn's ``partial_fit``), so the head is complete
        from the start and forward transfer is defined in class-incremental
        streams. Needs an estimator whose ``partial_fit_task`` takes ``classes``.
    dmi : bool, default=False
        Also fill the DMI matrix (SLU paper): after each task, k-means on the
        embeddings (``transform``) of every test sample, Hungarian matching, the
        matched accuracy per task (:func:`clestim.metrics.dmi_row`). Adds
        ``dmi_stability``, ``dmi_plasticity`` and ``dmi_generalisation`` to the
        metrics. Costs one k-means per task.
    dmi_random_state : int, default=0
        Seed of the k-means.
    confusion : bool, default=False
        Also count, after each task, how every evaluated test sample was
        classified (``StreamResult.confusion``, one confusion matrix a task over
        every label of the test tasks; a prediction of a label no test sample has
        is not counted). Costs nothing beyond the predictions already made.
    clone_estimator : bool, default=True
    return_estimator : bool, default=False
        Keep the fitted estimator in the result.
    checkpoint : str or path, default=None
        A file in which the progress is saved after every task but the last: the
        fitted estimator (pickled) and the rows of the results so far. A call with
        the same file, estimator parameters, data, stream and options resumes after
        the last saved task, with the same numbers as a call never interrupted
        (clestim's estimators reseed from their own state at every task); a file
        saved by any other call is ignored with a warning, and so is an unreadable
        one. The file is deleted when the stream is complete. It is a pickle: load
        only files you wrote.

    Returns
    -------
    StreamResult

    Raises
    ------
    ValueError
        If a task of the stream has no test sample, or ``mode`` is unknown.

    Notes
    -----
    **When forward transfer is defined.** ``A[i-1, i]`` reads the network on a
    task it has not learnt. It means something only when the head could already
    predict that task's labels: on domain-incremental streams (the same classes in
    every task) or with a declared label space (``declare_classes=True``). With a
    head that grows per task (class-incremental without ``classes=``) the unseen
    classes score ``-inf``, ``A[i-1, i]`` is 0 by construction, and
    ``forward_transfer`` is reported as ``NaN``, never as a silent 0; likewise in
    task-incremental mode, which does not evaluate future tasks.

    **The zero-shot baseline** is measured on a clone of the estimator that goes
    through the first task's lifecycle (initialisation, random draws, head
    growth, hooks) with its training step skipped, so it holds exactly the weights
    the real run starts training from (with an integer ``random_state``).

    References
    ----------
    Qiao et al., "Class-incremental Learning for Time Series: Benchmark and
    Evaluation", KDD 2024, Sect. 4.4.
    """
    if mode not in ("class", "task"):
        raise ValueError(f"mode must be 'class' or 'task'; got {mode!r}.")
    est = clone(estimator) if clone_estimator else estimator
    y_train = np.asarray(y_train)
    y_test = np.asarray(y_test)
    train_tasks = list(stream.split(X_train, y_train, groups))
    T = len(train_tasks)
    test_tasks = stream.task_indices(y_test, groups_test)
    if len(test_tasks) != T:
        raise ValueError(f"The stream defines {len(test_tasks)} test tasks but {T} training tasks.")
    for j, idx in enumerate(test_tasks):
        if len(idx) == 0:
            raise ValueError(
                f"The test data holds no sample of task {j} (classes "
                f"{np.asarray(stream.task_classes_[j]).tolist()}); every task needs test "
                f"samples."
            )
    test_X = [_safe_indexing(X_test, idx) for idx in test_tasks]
    test_y = [stream.relabel(y_test[idx], j) for j, idx in enumerate(test_tasks)]
    groups = None if groups is None else np.asarray(groups)

    first_task = {}
    if declare_classes:
        if "classes" not in inspect.signature(est.partial_fit_task).parameters:
            raise ValueError(
                f"declare_classes=True needs partial_fit_task(..., classes=...), which "
                f"{type(est).__name__} does not take."
            )
        labels = [stream.relabel(y_train[idx], i) for i, idx in enumerate(train_tasks)]
        first_task["classes"] = np.unique(np.concatenate(labels + test_y))
    if dmi:
        if not hasattr(est, "transform"):
            raise ValueError(f"dmi=True needs embeddings: {type(est).__name__} has no transform.")
        # every test sample of every task once, in the test set's order (as dmi_matrix)
        all_test = np.unique(np.concatenate(test_tasks))
        X_dmi, y_dmi = _safe_indexing(X_test, all_test), y_test[all_test]
        masks = [np.isin(all_test, idx) for idx in test_tasks]
        D = np.full((T, T), np.nan)
    # the zero-shot model skips ContinualClassifier._train; other estimators get NaN
    zero_shot_est = (
        clone(est) if isinstance(fwt_baseline, str) and hasattr(est, "_train") else None
    )
    if isinstance(fwt_baseline, str) and fwt_baseline != "zero_shot":
        raise ValueError(
            f"fwt_baseline must be 'zero_shot', an array or None; got {fwt_baseline!r}."
        )

    A = np.full((T, T), np.nan)
    if confusion:
        labels = np.unique(np.concatenate(test_y))
        counts = np.zeros((T, len(labels), len(labels)), dtype=np.int64)
    fwt_defined = mode == "class" and (zero_shot_est is not None or fwt_baseline != "zero_shot")
    fit_time = np.zeros(T)
    eval_time = np.zeros(T)
    progress = done = None
    if checkpoint is not None:
        progress = _StreamProgress(checkpoint, (
            estimator, X_train, y_train, X_test, y_test, groups, groups_test, train_tasks,
            test_tasks, mode, forgetting_convention, fwt_baseline, declare_classes, dmi,
            dmi_random_state, confusion))
        done = progress.load()
    if done is not None:  # into ``est`` itself: with clone_estimator=False it is the caller's
        vars(est).clear()
        vars(est).update(vars(done["estimator"]))
        A, fit_time, eval_time = done["A"], done["fit_time"], done["eval_time"]
        fwt_defined = done["fwt_defined"]
        counts = done["confusion"] if confusion else None
        D = done["dmi"] if dmi else None
    resumed = 0 if done is None else done["tasks_done"]
    for i, idx in enumerate(train_tasks):
        if i < resumed:
            continue
        Xi = _safe_indexing(X_train, idx)
        yi = stream.relabel(y_train[idx], i)
        gi = None if groups is None else groups[idx]
        start = time.perf_counter()
        est.partial_fit_task(Xi, yi, gi, **(first_task if i == 0 else {}))
        fit_time[i] = time.perf_counter() - start
        if i + 1 < T:  # can the head predict the next task's labels?
            known = set(np.asarray(est.classes_).tolist())
            fwt_defined &= set(np.unique(test_y[i + 1]).tolist()) <= known
        start = time.perf_counter()
        for j in range(T):
            if mode == "class":
                pred = np.asarray(est.predict(test_X[j]))
            elif j <= i:
                pred = np.asarray(est.predict(test_X[j], task=j))
            else:
                continue
            A[i, j] = np.mean(pred == test_y[j])
            if confusion:
                counts[i] += sk_confusion_matrix(test_y[j], pred, labels=labels)
        if dmi:
            D[i] = dmi_row(est.transform(X_dmi), y_dmi, masks, random_state=dmi_random_state)
        eval_time[i] = time.perf_counter() - start
        if progress is not None and i + 1 < T:
            progress.save({"estimator": est, "tasks_done": i + 1, "A": A,
                           "fit_time": fit_time, "eval_time": eval_time,
                           "fwt_defined": fwt_defined, "confusion": counts if confusion else None,
                           "dmi": D if dmi else None})
    A = check_accuracy_matrix(A)
    zero_shot = None
    baseline = None if isinstance(fwt_baseline, str) else fwt_baseline
    if fwt_defined and T > 1 and zero_shot_est is not None:
        idx = train_tasks[0]
        untrained = _untrained(
            zero_shot_est,
            _safe_indexing(X_train, idx),
            stream.relabel(y_train[idx], 0),
            None if groups is None else groups[idx],
            **first_task,
        )
        zero_shot = np.array([np.mean(untrained.predict(x) == t) for x, t in zip(test_X, test_y)])
        baseline = zero_shot
    metrics = compute_metrics(
        A,
        forgetting_convention=forgetting_convention,
        fwt_baseline=baseline,
        clustering_matrix=D if dmi else None,
    )
    if not fwt_defined:
        metrics["forward_transfer"] = float("nan")  # see Notes: undefined, not 0
    if progress is not None:
        progress.remove()
    return StreamResult(
        accuracy_matrix=A,
        task_classes=[np.asarray(c) for c in stream.task_classes_],
        fit_time=fit_time,
        eval_time=eval_time,
        metrics=metrics,
        mode=mode,
        memory_nbytes=getattr(est, "memory_nbytes_", None),
        memory_elements=len(est.memory_) if hasattr(est, "memory_nbytes_") else None,
        estimator=est if return_estimator else None,
        dmi_matrix=D if dmi else None,
        zero_shot=zero_shot,
        confusion=counts if confusion else None,
        confusion_labels=labels if confusion else None,
        resumed_tasks=resumed,
    )


class _StreamProgress:
    """The ``checkpoint`` file of :func:`evaluate_stream`: a pickled header (format,
    the digest of everything the run depends on, tasks done), then the state."""

    FORMAT = 1

    def __init__(self, path, parts):
        self.path = Path(path)
        self.fingerprint = digest(parts)

    def load(self) -> dict | None:
        """The saved state, or None (with a warning when a file is there but unusable)."""
        if not self.path.exists():
            return None
        try:
            with open(self.path, "rb") as f:
                header = pickle.load(f)
                if (header.get("format"), header.get("fingerprint")) != (
                        self.FORMAT, self.fingerprint):
                    problem = "saved by a run with other parameters, data or options"
                else:
                    return pickle.load(f)
        except Exception as exc:  # noqa: BLE001 - any unreadable file: start over
            problem = f"unreadable ({type(exc).__name__}: {exc})"
        warnings.warn(f"ignoring the checkpoint {self.path}: {problem}; the stream starts "
                      "from its first task", UserWarning, stacklevel=3)
        return None

    def save(self, state: dict) -> None:
        header = {"format": self.FORMAT, "fingerprint": self.fingerprint,
                  "tasks_done": state["tasks_done"]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(self.path, pickle.dumps(header) + pickle.dumps(state, protocol=5))
        except OSError as exc:  # the stream goes on; only resuming is lost
            warnings.warn(f"could not save the checkpoint {self.path}: {exc}", stacklevel=3)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def load_progress(checkpoint) -> dict:
    """The state an :func:`evaluate_stream` ``checkpoint`` file holds, to inspect a run
    in progress (an interrupted ``clestim bench`` cell's ``RESULTS/progress/<key>.pkl``).

    A dict: ``estimator`` (fitted on the first ``tasks_done`` tasks), ``tasks_done``,
    ``A`` (the accuracy matrix; rows past ``tasks_done`` are NaN),
    ``fit_time``, ``eval_time``, and ``confusion`` / ``dmi`` when the run records them.
    It is a pickle: load only files you wrote. Raises ``FileNotFoundError`` when the
    file is missing and ``ValueError`` when it is not a checkpoint of this format.
    """
    with open(checkpoint, "rb") as f:
        try:
            header = pickle.load(f)
            state = pickle.load(f)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure
            raise ValueError(f"{checkpoint} is not a readable checkpoint "
                             f"({type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or header.get("format") != _StreamProgress.FORMAT:
        raise ValueError(f"{checkpoint} is not an evaluate_stream checkpoint of format "
                         f"{_StreamProgress.FORMAT}")
    return state


def saved_tasks(checkpoint) -> int:
    """How many tasks the :func:`evaluate_stream` ``checkpoint`` file holds (0 when there
    is no readable file); reads only its header."""
    try:
        with open(checkpoint, "rb") as f:
            return int(pickle.load(f).get("tasks_done", 0))
    except Exception:  # noqa: BLE001 - missing or unreadable: nothing to resume
        return 0


def _untrained(estimator, X, y, groups, **kwargs):
    """``estimator`` after the first task's lifecycle with training skipped.

    ``partial_fit_task`` runs as usual (validation, initialisation, the same random
    draws, head growth, the method's hooks) but the training step
    (``ContinualClassifier._train``) is replaced by a no-op on this instance, so the
    network keeps its initial weights: the zero-shot model of the forward-transfer
    baseline (SLU paper, Sect. 2.2).
    """
    estimator._train = lambda *args, **kw: []
    try:
        estimator.partial_fit_task(X, y, groups, **kwargs)
    finally:
        del estimator._train
    return estimator


def _seeded(obj, seed: int):
    """A clone of ``obj`` with every ``random_state`` parameter (nested too) set to ``seed``."""
    obj = clone(obj)
    params = obj.get_params(deep=True)
    update = {k: seed for k in params if k == "random_state" or k.endswith("__random_state")}
    if update:
        obj.set_params(**update)
    return obj


def evaluate_runs(
    estimator,
    stream,
    X_train,
    y_train,
    X_test,
    y_test,
    groups=None,
    groups_test=None,
    *,
    n_runs=None,
    seed=1234,
    confidence=0.95,
    n_jobs=None,
    fixed_problems=False,
    **kwargs,
) -> RunsResult:
    """Repeat :func:`evaluate_stream` with a different class order and seed per run.

    Run ``r`` sets every ``random_state`` of the stream and of the estimator to
    ``seed + r`` (TSCIL: 1234 + run), so a shuffling stream gives each run its own
    class order. Runs are independent and can go in parallel through joblib
    (``n_jobs``; any joblib backend, including Dask, applies).

    **Fixed problems** (``fixed_problems=True``; Villa et al. 2022, Sect. 4.2): the
    stream must offer ``problems()``, as :class:`~clestim.streams.TaskPool` does.
    Its pool and its ``n_problems`` problems are drawn once, from the stream's own
    ``random_state`` (``seed`` when it is None), and run ``e`` learns problem ``e``
    with the estimator seeded ``seed + e``; every method evaluated with the same
    stream and ``seed`` thus meets the same problems. Report the mean ± std over
    problems (``RunsResult.format(metric, spread='std')``), as the paper does.

    Parameters
    ----------
    estimator, stream, X_train, y_train, X_test, y_test, groups, groups_test
        As in :func:`evaluate_stream`.
    n_runs : int, default=None
        5 runs; with ``fixed_problems=True``, one per problem.
    seed : int, default=1234
    confidence : float, default=0.95
        Level of the t-distribution confidence intervals of
        :meth:`RunsResult.summary`.
    n_jobs : int, default=None
    fixed_problems : bool, default=False
        Run the stream's fixed problems (``n_runs`` must then be None or equal
        ``stream.n_problems``).
    **kwargs
        Passed to :func:`evaluate_stream` (``mode``, ``forgetting_convention``...).

    Returns
    -------
    RunsResult
    """
    if fixed_problems:
        streams = _fixed_problems(stream, n_runs, seed)
        n_runs = len(streams)
    elif n_runs is None:
        n_runs = 5
    if not isinstance(n_runs, (int, np.integer)) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive integer; got {n_runs!r}.")
    seeds = [int(seed) + r for r in range(n_runs)]
    if not fixed_problems:
        streams = [_seeded(stream, s) for s in seeds]
    runs = Parallel(n_jobs=n_jobs)(
        delayed(evaluate_stream)(
            _seeded(estimator, s),
            problem,
            X_train,
            y_train,
            X_test,
            y_test,
            groups,
            groups_test,
            clone_estimator=False,
            **kwargs,
        )
        for s, problem in zip(seeds, streams)
    )
    return RunsResult(runs=list(runs), seeds=seeds, confidence=confidence)


def _fixed_problems(stream, n_runs, seed) -> list:
    """One stream per fixed problem of ``stream``, all drawn from one seed."""
    if not hasattr(stream, "problems"):
        raise ValueError(
            f"fixed_problems=True needs a stream with fixed problems such as TaskPool; "
            f"got {type(stream).__name__}."
        )
    stream = clone(stream)
    if stream.random_state is None:
        stream.set_params(random_state=int(seed))
    if n_runs is not None and n_runs != stream.n_problems:
        raise ValueError(
            f"n_runs={n_runs} but the stream has n_problems={stream.n_problems}; with "
            "fixed_problems=True every problem is one run (leave n_runs=None)."
        )
    return stream.problems()
