"""``ContinualClassifier``: the task lifecycle every clestim method shares.

``partial_fit_task(X, y)`` learns one task::

    validate input  ->  encode labels  ->  _before_task   (snapshot a teacher, size memory)
                    ->  grow the head  ->  train          (skorch epochs, early stopping)
                    ->  _after_task    (update memory, importances)  ->  snapshot weights

A method subclasses :class:`ContinualClassifier` and overrides only the hooks that
make it different:

``_before_task(X, y, groups)``
    Before the head grows; ``y`` is encoded.
``_task_data(train, valid)``
    What the task trains and validates on, each a ``(X, y, groups)`` triple
    (``Offline`` returns everything seen so far).
``_training_loss(X, y)``
    The loss of one training batch (default: cross-entropy).
``_after_batch(X, y, epoch)``
    After every optimizer step (per-batch memory updates).
``_after_task(X, y, groups)``
    After training, with the best weights restored, on the task's training split.

During a training step ``self._epoch`` (from 0 within the task) and
``self._batch_index`` (positions of the batch in the task's training data) are set.

The ``classifier`` parameter chooses how logits become predictions and losses for
every method: softmax with cross-entropy, sigmoid with binary cross-entropy, the
split cosine head of LUCIR, or the nearest class mean over the method's memory
(``_memory_samples``; only methods that keep samples have one).

Optimizer state does **not** carry across tasks: the optimizer (Adam by default),
the learning-rate schedule and early stopping are rebuilt for every task, as in
the TSCIL protocol. The network weights carry over.
"""

from __future__ import annotations

import copy
import inspect
import numbers
import sys
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import TransformerTags
from sklearn.utils.validation import check_is_fitted, check_random_state
from torch import nn
from torch.nn import functional as F

from . import _precision
from ._training import LR_SCHEDULES, TaskNet, TensorDataset, task_callbacks
from ._validation import LabelSpace, check_X, check_y, in_order, input_attributes
from .nets import BACKBONES, ContinualNetwork, InputNorm, SplitCosineLinear
from .nets.norms import INPUT_NORMS, NORMS

#: Parameters that define the network; changing one requires a fresh ``fit``.
ARCHITECTURE_PARAMS = (
    "backbone", "backbone_params", "norm", "input_norm", "dropout", "classifier"
)
CLASSIFIERS = ("softmax", "bce", "cosine", "ncm")
_OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
_EVAL_BATCH = 512
#: Evaluation chunks of fewer rows are padded to this many (see :func:`_rows_invariant`).
_MIN_EVAL_ROWS = 16
#: What ``backbone='auto'`` builds for 2-D, 3-D and 5-D (clip) input.
_AUTO_BACKBONES = {2: "mlp", 3: "cnn", 5: "r2plus1d_small"}
#: Named backbones and the input dimensions they take.
_BACKBONE_NDIM = {"cnn": 3, "transformer": 3, "r2plus1d": 5, "r2plus1d_small": 5}
#: ``input_norm``: 'auto' chooses by the data (see ``ContinualClassifier``).
INPUT_NORM_CHOICES = ("auto", *INPUT_NORMS)


