"""The clestim command: bench, resume after a kill, report, bad input, Dask."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from clestim.benchmark import (
    BenchmarkConfig,
    load_results,
    remove_stray_temporaries,
    run_benchmark,
    variant_label,
    write_json_atomic,
)
from clestim.cli import main
from clestim.report import write_report

QUICK = ["--datasets", "basic_motions", "--max-epochs", "2", "--no-progress"]


def test_bench_prints_matrices_and_metrics(tmp_path, capsys):
    code = main(["bench", *QUICK, "--methods", "Naive,ER", "--memory-size", "8",
                 "--n-jobs", "2", "--results", str(tmp_path)])  # two loky worker processes
    out = capsys.readouterr().out
    assert code == 0
    assert "ER on basic_motions (memory_size=8)" in out and "accuracy matrix" in out
    assert "Naive on basic_motions (default)" in out  # Naive has no memory setting
    records = load_results(tmp_path)
    assert sorted(r["method"] for r in records) == ["ER", "Naive"]
    A = np.asarray(records[0]["accuracy_matrix"])
    assert A.shape == (2, 2) and records[0]["metrics"]["average_accuracy"] == pytest.approx(
        A[-1].mean()
    )
    # where each class's test windows went after each task (4 classes, 2 tasks)
    confusion = np.asarray(records[0]["confusion"])
    assert confusion.shape == (2, 4, 4) and records[0]["confusion_labels"] == [0, 1, 2, 3]
    assert np.trace(confusion[-1]) / confusion[-1].sum() == pytest.approx(A[-1].mean())


def test_killed_bench_resumes_without_redoing_finished_cells(tmp_path):
    cmd = [sys.executable, "-m", "clestim", "bench", "--datasets", "basic_motions",
           "--methods", "Naive,LwF,ER", "--runs", "2", "--max-epochs", "4",
           "--no-progress", "--results", str(tmp_path)]
    cells = tmp_path / "cells"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and not (cells.is_dir() and any(cells.glob("*.json"))):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in cells.glob("*.json")}
    assert 1 <= len(finished) < 6, "the kill must land mid-grid"
    for blob in finished.values():
        json.loads(blob[1])  # every finished cell is complete JSON
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(finished)} already in" in rerun.stderr
    after = {p.name: p for p in cells.glob("*.json")}
    assert len(after) == 6
    for name, (mtime, blob) in finished.items():
        assert after[name].stat().st_mtime_ns == mtime and after[name].read_bytes() == blob


@pytest.mark.parametrize(
    "args, message",
    [
        (["--datasets", "nope", "--methods", "Naive"], "unknown dataset 'nope'"),
        (["--datasets", "basic_motions", "--methods", "Nope"], "unknown method 'Nope'"),
        (["--datasets", "basic_motions", "--methods", "Naive", "--set", "Naive.alpha=1"],
         "Naive has no parameter 'alpha'"),
    ],
)
def test_bench_bad_names(tmp_path, capsys, args, message):
    assert main(["bench", *args, "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert message in err
    if "unknown" in message:  # an unknown name comes with the list of valid ones
        assert "valid" in err
    assert not (tmp_path / "r").exists()  # nothing half-written


def test_bad_config_key_and_incompatible_results(tmp_path, capsys):
    config = tmp_path / "grid.toml"
    config.write_text('datasets = ["basic_motions"]\nmethods = ["Naive"]\nepochs = 3\n')
    assert main(["bench", "--config", str(config), "--results", str(tmp_path / "r")]) == 2
    assert "unknown config key(s) ['epochs']" in capsys.readouterr().err
    old = tmp_path / "old"
    old.mkdir()
    write_json_atomic(old / "manifest.json", {"format": 0, "clestim": "0.0.1"})
    assert main(["bench", *QUICK, "--methods", "Naive", "--results", str(old)]) == 2
    assert "format 0" in capsys.readouterr().err
    assert sorted(p.name for p in old.iterdir()) == ["manifest.json"]


def test_unreachable_scheduler(tmp_path, capsys):
    code = main(["bench", *QUICK, "--methods", "Naive", "--results", str(tmp_path),
                 "--scheduler", "tcp://127.0.0.1:9"])
    assert code == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
    assert not (tmp_path / "cells").exists()  # nothing created


def test_report_tables_and_plots(tmp_path):
    (tmp_path / "cells").mkdir()
    write_json_atomic(tmp_path / "manifest.json", {"format": 1, "clestim": "test"})
    for run, final in enumerate(([0.9, 0.8, 0.7], [0.8, 0.9, 1.0])):
        A = [[1.0, 0.0, 0.0], [0.95, 0.9, 0.0], final]
        record = {"key": f"k{run}", "dataset": "uci_har", "method": "ER", "run": run,
                  "settings": {}, "setting": "default", "accuracy_matrix": A,
                  "task_classes": [[0, 1], [2, 3], [4, 5]],
                  "metrics": {"average_accuracy": float(np.mean(final)),
                              "average_forgetting": float(np.mean([1.0 - final[0],
                                                                   0.9 - final[1]])),
                              "learning_accuracy": float(np.mean([1.0, 0.9, final[2]]))}}
        write_json_atomic(tmp_path / "cells" / f"k{run}.json", record)
    written = write_report(tmp_path, tmp_path / "report")
    table = (tmp_path / "report" / "table.md").read_text()
    # A_T: runs 80% and 90% -> mean 85.0, CI = t(0.975, 1) * 5 / 1 = 63.5, clipped to
    # [21.5, 100]; † two runs; ~ the mean lies outside the paper's ER (LN) 88.9 ± 2.7
    assert "| A_T | 85.0 [21.5, 100.0]† (paper 88.9 ± 2.7, Δ -3.9)~ |" in table
    assert {p.suffix for p in written} == {".md", ".csv", ".png"}
    assert (tmp_path / "report" / "average_accuracy_uci_har_default.png").stat().st_size > 1000


def _record(key, method, final, settings=None, params="()", dataset="dsa"):
    A = [[1.0, 0.0], [0.9, final]]
    return {"key": key, "dataset": dataset, "method": method, "run": 0,
            "settings": settings or {}, "protocol": {"params": params},
            "setting": ", ".join(f"{k}={v}" for k, v in (settings or {}).items()) or "default",
            "accuracy_matrix": A, "task_classes": [[0, 1], [2, 3]],
            "metrics": {"average_accuracy": (0.9 + final) / 2, "average_forgetting": 0.1,
                        "learning_accuracy": (1.0 + final) / 2}}


def test_report_variants_and_memory_budget_curve(tmp_path):
    (tmp_path / "cells").mkdir()
    write_json_atomic(tmp_path / "manifest.json", {"format": 1, "clestim": "test"})
    records = [
        _record("a", "ER", 0.7, {"norm": "batch"}),
        _record("b", "ER", 0.5, {"norm": "batch"}, "(('memory_subjects', 2),)"),
        _record("c", "ER", 0.9, {"norm": "batch"}, "(('retrieval', 'subject_balanced'),)"),
        _record("d", "ER", 0.3, {"memory_size": "1%"}),
        _record("e", "ER", 0.5, {"memory_size": "tscil"}),
        _record("f", "ER", 1.0, {"memory_size": "100%"}),
        _record("g", "Naive", 0.0, {}),
    ]
    for r in records:
        write_json_atomic(tmp_path / "cells" / f"{r['key']}.json", r)
    written = write_report(tmp_path)
    table = (tmp_path / "table.md").read_text()
    # each subject variant is its own column beside its Table 5 row
    assert "| metric | ER | ER (memory_subjects=2) | ER (retrieval=subject_balanced) |" in table
    assert "| A_T | 80.0 (paper 79.6 ± 15.6, Δ +0.4) | 70.0 (paper 73.1 ± 25.7, Δ -3.1) " \
           "| 90.0 (paper 87.8 ± 12.1, Δ +2.2) |" in table
    # only the 5% budget has a published row
    assert "| A_T | 60.0 |" in table and "70.0 (paper 97.2" in table
    # one heatmap per variant, not their average
    assert {p.name for p in written if p.name.startswith("accuracy_matrix_dsa_norm_batch")} == {
        "accuracy_matrix_dsa_norm_batch_ER.png",
        "accuracy_matrix_dsa_norm_batch_ER_memory_subjects_2.png",
        "accuracy_matrix_dsa_norm_batch_ER_retrieval_subject_balanced.png"}
    (plot,) = [p for p in written if p.name.startswith("memory_budget")]
    assert plot.name == "memory_budget_dsa_default.png"


def test_published_rows():
    from clestim.reference_results import published

    assert published("uci_har", "GR", {"norm": "layer"}) == {
        "A_T": (81.0, 6.7), "F_T": (24.7, 14.7), "A_cur": (97.5, 3.8)}
    assert published("dsa", "ER", {"norm": "batch"}, {"memory_subjects": 4})["A_T"] == (76.4, 14.4)
    assert published("uci_har", "LwF", {}, {"lambda_kd": 1e4})["A_T"] == (42.5, 14.2)
    assert published("dsa", "ER", {"norm": "layer"}, {"memory_subjects": 4}) == {}
    assert published("dsa", "ER", {"classifier": "cosine"}) == {}
    assert published("uci_har", "Offline", {"norm": "batch"}) == {"A_T": (93.9, 0.6)}


def test_dask_local_cluster(tmp_path):
    pytest.importorskip("distributed")
    config = BenchmarkConfig.from_dict(
        {"datasets": ["basic_motions"], "methods": ["Naive", "ER"], "max_epochs": 1}
    )
    records = run_benchmark(config, tmp_path, scheduler="local", progress=False,
                            log=lambda message: None)
    assert sorted(r["method"] for r in records) == ["ER", "Naive"]


def test_cell_key_changes_with_anything_that_shapes_the_result():
    base = {"datasets": ["basic_motions"], "methods": ["LwF"]}
    keys = {
        BenchmarkConfig.from_dict({**base, **extra}).cells()[0].key
        for extra in ({}, {"params": {"LwF": {"lambda_kd": 10.0}}}, {"max_epochs": 5},
                      {"seed": 1}, {"settings": {"norm": ["batch"]}})
    }
    assert len(keys) == 5  # a resumed grid never reuses a cell computed differently


def test_percent_memory_budget_counts_the_learned_tasks(monkeypatch):
    from clestim import benchmark
    from clestim.benchmark import make_estimator

    config = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["ER", "Naive"],
                                        "settings": {"memory_size": ["10%", "tscil"]}})
    cells = {(c.method, dict(c.settings).get("memory_size")): c for c in config.cells()}
    # memory_size only crosses the methods that have it
    assert set(cells) == {("ER", "10%"), ("ER", "tscil"), ("Naive", None)}
    assert make_estimator(cells["ER", "10%"], config, n_stream_samples=40).memory_size == 4
    assert make_estimator(cells["ER", "tscil"], config).memory_size == 0.05
    assert benchmark._percent_budget("100%", 7) == 7
    assert benchmark._percent_budget("0.1%", 7) == 1  # never an empty memory
    for bad in ("0%", "150%", "ten%", "big"):
        with pytest.raises(ValueError, match="percentage"):
            benchmark._percent_budget(bad, 10)


def test_bench_passes_subject_ids_to_subject_aware_replay(monkeypatch, tmp_path):
    from sklearn.utils import Bunch

    from clestim import benchmark

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 12)
    data = Bunch(X_train=rng.normal(size=(48, 3, 16)).astype(np.float32) + y[:, None, None],
                 y_train=y, subject_train=np.tile(np.arange(3), 16),
                 X_test=rng.normal(size=(24, 3, 16)).astype(np.float32), y_test=y[::2])
    monkeypatch.setattr(benchmark, "_load", lambda name, home: data)
    config = BenchmarkConfig.from_dict({
        "datasets": ["basic_motions"], "methods": ["ER"], "max_epochs": 2,
        "params": {"ER": {"memory_subjects": [1], "memory_size": 8}},
    })
    (record,) = run_benchmark(config, tmp_path, progress=False, log=lambda message: None)
    assert record["accuracy_matrix"][1][0] is not None  # learned both tasks with subjects
    est = benchmark.make_estimator(config.cells()[0], config)
    with pytest.raises(ValueError, match="needs subject ids"):
        est.partial_fit_task(data.X_train[:24], y[:24])


def test_tune_searches_tscil_grid_unless_configured(tmp_path):
    config = BenchmarkConfig.from_dict({
        "datasets": ["basic_motions"], "methods": ["LwF"], "tune": True, "max_epochs": 1,
        "grid": {"LwF": {"lambda_kd": [1.0, 100.0]}},
    })
    (record,) = run_benchmark(config, tmp_path, progress=False, log=lambda message: None)
    assert record["best_params"]["lambda_kd"] in (1.0, 100.0)
    # the record keeps every candidate's validation score, the winner first
    search = record["search"]
    assert search["scoring"] == "average_accuracy"
    assert sorted(c["params"]["lambda_kd"] for c in search["candidates"]) == [1.0, 100.0]
    assert search["candidates"][0]["params"] == record["best_params"]
    scores = [c["score"] for c in search["candidates"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert variant_label(record) == "tuned"  # its own column beside an untuned LwF
    default = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["MAS"],
                                         "tune": True, "params": {"MAS": {"alpha": 0.5}}})
    assert default.grid_for("MAS") == {"lambda_reg": [1e2, 1e3, 1e4],
                                       "lr_schedule": ["step10", "step15", "onecycle"]}
    fixed = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["LwF"],
                                       "tune": True, "params": {"LwF": {"lambda_kd": 1e4}}})
    assert fixed.grid_for("LwF") == {"lr_schedule": ["step10", "step15", "onecycle"]}
    # TSCIL narrows DT2W's grid on HAR ("1e-3 never the best"), and keys tuned cells by it
    dt2w = BenchmarkConfig.from_dict({"datasets": ["uci_har", "dsa"], "methods": ["DT2W"],
                                      "tune": True})
    assert dt2w.grid_for("DT2W", "uci_har")["lambda_fmap"] == [1e-1, 1e-2]
    assert dt2w.grid_for("DT2W", "dsa")["lambda_fmap"] == [1e-1, 1e-2, 1e-3]
    har, dsa = dt2w.cells()
    assert dict(har.protocol)["grid"] != dict(dsa.protocol)["grid"]
    assert ("lambda_fmap", (1e-1, 1e-2)) in dict(har.protocol)["grid"]


def test_tuned_cell_interrupted_mid_search_resumes_it(tmp_path, monkeypatch):
    from clestim import model_selection

    config = BenchmarkConfig.from_dict({
        "datasets": ["basic_motions"], "methods": ["Naive"], "tune": True, "max_epochs": 1,
        "grid": {"Naive": {"lr": [1e-3, 3e-3, 1e-2]}},
    })
    evaluate, trained = model_selection._evaluate_candidate, []

    def session_ends_at_the_second_candidate(est, params, *rest):
        trained.append(params["lr"])
        if len(trained) == 2:
            raise RuntimeError("the session ended")
        return evaluate(est, params, *rest)

    monkeypatch.setattr(model_selection, "_evaluate_candidate",
                        session_ends_at_the_second_candidate)
    with pytest.raises(RuntimeError, match="the session ended"):
        run_benchmark(config, tmp_path / "a", progress=False, log=lambda message: None)
    (folder,) = (tmp_path / "a" / "candidates").iterdir()
    assert len(list(folder.glob("*.json"))) == 1 and not load_results(tmp_path / "a")
    stray = folder / ".x.json.abc.tmp"  # a write the kill cut short
    stray.write_text("{")
    assert remove_stray_temporaries(tmp_path / "a") == [stray]

    monkeypatch.setattr(model_selection, "_evaluate_candidate",
                        lambda est, params, *rest: trained.append(params["lr"]) or evaluate(
                            est, params, *rest))
    trained.clear()
    lines = []
    (record,) = run_benchmark(config, tmp_path / "a", progress=False, log=lines.append)
    assert sorted(trained) == [3e-3, 1e-2]  # only the two candidates not saved
    assert "Naive on basic_motions, run 0: resuming its search from 1 saved candidate" in lines
    assert record["search"]["resumed_candidates"] == 1
    assert not folder.exists()  # the record holds every candidate now
    # the same numbers as a search that was never interrupted
    (fresh,) = run_benchmark(config, tmp_path / "b", progress=False, log=lambda message: None)
    assert fresh["search"]["resumed_candidates"] == 0
    assert [(c["params"], c["score"]) for c in record["search"]["candidates"]] == [
        (c["params"], c["score"]) for c in fresh["search"]["candidates"]]
    assert record["accuracy_matrix"] == fresh["accuracy_matrix"]


def test_cell_interrupted_mid_stream_resumes_after_its_last_task(tmp_path, monkeypatch):
    from clestim.base import ContinualClassifier

    config = BenchmarkConfig.from_dict({
        "datasets": ["basic_motions"], "methods": ["ER"], "max_epochs": 2,
        "classes_per_task": 1})  # 4 tasks of one class
    learn, tasks = ContinualClassifier.partial_fit_task, []

    def session_ends_at_the_third_task(self, X, y, *args, **kwargs):
        tasks.append(sorted(set(y.tolist())))
        if len(tasks) == 3:
            raise RuntimeError("the session ended")
        return learn(self, X, y, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ContinualClassifier, "partial_fit_task", session_ends_at_the_third_task)
        with pytest.raises(RuntimeError, match="the session ended"):
            run_benchmark(config, tmp_path / "a", progress=False, log=lambda message: None)
    (saved,) = (tmp_path / "a" / "progress").iterdir()
    assert saved.name == f"{config.cells()[0].key}.pkl" and not load_results(tmp_path / "a")
    stray = saved.parent / f".{saved.name}.abc.tmp"  # a write the kill cut short
    stray.write_bytes(b"\x80")
    assert remove_stray_temporaries(tmp_path / "a") == [stray]

    learned = tasks[:2]
    tasks.clear()
    lines = []
    with monkeypatch.context() as patch:
        patch.setattr(ContinualClassifier, "partial_fit_task",
                      lambda self, X, y, *a, **k: tasks.append(sorted(set(y.tolist())))
                      or learn(self, X, y, *a, **k))
        (record,) = run_benchmark(config, tmp_path / "a", progress=False, log=lines.append)
    assert len(tasks) == 2 and not set(map(tuple, tasks)) & set(map(tuple, learned))
    assert "ER on basic_motions, run 0: resuming its stream after task 2" in lines
    assert record["resumed_tasks"] == 2 and not saved.exists()
    # its wall time counts the two saved tasks too, not only this call's
    assert record["wall_s"] >= sum(record["fit_time"]) + sum(record["eval_time"])
    saved.write_bytes(b"left by a kill between the cell's write and the file's removal")
    run_benchmark(config, tmp_path / "a", progress=False, log=lambda message: None)
    assert not saved.exists()  # the cell is done: its progress is of no use
    # the same numbers as a cell never interrupted
    (fresh,) = run_benchmark(config, tmp_path / "b", progress=False, log=lambda message: None)
    assert "resumed_tasks" not in fresh
    for name in ("accuracy_matrix", "confusion", "metrics", "epochs", "task_classes"):
        assert record[name] == fresh[name], name


def test_gr_grid_tunes_the_generator_and_set_takes_json_objects():
    from clestim import benchmark
    from clestim.cli import _config, _parser, _value

    config = BenchmarkConfig.from_dict({"datasets": ["dsa"], "methods": ["GR"], "tune": True})
    grid = config.grid_for("GR")
    assert grid["generator_lr"] == [1e-3, 1e-4]
    assert [p["recon_weight"] for p in grid["generator_params"]] == [1e-3, 1e-2, 0.1, 1.0, 10.0]
    assert all(p["standardize"] is False for p in grid["generator_params"])  # TSCIL's VAE
    assert _value('{"recon_weight": 0.01}') == {"recon_weight": 0.01}
    with pytest.raises(ValueError, match="not a JSON object"):
        _value("{recon_weight: 0.01}")
    args = _parser().parse_args(["bench", "--datasets", "dsa", "--methods", "GR",
                                 "--set", 'GR.generator_params={"recon_weight": 0.01}'])
    config = _config(args)
    assert config.params == {"GR": {"generator_params": {"recon_weight": 0.01}}}
    assert benchmark.make_estimator(config.cells()[0], config).generator_params == {
        "recon_weight": 0.01}


def test_bench_fixed_problems_share_tasks_and_print_memory(tmp_path, capsys):
    code = main(["bench", *QUICK, "--methods", "Naive,ER", "--memory-size", "8",
                 "--problems", "2", "--n-tasks", "2", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "mean ± std over fixed problems" in out
    records = load_results(tmp_path)
    assert len(records) == 4
    tasks = {}
    for r in records:  # every method meets the same problems
        tasks.setdefault(r["run"], set()).add(repr(r["task_classes"]))
    assert sorted(tasks) == [0, 1] and all(len(t) == 1 for t in tasks.values())
    er = [r for r in records if r["method"] == "ER"][0]
    assert er["memory_elements"] == 8 and "8 (" in out
    write_report(tmp_path)
    assert "| memory |" in (tmp_path / "table.md").read_text()


# --------------------------------------------------------- main(): report, datasets, TOML
def test_report_through_main(tmp_path, capsys):
    (tmp_path / "cells").mkdir()
    write_json_atomic(tmp_path / "manifest.json", {"format": 1, "clestim": "test"})
    write_json_atomic(tmp_path / "cells" / "k.json", _record("k", "ER", 0.5))
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed and all(p.startswith(str(tmp_path / "out")) for p in printed)
    assert all(os.path.isfile(p) for p in printed)
    assert "table.md" in {os.path.basename(p) for p in printed}
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "clestim report: error:" in capsys.readouterr().err


def test_datasets_through_main(tmp_path, capsys):
    assert main(["datasets", "--data-home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = {line.split()[0] for line in out.splitlines() if line and not line[0].isspace()}
    assert {"uci_har", "dsa", "basic_motions"} <= names
    assert f"not found in {tmp_path}" in out
    (tmp_path / "uci_har_inertial.npz").write_bytes(b"")  # a prepared file is found there
    main(["datasets", "--data-home", str(tmp_path)])
    har = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("uci_har"))
    assert str(tmp_path / "uci_har_inertial.npz") in har


def test_toml_config_flags_override_and_device(tmp_path, capsys):
    from clestim.benchmark import make_estimator
    from clestim.cli import _config, _parser

    config = tmp_path / "grid.toml"
    config.write_text(
        'datasets = ["basic_motions"]\nmethods = ["Naive", "ER"]\nmax_epochs = 1\n'
        'seed = 7\n[settings]\nmemory_size = [8]\n[params.ER]\nreplay_batch_size = 4\n'
    )
    args = ["bench", "--config", str(config), "--results", str(tmp_path / "r"), "--no-progress"]
    parsed = _config(_parser().parse_args([*args, "--max-epochs", "2", "--device", "meta",
                                           "--set", "ER.lr=0.01"]))
    assert (parsed.datasets, parsed.methods, parsed.seed) == (["basic_motions"], ["Naive", "ER"], 7)
    assert parsed.max_epochs == 2 and parsed.device == "meta"  # flags override the file
    assert parsed.params == {"ER": {"replay_batch_size": 4, "lr": 0.01}}
    cell = next(c for c in parsed.cells() if c.method == "ER")
    est = make_estimator(cell, parsed)
    assert (est.device, est.lr, est.replay_batch_size, est.memory_size) == ("meta", 0.01, 4, 8)
    assert main([*args, "--device", "cpu", "--methods", "ER"]) == 0
    records = load_results(tmp_path / "r")
    assert [r["method"] for r in records] == ["ER"]
    assert {r["run"] for r in records} == {0}
    assert "ER on basic_motions (memory_size=8)" in capsys.readouterr().out


def test_tscil_protocol_holds_out_uci_har_and_schedules_step15(monkeypatch, tmp_path):
    from sklearn.utils import Bunch

    from clestim import benchmark

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 25)
    data = Bunch(X_train=rng.normal(size=(100, 3, 16)).astype(np.float32) + y[:, None, None],
                 y_train=y, subject_train=np.arange(100), X_test=rng.normal(
                     size=(40, 3, 16)).astype(np.float32), y_test=np.repeat(np.arange(4), 10))
    monkeypatch.setattr(benchmark, "_load", lambda name, home: data)
    config = BenchmarkConfig.from_dict({"datasets": ["uci_har", "dsa"], "methods": ["ER"]})
    har, dsa = config.cells()
    assert (config.holdout_for("uci_har"), config.holdout_for("dsa")) == (0.1, 0.0)
    split = benchmark.cell_data(har, config)  # TSCIL's x_val: 10%, unstratified, seed 0
    assert (len(split.y_train), len(split.y_holdout)) == (90, 10)
    kept = np.sort(np.concatenate([split.subject_train, np.setdiff1d(np.arange(100),
                                                                     split.subject_train)]))
    assert np.array_equal(kept, np.arange(100))  # subjects follow their windows
    assert np.array_equal(split.X_train, data.X_train[split.subject_train])
    assert np.array_equal(benchmark.cell_data(har, config).subject_train, split.subject_train)
    assert benchmark.cell_data(dsa, config).X_holdout is None
    assert len(data.y_train) == 100  # the loaded (cached) data is left whole
    assert benchmark.make_estimator(har, config).lr_schedule == "step15"
    flat = BenchmarkConfig.from_dict({"datasets": ["uci_har"], "methods": ["ER"],
                                      "lr_schedule": None, "holdout": 0,
                                      "params": {"ER": {"lr_schedule": "onecycle"}}})
    assert benchmark.make_estimator(flat.cells()[0], flat).lr_schedule == "onecycle"
    assert benchmark.cell_data(flat.cells()[0], flat).X_holdout is None
    with pytest.raises(ValueError, match=r"lr_schedule must be one of .*, got 'step5'\n"
                                         r"  - holdout must be 'tscil' or a fraction in "
                                         r"\[0, 1\), got 1.0"):
        BenchmarkConfig.from_dict({"datasets": ["dsa"], "holdout": 1.0, "lr_schedule": "step5"})

    # --tune on a short stream scores the candidates on the hold-out, as TSCIL does
    seen = {}
    from clestim import model_selection

    fit = model_selection.ContinualGridSearch.fit

    def spy(self, X, y, groups=None, *, validation_data=None):
        seen["n_fit"], seen["n_val"] = len(y), len(validation_data[1])
        return fit(self, X, y, groups, validation_data=validation_data)

    monkeypatch.setattr(model_selection.ContinualGridSearch, "fit", spy)
    tuned = BenchmarkConfig.from_dict({"datasets": ["uci_har"], "methods": ["Naive"],
                                       "tune": True, "max_epochs": 1,
                                       "grid": {"Naive": {"lr": [1e-3, 1e-2]}}})
    (record,) = run_benchmark(tuned, tmp_path, progress=False, log=lambda message: None)
    assert seen == {"n_fit": 90, "n_val": 10}
    assert record["protocol"]["holdout"] == 0.1 and record["protocol"]["lr_schedule"] == "step15"
    assert record["best_params"]["lr"] in (1e-3, 1e-2)


def test_tune_scores_a_split_stream_on_its_validation_tasks_test_windows(monkeypatch, tmp_path):
    # DSA-like: 5 tasks, no hold-out. TSCIL trains candidates on the 3 validation tasks
    # and scores them on those tasks' test windows; a short stream holds out 20%, seeded.
    from sklearn.utils import Bunch

    from clestim import benchmark, model_selection

    rng = np.random.default_rng(0)
    y, y_test = np.repeat(np.arange(10), 12), np.repeat(np.arange(10), 4)
    data = Bunch(X_train=rng.normal(size=(120, 2, 16)).astype(np.float32) + y[:, None, None],
                 y_train=y, subject_train=np.arange(120), X_test=rng.normal(
                     size=(40, 2, 16)).astype(np.float32) + y_test[:, None, None], y_test=y_test)
    monkeypatch.setattr(benchmark, "_load", lambda name, home: data)
    seen = []
    fit = model_selection.ContinualGridSearch.fit

    def spy(self, X, y, groups=None, *, validation_data=None):
        seen.append((self.random_state, validation_data))
        return fit(self, X, y, groups, validation_data=validation_data)

    monkeypatch.setattr(model_selection.ContinualGridSearch, "fit", spy)
    config = {"datasets": ["dsa"], "methods": ["Naive"], "tune": True, "max_epochs": 1,
              "runs": 2, "grid": {"Naive": {"lr": [1e-3, 1e-2]}}}
    records = run_benchmark(BenchmarkConfig.from_dict(config), tmp_path / "a", progress=False,
                            log=lambda message: None)
    assert [state for state, _ in seen] == [1234, 1235]
    assert all(scored[1] is data.y_test for _, scored in seen)
    again = run_benchmark(BenchmarkConfig.from_dict(config), tmp_path / "b", progress=False,
                          log=lambda message: None)
    def scores(rs):
        return [([c["params"] for c in r["search"]["candidates"]],
                 [c["score"] for c in r["search"]["candidates"]], r["accuracy_matrix"]) for r in rs]

    assert scores(again) == scores(records)  # the same numbers, run after run
    seen.clear()
    short = {**config, "runs": 1, "classes_per_task": 5}  # 2 tasks: the whole stream validates
    run_benchmark(BenchmarkConfig.from_dict(short), tmp_path / "c", progress=False,
                  log=lambda message: None)
    assert seen == [(1234, None)]


def test_bench_flags_set_schedule_and_holdout():
    from clestim.cli import _config, _parser

    args = _parser().parse_args(["bench", "--datasets", "uci_har", "--lr-schedule", "none",
                                 "--holdout", "0.2"])
    config = _config(args)
    assert (config.lr_schedule, config.holdout_for("uci_har")) == (None, 0.2)


def test_report_states_the_hyperparameters_each_column_ran_with(tmp_path):
    from clestim.report import hyperparameters

    def rec(key, method, run, **params):
        shared = {"lr": 0.001, "lr_schedule": "step15", "random_state": 1234 + run}
        return {**_record(key, method, 0.5), "run": run,
                "estimator_params": {**shared, **params}}

    records = [rec("a", "ER", 0, batch_size=32, memory_size=366),
               rec("b", "ER", 1, batch_size=32, memory_size=366),
               rec("c", "LwF", 0, batch_size=64, lambda_kd=1.0),
               rec("d", "LwF", 1, batch_size=64, lambda_kd=100.0),
               _record("e", "Naive", 0.4)]  # an old cell without the record
    assert hyperparameters(records).splitlines() == [
        "### Hyperparameters: dsa (default)", "",
        "- Naive: not recorded (cells older than the record of estimator_params)",
        "- every column: lr=0.001, lr_schedule='step15'",
        "- ER: batch_size=32, memory_size=366",
        "- LwF: batch_size=64, lambda_kd=1.0|100.0"]
    config = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["Naive"],
                                        "max_epochs": 1})
    (record,) = run_benchmark(config, tmp_path, progress=False, log=lambda message: None)
    assert record["estimator_params"]["lr_schedule"] == "step15"
    assert record["estimator_params"]["max_epochs"] == 1
    assert "stream" not in record["estimator_params"]


def test_cells_record_the_machine_that_computed_them(tmp_path):
    """Float results are bit-for-bit only on the same CPU kernels, so each cell says
    which computed it, and the report counts the cells of each machine."""
    import torch

    from clestim.report import machines

    config = BenchmarkConfig.from_dict({"datasets": ["basic_motions"], "methods": ["Naive"],
                                        "max_epochs": 1})
    (record,) = run_benchmark(config, tmp_path, progress=False, log=lambda message: None)
    assert record["hardware"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["hardware"]["cpu"] and "gpu" not in record["hardware"]
    cpu = {"cpu": "AMD EPYC", "cpu_capability": "AVX2"}
    records = [{**_record("a", "ER", 0.5), "hardware": cpu},
               {**_record("b", "ER", 0.5), "hardware": cpu},
               {**_record("c", "LwF", 0.5), "hardware": {**cpu, "gpu": "NVIDIA H200"}},
               _record("d", "Naive", 0.4)]  # an old cell without the record
    assert machines(records).splitlines() == [
        "### Computed on: dsa (default)", "",
        "- AMD EPYC (AVX2): 2 cells",
        "- AMD EPYC (AVX2), NVIDIA H200: 1 cell",
        "- not recorded (cells older than the record of hardware): 1 cell"]


@pytest.mark.filterwarnings("ignore:GR. the network labels")
def test_cells_record_the_epochs_early_stopping_ran(tmp_path):
    """Per task, how many learner (and GR generator) epochs ran: how close the
    epoch caps come to binding, measured in the benchmark's own cells."""
    config = BenchmarkConfig.from_dict({
        "datasets": ["basic_motions"], "methods": ["Naive", "GR"], "max_epochs": 3,
        "params": {"GR": {"generator_epochs": 4, "generator_patience": 1}}})
    records = run_benchmark(config, tmp_path, progress=False, log=lambda message: None)
    by_method = {r["method"]: r for r in records}
    n_tasks = len(by_method["Naive"]["task_classes"])
    for record in records:
        assert len(record["epochs"]) == n_tasks
        assert all(1 <= e <= 3 for e in record["epochs"])
    assert "generator_epochs" not in by_method["Naive"]
    generator = by_method["GR"]["generator_epochs"]
    assert len(generator) == n_tasks and all(2 <= e <= 4 for e in generator)
    # and the score of every epoch that early stopping read
    curves = by_method["GR"]["valid_curves"]
    assert [len(task) for task in curves["valid_loss"]] == by_method["GR"]["epochs"]
    assert [len(task) for task in curves["generator_valid_mse"]] == generator
    for task in curves["generator_valid_mse"]:  # patience 1: stopped at the first rise
        assert len(task) == 4 or task[-1] >= min(task[:-1])
    assert list(by_method["Naive"]["valid_curves"]) == ["valid_loss"]
