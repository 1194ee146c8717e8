"""Task-order strategies of the SLU continual-learning paper (Sect. 3.4 and 4.3).

The paper orders its tasks in three ways:

- **frequency** (its default): the most populated classes first, "to learn richer
  information in early tasks";
- **close-semantic**: "groups together data instances with similar semantic
  meanings within the same task";
- **diverse-semantic**: "the intents are strategically arranged to ensure a mix of
  semantic meanings", i.e. similar classes are spread over different tasks.

The paper does not give an algorithm for the two semantic orders; these are
reconstructed, with equal-size groups:

- :func:`close_semantic_groups` is greedy agglomeration: the most similar remaining
  pair starts a group, which then takes the remaining class of highest mean
  similarity to its members until it is full.
- :func:`diverse_semantic_groups` first forms ``classes_per_task`` close-semantic
  clusters of ``n_tasks`` classes each, then gives every task one class of each
  cluster: two classes of one close cluster never share a task.

Similarities come from :func:`class_similarity`: the cosine of the class-mean
features (raw inputs, or the embeddings of a fitted estimator's ``transform``), or
a user-given matrix. Ties are broken by a random permutation of the classes drawn
from ``random_state``, so each strategy is deterministic per seed.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

__all__ = [
    "ORDERS",
    "class_similarity",
    "frequency_order",
    "close_semantic_groups",
    "diverse_semantic_groups",
]

#: The ``order`` values of :class:`~clestim.streams.ClassIncremental`.
ORDERS = ("random", "frequency", "close_semantic", "diverse_semantic")


def class_similarity(X, y, classes, similarity=None) -> np.ndarray:
    """The ``(n_classes, n_classes)`` similarity of ``classes`` (in that order).

    Parameters
    ----------
    X : array-like of shape (n_samples, ...) or None
    y : array-like of shape (n_samples,)
    classes : array-like of shape (n_classes,)
    similarity : None, array-like or fitted estimator, default=None
        None: cosine of the class means of the flattened raw ``X``. An estimator
        (anything with ``transform``): cosine of the class means of
        ``similarity.transform(X)``. An array: the similarities themselves, rows and
        columns in the order of ``classes`` (the sorted labels).
    """
    classes = np.asarray(classes)
    n = len(classes)
    if similarity is not None and not hasattr(similarity, "transform"):
        S = np.asarray(similarity, dtype=float)
        if S.shape != (n, n) or not np.isfinite(S).all():
            raise ValueError(
                f"similarity must be a finite ({n}, {n}) matrix over the sorted classes "
                f"{classes.tolist()}; got shape {S.shape}."
            )
        return S
    if X is None:
        raise ValueError("Semantic task orders need X (or a similarity matrix) to compare classes.")
    feats = similarity.transform(X) if similarity is not None else np.asarray(X, dtype=float)
    feats = np.asarray(feats, dtype=float).reshape(len(y), -1)
    y = np.asarray(y)
    means = np.stack([feats[y == c].mean(0) for c in classes])
    means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    return means @ means.T


def _tie_break(n, random_state) -> np.ndarray:
    """A random permutation of ``range(n)``: candidates are scanned in this order."""
    return check_random_state(random_state).permutation(n)


def frequency_order(y, classes, random_state=None) -> np.ndarray:
    """``classes`` sorted by their number of samples in ``y``, most populated first."""
    y = np.asarray(y)
    classes = np.asarray(classes)
    counts = np.array([np.sum(y == c) for c in classes])
    scan = _tie_break(len(classes), random_state)
    return classes[scan[np.argsort(-counts[scan], kind="stable")]]


def close_semantic_groups(S, size, random_state=None) -> list[np.ndarray]:
    """Greedy groups of ``size`` mutually similar indices of the similarity ``S``.

    Returns index arrays, in the order they were formed (the last one is smaller
    when ``size`` does not divide the number of classes).
    """
    S = np.asarray(S, dtype=float)
    scan = _tie_break(len(S), random_state)
    remaining = list(scan)
    groups = []
    while remaining:
        if len(remaining) <= size:
            groups.append(np.array(remaining))
            break
        if size == 1:
            group = [remaining[0]]
        else:
            sub = S[np.ix_(remaining, remaining)].copy()
            np.fill_diagonal(sub, -np.inf)
            a, b = np.unravel_index(np.argmax(sub), sub.shape)
            group = [remaining[a], remaining[b]]
        while len(group) < size:
            rest = [c for c in remaining if c not in group]
            affinity = S[np.ix_(rest, group)].mean(1)
            group.append(rest[int(np.argmax(affinity))])
        groups.append(np.array(group))
        remaining = [c for c in remaining if c not in group]
    return groups


def diverse_semantic_groups(S, size, random_state=None) -> list[np.ndarray]:
    """Groups of ``size`` indices where similar indices land in different groups.

    ``size`` close-semantic clusters of ``n_tasks = n // size`` indices are formed;
    group ``t`` takes the ``t``-th member of every cluster. Left-over indices (when
    ``size`` does not divide ``n``) form a last, smaller group.
    """
    S = np.asarray(S, dtype=float)
    n = len(S)
    n_tasks = n // size
    if n_tasks == 0:
        return [np.arange(n)]
    clusters = close_semantic_groups(S, n_tasks, random_state)
    full = [c for c in clusters if len(c) == n_tasks][:size]
    used = np.concatenate(full)
    groups = [np.array([c[t] for c in full]) for t in range(n_tasks)]
    rest = np.setdiff1d(np.arange(n), used)
    if rest.size:
        groups.append(rest)
    return groups
