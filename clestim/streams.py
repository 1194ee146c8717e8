"""Task streams: scikit-learn-style splitters that cut a data set into tasks.

A *stream* turns one labelled data set into an ordered sequence of tasks. Every
stream follows the scikit-learn splitter protocol:

- ``split(X, y, groups=None)`` yields, in task order, the integer indices of the
  training samples of each task;
- ``get_n_splits(X=None, y=None, groups=None)`` returns the number of tasks;
- ``task_classes(y, groups=None)`` returns the class groups (a list of label arrays,
  one per task) without side effects.

After ``split`` a stream carries fitted attributes (``task_classes_`` and, where it
applies, ``class_order_``) describing the tasks it produced. Two further methods let
an evaluation loop (:func:`clestim.evaluation.evaluate_stream`) build *test* tasks
under the same definition:

- ``task_indices(y, groups=None)``: the indices of the samples of each task under
  the fitted task definition, without any leakage or blurring. For class-incremental
  streams a sample belongs to the task of its class; for domain-incremental streams
  to the task of its group.
- ``relabel(y, task)``: the labels the samples carry in ``task``. It is the identity
  everywhere except in the two-task basic scenarios, where a sample can change label
  between tasks.

Streams hold only parameters in ``__init__`` and derive everything from
``random_state``: with an integer ``random_state`` two calls of ``split`` give the
same tasks. All splitters are cloneable with :func:`sklearn.base.clone`.

Available streams
-----------------
ClassIncremental
    Disjoint class groups (the TSCIL protocol, Qiao et al. 2024).
Blurry
    Class-incremental groups where a fraction of the samples leaks into other tasks
    (the "blurry" setting of Aljundi et al. 2019; Bang et al. 2021).
DomainIncremental
    Tasks defined by ``groups`` (subjects, sessions, sensors).
TaskPool
    The video-action-recognition protocol (Villa et al. 2022): the classes are split
    into a pool of tasks of ``c`` classes; ``E`` problems of ``T`` tasks are sampled
    from the pool.
StreamPart, validation_experiment_split
    The validation/experiment split of a stream (Chaudhry et al. 2018; TSCIL uses
    the first 3 tasks for tuning when a stream has more than 4 tasks).
BasicScenario
    The two-task scenarios ADD, EXP, INC and SEP of Szadkowski et al. (2019), where
    a sample may be presented in both tasks with different labels.
"""

from __future__ import annotations

import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Iterator, Sequence

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import _num_samples

__all__ = [
    "BaseStream",
    "ClassIncremental",
    "Blurry",
    "DomainIncremental",
    "TaskPool",
    "StreamPart",
    "validation_experiment_split",
    "BasicScenario",
    "unique_in_order",
]

_REMAINDER_POLICIES = ("error", "last", "drop")


# --------------------------------------------------------------------------- helpers
def unique_in_order(values) -> np.ndarray:
    """Return the distinct values of ``values`` in order of first appearance.

    Parameters
    ----------
    values : array-like of shape (n_samples,)

    Returns
    -------
    ndarray
        The distinct values, ordered by the position of their first occurrence.

    Examples
    --------
    >>> unique_in_order([3, 1, 3, 2, 1]).tolist()
    [3, 1, 2]
    """
    values = np.asarray(values)
    if values.size == 0:
        return values[:0]
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


def _check_y(X, y) -> np.ndarray:
    if y is None:
        raise ValueError("This stream needs the labels y to define its tasks; got y=None.")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got an array of shape {y.shape}.")
    if y.shape[0] == 0:
        raise ValueError("y is empty: a stream needs at least one sample.")
    if X is not None and _num_samples(X) != y.shape[0]:
        raise ValueError(
            f"X and y have inconsistent numbers of samples: {_num_samples(X)} != {y.shape[0]}."
        )
    return y


def _check_groups(groups, n_samples: int, name: str) -> np.ndarray:
    if groups is None:
        raise ValueError(f"{name} defines its tasks by `groups`; got groups=None.")
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.shape[0] != n_samples:
        raise ValueError(
            f"groups must be one-dimensional with one entry per sample ({n_samples}); "
            f"got shape {groups.shape}."
        )
    return groups


def _is_nested(order) -> bool:
    return len(order) > 0 and all(
        isinstance(g, (Sequence, np.ndarray)) and not isinstance(g, str) for g in order
    )


def _plural(what: str) -> str:
    return what + ("es" if what.endswith("s") else "s")


