"""Digests of everything a saved result depends on, so a saved result is reused
only by a computation that would reproduce it (a search's candidates, a stream's
progress)."""

from __future__ import annotations

import hashlib
import pickle
import uuid

import numpy as np


def canonical(value):
    """A description of ``value`` that is equal for equal values, in any process:
    estimators by their class and parameters, arrays by their bytes, and anything
    else by its pickle; a value that does not pickle gets a new token each time
    (never reused). Unlike ``repr``, nothing is elided."""
    if isinstance(value, (str, int, float, bool, type(None), np.generic)):
        return repr(value)
    if hasattr(value, "get_params") and not isinstance(value, type):
        params = value.get_params(deep=False)
        return (type(value).__module__, type(value).__qualname__,
                tuple((k, canonical(v)) for k, v in sorted(params.items()) if k != "verbose"))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), canonical(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(canonical(v) for v in value))
    if isinstance(value, np.ndarray) and value.dtype != object:
        data = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
        return ("ndarray", value.dtype.str, value.shape, data)
    try:
        return ("pickle", hashlib.sha1(pickle.dumps(value, protocol=4)).hexdigest())
    except Exception:  # noqa: BLE001 - any object that does not pickle is simply not reused
        return ("unique", uuid.uuid4().hex)


def digest(*parts, length: int = 20) -> str:
    """A hex digest of :func:`canonical` of ``parts``."""
    return hashlib.sha1(repr(canonical(parts)).encode()).hexdigest()[:length]
