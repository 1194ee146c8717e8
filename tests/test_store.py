"""The benchmark results store: corrupt cells, protocols in reports, validation
before any work, locking between processes, thread count, permissions."""

import json
import os
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest
import torch

from clestim.benchmark import (
    BenchmarkConfig,
    ResultsWarning,
    _lock,
    load_results,
    make_estimator,
    protocol_facts,
    run_benchmark,
    summary_frame,
    write_json_atomic,
)
from clestim.cli import main
from clestim.datasets import list_datasets

QUIET = {"progress": False, "log": lambda message: None}


def _config(**extra):
    return BenchmarkConfig.from_dict(
        {"datasets": ["basic_motions"], "methods": ["Naive"], "max_epochs": 1, **extra})


def _numbers(record):
    return record["accuracy_matrix"], record["metrics"], record["task_classes"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A finished two-run grid, as bytes per cell file."""
    folder = tmp_path_factory.mktemp("grid")
    run_benchmark(_config(runs=2), folder, **QUIET)
    return {p.name: p.read_bytes() for p in (folder / "cells").glob("*.json")}


def _copy(grid, folder):
    (folder / "cells").mkdir(parents=True)
    write_json_atomic(folder / "manifest.json", {"format": 1, "clestim": "0.1.0"})
    for name, blob in grid.items():
        (folder / "cells" / name).write_bytes(blob)
    return folder / "cells"


def test_corrupt_and_partial_cells_are_moved_aside_and_recomputed(grid, tmp_path, capsys):
    cells = _copy(grid, tmp_path)
    truncated, keyless = sorted(grid)
    (cells / truncated).write_bytes(grid[truncated][:300])  # a kill mid-copy
    record = json.loads(grid[keyless])
    del record["key"]
    (cells / keyless).write_text(json.dumps(record))  # valid JSON, a key missing
    stray = cells / f".{truncated}.abcd1234.tmp"  # left by a kill mid-write
    stray.write_text("{")

    # report skips both with a warning naming the file, no traceback
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"warning: skipping {cells / truncated}: not a valid cell: not valid JSON" in err
    assert f"skipping {cells / keyless}: not a valid cell: lacks key" in err
    assert "has no finished cells" in err and "Traceback" not in err
    with pytest.warns(ResultsWarning, match="not valid JSON"):
        assert load_results(tmp_path) == []

    with pytest.warns(ResultsWarning) as caught:
        records = run_benchmark(_config(runs=2), tmp_path, **QUIET)
    messages = " ".join(str(w.message) for w in caught)
    assert f"moved to {cells / 'corrupt' / truncated}" in messages
    assert sorted(p.name for p in (cells / "corrupt").iterdir()) == [truncated, keyless]
    assert not stray.exists()
    # recomputed, equal to the uninterrupted run
    assert sorted(json.dumps(_numbers(r)) for r in records) == sorted(
        json.dumps(_numbers(json.loads(b))) for b in grid.values())


def test_mixed_protocols_are_separate_rows_and_old_cells_keep_their_key(grid, tmp_path):
    cells = _copy(grid, tmp_path)
    # an old-format cell: written before threads, version and data were recorded
    name = sorted(grid)[0]
    old = json.loads(grid[name])
    for k in ("clestim", "data"):
        del old[k]
    del old["protocol"]["threads"]
    (cells / name).write_text(json.dumps(old))
    assert protocol_facts(old)["threads"] == 1 and protocol_facts(old)["clestim"] == "0.1.0"
    log = []
    records = run_benchmark(_config(runs=2), tmp_path, progress=False, log=log.append)
    assert log == [f"2 cells: 2 already in {tmp_path}, 0 to run"]  # nothing recomputed
    assert (cells / name).read_text() == json.dumps(old)
    frame = summary_frame(records)  # an old cell's unrecorded facts are the documented ones
    assert list(frame["variant"]) == [""] and list(frame["runs"]) == [2]

    run_benchmark(_config(max_epochs=2), tmp_path, **QUIET)
    other = dict(json.loads(grid[name]), key="other", data="0123456789ab")
    frame = summary_frame(load_results(tmp_path)).set_index("variant")
    assert dict(frame["runs"]) == {"max_epochs=1": 2, "max_epochs=2": 1}
    frame = summary_frame([*load_results(tmp_path), other, dict(other, protocol={
        **other["protocol"], "threads": 2})]).set_index("variant")
    data = records[1]["data"]
    assert dict(frame["runs"]) == {  # nothing averaged across protocols
        f"max_epochs=1, threads=1, data={data}": 1, f"max_epochs=2, threads=1, data={data}": 1,
        "max_epochs=1, threads=1, data=unrecorded": 1,
        "max_epochs=1, threads=1, data=0123456789ab": 1,
        "max_epochs=1, threads=2, data=0123456789ab": 1}


OLD_PROTOCOL = {"lr_schedule": None, "holdout": 0}  # the cells written before issue #20


def test_existing_keys_are_unchanged():
    # keys of the archived one-run TSCIL results (benchmarks/results/tscil_v0/layer)
    config = BenchmarkConfig.from_dict({"datasets": ["uci_har"], "methods": ["ER", "LwF"],
                                        "settings": {"norm": ["layer"]}, **OLD_PROTOCOL})
    assert [c.key for c in config.cells()] == ["uci_har__ER__norm-layer__c2f41328__run0",
                                               "uci_har__LwF__norm-layer__c2f41328__run0"]
    lwf = BenchmarkConfig.from_dict({"datasets": ["dsa"], "methods": ["LwF"],
                                     "settings": {"norm": ["layer"]},
                                     "params": {"LwF": {"lambda_kd": 10000}}, **OLD_PROTOCOL})
    assert lwf.cells()[0].key == "dsa__LwF__norm-layer__977fcee6__run0"
    two = BenchmarkConfig.from_dict({"datasets": ["uci_har"], "methods": ["ER"],
                                     "settings": {"norm": ["layer"]}, "threads": 2,
                                     **OLD_PROTOCOL})
    assert two.cells()[0].key != config.cells()[0].key  # another thread count, another cell
    # the five-run grid's protocol (TSCIL's step15 schedule; UCI-HAR's 10% hold-out)
    new = BenchmarkConfig.from_dict({"datasets": ["uci_har", "dsa"], "methods": ["ER"],
                                     "settings": {"norm": ["layer"]}})
    assert [c.key for c in new.cells()] == ["uci_har__ER__norm-layer__892d2962__run0",
                                            "dsa__ER__norm-layer__3704d44d__run0"]
    assert dict(new.cells()[0].protocol)["holdout"] == 0.1
    assert "holdout" not in dict(new.cells()[1].protocol)  # DSA: TSCIL holds nothing out


def test_every_problem_of_the_grid_before_any_work(tmp_path, capsys):
    results = tmp_path / "r"
    # the bad setting is in the grid's last cell (Herding, 5% of 20 samples = 1 slot)
    with pytest.raises(ValueError, match=r"Herding on basic_motions \(memory_size=0.05\): "
                                         r"memory_size=0.05 holds 1 samples after task 0"):
        run_benchmark(_config(methods=["Naive", "ER", "Herding"],
                              settings={"memory_size": [8, 0.05]}), results, **QUIET)
    assert not results.exists()
    code = main(["bench", "--datasets", "basic_motions,nope", "--methods", "Naive,ER",
                 "--norm", "lyer", "--memory-size", "5percent", "--max-epochs", "0",
                 "--set", "ER.lr=-1", "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("clestim bench: error: 5 problems in the grid:\n")
    for message in ("unknown dataset 'nope'", "max_epochs must be a positive integer, got 0",
                    "memory_size '5percent' is not 'tscil'", "norm must be one of",
                    "ER: lr must be positive, got -1"):
        assert message in err
    assert not results.exists()
    assert main(["bench", "--datasets", "basic_motions", "--methods", "Naive", "--n-jobs", "0",
                 "--results", str(results)]) == 2
    assert "n_jobs must be a non-zero integer" in capsys.readouterr().err
    assert not results.exists()


def test_default_budget_of_every_replay_method_works_on_basic_motions():
    config = _config(methods=["ER", "DER", "Herding", "ASER", "CLOPS"])
    config.check_cells()  # Herding's 5% of 40 samples would hold 2 < 4 classes
    est = make_estimator(config.cells()[2], config, n_stream_samples=40, n_stream_classes=4)
    assert est.memory_size == 4
    assert make_estimator(config.cells()[2], config, n_stream_samples=400,
                          n_stream_classes=4).memory_size == 20


def test_two_processes_compute_each_cell_once(tmp_path):
    cmd = [sys.executable, "-m", "clestim", "bench", "--datasets", "basic_motions",
           "--methods", "Naive", "--runs", "6", "--max-epochs", "5", "--no-progress",
           "--results", str(tmp_path)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and not (tmp_path / "locks").is_dir():
        time.sleep(0.05)
    second = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    errs = [p.communicate(timeout=600)[1] for p in (first, second)]
    assert first.returncode == second.returncode == 0, errs
    computed = [int(line.split()[0]) for err in errs for line in err.splitlines()
                if "computed here" in line]
    assert sum(computed) == 6 and len(list((tmp_path / "cells").glob("*.json"))) == 6


def test_a_killed_lock_holder_leaves_no_stale_lock(tmp_path):
    config = _config()
    run_benchmark(config, tmp_path, **QUIET)  # creates the folder
    cell = next((tmp_path / "cells").glob("*.json"))
    cell.unlink()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from clestim.benchmark import _lock; "
         f"lock = _lock({str(tmp_path)!r}, {cell.name!r}); lock.acquire(); "
         "print('held', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    lock = _lock(tmp_path, cell.name)
    with pytest.raises(Exception, match="not be acquired|Timeout"):
        lock.acquire(timeout=0)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    log = []
    run_benchmark(config, tmp_path, progress=False, log=log.append)
    assert log[-1] == "1 cells computed here" and cell.exists()


def test_cells_do_not_depend_on_n_jobs(tmp_path):
    config = _config(methods=["Naive", "ER"], max_epochs=2)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the calling process's own setting must not leak into a cell
    try:
        one = run_benchmark(config, tmp_path / "one", n_jobs=1, **QUIET)
    finally:
        torch.set_num_threads(threads)
    two = run_benchmark(config, tmp_path / "two", n_jobs=2, **QUIET)
    assert [r["key"] for r in one] == [r["key"] for r in two]
    assert [_numbers(r) for r in one] == [_numbers(r) for r in two]
    assert {r["torch_threads"] for r in one + two} == {1}
    assert {r["protocol"]["threads"] for r in one + two} == {1}


def test_files_respect_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        write_json_atomic(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o664


def test_datasets_marks_a_broken_prepared_file(tmp_path, capsys):
    good = tmp_path / "good"
    good.mkdir()
    np.savez(good / "uci_har_inertial.npz", X_train=np.zeros((2, 9, 128)))
    (tmp_path / "uci_har_inertial.npz").write_bytes(
        (good / "uci_har_inertial.npz").read_bytes()[:200])
    assert list_datasets(good)["uci_har"]["where"].startswith("prepared file")
    where = list_datasets(tmp_path)["uci_har"]["where"]
    assert where.startswith("BROKEN prepared file") and "does not open" in where
    assert main(["datasets", "--data-home", str(tmp_path)]) == 0
    assert "BROKEN prepared file" in capsys.readouterr().out
    assert zipfile.is_zipfile(good / "uci_har_inertial.npz")
