"""``ContinualPipeline``: transformers (sktime or scikit-learn) in front of a clestim estimator.

Why not :class:`sklearn.pipeline.Pipeline`
------------------------------------------
A plain ``Pipeline`` has no ``partial_fit_task``, so it cannot learn task by task,
and the scorers of :mod:`clestim.metrics` need ``predict(X, after_task=i)``, which
``Pipeline.predict`` does not forward. Moreover scikit-learn 1.9's ``Pipeline``
callback machinery breaks sktime 1.2 transformers (``AttributeError: ...
'_parent_callback_ctx'``); clestim pins ``scikit-learn<1.9`` and this pipeline does
not use ``Pipeline`` at all, so it works whatever that pin becomes.

When transformers are fitted
----------------------------
A stateful transformer (one that learns from data, e.g. a padding length or a
global scaler) must not see future tasks. ``ContinualPipeline`` therefore fits
its transformers **once, on the first task**, and then only transforms:

- ``partial_fit_task``: the first call fits the transformers on that task; later
  calls transform with them, frozen.
- ``fit``: the transformers are fitted on the samples of the *first task* of the
  final estimator's stream (its ``stream`` parameter), then the whole data set is
  transformed and handed to the final estimator's ``fit``. So ``fit`` and learning
  the same stream with ``partial_fit_task`` give the same transformed data.

``fit_transformers_on='all'`` fits them on everything passed to ``fit`` instead
(a leak for stateful transformers; harmless for stateless ones). Stateless
transformers (per-series z-normalisation, a fixed ``pad_length``) behave the same
either way. Set a fixed ``pad_length`` on ``PaddingTransformer``: otherwise it
learns the longest length of the first task and fails on longer later series.

Output that is not a numpy array (sktime's nested or multi-index frames) is
converted to the "numpy3D" layout ``(n_samples, n_channels, n_timepoints)`` with
:func:`sktime.datatypes.convert_to`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import _BaseComposition

__all__ = ["ContinualPipeline", "make_continual_pipeline"]


def _to_numpy3d(X):
    if isinstance(X, np.ndarray):
        return X
    from sktime.datatypes import convert_to

    return convert_to(X, to_type="numpy3D")


class ContinualPipeline(_BaseComposition):
    """Transformers followed by a clestim estimator, learning task by task.

    Parameters
    ----------
    steps : list of (str, object)
        ``(name, transformer)`` pairs with ``fit``/``transform`` (sktime or
        scikit-learn), the last pair a clestim estimator. Parameters are reachable
        as ``<name>__<param>`` (``get_params``/``set_params``, grid searches).
    fit_transformers_on : {'first_task', 'all'}, default='first_task'
        What :meth:`fit` fits the transformers on (see the module docstring).
    to_numpy3d : bool, default=True
        Convert non-numpy transformer output to numpy3D before the estimator.

    Attributes
    ----------
    classes_, task_classes_, n_tasks_seen_
        Those of the final estimator.

    Examples
    --------
    >>> from sktime.transformations.padder import PaddingTransformer
    >>> from clestim import ER  # doctest: +SKIP
    >>> pipe = make_continual_pipeline(PaddingTransformer(pad_length=29), ER())  # doctest: +SKIP
    >>> pipe.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """

    def __init__(self, steps, *, fit_transformers_on="first_task", to_numpy3d=True):
        self.steps = steps
        self.fit_transformers_on = fit_transformers_on
        self.to_numpy3d = to_numpy3d

    # ------------------------------------------------------------ params
    def get_params(self, deep=True):
        return self._get_params("steps", deep=deep)

    def set_params(self, **params):
        self._set_params("steps", **params)
        return self

    def _validate_steps(self):
        if not isinstance(self.steps, (list, tuple)) or len(self.steps) == 0:
            raise ValueError("steps must be a non-empty list of (name, estimator) pairs.")
        names = [name for name, _ in self.steps]
        self._validate_names(names)
        for name, t in self.steps[:-1]:
            if not (hasattr(t, "fit") and hasattr(t, "transform")):
                raise TypeError(f"Step {name!r} must be a transformer with fit and transform.")
        name, final = self.steps[-1]
        if not hasattr(final, "partial_fit_task"):
            raise TypeError(
                f"The last step {name!r} must be a clestim estimator with partial_fit_task; "
                f"got {type(final).__name__}."
            )
        if self.fit_transformers_on not in ("first_task", "all"):
            raise ValueError(
                "fit_transformers_on must be 'first_task' or 'all'; "
                f"got {self.fit_transformers_on!r}."
            )

    @property
    def _final(self):
        return self.steps[-1][1]

    @property
    def named_steps(self) -> dict:
        return dict(self.steps)

    # ------------------------------------------------------------ transform
    def _fit_transformers(self, X, y):
        fitted = []
        for name, t in self.steps[:-1]:
            t = clone(t)
            X = t.fit_transform(X, y) if hasattr(t, "fit_transform") else t.fit(X, y).transform(X)
            fitted.append((name, t))
        self.transformers_ = fitted
        return X

    def transform(self, X):
        """Apply the fitted transformers (not the final estimator)."""
        if not hasattr(self, "transformers_"):
            raise ValueError(
                "This ContinualPipeline is not fitted: call fit or partial_fit_task first."
            )
        for _, t in self.transformers_:
            X = t.transform(X)
        return _to_numpy3d(X) if self.to_numpy3d else X

    def _stream(self):
        from .streams import default_stream

        stream = getattr(self._final, "stream", None)
        return default_stream() if stream is None else clone(stream)

    # ------------------------------------------------------------ learning
    def fit(self, X, y, groups=None, classes=None):
        """Fit the transformers (on the first task by default) and run the final stream.

        Returns
        -------
        self
        """
        self._validate_steps()
        y = np.asarray(y)
        if self.fit_transformers_on == "first_task":
            first = next(iter(self._stream().split(X, y, groups)))
            self._fit_transformers(_safe_indexing(X, first), y[first])
        else:
            self._fit_transformers(X, y)
        self._final.fit(self.transform(X), y, groups, classes=classes)
        return self

    def partial_fit_task(self, X, y, groups=None, classes=None):
        """Learn one task; the first call also fits the transformers on it.

        Returns
        -------
        self
        """
        self._validate_steps()
        if not hasattr(self, "transformers_"):
            self._fit_transformers(X, np.asarray(y))
        self._final.partial_fit_task(self.transform(X), y, groups, classes=classes)
        return self

    # ------------------------------------------------------------ inference
    def predict(self, X, task=None, after_task=None):
        """Predicted labels; ``task``/``after_task`` as in the final estimator."""
        return self._final.predict(self.transform(X), task=task, after_task=after_task)

    def predict_proba(self, X, task=None, after_task=None):
        return self._final.predict_proba(self.transform(X), task=task, after_task=after_task)

    def decision_function(self, X, task=None, after_task=None):
        return self._final.decision_function(self.transform(X), task=task, after_task=after_task)

    def score(self, X, y):
        """Accuracy of :meth:`predict`."""
        return float(np.mean(self.predict(X) == np.asarray(y)))

    # ------------------------------------------------------------ fitted state
    @property
    def classes_(self):
        return self._final.classes_

    @property
    def task_classes_(self):
        return self._final.task_classes_

    @property
    def n_tasks_seen_(self):
        return self._final.n_tasks_seen_

    def __sklearn_is_fitted__(self):
        return hasattr(self, "transformers_") and hasattr(self._final, "n_tasks_seen_")


def make_continual_pipeline(*steps, **kwargs) -> ContinualPipeline:
    """Build a :class:`ContinualPipeline`, naming the steps after their classes.

    Examples
    --------
    >>> from sklearn.preprocessing import FunctionTransformer
    >>> pipe = make_continual_pipeline(FunctionTransformer(), FunctionTransformer())
    >>> [name for name, _ in pipe.steps]
    ['functiontransformer-1', 'functiontransformer-2']
    """
    from sklearn.pipeline import _name_estimators

    return ContinualPipeline(_name_estimators(steps), **kwargs)