def _check_explicit_order(order, known: np.ndarray, what: str):
    """Validate an explicit order: flat (``[3, 1, 2]``) or nested (``[[3, 1], [2]]``).

    Returns ``(groups, nested)``: the explicit groups when nested, else a one-element
    list holding the flat order.
    """
    nested = _is_nested(order)
    groups = [np.asarray(g) for g in order] if nested else [np.asarray(order)]
    if any(g.ndim != 1 or g.size == 0 for g in groups):
        raise ValueError(f"Each task of an explicit {what} order must be a non-empty 1-D list.")
    flat = np.concatenate(groups).tolist()
    seen: set = set()
    for v in flat:
        if v in seen:
            raise ValueError(
                f"The explicit {what} order names {what} {v!r} more than once: the tasks of "
                f"this stream must be disjoint (overlapping tasks are not allowed)."
            )
        seen.add(v)
    known_list = known.tolist()
    known_set = set(known_list)
    unknown = [v for v in flat if v not in known_set]
    if unknown:
        raise ValueError(
            f"The explicit {what} order names {_plural(what)} that do not occur in the data: "
            f"{unknown}. Known {_plural(what)}: {known_list}."
        )
    missing = [v for v in known_list if v not in seen]
    if missing:
        raise ValueError(
            f"The explicit {what} order misses {_plural(what)} {missing} that occur in the "
            f"data; every {what} must be assigned to a task (list them, or drop their "
            f"samples first)."
        )
    if known.dtype.kind != "O":
        groups = [g.astype(known.dtype) for g in groups]
    return groups, nested


def _chunk(order: np.ndarray, n_tasks, per_task, remainder: str, what: str) -> list[np.ndarray]:
    """Cut ``order`` into equal consecutive chunks following the remainder policy."""
    if remainder not in _REMAINDER_POLICIES:
        raise ValueError(f"remainder must be one of {_REMAINDER_POLICIES}; got {remainder!r}.")
    n = len(order)
    whats = _plural(what)
    if n_tasks is not None:
        if not isinstance(n_tasks, numbers.Integral) or n_tasks < 1:
            raise ValueError(f"n_tasks must be a positive integer; got {n_tasks!r}.")
        if n_tasks > n:
            raise ValueError(
                f"n_tasks={n_tasks} is larger than the number of {whats} available ({n}): "
                f"every task needs at least one {what}."
            )
        size, rest = divmod(n, n_tasks)
        n_full = n_tasks
    else:
        if not isinstance(per_task, numbers.Integral) or per_task < 1:
            raise ValueError(f"{whats}_per_task must be a positive integer; got {per_task!r}.")
        if per_task > n and remainder == "last" and n:
            return [order]  # all are left over: one task holds them
        if per_task > n:
            raise ValueError(
                f"{whats}_per_task={per_task} is larger than the number of {whats} available ({n})."
            )
        size = per_task
        n_full, rest = divmod(n, per_task)
    if rest and remainder == "error":
        raise ValueError(
            f"{n} {whats} do not divide evenly into tasks of {size} {whats} "
            f"({n_full} tasks, {rest} left over). Pass remainder='last' to put the "
            f"left-over {whats} into the last task, remainder='drop' to leave them out of "
            f"the stream, or choose a divisor of {n}."
        )
    chunks = [order[k * size : (k + 1) * size] for k in range(n_full)]
    if rest and remainder == "last":
        chunks[-1] = order[(n_full - 1) * size :]
    return chunks


def _indices_of(values: np.ndarray, groups: list[np.ndarray]) -> list[np.ndarray]:
    return [np.flatnonzero(np.isin(values, g)) for g in groups]


# --------------------------------------------------------------------------- base
class BaseStream(BaseEstimator, metaclass=ABCMeta):
    """Base class of clestim streams (scikit-learn splitter protocol).

    Subclasses implement :meth:`_make_tasks`, which returns the list of training
    index arrays and the class groups, and set their fitted attributes there.
    """

    def split(self, X, y, groups=None) -> Iterator[np.ndarray]:
        """Yield the indices of the samples of each task, in task order.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) or None
            Only its length is checked against ``y``.
        y : array-like of shape (n_samples,)
            The labels.
        groups : array-like of shape (n_samples,), default=None
            Group labels (needed by :class:`DomainIncremental`).

        Yields
        ------
        indices : ndarray of int
            The sorted indices of one task's samples.
        """
        tasks = self._make_tasks(X, y, groups)
        yield from tasks

    def get_n_splits(self, X=None, y=None, groups=None) -> int:
        """Return the number of tasks of the stream for these data."""
        if y is None and groups is None:
            n = self._n_tasks_without_data()
            if n is not None:
                return n
            if hasattr(self, "task_classes_"):
                return len(self.task_classes_)
            raise ValueError(
                f"{type(self).__name__}.get_n_splits needs y (or groups) unless n_tasks is "
                f"given or the stream was split before."
            )
        return len(clone(self)._make_tasks(X, y, groups))

    def task_classes(self, y, groups=None) -> list[np.ndarray]:
        """Return the labels of each task, one array per task, without fitting.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        list of ndarray
        """
        probe = clone(self)
        probe._make_tasks(None, y, groups)
        return probe.task_classes_

    def task_indices(self, y, groups=None) -> list[np.ndarray]:
        """Indices of the samples of each task under the fitted task definition.

        Used to build the *test* tasks: no shuffling, leakage or blurring is applied;
        a class-incremental stream assigns each sample to the task of its class.
        Samples that belong to no task are left out.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), default=None

        Returns
        -------
        list of ndarray of int
        """
        self._check_fitted()
        y = _check_y(None, y)
        return _indices_of(y, self.task_classes_)

    def relabel(self, y, task: int) -> np.ndarray:
        """Labels that samples with original labels ``y`` carry in ``task``.

        The identity for every stream except :class:`BasicScenario`.
        """
        return np.asarray(y)

    # -- helpers for subclasses
    def _n_tasks_without_data(self):
        return None

    def _is_deterministic(self) -> bool:
        """Whether two ``split`` calls on the same data give the same tasks."""
        if not self._uses_randomness():
            return True
        return isinstance(getattr(self, "random_state", None), numbers.Integral)

    def _uses_randomness(self) -> bool:
        return False

    def _check_fitted(self):
        if not hasattr(self, "task_classes_"):
            raise ValueError(
                f"This {type(self).__name__} has not been split yet: call split(X, y) on the "
                f"training data first, so that the test tasks follow the same definition."
            )

    @abstractmethod
    def _make_tasks(self, X, y, groups):
        """The training index arrays of the tasks (and the fitted attributes)."""


