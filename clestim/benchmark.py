"""Benchmark grids: datasets x methods x settings x runs, resumable and parallel.

A grid is expanded into *cells* (one dataset, method, setting and run). Each cell
runs the TSCIL protocol (Qiao et al. 2024): the class order and seed of run ``r``
are ``seed + r``; streams of more than 4 tasks keep the first 3 for tuning and
report the rest (the experiment stream); with ``tune=True`` the method's grid is
searched on the validation stream and the best setting is refitted on the
experiment stream; the estimator is evaluated after every task.

The moment a cell finishes, its result is written atomically (a temporary file
renamed into place) to ``RESULTS/cells/<key>.json``. Running the same grid again
skips the cells already there, so an interrupted or crashed benchmark loses
nothing that finished. Cells run in parallel through joblib (``n_jobs``) or on a
Dask cluster (``scheduler``); results are always written by the calling process.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

RESULTS_FORMAT = 1
#: Settings a grid can vary, applied to every method that has the parameter.
SETTINGS = ("norm", "input_norm", "memory_size", "classifier", "backbone")
CONFIG_KEYS = {
    "datasets", "methods", "runs", "seed", "settings", "params", "grid", "tune",
    "max_epochs", "classes_per_task", "data_home", "device",
}


@dataclass(frozen=True)
class Cell:
    """One unit of a benchmark: a dataset, a method, a setting and a run."""

    dataset: str
    method: str
    run: int
    settings: tuple = ()
    #: everything else that changes the result: fixed parameters, grid, epochs, seed...
    protocol: tuple = ()

    @property
    def key(self) -> str:
        """A file name that changes whenever anything that shapes the result changes."""
        label = "_".join(f"{k}-{v}" for k, v in self.settings) or "default"
        digest = hashlib.sha1(repr((self.settings, self.protocol)).encode()).hexdigest()[:8]
        safe = "".join(ch if ch.isalnum() or ch in "-._" else "-" for ch in label)
        return f"{self.dataset}__{self.method}__{safe}__{digest}__run{self.run}"

    @property
    def setting_label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.settings) or "default"


@dataclass
class BenchmarkConfig:
    """What to run. Every field can come from a TOML file (:meth:`from_toml`).

    Parameters
    ----------
    datasets, methods : list of str
        Names from :func:`clestim.datasets.list_datasets` and the estimators of
        :mod:`clestim` (for example ``'Naive'``, ``'ER'``).
    runs : int, default=1
    seed : int, default=1234
        Run ``r`` uses ``seed + r`` for the class order and the estimator.
    settings : dict of str to list
        Values of :data:`SETTINGS` to cross; ``memory_size='tscil'`` is TSCIL's
        5% budget for the dataset (a fraction of 0.05 for other datasets), and
        ``memory_size='P%'`` a fixed count of P percent of the training samples
        of the stream's learned tasks (the budgets of TSCIL's Figure 3).
    params : dict of str to dict
        Fixed parameters per method, for example ``{'LwF': {'lambda_kd': 1e4}}``.
    grid : dict of str to dict
        Per-method hyperparameter grids searched on the validation stream when
        ``tune`` is true; a method without one gets TSCIL's grid
        (:func:`clestim.reference_results.tscil_grid`: its hyperparameters and the
        LR schedule).
    tune : bool, default=False
    max_epochs : int, default=100
    classes_per_task : int, default=2
    data_home : str, optional
    device : str, default='cpu'
    """

    datasets: list = field(default_factory=lambda: ["basic_motions"])
    methods: list = field(default_factory=lambda: ["Naive", "ER"])
    runs: int = 1
    seed: int = 1234
    settings: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    tune: bool = False
    max_epochs: int = 100
    classes_per_task: int = 2
    data_home: str | None = None
    device: str = "cpu"

    @classmethod
    def from_dict(cls, values: dict) -> BenchmarkConfig:
        unknown = set(values) - CONFIG_KEYS
        if unknown:
            raise ValueError(
                f"unknown config key(s) {sorted(unknown)}; valid keys are {sorted(CONFIG_KEYS)}"
            )
        config = cls(**values)
        config.validate()
        return config

    @classmethod
    def from_toml(cls, path) -> BenchmarkConfig:
        with open(path, "rb") as f:
            return cls.from_dict(tomllib.load(f))

    def validate(self) -> None:
        for name in self.datasets:
            _dataset_name(name)  # raises, listing the valid names
        methods = available_methods()
        for name in [*self.methods, *self.params, *self.grid]:
            if name not in methods:
                raise ValueError(f"unknown method {name!r}; valid methods are {sorted(methods)}")
        for name in self.settings:
            if name not in SETTINGS:
                raise ValueError(f"unknown setting {name!r}; valid settings are {list(SETTINGS)}")
        for method, params in {**self.params, **self.grid}.items():
            valid = methods[method]._get_param_names()
            for p in params:
                if p not in valid:
                    raise ValueError(f"{method} has no parameter {p!r}; it has {valid}")
        if not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"runs must be a positive integer, got {self.runs!r}")

    def grid_for(self, method: str) -> dict:
        """The grid ``--tune`` searches for ``method``: the configured one, else TSCIL's,
        without the parameters fixed in ``params``."""
        from .reference_results import tscil_grid

        accepted = available_methods()[method]._get_param_names()
        fixed = self.params.get(method, {})
        grid = self.grid.get(method) or tscil_grid(method)
        return {k: list(v) for k, v in grid.items() if k in accepted and k not in fixed}

    def cells(self) -> list[Cell]:
        """The grid, one cell per distinct (dataset, method, applicable setting, run)."""
        names = list(self.settings)
        combos = list(itertools.product(*(_as_list(self.settings[n]) for n in names)))
        methods = available_methods()
        cells = {}
        for dataset, method, combo, run in itertools.product(
            self.datasets, self.methods, combos or [()], range(self.runs)
        ):
            accepted = methods[method]._get_param_names()
            settings = tuple((n, v) for n, v in zip(names, combo) if n in accepted)
            protocol = (
                ("params", tuple(sorted(self.params.get(method, {}).items()))),
                ("grid", tuple(sorted((k, tuple(v)) for k, v in
                                      self.grid_for(method).items())) if self.tune else ()),
                ("max_epochs", self.max_epochs), ("seed", self.seed),
                ("classes_per_task", self.classes_per_task),
            )
            cell = Cell(_dataset_name(dataset), method, run, settings, protocol)
            cells[cell.key] = cell
        return list(cells.values())


def available_methods() -> dict:
    """Estimator classes of :mod:`clestim` by name."""
    import clestim
    from clestim.base import ContinualClassifier

    return {
        name: obj
        for name in clestim.__all__
        if isinstance(obj := getattr(clestim, name), type)
        and issubclass(obj, ContinualClassifier)
        and obj is not ContinualClassifier
    }


def _dataset_name(name: str) -> str:
    """The canonical dataset name (aliases such as 'har' accepted)."""
    from .datasets._registry import _canonical

    return _canonical(name)


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@lru_cache(maxsize=4)
def _load(dataset: str, data_home):
    import inspect

    from .datasets import load_dataset
    from .datasets._registry import LOADERS

    takes_home = "data_home" in inspect.signature(LOADERS[dataset]).parameters
    return load_dataset(dataset, **({"data_home": data_home} if takes_home else {}))


def make_estimator(cell: Cell, config: BenchmarkConfig, verbose: int = 0, n_stream_samples=None):
    """The estimator of a cell, with TSCIL's per-dataset defaults.

    ``n_stream_samples`` (the training samples of the tasks the cell learns) sizes a
    percentage memory budget."""
    from .reference_results import TSCIL_DROPOUT, TSCIL_MEMORY_SIZE

    cls = available_methods()[cell.method]
    accepted = cls._get_param_names()
    params = {
        "max_epochs": config.max_epochs,
        "random_state": config.seed + cell.run,
        "device": config.device,
        "verbose": verbose,
        "dropout": TSCIL_DROPOUT.get(cell.dataset, 0.0),
    }
    if "memory_size" in accepted:
        params["memory_size"] = "tscil"
    if "adaptive_weight" in accepted and cell.dataset == "dsa":
        params["adaptive_weight"] = False  # TSCIL's configuration for DSA
    params.update(dict(cell.settings))
    params.update(config.params.get(cell.method, {}))
    if params.get("memory_size") == "tscil":
        params["memory_size"] = TSCIL_MEMORY_SIZE.get(cell.dataset, 0.05)
    elif isinstance(params.get("memory_size"), str):
        params["memory_size"] = _percent_budget(params["memory_size"], n_stream_samples)
    return cls(**{k: v for k, v in params.items() if k in accepted})


def _percent_budget(text: str, n_samples) -> int:
    """Slots for a budget written 'P%' of the ``n_samples`` training samples."""
    try:
        percent = float(text.removesuffix("%")) if text.endswith("%") else None
    except ValueError:
        percent = None
    if percent is None or not 0 < percent <= 100:
        raise ValueError(
            f"memory_size {text!r} is not 'tscil', a count, a fraction or a percentage "
            f"such as '10%' in (0%, 100%]"
        )
    if n_samples is None:
        raise ValueError(f"memory_size {text!r} needs the number of training samples")
    return max(1, round(percent / 100 * n_samples))


def make_stream(cell: Cell, config: BenchmarkConfig, n_classes: int):
    """Class-incremental stream of run ``cell.run``; its experiment part when long."""
    from .streams import ClassIncremental, StreamPart

    stream = ClassIncremental(
        classes_per_task=config.classes_per_task,
        random_state=config.seed + cell.run,
        remainder="drop",
    )
    if n_classes // config.classes_per_task > 4:
        return stream, StreamPart(stream, part="experiment")
    return stream, stream


def run_cell(cell: Cell, config: BenchmarkConfig, verbose: int = 0) -> dict:
    """Run one cell and return its JSON-serialisable record."""
    import torch

    from .evaluation import evaluate_stream

    data = _load(cell.dataset, config.data_home)
    full_stream, stream = make_stream(cell, config, len(np.unique(data.y_train)))
    n_stream_samples = sum(len(idx) for idx in stream.split(data.X_train, data.y_train))
    est = make_estimator(cell, config, verbose, n_stream_samples)
    best_params = {}
    start = time.perf_counter()
    if config.tune:
        from .model_selection import ContinualGridSearch

        search = ContinualGridSearch(
            est.set_params(stream=full_stream), config.grid_for(cell.method), refit=False
        ).fit(data.X_train, data.y_train)
        best_params = search.best_params_
        est.set_params(**best_params)
    # Subject ids reach the estimator (subject-aware replay); others ignore them.
    result = evaluate_stream(
        est, stream, data.X_train, data.y_train, data.X_test, data.y_test,
        groups=data.subject_train,
    )
    return {
        "format": RESULTS_FORMAT,
        "key": cell.key,
        "dataset": cell.dataset,
        "method": cell.method,
        "run": cell.run,
        "settings": dict(cell.settings),
        "setting": cell.setting_label,
        "protocol": {k: _jsonable(v) for k, v in cell.protocol},
        "best_params": {k: _jsonable(v) for k, v in best_params.items()},
        "wall_s": time.perf_counter() - start,
        "torch_threads": torch.get_num_threads(),
        **result.to_dict(),
    }


def _jsonable(v):
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


# ----------------------------------------------------------------- results folder
def check_results_dir(results: Path, create: bool = True) -> Path:
    """Create the results folder or check that an existing one is compatible."""
    from . import __version__

    results = Path(results)
    manifest = results / "manifest.json"
    if manifest.exists():
        try:
            found = json.loads(manifest.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{manifest} is not valid JSON: {exc}") from exc
        if found.get("format") != RESULTS_FORMAT:
            raise ValueError(
                f"{results} holds results in format {found.get('format')!r} (clestim "
                f"{found.get('clestim')}); this clestim {__version__} reads format "
                f"{RESULTS_FORMAT}. Use another results folder."
            )
    elif create:
        (results / "cells").mkdir(parents=True, exist_ok=True)
        write_json_atomic(manifest, {"format": RESULTS_FORMAT, "clestim": __version__})
    elif not results.is_dir():
        raise ValueError(f"no results folder at {results}")
    return results


def write_json_atomic(path: Path, record: dict) -> None:
    """Write JSON to a temporary file in the same folder, then rename it into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_results(results) -> list[dict]:
    """Every finished cell record in a results folder."""
    results = check_results_dir(results, create=False)
    return [json.loads(p.read_text()) for p in sorted((results / "cells").glob("*.json"))]


