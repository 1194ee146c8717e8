"""Per-base-set evaluation of the two-task basic scenarios ADD, EXP, INC and SEP.

Szadkowski, Drchal and Faigl, "Basic Evaluation Scenarios for Incrementally
Trained Classifiers", ICANN 2019, Tables 3 and 4. The scenarios themselves are
:class:`clestim.streams.BasicScenario`.

- :func:`evaluate_basic_scenario` trains an estimator on a scenario and returns
  one row: the overall accuracies (Table 3) and the accuracy on every non-empty
  base set after T2 (Table 4).
- :func:`base_set_accuracy` scores any base set after any task.
- :func:`subsample_base_sets` gives base sets unequal sizes (the paper's suggested
  extension).
"""

from __future__ import annotations

import inspect
import numbers
import time

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.utils import check_random_state

BASE_SETS = ("C10", "C02", "C01", "C21", "C12")


def base_set_label(scenario, base_set: str, after_task: int = 1):
    """The label base set ``base_set`` carries after task ``after_task``.

    That is the label of the last task ``<= after_task`` that presents the set: the
    T2 label of C02, C01, C21 and C12 and the T1 label of C10 after T2.
    """
    scenario._check_fitted()
    if base_set not in scenario.base_classes_:
        raise ValueError(f"Scenario {scenario.scenario} has base sets "
                         f"{sorted(scenario.base_classes_)}; got {base_set!r}.")
    original = scenario.base_classes_[base_set]
    for task in range(after_task, -1, -1):
        labels = scenario._label_map(task)
        if original in labels:
            return labels[original]
    raise ValueError(f"Base set {base_set} is not presented in or before task {after_task}.")


def base_set_accuracy(estimator, scenario, X, y, base_set: str, after_task: int | None = None):
    """Accuracy on base set ``base_set`` against the label it carries after ``after_task``.

    Parameters
    ----------
    estimator : fitted clestim estimator
    scenario : BasicScenario
        Already split (its ``base_classes_`` are set).
    X, y : test samples and their *original* classes
    base_set : {'C10', 'C02', 'C01', 'C21', 'C12'}
    after_task : int, optional
        Predict with the weights saved after this task (0-based); None: the last
        task learned, scored against the T2 labels.

    Returns
    -------
    float
        NaN when no sample of ``X`` is in the base set.
    """
    idx = scenario.base_sets(y)[base_set] if base_set in scenario.base_classes_ else None
    label = base_set_label(scenario, base_set, 1 if after_task is None else after_task)
    if idx is None or not len(idx):
        return float("nan")
    kwargs = {} if after_task is None else {"after_task": after_task}
    return float(np.mean(np.asarray(estimator.predict(np.asarray(X)[idx], **kwargs)) == label))


def subsample_base_sets(scenario, y, sizes, random_state=None) -> np.ndarray:
    """Indices of ``y`` with each base set cut to a given size (unequal base sets).

    Parameters
    ----------
    scenario : BasicScenario
        Already split.
    y : original classes
    sizes : dict
        Base-set name to a count (int) or a fraction in (0, 1] (float); base sets
        not named keep all their samples.
    random_state : int, RandomState or None

    Returns
    -------
    ndarray of int
        Sorted indices: every sample not in a base set, plus the drawn samples.
    """
    rng = check_random_state(random_state)
    unknown = sorted(set(sizes) - set(scenario.base_classes_))
    if unknown:
        raise ValueError(f"sizes names base sets absent from scenario {scenario.scenario}: "
                         f"{unknown}; it has {sorted(scenario.base_classes_)}.")
    sets = scenario.base_sets(y)
    keep = np.ones(len(y), dtype=bool)
    for name, size in sizes.items():
        idx = sets[name]
        if isinstance(size, numbers.Integral) and not isinstance(size, bool) and size >= 0:
            n = min(int(size), len(idx))
        elif isinstance(size, numbers.Real) and 0 < size <= 1:
            n = int(round(size * len(idx)))
        else:
            raise ValueError(f"size of {name} must be a count >= 0 or a fraction in (0, 1]; "
                             f"got {size!r}.")
        keep[idx] = False
        keep[rng.choice(idx, n, replace=False)] = True
    return np.flatnonzero(keep)


def _supports_classes(estimator) -> bool:
    return "classes" in inspect.signature(estimator.partial_fit_task).parameters


def evaluate_basic_scenario(estimator, scenario, X_train, y_train, X_test, y_test, *,
                            sizes=None, declare_labels=True, random_state=None,
                            clone_estimator=True) -> pd.DataFrame:
    """Train on a basic scenario; overall (Table 3) and per-base-set (Table 4) accuracy.

    Parameters
    ----------
    estimator : clestim estimator
        Cloned first unless ``clone_estimator=False``.
    scenario : BasicScenario
    X_train, y_train, X_test, y_test : samples and their original classes
        The training and test scenarios are both built by ``scenario``.
    sizes : dict, optional
        Unequal base-set sizes for training, see :func:`subsample_base_sets`.
    declare_labels : bool, default=True
        Declare the scenario's two labels on the first task
        (``partial_fit_task(..., classes=scenario.labels)``), so the classifier is the
        paper's binary ``F: X -> {L1, L2}`` from the start (a fixed 2-output head).
    random_state : int, RandomState or None
        Draws of ``sizes``.
    clone_estimator : bool, default=True

    Returns
    -------
    pandas.DataFrame
        One row: ``scenario``, ``assignment``; ``T1 after T1`` (accuracy on T1's
        test samples with T1's labels, after T1), ``T1 after T2`` and ``T2 after T2``
        (the paper's Table 3 columns T1 and T2: both after T2); the accuracy on each
        base set ``C10, C02, C01, C21, C12`` after T2 against the label it carries
        after T2 (NaN where the scenario leaves it empty); ``wall_time``: seconds of
        training and evaluation.
    """
    est = clone(estimator) if clone_estimator else estimator
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    X_test = np.asarray(X_test)
    train_tasks = list(scenario.split(X_train, y_train))
    if sizes:
        kept = subsample_base_sets(scenario, y_train, sizes, random_state)
        train_tasks = [np.intersect1d(idx, kept) for idx in train_tasks]
    test_tasks = scenario.task_indices(y_test)
    if declare_labels and not _supports_classes(est):
        raise TypeError(f"{type(est).__name__}.partial_fit_task takes no classes=; pass "
                        "declare_labels=False")
    row = {"scenario": scenario.scenario,
           "assignment": "".join(str(c) for c in scenario.base_classes_.values())}
    accuracy = {}
    start = time.perf_counter()
    for t, idx in enumerate(train_tasks):
        extra = {"classes": list(scenario.labels)} if declare_labels and t == 0 else {}
        est.partial_fit_task(np.asarray(X_train)[idx], scenario.relabel(y_train[idx], t), **extra)
        for j in range(t + 1):
            test = test_tasks[j]
            pred = np.asarray(est.predict(X_test[test]))
            accuracy[j, t] = float(np.mean(pred == scenario.relabel(y_test[test], j)))
    wall_time = time.perf_counter() - start
    row["T1 after T1"] = accuracy[0, 0]
    row["T1 after T2"] = accuracy[0, 1]
    row["T2 after T2"] = accuracy[1, 1]
    for name in BASE_SETS:
        row[name] = (base_set_accuracy(est, scenario, X_test, y_test, name)
                     if name in scenario.base_classes_ else float("nan"))
    row["wall_time"] = wall_time
    return pd.DataFrame([row])