class ContinualClassifier(ClassifierMixin, BaseEstimator):
    """Base class of clestim's continual-learning classifiers.

    A scikit-learn classifier that learns one task at a time with
    :meth:`partial_fit_task` and a whole task stream with :meth:`fit`. The network
    is trained through skorch; its head grows when new classes arrive.

    Parameters
    ----------
    backbone : str or torch.nn.Module, default='auto'
        One of 'auto', 'cnn', 'transformer', 'mlp', 'r2plus1d', 'r2plus1d_small'. The
        feature extractor. ``'auto'`` builds the 1D-CNN of TSCIL for 3-D input
        (n_samples, n_channels, n_timepoints), the MLP for 2-D (tabular) input
        (n_samples, n_features) and the small R(2+1)D for clips (n_samples, C, T, H, W)
        (:mod:`clestim.nets.video`). A module must map the (normalised) input to
        ``(n_samples, n_features)``; ``out_features`` is inferred when missing.
    backbone_params : dict, optional
        Extra keyword arguments of a named backbone (for example ``{'d_model': 64}``).
    norm : {'layer', 'batch'} or None, default='layer'
        Normalisation inside a named backbone.
    input_norm : {'auto', 'layer', 'instance'} or None, default='auto'
        Non-trainable per-sample input normalisation (TSCIL's LN/IN input layer).
        ``'layer'`` normalises the channels at each time step (TSCIL's default);
        ``'instance'`` normalises each channel over time (for one channel: the
        per-series z-normalisation of UCR practice). ``'auto'`` chooses by the
        first task's data: ``'layer'`` for series of >= 2 channels, ``'instance'``
        for a single channel, None for 2-D (tabular) input; the choice is stored in
        ``input_norm_``. ``'layer'`` on one channel raises ``ValueError`` (it would
        set every value to 0).
    dropout : float, default=0.0
        Dropout of a named backbone (TSCIL: 0 for UCI-HAR and UWave, 0.3 otherwise).
    classifier : {'softmax', 'bce', 'cosine', 'ncm'}, default='softmax'
        How the head's outputs are trained and read (TSCIL Sect. 5.1, Fig. 4):

        - ``'softmax'``: a linear head, ``CE(softmax(z), y)``.
        - ``'bce'``: a linear head trained with ``BCEWithLogits(z, onehot(y))`` over
          all seen classes (Rebuffi et al. 2017); ``predict_proba`` is
          ``sigmoid(z) / sum(sigmoid(z))``.
        - ``'cosine'``: the split cosine head of LUCIR (Hou et al. 2019),
          ``z_c = sigma * cos(h, w_c)`` with a learnable ``sigma``, trained with CE.
        - ``'ncm'``: nearest class mean (Rebuffi et al. 2017). The linear head trains
          with CE (and drives early stopping); prediction is
          ``argmin_c ||h/|h| - mu_c/|mu_c|||`` with ``mu_c`` the mean embedding of
          class ``c``'s memory samples, recomputed after each task. Only for methods
          that keep a memory (ER and its family).
    lr : float, default=1e-3
    batch_size : int, default=64
    max_epochs : int, default=100
        Epochs per task.
    patience : int or None, default=5
        Early-stopping patience on the validation loss; the best weights are
        restored at the end of the task. None disables early stopping.
    validation_fraction : float, default=0.1
        Stratified share of each task held out for early stopping. A class with a
        single sample contributes nothing to it; when no sample can be held out,
        the task trains for ``max_epochs`` without early stopping (with a warning).
    lr_schedule : str or None, default=None
        The rate within each task: None (constant), ``'step10'``/``'step15'`` (x0.1
        after 10 or 15 epochs), ``'onecycle'`` (``OneCycleLR``, per batch), or
        ``'tscil-step10'``/``'tscil-step15'``: the step schedules as TSCIL's code runs
        them, with each task's first epoch at ``lr / 25``.
    optimizer : {'adam', 'adamw', 'sgd'} or torch optimizer class, default='adam'
    weight_decay : float, default=0.0
    grad_clip : float or None, default=1.0
        Maximum gradient norm.
    stream : splitter, optional
        The task stream :meth:`fit` runs (a clone of it: the parameter is never
        changed); defaults to ``ClassIncremental(classes_per_task=2, shuffle=False,
        remainder='last')``: two classes per task in order of first appearance, an
        odd class joining the last task, and a single task for a single class.
    snapshot_dir : str or Path, optional
        Where the weights after each task are saved; by default they are kept in
        memory. Snapshots let :meth:`predict` answer ``after_task=i``. Each fit
        writes to a new subfolder ``fit-<id>`` (its path is in ``snapshots_``), so
        clones and refits sharing the folder never overwrite each other; nothing
        deletes them: remove a subfolder once its estimator is no longer needed.
    device : str, default='cpu'
    precision : {'fp32', 'bf16', 'fp16'}, default='fp32'
        Arithmetic of forward passes and losses (training, validation and
        prediction): ``'bf16'``/``'fp16'`` run them under ``torch.autocast``
        (``'fp16'`` with a gradient scaler, GPU only: an error on a CPU); parameters
        and optimizer state stay float32 and replay memories store inputs in
        bfloat16. ``'bf16'`` on a CPU without native bfloat16 kernels warns once and
        trains in float32. See :mod:`clestim._precision`.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        A progress bar per task when > 0 (one line per task where stderr is not a
        terminal), and the task's notes (``task_notes_``).

    Attributes
    ----------
    classes_ : ndarray
        The labels seen (or declared), sorted as :func:`numpy.unique` sorts them;
        the columns of :meth:`predict_proba` and :meth:`decision_function` follow it.
    task_classes_ : list of ndarray
        The labels of each task learned, in the order they appeared in the task.
    n_features_in_ : int
        ``X.shape[1]``: features of 2-D input, channels of 3-D input.
    n_timepoints_in_ : int or None
        Series length of 3-D input (None for 2-D input).
    input_shape_ : tuple
        Per-sample shape of the input (``X.shape[1:]``).
    feature_names_in_ : ndarray of str
        Column names, when the first task's ``X`` was a DataFrame.
    input_norm_ : str or None
        The input normalisation in use (``input_norm='auto'`` resolved).
    stream_ : splitter
        The clone of ``stream`` that :meth:`fit` split the data with.
    n_tasks_seen_ : int
    module_ : ContinualNetwork
    history_ : list of list of dict
        Per task, the per-epoch losses.
    task_notes_ : list of list of str
        Per task, what may be unintended though it can be legitimate: classes
        already seen (fine in domain-incremental or blurry streams), a single
        class, float labels (these also warn). Printed when ``verbose > 0``.
    """

    def __init__(
        self,
        *,
        backbone="auto",
        backbone_params=None,
        norm="layer",
        input_norm="auto",
        dropout=0.0,
        classifier="softmax",
        lr=1e-3,
        batch_size=64,
        max_epochs=100,
        patience=5,
        validation_fraction=0.1,
        lr_schedule=None,
        optimizer="adam",
        weight_decay=0.0,
        grad_clip=1.0,
        stream=None,
        snapshot_dir=None,
        device="cpu",
        precision="fp32",
        random_state=None,
        verbose=0,
    ):
        self.backbone = backbone
        self.backbone_params = backbone_params
        self.norm = norm
        self.input_norm = input_norm
        self.dropout = dropout
        self.classifier = classifier
        self.lr = lr
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.validation_fraction = validation_fraction
        self.lr_schedule = lr_schedule
        self.optimizer = optimizer
        self.weight_decay = weight_decay
        self.grad_clip = grad_clip
        self.stream = stream
        self.snapshot_dir = snapshot_dir
        self.device = device
        self.precision = precision
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    def __init_subclass__(cls, **kwargs):
        """Give a method's ``__init__`` the full signature of every parameter.

        A method's ``__init__`` declares only its own parameters (and changed
        defaults) and passes the rest on with ``**params``; its ``__signature__``
        lists them all with their defaults, so ``inspect.signature``, ``get_params``
        and the changed-only ``repr`` of scikit-learn see every parameter.
        """
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            init.__signature__ = _full_signature(init, super(cls, cls).__init__)

    @classmethod
    def _get_param_names(cls):
        """The keyword parameters of the (full) ``__init__`` signature, sorted."""
        params = inspect.signature(cls.__init__).parameters.values()
        return sorted(p.name for p in params if p.kind is p.KEYWORD_ONLY)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.transformer_tags = TransformerTags(preserves_dtype=["float32"])
        return tags

    def _check_params(self):
        def positive_int(name):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")

        positive_int("batch_size")
        positive_int("max_epochs")
        if self.patience is not None:
            positive_int("patience")
        if not 0.0 <= float(self.validation_fraction) < 1.0:
            raise ValueError(
                f"validation_fraction must be in [0, 1), got {self.validation_fraction!r}"
            )
        if not float(self.lr) > 0:
            raise ValueError(f"lr must be positive, got {self.lr!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        _precision.amp_dtype(self.precision, self.device)  # raises; warns on a bf16 fallback
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.input_norm not in INPUT_NORM_CHOICES:
            raise ValueError(
                f"input_norm must be one of {INPUT_NORM_CHOICES}, got {self.input_norm!r}"
            )
        if not (
            isinstance(self.backbone, nn.Module)
            or self.backbone == "auto"
            or self.backbone in BACKBONES
        ):
            raise ValueError(
                f"backbone must be 'auto', one of {sorted(BACKBONES)} or a torch.nn.Module, "
                f"got {self.backbone!r}"
            )
        if self.classifier not in CLASSIFIERS:
            raise ValueError(f"classifier must be one of {CLASSIFIERS}, got {self.classifier!r}")
        if self.classifier == "ncm" and not self._keeps_memory():
            raise ValueError(
                f"classifier='ncm' needs class means over memory samples, but "
                f"{type(self).__name__} keeps no memory; use a replay method (ER, DER, "
                "Herding, ASER, CLOPS) or another classifier"
            )
        if not (isinstance(self.optimizer, type) or self.optimizer in _OPTIMIZERS):
            raise ValueError(
                f"optimizer must be one of {sorted(_OPTIMIZERS)} or a torch optimizer class, "
                f"got {self.optimizer!r}"
            )

    # ------------------------------------------------------------ validation
    def _validate_X(self, X, reset: bool = False) -> np.ndarray:
        """``X`` checked by :func:`clestim._validation.check_X`; on a first task
        (``reset``) also against what the backbone accepts."""
        X = check_X(self, X, reset=reset)
        if reset:
            backbone = self._backbone_name(X.ndim)
            ndim = _BACKBONE_NDIM.get(backbone, X.ndim)
            if X.ndim != ndim:
                axes = "n_channels, n_timepoints" if ndim == 3 else "C, T, H, W"
                raise ValueError(
                    f"backbone={self.backbone!r} needs {ndim}-D input (n_samples, {axes}), "
                    f"got shape {X.shape}"
                )
        return X

    def _backbone_name(self, ndim: int) -> str | None:
        """The named backbone for ``ndim``-D input ('auto' resolved); None for a module."""
        if isinstance(self.backbone, nn.Module):
            return None
        if self.backbone != "auto":
            return self.backbone
        if ndim in _AUTO_BACKBONES:
            return _AUTO_BACKBONES[ndim]
        raise ValueError(
            f"backbone='auto' picks 'mlp' for 2-D, 'cnn' for 3-D and 'r2plus1d_small' for "
            f"5-D input; for {ndim}-D "
            "input pass a torch.nn.Module that accepts it"
        )

    def _input_norm_kind(self, X: np.ndarray) -> str | None:
        """The input normalisation for data shaped like ``X`` ('auto' resolved)."""
        kind = self.input_norm
        if kind == "auto":
            if X.ndim != 3:
                return None
            return "layer" if X.shape[1] >= 2 else "instance"
        if kind == "layer" and X.ndim == 3 and X.shape[1] == 1:
            raise ValueError(
                "input_norm='layer' normalises the channels at each time step; with a "
                "single channel that sets every value to 0. Use input_norm='instance' "
                "(per-series z-normalisation), 'auto' or None"
            )
        if kind == "instance" and X.ndim != 3:
            raise ValueError(
                "input_norm='instance' needs (n_samples, n_channels, n_timepoints) input, "
                f"got shape {X.shape}"
            )
        return kind

    @staticmethod
    def _check_groups(groups, n_samples: int):
        if groups is None:
            return None
        groups = np.asarray(groups)
        if groups.shape != (n_samples,):
            raise ValueError(f"groups must have shape ({n_samples},), got {groups.shape}")
        return groups

    def _own_rng(self):
        """A context in which torch's global RNG may be reseeded: its state (CPU, and
        the CUDA devices when fitting on one) is restored on exit, so fitting and
        predicting never change the caller's global random state."""
        cuda = torch.device(self.device).type == "cuda" and torch.cuda.is_available()
        devices = list(range(torch.cuda.device_count())) if cuda else []
        return torch.random.fork_rng(devices=devices)

    # ------------------------------------------------------------- lifecycle
    def fit(self, X, y, groups=None, classes=None):
        """Learn a whole task stream from scratch.

        A clone of the ``stream`` splitter (the parameter itself is left as it is)
        cuts ``(X, y)`` into tasks, learned in order with :meth:`partial_fit_task`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_channels, n_timepoints) or (n_samples, n_features)
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), optional
            Subject or domain ids, passed to the stream and to the method.
        classes : array-like, optional
            The whole label space, declared up front (see :meth:`partial_fit_task`).

        Returns
        -------
        self
        """
        from .streams import default_stream

        with self._own_rng():
            self._check_params()
            X_raw, X = X, self._validate_X(X, reset=True)
            y = check_y(y, len(X))
            groups = self._check_groups(groups, len(X))
            self._input_norm_kind(X)
            LabelSpace().extended(y, classes)
            stream = clone(default_stream() if self.stream is None else self.stream)
            tasks = list(stream.split(X, y, groups))
            self._reset()
            for t, idx in enumerate(tasks):
                y_task = stream.relabel(y[idx], t) if hasattr(stream, "relabel") else y[idx]
                g_task = None if groups is None else groups[idx]
                self.partial_fit_task(X[idx], y_task, g_task, classes=classes if t == 0 else None)
            self.stream_ = stream
            names = input_attributes(X_raw, X).get("feature_names_in_")
            if names is not None:
                self.feature_names_in_ = names
        return self

    def fit_transform(self, X, y, groups=None, **fit_params) -> np.ndarray:
        """:meth:`fit`, then :meth:`transform` of the same ``X``."""
        return self.fit(X, y, groups, **fit_params).transform(X)

    def _reset(self) -> None:
        """Forget everything learned: every attribute that is not a parameter."""
        params = set(self._get_param_names())
        for name in [k for k in vars(self) if k not in params]:
            delattr(self, name)

    def partial_fit_task(self, X, y, groups=None, classes=None):
        """Learn one task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_channels, n_timepoints) or (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels of any hashable type. Classes may be new or seen before.
        groups : array-like of shape (n_samples,), optional
            Subject or domain ids (used by subject-aware methods).
        classes : array-like, optional
            Declares the label space, as scikit-learn's ``partial_fit(X, y, classes)``:
            the head gets an output for each class at once (in the order given), even
            for classes this task does not hold, and a later label outside them
            raises ``ValueError``. Once declared, a later ``classes`` must name the
            same set. Without it the head grows as classes arrive.

        Returns
        -------
        self
        """
        with self._own_rng():
            self._check_params()
            first = not hasattr(self, "module_")
            X_raw, X = X, self._validate_X(X, reset=first)
            y = check_y(y, len(X))
            groups = self._check_groups(groups, len(X))
            if not first:
                self._check_architecture_unchanged()
            labels = getattr(self, "_labels", LabelSpace()).extended(y, classes)
            self._check_task(X, y, groups)
            notes = self._task_notes(y)
            fresh = self._fresh_state(X, X_raw) if first else None
            # -- validation done: from here on the estimator changes ------------
            if first:
                self.__dict__.update(fresh)
            self._set_labels(labels)
            self._learn_task(X, y, groups, notes)
        return self

    def initialize(self, X, classes):
        """Build the untrained network for inputs shaped like ``X`` and a head for
        ``classes``, without learning a task.

        The network then answers :meth:`predict` and :meth:`decision_function` over
        ``classes``: the zero-shot baseline of forward transfer. Later
        :meth:`partial_fit_task` calls continue from it (the label space is
        declared); the head's rows are drawn at another point of the random stream
        than when the first :meth:`partial_fit_task` declares ``classes``, so the
        two routes give different, equally valid, weights.

        Parameters
        ----------
        X : array-like
            Any samples shaped like the training data (only their shape is used).
        classes : array-like
            The label space (see :meth:`partial_fit_task`).

        Returns
        -------
        self
        """
        if classes is None:
            raise ValueError("initialize needs the classes the head is built for")
        with self._own_rng():
            self._check_params()
            X_raw, X = X, self._validate_X(X, reset=True)
            labels = LabelSpace().extended(np.empty(0), classes)
            fresh = self._fresh_state(X, X_raw)
            self._reset()
            self.__dict__.update(fresh)
            self._set_labels(labels)
            self.module_.head.grow(len(self._head_classes) - self.module_.n_classes)
        return self

    def _learn_task(self, X, y, groups, notes=None) -> None:
        t = self.n_tasks_seen_
        seed = int(self._rng_state.randint(2**31 - 1))
        torch.manual_seed(seed)
        self._generator = torch.Generator().manual_seed(seed)
        y_enc = self._encode(y)
        self.n_train_seen_ += len(y)
        start = time.perf_counter()

        self._before_task(X, y_enc, groups)
        self.module_.head.grow(len(self._head_classes) - self.module_.n_classes)
        train_idx, valid_idx = self._validation_split(y_enc)
        train = _subset(train_idx, X, y_enc, groups)
        train_fit, valid_fit = self._task_data(train, _subset(valid_idx, X, y_enc, groups))
        history = self._train(train_fit, valid_fit, f"{type(self).__name__} task {t + 1}")
        self._after_task(*train)
        if self.classifier == "ncm":
            self.class_means_.append(self._class_means())

        self.task_classes_.append(self._head_classes[in_order(y_enc)])
        self.history_.append(history)
        self.task_notes_.append(list(notes or []))
        self.task_fit_time_.append(time.perf_counter() - start)
        self._save_snapshot()
        self.n_tasks_seen_ += 1

    def _check_architecture_unchanged(self):
        for name in ARCHITECTURE_PARAMS:
            if not _same(getattr(self, name), self._architecture_state[name]):
                raise ValueError(
                    f"{name} changed after the estimator started learning; the learned "
                    "weights do not fit the new network. Call fit() to start over, or "
                    "clone() the estimator."
                )

    def _check_task(self, X: np.ndarray, y: np.ndarray, groups) -> None:
        """Called after input validation and before anything changes (``y`` holds the
        original labels): raise ``ValueError`` to reject the task, which leaves the
        estimator as it was."""

    def _task_notes(self, y) -> list:
        """Notes on the labels of the task about to be learned that may be unintended
        (see ``task_notes_``); prints them when ``verbose``. Changes nothing."""
        learned = getattr(self, "task_classes_", [])
        t, notes = len(learned) + 1, []
        before = set().union(*(c.tolist() for c in learned))
        seen = [c for c in in_order(y) if c in before]
        if seen:
            notes.append(f"task {t} holds {len(seen)} class(es) already seen "
                         f"({', '.join(map(str, seen[:5]))}): expected in a domain-incremental "
                         "or blurry stream, not in a class-incremental one")
        if len(np.unique(y)) == 1:
            notes.append(f"task {t} holds a single class ({y[0]})")
        if y.dtype.kind == "f":
            notes.append(f"task {t} has float labels: each distinct value is a class; "
                         "pass integer or string class ids")
            warnings.warn(notes[-1], UserWarning, stacklevel=3)
        if self.verbose:
            for note in notes:
                print(f"{type(self).__name__}: note: {note}", file=sys.stderr)
        return notes

    def _fresh_state(self, X: np.ndarray, X_raw) -> dict:
        """The attributes of an estimator that has learned nothing yet, for inputs
        shaped like ``X``; raises ``ValueError`` when the network cannot take them."""
        if isinstance(self.random_state, np.random.RandomState):
            rng = copy.deepcopy(self.random_state)
        elif self.random_state is None:
            rng = np.random.RandomState()  # fresh entropy, not numpy's global state
        else:
            rng = check_random_state(self.random_state)
        torch.manual_seed(int(rng.randint(2**31 - 1)))
        input_norm = self._input_norm_kind(X)
        module = self._build_module(X.shape[1:], input_norm, self._backbone_name(X.ndim))
        self._check_network_accepts(module, X)
        return {
            "_rng_state": rng,
            "_architecture_state": {
                n: copy.deepcopy(getattr(self, n)) for n in ARCHITECTURE_PARAMS
            },
            **input_attributes(X_raw, X),
            "input_norm_": input_norm,
            "module_": module.to(self.device),
            "task_classes_": [],
            "history_": [],
            "task_notes_": [],
            "task_fit_time_": [],
            "snapshots_": [],
            "class_means_": [],
            "n_tasks_seen_": 0,
            "n_train_seen_": 0,
        }

    @staticmethod
    @torch.no_grad()
    def _check_network_accepts(module: nn.Module, X: np.ndarray) -> None:
        """One eval-mode forward pass of two samples (no randomness drawn): a clear
        ``ValueError`` instead of a torch error deep inside training."""
        try:
            module.eval()(torch.as_tensor(X[:2]))
        except RuntimeError as exc:
            hint = ""
            if X.ndim == 3 and X.shape[1] > X.shape[2]:
                hint = (
                    f" X has {X.shape[1]} channels and {X.shape[2]} time points: if its "
                    "axes are (n_samples, n_timepoints, n_channels), pass "
                    "X.transpose(0, 2, 1) (clestim expects (n_samples, n_channels, "
                    "n_timepoints))."
                )
            raise ValueError(
                f"the network cannot process input of per-sample shape {X.shape[1:]} "
                f"(is the series too short for the backbone?).{hint} Torch said: {exc}"
            ) from exc

    def _build_module(self, input_shape, input_norm, backbone_name) -> ContinualNetwork:
        n_channels = input_shape[0]
        params = dict(self.backbone_params or {})
        if isinstance(self.backbone, nn.Module):
            backbone = copy.deepcopy(self.backbone)
        elif backbone_name == "mlp":
            backbone = BACKBONES["mlp"](
                int(np.prod(input_shape)), norm=self.norm, dropout=self.dropout, **params
            )
        else:
            backbone = BACKBONES[backbone_name](
                n_channels, norm=self.norm, dropout=self.dropout, **params
            )
        if not hasattr(backbone, "out_features"):
            with torch.no_grad():
                backbone.eval()
                backbone.out_features = int(backbone(torch.zeros(2, *input_shape)).shape[-1])
        head = SplitCosineLinear(backbone.out_features) if self.classifier == "cosine" else None
        return ContinualNetwork(backbone, InputNorm(input_norm, n_channels), head)

    def _set_labels(self, labels: LabelSpace) -> None:
        """Adopt a label space: ``classes_`` sorted, the head's row order internal."""
        self._labels = labels
        self._head_classes = labels.head
        self._class_index_state = labels.index
        self.classes_ = labels.classes

    def _encode(self, y) -> np.ndarray:
        """Head rows of the labels ``y`` (what methods and buffers store)."""
        return self._labels.encode(y)

    def _tensor(self, a, dtype=torch.float32) -> torch.Tensor:
        return torch.as_tensor(a, dtype=dtype).to(self.device)

    def _validation_split(self, y: np.ndarray):
        """Stratified indices (train, validation).

        As TSCIL's code: per class, ``int((1 - validation_fraction) * n)`` samples
        train and the rest validate; every class keeps at least one for training.
        """
        rng = np.random.RandomState(int(torch.randint(2**31 - 1, (1,), generator=self._generator)))
        train, valid = [], []
        for c in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == c))
            n_train = max(int((1.0 - self.validation_fraction) * len(idx)), 1)
            train.append(idx[:n_train])
            valid.append(idx[n_train:])
        return np.sort(np.concatenate(train)), np.sort(np.concatenate(valid))

    def _train(self, train: tuple, valid: tuple, description: str) -> list:
        """Train the module on ``(X, y, groups)`` triples through a fresh skorch ``TaskNet``."""
        has_validation = len(valid[1]) > 0
        if not has_validation and self.validation_fraction > 0 and self.patience is not None:
            warnings.warn(
                "the task is too small for a validation split (each class needs 2 samples); "
                f"training {self._epochs()} epochs without early stopping",
                stacklevel=3,
            )
        train = TensorDataset(self._tensor(train[0]), self._tensor(train[1], torch.long))
        valid = (
            TensorDataset(self._tensor(valid[0]), self._tensor(valid[1], torch.long))
            if has_validation
            else None
        )
        optimizer = _OPTIMIZERS.get(self.optimizer, self.optimizer)
        max_epochs = self._epochs()
        net = TaskNet(
            self.module_,
            learner=self,
            generator=self._generator,
            optimizer=optimizer,
            lr=self.lr,
            optimizer__weight_decay=self.weight_decay,
            batch_size=self.batch_size,
            max_epochs=max_epochs,
            train_split=(lambda ds, y=None: (ds, valid)) if has_validation else None,
            callbacks=task_callbacks(
                self,
                has_validation=has_validation,
                n_batches=-(-len(train) // self.batch_size),
                description=description,
                max_epochs=max_epochs,
            ),
            device=self.device,
            verbose=0,
        )
        net.initialize()
        net.partial_fit(train, None)
        self.module_.eval()
        keep = ("epoch", "train_loss", "valid_loss", "lr", "dur")
        return [{k: v for k, v in row.items() if k in keep} for row in net.history]

    # ------------------------------------------------------------------ hooks
    def _before_task(self, X: np.ndarray, y: np.ndarray, groups) -> None:
        """Called before the head grows for a new task (``y`` is encoded)."""

    def _task_data(self, train: tuple, valid: tuple):
        """The ``(X, y, groups)`` this task trains and validates on (default: the task's)."""
        return train, valid

    def _criterion(self, logits: torch.Tensor, y: torch.Tensor, reduction="mean") -> torch.Tensor:
        """The classifier's loss over all seen classes: cross-entropy, or binary
        cross-entropy on one-hot targets for ``classifier='bce'`` (averaged over
        classes; with ``reduction='none'``, one value per sample)."""
        if self.classifier == "bce":
            target = F.one_hot(y, logits.shape[1]).to(logits.dtype)
            loss = F.binary_cross_entropy_with_logits(logits, target, reduction="none").mean(1)
            return loss.mean() if reduction == "mean" else loss
        return F.cross_entropy(logits, y, reduction=reduction)

    def _epochs(self) -> int:
        """Epochs per task (``max_epochs``; online methods train one)."""
        return self.max_epochs

    def _memory_samples(self):
        """``(X, y)`` tensors of the samples a method keeps (for NCM); None: it keeps none."""
        return None

    def _keeps_memory(self) -> bool:
        return type(self)._memory_samples is not ContinualClassifier._memory_samples

    def _class_means(self) -> torch.Tensor:
        """Mean embedding of each class's memory samples, one row per head row;
        ``NaN`` rows for classes without a sample in memory."""
        X, y = self._memory_samples()
        means = torch.full((len(self._head_classes), self.module_.backbone.out_features), torch.nan)
        if len(y):
            features = self._eval_forward(X, self.module_.features).cpu()
            y = y.cpu()
            for c in torch.unique(y):
                means[c] = features[y == c].mean(0)
        return means

    def _training_loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The loss of one training batch."""
        return self._criterion(self.module_(X), y)

    def _after_batch(self, X: torch.Tensor, y: torch.Tensor, epoch: int) -> None:
        """Called after every optimizer step (``epoch`` counts from 0 within the task)."""

    def _after_task(self, X: np.ndarray, y: np.ndarray, groups) -> None:
        """Called after a task's training, with the best weights restored."""

    # ---------------------------------------------------------- for methods
    def _forward(self, *batches: torch.Tensor) -> list[torch.Tensor]:
        """Logits of several batches in training mode.

        Without batch-coupled layers (BatchNorm) one concatenated forward pass gives
        the same gradients as separate passes and is faster; with BatchNorm each
        batch gets its own pass, so each keeps its own batch statistics.
        """
        if self._batch_coupled():
            return [self.module_(x) for x in batches]
        return list(self.module_(torch.cat(batches)).split([len(x) for x in batches]))

    def _batch_coupled(self) -> bool:
        return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in self.module_.modules())

    @torch.no_grad()
    def _eval_forward(self, X: torch.Tensor, fn=None) -> torch.Tensor:
        """``fn(X)`` (default: the logits) in eval mode, in batches, without gradients."""
        fn = self.module_ if fn is None else fn
        was_training = self.module_.training
        self.module_.eval()
        X = X.float()  # inputs a memory stored in bfloat16
        with self._autocast():
            out = [_rows_invariant(fn, X[i : i + _EVAL_BATCH]).float()
                   for i in range(0, len(X), _EVAL_BATCH)]
        self.module_.train(was_training)
        return torch.cat(out)

    def _autocast(self):
        """The context of forward passes and losses for ``precision`` (training,
        validation, evaluation); see :mod:`clestim._precision`."""
        return _precision.autocast(self.precision, self.device)

    def _frozen_copy(self) -> ContinualNetwork:
        """A copy of the current network in eval mode with gradients off (a teacher)."""
        teacher = copy.deepcopy(self.module_).eval()
        teacher.requires_grad_(False)
        return teacher

    # -------------------------------------------------------------- snapshots
    def _save_snapshot(self) -> None:
        state = {k: v.detach().to("cpu", copy=True) for k, v in self.module_.state_dict().items()}
        if self.snapshot_dir is None:
            self.snapshots_.append(state)
            return
        name = f"task_{self.n_tasks_seen_:03d}.pt"
        last = self.snapshots_[-1] if self.snapshots_ else None
        path = Path(last).parent / name if isinstance(last, str) else None  # this fit's folder
        if path is None or path.exists():  # a folder per fit: clones never share files
            path = Path(self.snapshot_dir) / f"fit-{uuid.uuid4().hex[:12]}" / name
            path.parent.mkdir(parents=True)
        torch.save(state, path)
        self.snapshots_.append(str(path))

    def _module_after(self, task: int | None) -> ContinualNetwork:
        """The network as it was after task ``task`` (0-based; None: now)."""
        last = self.n_tasks_seen_ - 1
        if task is None or task == last or task == -1:
            return self.module_
        if not -self.n_tasks_seen_ <= task <= last:
            raise ValueError(f"after_task must be in [0, {last}], got {task}")
        task %= self.n_tasks_seen_
        cached = getattr(self, "_snapshot_cache", None)
        if cached is not None and cached[0] == task:
            return cached[1]
        state = self.snapshots_[task]
        if not isinstance(state, dict):
            state = torch.load(state, map_location="cpu", weights_only=True)
        module = copy.deepcopy(self.module_)
        module.load_state_dict(state)
        module.to(self.device).eval()
        self._snapshot_cache = (task, module)
        return module

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_snapshot_cache", None)
        state.pop("_generator", None)
        return state

    # -------------------------------------------------------------- inference
    def _check_X_predict(self, X) -> np.ndarray:
        check_is_fitted(self, "module_")
        return self._validate_X(X)

    @torch.no_grad()
    def _apply(self, module_fn, X: np.ndarray) -> np.ndarray:
        out = []
        with self._autocast():
            for start in range(0, len(X), _EVAL_BATCH):
                chunk = self._tensor(X[start : start + _EVAL_BATCH])
                out.append(_rows_invariant(module_fn, chunk).float().cpu())
        return torch.cat(out).numpy()

    def _head_scores(self, X, task=None, after_task=None) -> np.ndarray:
        """Scores of every class in head-row order (``_head_classes``); computing in
        this order and reordering last keeps every number as the head gives it."""
        X = self._check_X_predict(X)
        module = self._module_after(after_task)
        if task is not None and not -self.n_tasks_seen_ <= task < self.n_tasks_seen_:
            raise ValueError(f"task must be in [0, {self.n_tasks_seen_ - 1}], got {task}")
        with self._own_rng():
            module.eval()
            if self.classifier == "ncm":
                logits = self._ncm_scores(module, X, after_task)
            else:
                logits = self._apply(module, X)
        # Head rows are in order of arrival; a snapshot's head may have fewer rows.
        scores = np.full((len(X), len(self._head_classes)), -np.inf, dtype=np.float32)
        scores[:, : logits.shape[1]] = logits
        if task is not None:
            mask = np.ones(len(self._head_classes), dtype=bool)
            mask[self._encode(self.task_classes_[task])] = False
            scores[:, mask] = -np.inf
        return scores

    def decision_function(self, X, task=None, after_task=None) -> np.ndarray:
        """Class scores (logits), columns as ``classes_``.

        Shape (n_samples, n_classes_); with two classes, as in scikit-learn, shape
        (n_samples,): the score of ``classes_[1]`` minus that of ``classes_[0]``
        (positive means ``classes_[1]`` is predicted).

        Parameters
        ----------
        X : array-like
        task : int, optional
            Restrict the scores to the classes of this task (0-based): the others
            get ``-inf`` (task-incremental prediction).
        after_task : int, optional
            Use the weights saved after this task (0-based); classes learned later
            score ``-inf``.
        """
        scores = self._head_scores(X, task=task, after_task=after_task)[:, self._labels.rows]
        if scores.shape[1] == 2:  # log(p1 / p0): ranks samples as predict_proba[:, 1]
            if self.classifier == "bce":
                scores = F.logsigmoid(torch.from_numpy(scores)).numpy()
            return scores[:, 1] - scores[:, 0]
        return scores

    def _ncm_scores(self, module, X, after_task) -> np.ndarray:
        """``-||h/|h| - mu_c/|mu_c|||`` for each class mean ``mu_c`` (``-inf`` without one)."""
        if not self.class_means_:
            raise ValueError("classifier='ncm' needs class means, which exist after a task")
        task = self.n_tasks_seen_ - 1 if after_task is None else after_task % self.n_tasks_seen_
        means = F.normalize(self.class_means_[task], dim=1)
        features = F.normalize(torch.from_numpy(self._apply(module.features, X)), dim=1)
        scores = -torch.cdist(features, means.to(features.dtype))
        return torch.nan_to_num(scores, nan=-np.inf).numpy()

    def predict_proba(self, X, task=None, after_task=None) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes_), columns as ``classes_``.

        The softmax of the scores; for ``classifier='bce'`` the sigmoids normalised
        to sum 1. ``task`` and ``after_task`` are as in :meth:`decision_function`;
        classes they exclude get probability 0.
        """
        scores = torch.from_numpy(self._head_scores(X, task=task, after_task=after_task))
        if self.classifier == "bce":  # in float64: the same for any sample order
            p = torch.sigmoid(scores.double())
            p = (p / p.sum(1, keepdim=True)).float()
        else:
            p = torch.softmax(scores, dim=1)
        return p.numpy()[:, self._labels.rows]

    def predict(self, X, task=None, after_task=None) -> np.ndarray:
        """Predicted labels (original label values); see :meth:`decision_function`."""
        scores = self._head_scores(X, task=task, after_task=after_task)
        return self._head_classes[scores.argmax(axis=1)]

    def transform(self, X, after_task=None) -> np.ndarray:
        """The backbone's embeddings, shape (n_samples, n_features).

        ``after_task`` (0-based) uses the weights saved after that task, as in
        :meth:`decision_function`.
        """
        X = self._check_X_predict(X)
        with self._own_rng():
            module = self._module_after(after_task)
            module.eval()
            return self._apply(module.features, X)


def _rows_invariant(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn(x)`` for an eval-mode network, computed so that each row's output does not
    depend on how many rows come with it: CPU kernels for one or two rows (matrix-vector
    paths) round differently from the batched ones, so a chunk of fewer than
    :data:`_MIN_EVAL_ROWS` rows is padded with copies of its own rows first."""
    n = len(x)
    if 0 < n < _MIN_EVAL_ROWS:
        return fn(x[torch.arange(_MIN_EVAL_ROWS, device=x.device) % n])[:n]
    return fn(x)


def _subset(idx, X, y, groups) -> tuple:
    return X[idx], y[idx], None if groups is None else groups[idx]


def _full_signature(init, parent_init) -> inspect.Signature:
    """``init``'s signature with ``**params`` replaced by the keyword parameters of
    ``parent_init`` that ``init`` does not declare itself."""
    own = inspect.signature(init)
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    names = {p.name for p in params}
    if len(params) < len(own.parameters):
        params += [
            p
            for p in inspect.signature(parent_init).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name not in names
        ]
    return own.replace(parameters=params)


def _same(a, b) -> bool:
    if isinstance(a, nn.Module) or isinstance(b, nn.Module):
        if type(a) is not type(b):
            return False
        sa, sb = a.state_dict(), b.state_dict()
        return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    return a == b
