"""Shared fixtures: the real benchmark data folder and small real-data tasks."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

# One torch thread per process when several share the cores: under pytest-xdist
# (.ci/run runs one worker per core) and under mutmut (tools/mutation.sh), which
# forks a process per mutant (a forked process can deadlock on its parent's
# intra-op thread pool). The small networks of the tests gain nothing from a
# second thread, and two processes of two threads each on two cores spend most
# of their time in OpenMP barriers (an ER task of the tests: 28 s against 4.2 s).
_SHARED_CORES = "mutmut" in sys.modules or "PYTEST_XDIST_WORKER" in os.environ
torch.set_num_threads(1 if _SHARED_CORES else min(2, os.cpu_count() or 1))

SHARED_DATA = Path(
    os.environ.get(
        "CLESTIM_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
    )
)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real benchmark ``.npz`` files; skips the test when absent,
    except on CI (the ``CI`` variable set), where missing data is an error."""
    if not (SHARED_DATA / "uci_har_inertial.npz").is_file():
        message = f"real benchmark data not found in {SHARED_DATA} (set CLESTIM_SHARED_DATA)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; on CI (CI={os.environ['CI']!r}) this is an error")
        pytest.skip(message)
    return SHARED_DATA


@pytest.fixture(scope="session")
def uci_har_small(shared_data):
    """A class-balanced subset of real UCI-HAR: 120 train / 60 test windows per class."""
    with np.load(shared_data / "uci_har_inertial.npz") as d:
        splits = {}
        for part, n in (("train", 120), ("test", 60)):
            X, y = d[f"X_{part}"], d[f"y_{part}"]
            rng = np.random.default_rng(0)
            idx = np.concatenate(
                [rng.choice(np.flatnonzero(y == c), n, replace=False) for c in range(6)]
            )
            idx.sort()
            splits[part] = (X[idx].astype(np.float32), y[idx])
    return splits
