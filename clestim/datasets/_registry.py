"""Name -> loader registry used by ``load_dataset`` and the ``clestim datasets`` command."""

from __future__ import annotations

from . import _benchmarks as _b
from . import _embedded as _e
from ._base import get_data_home
from ._info import ALIASES, INFO

LOADERS = {
    "uci_har": _b.load_uci_har,
    "dsa": _b.load_dsa,
    "uwave": _b.load_uwave,
    "wisdm": _b.load_wisdm,
    "grabmyo": _b.load_grabmyo,
    "mnist": _b.load_mnist,
    "basic_motions": _e.load_basic_motions,
    "japanese_vowels": _e.load_japanese_vowels,
    "acsf1": _e.load_acsf1,
    "osuleaf": _e.load_osuleaf,
    "digits": _e.load_digits,
}

_RAW_FINDERS = {
    "uci_har": _b._har_find,
    "dsa": _b._dsa_find,
    "uwave": _b._uwave_find,
    "wisdm": _b._wisdm_find,
    "grabmyo": _b._grabmyo_find,
    "mnist": _b._mnist_find,
}


def _canonical(name: str) -> str:
    key = str(name).strip().lower().replace("-", "_")
    key = ALIASES.get(key, ALIASES.get(key.replace("_", ""), key))
    if key not in LOADERS:
        valid = ", ".join(sorted(LOADERS))
        raise ValueError(f"unknown dataset {name!r}; valid names are: {valid} "
                         f"(aliases: {', '.join(sorted(ALIASES))})")
    return key


def _broken(npz) -> str | None:
    """Why a prepared ``.npz`` file does not open (truncated, damaged), else None."""
    import zipfile

    try:
        with zipfile.ZipFile(npz) as archive:
            bad = archive.testzip()  # reads every member and checks its CRC
        if bad is not None:
            return f"member {bad} is damaged"
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        return f"does not open ({exc})"
    return None


def _where(name: str, data_home) -> str:
    info = INFO[name]
    if info["kind"] == "embedded":
        return "embedded (ships with sktime/scikit-learn)"
    home = get_data_home(data_home)
    npz = home / info["prepared"]
    if npz.is_file():
        problem = _broken(npz)
        if problem:
            return f"BROKEN prepared file {npz}: {problem} (delete it and prepare it again)"
        return f"prepared file {npz}"
    raw_root = home / name
    try:
        raw = _RAW_FINDERS[name](raw_root) if raw_root.is_dir() else None
    except ValueError as exc:  # incomplete raw folder
        return f"incomplete raw release in {raw_root}: {exc}"
    if raw is not None:
        return f"raw release in {raw_root}"
    how = "load with download=True" if info.get("url") else "no automatic download"
    return f"not found in {home} ({how})"


def list_datasets(data_home=None) -> dict:
    """Describe every dataset clestim can load and where it would come from.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Folder searched for the benchmark files (see :func:`get_data_home`).

    Returns
    -------
    datasets : dict
        Name -> dict with ``description``, ``where`` (prepared file, raw release,
        embedded, or not found), ``kind`` ("benchmark", "image", "embedded"),
        ``shape``, ``n_classes``, ``n_tasks``, ``citation``, ``license``.

    Examples
    --------
    >>> from clestim.datasets import list_datasets
    >>> info = list_datasets()
    >>> info["basic_motions"]["where"]
    'embedded (ships with sktime/scikit-learn)'
    """
    out = {}
    for name in LOADERS:
        info = INFO[name]
        out[name] = {
            "description": info["summary"],
            "where": _where(name, data_home),
            "kind": info["kind"],
            "shape": info["shape"],
            "n_classes": info["n_classes"],
            "n_tasks": info["n_tasks"],
            "citation": info["citation"],
            "license": info["license"],
        }
    return out


def load_dataset(name: str, **kwargs):
    """Load a dataset by name (case-insensitive; aliases such as "har" accepted).

    Parameters
    ----------
    name : str
        One of the keys of :func:`list_datasets`.
    **kwargs
        Passed to the loader (e.g. ``data_home``, ``download``, ``flatten``).

    Returns
    -------
    data : sklearn.utils.Bunch

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones).

    Examples
    --------
    >>> from clestim.datasets import load_dataset
    >>> load_dataset("basic_motions").n_tasks
    2
    """
    return LOADERS[_canonical(name)](**kwargs)
