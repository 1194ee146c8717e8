"""Shared machinery of the dataset loaders: cache folder, validation, files.

Every loader returns a :class:`sklearn.utils.Bunch` built by :func:`make_bunch`,
so all datasets look alike to the rest of clestim: ``X_train``/``X_test`` are
float32 arrays shaped ``(n_samples, n_channels, n_timepoints)`` (the sktime
"numpy3D" layout), labels are 1-D arrays, and the metadata fields are always
present (``None`` where the source has nothing to say).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import shutil
import urllib.error
import urllib.request
import warnings
import zipfile
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

ENV_VAR = "CLESTIM_DATA"


class DatasetNotFoundError(ValueError, FileNotFoundError):
    """A dataset's files are not on disk and could not be fetched.

    Subclasses both :class:`ValueError` (bad input, as all dataset errors are)
    and :class:`FileNotFoundError` (so ``except OSError`` also catches it).
    """


class ChecksumError(ValueError):
    """A file's digest does not match the pinned one (corrupt or tampered)."""


#: The checkout clestim runs from (the folder holding ``pyproject.toml`` above the
#: package), or None for an installed copy; its sibling ``shared/data`` is searched.
_CHECKOUT = next((p for p in Path(__file__).resolve().parents[2:3]
                  if (p / "pyproject.toml").is_file()), None)


def get_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """Return the folder where clestim looks for and caches datasets.

    The first of these wins:

    1. ``data_home`` (``--data-home`` on the command line);
    2. the environment variable ``CLESTIM_DATA``;
    3. the environment variable ``CLESTIM_SHARED_DATA`` (the one the tests read);
    4. ``../shared/data`` relative to the current directory, if that folder exists;
    5. ``shared/data`` next to the clestim checkout (``<checkout>/../shared/data``),
       if that folder exists;
    6. ``~/.cache/clestim`` (``$XDG_CACHE_HOME/clestim`` when that variable is set).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Explicit folder.

    Returns
    -------
    path : pathlib.Path
        The folder (not created; loaders create it only when writing to it).

    Examples
    --------
    >>> from clestim.datasets import get_data_home
    >>> get_data_home("/tmp/my_data").as_posix()
    '/tmp/my_data'
    """
    if data_home is None:
        data_home = os.environ.get(ENV_VAR) or os.environ.get("CLESTIM_SHARED_DATA")
    if data_home is None:
        shared = [Path("..", "shared", "data")]
        if _CHECKOUT is not None:
            shared.append(_CHECKOUT.parent / "shared" / "data")
        data_home = next((p.resolve() for p in shared if p.is_dir()), None)
    if data_home is None:
        cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        data_home = Path(cache) / "clestim"
    return Path(data_home).expanduser()


# ----------------------------------------------------------------------------- validation


def check_X_3d(X, *, name: str = "X", allow_nan: bool = False) -> np.ndarray:
    """Validate a time-series array and return it as float32 (n, C, L).

    A 2-D array ``(n, L)`` is read as univariate and gets a channel axis.
    """
    X = np.asarray(X)
    if X.dtype == object:
        raise ValueError(f"{name} must be a numeric array, got dtype=object "
                         "(unequal-length series must be padded first)")
    if X.ndim == 2:
        X = X[:, None, :]
    if X.ndim != 3:
        raise ValueError(f"{name} must be 3-D (n_samples, n_channels, n_timepoints); "
                         f"got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0 or X.shape[2] == 0:
        raise ValueError(f"{name} has an empty axis: shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) and X.dtype != bool:
        raise ValueError(f"{name} must be numeric, got dtype {X.dtype}")
    X = X.astype(np.float32, copy=False)
    if not allow_nan:
        bad = ~np.isfinite(X)
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(len(X), -1).any(axis=1))[0])
            raise ValueError(f"{name} contains {int(bad.sum())} NaN or infinite value(s) "
                             f"(first in sample {i}); clean or impute the source first")
    return X


