"""The skorch side of the task lifecycle: one :class:`TaskNet` trains one task.

A fresh ``TaskNet`` is built around the estimator's persistent torch module for
every task, so the optimizer, the LR schedule, the early-stopping state and the
history all start anew per task (the TSCIL protocol rebuilds the optimizer every
task); the module's weights carry over. The estimator stays in charge of what is
method-specific through three hooks that the net calls:

* ``learner._training_loss(X, y)``: the loss of one training batch;
* ``learner._criterion(logits, y)``: the validation loss (early stopping);
* ``learner._after_batch(X, y, epoch)``: after each optimizer step (memory updates);
  during it ``learner._optimizer`` is the task's optimizer, for a method that takes
  a step of its own (FDR).

Before each training step the net sets ``learner._epoch`` (from 0 within the task)
and ``learner._batch_index`` (the positions of the batch's samples in the task's
training data), for methods that keep per-sample state (CLOPS) or need the epoch.

Mixed precision (the estimator's ``precision``, see :mod:`clestim._precision`) lives
here and in the estimator's evaluation helpers only: the training loss and the
validation loss are computed under ``learner._autocast()``; with ``'fp16'`` the loss
is scaled by a ``GradScaler``, the gradients are unscaled before the callbacks see
them (gradient clipping) and the optimizer steps through the scaler. Parameters and
optimizer state stay float32.
"""

from __future__ import annotations

import sys

import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, EarlyStopping, GradientNormClipping, LRScheduler
from torch.optim.lr_scheduler import LambdaLR, MultiStepLR, OneCycleLR
from tqdm.auto import tqdm

from . import _precision

LR_SCHEDULES = (None, "step10", "step15", "onecycle", "tscil-step10", "tscil-step15")
_EVAL_BATCH = 512


