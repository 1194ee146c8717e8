"""Continual-learning metrics: pure functions of an accuracy matrix, and scorers.

The accuracy matrix
-------------------
Every metric here is a function of one ``T x T`` matrix ``A`` where ``A[i, j]`` is
the accuracy on the test set of task ``j`` after training task ``i`` (0-based
indices in code, 1-based in the formulas below, as in the papers).

- **Scale: fractions in [0, 1]**, never percentages. A matrix with a value above 1
  is rejected with a hint to divide by 100.
- The diagonal and the lower triangle (tasks already learnt) must be finite.
- The strict upper triangle (tasks not yet learnt) may hold ``NaN`` meaning "not
  evaluated"; only metrics that read it (forward transfer, ``DMI_gen``) require it
  to be finite. Non-square, empty, infinite or out-of-range matrices raise
  ``ValueError``.

Metrics that average over "previous tasks" (forgetting, BWT, FWT) are 0.0 by
convention for a single-task matrix.

The metrics follow the definitions of these papers, quoted in each docstring:

- TSCIL: Qiao et al., "Class-incremental Learning for Time Series: Benchmark and
  Evaluation", KDD 2024, Sect. 4.4, metrics (1)-(3) of its list (A_i, F_i, A_cur;
  the paper's numbered *equations* 1-3 are the learning objective and LwF's losses).
- GEM: Lopez-Paz and Ranzato, "Gradient Episodic Memory for Continual Learning",
  NeurIPS 2017 (BWT, FWT).
- Continuum: Douillard and Lesort, "Continuum: Simple management of complex
  continual learning scenarios", 2021 (FWT without baseline; BWT averaged over
  all pairs).
- SLU: "Evaluating and Improving Continual Learning in Spoken Language
  Understanding" (cur-ACC, last-ACC, DMI).
- iCaRL: Rebuffi et al., CVPR 2017 (average incremental accuracy).
- Video: Villa et al., "A Baseline on Continual Learning Methods for Video Action
  Recognition", 2022 (task- and class-incremental accuracy).

Scorers
-------
:func:`make_stream_scorer` returns a scikit-learn scorer (``scorer(estimator, X,
y)``) that rebuilds the accuracy matrix of a fitted clestim estimator from its
per-task weight snapshots (``predict(X, after_task=i)``) and returns one metric.
Scorers are "greater is better": metrics where lower is better (forgetting) are
negated, as scikit-learn does with ``neg_mean_squared_error``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.utils import _safe_indexing

__all__ = [
    "check_accuracy_matrix",
    "average_accuracy",
    "average_accuracies",
    "average_forgetting",
    "learning_accuracy",
    "current_accuracy",
    "last_accuracy",
    "average_incremental_accuracy",
    "backward_transfer",
    "forward_transfer",
    "DMI",
    "dmi",
    "clustering_accuracy",
    "class_incremental_accuracy",
    "task_incremental_accuracy",
    "compute_metrics",
    "METRICS",
    "BWT_CONVENTIONS",
    "DMI_METRICS",
    "dmi_row",
    "dmi_matrix",
    "snapshot_accuracy_matrix",
    "StreamScorer",
    "make_stream_scorer",
]


# --------------------------------------------------------------------------- validation
def check_accuracy_matrix(A, *, require_upper: bool = False) -> np.ndarray:
    """Validate an accuracy matrix and return it as a float array.

    Parameters
    ----------
    A : array-like of shape (T, T)
        ``A[i, j]``: accuracy in [0, 1] on task ``j`` after training task ``i``.
    require_upper : bool, default=False
        Also require finite values above the diagonal (future tasks).

    Returns
    -------
    ndarray of shape (T, T), dtype float64

    Raises
    ------
    ValueError
        If ``A`` is not a non-empty square matrix, holds infinities, holds ``NaN``
        on or below the diagonal (or above it with ``require_upper``), or holds
        values outside [0, 1].
    """
    try:
        A = np.array(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"The accuracy matrix must be numeric: {exc}") from exc
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(
            f"The accuracy matrix must be a non-empty square T x T array "
            f"(A[i, j] = accuracy on task j after task i); got shape {A.shape}."
        )
    if np.isinf(A).any():
        raise ValueError("The accuracy matrix holds infinite values.")
    lower = np.tril(np.ones(A.shape, dtype=bool))
    if np.isnan(A[lower]).any():
        i, j = np.argwhere(np.isnan(A) & lower)[0]
        raise ValueError(
            f"The accuracy matrix holds NaN at A[{i}, {j}], on or below the diagonal: "
            f"tasks already learnt must be evaluated."
        )
    if require_upper and np.isnan(A[~lower]).any():
        raise ValueError(
            "This metric reads the accuracies on future tasks (above the diagonal), "
            "but the matrix holds NaN there: evaluate future tasks too (class-incremental "
            "evaluation does)."
        )
    finite = A[~np.isnan(A)]
    if finite.size and (finite.min() < 0 or finite.max() > 1):
        hint = (
            " It looks like percentages: clestim uses fractions, divide by 100."
            if finite.min() >= 0 and finite.max() <= 100
            else ""
        )
        raise ValueError(
            f"Accuracies must lie in [0, 1]; got values in [{finite.min()}, {finite.max()}]." + hint
        )
    return A


def _row(A: np.ndarray, task) -> int:
    T = A.shape[0]
    if task is None:
        return T - 1
    if not isinstance(task, (int, np.integer)) or not -T <= task < T:
        raise ValueError(f"task must be an integer index of a row of the {T}x{T} matrix.")
    return int(task) % T


# --------------------------------------------------------------------------- metrics
def average_accuracy(A, task=None) -> float:
    r"""Average accuracy :math:`\mathcal{A}_i` after learning task ``i`` (TSCIL Sect. 4.4, (1)).

    .. math:: \mathcal{A}_i = \frac{1}{i} \sum_{j=1}^{i} a_{i,j}

    The mean accuracy over the tasks learnt so far. With ``task=None`` it is the
    final average accuracy :math:`\mathcal{A}_T` (identical to SLU's last-ACC).

    Parameters
    ----------
    A : array-like of shape (T, T)
        Accuracy matrix, fractions in [0, 1].
    task : int, default=None
        0-based row ``i - 1``; None for the last row.

    Examples
    --------
    >>> average_accuracy([[0.9, 0.1], [0.6, 0.8]])
    0.7
    """
    A = check_accuracy_matrix(A)
    i = _row(A, task)
    return float(A[i, : i + 1].mean())


def average_accuracies(A) -> np.ndarray:
    r"""The evolution :math:`(\mathcal{A}_1, \dots, \mathcal{A}_T)` of average accuracy."""
    A = check_accuracy_matrix(A)
    return np.array([A[i, : i + 1].mean() for i in range(A.shape[0])])


def average_forgetting(A, task=None, convention="paper") -> float:
    r"""Average forgetting :math:`\mathcal{F}_i` (Chaudhry et al. 2018; TSCIL Sect. 4.4, (2)).

    .. math::

        \mathcal{F}_i = \frac{1}{i-1} \sum_{j=1}^{i-1} f_{i,j}, \qquad
        f_{i,j} = \max_{k \in K_{i,j}} a_{k,j} - a_{i,j}

    - ``convention='paper'`` (default): :math:`K_{i,j} = \{j, \dots, i-1\}`, the
      paper's formula ("max over k in {1..i-1}") read over the rows where task
      ``j`` had been learnt. :math:`f_{i,j}` is negative when accuracy on an old
      task improved.
    - ``convention='tscil'``: :math:`K_{i,j} = \{j, \dots, i\}`, the max over all
      rows up to and including row ``i``, as TSCIL's code computes it; then
      :math:`f_{i,j} \ge 0`.

    Entries above the diagonal are never read (TSCIL's code leaves them 0).
    Lower is better. 0.0 for ``i = 1``.

    Parameters
    ----------
    A : array-like of shape (T, T)
    task : int, default=None
        0-based row; None for :math:`\mathcal{F}_T`.
    convention : {'paper', 'tscil'}, default='paper'

    Examples
    --------
    >>> A = [[0.9, 0.0], [0.95, 0.8]]
    >>> round(average_forgetting(A), 10), average_forgetting(A, convention="tscil")
    (-0.05, 0.0)
    """
    if convention not in ("paper", "tscil"):
        raise ValueError(f"convention must be 'paper' or 'tscil'; got {convention!r}.")
    A = check_accuracy_matrix(A)
    i = _row(A, task)
    if i == 0:
        return 0.0
    stop = i if convention == "paper" else i + 1
    f = [A[j:stop, j].max() - A[i, j] for j in range(i)]
    return float(np.mean(f))


def learning_accuracy(A) -> float:
    r"""Average learning accuracy :math:`\mathcal{A}_{cur}` (Riemer et al. 2019;
    TSCIL Sect. 4.4, (3)).

    .. math:: \mathcal{A}_{cur} = \frac{1}{T} \sum_{i=1}^{T} a_{i,i}

    The mean accuracy on each task right after learning it (plasticity). Equal to
    SLU's cur-ACC at ``t = T``.
    """
    A = check_accuracy_matrix(A)
    return float(np.diag(A).mean())


def current_accuracy(A, task=None) -> float:
    r"""cur-ACC of the SLU paper: mean of the diagonal up to task ``t``.

    .. math:: \text{cur-ACC}_t = \frac{1}{t} \sum_{i=1}^{t} \mathbf{A}_{i,i}

    With ``task=None`` (``t = T``) it equals :func:`learning_accuracy`.
    """
    A = check_accuracy_matrix(A)
    t = _row(A, task)
    return float(np.diag(A)[: t + 1].mean())


def last_accuracy(A) -> float:
    r"""last-ACC of the SLU paper: mean accuracy over all tasks after the last task.

    .. math:: \text{last-ACC} = \frac{1}{T} \sum_{j=1}^{T} \mathbf{A}_{T,j}

    Identical to the final average accuracy :math:`\mathcal{A}_T`.
    """
    return average_accuracy(A)


def average_incremental_accuracy(A) -> float:
    r"""Average incremental accuracy (Rebuffi et al., iCaRL, CVPR 2017).

    .. math:: \bar{\mathcal{A}} = \frac{1}{T} \sum_{i=1}^{T} \mathcal{A}_i,
        \qquad \mathcal{A}_i = \frac{1}{i}\sum_{j=1}^{i} a_{i,j}
    """
    return float(average_accuracies(A).mean())


def backward_transfer(A, convention="gem") -> float:
    r"""Backward transfer, BWT, in two conventions.

    - ``convention='gem'`` (default): the last row only, GEM's Eq. 3 (Lopez-Paz and
      Ranzato, NeurIPS 2017):

      .. math:: \text{BWT} = \frac{1}{T-1} \sum_{i=1}^{T-1} (a_{T,i} - a_{i,i})

    - ``convention='all_pairs'``: the mean over every pair :math:`i > j`, as the SLU
      paper (Sect. 2.2) describes it and the Continuum library computes it
      (``'continuum'`` is an alias):

      .. math:: \text{BWT} = \frac{2}{T(T-1)} \sum_{i=2}^{T} \sum_{j=1}^{i-1}
          (a_{i,j} - a_{j,j})

    Negative values mean forgetting; higher is better. 0.0 for ``T = 1``.

    Examples
    --------
    >>> A = [[0.9, 0.0, 0.0], [0.5, 0.8, 0.0], [0.6, 0.4, 0.7]]
    >>> round(backward_transfer(A), 6)  # ((0.6 - 0.9) + (0.4 - 0.8)) / 2
    -0.35
    >>> round(backward_transfer(A, "all_pairs"), 6)  # (-0.4 - 0.3 - 0.4) / 3
    -0.366667
    """
    if convention not in BWT_CONVENTIONS:
        raise ValueError(f"convention must be one of {BWT_CONVENTIONS}; got {convention!r}.")
    A = check_accuracy_matrix(A)
    T = A.shape[0]
    if T == 1:
        return 0.0
    d = np.diag(A)
    if convention == "gem":
        return float(np.mean(A[-1, :-1] - d[:-1]))
    diffs = [A[i, j] - d[j] for i in range(1, T) for j in range(i)]
    return float(np.mean(diffs))


#: Accepted ``convention`` values of :func:`backward_transfer`.
BWT_CONVENTIONS = ("gem", "all_pairs", "continuum")


def forward_transfer(A, baseline=None) -> float:
    r"""Forward transfer, FWT.

    - With ``baseline`` ``b`` (GEM, Lopez-Paz and Ranzato 2017, Eq. 4), where
      ``b[i]`` is the accuracy on task ``i`` of the model at random initialisation
      (the SLU paper's zero-shot :math:`\bar{\mathbf{A}}_i`):

      .. math:: \text{FWT} = \frac{1}{T-1} \sum_{i=2}^{T} (a_{i-1,i} - b_i)

    - Without baseline (Continuum's ``forward_transfer``):

      .. math:: \text{FWT} = \frac{1}{T-1} \sum_{i=2}^{T} a_{i-1,i}

    Reads the first superdiagonal, which must be finite. In class-incremental
    learning a head that does not know task ``i``'s classes scores 0 there by
    construction: :func:`clestim.evaluation.evaluate_stream` then reports ``NaN``
    (and measures the zero-shot ``b`` itself where FWT is defined).
    Higher is better. 0.0 for ``T = 1``.

    Parameters
    ----------
    A : array-like of shape (T, T)
    baseline : array-like of shape (T,), default=None
        Accuracies of the randomly initialised model on each task; ``b[0]`` is not
        used.
    """
    A = check_accuracy_matrix(A)
    T = A.shape[0]
    if T == 1:
        return 0.0
    sup = np.array([A[i - 1, i] for i in range(1, T)])
    if np.isnan(sup).any():
        raise ValueError(
            "forward_transfer reads A[i-1, i] (accuracy on the next task before learning "
            "it), but the matrix holds NaN there."
        )
    if baseline is None:
        return float(sup.mean())
    b = np.asarray(baseline, dtype=float)
    if b.shape != (T,):
        raise ValueError(f"baseline must hold one accuracy per task, shape ({T},); got {b.shape}.")
    if not np.isfinite(b).all() or b.min() < 0 or b.max() > 1:
        raise ValueError("baseline accuracies must be finite fractions in [0, 1].")
    return float(np.mean(sup - b[1:]))


class DMI(NamedTuple):
    """The three scores of the Dual-transfer Matching Index."""

    stability: float
    plasticity: float
    generalizability: float


def dmi(A) -> DMI:
    r"""Dual-transfer Matching Index (SLU paper, Sect. "DMI").

    The SLU paper fills the matrix with *clustering* accuracies (k-means on the
    model's embeddings of all samples, matched to the true labels with the
    Hungarian algorithm, see :func:`clustering_accuracy`) and reports the mean of
    three regions of it:

    .. math::

        \text{DMI}_{stab} = \operatorname{mean}_{i > j} \mathbf{A}_{i,j}, \quad
        \text{DMI}_{plas} = \operatorname{mean}_{i} \mathbf{A}_{i,i}, \quad
        \text{DMI}_{gen} = \operatorname{mean}_{i < j} \mathbf{A}_{i,j}

    (past tasks, current task, future tasks). The paper's formulas are not in the
    text we have; the regions follow its Figure 2 description. This function
    computes the three means of whatever matrix it is given; build the matrix of
    a fitted model with :func:`dmi_matrix` to reproduce the paper. Needs ``T >= 2``.

    Returns
    -------
    DMI
        ``(stability, plasticity, generalizability)``.
    """
    A = check_accuracy_matrix(A, require_upper=True)
    T = A.shape[0]
    if T < 2:
        raise ValueError("DMI needs at least 2 tasks (past and future regions).")
    return DMI(
        stability=float(A[np.tril_indices(T, -1)].mean()),
        plasticity=float(np.diag(A).mean()),
        generalizability=float(A[np.triu_indices(T, 1)].mean()),
    )


def clustering_accuracy(y_true, clusters) -> float:
    r"""Accuracy of a class-agnostic assignment after Hungarian matching (SLU DMI).

    .. math:: \max_{m} \frac{1}{N} \sum_{n=1}^{N} \mathbb{1}[m(k_n) = y_n]

    over one-to-one maps ``m`` from cluster ids to labels (Kuhn 1955), solved with
    :func:`scipy.optimize.linear_sum_assignment`.

    Examples
    --------
    >>> clustering_accuracy([0, 0, 1, 1, 2], [5, 5, 3, 3, 3])
    0.8
    """
    y_true = np.asarray(y_true)
    clusters = np.asarray(clusters)
    if y_true.shape != clusters.shape or y_true.ndim != 1 or y_true.size == 0:
        raise ValueError("y_true and clusters must be non-empty 1-D arrays of the same length.")
    labels, yi = np.unique(y_true, return_inverse=True)
    ks, ki = np.unique(clusters, return_inverse=True)
    counts = np.zeros((len(ks), len(labels)), dtype=np.int64)
    np.add.at(counts, (ki, yi), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / y_true.size)


# --------------------------------------------------------------------------- predictions
def _task_masks(y_true, task_classes):
    y_true = np.asarray(y_true)
    masks = [np.isin(y_true, np.asarray(c)) for c in task_classes]
    if not any(m.any() for m in masks):
        raise ValueError("No sample of y_true belongs to any of the tasks.")
    return y_true, masks


def class_incremental_accuracy(y_true, y_pred, task_classes) -> float:
    r"""Class-incremental accuracy (Villa et al. 2022, Sect. 4.2).

    For each task, the accuracy of the predictions over *all* classes on that
    task's samples; averaged over the tasks that have test samples:

    .. math:: \frac{1}{|J|} \sum_{j \in J} \frac{1}{|D_j|} \sum_{(x,y) \in D_j}
        \mathbb{1}[\hat{y}(x) = y]

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    task_classes : list of array-like
        The classes of each task.
    """
    y_true, masks = _task_masks(y_true, task_classes)
    y_pred = np.asarray(y_pred)
    if y_pred.shape != y_true.shape:
        raise ValueError("y_true and y_pred must have the same shape.")
    return float(np.mean([(y_pred[m] == y_true[m]).mean() for m in masks if m.any()]))


def task_incremental_accuracy(y_true, scores, classes, task_classes) -> float:
    r"""Task-incremental accuracy (Villa et al. 2022, Sect. 4.2).

    For each task, predictions restricted to that task's classes (the task label is
    known at test time): :math:`\hat{y}(x) = \arg\max_{c \in C_j} s_c(x)`;
    accuracies are averaged over the tasks that have test samples.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    scores : array-like of shape (n_samples, n_classes)
        Class scores or probabilities; column ``k`` belongs to ``classes[k]``.
    classes : array-like of shape (n_classes,)
    task_classes : list of array-like
    """
    y_true, masks = _task_masks(y_true, task_classes)
    scores = np.asarray(scores, dtype=float)
    classes = np.asarray(classes)
    if scores.ndim != 2 or scores.shape != (y_true.shape[0], classes.shape[0]):
        raise ValueError(
            f"scores must have shape (n_samples, n_classes) = ({y_true.shape[0]}, "
            f"{classes.shape[0]}); got {scores.shape}."
        )
    accs = []
    for m, tc in zip(masks, task_classes):
        if not m.any():
            continue
        cols = np.flatnonzero(np.isin(classes, np.asarray(tc)))
        if cols.size == 0:
            raise ValueError(f"None of the classes {list(tc)} of a task is among `classes`.")
        pred = classes[cols[np.argmax(scores[m][:, cols], axis=1)]]
        accs.append((pred == y_true[m]).mean())
    return float(np.mean(accs))


# --------------------------------------------------------------------------- registry
#: name -> (function of A, greater_is_better)
METRICS = {
    "average_accuracy": (average_accuracy, True),
    "average_forgetting": (average_forgetting, False),
    "learning_accuracy": (learning_accuracy, True),
    "average_incremental_accuracy": (average_incremental_accuracy, True),
    "backward_transfer": (backward_transfer, True),
    "backward_transfer_gem": (partial(backward_transfer, convention="gem"), True),
    "backward_transfer_all_pairs": (partial(backward_transfer, convention="all_pairs"), True),
    "forward_transfer": (forward_transfer, True),
    "current_accuracy": (current_accuracy, True),
    "last_accuracy": (last_accuracy, True),
}


#: The three DMI scores, as ``compute_metrics`` and the scorers name them.
DMI_METRICS = ("dmi_stability", "dmi_plasticity", "dmi_generalisation")


def compute_metrics(
    A, forgetting_convention="paper", fwt_baseline=None, clustering_matrix=None
) -> dict:
    """All registered metrics of one accuracy matrix, as a dict of floats.

    - ``backward_transfer`` is GEM's last-row BWT (kept for older reports);
      ``backward_transfer_gem`` and ``backward_transfer_all_pairs`` name both
      conventions of :func:`backward_transfer` explicitly.
    - ``forward_transfer`` is ``NaN`` when the superdiagonal was not evaluated.
    - With ``clustering_matrix`` (the DMI matrix of :func:`dmi_matrix`), the keys
      of :data:`DMI_METRICS` are added.
    """
    A = check_accuracy_matrix(A)
    out = {}
    for name, (fn, _) in METRICS.items():
        if name == "average_forgetting":
            out[name] = fn(A, convention=forgetting_convention)
        elif name == "forward_transfer":
            try:
                out[name] = fn(A, baseline=fwt_baseline)
            except ValueError:
                out[name] = float("nan")
        else:
            out[name] = fn(A)
    if clustering_matrix is not None:
        out.update(zip(DMI_METRICS, dmi(clustering_matrix)))
    return out


# --------------------------------------------------------------------------- DMI from a model
def dmi_row(embeddings, y, masks, *, n_clusters=None, random_state=0, n_init=10) -> np.ndarray:
    r"""One row of the DMI matrix: k-means on the embeddings of all samples, one
    Hungarian mapping of clusters to labels, the matched accuracy per task.

    Parameters
    ----------
    embeddings : array-like of shape (n_samples, n_features)
        The embeddings of every test sample (seen and unseen tasks) by one snapshot.
    y : array-like of shape (n_samples,)
    masks : list of boolean arrays of shape (n_samples,)
        The samples of each task.
    n_clusters : int, default=None
        K; the number of distinct labels in ``y`` by default (the SLU paper's
        "total number of classes").
    random_state : int, default=0
        Seed of :class:`sklearn.cluster.KMeans`.
    n_init : int, default=10
        k-means restarts.

    Returns
    -------
    ndarray of shape (len(masks),)
        ``A_dmi[i, j]`` for each task ``j``.
    """
    from sklearn.cluster import KMeans

    y = np.asarray(y)
    embeddings = np.asarray(embeddings, dtype=np.float64)
    if embeddings.ndim != 2 or len(embeddings) != len(y):
        raise ValueError(
            f"embeddings must have shape (n_samples, n_features) with n_samples = {len(y)}; "
            f"got {embeddings.shape}."
        )
    labels, yi = np.unique(y, return_inverse=True)
    k = len(labels) if n_clusters is None else int(n_clusters)
    if not 1 <= k <= len(y):
        raise ValueError(f"n_clusters must lie in [1, n_samples={len(y)}]; got {k}.")
    clusters = KMeans(k, n_init=n_init, random_state=random_state).fit_predict(embeddings)
    counts = np.zeros((k, len(labels)), dtype=np.int64)
    np.add.at(counts, (clusters, yi), 1)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    mapping = np.full(k, -1)  # clusters left unmatched (k > labels) count as wrong
    mapping[rows] = cols
    correct = mapping[clusters] == yi
    return np.array([correct[m].mean() if np.any(m) else np.nan for m in masks])


def dmi_matrix(estimator, X, y, task_classes=None, *, random_state=0, n_init=10) -> np.ndarray:
    r"""The DMI matrix of a fitted clestim estimator (SLU paper, Sect. 3.1).

    For each weight snapshot ``i`` (``estimator.transform(X, after_task=i)``) all
    test samples, of seen and unseen tasks, are embedded; k-means with K = the total
    number of classes groups them; the Hungarian algorithm
    (:func:`scipy.optimize.linear_sum_assignment`) maps clusters to labels once per
    snapshot, over all samples; ``A_dmi[i, j]`` is the matched accuracy on task
    ``j``'s samples. :func:`dmi` reads the three scores off it.

    What the paper specifies: k-means on the embeddings of all N samples with K
    clusters, Hungarian maximum matching against the ground truth, the matched
    accuracies filling the matrix, the three regions. What is reconstructed: the
    embedding is the backbone's output (the head's input, ``transform``), the
    analogue of the paper's "predicted intent class embeddings"; k-means is
    scikit-learn's (k-means++, ``n_init`` restarts, seeded) on raw embeddings; the
    mapping is one-to-one over all samples, and accuracy on a task is the share of
    its samples whose cluster maps to their label.

    Parameters
    ----------
    estimator : fitted clestim estimator
        With ``transform(X, after_task=i)`` and ``task_classes_``.
    X : array-like
        Test inputs; samples of classes outside ``task_classes`` are ignored.
    y : array-like of shape (n_samples,)
    task_classes : list of array-like, default=None
        The classes of each task; the estimator's ``task_classes_`` by default. One
        row per snapshot, so there must be as many tasks as snapshots.
    random_state : int, default=0
    n_init : int, default=10

    Returns
    -------
    ndarray of shape (T, T)
    """
    if task_classes is None:
        task_classes = getattr(estimator, "task_classes_", None)
        if task_classes is None:
            raise ValueError("The estimator is not fitted (no task_classes_).")
    T = len(task_classes)
    n_seen = getattr(estimator, "n_tasks_seen_", None)
    if n_seen != T:
        raise ValueError(
            f"dmi_matrix needs one snapshot per task: {T} tasks but the estimator has learnt "
            f"{n_seen}."
        )
    y = np.asarray(y)
    masks = [np.isin(y, np.asarray(c)) for c in task_classes]
    keep = np.flatnonzero(np.any(masks, axis=0))
    for j, m in enumerate(masks):
        if not m.any():
            raise ValueError(f"The test data holds no sample of task {j}.")
    Xk, yk = _safe_indexing(X, keep), y[keep]
    masks = [m[keep] for m in masks]
    return np.stack(
        [
            dmi_row(
                estimator.transform(Xk, after_task=i), yk, masks,
                random_state=random_state, n_init=n_init,
            )
            for i in range(T)
        ]
    )


# --------------------------------------------------------------------------- scorers
def snapshot_accuracy_matrix(estimator, X, y, mode="class") -> np.ndarray:
    """Rebuild the accuracy matrix of a fitted clestim estimator on test data.

    Test tasks are defined by the estimator's ``task_classes_``: a sample belongs
    to the task that introduced its class. Row ``i`` uses the weight snapshot taken
    after task ``i`` (``predict(X, after_task=i)``).

    Parameters
    ----------
    estimator : fitted clestim estimator
        Must expose ``task_classes_`` and ``predict(X, task=None, after_task=None)``.
    X : array-like
        Test inputs; samples of classes never learnt are ignored.
    y : array-like of shape (n_samples,)
    mode : {'class', 'task'}, default='class'
        ``'class'``: class-incremental, predictions over every class of the head at
        that time; future tasks are evaluated too (their unseen classes count as
        wrong). ``'task'``: task-incremental, ``predict(X, task=j)`` restricted to
        task ``j``'s classes; future tasks are ``NaN``.

    Returns
    -------
    ndarray of shape (T, T)
    """
    if mode not in ("class", "task"):
        raise ValueError(f"mode must be 'class' or 'task'; got {mode!r}.")
    task_classes = getattr(estimator, "task_classes_", None)
    if task_classes is None:
        raise ValueError(
            "The estimator is not fitted (no task_classes_): fit it on a stream first."
        )
    flat = np.concatenate([np.asarray(c) for c in task_classes])
    if len(np.unique(flat)) != len(flat):
        raise ValueError(
            "The estimator's tasks share classes, so test samples cannot be assigned to one "
            "task by their label; use clestim.evaluation.evaluate_stream with a stream that "
            "defines test tasks (e.g. DomainIncremental with groups)."
        )
    y = np.asarray(y)
    T = len(task_classes)
    masks = [np.isin(y, np.asarray(c)) for c in task_classes]
    for j, m in enumerate(masks):
        if not m.any():
            raise ValueError(
                f"The test data holds no sample of task {j} (classes "
                f"{np.asarray(task_classes[j]).tolist()}); every learnt task needs test samples."
            )
    A = np.full((T, T), np.nan)
    if mode == "class":
        keep = np.flatnonzero(np.any(masks, axis=0))
        Xk, yk = _safe_indexing(X, keep), y[keep]
        for i in range(T):
            pred = np.asarray(estimator.predict(Xk, after_task=i))
            for j in range(T):
                mj = masks[j][keep]
                A[i, j] = np.mean(pred[mj] == yk[mj])
    else:
        for j in range(T):
            idx = np.flatnonzero(masks[j])
            Xj, yj = _safe_indexing(X, idx), y[idx]
            for i in range(j, T):
                A[i, j] = np.mean(np.asarray(estimator.predict(Xj, task=j, after_task=i)) == yj)
    return A


class StreamScorer:
    """A scikit-learn scorer computing one accuracy-matrix metric.

    Call it as ``scorer(estimator, X, y)``; see :func:`make_stream_scorer`.
    """

    def __init__(self, metric, sign, mode="class", kwargs=None):
        self.metric = metric
        self.sign = sign
        self.mode = mode
        self.kwargs = dict(kwargs or {})

    def __call__(self, estimator, X, y, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("Stream scorers do not support sample_weight.")
        if self.metric in DMI_METRICS:
            scores = dmi(dmi_matrix(estimator, X, y, **self.kwargs))
            return self.sign * scores[DMI_METRICS.index(self.metric)]
        A = snapshot_accuracy_matrix(estimator, X, y, mode=self.mode)
        fn = METRICS[self.metric][0]
        return self.sign * fn(A, **self.kwargs)

    def __repr__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self.kwargs.items())
        sign = "" if self.sign > 0 else ", greater_is_better=False"
        return f"make_stream_scorer({self.metric!r}{sign}, mode={self.mode!r}{extra})"


def make_stream_scorer(metric, *, mode="class", **kwargs) -> StreamScorer:
    """Make a scikit-learn scorer from an accuracy-matrix metric.

    The scorer rebuilds the accuracy matrix of a fitted clestim estimator on the
    data it is given (:func:`snapshot_accuracy_matrix`) and returns the metric.
    Metrics where lower is better (``'average_forgetting'``) are negated so that
    the scorer is greater-is-better, as scikit-learn expects for ``GridSearchCV``.

    Parameters
    ----------
    metric : str
        One of ``METRICS``: ``'average_accuracy'``, ``'average_forgetting'``,
        ``'learning_accuracy'``, ``'average_incremental_accuracy'``,
        ``'backward_transfer'`` (also ``'backward_transfer_gem'``,
        ``'backward_transfer_all_pairs'``), ``'forward_transfer'``,
        ``'current_accuracy'``, ``'last_accuracy'``; or one of :data:`DMI_METRICS`
        (``'dmi_stability'``, ``'dmi_plasticity'``, ``'dmi_generalisation'``), which
        read the DMI matrix of :func:`dmi_matrix` (k-means per snapshot) instead.
    mode : {'class', 'task'}, default='class'
        Class- or task-incremental evaluation.
    **kwargs
        Passed to the metric (``convention='tscil'``, ``baseline=...``), or to
        :func:`dmi_matrix` for the DMI scores (``random_state``, ``n_init``).

    Examples
    --------
    >>> scorer = make_stream_scorer("average_forgetting", convention="tscil")
    >>> scorer
    make_stream_scorer('average_forgetting', greater_is_better=False, mode='class', \
convention='tscil')
    """
    if metric not in METRICS and metric not in DMI_METRICS:
        raise ValueError(
            f"Unknown metric {metric!r}; choose one of {sorted(METRICS) + list(DMI_METRICS)}."
        )
    if mode not in ("class", "task"):
        raise ValueError(f"mode must be 'class' or 'task'; got {mode!r}.")
    sign = 1.0 if metric in DMI_METRICS or METRICS[metric][1] else -1.0
    return StreamScorer(metric, sign, mode, kwargs)