# --------------------------------------------------------------------------- class-IL
class ClassIncremental(BaseStream):
    """Class-incremental stream: disjoint groups of classes, one group per task.

    Parameters
    ----------
    n_tasks : int, default=None
        Number of tasks. When given it takes precedence and ``classes_per_task`` is
        ignored: each task gets ``n_classes // n_tasks`` classes.
    classes_per_task : int, default=2
        Number of classes per task when ``n_tasks`` is None (TSCIL uses 2).
    class_order : sequence, default=None
        Explicit class order. A flat list (``[3, 0, 1, 2]``) is cut into groups as
        above; a nested list (``[[3, 0], [1, 2, 4]]``) gives the groups themselves
        (unequal sizes allowed). It must name every class of ``y`` exactly once:
        unknown, missing or repeated classes raise ``ValueError``.
    shuffle : bool, default=True
        Shuffle the class order with ``random_state`` (ignored with ``class_order``).
        The permutation is drawn from the *sorted* classes, so it depends only on the
        set of classes and the seed, not on the order of the samples. With
        ``shuffle=False`` classes are taken in order of first appearance in ``y``.
    random_state : int, RandomState instance or None, default=None
        Seed of the class-order shuffle. Use an int for reproducible streams.
    remainder : {'error', 'last', 'drop'}, default='error'
        Policy when the classes do not divide evenly: ``'error'`` raises,
        ``'last'`` puts the left-over classes into the last task (with fewer classes
        than ``classes_per_task``, one task holds them all), ``'drop'`` leaves
        them (and their samples) out of the stream.
    order : {'random', 'frequency', 'close_semantic', 'diverse_semantic'}, default='random'
        How classes are grouped into tasks (SLU paper, Sect. 4.3; see
        :mod:`clestim.task_orders`). ``'random'``: as ``shuffle`` and
        ``class_order`` say. ``'frequency'``: the most populated classes first.
        ``'close_semantic'``: the most similar classes share a task.
        ``'diverse_semantic'``: similar classes go to different tasks. Groups have
        equal sizes; ``random_state`` breaks ties. The last three ignore ``shuffle``
        and cannot be combined with ``class_order``.
    similarity : None, array-like or fitted estimator, default=None
        For the semantic orders: None compares the class means of the raw ``X``
        (cosine); a fitted estimator compares the class means of its
        ``transform(X)``; a ``(n_classes, n_classes)`` matrix over the sorted
        classes gives the similarities directly.

    Attributes
    ----------
    class_order_ : ndarray
        The class order of the last ``split``.
    task_classes_ : list of ndarray
        The classes of each task of the last ``split``.

    References
    ----------
    Qiao et al., "Class-incremental Learning for Time Series: Benchmark and
    Evaluation", KDD 2024 (TSCIL): 2 classes per task, order shuffled per run.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([5, 5, 3, 1, 3, 0])
    >>> stream = ClassIncremental(classes_per_task=2, shuffle=False)
    >>> [idx.tolist() for idx in stream.split(None, y)]
    [[0, 1, 2, 4], [3, 5]]
    >>> [c.tolist() for c in stream.task_classes_]
    [[5, 3], [1, 0]]
    """

    def __init__(
        self,
        n_tasks=None,
        classes_per_task=2,
        class_order=None,
        shuffle=True,
        random_state=None,
        remainder="error",
        order="random",
        similarity=None,
    ):
        self.n_tasks = n_tasks
        self.classes_per_task = classes_per_task
        self.class_order = class_order
        self.shuffle = shuffle
        self.random_state = random_state
        self.remainder = remainder
        self.order = order
        self.similarity = similarity

    def _n_tasks_without_data(self):
        if self.n_tasks is not None:
            return self.n_tasks
        if self.class_order is not None and _is_nested(self.class_order):
            return len(self.class_order)
        return None

    def _uses_randomness(self) -> bool:
        if getattr(self, "order", "random") != "random":
            return True  # ties are broken at random
        return bool(self.shuffle) and self.class_order is None

    def _class_groups(self, y: np.ndarray, X=None) -> list[np.ndarray]:
        seen = unique_in_order(y)
        order = getattr(self, "order", "random")  # subclasses without the parameter
        if order != "random":
            return self._ordered_groups(X, y, order)
        if self.class_order is not None:
            groups, nested = _check_explicit_order(self.class_order, seen, "class")
            if nested:
                if self.n_tasks is not None and self.n_tasks != len(groups):
                    raise ValueError(
                        f"n_tasks={self.n_tasks} disagrees with the {len(groups)} explicit "
                        f"class groups of class_order."
                    )
                return groups
            order = groups[0]
        elif self.shuffle:
            rng = check_random_state(self.random_state)
            order = rng.permutation(np.unique(y))
        else:
            order = seen
        return _chunk(order, self.n_tasks, self.classes_per_task, self.remainder, "class")

    def _ordered_groups(self, X, y, order) -> list[np.ndarray]:
        """The class groups of the frequency and semantic orders."""
        from . import task_orders

        if order not in task_orders.ORDERS:
            raise ValueError(f"order must be one of {task_orders.ORDERS}; got {order!r}.")
        if self.class_order is not None:
            raise ValueError(f"class_order cannot be combined with order={order!r}.")
        classes = np.unique(y)
        if order == "frequency":
            ranked = task_orders.frequency_order(y, classes, self.random_state)
            return _chunk(ranked, self.n_tasks, self.classes_per_task, self.remainder, "class")
        if self.n_tasks is not None:
            n = len(classes)
            if not isinstance(self.n_tasks, numbers.Integral) or not 1 <= self.n_tasks <= n:
                raise ValueError(f"n_tasks must be an integer in [1, {len(classes)}].")
            size = len(classes) // self.n_tasks
        else:
            size = self.classes_per_task
            if not isinstance(size, numbers.Integral) or not 1 <= size <= len(classes):
                raise ValueError(f"classes_per_task must be an integer in [1, {len(classes)}].")
        S = task_orders.class_similarity(X, y, classes, self.similarity)
        make = getattr(task_orders, f"{order}_groups")
        groups = make(S, size, self.random_state)
        return _chunk(classes[np.concatenate(groups)], self.n_tasks, size, self.remainder, "class")

    def _make_tasks(self, X, y, groups):
        y = _check_y(X, y)
        class_groups = self._class_groups(y, X)
        self.task_classes_ = class_groups
        self.class_order_ = np.concatenate(class_groups)
        return _indices_of(y, class_groups)


