"""Benchmark grids: datasets x methods x settings x runs, resumable and parallel.

A grid is expanded into *cells* (one dataset, method, setting and run). Each cell
runs the TSCIL protocol (Qiao et al. 2024): the class order and seed of run ``r``
are ``seed + r``; streams of more than 4 tasks keep the first 3 for tuning and
report the rest (the experiment stream); UCI-HAR and UWave train on 90% of their
training set, the rest held out as TSCIL's ``x_val``; every method runs TSCIL's
step15 LR schedule unless set or tuned; with ``tune=True`` the method's grid is
searched on the validation stream and the best setting is refitted on the
experiment stream; the estimator is evaluated after every task.

The moment a cell finishes, its result is written atomically (a temporary file
renamed into place) to ``RESULTS/cells/<key>.json``. Running the same grid again
skips the cells already there, so an interrupted or crashed benchmark loses
nothing that finished. Cells run in parallel through joblib (``n_jobs``) or on a
Dask cluster (``scheduler``); results are always written by the calling process,
which holds a lock per cell (``RESULTS/locks``) while the cell runs, so two
``bench`` processes on one folder never compute the same cell. A corrupt or
incomplete cell file is moved to ``RESULTS/cells/corrupt/`` with a warning and
computed again. A tuned cell saves each candidate of its search the moment it is
scored (``RESULTS/candidates/<key>/``), so a tuned cell interrupted mid-search
resumes its search; the folder goes once the cell is written. Every cell runs with
a fixed number of torch threads (``threads``), part of its protocol, so its
numbers do not depend on ``n_jobs``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import time
import tomllib
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ._atomic import write_json_atomic
from ._heap import retained_heap

RESULTS_FORMAT = 1
#: Settings a grid can vary, applied to every method that has the parameter.
SETTINGS = ("norm", "input_norm", "memory_size", "classifier", "backbone")
CONFIG_KEYS = {
    "datasets", "methods", "runs", "seed", "settings", "params", "grid", "tune",
    "max_epochs", "classes_per_task", "data_home", "device", "threads", "precision", "problems",
    "n_tasks", "lr_schedule", "holdout",
}
#: Protocol facts added to the cell key after the first results were written, with
#: the value those results used. A cell whose value equals it keeps its old key (so
#: existing folders resume), and a record without the fact is read with it.
PROTOCOL_DEFAULTS = {"threads": 1, "precision": "fp32", "lr_schedule": None, "holdout": 0.0}
#: Facts recorded in every cell but not in its key, with the value assumed for
#: records written before they were recorded (None: unknown, taken to be the value
#: of the other cells of the row); the report keeps different values apart too.
RECORDED_DEFAULTS = {"clestim": "0.1.0", "data": None}
#: What a finished cell record must hold.
RECORD_KEYS = ("key", "dataset", "method", "run", "settings", "setting", "accuracy_matrix",
               "metrics")


class ResultsWarning(UserWarning):
    """A results folder holds a file that is not a valid cell (it is skipped)."""


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
    threads : int or 'auto', default=1
        Torch threads of every cell, set inside the cell (part of its protocol: a
        value other than 1 enters the cell key). ``'auto'`` gives each of the
        ``n_jobs`` parallel cells ``cores // n_jobs`` threads (:meth:`resolved`).
    precision : {'fp32', 'bf16', 'fp16'}, default='fp32'
        The estimators' ``precision``; part of a cell's key unless ``'fp32'`` (so
        fp32 cells keep the keys they had before the option existed).
    problems : int, optional
        The fixed-problem protocol of Villa et al. (2022): ``problems`` problems of
        ``n_tasks`` tasks drawn once (seed ``seed``) from a
        :class:`~clestim.streams.TaskPool` of ``classes_per_task``-class tasks;
        run ``e`` learns problem ``e`` (``runs`` is ignored), every method the same.
    n_tasks : int, optional
        Tasks per problem (default: the whole pool).
    lr_schedule : str or None, default='step15'
        Every estimator's ``lr_schedule`` unless ``params`` or a tuned grid sets it:
        TSCIL's untuned runs use ``'step15'`` (its ``main_config.py``; its code also
        runs each task's first epoch at ``lr / 25``: ``'tscil-step15'``); None keeps
        the rate constant (the cells written before this option).
    holdout : float or 'tscil', default='tscil'
        Fraction of the training set held out at the dataset level before any task
        is cut (unstratified, ``random_state=0``, the same for every run): cells
        train on the rest, and ``tune`` scores streams of fewer than 5 tasks on the
        hold-out. ``'tscil'`` is TSCIL's choice per dataset (0.1 for UCI-HAR and
        UWave, 0 elsewhere: :data:`clestim.reference_results.TSCIL_HOLDOUT`).
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
    threads: int | str = 1
    precision: str = "fp32"
    problems: int | None = None
    n_tasks: int | None = None
    lr_schedule: str | None = "step15"
    holdout: float | str = "tscil"

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
        """Check every setting without loading data; one error lists every problem."""
        problems = self._problems()
        if problems:
            raise ValueError(_problem_list(problems))

    def _problems(self) -> list[str]:
        problems = []

        def check(condition, message):
            if not condition:
                problems.append(message)

        for name in _as_list(self.datasets):
            try:
                _dataset_name(name)
            except ValueError as exc:  # lists the valid names
                problems.append(str(exc))
        methods = available_methods()
        for name in dict.fromkeys([*self.methods, *self.params, *self.grid]):
            check(name in methods,
                  f"unknown method {name!r}; valid methods are {sorted(methods)}")
        for name in self.settings:
            check(name in SETTINGS,
                  f"unknown setting {name!r}; valid settings are {list(SETTINGS)}")
        for method, params in [*self.params.items(), *self.grid.items()]:
            if method in methods:
                valid = methods[method]._get_param_names()
                problems += [f"{method} has no parameter {p!r}; it has {valid}"
                             for p in params if p not in valid]
        for name in ("runs", "max_epochs", "classes_per_task"):
            value = getattr(self, name)
            check(_positive_int(value), f"{name} must be a positive integer, got {value!r}")
        from ._training import LR_SCHEDULES

        check(self.lr_schedule in LR_SCHEDULES,
              f"lr_schedule must be one of {list(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        check(self.holdout == "tscil" or (isinstance(self.holdout, (int, float))
                                          and not isinstance(self.holdout, bool)
                                          and 0 <= self.holdout < 1),
              f"holdout must be 'tscil' or a fraction in [0, 1), got {self.holdout!r}")
        check(isinstance(self.seed, int) and not isinstance(self.seed, bool),
              f"seed must be an integer, got {self.seed!r}")
        check(self.threads == "auto" or _positive_int(self.threads),
              f"threads must be a positive integer or 'auto', got {self.threads!r}")
        try:
            from ._precision import check_precision

            check_precision(self.precision, self.device)
        except (ValueError, TypeError) as exc:
            problems.append(str(exc))
        sizes = [*_as_list(self.settings.get("memory_size", [])),
                 *(p["memory_size"] for p in self.params.values() if "memory_size" in p)]
        for v in sizes:  # numbers go through the estimators' checks below
            check(not isinstance(v, str) or v == "tscil" or _percent(v) is not None,
                  f"memory_size {v!r} {_MEMORY_FORMS}")
        try:
            import torch

            device = torch.device(self.device)
            if device.type == "cuda" and not torch.cuda.is_available():
                raise RuntimeError("no CUDA device is available")
        except (RuntimeError, TypeError, ValueError) as exc:
            problems.append(f"device {self.device!r}: {exc}")
        # each value alone through the estimators' own checks (norm='lyer', lr=-1, ...):
        # a setting once, with the first method that has it; parameters per method
        trials = []
        known = [m for m in self.methods if m in methods]
        for name, values in self.settings.items():
            takers = [m for m in known if name in methods[m]._get_param_names()]
            trials += [(takers[0], {name: v}, "") for v in _as_list(values)
                       if takers and not (name == "memory_size" and isinstance(v, str))]
        for method in known:
            accepted = methods[method]._get_param_names()
            fixed = {k: v for k, v in self.params.get(method, {}).items() if k in accepted
                     and (k != "memory_size" or not isinstance(v, str))}
            trials.append((method, fixed, method))
            trials += [(method, {**fixed, n: v}, f"{method} grid")
                       for n, values in (self.grid.get(method) or {}).items()
                       if n in accepted for v in _as_list(values)]
        epochs = {"max_epochs": self.max_epochs} if _positive_int(self.max_epochs) else {}
        for method, values, where in trials:
            try:
                methods[method](**{**epochs, **values})._check_params()
            except (ValueError, TypeError) as exc:
                problems.append(f"{where}: {exc}" if where else str(exc))
        return list(dict.fromkeys(problems))

    def check_cells(self) -> None:
        """:meth:`validate`, then every cell built as it will run: the data loads,
        and every memory budget holds one sample per class on every task of the
        stream. One error lists every problem; nothing has been computed."""
        self.validate()
        problems = []
        for cell in self.cells():
            try:
                problems += _cell_problems(cell, self)
            except (ValueError, TypeError, OSError) as exc:
                problems.append(f"{cell.dataset}: {exc}")
        if problems:
            raise ValueError(_problem_list(list(dict.fromkeys(problems))))

    def resolved(self, n_jobs: int = 1) -> BenchmarkConfig:
        """The config with ``threads='auto'`` replaced by ``cores // n_jobs``."""
        if self.threads != "auto":
            return self
        from dataclasses import replace

        return replace(self, threads=max(1, (os.cpu_count() or 1) // max(1, n_jobs)))

    def holdout_for(self, dataset: str) -> float:
        """The fraction of ``dataset``'s training set held out (:attr:`holdout`)."""
        from .reference_results import TSCIL_HOLDOUT

        if self.holdout == "tscil":
            return TSCIL_HOLDOUT.get(_dataset_name(dataset), 0.0)
        return float(self.holdout)

    def protocol_fact(self, name: str, dataset: str):
        """The value of protocol fact ``name`` (:data:`PROTOCOL_DEFAULTS`) for a cell
        on ``dataset``."""
        return self.holdout_for(dataset) if name == "holdout" else getattr(self, name)

    def grid_for(self, method: str, dataset: str | None = None) -> dict:
        """The grid ``--tune`` searches for ``method`` (on ``dataset``): the configured
        one, else TSCIL's for that dataset, without the parameters fixed in ``params``."""
        from .reference_results import tscil_grid

        accepted = available_methods()[method]._get_param_names()
        fixed = self.params.get(method, {})
        grid = self.grid.get(method) or tscil_grid(method, dataset)
        return {k: list(v) for k, v in grid.items() if k in accepted and k not in fixed}

    def cells(self) -> list[Cell]:
        """The grid, one cell per distinct (dataset, method, applicable setting, run)."""
        names = list(self.settings)
        combos = list(itertools.product(*(_as_list(self.settings[n]) for n in names)))
        methods = available_methods()
        cells = {}
        runs = self.runs if self.problems is None else self.problems
        for dataset, method, combo, run in itertools.product(
            self.datasets, self.methods, combos or [()], range(runs)
        ):
            accepted = methods[method]._get_param_names()
            settings = tuple((n, v) for n, v in zip(names, combo) if n in accepted)
            protocol = (
                ("params", tuple(sorted(self.params.get(method, {}).items()))),
                ("grid", tuple(sorted((k, tuple(v)) for k, v in
                                      self.grid_for(method, dataset).items()))
                         if self.tune else ()),
                ("max_epochs", self.max_epochs), ("seed", self.seed),
                ("classes_per_task", self.classes_per_task),
            )
            if self.problems is not None:
                protocol += (("problems", self.problems), ("n_tasks", self.n_tasks))
            # later protocol facts enter the key only where they differ from the old value
            facts = {k: self.protocol_fact(k, dataset) for k in PROTOCOL_DEFAULTS}
            protocol += tuple((k, v) for k, v in facts.items() if v != PROTOCOL_DEFAULTS[k])
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


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@lru_cache(maxsize=4)
def _load(dataset: str, data_home):
    import inspect

    from .datasets import load_dataset
    from .datasets._registry import LOADERS

    takes_home = "data_home" in inspect.signature(LOADERS[dataset]).parameters
    return load_dataset(dataset, **({"data_home": data_home} if takes_home else {}))


def cell_data(cell: Cell, config: BenchmarkConfig):
    """The data of a cell: its dataset with the dataset-level hold-out
    (:meth:`BenchmarkConfig.holdout_for`) taken out of ``X_train``, ``y_train`` and
    ``subject_train`` and kept as ``X_holdout``, ``y_holdout`` (None without one).
    The split is TSCIL's: unstratified, ``random_state=0``, the same in every run."""
    from sklearn.model_selection import train_test_split
    from sklearn.utils import Bunch

    data = Bunch(**_load(cell.dataset, config.data_home), X_holdout=None, y_holdout=None)
    fraction = config.holdout_for(cell.dataset)
    if fraction:
        train, hold = train_test_split(np.arange(len(data.y_train)), test_size=fraction,
                                       random_state=0)
        train, hold = np.sort(train), np.sort(hold)
        data.X_holdout, data.y_holdout = data.X_train[hold], data.y_train[hold]
        data.X_train, data.y_train = data.X_train[train], data.y_train[train]
        if data.get("subject_train") is not None:
            data.subject_train = data.subject_train[train]
    return data


def make_estimator(cell: Cell, config: BenchmarkConfig, verbose: int = 0, n_stream_samples=None,
                   n_stream_classes=None):
    """The estimator of a cell, with TSCIL's per-dataset defaults.

    ``n_stream_samples`` (the training samples of the tasks the cell learns) sizes a
    percentage memory budget; on a dataset TSCIL has no budget for, ``'tscil'`` is
    5% of them but at least ``n_stream_classes`` (one slot per class)."""
    from .reference_results import TSCIL_DROPOUT, TSCIL_MEMORY_SIZE

    cls = available_methods()[cell.method]
    accepted = cls._get_param_names()
    params = {
        "max_epochs": config.max_epochs,
        "random_state": config.seed + cell.run,
        "device": config.device,
        "precision": config.precision,
        "verbose": verbose,
        "dropout": TSCIL_DROPOUT.get(cell.dataset, 0.0),
        # TSCIL's network, explicit so that the estimators' data-driven defaults
        # ('auto') never change a benchmark cell.
        "backbone": "cnn",
        "input_norm": "layer",
        "lr_schedule": config.lr_schedule,
    }
    if "memory_size" in accepted:
        params["memory_size"] = "tscil"
    if "adaptive_weight" in accepted and cell.dataset == "dsa":
        params["adaptive_weight"] = False  # TSCIL's configuration for DSA
    params.update(dict(cell.settings))
    params.update(config.params.get(cell.method, {}))
    if params.get("memory_size") == "tscil":
        if cell.dataset in TSCIL_MEMORY_SIZE:
            params["memory_size"] = TSCIL_MEMORY_SIZE[cell.dataset]
        elif n_stream_samples is None:
            params["memory_size"] = 0.05
        else:  # 5% of the stream as in TSCIL, and at least one slot per class
            params["memory_size"] = max(_percent_budget("5%", n_stream_samples),
                                        n_stream_classes or 1)
    elif isinstance(params.get("memory_size"), str) and params["memory_size"].endswith("%"):
        params["memory_size"] = _percent_budget(params["memory_size"], n_stream_samples)
    return cls(**{k: v for k, v in params.items() if k in accepted})


_MEMORY_FORMS = ("is not 'tscil', a count, a fraction or a percentage such as '10%' "
                 "in (0%, 100%]")


def _percent(text) -> float | None:
    """P for a budget written 'P%' with P in (0, 100], else None."""
    try:
        percent = float(text.removesuffix("%")) if str(text).endswith("%") else None
    except ValueError:
        return None
    return percent if percent is not None and 0 < percent <= 100 else None


def _percent_budget(text: str, n_samples) -> int:
    """Slots for a budget written 'P%' of the ``n_samples`` training samples."""
    percent = _percent(text)
    if percent is None:
        raise ValueError(f"memory_size {text!r} {_MEMORY_FORMS}")
    if n_samples is None:
        raise ValueError(f"memory_size {text!r} needs the number of training samples")
    return max(1, round(percent / 100 * n_samples))


def _stream_tasks(cell: Cell, config: BenchmarkConfig, data):
    """The (full, reported) streams of a cell and the labels of each reported task."""
    full_stream, stream = make_stream(cell, config, len(np.unique(data.y_train)))
    tasks = [data.y_train[idx] for idx in stream.split(data.X_train, data.y_train)]
    return full_stream, stream, tasks


def _cell_estimator(cell: Cell, config: BenchmarkConfig, data, verbose: int = 0):
    """The cell's (full stream, reported stream, estimator)."""
    full_stream, stream, tasks = _stream_tasks(cell, config, data)
    est = make_estimator(cell, config, verbose, sum(map(len, tasks)),
                         n_stream_classes=len(np.unique(np.concatenate(tasks))))
    return full_stream, stream, est, tasks


def _cell_problems(cell: Cell, config: BenchmarkConfig) -> list[str]:
    """Why ``cell`` cannot run, found without training: a memory budget that cannot
    hold one sample per class of a class-balanced memory on some task."""
    from .memory.buffer import memory_capacity
    from .memory.policies import ClassBalancedSelection

    est, tasks = _cell_estimator(cell, config, cell_data(cell, config))[2:]
    label = f"{cell.method} on {cell.dataset} ({cell.setting_label})"
    try:
        est._check_params()
    except (ValueError, TypeError) as exc:
        return [f"{label}: {exc}"]
    update = getattr(est, "_update_policy", None)
    if update is None or not isinstance(update(), ClassBalancedSelection):
        return []
    n_seen, seen = 0, set()
    for i, y in enumerate(tasks):
        n_seen += len(y)
        seen |= set(np.unique(y).tolist())
        capacity = memory_capacity(est.memory_size, n_seen)
        if capacity < len(seen):
            return [f"{label}: memory_size={est.memory_size!r} holds {capacity} samples "
                    f"after task {i}, but {cell.method} keeps one per class of "
                    f"{len(seen)} classes; raise memory_size"]
    return []


def _problem_list(problems: list[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems in the grid:\n" + "\n".join(f"  - {p}" for p in problems)


def make_stream(cell: Cell, config: BenchmarkConfig, n_classes: int):
    """Class-incremental stream of run ``cell.run``; its experiment part when long.
    With ``config.problems``, fixed problem number ``cell.run`` of a TaskPool."""
    from .streams import ClassIncremental, StreamPart, TaskPool

    if config.problems is not None:
        pool = TaskPool(classes_per_task=config.classes_per_task, n_tasks=config.n_tasks,
                        n_problems=config.problems, problem=cell.run, random_state=config.seed)
        return pool, pool

    stream = ClassIncremental(
        classes_per_task=config.classes_per_task,
        random_state=config.seed + cell.run,
        remainder="drop",
    )
    if n_classes // config.classes_per_task > 4:
        return stream, StreamPart(stream, part="experiment")
    return stream, stream


def _scoring_data(data, stream, full_stream):
    """What ``tune`` scores candidates on, as TSCIL does: the dataset-level hold-out
    where there is one (UCI-HAR, UWave); else, when the stream splits into validation
    and experiment tasks (DSA), the test windows, of which only the validation tasks'
    classes count (the experiment stream never sees them); else None, and
    ContinualGridSearch holds out a seeded 20% of the training windows."""
    if data.X_holdout is not None:
        return data.X_holdout, data.y_holdout
    if stream is not full_stream:
        return data.X_test, data.y_test
    return None


@retained_heap()  # large tensors reuse freed memory (_heap.py)
def run_cell(cell: Cell, config: BenchmarkConfig, verbose: int = 0, candidates=None,
             progress=None) -> dict:
    """Run one cell and return its JSON-serialisable record.

    ``candidates``: for a tuned cell, the folder in which each searched candidate is
    saved as it finishes (``ContinualGridSearch(checkpoint_dir=...)``), so that the
    cell, run again after an interruption, resumes its search. ``progress``: the file
    in which the stream saves its progress after every task (``evaluate_stream(
    checkpoint=...)``), so that the cell, run again, resumes after its last saved
    task."""
    import torch

    from . import __version__
    from ._precision import amp_dtype
    from .evaluation import evaluate_stream

    data = cell_data(cell, config)
    full_stream, stream, est, _ = _cell_estimator(cell, config, data, verbose)
    best_params, searched = {}, None
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)  # part of the protocol, whatever n_jobs is
    try:
        start = time.perf_counter()
        if config.tune:
            from .model_selection import ContinualGridSearch

            grid = config.grid_for(cell.method, cell.dataset)
            search = ContinualGridSearch(
                est.set_params(stream=full_stream), grid, refit=False,
                random_state=config.seed + cell.run, checkpoint_dir=candidates,
            ).fit(data.X_train, data.y_train,
                  validation_data=_scoring_data(data, stream, full_stream))
            best_params = search.best_params_
            est.set_params(**best_params)
            searched = _search_record(search)
        # Subject ids reach the estimator (subject-aware replay); others ignore them.
        result = evaluate_stream(
            est, stream, data.X_train, data.y_train, data.X_test, data.y_test,
            groups=data.subject_train, clone_estimator=False, confusion=True,
            checkpoint=progress,
        )
        used_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    return {
        "format": RESULTS_FORMAT,
        "key": cell.key,
        "dataset": cell.dataset,
        "method": cell.method,
        "run": cell.run,
        "settings": dict(cell.settings),
        "setting": cell.setting_label,
        "protocol": {**{k: _jsonable(v) for k, v in cell.protocol},
                     **{k: config.protocol_fact(k, cell.dataset) for k in PROTOCOL_DEFAULTS}},
        "clestim": __version__,
        "data": _fingerprint(cell.dataset, config.data_home),
        "best_params": {k: _jsonable(v) for k, v in best_params.items()},
        # tuned cells: every candidate's validation score, best first
        **({} if searched is None else {"search": searched}),
        # every parameter the estimator ran with (after tuning), for the report
        "estimator_params": {k: _jsonable(v) for k, v in est.get_params(deep=False).items()
                             if k not in ("stream", "verbose")},
        # per task, the epochs training ran before early stopping ended it
        **_epochs(est),
        # a resumed cell: this call's time, plus the saved tasks' training and evaluation
        "wall_s": time.perf_counter() - start + float(
            (result.fit_time + result.eval_time)[:result.resumed_tasks].sum()),
        "torch_threads": used_threads,
        # float results are bit-for-bit only on the same kernels: see hardware()
        "hardware": hardware(config.device),
        "precision": config.precision,
        # what ran: 'bf16' falls back to 'fp32' on a CPU without native bfloat16
        "precision_used": {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[
            amp_dtype(config.precision, config.device)],
        **result.to_dict(),
    }


def _search_record(search) -> dict:
    """A fitted ContinualGridSearch as JSON: its scoring, how many candidates an
    earlier, interrupted run of the cell had saved (their fit time is not in the
    cell's ``wall_s``) and, best first, every candidate with its validation score
    and fit time."""
    res = search.cv_results_
    order = sorted(range(len(res["params"])), key=res["rank_test_score"].__getitem__)
    return {"scoring": search.scoring, "resumed_candidates": search.n_resumed_, "candidates": [
        {"params": {k: _jsonable(v) for k, v in res["params"][i].items()},
         "score": float(res[f"val_{search.scoring}"][i]),
         "fit_time": round(float(res["fit_time"][i]), 1)} for i in order]}


def hardware(device: str = "cpu") -> dict:
    """What computed a cell: the CPU's model name and the instruction set torch's CPU
    kernels were compiled for here (``torch.backends.cpu.get_cpu_capability()``,
    e.g. ``'AVX2'``, ``'AVX512'``), and the GPU's name when ``device`` is CUDA.

    Not part of a cell's key: a cell is the same experiment on any machine, but its
    numbers are bit-for-bit the same only where the kernels are. ATen and oneDNN
    pick kernels by instruction set, and kernels for other instruction sets round
    differently; early stopping and a long stream amplify these differences."""
    import platform

    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux
        pass
    out = {"cpu": model, "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return out


@lru_cache(maxsize=4)
def _fingerprint(dataset: str, data_home) -> str:
    """A digest of the dataset's arrays: cells on different data never share a row."""
    data = _load(dataset, data_home)
    digest = hashlib.sha1()
    for name in ("X_train", "y_train", "X_test", "y_test"):
        digest.update(np.ascontiguousarray(data[name]).tobytes())
    return digest.hexdigest()[:12]


def _epochs(est) -> dict:
    """``{'epochs': [...]}`` (and ``'generator_epochs'`` for GR): per task, how many
    epochs ran; empty for estimators whose history is not one row an epoch. With
    them, ``'valid_curves'``: per task, the early-stopping score of every epoch
    (the learner's ``valid_loss``, GR's generator's ``generator_valid_mse``; 6
    significant digits), which shows why early stopping ended where it did."""
    out, curves = {}, {}
    for key, attribute, score, curve in (
            ("epochs", "history_", "valid_loss", "valid_loss"),
            ("generator_epochs", "generator_history_", "valid_mse", "generator_valid_mse")):
        history = getattr(est, attribute, None)
        if history and all("epoch" in row for task in history for row in task):
            out[key] = [len(task) for task in history]
            if all(row.get(score) is not None for task in history for row in task):
                curves[curve] = [[float(f"{row[score]:.6g}") for row in task]
                                 for task in history]
    return {**out, **({"valid_curves": curves} if curves else {})}


def _jsonable(v):
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


# ----------------------------------------------------------------- results folder
def check_results_dir(results: Path, create: bool = True) -> Path:
    """Create the results folder or check that an existing one is compatible.

    On creation, also removes stray temporary files of the store (left by a kill
    mid-write) that no running process is writing."""
    from . import __version__

    results = Path(results)
    manifest = results / "manifest.json"
    if results.exists() and not results.is_dir():
        raise ValueError(f"{results} is a file, not a results folder")
    if manifest.exists():
        _check_manifest(manifest)
    elif not create:
        if not results.is_dir():
            raise ValueError(f"no results folder at {results}")
        return results
    if create:
        (results / "cells").mkdir(parents=True, exist_ok=True)
        (results / LOCKS).mkdir(exist_ok=True)
        with _lock(results, manifest.name):
            if manifest.exists():
                _check_manifest(manifest)
            else:
                write_json_atomic(manifest, {"format": RESULTS_FORMAT, "clestim": __version__})
        remove_stray_temporaries(results)
    return results


def _check_manifest(manifest: Path) -> None:
    from . import __version__

    try:
        found = json.loads(manifest.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{manifest} is not valid JSON: {exc}") from None
    if not isinstance(found, dict) or found.get("format") != RESULTS_FORMAT:
        found = found if isinstance(found, dict) else {}
        raise ValueError(
            f"{manifest.parent} holds results in format {found.get('format')!r} (clestim "
            f"{found.get('clestim')}); this clestim {__version__} reads format "
            f"{RESULTS_FORMAT}. Use another results folder."
        )


#: The folder of the per-cell lock files, inside a results folder.
LOCKS = "locks"
#: The folder of the candidates of tuned cells not yet finished (one subfolder a
#: cell), inside a results folder: an interrupted search resumes from them.
CANDIDATES = "candidates"
#: The folder of the streams of cells not yet finished (``<key>.pkl``: the estimator
#: after its last finished task), inside a results folder: an interrupted cell
#: resumes after that task.
PROGRESS = "progress"


def _progress_file(results: Path, key: str) -> Path:
    """The file in which cell ``key`` saves its stream's progress."""
    return results / PROGRESS / f"{key}.pkl"


def _lock(results: Path, name: str):
    """The inter-process lock of file ``name`` of ``results`` (an OS lock: it dies with
    its process, so a killed ``bench`` leaves no stale lock)."""
    from filelock import FileLock

    return FileLock(Path(results) / LOCKS / f"{name}.lock", thread_local=False)


def _is_temporary(path: Path) -> bool:
    """Whether ``path`` is a temporary file of :func:`write_json_atomic`, named
    '.<target name>.<random suffix>.tmp'."""
    return path.name.startswith(".") and path.name.endswith(".tmp") and path.name.count(".") >= 3


def remove_stray_temporaries(results) -> list[Path]:
    """Delete the store's temporary files that no process is writing (those whose
    target's lock is free); returns them."""
    from filelock import Timeout

    removed = []
    results = Path(results)
    # The lock that guards each folder's files, from the name of the file written:
    # candidate and progress files are written under their cell's lock.
    folders = [(results, str), (results / "cells", str),
               (results / PROGRESS, lambda name: f"{Path(name).stem}.json")] + [
        (folder, lambda name, cell=f"{folder.name}.json": cell)
        for folder in sorted((results / CANDIDATES).glob("*"))]
    for folder, lock_of in folders:
        for tmp in sorted(p for p in folder.glob(".*.tmp") if _is_temporary(p)):
            target = lock_of(tmp.name[1:].rsplit(".", 2)[0])
            try:
                with _lock(results, target).acquire(timeout=0):
                    tmp.unlink(missing_ok=True)
                    removed.append(tmp)
            except Timeout:  # being written right now
                pass
    return removed


def read_cell(path: Path) -> dict:
    """The record of a cell file; ValueError saying why when it is not a valid cell."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in RECORD_KEYS if k not in record]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    if record["key"] != path.stem:
        raise ValueError(f"holds cell {record['key']!r}, not {path.stem!r}")
    if not isinstance(record["metrics"], dict) or "average_accuracy" not in record["metrics"]:
        raise ValueError("lacks metrics.average_accuracy")
    return record


def load_results(results, move_corrupt: bool = False) -> list[dict]:
    """Every finished cell record in a results folder.

    A file that is not a valid cell (truncated, not JSON, keys missing) is skipped
    with a :class:`ResultsWarning` naming it; with ``move_corrupt`` it is also moved to
    ``cells/corrupt/`` (so that ``bench`` computes the cell again)."""
    results = check_results_dir(results, create=False)
    records = []
    for path in sorted((results / "cells").glob("*.json")):
        try:
            records.append(read_cell(path))
        except FileNotFoundError:  # moved aside by another process meanwhile
            continue
        except (ValueError, OSError) as exc:
            where = ""
            if move_corrupt:
                aside = _move_aside(path)
                where = f"; moved to {aside}, the cell will be computed again" if aside else ""
            warnings.warn(f"skipping {path}: not a valid cell: {exc}{where}", ResultsWarning,
                          stacklevel=2)
    return records


def _move_aside(path: Path) -> Path | None:
    folder = path.parent / "corrupt"
    folder.mkdir(exist_ok=True)
    aside, n = folder / path.name, 1
    while aside.exists():
        aside, n = folder / f"{path.stem}.{n}{path.suffix}", n + 1
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        return None
    return aside


def run_benchmark(config, results, *, n_jobs=1, scheduler=None, progress=True, log=print):
    """Run every cell of ``config`` not yet in ``results``; returns all records.

    Every setting is checked first (:meth:`BenchmarkConfig.check_cells`): a bad one
    raises before anything is created or computed. A cell another process is
    computing (its lock is held) is left to it and waited for at the end.

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
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a non-zero integer, got {n_jobs!r}")
    config = config.resolved(n_jobs)
    config.check_cells()
    client = _dask_client(scheduler) if scheduler else None
    try:
        results = check_results_dir(results)
        cells = config.cells()
        done = {r["key"] for r in load_results(results, move_corrupt=True)}
        for key in done:  # left by a process killed between writing a cell and this
            _progress_file(results, key).unlink(missing_ok=True)
        todo = [c for c in cells if c.key not in done]
        log(f"{len(cells)} cells: {len(cells) - len(todo)} already in {results}, "
            f"{len(todo)} to run")
        computed, others = _run_cells(todo, config, results, n_jobs, client, progress, log)
        if todo:
            log(f"{computed} cells computed here" + (f", {others} by another process"
                                                     if others else ""))
    finally:
        if client is not None:
            cluster = getattr(client, "_clestim_cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    return load_results(results)


def _run_cells(todo, config, results, n_jobs, client, progress, log) -> tuple[int, int]:
    """Compute the cells of ``todo`` whose lock is free, then wait for the others.

    Returns the number of cells computed here and by another process."""
    from filelock import Timeout
    from joblib import Parallel, delayed, parallel_config
    from tqdm.auto import tqdm

    from ._training import interactive_stderr
    from .evaluation import saved_tasks

    bars = progress and interactive_stderr()  # elsewhere (a log): one line per cell
    verbose = int(bars and n_jobs == 1 and client is None)
    backend = {"backend": "dask"} if client is not None else {"n_jobs": n_jobs}
    cells_dir = results / "cells"
    bar = tqdm(total=len(todo), desc="cells", unit="cell", disable=not bars)
    computed = others = 0
    n_todo = len(todo)
    try:
        while todo:
            held, busy = {}, []

            def claim(cells, held=held, busy=busy):  # consumed lazily, as cells go out
                nonlocal others
                for c in cells:
                    lock = _lock(results, f"{c.key}.json")
                    try:
                        lock.acquire(timeout=0)
                    except Timeout:
                        busy.append(c)
                        continue
                    if (cells_dir / f"{c.key}.json").exists():  # finished meanwhile
                        lock.release()
                        others += 1
                        bar.update(1)
                        continue
                    held[c.key] = lock
                    saved = results / CANDIDATES / c.key if config.tune else None
                    n_saved = len(list(saved.glob("*.json"))) if saved else 0
                    progress_file = _progress_file(results, c.key)
                    n_tasks = saved_tasks(progress_file)
                    if n_tasks:
                        log(f"{c.method} on {c.dataset}, run {c.run}: resuming its stream "
                            f"after task {n_tasks}")
                    elif n_saved:
                        log(f"{c.method} on {c.dataset}, run {c.run}: resuming its search "
                            f"from {n_saved} saved candidate{'s' * (n_saved != 1)}")
                    yield delayed(run_cell)(c, config, verbose, saved, progress_file)

            try:
                with parallel_config(**backend):
                    runner = Parallel(return_as="generator_unordered")
                    for record in runner(claim(todo)):
                        write_json_atomic(cells_dir / f"{record['key']}.json", record)
                        # the record holds every candidate: the saved ones are done with
                        shutil.rmtree(results / CANDIDATES / record["key"], ignore_errors=True)
                        _progress_file(results, record["key"]).unlink(missing_ok=True)
                        held.pop(record["key"]).release()
                        computed += 1
                        bar.update(1)
                        bar.set_postfix_str(f"{record['method']} on {record['dataset']}")
                        if progress and not bars:
                            log(f"[{computed}/{n_todo}] {_cell_line(record)}")
            finally:
                for lock in held.values():
                    lock.release()
            if busy:
                log(f"waiting for {len(busy)} cells another process is computing")
            todo = []
            for c in busy:
                with _lock(results, f"{c.key}.json"):  # until the other process is done
                    pass
                if (cells_dir / f"{c.key}.json").exists():
                    others += 1
                    bar.update(1)
                else:  # it stopped without finishing the cell
                    todo.append(c)
    finally:
        bar.close()  # ends the bar's line before any error message
    return computed, others


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
    searched a grid first ('' for neither); after :func:`label_protocols`, also the
    protocol facts that set it apart from other cells of its method."""
    if "variant" in record:
        return record["variant"]
    parts = [f"{k}={v}" for k, v in cell_params(record).items()]
    if record.get("protocol", {}).get("grid", "()") != "()":
        parts.append("tuned")
    precision = record.get("precision", "fp32")  # cells from before the option: fp32
    if precision != "fp32":
        used = record.get("precision_used", precision)
        parts.append(precision if used == precision else f"{precision}, ran {used}")
    return ", ".join(parts)


def protocol_facts(record: dict) -> dict:
    """What shapes a cell's numbers beyond its dataset, settings, method and method
    parameters: epochs, seed, classes per task, torch threads, the clestim version,
    the data's digest... (a fact an older record lacks takes its documented old value:
    :data:`PROTOCOL_DEFAULTS`, :data:`RECORDED_DEFAULTS`)."""
    facts = {k: v for k, v in record.get("protocol", {}).items() if k not in ("params", "grid")}
    for k, v in PROTOCOL_DEFAULTS.items():
        facts.setdefault(k, v)
    for k, v in RECORDED_DEFAULTS.items():
        facts[k] = record.get(k, v)
    return facts


def label_protocols(records: list[dict]) -> list[dict]:
    """Give each record its ``'variant'``: its method parameters plus every protocol
    fact in which it differs from other cells of its dataset, setting and method
    (``'max_epochs=10'``), so that different protocols are never one row."""
    rows = {}
    for r in records:
        r.pop("variant", None)
        rows.setdefault((r["dataset"], r["setting"], r["method"], variant_label(r)), []).append(r)
    for group in rows.values():
        facts = [protocol_facts(r) for r in group]
        names = list(dict.fromkeys(k for f in facts for k in f))
        differ = [k for k in names  # an unknown value (None) differs from nothing
                  if len({repr(f.get(k)) for f in facts if f.get(k) is not None}) > 1]
        for r, f in zip(group, facts):
            parts = [variant_label(r), *(f"{k}={_or_unrecorded(f.get(k))}" for k in differ)]
            r["variant"] = ", ".join(p for p in parts if p)
    return records


def _or_unrecorded(value):
    return "unrecorded" if value is None else value


def summary_frame(records: list[dict]):
    """Mean, 95% CI (t distribution) and std of A_T, F_T and A_cur in percent per
    dataset, setting, method and variant (the method's fixed parameters and any
    protocol fact that differs: :func:`label_protocols`), and the memory after the
    last task as elements and bytes ('200 (0.3 MB)')."""
    import pandas as pd

    from .evaluation import confidence_interval

    label_protocols(records)
    groups = {}
    for r in records:
        groups.setdefault((r["dataset"], r["setting"], r["method"], variant_label(r)), []).append(r)
    rows = []
    for (dataset, setting, method, variant), group in sorted(groups.items()):
        row = {"dataset": dataset, "setting": setting, "method": method, "variant": variant,
               "runs": len(group), "precision": _precision_used(group[0])}
        for label, metric in (("A_T", "average_accuracy"), ("F_T", "average_forgetting"),
                              ("A_cur", "learning_accuracy")):
            values = np.array([100 * r["metrics"][metric] for r in group])
            mean, ci = confidence_interval(values)
            row[label], row[f"{label}_ci"] = float(mean), float(ci)
            row[f"{label}_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        nbytes = [r["memory_nbytes"] for r in group if r.get("memory_nbytes") is not None]
        row["memory"] = memory_label(
            np.mean([r["memory_elements"] for r in group]), np.mean(nbytes)) if nbytes else ""
        rows.append(row)
    return pd.DataFrame(rows)


def _precision_used(record: dict) -> str:
    """The precision a cell ran in (cells from before the option ran in fp32)."""
    return record.get("precision_used", record.get("precision", "fp32"))


def memory_label(elements, nbytes) -> str:
    """A buffer as the video paper writes it: '200 (0.9 GB)'."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{elements:.0f} ({nbytes / size:.1f} {unit})"
    return f"{elements:.0f} ({nbytes:.0f} B)"
