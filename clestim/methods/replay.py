"""Experience replay and Dark Experience Replay."""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch.nn import functional as F

from .. import _precision
from ..base import ContinualClassifier
from ..losses import KD_KINDS, replay_distillation_loss
from ..memory import (
    ConfidenceGate,
    MemoryBuffer,
    RandomRetrieval,
    Reservoir,
    SubjectBalancedRetrieval,
    SubjectSubset,
    check_class_quota,
    memory_capacity,
)
from ..memory.policies import ClassBalancedSelection

MEMORY_UPDATES = ("after_task", "per_batch")
MEMORY_GATES = (None, "confidence")
MEMORY_MOTIONS = ("farneback", "diff")


class ER(ContinualClassifier):
    """Experience Replay (Rolnick et al. 2019; Chaudhry et al. 2019).

    A memory buffer filled by reservoir sampling; every training step adds the
    cross-entropy of a randomly retrieved memory batch to that of the new batch::

        loss = CE(f(x), y) + CE(f(x_mem), y_mem)

    Defaults follow TSCIL (Qiao et al. 2024): 32 new + 32 memory samples per step,
    patience 20, the buffer updated after each task with one pass over the task's
    training split. Other replay methods subclass ``ER`` and change its memory
    policies (``_update_policy``, ``_retrieval_policy``), what a slot stores
    (``_memory_fields``) or the replay loss (``_replay_loss``); the options below
    (online mode, subject-aware memory) therefore work for every replay method.

    **Online class-incremental mode** (``online=True``; Mai et al. 2022): each task
    is one pass over its data (one epoch) and the memory is updated after every
    batch. The task still holds out ``validation_fraction`` for the validation
    loss; set it to 0 to stream every sample.

    **Subject-aware replay** (TSCIL Sect. 5.3), with subject ids passed as
    ``groups`` (stored as the ``'group'`` memory field): ``memory_subjects`` lets
    only some subjects into memory ("ER (k Sub)"), ``retrieval='subject_balanced'``
    replays as many samples of each subject as possible ("Balanced").

    Parameters
    ----------
    memory_size : int, float or str, default=0.05
        Buffer slots: a count, or a fraction of the training samples seen so far
        (TSCIL's 5% of a 3-task UCI-HAR stream is ``memory_size=366``), or a size
        in bytes such as ``'50MB'``: as many slots as fit, a slot's size measured
        before each task (``memory_nbytes_`` over the stored samples).
    memory_update : {'after_task', 'per_batch'}, default='after_task'
        ``'after_task'`` (TSCIL) offers the task's training split to the buffer once
        the task is learned; ``'per_batch'`` offers each batch right after its
        optimizer step, during the first epoch of the task (each sample once), as
        online continual learning does.
    replay_batch_size : int, default=32
    online : bool, default=False
        One epoch per task and per-batch memory updates (overrides ``max_epochs``
        and ``memory_update``).
    memory_subjects : None, int or list, default=None
        Subjects whose samples may enter memory: all (None), that many drawn at
        random from the first task's subjects (TSCIL: 4 of DSA's 8), or these ids.
        Needs ``groups``.
    retrieval : {'random', 'subject_balanced'}, default='random'
        How a memory batch is drawn; ``'subject_balanced'`` needs ``groups``.
    kd : {None, 'features', 'logits', 'both'}, default=None
        Knowledge distillation from the network as it was before the task (a
        frozen teacher) on the new and the replayed samples, as the SLU paper adds
        to replay (Sect. 3.3): ``'features'`` matches the backbone embeddings (MSE,
        its audio-KD), ``'logits'`` the old classes' logits (its seq-KD), see
        :func:`~clestim.losses.replay_distillation_loss`. Every subclass (DER,
        Herding...) inherits it.
    kd_weight : float, default=1.0
        Weight of the distillation term: ``loss += kd_weight * KD``.
    kd_temperature : float, default=2.0
        Temperature of the logit KD.
    memory_gate : {None, 'confidence'}, default=None
        ``'confidence'``: confidence-driven rehearsal (CDR, Villa et al. 2022,
        Sect. 4.3; :class:`~clestim.memory.ConfidenceGate`). A sample is offered to
        the memory's update policy only if the network's probability for its true
        class (``predict_proba``'s, over the classes seen so far) is above
        ``confidence_threshold``. The scoring network is the current one, in eval
        mode, at the moment the samples are offered: after the task with its best
        weights restored (``memory_update='after_task'``), or right after the
        optimizer step of the batch (``'per_batch'``).
    confidence_threshold : float, default=0.7
        CDR's ``delta``, in [0, 1).
    memory_frames : int, optional
        Information-driven downsampling of the memory (IDD, Villa et al. 2022,
        Sect. 4.2; :class:`~clestim.video.IDDStore`): a clip ``(C, T, H, W)`` or a
        series ``(C, T)`` entering the buffer keeps only its ``memory_frames``
        frames (time steps) of largest motion, in time order, plus their positions,
        so ``memory_nbytes_`` shrinks; replay rebuilds it at ``T`` frames by holding
        each kept frame until the next one. None: samples are stored whole.
    memory_motion : {'farneback', 'diff'}, default='farneback'
        IDD's motion score (:func:`~clestim.video.frame_motion`): the optical-flow
        norm (clips only) or the frame-difference norm (clips and series).
    batch_size : int, default=32
        New samples per step.
    patience : int, default=20
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.

    Attributes
    ----------
    memory_ : MemoryBuffer
    memory_subjects_ : ndarray
        The subject ids allowed into memory (when ``memory_subjects`` is set).
    """

    #: Accepted values of ``retrieval``; subclasses add theirs.
    RETRIEVALS = ("random", "subject_balanced")

    def __init__(
        self,
        *,
        memory_size=0.05,
        memory_update="after_task",
        replay_batch_size=32,
        online=False,
        memory_subjects=None,
        retrieval="random",
        kd=None,
        kd_weight=1.0,
        kd_temperature=2.0,
        memory_gate=None,
        confidence_threshold=0.7,
        memory_frames=None,
        memory_motion="farneback",
        batch_size=32,
        patience=20,
        **params,
    ):
        super().__init__(batch_size=batch_size, patience=patience, **params)
        self.memory_size = memory_size
        self.memory_update = memory_update
        self.replay_batch_size = replay_batch_size
        self.online = online
        self.memory_subjects = memory_subjects
        self.retrieval = retrieval
        self.kd = kd
        self.kd_weight = kd_weight
        self.kd_temperature = kd_temperature
        self.memory_gate = memory_gate
        self.confidence_threshold = confidence_threshold
        self.memory_frames = memory_frames
        self.memory_motion = memory_motion

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
        if self.kd not in KD_KINDS:
            raise ValueError(f"kd must be one of {KD_KINDS}, got {self.kd!r}")
        if not isinstance(self.kd_weight, numbers.Real) or not self.kd_weight >= 0:
            raise ValueError(f"kd_weight must be a number >= 0, got {self.kd_weight!r}")
        if not isinstance(self.kd_temperature, numbers.Real) or not self.kd_temperature > 0:
            raise ValueError(f"kd_temperature must be positive, got {self.kd_temperature!r}")
        if self.memory_gate not in MEMORY_GATES:
            raise ValueError(f"memory_gate must be one of {MEMORY_GATES}, got {self.memory_gate!r}")
        if not 0.0 <= float(self.confidence_threshold) < 1.0:
            raise ValueError(
                f"confidence_threshold must be in [0, 1), got {self.confidence_threshold!r}"
            )
        if self.retrieval not in self.RETRIEVALS:
            raise ValueError(f"retrieval must be one of {self.RETRIEVALS}, got {self.retrieval!r}")
        frames = self.memory_frames
        if frames is not None and (
            isinstance(frames, bool) or not isinstance(frames, numbers.Integral) or frames < 1
        ):
            raise ValueError(f"memory_frames must be None or a positive int, got {frames!r}")
        if self.memory_motion not in MEMORY_MOTIONS:
            raise ValueError(
                f"memory_motion must be one of {MEMORY_MOTIONS}, got {self.memory_motion!r}"
            )
        subjects = self.memory_subjects
        if subjects is not None and isinstance(subjects, numbers.Integral):
            if isinstance(subjects, bool) or subjects < 1:
                raise ValueError(f"memory_subjects as a count must be >= 1, got {subjects!r}")
        elif subjects is not None and (isinstance(subjects, str) or len(subjects) == 0):
            raise ValueError(
                f"memory_subjects must be None, a count or a non-empty list of subject ids, "
                f"got {subjects!r}"
            )

    def _check_task(self, X, y, groups):
        if groups is None and self._uses_groups():
            raise ValueError(
                f"{type(self).__name__}(memory_subjects={self.memory_subjects!r}, "
                f"retrieval={self.retrieval!r}) needs subject ids: pass groups= to "
                "partial_fit_task / fit"
            )
        if isinstance(self._update_policy(), ClassBalancedSelection):
            n_seen = getattr(self, "n_train_seen_", 0) + len(y)
            known = set(getattr(self, "_class_index_state", {}))
            n_classes = len(known | set(np.unique(np.asarray(y)).tolist()))
            check_class_quota(memory_capacity(self.memory_size, n_seen), n_classes)
        self._check_memory_frames(X)

    def _check_memory_frames(self, X) -> None:
        """``memory_frames`` fits the input and the samples already in memory."""
        frames, name = self.memory_frames, type(self).__name__
        if frames is not None:
            if X.ndim not in (3, 5):
                raise ValueError(
                    f"{name}(memory_frames={frames}) downsamples clips (n, C, T, H, W) or "
                    f"series (n, C, T) along T, got input of shape {X.shape}"
                )
            if frames > X.shape[2]:
                raise ValueError(
                    f"{name}(memory_frames={frames}) keeps more frames than the input has "
                    f"({X.shape[2]}); use at most {X.shape[2]} or None"
                )
            if self.memory_motion == "farneback" and X.ndim != 5:
                raise ValueError(
                    f"{name}(memory_motion='farneback') measures optical flow on clips "
                    f"(n, C, T, H, W), got input of shape {X.shape}; use memory_motion='diff'"
                )
        memory = getattr(self, "memory_", None)
        if memory is not None and len(memory):
            stored = memory.fields["X"].shape[2] if "frames" in memory.fields else None
            if stored != frames:
                raise ValueError(
                    f"memory_frames={frames} but the memory already stores samples with "
                    f"memory_frames={stored}; it cannot change once samples are stored "
                    "(fit starts over)"
                )

    def _uses_groups(self) -> bool:
        return self.memory_subjects is not None or self.retrieval == "subject_balanced"

    def _epochs(self):
        return 1 if self.online else super()._epochs()

    # -- what subclasses change -------------------------------------------------
    def _update_policy(self):
        """The buffer's update policy (reservoir sampling)."""
        return Reservoir()

    def _retrieval_policy(self):
        """The buffer's retrieval policy for ``retrieval``."""
        if self.retrieval == "subject_balanced":
            return SubjectBalancedRetrieval()
        return RandomRetrieval()

    def _memory_policies(self):
        """The (update, retrieval) policies of the buffer, rebuilt before each task."""
        update = self._update_policy()
        if self.memory_subjects is not None:
            update = SubjectSubset(self._group_codes(self.memory_subjects_).tolist(), update)
        if self.memory_gate == "confidence":
            update = ConfidenceGate(self._true_class_proba, self.confidence_threshold, update)
        return update, self._retrieval_policy()

    def _memory_fields(self, X: torch.Tensor, y: torch.Tensor, groups, index=None) -> dict:
        """What one memory slot stores for samples ``X`` (encoded labels ``y``).

        ``index`` gives the samples' positions in the task's training data.
        """
        fields = {"X": X, "y": y}
        if self._uses_groups():
            fields["group"] = self._group_codes(groups).to(y.device)
        return fields

    def _replay_loss(self, logits: torch.Tensor, memory: dict) -> torch.Tensor:
        """The loss on a retrieved memory batch, given its logits."""
        return self._criterion(logits, memory["y"])

    # -- lifecycle hooks ----------------------------------------------------------
    def _before_task(self, X, y, groups):
        if not hasattr(self, "memory_"):
            self._group_index_state = {}
            if self.memory_subjects is not None:
                self.memory_subjects_ = self._draw_subjects(groups)
            self.memory_ = MemoryBuffer(0)
        self.memory_.update_policy, self.memory_.retrieval_policy = self._memory_policies()
        self.memory_.store_policy = self._store_policy(X)
        self.memory_.input_dtype = _precision.storage_dtype(self.precision, self.device)
        self.memory_.capacity = memory_capacity(
            self.memory_size, self.n_train_seen_, self._slot_nbytes(X)
        )
        self.teacher_ = self._frozen_copy() if self.kd and self.n_tasks_seen_ else None

    def _store_policy(self, X):
        """How the buffer keeps a sample: IDD with ``memory_frames``, else whole."""
        if self.memory_frames is None:
            return None
        from ..video import IDDStore

        return IDDStore(self.memory_frames, self.memory_motion, length=X.shape[2])

    def _slot_nbytes(self, X) -> int:
        """Bytes of one memory slot, for a budget in bytes: measured on the memory
        (everything it keeps, over its samples) or, while it is empty, one input in
        float32 (``memory_frames`` of its frames and their positions with IDD) and
        its label."""
        if len(self.memory_):
            return -(-self.memory_nbytes_ // len(self.memory_))
        if self.memory_frames is None:
            return 4 * int(np.prod(X.shape[1:])) + 8
        return self._store_policy(X).sample_nbytes(X.shape[1:]) + 8

    def _draw_subjects(self, groups) -> np.ndarray:
        if not isinstance(self.memory_subjects, numbers.Integral):
            return np.asarray(self.memory_subjects)
        subjects = np.asarray(list(dict.fromkeys(groups.tolist())), dtype=groups.dtype)
        if self.memory_subjects > len(subjects):
            raise ValueError(
                f"memory_subjects={self.memory_subjects} but the first task has only "
                f"{len(subjects)} subjects"
            )
        seed = int(torch.randint(2**31 - 1, (1,), generator=self._generator))
        pick = np.random.RandomState(seed).choice(len(subjects), self.memory_subjects, False)
        return subjects[np.sort(pick)]

    def _group_codes(self, groups) -> torch.Tensor:
        """Subject ids as integer codes, in order of first appearance."""
        codes = self._group_index_state
        ids = np.asarray(groups).tolist()
        return torch.as_tensor([codes.setdefault(g, len(codes)) for g in ids], dtype=torch.long)

    def _task_data(self, train, valid):
        self._train_groups = train[2]
        return super()._task_data(train, valid)

    def _training_loss(self, X, y):
        memory = self.memory_.sample(
            self.replay_batch_size, self._generator, X=X, y=y, epoch=self._epoch
        )
        if self.kd is not None:
            return self._kd_training_loss(X, y, memory)
        if memory is None:
            return super()._training_loss(X, y)
        logits_memory, logits = self._forward(memory["X"], X)
        return self._criterion(logits, y) + self._replay_loss(logits_memory, memory)

    def _kd_training_loss(self, X, y, memory):
        """The training loss plus ``kd_weight`` times the distillation term."""
        batches = (X,) if memory is None else (memory["X"], X)
        if self._batch_coupled():  # as _forward: BatchNorm keeps per-batch statistics
            features = [self.module_.features(x) for x in batches]
            logits = [self.module_.head(h) for h in features]
        else:
            sizes = [len(x) for x in batches]
            features = self.module_.features(torch.cat(batches))
            logits = list(self.module_.head(features).split(sizes))
            features = list(features.split(sizes))
        loss = self._criterion(logits[-1], y)
        if memory is not None:
            loss = loss + self._replay_loss(logits[0], memory)
        if self.teacher_ is None:
            return loss
        with torch.no_grad():
            old_features = self.teacher_.features(torch.cat(batches))
            old_logits = self.teacher_.head(old_features)
        kd = replay_distillation_loss(
            self.kd, torch.cat(features), torch.cat(logits), old_features, old_logits,
            self.kd_temperature,
        )
        return loss + self.kd_weight * kd

    def _per_batch(self) -> bool:
        return self.online or self.memory_update == "per_batch"

    def _after_batch(self, X, y, epoch):
        if self._per_batch() and epoch == 0:
            index = self._batch_index.cpu().numpy()
            groups = None if self._train_groups is None else self._train_groups[index]
            self._remember(X, y, groups, index)

    def _after_task(self, X, y, groups):
        if not self._per_batch():
            order = torch.randperm(len(y), generator=self._generator).numpy()
            self._remember(
                self._tensor(X[order]),
                self._tensor(y[order], torch.long),
                None if groups is None else groups[order],
                order,
            )

    def _remember(self, X: torch.Tensor, y: torch.Tensor, groups, index) -> None:
        self.memory_.add(self._generator, **self._memory_fields(X, y, groups, index))

    def _memory_samples(self):
        return self.memory_["X"], self.memory_["y"]

    def _memory_tensors(self) -> list:
        """Every tensor the method keeps between tasks for replay (``memory_nbytes_``)."""
        return list(self.memory_.fields.values())

    @property
    def memory_nbytes_(self) -> int:
        """Bytes of every stored tensor: inputs, labels, logits and anything else the
        method keeps (Villa et al. 2022 report buffers in elements and bytes)."""
        if not hasattr(self, "memory_"):
            raise AttributeError(f"{type(self).__name__} has no memory before it is fitted")
        return int(sum(t.nbytes for t in self._memory_tensors()))

    def _true_class_proba(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The current network's probability (eval mode) for each sample's class ``y``."""
        logits = self._eval_forward(X)
        if self.classifier == "bce":
            p = torch.sigmoid(logits)
            p = p / p.sum(1, keepdim=True)
        else:
            p = torch.softmax(logits, 1)
        return p.gather(1, y.to(p.device)[:, None]).squeeze(1)

    def _embed(self, X: torch.Tensor) -> torch.Tensor:
        """The current network's embeddings in eval mode (for memory policies)."""
        return self._eval_forward(X, self.module_.features)


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

    def _memory_fields(self, X, y, groups, index=None):
        fields = super()._memory_fields(X, y, groups, index)
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
