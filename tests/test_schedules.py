"""The learning rate each schedule sets, epoch by epoch, and the memory capacity
after each task for a count, a fraction and TSCIL's budget."""

import math

import numpy as np
import pytest
import torch

from clestim import ER, Naive
from clestim.benchmark import BenchmarkConfig, make_estimator

TINY = dict(backbone_params={"channels": (4,)}, input_norm=None, patience=None,
            validation_fraction=0.0, random_state=0)


def _data(n_per_class=10, classes=(0, 1)):
    rng = np.random.default_rng(0)
    y = np.repeat(classes, n_per_class)
    return rng.normal(size=(len(y), 2, 8)).astype(np.float32) + y[:, None, None], y


class _RecordingSGD(torch.optim.SGD):
    """SGD that records the learning rate of every step it takes."""

    lrs: list = []

    def step(self, closure=None):
        type(self).lrs.append(self.param_groups[0]["lr"])
        return super().step(closure)


def _lrs(schedule, max_epochs, n_per_class=10, batch_size=5, lr=0.1):
    """The learning rate of each optimizer step of one task (20 samples, 4 steps/epoch)."""
    _RecordingSGD.lrs = []
    est = Naive(lr=lr, lr_schedule=schedule, max_epochs=max_epochs, batch_size=batch_size,
                optimizer=_RecordingSGD, **TINY)
    est.partial_fit_task(*_data(n_per_class))
    steps = _RecordingSGD.lrs
    assert len(steps) == max_epochs * 4
    return np.asarray(steps).reshape(max_epochs, 4), est


@pytest.mark.parametrize("schedule, milestone", [(None, None), ("step10", 10), ("step15", 15)])
def test_constant_and_step_schedules(schedule, milestone):
    lrs, est = _lrs(schedule, max_epochs=17)
    expected = np.full(17, 0.1)
    if milestone:
        expected[milestone:] = 0.01  # x0.1 once, after `milestone` epochs
    np.testing.assert_allclose(lrs, np.repeat(expected[:, None], 4, 1), rtol=1e-9)
    assert len(est.history_[0]) == 17
    # the schedule restarts with every task (a fresh optimizer per task)
    _RecordingSGD.lrs = []
    est.partial_fit_task(*_data(classes=(2, 3)))
    np.testing.assert_allclose(_RecordingSGD.lrs[:4], 0.1)


@pytest.mark.parametrize("milestone", [10, 15])
def test_tscil_step_schedules_start_each_task_at_a_25th(milestone):
    lrs, est = _lrs(f"tscil-step{milestone}", max_epochs=17)
    expected = np.full(17, 0.1)
    expected[0] = 0.1 / 25  # the rate TSCIL's OneCycleLR sets before the first epoch
    expected[milestone:] = 0.01
    np.testing.assert_allclose(lrs, np.repeat(expected[:, None], 4, 1), rtol=1e-9)
    _RecordingSGD.lrs = []
    est.partial_fit_task(*_data(classes=(2, 3)))  # and again on the next task
    np.testing.assert_allclose(_RecordingSGD.lrs[:8], [0.1 / 25] * 4 + [0.1] * 4, rtol=1e-9)


def test_onecycle_schedule_per_batch():
    lrs, _ = _lrs("onecycle", max_epochs=5)
    steps = lrs.flatten()
    total, peak = 20, 0.1
    initial, final = peak / 25, peak / 25 / 1e4
    up = 0.3 * total - 1  # the warm-up ends at step 5 (OneCycleLR's pct_start=0.3)

    def cos(start, end, pct):
        return end + (start - end) / 2 * (1 + math.cos(math.pi * pct))

    expected = [cos(initial, peak, i / up) if i <= up
                else cos(peak, final, (i - up) / (total - 1 - up)) for i in range(total)]
    np.testing.assert_allclose(steps, expected, rtol=1e-6)
    assert steps[0] == pytest.approx(initial) and steps.max() == pytest.approx(peak)


# ------------------------------------------------------------------ capacity
def _capacities(est, n_tasks=3, n_per_class=10):
    caps, sizes = [], []
    for t in range(n_tasks):
        est.partial_fit_task(*_data(n_per_class, classes=(2 * t, 2 * t + 1)))
        caps.append(est.memory_.capacity)
        sizes.append(len(est.memory_))
    return caps, sizes


def test_capacity_count_is_fixed():
    caps, sizes = _capacities(ER(memory_size=15, max_epochs=1, **TINY))
    assert caps == [15, 15, 15] and sizes == [15, 15, 15]


def test_capacity_fraction_grows_with_the_samples_seen():
    caps, sizes = _capacities(ER(memory_size=0.3, max_epochs=1, **TINY))
    assert caps == [6, 12, 18]  # 30% of 20, 40, 60 training samples
    assert sizes == caps


def test_capacity_tscil_is_the_paper_count_for_the_dataset():
    config = BenchmarkConfig.from_dict({"datasets": ["uwave"], "methods": ["ER"],
                                        "max_epochs": 1})
    (cell,) = config.cells()
    est = make_estimator(cell, config).set_params(**TINY)
    assert est.memory_size == 40  # TSCIL's budget for UWave
    caps, sizes = _capacities(est, n_per_class=15)
    assert caps == [40, 40, 40] and sizes == [30, 40, 40]