def default_stream() -> ClassIncremental:
    """The stream an estimator's ``fit`` runs when none is given: two classes per
    task, in order of first appearance; it takes any number of classes: an odd
    class joins the last task, a single class makes one task."""
    return ClassIncremental(classes_per_task=2, shuffle=False, remainder="last")


# --------------------------------------------------------------------------- blurry
class Blurry(ClassIncremental):
    """Class-incremental stream whose task boundaries are blurred.

    Classes are grouped as in :class:`ClassIncremental` (each group is the *major*
    class set of a task); then, in every task, a fraction ``blurry`` of its samples
    (``floor(blurry * n_t)``, chosen at random) is moved to another task chosen
    uniformly among the others. Every sample still appears in exactly one task, but
    tasks share classes. Test tasks (:meth:`task_indices`) follow the major class
    groups, without leakage.

    Parameters
    ----------
    blurry : float in [0, 1), default=0.1
        Fraction of the samples of each task that leaks into other tasks.
    n_tasks, classes_per_task, class_order, shuffle, random_state, remainder
        As in :class:`ClassIncremental`. ``random_state`` also draws the leaks.

    Attributes
    ----------
    task_classes_ : list of ndarray
        The major classes of each task.
    class_order_ : ndarray
    n_leaked_ : ndarray of int
        Number of samples that left each task.

    References
    ----------
    Aljundi et al., "Online continual learning with maximally interfered retrieval",
    NeurIPS 2019; Bang et al., "Rainbow Memory", CVPR 2021 (Blurry-M).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat([0, 1, 2, 3], 10)
    >>> stream = Blurry(blurry=0.2, shuffle=False, random_state=0)
    >>> [len(idx) for idx in stream.split(None, y)]
    [20, 20]
    >>> stream.n_leaked_.tolist()
    [4, 4]
    """

    def __init__(
        self,
        n_tasks=None,
        classes_per_task=2,
        class_order=None,
        shuffle=True,
        random_state=None,
        remainder="error",
        blurry=0.1,
    ):
        super().__init__(
            n_tasks=n_tasks,
            classes_per_task=classes_per_task,
            class_order=class_order,
            shuffle=shuffle,
            random_state=random_state,
            remainder=remainder,
        )
        self.blurry = blurry

    def _make_tasks(self, X, y, groups):
        if not isinstance(self.blurry, numbers.Real) or not 0 <= self.blurry < 1:
            raise ValueError(f"blurry must be a fraction in [0, 1); got {self.blurry!r}.")
        y = _check_y(X, y)
        rng = check_random_state(self.random_state)
        # class groups first (this consumes the rng exactly like ClassIncremental)
        if self.class_order is None and self.shuffle:
            order = rng.permutation(np.unique(y))
            class_groups = _chunk(
                order, self.n_tasks, self.classes_per_task, self.remainder, "class"
            )
        else:
            class_groups = self._class_groups(y)
        base = _indices_of(y, class_groups)
        n_tasks = len(base)
        if n_tasks == 1 and self.blurry > 0:
            raise ValueError("A Blurry stream needs at least 2 tasks to leak samples between.")
        assigned = [np.full(len(idx), t) for t, idx in enumerate(base)]
        n_leaked = np.zeros(n_tasks, dtype=int)
        for t, idx in enumerate(base):
            k = int(np.floor(self.blurry * len(idx)))
            if k == 0:
                continue
            moved = rng.choice(len(idx), size=k, replace=False)
            dest = rng.randint(0, n_tasks - 1, size=k)
            dest[dest >= t] += 1  # uniform over the other tasks
            assigned[t][moved] = dest
            n_leaked[t] = k
        all_idx = np.concatenate(base)
        all_task = np.concatenate(assigned)
        target = [all_idx[all_task == t] for t in range(n_tasks)]
        tasks = [np.sort(np.asarray(t, dtype=int)) for t in target]
        self.task_classes_ = class_groups
        self.class_order_ = np.concatenate(class_groups)
        self.n_leaked_ = n_leaked
        return tasks

    def _uses_randomness(self) -> bool:
        return super()._uses_randomness() or self.blurry > 0


