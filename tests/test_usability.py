"""A new user's first hour (issue 19): progress on non-terminals, help on every flag,
a clear error for a host that is not a Dask scheduler, readable intervals in reports
and plots, the paper-interval flags and the notes on a task's labels."""

import argparse
import socket
import threading
import time

import numpy as np
import pytest
from scipy import stats

import clestim.benchmark as benchmark
from clestim import Naive
from clestim.benchmark import load_results, write_json_atomic
from clestim.cli import _parser, main
from clestim.plotting import plot_average_accuracy, plot_memory_budget
from clestim.report import LEGEND, markdown_table, report_frame

QUICK = ["--datasets", "basic_motions", "--max-epochs", "1"]


# ------------------------------------------------------------------------ the CLI
def test_every_flag_has_help():
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"clestim {name} {action.option_strings or action.dest}"


def _fake_cell(cell, config, verbose=0, candidates=None, progress=None):
    """A finished cell without the training (Naive 50%, LwF 40%)."""
    final = {"Naive": 0.5, "LwF": 0.4}[cell.method]
    return {"key": cell.key, "dataset": cell.dataset, "method": cell.method, "run": cell.run,
            "settings": {}, "setting": "default", "protocol": {}, "wall_s": 0.0,
            "accuracy_matrix": [[1.0, 0.0], [0.0, 1.0]], "task_classes": [[0, 1], [2, 3]],
            "verbose": verbose, "metrics": {"average_accuracy": final,
                                            "average_forgetting": 1.0, "learning_accuracy": 1.0}}


