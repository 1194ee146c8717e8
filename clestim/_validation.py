"""Input validation and the label space of a continual estimator.

The lifecycle in :mod:`clestim.base` calls these before it changes anything, so a
rejected input leaves a fitted estimator as it was. Inputs go through
scikit-learn's own helpers (:func:`~sklearn.utils.check_array`,
:func:`~sklearn.utils.validation.validate_data`, :func:`~sklearn.utils.column_or_1d`,
:func:`~sklearn.utils.multiclass.check_classification_targets`), so errors read as
they do in scikit-learn:

* ``X`` is converted to a dense ``float32`` array with at least 2 dimensions and no
  zero-sized axis; sparse, complex, non-numeric, NaN or infinite input raises
  ``ValueError``. Any number of dimensions passes here: (n_samples, n_features),
  (n_samples, n_channels, n_timepoints), or more for a backbone that takes it; the
  backbone decides (a named backbone checks its own input).
* ``y`` must be 1-D (a column vector warns ``DataConversionWarning`` and is
  ravelled) and hold class labels: a continuous target raises ``ValueError``.

Labels: ``classes_`` is sorted as :func:`numpy.unique` sorts it, as scikit-learn's
scorers expect, while the head's outputs keep the order in which classes arrived
(:class:`LabelSpace` maps between the two).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils import check_array, column_or_1d
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _get_feature_names, validate_data


def check_X(estimator, X, *, reset: bool) -> np.ndarray:
    """``X`` as a float32 numpy array of at least 2 dimensions, none of them empty.

    With ``reset=False`` (later tasks, prediction) the number of features (channels)
    and the feature names are checked against the first task as scikit-learn does,
    and the remaining per-sample shape (e.g. the series length) against
    ``input_shape_``. With ``reset=True`` nothing is stored: :func:`input_attributes`
    gives what the estimator records once the whole input is accepted.
    """
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    X_raw = X
    X = check_array(
        X, dtype=np.float32, allow_nd=True, accept_sparse=False, estimator=estimator,
        input_name="X",
    )
    if 0 in X.shape[1:]:
        raise ValueError(
            f"X has shape {X.shape}: every per-sample axis needs at least one entry "
            "(0 features, channels or time points)"
        )
    if reset:
        return X
    expected = tuple(estimator.input_shape_)
    name = type(estimator).__name__
    if X.ndim != len(expected) + 1:
        raise ValueError(
            f"X is {X.ndim}-D with shape {X.shape}, but {name} was fitted on "
            f"{len(expected) + 1}-D input with per-sample shape {expected}"
        )
    # scikit-learn's own checks (and messages) for the feature count and names
    validate_data(estimator, X_raw, reset=False, skip_check_array=True)
    if X.shape[1:] != expected:
        raise ValueError(
            f"X has per-sample shape {X.shape[1:]} but {name} was fitted on {expected} "
            "(n_channels, n_timepoints must stay the same across tasks and at prediction)"
        )
    return X


def input_attributes(X_raw, X: np.ndarray) -> dict:
    """The fitted attributes that describe the input of the first task.

    ``n_features_in_`` is ``X.shape[1]`` (features of tabular input, channels of a
    series), ``n_timepoints_in_`` the series length of 3-D input (None otherwise),
    ``input_shape_`` the whole per-sample shape and ``feature_names_in_`` the column
    names of a DataFrame.
    """
    attrs = {
        "n_features_in_": X.shape[1],
        "n_timepoints_in_": X.shape[2] if X.ndim == 3 else None,
        "input_shape_": X.shape[1:],
    }
    names = _get_feature_names(X_raw)
    if names is not None:
        attrs["feature_names_in_"] = names
    return attrs


def check_y(y, n_samples: int) -> np.ndarray:
    """Class labels as a 1-D array of ``n_samples`` values."""
    y = column_or_1d(y, warn=True)
    if len(y) != n_samples:
        raise ValueError(f"y has {len(y)} labels but X has {n_samples} samples")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinite labels")
    if y.dtype.kind == "O" and any(v is None or (isinstance(v, float) and v != v) for v in y):
        raise ValueError("y contains missing labels (None or NaN)")
    check_classification_targets(y)
    return y


def in_order(y) -> list:
    """Unique values of ``y`` in order of first appearance."""
    seen = {}
    for v in y.tolist() if isinstance(y, np.ndarray) else y:
        seen.setdefault(v, None)
    return list(seen)


def _as_label_array(labels: list) -> np.ndarray:
    """``labels`` as an array that keeps each value (object dtype where numpy would
    change one, e.g. mixed ints and strings)."""
    typed = np.asarray(labels)
    if typed.dtype.kind == "O" or any(a != b for a, b in zip(typed.tolist(), labels)):
        typed = np.empty(len(labels), dtype=object)
        typed[:] = labels
    return typed


class LabelSpace:
    """The classes a head knows, in head-row order, and their sorted public order.

    Parameters
    ----------
    labels : list
        Labels in head-row order (order of arrival, or as declared).
    declared : bool
        Whether the labels were declared up front (``classes=``): then no other
        label may arrive.

    Attributes
    ----------
    head : ndarray
        Labels in head-row order.
    classes : ndarray
        Labels sorted as :func:`numpy.unique` sorts them (the public ``classes_``).
    rows : ndarray of int
        ``rows[k]`` is the head row of ``classes[k]``: ``scores[:, rows]`` reorders
        head outputs into ``classes`` order.
    index : dict
        Label to head row.
    """

    def __init__(self, labels: list = (), declared: bool = False):
        self.head = _as_label_array(list(labels))
        self.index = {c: i for i, c in enumerate(self.head.tolist())}
        try:
            self.classes = np.unique(self.head) if len(self.head) else self.head
        except TypeError as exc:
            raise ValueError(
                f"labels of different types cannot be mixed: {sorted(map(repr, labels))}"
            ) from exc
        self.rows = np.array([self.index[c] for c in self.classes.tolist()], dtype=np.int64)
        self.declared = declared

    def extended(self, y: np.ndarray, classes=None) -> LabelSpace:
        """The label space after a task with labels ``y`` (and ``classes`` declared).

        Raises ``ValueError`` (before anything changes) for a label outside a
        declared space, a malformed ``classes`` or a label of another type than
        those seen before.
        """
        new = [c for c in in_order(y) if c not in self.index]
        declared = self.declared
        if classes is not None:
            classes = column_or_1d(np.asarray(classes))
            if len(classes) == 0:
                raise ValueError("classes must name at least one class")
            order = in_order(classes)
            if len(order) != len(classes):
                raise ValueError(f"classes holds repeated labels: {classes.tolist()}")
            if self.declared and set(order) != set(self.index):
                raise ValueError(
                    f"classes={classes.tolist()} differs from the classes declared before "
                    f"({self.head.tolist()}); the label space is fixed once declared"
                )
            missing = [c for c in self.index if c not in set(order)]
            if missing:
                raise ValueError(
                    f"classes={classes.tolist()} leaves out classes already learned: {missing}"
                )
            outside = [c for c in new if c not in set(order)]
            if outside:
                raise ValueError(
                    f"y holds labels {outside} that are not in classes={classes.tolist()}"
                )
            new = [c for c in order if c not in self.index]
            declared = True
        elif self.declared and new:
            raise ValueError(
                f"y holds labels {new} outside the declared classes {self.classes.tolist()}"
            )
        if not new and declared == self.declared:
            return self
        return LabelSpace(self.head.tolist() + new, declared)

    def encode(self, y) -> np.ndarray:
        """Head rows of the labels ``y``."""
        return np.fromiter((self.index[c] for c in y), dtype=np.int64, count=len(y))