# --------------------------------------------------------------------------- domain-IL
class DomainIncremental(BaseStream):
    """Domain-incremental stream: tasks defined by ``groups`` (e.g. subjects).

    Each task holds the samples of ``groups_per_task`` groups; classes recur across
    tasks. ``groups`` is required by :meth:`split` and :meth:`task_indices`.

    Parameters
    ----------
    n_tasks : int, default=None
        Number of tasks; takes precedence over ``groups_per_task``.
    groups_per_task : int, default=1
        Number of groups per task when ``n_tasks`` is None.
    group_order : sequence, default=None
        Explicit group order, flat or nested (see :class:`ClassIncremental`); must
        name every group exactly once.
    shuffle : bool, default=False
        Shuffle the group order with ``random_state``; otherwise groups are taken in
        order of first appearance.
    random_state : int, RandomState instance or None, default=None
    remainder : {'error', 'last', 'drop'}, default='error'
        Policy when the groups do not divide evenly.

    Attributes
    ----------
    task_groups_ : list of ndarray
        The groups of each task.
    task_classes_ : list of ndarray
        The classes present in each task (in order of first appearance).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 1, 0, 1, 0, 1])
    >>> subject = np.array(["a", "a", "b", "b", "c", "c"])
    >>> [idx.tolist() for idx in DomainIncremental().split(None, y, subject)]
    [[0, 1], [2, 3], [4, 5]]
    """

    def __init__(
        self,
        n_tasks=None,
        groups_per_task=1,
        group_order=None,
        shuffle=False,
        random_state=None,
        remainder="error",
    ):
        self.n_tasks = n_tasks
        self.groups_per_task = groups_per_task
        self.group_order = group_order
        self.shuffle = shuffle
        self.random_state = random_state
        self.remainder = remainder

    def _n_tasks_without_data(self):
        return self.n_tasks

    def _uses_randomness(self) -> bool:
        return bool(self.shuffle) and self.group_order is None

    def _group_chunks(self, groups: np.ndarray) -> list[np.ndarray]:
        seen = unique_in_order(groups)
        if self.group_order is not None:
            chunks, nested = _check_explicit_order(self.group_order, seen, "group")
            if nested:
                return chunks
            order = chunks[0]
        elif self.shuffle:
            order = check_random_state(self.random_state).permutation(np.unique(groups))
        else:
            order = seen
        return _chunk(order, self.n_tasks, self.groups_per_task, self.remainder, "group")

    def _make_tasks(self, X, y, groups):
        y = _check_y(X, y)
        groups = _check_groups(groups, y.shape[0], type(self).__name__)
        chunks = self._group_chunks(groups)
        tasks = _indices_of(groups, chunks)
        self.task_groups_ = chunks
        self.task_classes_ = [unique_in_order(y[idx]) for idx in tasks]
        return tasks

    def task_indices(self, y, groups=None) -> list[np.ndarray]:
        """Indices of the samples of each task: a sample belongs to its group's task.

        Samples of groups never seen in ``split`` are left out.
        """
        if not hasattr(self, "task_groups_"):
            self._check_fitted()
        y = _check_y(None, y)
        groups = _check_groups(groups, y.shape[0], type(self).__name__)
        return _indices_of(groups, self.task_groups_)