def check_labels(y, n_samples: int, *, name: str = "y") -> np.ndarray:
    """Validate a label vector against the number of samples."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    if len(y) != n_samples:
        raise ValueError(f"{name} has {len(y)} labels but X has {n_samples} samples")
    if y.dtype.kind == "f":
        if np.isnan(y).any():
            raise ValueError(f"{name} contains NaN labels")
        if np.all(y == np.round(y)):
            y = y.astype(np.int64)
    return y


def _int_labels(y) -> np.ndarray:
    y = np.asarray(y)
    if y.dtype.kind in "iu":
        return y.astype(np.int64)
    return y


def make_bunch(
    *,
    name: str,
    X_train,
    y_train,
    X_test,
    y_test,
    subject_train=None,
    subject_test=None,
    channel_names=None,
    class_names=None,
    n_tasks: int | None = None,
    descr: str = "",
    citation: str = "",
    license: str = "",
    class_order=None,
    sampling_rate: float | None = None,
    source: str | None = None,
    allow_empty_test: bool = False,
    **extra,
) -> Bunch:
    """Validate the arrays and assemble the common dataset :class:`Bunch`."""
    X_train = check_X_3d(X_train, name="X_train")
    y_train = _int_labels(check_labels(y_train, len(X_train), name="y_train"))
    if allow_empty_test and (X_test is None or len(X_test) == 0):
        X_test = np.empty((0,) + X_train.shape[1:], dtype=np.float32)
        y_test = np.empty((0,), dtype=y_train.dtype)
    else:
        X_test = check_X_3d(X_test, name="X_test")
        y_test = _int_labels(check_labels(y_test, len(X_test), name="y_test"))
    if X_test.shape[1:] != X_train.shape[1:]:
        raise ValueError(f"X_train samples are {X_train.shape[1:]} but X_test samples "
                         f"are {X_test.shape[1:]}")
    if subject_train is not None:
        subject_train = _int_labels(check_labels(subject_train, len(X_train),
                                                 name="subject_train"))
    if subject_test is not None:
        subject_test = _int_labels(check_labels(subject_test, len(X_test),
                                                name="subject_test"))
    n_channels = X_train.shape[1]
    if channel_names is None:
        channel_names = [f"dim_{i}" for i in range(n_channels)]
    channel_names = [str(c) for c in channel_names]
    if len(channel_names) != n_channels:
        raise ValueError(f"{len(channel_names)} channel names for {n_channels} channels")
    if class_names is not None:
        class_names = [str(c) for c in class_names]
    DESCR = descr.strip()
    if citation:
        DESCR += "\n\nCitation\n--------\n" + citation.strip()
    if license:
        DESCR += "\n\nLicence\n-------\n" + license.strip()
    return Bunch(
        name=name,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        subject_train=subject_train,
        subject_test=subject_test,
        channel_names=channel_names,
        class_names=class_names,
        n_tasks=n_tasks,
        class_order=None if class_order is None else list(class_order),
        sampling_rate=sampling_rate,
        citation=citation.strip(),
        license=license.strip(),
        source=source,
        DESCR=DESCR + "\n",
        **extra,
    )


# ----------------------------------------------------------------------------- files


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_checksum(path: str | os.PathLike, expected: str, algorithm: str = "sha256") -> None:
    """Raise :class:`ChecksumError` unless ``path`` has the ``expected`` digest.

    Parameters
    ----------
    path : path-like
        The file to check.
    expected : str
        Hex digest (case-insensitive).
    algorithm : str, default="sha256"
        Any :func:`hashlib.new` name ("sha256", "md5", ...).
    """
    got = file_digest(path, algorithm)
    if got.lower() != expected.lower():
        raise ChecksumError(
            f"{algorithm} mismatch for {path}: expected {expected.lower()}, got {got}. "
            "The file is corrupt or not the expected release; delete it and fetch it again."
        )


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None,
             timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its SHA-256 when known.

    The bytes go to ``dest + '.part'`` first and are renamed only after the
    checksum passes, so an interrupted or corrupt download never looks valid.
    When no digest is pinned (``sha256=None``) a :class:`UserWarning` reports the
    digest of what was received so that it can be pinned.

    Raises
    ------
    DatasetNotFoundError
        When the network cannot be reached (with the URL in the message).
    ChecksumError
        When the received file does not match ``sha256``.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(part, "wb") as out:
            shutil.copyfileobj(resp, out, length=1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        part.unlink(missing_ok=True)
        raise DatasetNotFoundError(f"could not download {url}: {exc}") from exc
    if sha256 is not None:
        try:
            verify_checksum(part, sha256)
        except ChecksumError:
            part.unlink(missing_ok=True)
            raise
    else:
        warnings.warn(f"no pinned checksum for {url}; received sha256={file_digest(part)}",
                      UserWarning, stacklevel=2)
    part.replace(dest)
    return dest


def extract_zip(archive: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Extract ``archive`` into ``dest``, then any zip archives found inside it.

    Member paths that would escape ``dest`` are rejected.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    todo = [Path(archive)]
    while todo:
        arc = todo.pop()
        with zipfile.ZipFile(arc) as zf:
            root = dest.resolve()
            for member in zf.namelist():
                target = (dest / member).resolve()
                if root not in target.parents and target != root:
                    raise ValueError(f"unsafe path {member!r} in {arc}")
            zf.extractall(dest)
            for member in zf.namelist():
                if member.lower().endswith(".zip") and "__MACOSX" not in member:
                    todo.append(dest / member)
    return dest


def load_npz(path: str | os.PathLike, required: tuple[str, ...]) -> dict:
    """Load a prepared ``.npz`` file fully into memory, checking its keys."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as d:
            data = {k: d[k] for k in d.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ValueError(f"cannot read {path}: {exc}; the file is corrupt or truncated, "
                         "delete it and prepare or download it again") from exc
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"{path} lacks the array(s) {missing}; found {sorted(data)}")
    return data


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that rebuilds numpy arrays and refuses every other global."""

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED or (
            module in ("numpy", "numpy.dtypes") and name.endswith("DType")
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy "
                                     "arrays are allowed in dataset pickles")


def load_numpy_pickle(path: str | os.PathLike) -> np.ndarray:
    """Read a pickle holding one numpy array, without executing arbitrary code."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            obj = _NumpyOnlyUnpickler(io.BufferedReader(f)).load()
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise ValueError(f"cannot read {path}: {exc}") from exc
    return np.asarray(obj)
