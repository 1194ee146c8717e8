"""The options of ContinualPipeline: what the transformers are fitted on, the numpy3D
conversion, parameter routing and step validation."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin

from clestim import Naive
from clestim.pipeline import ContinualPipeline, make_continual_pipeline
from clestim.streams import ClassIncremental


class Centre(TransformerMixin, BaseEstimator):
    """Subtracts the mean of the data it was fitted on (stateful), plus ``offset``."""

    def __init__(self, offset=0.0):
        self.offset = offset

    def fit(self, X, y=None):
        self.mean_ = float(np.mean(X))
        self.n_fit_ = len(X)
        return self

    def transform(self, X):
        return np.asarray(X) - self.mean_ + self.offset


class ToMultiIndex(TransformerMixin, BaseEstimator):
    """numpy3D -> sktime's 'pd-multiindex' frame (rows: (instance, time), columns: channels)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        n, c, length = X.shape
        index = pd.MultiIndex.from_product([range(n), range(length)])
        return pd.DataFrame(X.transpose(0, 2, 1).reshape(n * length, c), index=index)


def _data():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2, 3], 6)
    X = rng.normal(size=(24, 2, 8)).astype(np.float32) + 3.0 * y[:, None, None]
    return X, y


def _naive():
    return Naive(backbone_params={"channels": (4,)}, input_norm=None, max_epochs=1,
                 patience=None, validation_fraction=0.0, random_state=0,
                 stream=ClassIncremental(classes_per_task=2, shuffle=False))


@pytest.mark.parametrize("on, n_fit", [("first_task", 12), ("all", 24)])
def test_fit_transformers_on(on, n_fit):
    X, y = _data()
    pipe = make_continual_pipeline(Centre(), _naive(), fit_transformers_on=on).fit(X, y)
    centre = pipe.transformers_[0][1]
    fitted_on = X[:12] if on == "first_task" else X  # the first task: classes 0 and 1
    assert centre.n_fit_ == n_fit and centre.mean_ == pytest.approx(float(fitted_on.mean()))
    np.testing.assert_allclose(pipe.transform(X), X - centre.mean_, rtol=1e-6)
    assert pipe.n_tasks_seen_ == 2 and pipe.classes_.tolist() == [0, 1, 2, 3]
    # the step given is never fitted itself (it is cloned)
    assert not hasattr(pipe.steps[0][1], "mean_")


def test_partial_fit_task_fits_the_transformers_once():
    X, y = _data()
    pipe = make_continual_pipeline(Centre(), _naive())
    pipe.partial_fit_task(X[:12], y[:12])
    mean = pipe.transformers_[0][1].mean_
    pipe.partial_fit_task(X[12:], y[12:])
    assert pipe.transformers_[0][1].mean_ == mean == pytest.approx(float(X[:12].mean()))
    final = pipe.steps[-1][1]
    expected = final.predict(X - mean, after_task=0)
    np.testing.assert_array_equal(pipe.predict(X, after_task=0), expected)
    np.testing.assert_array_equal(pipe.predict_proba(X, task=1),
                                  final.predict_proba(X - mean, task=1))
    assert pipe.score(X, y) == pytest.approx(float(np.mean(final.predict(X - mean) == y)))


@pytest.mark.parametrize("to_numpy3d", [True, False])
def test_to_numpy3d(to_numpy3d):
    X, y = _data()
    pipe = ContinualPipeline([("frame", ToMultiIndex()), ("naive", _naive())],
                             to_numpy3d=to_numpy3d)
    pipe._fit_transformers(X, y)
    Z = pipe.transform(X)
    if to_numpy3d:
        assert isinstance(Z, np.ndarray) and Z.shape == X.shape
        np.testing.assert_allclose(Z, X)
        pipe.partial_fit_task(X[:12], y[:12])  # the estimator gets numpy3D
        assert pipe.n_tasks_seen_ == 1
    else:
        assert isinstance(Z, pd.DataFrame) and Z.shape == (24 * 8, 2)


def test_params_are_routed_to_the_steps():
    pipe = make_continual_pipeline(Centre(), _naive())
    names = [name for name, _ in pipe.steps]
    assert names == ["centre", "naive"] and pipe.named_steps["centre"] is pipe.steps[0][1]
    pipe.set_params(centre__offset=2.5, naive__lr=0.05)
    params = pipe.get_params()
    assert params["centre__offset"] == 2.5 and params["naive__lr"] == 0.05
    X, y = _data()
    pipe.partial_fit_task(X[:12], y[:12])
    np.testing.assert_allclose(pipe.transform(X[:2]), X[:2] - float(X[:12].mean()) + 2.5,
                               rtol=1e-6)


@pytest.mark.parametrize(
    "steps, kwargs, error, match",
    [
        ([], {}, ValueError, "non-empty list"),
        ([("a", Centre()), ("a", _naive())], {}, ValueError, "unique"),
        ([("n", object()), ("naive", _naive())], {}, TypeError, "fit and transform"),
        ([("c", Centre()), ("c2", Centre())], {}, TypeError, "partial_fit_task"),
        ([("naive", _naive())], {"fit_transformers_on": "last"}, ValueError, "first_task"),
    ],
)
def test_bad_steps(steps, kwargs, error, match):
    X, y = _data()
    pipe = ContinualPipeline(steps, **kwargs)
    with pytest.raises(error, match=match):
        pipe.fit(X, y)
    with pytest.raises(error, match=match):
        pipe.partial_fit_task(X, y)
    assert not hasattr(pipe, "transformers_")
