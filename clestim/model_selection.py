"""Continual-aware hyperparameter search: tune on the validation stream, refit on the rest.

Two protocols exist for choosing the hyperparameters of a continual learner (Qiao
et al. 2024, Sect. 4.3):

1. Hold out part of every task and grid-search on it. This visits the whole
   stream before learning it, against the spirit of continual learning, but it is
   what TSCIL does for streams of at most 4 tasks (UCI-HAR, UWave).
2. Chaudhry et al. (2019): the first ``k`` tasks form a *validation stream* used
   only for tuning; the remaining tasks form the *experiment stream* on which the
   chosen configuration is trained and reported. TSCIL uses ``k = 3`` for longer
   streams.

:class:`ContinualGridSearch` implements both through
:func:`clestim.streams.validation_experiment_split`: streams with at least
``min_tasks`` tasks follow protocol 2, shorter ones protocol 1. Each candidate is
trained on the validation stream with a stratified hold-out of the training data
(``validation_size``), or on all of it when ``fit`` is given ``validation_data``
(TSCIL's fixed dataset-level hold-out), and scored there with a stream metric; the
best is refitted on the experiment stream with all the training data.

A search of many candidates can take hours: with ``checkpoint_dir`` each candidate's
result is saved the moment it is computed, and a search interrupted (killed, or
ended with its session) resumes from the saved candidates instead of training
them again.

For plain cross-validation over a whole stream, scikit-learn's ``GridSearchCV``
with a :func:`~clestim.metrics.make_stream_scorer` scorer works as is.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import ParameterGrid, train_test_split
from sklearn.utils import _safe_indexing

from ._atomic import write_json_atomic
from ._digest import canonical
from .metrics import METRICS, compute_metrics, snapshot_accuracy_matrix
from .streams import default_stream, validation_experiment_split

__all__ = ["ContinualGridSearch"]


def _stream_param(estimator) -> str:
    params = estimator.get_params(deep=True)
    if "stream" in params:
        return "stream"
    nested = [k for k in params if k.endswith("__stream")]
    if len(nested) == 1:
        return nested[0]
    raise ValueError(
        f"{type(estimator).__name__} has no single `stream` parameter to set the validation "
        f"and experiment streams on; found {nested or 'none'}."
    )


def _evaluate_candidate(estimator, params, stream_param, stream, Xtr, ytr, gtr, Xva, yva, mode,
                        checkpoint=None):
    """(metrics, fit time) of one candidate; saved to ``checkpoint`` (a path) when given."""
    est = clone(estimator).set_params(**params, **{stream_param: stream})
    start = time.perf_counter()
    est.fit(Xtr, ytr, gtr)
    fit_time = time.perf_counter() - start
    A = snapshot_accuracy_matrix(est, Xva, yva, mode=mode)
    metrics = {name: float(value) for name, value in compute_metrics(A).items()}
    if checkpoint is not None:
        try:
            write_json_atomic(checkpoint, {"params": {k: repr(v) for k, v in params.items()},
                                           "metrics": metrics, "fit_time": fit_time})
        except OSError as exc:  # the search goes on; only resuming is lost
            warnings.warn(f"could not save the candidate to {checkpoint}: {exc}", stacklevel=2)
    return metrics, fit_time


def _candidate_files(folder, search_parts, candidates) -> list[Path]:
    """One file name per candidate: a digest of everything its result depends on."""
    base = repr(canonical(search_parts))  # names of saved files: keep this formula
    return [Path(folder) / (hashlib.sha1((base + repr(canonical(params))).encode())
                            .hexdigest()[:20] + ".json") for params in candidates]


def _saved_candidate(path: Path):
    """(metrics, fit time) saved at ``path``, or None when there is none or it is unreadable."""
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
        metrics = {name: float(saved["metrics"][name]) for name in METRICS}
        return metrics, float(saved["fit_time"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"ignoring the saved candidate {path} ({type(exc).__name__}: {exc}); "
                      "it is computed again", stacklevel=3)
        return None


def _validation_data(validation_data):
    """(X_val, y_val) from ``validation_data``, checked."""
    try:
        X_val, y_val = validation_data
    except (TypeError, ValueError):
        raise ValueError(
            "validation_data must be a tuple (X_val, y_val); got "
            f"{type(validation_data).__name__}"
        ) from None
    y_val = np.asarray(y_val)
    if len(y_val) == 0 or len(y_val) != len(X_val):
        raise ValueError(
            f"validation_data needs as many labels as samples, at least one; got "
            f"{len(X_val)} samples and {len(y_val)} labels"
        )
    return X_val, y_val


class ContinualGridSearch(BaseEstimator):
    """Grid search on the validation stream, refit on the experiment stream (TSCIL).

    Parameters
    ----------
    estimator : clestim estimator or ContinualPipeline
        Must have a ``stream`` parameter (or exactly one ``<step>__stream``).
    param_grid : dict or list of dicts
        As in :class:`sklearn.model_selection.GridSearchCV`.
    stream : clestim stream, default=None
        The full stream; defaults to the estimator's own ``stream`` or
        ``ClassIncremental(classes_per_task=2, shuffle=False)``. A shuffling stream
        needs an integer ``random_state``.
    scoring : str, default='average_accuracy'
        A metric of :data:`clestim.metrics.METRICS`; lower-is-better metrics
        (forgetting) are minimised.
    n_val_tasks : int, default=3
    min_tasks : int, default=5
        Streams with fewer tasks are tuned on whole (protocol 1).
    validation_size : float, default=0.2
        Stratified fraction of the training data held out to score candidates.
    mode : {'class', 'task'}, default='class'
    refit : bool, default=True
        Refit the best configuration on the experiment stream with all the data.
    n_jobs : int, default=None
        Candidates in parallel through joblib.
    random_state : int, default=None
        Seed of the hold-out split.
    checkpoint_dir : str or path, default=None
        Folder (created when missing) in which each candidate's validation metrics
        are saved as it finishes. A later ``fit`` with this folder reuses every
        candidate saved there instead of training it again, so an interrupted
        search resumes where it stopped. A file is named by a digest of all its
        result depends on (the estimator's parameters, the candidate, the streams,
        the data, ``mode``, ``validation_size`` and ``random_state``): a search
        that differs in any of them never reuses it. Reuse relies on
        reproducible fits: give the estimator and a shuffling stream an integer
        ``random_state``.

    Attributes
    ----------
    cv_results_ : dict of lists
        ``params``, ``param_<name>``, ``fit_time``, one ``val_<metric>`` column
        per metric and ``rank_test_score``.
    best_params_ : dict
    best_score_ : float
        The best validation value of ``scoring`` (not negated).
    best_index_ : int
    best_estimator_ : estimator
        Fitted on the experiment stream (with ``refit=True``).
    n_resumed_ : int
        How many candidates were read from ``checkpoint_dir`` rather than trained.
    validation_stream_, experiment_stream_ : StreamPart

    References
    ----------
    Chaudhry et al., "Efficient Lifelong Learning with A-GEM", ICLR 2019; Qiao et
    al., "Class-incremental Learning for Time Series", KDD 2024, Sect. 4.3.

    Examples
    --------
    >>> from clestim import ER  # doctest: +SKIP
    >>> search = ContinualGridSearch(ER(), {"lr": [1e-3, 1e-2]},
    ...                              stream=ClassIncremental(random_state=0))  # doctest: +SKIP
    >>> search.fit(X_train, y_train).score(X_test, y_test)  # doctest: +SKIP
    """

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        stream=None,
        scoring="average_accuracy",
        n_val_tasks=3,
        min_tasks=5,
        validation_size=0.2,
        mode="class",
        refit=True,
        n_jobs=None,
        random_state=None,
        checkpoint_dir=None,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.stream = stream
        self.scoring = scoring
        self.n_val_tasks = n_val_tasks
        self.min_tasks = min_tasks
        self.validation_size = validation_size
        self.mode = mode
        self.refit = refit
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.checkpoint_dir = checkpoint_dir

    def _full_stream(self, stream_param):
        if self.stream is not None:
            return self.stream
        own = self.estimator.get_params(deep=True)[stream_param]
        return own if own is not None else default_stream()

    def fit(self, X, y, groups=None, *, validation_data=None):
        """Tune on the validation stream, then refit the best on the experiment stream.

        Parameters
        ----------
        X : array-like
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), default=None
        validation_data : tuple (X_val, y_val), default=None
            Samples to score the candidates on. Candidates then train on all of
            ``X`` (``validation_size`` is not used); by default a stratified
            ``validation_size`` of ``X`` is held out for scoring.

        Returns
        -------
        self
        """
        if self.scoring not in METRICS:
            raise ValueError(f"scoring must be one of {sorted(METRICS)}; got {self.scoring!r}.")
        if validation_data is None and not 0 < self.validation_size < 1:
            raise ValueError(f"validation_size must lie in (0, 1); got {self.validation_size!r}.")
        y = np.asarray(y)
        stream_param = _stream_param(self.estimator)
        full = self._full_stream(stream_param)
        val_stream, exp_stream = validation_experiment_split(
            full, n_val_tasks=self.n_val_tasks, min_tasks=self.min_tasks
        )
        g = None if groups is None else np.asarray(groups)
        if validation_data is None:
            tr, va = train_test_split(np.arange(len(y)), test_size=self.validation_size,
                                      stratify=y, random_state=self.random_state)
            tr, va = np.sort(tr), np.sort(va)
            X_fit, y_fit, g_fit = _safe_indexing(X, tr), y[tr], None if g is None else g[tr]
            X_val, y_val = _safe_indexing(X, va), y[va]
        else:
            X_fit, y_fit, g_fit = X, y, g
            X_val, y_val = _validation_data(validation_data)
        candidates = list(ParameterGrid(self.param_grid))
        files = [None] * len(candidates)
        if self.checkpoint_dir is not None:
            Path(self.checkpoint_dir).mkdir(parents=True, exist_ok=True)
            files = _candidate_files(self.checkpoint_dir, (
                self.estimator, stream_param, val_stream, X_fit, y_fit, g_fit, X_val, y_val,
                self.mode, validation_data is None and self.validation_size, self.random_state,
            ), candidates)
        out = [None if path is None else _saved_candidate(path) for path in files]
        todo = [i for i, saved in enumerate(out) if saved is None]
        computed = Parallel(n_jobs=self.n_jobs)(
            delayed(_evaluate_candidate)(
                self.estimator,
                candidates[i],
                stream_param,
                val_stream,
                X_fit,
                y_fit,
                g_fit,
                X_val,
                y_val,
                self.mode,
                files[i],
            )
            for i in todo
        )
        for i, result in zip(todo, computed, strict=True):
            out[i] = result
        self.n_resumed_ = len(candidates) - len(todo)
        greater = METRICS[self.scoring][1]
        scores = np.array([m[self.scoring] for m, _ in out], dtype=float)
        key = np.where(np.isnan(scores), -np.inf, scores if greater else -scores)
        order = np.argsort(-key, kind="stable")
        rank = np.empty(len(scores), dtype=int)
        rank[order] = np.arange(1, len(scores) + 1)
        results = {"params": candidates, "fit_time": [t for _, t in out]}
        for name in sorted({k for p in candidates for k in p}):
            results[f"param_{name}"] = [p.get(name) for p in candidates]
        for metric in METRICS:
            results[f"val_{metric}"] = [m[metric] for m, _ in out]
        results["rank_test_score"] = rank.tolist()
        self.cv_results_ = results
        self.best_index_ = int(order[0])
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = float(scores[self.best_index_])
        # the fitted parts, for inspection
        list(val_stream.split(None, y, groups))
        self.validation_stream_ = val_stream
        self.experiment_stream_ = exp_stream
        if self.refit:
            best = clone(self.estimator).set_params(
                **self.best_params_, **{stream_param: exp_stream}
            )
            self.best_estimator_ = best.fit(X, y, groups)
        return self

    def _check_refit(self):
        if not hasattr(self, "best_estimator_"):
            raise ValueError("No refitted estimator: call fit with refit=True first.")

    def score(self, X, y):
        """``scoring`` of the refitted estimator on the experiment tasks of ``(X, y)``.

        Samples of validation-only classes are ignored. Lower-is-better metrics
        are negated (scikit-learn convention).
        """
        self._check_refit()
        A = snapshot_accuracy_matrix(self.best_estimator_, X, y, mode=self.mode)
        sign = 1.0 if METRICS[self.scoring][1] else -1.0
        return sign * compute_metrics(A)[self.scoring]

    def predict(self, X, **kwargs):
        self._check_refit()
        return self.best_estimator_.predict(X, **kwargs)