class TensorDataset(torch.utils.data.Dataset):
    """Inputs and encoded labels already converted to tensors on the training device."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor):
        self.X, self.y = X, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


class TensorBatches:
    """Mini-batches sliced straight from tensors (no per-sample collation)."""

    def __init__(self, dataset: TensorDataset, batch_size: int, shuffle: bool, generator=None):
        self.dataset, self.batch_size = dataset, batch_size
        self.shuffle, self.generator = shuffle, generator
        self.index = None  # positions of the batch last yielded

    def __len__(self) -> int:
        return -(-len(self.dataset) // self.batch_size)

    def __iter__(self):
        n = len(self.dataset)
        X, y = self.dataset.X, self.dataset.y
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator).to(y.device)
            for start in range(0, n, self.batch_size):
                self.index = order[start : start + self.batch_size]
                yield X[self.index], y[self.index]
        else:
            for start in range(0, n, self.batch_size):
                self.index = torch.arange(start, min(start + self.batch_size, n), device=y.device)
                yield X[start : start + self.batch_size], y[start : start + self.batch_size]


class TaskNet(NeuralNet):
    """A skorch ``NeuralNet`` whose loss and per-batch hooks come from the estimator."""

    def __init__(self, module, *, learner, generator, **kwargs):
        super().__init__(module, criterion=torch.nn.CrossEntropyLoss, **kwargs)
        self.learner = learner
        self.generator = generator
        self.grad_scaler_ = _precision.grad_scaler(learner.precision, learner.device)

    def get_iterator(self, dataset, training=False):
        size = self.batch_size if training else max(self.batch_size, _EVAL_BATCH)
        batches = TensorBatches(dataset, size, shuffle=training, generator=self.generator)
        if training:
            self.train_batches_ = batches
        return batches

    def get_loss(self, y_pred, y_true, X=None, training=False):
        return self.learner._criterion(y_pred, y_true)

    def train_step_single(self, batch, **fit_params):
        self._set_training(True)
        X, y = batch
        self.learner._epoch = len(self.history) - 1
        self.learner._batch_index = self.train_batches_.index
        with self.learner._autocast():
            loss = self.learner._training_loss(X, y)
        if self.grad_scaler_ is None:
            loss.backward()
        else:  # fp16: scaled backward, then true gradients for clipping and the step
            self.grad_scaler_.scale(loss).backward()
            self.grad_scaler_.unscale_(self.optimizer_)
        return {"loss": loss, "y_pred": None}

    def _step_optimizer(self, step_fn):
        if self.grad_scaler_ is None:
            return super()._step_optimizer(step_fn)
        step_fn()
        self.grad_scaler_.step(self.optimizer_)  # skipped when a gradient is inf/NaN
        self.grad_scaler_.update()
        return None

    def validation_step(self, batch, **fit_params):
        with self.learner._autocast():
            return super().validation_step(batch, **fit_params)

    def train_step(self, batch, **fit_params):
        step = super().train_step(batch, **fit_params)
        self.learner._optimizer = self.optimizer_  # for methods with a step of their own (FDR)
        try:
            self.learner._after_batch(*batch, epoch=len(self.history) - 1)
        finally:
            del self.learner._optimizer
        return step


def interactive_stderr() -> bool:
    """Whether progress bars belong on stderr: a terminal or a notebook, not a log."""
    return "ipykernel" in sys.modules or bool(getattr(sys.stderr, "isatty", lambda: False)())


class TaskProgress(Callback):
    """A tqdm bar over the epochs of one task, showing the train and validation loss;
    where stderr is not a terminal, one line per task instead."""

    def __init__(self, description: str, total: int):
        self.description, self.total = description, total

    def on_train_begin(self, net, **kwargs):
        self.bar_ = tqdm(total=self.total, desc=self.description, leave=False, unit="epoch",
                         disable=not interactive_stderr())

    def on_epoch_end(self, net, **kwargs):
        last = net.history[-1]
        postfix = {"loss": f"{last['train_loss']:.4f}"}
        if "valid_loss" in last:
            postfix["val"] = f"{last['valid_loss']:.4f}"
        self.bar_.set_postfix(postfix, refresh=False)
        self.bar_.update(1)

    def on_train_end(self, net, **kwargs):
        self.bar_.close()
        if self.bar_.disable and len(net.history):
            last = net.history[-1]
            val = f", val {last['valid_loss']:.4f}" if "valid_loss" in last else ""
            seconds = sum(row.get("dur", 0.0) for row in net.history)
            print(f"{self.description}: {len(net.history)} epochs, loss "
                  f"{last['train_loss']:.4f}{val} ({seconds:.1f} s)", file=sys.stderr)


def _silent(*args, **kwargs):
    """A sink that prints nothing (early stopping's message)."""


class _TSCILStep:
    """TSCIL's step schedule as its code runs it: ``lr / 25`` for a task's first epoch
    (its ``learn_task`` builds a ``OneCycleLR`` whatever the schedule, which sets
    that rate, and ``adjust_learning_rate`` resets it only after the epoch), then
    ``lr``, and ``lr * 0.1`` after ``milestone`` epochs."""

    def __init__(self, milestone: int):
        self.milestone = milestone

    def __call__(self, epoch: int) -> float:
        return 1 / 25 if epoch == 0 else 1.0 if epoch < self.milestone else 0.1


def lr_scheduler(schedule: str | None, lr: float, max_epochs: int, n_batches: int):
    """The skorch callback for a TSCIL learning-rate schedule, or None.

    ``'step10'``/``'step15'`` multiply the rate by 0.1 once, after 10/15 epochs (as
    TSCIL's ``adjust_learning_rate``); ``'tscil-step10'``/``'tscil-step15'`` also run
    each task's first epoch at ``lr / 25``, as TSCIL's code does (:class:`_TSCILStep`);
    ``'onecycle'`` is ``OneCycleLR`` with peak ``lr`` over the task's
    ``max_epochs * n_batches`` optimizer steps, stepped per batch.
    """
    if schedule is None:
        return None
    if schedule in ("step10", "step15"):
        return LRScheduler(policy=MultiStepLR, milestones=[int(schedule[4:])], gamma=0.1)
    if schedule in ("tscil-step10", "tscil-step15"):
        return LRScheduler(policy=LambdaLR, lr_lambda=_TSCILStep(int(schedule[10:])))
    if schedule == "onecycle":
        return LRScheduler(
            policy=OneCycleLR,
            max_lr=lr,
            total_steps=max(1, max_epochs * n_batches),
            step_every="batch",
        )
    raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {schedule!r}")


def task_callbacks(
    learner, *, has_validation: bool, n_batches: int, description: str, max_epochs: int
):
    """The callbacks of one task: early stopping, LR schedule, clipping, progress."""
    callbacks = []
    if has_validation and learner.patience is not None:
        callbacks.append(
            EarlyStopping(
                monitor="valid_loss",
                patience=learner.patience,
                threshold=0.0,
                load_best=True,
                sink=_silent,
            )
        )
    scheduler = lr_scheduler(learner.lr_schedule, learner.lr, max_epochs, n_batches)
    if scheduler is not None:
        callbacks.append(scheduler)
    if learner.grad_clip:
        callbacks.append(GradientNormClipping(gradient_clip_value=learner.grad_clip))
    if learner.verbose:
        callbacks.append(TaskProgress(description, max_epochs))
    return callbacks
