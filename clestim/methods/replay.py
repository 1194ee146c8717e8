"""Experience replay and Dark Experience Replay."""

from __future__ import annotations

import numbers

import torch
from torch.nn import functional as F

from ..base import ContinualClassifier
from ..memory import MemoryBuffer, RandomRetrieval, Reservoir, memory_capacity

MEMORY_UPDATES = ("after_task", "per_batch")


class ER(ContinualClassifier):
    """Experience Replay (Rolnick et al. 2019; Chaudhry et al. 2019).

    A memory buffer filled by reservoir sampling; every training step adds the
    cross-entropy of a randomly retrieved memory batch to that of the new batch::

        loss = CE(f(x), y) + CE(f(x_mem), y_mem)

    Defaults follow TSCIL (Qiao et al. 2024): 32 new + 32 memory samples per step,
    patience 20, the buffer updated after each task with one pass over the task's
    training split. Other replay methods subclass ``ER`` and change its memory
    policies (``_memory_policies``), what a slot stores (``_memory_fields``) or the
    replay loss (``_replay_loss``).

    Parameters
    ----------
    memory_size : int or float, default=0.05
        Buffer slots: a count, or a fraction of the training samples seen so far
        (TSCIL's 5% of a 3-task UCI-HAR stream is ``memory_size=366``).
    memory_update : {'after_task', 'per_batch'}, default='after_task'
        ``'after_task'`` (TSCIL) offers the task's training split to the buffer once
        the task is learned; ``'per_batch'`` offers each batch right after its
        optimizer step, during the first epoch of the task (each sample once), as
        online continual learning does.
    replay_batch_size : int, default=32
    batch_size : int, default=32
        New samples per step.
    patience : int, default=20
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.

    Attributes
    ----------
    memory_ : MemoryBuffer
    """

    def __init__(
        self,
        *,
        memory_size=0.05,
        memory_update="after_task",
        replay_batch_size=32,
        batch_size=32,
        patience=20,
        **params,
    ):
        super().__init__(batch_size=batch_size, patience=patience, **params)
        self.memory_size = memory_size
        self.memory_update = memory_update
        self.replay_batch_size = replay_batch_size

    def _check_params(self):
        super()._check_params()
        memory_capacity(self.memory_size, 1)
        if self.memory_update not in MEMORY_UPDATES:
            raise ValueError(
                f"memory_update must be one of {MEMORY_UPDATES}, got {self.memory_update!r}"
            )
        if not isinstance(self.replay_batch_size, numbers.Integral) or self.replay_batch_size < 1:
            raise ValueError(
                f"replay_batch_size must be a positive integer, got {self.replay_batch_size!r}"
            )

    # -- what subclasses change -------------------------------------------------
    def _memory_policies(self):
        """The (update, retrieval) policies of the buffer."""
        return Reservoir(), RandomRetrieval()

    def _memory_fields(self, X: torch.Tensor, y: torch.Tensor, groups) -> dict:
        """What one memory slot stores for samples ``X`` (encoded labels ``y``)."""
        return {"X": X, "y": y}

    def _replay_loss(self, logits: torch.Tensor, memory: dict) -> torch.Tensor:
        """The loss on a retrieved memory batch, given its logits."""
        return self._criterion(logits, memory["y"])

    # -- lifecycle hooks ----------------------------------------------------------
    def _before_task(self, X, y, groups):
        if not hasattr(self, "memory_"):
            self.memory_ = MemoryBuffer(0, *self._memory_policies())
        self.memory_.capacity = memory_capacity(self.memory_size, self.n_train_seen_)

    def _training_loss(self, X, y):
        memory = self.memory_.sample(self.replay_batch_size, self._generator)
        if memory is None:
            return super()._training_loss(X, y)
        logits_memory, logits = self._forward(memory["X"], X)
        return self._criterion(logits, y) + self._replay_loss(logits_memory, memory)

    def _after_batch(self, X, y, epoch):
        if self.memory_update == "per_batch" and epoch == 0:
            self._remember(X, y, None)

    def _after_task(self, X, y, groups):
        if self.memory_update == "after_task":
            order = torch.randperm(len(y), generator=self._generator).numpy()
            self._remember(
                self._tensor(X[order]),
                self._tensor(y[order], torch.long),
                None if groups is None else groups[order],
            )

    def _remember(self, X: torch.Tensor, y: torch.Tensor, groups) -> None:
        self.memory_.add(self._generator, **self._memory_fields(X, y, groups))


class DER(ER):
    """Dark Experience Replay (Buzzega et al., NeurIPS 2020).

    Memory slots store the network's logits; replay matches them::

        loss = CE(f(x), y) + alpha * MSE(f(x_mem), z_mem)

    As in TSCIL's code, logits are stored when samples enter the buffer (after the
    task, from the restored best weights) and are zero-padded when the head grows,
    so old samples' logits for classes learned later are pulled towards 0.

    Parameters
    ----------
    alpha : float, default=0.5
    **params
        The parameters of :class:`ER`.
    """

    def __init__(self, *, alpha=0.5, **params):
        super().__init__(**params)
        self.alpha = alpha

    def _memory_fields(self, X, y, groups):
        fields = super()._memory_fields(X, y, groups)
        fields["logits"] = self._eval_forward(X)
        if len(self.memory_):
            stored = _pad_to(self.memory_["logits"], self.module_.n_classes)
            self.memory_.set_field("logits", stored)
        return fields

    def _replay_loss(self, logits, memory):
        return self.alpha * F.mse_loss(logits, _pad_to(memory["logits"], logits.shape[1]))


class DERpp(DER):
    """DER++ (Buzzega et al., NeurIPS 2020): DER plus the cross-entropy of a second,
    separately drawn memory batch::

        loss = CE(f(x), y) + alpha * MSE(f(x_mem), z_mem) + beta * CE(f(x'_mem), y'_mem)

    Parameters
    ----------
    beta : float, default=0.5
    **params
        The parameters of :class:`DER`.
    """

    def __init__(self, *, beta=0.5, **params):
        super().__init__(**params)
        self.beta = beta

    def _replay_loss(self, logits, memory):
        second = self.memory_.sample(self.replay_batch_size, self._generator)
        ce = self._criterion(self.module_(second["X"]), second["y"])
        return super()._replay_loss(logits, memory) + self.beta * ce


def _pad_to(logits: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(logits, (0, width - logits.shape[1])) if logits.shape[1] < width else logits