# --------------------------------------------------------------------------- task pool
class TaskPool(BaseStream):
    """Problems of ``n_tasks`` tasks sampled from a pool of ``classes_per_task``-class tasks.

    The protocol of Villa et al. (2022): the set of classes is split into random
    groups of ``c = classes_per_task`` classes, giving a pool of
    ``N = n_classes // c`` tasks (left-over classes are not used). A continual
    learning problem is a random subset of ``n_tasks`` tasks of the pool, in random
    order; ``n_problems`` such problems are drawn for ``E`` experiments. This
    splitter yields the tasks of problem number ``problem``; :meth:`problems`
    returns one splitter per problem. Samples of classes outside the selected tasks
    are not yielded.

    Parameters
    ----------
    classes_per_task : int, default=2
        ``c``, the number of classes per pool task.
    n_tasks : int, default=None
        ``T``, tasks per problem; None uses the whole pool (``T = N``).
    n_problems : int, default=5
        ``E``, the number of problems (experiments).
    problem : int, default=0
        Which problem :meth:`split` yields, in ``[0, n_problems)``.
    random_state : int, RandomState instance or None, default=None
        Draws the pool and then the problems, in that order; an int makes the pool
        and all problems reproducible.

    Attributes
    ----------
    pool_ : list of ndarray
        The class groups of the pool.
    problems_ : list of ndarray
        For each problem, the indices of its pool tasks, in task order.
    task_classes_ : list of ndarray
        The classes of the tasks of problem ``problem``.

    References
    ----------
    Villa et al., "vCLIMB / A Baseline on Continual Learning Methods for Video
    Action Recognition", 2022, Sect. 4.2.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat(np.arange(10), 3)
    >>> pool = TaskPool(classes_per_task=2, n_tasks=3, n_problems=4, random_state=0)
    >>> [len(p.task_classes(y)) for p in pool.problems()]
    [3, 3, 3, 3]
    """

    def __init__(
        self, classes_per_task=2, n_tasks=None, n_problems=5, problem=0, random_state=None
    ):
        self.classes_per_task = classes_per_task
        self.n_tasks = n_tasks
        self.n_problems = n_problems
        self.problem = problem
        self.random_state = random_state

    def _n_tasks_without_data(self):
        return self.n_tasks

    def _uses_randomness(self) -> bool:
        return True

    def _draw(self, y):
        for name in ("classes_per_task", "n_problems"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}.")
        if not isinstance(self.problem, numbers.Integral) or not (
            0 <= self.problem < self.n_problems
        ):
            raise ValueError(
                f"problem must be an integer in [0, n_problems={self.n_problems}); "
                f"got {self.problem!r}."
            )
        rng = check_random_state(self.random_state)
        classes = np.unique(y)
        n_pool = len(classes) // self.classes_per_task
        if n_pool == 0:
            raise ValueError(
                f"classes_per_task={self.classes_per_task} is larger than the number of "
                f"classes ({len(classes)}): the pool would be empty."
            )
        perm = rng.permutation(classes)
        pool = [
            perm[k * self.classes_per_task : (k + 1) * self.classes_per_task] for k in range(n_pool)
        ]
        n_tasks = n_pool if self.n_tasks is None else self.n_tasks
        if not isinstance(n_tasks, numbers.Integral) or not 1 <= n_tasks <= n_pool:
            raise ValueError(
                f"n_tasks must be an integer in [1, {n_pool}] (the pool holds {n_pool} tasks "
                f"of {self.classes_per_task} classes); got {self.n_tasks!r}."
            )
        problems = [rng.choice(n_pool, size=n_tasks, replace=False) for _ in range(self.n_problems)]
        return pool, problems

    def _make_tasks(self, X, y, groups):
        y = _check_y(X, y)
        pool, problems = self._draw(y)
        class_groups = [pool[k] for k in problems[self.problem]]
        self.pool_ = pool
        self.problems_ = problems
        self.task_classes_ = class_groups
        self.class_order_ = np.concatenate(class_groups)
        return _indices_of(y, class_groups)

    def problems(self) -> list[TaskPool]:
        """One splitter per problem: copies of this one with ``problem = 0 .. E-1``."""
        params = self.get_params()
        out = []
        for e in range(self.n_problems):
            params["problem"] = e
            out.append(type(self)(**params))
        return out


