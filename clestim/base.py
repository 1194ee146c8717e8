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
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, check_random_state
from torch import nn
from torch.nn import functional as F

from ._training import LR_SCHEDULES, TaskNet, TensorDataset, task_callbacks
from .nets import BACKBONES, ContinualNetwork, InputNorm, SplitCosineLinear
from .nets.norms import INPUT_NORMS, NORMS

#: Parameters that define the network; changing one requires a fresh ``fit``.
ARCHITECTURE_PARAMS = (
    "backbone", "backbone_params", "norm", "input_norm", "dropout", "classifier"
)
CLASSIFIERS = ("softmax", "bce", "cosine", "ncm")
_OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
_EVAL_BATCH = 512


class ContinualClassifier(ClassifierMixin, BaseEstimator):
    """Base class of clestim's continual-learning classifiers.

    A scikit-learn classifier that learns one task at a time with
    :meth:`partial_fit_task` and a whole task stream with :meth:`fit`. The network
    is trained through skorch; its head grows when new classes arrive.

    Parameters
    ----------
    backbone : {'cnn', 'transformer', 'mlp'} or torch.nn.Module, default='cnn'
        Feature extractor. A module must map the (normalised) input to
        ``(n_samples, n_features)``; ``out_features`` is inferred when missing.
    backbone_params : dict, optional
        Extra keyword arguments of a named backbone (for example ``{'d_model': 64}``).
    norm : {'layer', 'batch'} or None, default='layer'
        Normalisation inside a named backbone.
    input_norm : {'layer', 'instance'} or None, default='layer'
        Non-trainable per-sample input normalisation (TSCIL's LN/IN input layer).
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
    lr_schedule : {None, 'step10', 'step15', 'onecycle'}, default=None
    optimizer : {'adam', 'adamw', 'sgd'} or torch optimizer class, default='adam'
    weight_decay : float, default=0.0
    grad_clip : float or None, default=1.0
        Maximum gradient norm.
    stream : splitter, optional
        The task stream :meth:`fit` runs; defaults to
        ``ClassIncremental(classes_per_task=2, shuffle=False)``.
    snapshot_dir : str or Path, optional
        Where the weights after each task are saved; by default they are kept in
        memory. Snapshots let :meth:`predict` answer ``after_task=i``.
    device : str, default='cpu'
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        A progress bar per task when > 0.

    Attributes
    ----------
    classes_ : ndarray
        Labels in order of first appearance.
    task_classes_ : list of ndarray
        The labels of each task learned.
    n_tasks_seen_ : int
    module_ : ContinualNetwork
    history_ : list of list of dict
        Per task, the per-epoch losses.
    """

    def __init__(
        self,
        *,
        backbone="cnn",
        backbone_params=None,
        norm="layer",
        input_norm="layer",
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
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ params
    @classmethod
    def _get_param_names(cls):
        """Keyword parameters of every ``__init__`` in the class hierarchy.

        A method's ``__init__`` declares only its own parameters (and changed
        defaults) and passes the rest on with ``**params``.
        """
        names = set()
        for klass in cls.__mro__:
            if not (isinstance(klass, type) and issubclass(klass, ContinualClassifier)):
                continue
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            for p in inspect.signature(init).parameters.values():
                if p.name != "self" and p.kind is p.KEYWORD_ONLY:
                    names.add(p.name)
        return sorted(names)

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
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.input_norm not in INPUT_NORMS:
            raise ValueError(f"input_norm must be one of {INPUT_NORMS}, got {self.input_norm!r}")
        if not (isinstance(self.backbone, nn.Module) or self.backbone in BACKBONES):
            raise ValueError(
                f"backbone must be one of {sorted(BACKBONES)} or a torch.nn.Module, "
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
    def _validate_X(self, X, check_shape: bool = True) -> np.ndarray:
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu().numpy()
        try:
            X = np.asarray(X, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"X must be a numeric array, could not convert it: {exc}") from exc
        if X.ndim < 2:
            raise ValueError(
                f"X must be 2-D (n_samples, n_features) or 3-D (n_samples, n_channels, "
                f"n_timepoints), got shape {X.shape}"
            )
        if self.backbone in ("cnn", "transformer") and X.ndim != 3:
            raise ValueError(
                f"backbone={self.backbone!r} needs 3-D input (n_samples, n_channels, "
                f"n_timepoints), got shape {X.shape}"
            )
        if len(X) == 0:
            raise ValueError("X is empty: a task needs at least one sample")
        if not np.isfinite(X).all():
            raise ValueError("X contains NaN or infinite values")
        expected = getattr(self, "input_shape_", None) if check_shape else None
        if expected is not None and X.shape[1:] != expected:
            raise ValueError(
                f"X has per-sample shape {X.shape[1:]} but the estimator was fitted on "
                f"{expected} (n_channels, n_timepoints must stay the same across tasks)"
            )
        return X

    @staticmethod
    def _validate_y(y, n_samples: int) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        if len(y) != n_samples:
            raise ValueError(f"y has {len(y)} labels but X has {n_samples} samples")
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            raise ValueError("y contains NaN or infinite labels")
        if y.dtype.kind == "O" and any(
            v is None or (isinstance(v, float) and v != v) for v in y
        ):
            raise ValueError("y contains missing labels (None or NaN)")
        return y

    # ------------------------------------------------------------- lifecycle
    def fit(self, X, y, groups=None):
        """Learn a whole task stream from scratch.

        The ``stream`` splitter cuts ``(X, y)`` into tasks, learned in order with
        :meth:`partial_fit_task`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_channels, n_timepoints) or (n_samples, n_features)
        y : array-like of shape (n_samples,)
        groups : array-like of shape (n_samples,), optional
            Subject or domain ids, passed to the stream and to the method.

        Returns
        -------
        self
        """
        X = self._validate_X(X, check_shape=False)
        y = self._validate_y(y, len(X))
        groups = None if groups is None else np.asarray(groups)
        from .streams import default_stream

        stream = default_stream() if self.stream is None else self.stream
        self._reset()
        for t, idx in enumerate(stream.split(X, y, groups)):
            y_task = stream.relabel(y[idx], t) if hasattr(stream, "relabel") else y[idx]
            self.partial_fit_task(X[idx], y_task, None if groups is None else groups[idx])
        return self

    def _reset(self) -> None:
        """Forget everything learned: every attribute that is not a parameter."""
        params = set(self._get_param_names())
        for name in [k for k in vars(self) if k not in params]:
            delattr(self, name)

    def partial_fit_task(self, X, y, groups=None):
        """Learn one task.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_channels, n_timepoints) or (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels of any hashable type. Classes may be new or seen before.
        groups : array-like of shape (n_samples,), optional
            Subject or domain ids (used by subject-aware methods).

        Returns
        -------
        self
        """
        self._check_params()
        X = self._validate_X(X)
        y = self._validate_y(y, len(X))
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != (len(X),):
                raise ValueError(f"groups must have shape ({len(X)},), got {groups.shape}")
        first = not hasattr(self, "module_")
        if not first:
            self._check_architecture_unchanged()
        new_classes = self._new_classes(y)
        # -- validation done: from here on the estimator changes ----------------
        if first:
            self._initialize(X)
        t = self.n_tasks_seen_
        seed = int(self._rng_state.randint(2**31 - 1))
        torch.manual_seed(seed)
        self._generator = torch.Generator().manual_seed(seed)
        self._add_classes(new_classes)
        y_enc = self._encode(y)
        self.n_train_seen_ += len(y)
        start = time.perf_counter()

        self._before_task(X, y_enc, groups)
        self.module_.head.grow(len(self.classes_) - self.module_.n_classes)
        train_idx, valid_idx = self._validation_split(y_enc)
        train = _subset(train_idx, X, y_enc, groups)
        train_fit, valid_fit = self._task_data(train, _subset(valid_idx, X, y_enc, groups))
        history = self._train(train_fit, valid_fit, f"{type(self).__name__} task {t + 1}")
        self._after_task(*train)
        if self.classifier == "ncm":
            self.class_means_.append(self._class_means())

        self.task_classes_.append(self.classes_[_in_order(y_enc)])
        self.history_.append(history)
        self.task_fit_time_.append(time.perf_counter() - start)
        self._save_snapshot()
        self.n_tasks_seen_ += 1
        return self

    def _check_architecture_unchanged(self):
        for name in ARCHITECTURE_PARAMS:
            if not _same(getattr(self, name), self._architecture_state[name]):
                raise ValueError(
                    f"{name} changed after the estimator started learning; the learned "
                    "weights do not fit the new network. Call fit() to start over, or "
                    "clone() the estimator."
                )

    def _new_classes(self, y) -> list:
        known = getattr(self, "_class_index_state", {})
        return [c for c in _in_order(y) if c not in known]

    def _initialize(self, X: np.ndarray) -> None:
        self._rng_state = check_random_state(self.random_state)
        if isinstance(self.random_state, np.random.RandomState):
            self._rng_state = copy.deepcopy(self.random_state)
        torch.manual_seed(int(self._rng_state.randint(2**31 - 1)))
        self._architecture_state = {n: copy.deepcopy(getattr(self, n)) for n in ARCHITECTURE_PARAMS}
        self.input_shape_ = X.shape[1:]
        self.module_ = self._build_module(X.shape[1:]).to(self.device)
        self.classes_ = np.empty(0)
        self._class_index_state = {}
        self.task_classes_ = []
        self.history_ = []
        self.task_fit_time_ = []
        self.snapshots_ = []
        self.class_means_ = []
        self.n_tasks_seen_ = 0
        self.n_train_seen_ = 0

    def _build_module(self, input_shape) -> ContinualNetwork:
        n_channels = input_shape[0]
        params = dict(self.backbone_params or {})
        if isinstance(self.backbone, nn.Module):
            backbone = copy.deepcopy(self.backbone)
        elif self.backbone == "mlp":
            backbone = BACKBONES["mlp"](
                int(np.prod(input_shape)), norm=self.norm, dropout=self.dropout, **params
            )
        else:
            backbone = BACKBONES[self.backbone](
                n_channels, norm=self.norm, dropout=self.dropout, **params
            )
        if not hasattr(backbone, "out_features"):
            with torch.no_grad():
                backbone.eval()
                backbone.out_features = int(backbone(torch.zeros(2, *input_shape)).shape[-1])
        head = SplitCosineLinear(backbone.out_features) if self.classifier == "cosine" else None
        return ContinualNetwork(backbone, InputNorm(self.input_norm, n_channels), head)

    def _add_classes(self, new_classes: list) -> None:
        if not new_classes:
            return
        labels = list(self.classes_) + list(new_classes)
        typed = np.asarray(labels)
        if typed.dtype.kind == "O" or any(a != b for a, b in zip(typed.tolist(), labels)):
            typed = np.empty(len(labels), dtype=object)
            typed[:] = labels
        self.classes_ = typed
        self._class_index_state = {c: i for i, c in enumerate(labels)}

    def _encode(self, y) -> np.ndarray:
        return np.fromiter((self._class_index_state[c] for c in y), dtype=np.int64, count=len(y))

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
        """Mean embedding of each class's memory samples, shape (n_classes_, D);
        ``NaN`` rows for classes without a sample in memory."""
        X, y = self._memory_samples()
        means = torch.full((len(self.classes_), self.module_.backbone.out_features), torch.nan)
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
        out = torch.cat([fn(X[i : i + _EVAL_BATCH]) for i in range(0, len(X), _EVAL_BATCH)])
        self.module_.train(was_training)
        return out

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
        folder = Path(self.snapshot_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"task_{self.n_tasks_seen_:03d}.pt"
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
        X = self._validate_X(X)
        return X

    @torch.no_grad()
    def _apply(self, module_fn, X: np.ndarray) -> np.ndarray:
        out = []
        for start in range(0, len(X), _EVAL_BATCH):
            out.append(module_fn(self._tensor(X[start : start + _EVAL_BATCH])).cpu())
        return torch.cat(out).numpy()

    def decision_function(self, X, task=None, after_task=None) -> np.ndarray:
        """Class scores (logits), shape (n_samples, n_classes_).

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
        X = self._check_X_predict(X)
        module = self._module_after(after_task)
        module.eval()
        if self.classifier == "ncm":
            logits = self._ncm_scores(module, X, after_task)
        else:
            logits = self._apply(module, X)
        scores = np.full((len(X), len(self.classes_)), -np.inf, dtype=np.float32)
        scores[:, : logits.shape[1]] = logits
        if task is not None:
            if not -self.n_tasks_seen_ <= task < self.n_tasks_seen_:
                raise ValueError(f"task must be in [0, {self.n_tasks_seen_ - 1}], got {task}")
            allowed = self._encode(self.task_classes_[task])
            mask = np.ones(len(self.classes_), dtype=bool)
            mask[allowed] = False
            scores[:, mask] = -np.inf
        return scores

    def _ncm_scores(self, module, X, after_task) -> np.ndarray:
        """``-||h/|h| - mu_c/|mu_c|||`` for each class mean ``mu_c`` (``-inf`` without one)."""
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
        scores = torch.from_numpy(self.decision_function(X, task=task, after_task=after_task))
        if self.classifier == "bce":
            p = torch.sigmoid(scores)
            return (p / p.sum(1, keepdim=True)).numpy()
        return torch.softmax(scores, dim=1).numpy()

    def predict(self, X, task=None, after_task=None) -> np.ndarray:
        """Predicted labels (original label values); see :meth:`decision_function`."""
        scores = self.decision_function(X, task=task, after_task=after_task)
        return self.classes_[scores.argmax(axis=1)]

    def transform(self, X) -> np.ndarray:
        """The backbone's embeddings, shape (n_samples, n_features)."""
        X = self._check_X_predict(X)
        self.module_.eval()
        return self._apply(self.module_.features, X)


def _subset(idx, X, y, groups) -> tuple:
    return X[idx], y[idx], None if groups is None else groups[idx]


def _in_order(y) -> list:
    """Unique values of ``y`` in order of first appearance."""
    seen = {}
    for v in y.tolist() if isinstance(y, np.ndarray) else y:
        seen.setdefault(v, None)
    return list(seen)


def _same(a, b) -> bool:
    if isinstance(a, nn.Module) or isinstance(b, nn.Module):
        if type(a) is not type(b):
            return False
        sa, sb = a.state_dict(), b.state_dict()
        return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    return a == b