def test_non_terminal_gets_one_line_per_cell_in_the_order_of_methods(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(benchmark, "run_cell", _fake_cell)
    # pytest's captured stderr is not a terminal: no bars, one line per finished cell
    assert main(["bench", *QUICK, "--methods", "Naive,LwF", "--results", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "\r" not in err and "it/s" not in err
    lines = err.strip().splitlines()
    assert lines[0] == f"2 cells: 0 already in {tmp_path}, 2 to run"
    assert [line.split(" on ")[0] for line in lines[1:3]] == ["[1/2] Naive", "[2/2] LwF"]
    assert lines[3:] == ["2 cells computed here"]
    assert lines[1] == "[1/2] Naive on basic_motions (default), run 0: A_T 50.0, F_T 100.0 (0 s)"
    # and the cells train without their per-task bars
    assert [r["verbose"] for r in load_results(tmp_path)] == [0, 0]
    # the matrices and the summary keep --methods' order (not the alphabet's)
    assert out.index("Naive on basic_motions") < out.index("LwF on basic_motions")
    table = out[out.index("metrics (%)"):]
    assert table.index("Naive") < table.index("LwF")


@pytest.fixture
def not_a_scheduler():
    """A TCP server on 127.0.0.1 that answers every connection with an SSH banner."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(1024)
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n" * 64)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    server.close()


def test_a_host_that_is_not_a_dask_scheduler(tmp_path, capsys, not_a_scheduler):
    start = time.monotonic()
    code = main(["bench", *QUICK, "--methods", "Naive", "--no-progress",
                 "--results", str(tmp_path), "--scheduler", not_a_scheduler])
    assert code == 2 and time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert f"{not_a_scheduler!r} answered, but not as a Dask scheduler" in err
    assert "Traceback" not in err and "EiB" not in err
    assert not (tmp_path / "cells").exists()  # nothing is created before the grid can run


# ------------------------------------------------------------ reports and plots
def _write(folder, key, method, run, final):
    A = [[1.0, 0.0], [final, final]]
    write_json_atomic(folder / "cells" / f"{key}.json", {
        "key": key, "dataset": "uci_har", "method": method, "run": run, "settings": {},
        "setting": "default", "accuracy_matrix": A, "task_classes": [[0, 1], [2, 3]],
        "metrics": {"average_accuracy": final, "average_forgetting": 1.0 - final,
                    "learning_accuracy": (1.0 + final) / 2}})


def test_report_flags_cells_against_the_papers_interval(tmp_path):
    (tmp_path / "cells").mkdir()
    write_json_atomic(tmp_path / "manifest.json", {"format": 1, "clestim": "test"})
    runs = {"ER": [0.50, 0.52, 0.54],       # paper 88.9 ± 2.7: far below
            "DER": [0.89, 0.90, 0.91],      # paper 90.9 ± 1.7: agrees
            "Herding": [0.85, 0.86, 0.87],  # paper 89.0 ± 1.9: overlaps, mean outside
            "Naive": [0.10, 0.60]}          # paper 36.2 ± 10.9: two runs, huge interval
    for method, finals in runs.items():
        for run, final in enumerate(finals):
            _write(tmp_path, f"{method}{run}", method, run, final)
    frame = report_frame(load_results(tmp_path))  # what `clestim report` writes
    table = LEGEND + markdown_table(frame)

    def cells(first):
        line = next(line for line in table.splitlines() if line.startswith(first))
        return [cell.strip() for cell in line.strip("|").split("|")][1:]

    cells = dict(zip(cells("| metric |"), cells("| A_T |")))
    h3 = stats.t.ppf(0.975, 2) * 1.0 / np.sqrt(3)  # s = 1 (in %) over 3 runs
    assert cells["ER"] == f"52.0 ± {2 * h3:.1f} (paper 88.9 ± 2.7, Δ -36.9)✗"
    assert cells["DER"] == f"90.0 ± {h3:.1f} (paper 90.9 ± 1.7, Δ -0.9)"
    assert cells["Herding"] == f"86.0 ± {h3:.1f} (paper 89.0 ± 1.9, Δ -3.0)~"
    # 35 ± 12.7 * 25 leaves [0, 100] on both sides: the clipped bounds, and † for 2 runs
    assert cells["Naive"] == "35.0 [0.0, 100.0]† (paper 36.2 ± 10.9, Δ -1.2)"
    assert "✗: our interval does not overlap the paper's" in table
    naive = frame.set_index("method").loc["Naive"]  # the CSV's columns
    assert (naive["A_T_lo"], naive["A_T_hi"], naive["flag_A_T"]) == (0.0, 100.0, "")


def test_plot_bands_stay_in_range_and_identical_lines_differ():
    same = [np.array([[1.0, 0.0], [0.5, 0.5]])] * 3
    wide = [np.array([[1.0, 0.0], [0.0, 0.1]]), np.array([[1.0, 0.0], [1.0, 0.9]])]
    ax = plot_average_accuracy({"Naive": same, "LwF": same, "ER": wide})
    naive, lwf, _ = ax.get_lines()
    np.testing.assert_array_equal(naive.get_ydata(), lwf.get_ydata())  # they coincide...
    assert naive.get_linestyle() != lwf.get_linestyle()                 # ...yet both show
    assert naive.get_marker() != lwf.get_marker()
    assert naive.get_markersize() != lwf.get_markersize()
    band = ax.collections[-1].get_paths()[0].vertices[:, 1]  # ER: two runs, task 2 at 5 and 95
    assert band.min() == 0.0 and band.max() == 100.0
    assert "fewer than 3 runs" in ax.get_legend().get_title().get_text()
    ax = plot_memory_budget({"ER": {1: [2.0, 90.0], 5: [98.0, 99.0, 100.0]}})
    (bars,) = ax.containers[0].lines[2]  # the vertical error bars
    ys = np.concatenate([seg[:, 1] for seg in bars.get_segments()])
    assert ys.min() == 0.0 and ys.max() == 100.0
    plot3 = plot_average_accuracy({"ER": same})
    assert plot3.get_legend().get_title().get_text() == ""
    # a label with its parameters wraps between words instead of squeezing the axes
    long = "GR (generator_epochs=500, generator_params={'standardize': True})"
    texts = [t.get_text() for t in plot_average_accuracy({long: same, "ER": same})
             .get_legend().get_texts()]
    assert texts == ["GR (generator_epochs=500,\ngenerator_params={'standardize':\nTrue})", "ER"]


# ------------------------------------------------------------ notes on the labels
def test_notes_on_reused_single_and_float_labels(capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 4)).astype(np.float32)
    est = Naive(backbone="mlp", backbone_params={"hidden": (8,)}, max_epochs=1,
                validation_fraction=0.0, random_state=0, verbose=1)
    est.partial_fit_task(X, np.repeat([0, 1], 6))
    est.partial_fit_task(X, np.repeat([1, 2], 6))  # class 1 again
    est.partial_fit_task(X, np.full(12, 3))         # a single class
    assert est.task_notes_[0] == []
    assert est.task_notes_[1] == ["task 2 holds 1 class(es) already seen (1): expected in a "
                                  "domain-incremental or blurry stream, not in a "
                                  "class-incremental one"]
    assert est.task_notes_[2] == ["task 3 holds a single class (3)"]
    err = capsys.readouterr().err
    assert "Naive: note: task 2 holds 1 class(es) already seen" in err
    # not a terminal: one line per task instead of a bar
    assert err.count("Naive task ") == 3 and "Naive task 3: 1 epochs, loss " in err
    quiet = Naive(backbone="mlp", backbone_params={"hidden": (8,)}, max_epochs=1,
                  validation_fraction=0.0, random_state=0)
    with pytest.warns(UserWarning, match="float labels"):
        quiet.partial_fit_task(X, np.repeat([0.0, 1.0], 6))
    assert quiet.task_notes_[0][0].startswith("task 1 has float labels")
    assert capsys.readouterr().err == ""  # verbose=0 prints nothing