# --------------------------------------------------------------------------- sub-streams
class StreamPart(BaseStream):
    """The validation or experiment part of a stream (Chaudhry et al. 2018).

    For a stream of ``T`` tasks with ``T >= min_tasks``, the first ``n_val_tasks``
    tasks form the *validation stream* (used for hyperparameter tuning) and the
    remaining ``T - n_val_tasks`` tasks the *experiment stream* (used to report
    results). Shorter streams are used whole for both, the protocol TSCIL applies to
    UCI-HAR (3 tasks) and UWave (4 tasks). With the defaults (``n_val_tasks=3``,
    ``min_tasks=5``) DSA's 9 tasks give a 6-task experiment stream.

    Parameters
    ----------
    stream : BaseStream
        The full stream. It must be deterministic: a shuffling stream needs an
        integer ``random_state`` so that both parts see the same task order.
    part : {'validation', 'experiment'}, default='experiment'
    n_val_tasks : int, default=3
    min_tasks : int, default=5
        Streams with fewer tasks are not split.

    Attributes
    ----------
    tasks_ : ndarray of int
        The positions, in the full stream, of the tasks of this part.
    task_classes_ : list of ndarray

    References
    ----------
    Chaudhry et al., "Efficient Lifelong Learning with A-GEM", ICLR 2019 (validation
    stream); Qiao et al. 2024 (TSCIL), Sect. 4.3.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.repeat(np.arange(12), 2)
    >>> full = ClassIncremental(classes_per_task=2, shuffle=False)
    >>> val, exp = validation_experiment_split(full)
    >>> [c.tolist() for c in val.task_classes(y)]
    [[0, 1], [2, 3], [4, 5]]
    >>> exp.get_n_splits(y=y)
    3
    """

    def __init__(self, stream, part="experiment", n_val_tasks=3, min_tasks=5):
        self.stream = stream
        self.part = part
        self.n_val_tasks = n_val_tasks
        self.min_tasks = min_tasks

    def _check(self):
        if self.part not in ("validation", "experiment"):
            raise ValueError(f"part must be 'validation' or 'experiment'; got {self.part!r}.")
        if not isinstance(self.n_val_tasks, numbers.Integral) or self.n_val_tasks < 1:
            raise ValueError(f"n_val_tasks must be a positive integer; got {self.n_val_tasks!r}.")
        if self.min_tasks <= self.n_val_tasks:
            raise ValueError(
                f"min_tasks ({self.min_tasks}) must exceed n_val_tasks ({self.n_val_tasks}) so "
                f"that the experiment stream is not empty."
            )
        if not self.stream._is_deterministic():
            raise ValueError(
                "The validation and experiment parts of a randomised stream must see the same "
                "task order: give the stream an integer random_state."
            )

    def _select(self, n_total: int) -> np.ndarray:
        if n_total < self.min_tasks:
            return np.arange(n_total)
        if self.part == "validation":
            return np.arange(self.n_val_tasks)
        return np.arange(self.n_val_tasks, n_total)

    def _make_tasks(self, X, y, groups):
        self._check()
        tasks = list(self.stream._make_tasks(X, y, groups))
        keep = self._select(len(tasks))
        self.tasks_ = keep
        self.task_classes_ = [self.stream.task_classes_[k] for k in keep]
        return [tasks[k] for k in keep]

    def _n_tasks_without_data(self):
        n = self.stream._n_tasks_without_data()
        if n is None:
            return None
        return len(self._select(n))

    def _uses_randomness(self) -> bool:
        return self.stream._uses_randomness()

    def _is_deterministic(self) -> bool:
        return self.stream._is_deterministic()

    def task_indices(self, y, groups=None) -> list[np.ndarray]:
        self._check_fitted()
        full = self.stream.task_indices(y, groups)
        return [full[k] for k in self.tasks_]

    def relabel(self, y, task: int) -> np.ndarray:
        self._check_fitted()
        return self.stream.relabel(y, int(self.tasks_[task]))


def validation_experiment_split(stream, n_val_tasks=3, min_tasks=5):
    """Split a stream into its validation and experiment parts.

    Parameters
    ----------
    stream : BaseStream
    n_val_tasks : int, default=3
        Number of tasks of the validation stream (TSCIL: 3).
    min_tasks : int, default=5
        Streams shorter than this are used whole for both parts (TSCIL: streams of
        more than 4 tasks are split).

    Returns
    -------
    validation : StreamPart
    experiment : StreamPart
    """
    return (
        StreamPart(stream, "validation", n_val_tasks, min_tasks),
        StreamPart(stream, "experiment", n_val_tasks, min_tasks),
    )


# --------------------------------------------------------------------------- basic scenarios
_SCENARIO_THIRD_SET = {"ADD": None, "EXP": "C01", "INC": "C21", "SEP": "C12"}