def run_benchmark(config, results, *, n_jobs=1, scheduler=None, progress=True, log=print):
    """Run every cell of ``config`` not yet in ``results``; returns all records.

    Parameters
    ----------
    config : BenchmarkConfig
    results : path
        Results folder (created when missing).
    n_jobs : int, default=1
        Cells run in parallel through joblib.
    scheduler : str, optional
        Address of a Dask scheduler (``'tcp://host:8786'``), or ``'local'`` for a
        ``distributed.LocalCluster`` on this machine.
    progress : bool, default=True
        On a terminal (or in a notebook), a progress bar over cells (and, with
        ``n_jobs=1``, per task); elsewhere (a log file, a pipe) one ``log`` line per
        finished cell.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm.auto import tqdm

    from ._training import interactive_stderr

    results = check_results_dir(results)
    cells = config.cells()
    done = {p.stem for p in (results / "cells").glob("*.json")}
    todo = [c for c in cells if c.key not in done]
    log(f"{len(cells)} cells: {len(cells) - len(todo)} already in {results}, {len(todo)} to run")
    bars = progress and interactive_stderr()
    verbose = int(bars and n_jobs == 1 and scheduler is None)
    client = _dask_client(scheduler) if scheduler else None
    try:
        backend = {"backend": "dask"} if client is not None else {"n_jobs": n_jobs}
        with parallel_config(**backend):
            runner = Parallel(return_as="generator_unordered")
            bar = tqdm(total=len(todo), desc="cells", unit="cell", disable=not bars)
            for i, record in enumerate(
                    runner(delayed(run_cell)(c, config, verbose) for c in todo), 1):
                write_json_atomic(results / "cells" / f"{record['key']}.json", record)
                bar.update(1)
                bar.set_postfix_str(f"{record['method']} on {record['dataset']}")
                if progress and not bars:
                    log(f"[{i}/{len(todo)}] {_cell_line(record)}")
            bar.close()
    finally:
        if client is not None:
            cluster = getattr(client, "_clestim_cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    return load_results(results)


def _cell_line(record: dict) -> str:
    """'ER on uci_har (norm=layer), run 0: A_T 85.0, F_T 10.0 (12 s)'."""
    m = record["metrics"]
    return (f"{record['method']} on {record['dataset']} ({record['setting']}), "
            f"run {record['run']}: A_T {100 * m['average_accuracy']:.1f}, "
            f"F_T {100 * m['average_forgetting']:.1f} "
            f"({record['wall_s']:.0f} s)")


def _dask_client(scheduler: str):
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - optional dependency
        raise ImportError("the Dask backend needs `pip install clestim[dask]`") from exc
    if scheduler == "local":
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
        client = Client(cluster)
        client._clestim_cluster = cluster
        return client
    try:
        return Client(scheduler, timeout="5s")
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from exc
    except Exception as exc:  # another protocol's bytes read as a Dask frame (MemoryError...)
        raise ConnectionError(
            f"{scheduler!r} answered, but not as a Dask scheduler ({type(exc).__name__}); "
            "check the address and port (a scheduler listens on 8786 by default)"
        ) from exc


# ----------------------------------------------------------------------- tables
def cell_params(record: dict) -> dict:
    """The fixed method parameters of a finished cell (``--set`` / ``params``)."""
    import ast

    return dict(ast.literal_eval(record.get("protocol", {}).get("params", "()")))


def variant_label(record: dict) -> str:
    """'param=value, ...' of a cell's fixed method parameters, and 'tuned' when it
    searched a grid first ('' for neither)."""
    parts = [f"{k}={v}" for k, v in cell_params(record).items()]
    if record.get("protocol", {}).get("grid", "()") != "()":
        parts.append("tuned")
    return ", ".join(parts)


def summary_frame(records: list[dict]):
    """Mean and 95% CI (t distribution) of A_T, F_T and A_cur in percent per
    dataset, setting, method and variant (the method's fixed parameters)."""
    import pandas as pd

    from .evaluation import confidence_interval

    groups = {}
    for r in records:
        groups.setdefault((r["dataset"], r["setting"], r["method"], variant_label(r)), []).append(r)
    rows = []
    for (dataset, setting, method, variant), group in sorted(groups.items()):
        row = {"dataset": dataset, "setting": setting, "method": method, "variant": variant,
               "runs": len(group)}
        for label, metric in (("A_T", "average_accuracy"), ("F_T", "average_forgetting"),
                              ("A_cur", "learning_accuracy")):
            mean, ci = confidence_interval(np.array([100 * r["metrics"][metric] for r in group]))
            row[label], row[f"{label}_ci"] = float(mean), float(ci)
        rows.append(row)
    return pd.DataFrame(rows)