class BasicScenario(BaseStream):
    """The two-task basic evaluation scenarios ADD, EXP, INC and SEP.

    Szadkowski et al. (2019) study the minimal incremental problem: two tasks
    ``T1, T2`` and two labels ``L1, L2``. A sample is, in each task, presented with
    ``L1`` (state 1), with ``L2`` (state 2) or not at all (state 0); ``C_{s,s'}`` is
    the base set of samples with states ``(s, s')``. Every scenario has
    ``C_{1,0}`` (learnt in T1 only) and ``C_{0,2}`` (new in T2), plus one more set:

    ======== ============ ==================== ==================================
    scenario third set    T1 presents          T2 presents
    ======== ============ ==================== ==================================
    ADD      (none)       C10 as L1            C02 as L2
    EXP      C_{0,1}      C10 as L1            C02 as L2, C01 as L1
    INC      C_{2,1}      C10 as L1, C21 as L2 C02 as L2, C21 as L1 (relabelled)
    SEP      C_{1,2}      C10 as L1, C12 as L1 C02 as L2, C12 as L2 (relabelled)
    ======== ============ ==================== ==================================

    Each base set is one original class of the data set (the paper's assignments of
    MNIST digits, e.g. "021": C10 = zeros, C02 = twos, third set = ones). In INC and
    SEP the third set is presented in both tasks, so :meth:`split` yields
    overlapping tasks, and its samples change label: fit on
    ``relabel(y[idx], task)``, not on ``y[idx]``.

    Parameters
    ----------
    scenario : {'ADD', 'EXP', 'INC', 'SEP'}, default='ADD'
    assignment : sequence, default=None
        Original classes of ``(C10, C02)`` for ADD or ``(C10, C02, third set)``
        otherwise. Must be distinct classes present in ``y``. None takes the first
        classes in order of first appearance.
    labels : pair, default=(1, 2)
        The scenario's labels ``(L1, L2)``.

    Attributes
    ----------
    base_classes_ : dict
        Base-set name (``'C10'``, ``'C02'``, ``'C01'``, ``'C21'``, ``'C12'``) to
        original class.
    task_classes_ : list of ndarray
        The original classes presented in each task.

    References
    ----------
    Szadkowski, Drchal and Faigl, "Basic Evaluation Scenarios for Incrementally
    Trained Classifiers", ICANN 2019.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 0, 2, 2, 1, 1, 7])
    >>> inc = BasicScenario("INC", assignment=(0, 2, 1))
    >>> t1, t2 = inc.split(None, y)
    >>> t1.tolist(), inc.relabel(y[t1], 0).tolist()
    ([0, 1, 4, 5], [1, 1, 2, 2])
    >>> t2.tolist(), inc.relabel(y[t2], 1).tolist()
    ([2, 3, 4, 5], [2, 2, 1, 1])
    """

    def __init__(self, scenario="ADD", assignment=None, labels=(1, 2)):
        self.scenario = scenario
        self.assignment = assignment
        self.labels = labels

    def _n_tasks_without_data(self):
        return 2

    def _base(self, y: np.ndarray) -> dict:
        if self.scenario not in _SCENARIO_THIRD_SET:
            raise ValueError(
                f"scenario must be one of {sorted(_SCENARIO_THIRD_SET)}; got {self.scenario!r}."
            )
        if len(self.labels) != 2 or self.labels[0] == self.labels[1]:
            raise ValueError(f"labels must be two distinct labels (L1, L2); got {self.labels!r}.")
        third = _SCENARIO_THIRD_SET[self.scenario]
        n_sets = 2 if third is None else 3
        seen = unique_in_order(y)
        if self.assignment is None:
            if len(seen) < n_sets:
                raise ValueError(
                    f"Scenario {self.scenario} needs {n_sets} classes; y has {len(seen)}."
                )
            assignment = seen[:n_sets].tolist()
        else:
            assignment = list(self.assignment)
            if len(assignment) != n_sets:
                raise ValueError(
                    f"Scenario {self.scenario} assigns {n_sets} classes to base sets "
                    f"(C10, C02{', ' + third if third else ''}); got {len(assignment)}."
                )
            if len(set(assignment)) != n_sets:
                raise ValueError(
                    f"The base sets must be disjoint: assignment {assignment} repeats a class."
                )
            unknown = [c for c in assignment if c not in set(seen.tolist())]
            if unknown:
                raise ValueError(f"assignment names classes absent from y: {unknown}.")
        names = ["C10", "C02"] + ([third] if third else [])
        return dict(zip(names, assignment))

    def _label_map(self, task: int) -> dict:
        """Original class -> scenario label presented in ``task``."""
        L1, L2 = self.labels
        b = self.base_classes_
        if task == 0:
            m = {b["C10"]: L1}
            if "C21" in b:
                m[b["C21"]] = L2
            if "C12" in b:
                m[b["C12"]] = L1
        elif task == 1:
            m = {b["C02"]: L2}
            if "C01" in b:
                m[b["C01"]] = L1
            if "C21" in b:
                m[b["C21"]] = L1
            if "C12" in b:
                m[b["C12"]] = L2
        else:
            raise ValueError(f"A basic scenario has tasks 0 and 1; got task={task!r}.")
        return m

    def _make_tasks(self, X, y, groups):
        y = _check_y(X, y)
        base = self._base(y)
        self.base_classes_ = base
        groups_ = [np.asarray(list(self._label_map(t))) for t in (0, 1)]
        self.task_classes_ = groups_
        return _indices_of(y, groups_)

    def relabel(self, y, task: int) -> np.ndarray:
        """Labels ``(L1 or L2)`` that samples of original classes ``y`` carry in ``task``.

        Raises ``ValueError`` if a sample's class is not presented in ``task``.
        """
        self._check_fitted()
        y = np.asarray(y)
        m = self._label_map(task)
        missing = sorted({v for v in y.tolist() if v not in m}, key=str)
        if missing:
            raise ValueError(f"Classes {missing} are not presented in task {task}.")
        return np.asarray([m[v] for v in y.tolist()])

    def base_sets(self, y) -> dict:
        """Indices of the samples of each non-empty base set, e.g. ``{'C10': ...}``.

        The per-base-set evaluation of the paper's Table 4.
        """
        self._check_fitted()
        y = np.asarray(y)
        return {name: np.flatnonzero(y == c) for name, c in self.base_classes_.items()}
