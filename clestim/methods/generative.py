"""Generative replay: a generator replaces the memory buffer."""

from __future__ import annotations

import copy
import math
import numbers
import time
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..base import ContinualClassifier
from ..nets.generators import TimeVAE


class GR(ContinualClassifier):
    """Generative Replay (Shin et al., NeurIPS 2017), as in TSCIL (Qiao et al. 2024).

    A generator learns the input distribution of the tasks seen so far. From the
    second task, every step draws ``replay_batch_size`` pseudo-samples ``x~`` from the
    previous task's generator ``g*`` and labels them with the previous network's
    arg-max, ``y~ = argmax f*(x~)`` (so only old classes are replayed)::

        loss = 2 * [ (1 - replay_ratio) * CE(f(x), y) + replay_ratio * CE(f(x~), y~) ]

    which with the default ``replay_ratio=0.5`` is TSCIL's ``CE(new) + CE(replay)``.
    After the learner's training (early-stopped, best weights restored), the
    generator trains on the task's training split, replaying its own previous
    version from the second task on::

        loss_g = (1 - replay_ratio) * L_g(x) + replay_ratio * L_g(g*.sample())

    for up to ``generator_epochs`` epochs with Adam (one optimizer for the whole
    stream, as TSCIL) and early stopping on the validation split's mean squared
    reconstruction error (decoded from the latent mean; TSCIL decodes a sampled
    latent, which on DSA stops its VAE at the same epochs: ``benchmarks/README.md``),
    restoring the best weights. The generator sees the raw
    input; the learner's input normalisation stays inside the learner.

    With ``precision='bf16'``/``'fp16'`` the learner's steps (including the previous
    generator's sampling) run under autocast, but the **generator trains in float32**:
    its own optimizer loop runs after the learner's training, and the VAE's KL term
    and summed reconstruction error are the kind of sums low precision rounds away.

    **GR stores no raw samples**: nothing of a task's data is kept once the task is
    learned, only the two networks (the privacy-sensitive setting of TSCIL Sec. 5.2).

    Parameters
    ----------
    generator : None, nn.Module or callable, default=None
        The generator. None is a :class:`~clestim.nets.generators.TimeVAE` with a
        latent size of 128 (TSCIL's), standardising each channel (TSCIL's VAE sees
        the raw input: ``generator_params={"standardize": False}``). A module is
        copied; a callable is called as ``generator(n_channels, n_timepoints)`` (e.g.
        ``functools.partial(TimeVAE, recon_weight=0.1)``). It must have ``loss(x)``
        and ``sample(n, generator)`` (see :mod:`clestim.nets.generators`).
    generator_params : dict or None, default=None
        Keyword arguments for the default generator or a callable ``generator``
        (e.g. ``{"recon_weight": 0.01}``, or ``{"standardize": False}`` for TSCIL's
        VAE on the raw input); TSCIL tunes the VAE's ``recon_weight`` per run. Not
        allowed with a module.
    replay_ratio : float, default=0.5
        Share of the replayed term in the learner's and the generator's loss.
    replay_batch_size : int, default=32
        Pseudo-samples per step.
    generator_epochs : int, default=500
        Maximum generator epochs per task (TSCIL's). Early stopping ends training
        well before: in TSCIL's protocol on UCI-HAR and DSA every generator stopped
        between epochs 21 and 147.
    generator_patience : int or None, default=20
        Early-stopping patience of the generator (None: train all epochs).
    generator_lr : float, default=1e-3
        TSCIL grid: 1e-3, 1e-4.
    batch_size : int, default=32
        New samples per learner and generator step (TSCIL's replay methods).
    patience : int, default=20
    **params
        The parameters of :class:`~clestim.base.ContinualClassifier`.

    Attributes
    ----------
    generator_ : nn.Module
        The generator after the last task.
    generator_history_ : list of list of dict
        Per task, the generator's epochs: ``epoch``, ``valid_mse`` (the early-stopping
        score: the mean squared reconstruction error, or the validation loss of a
        generator without ``reconstruct``; None without a validation split) and
        ``dur`` (seconds); how soon early stopping ends its training.
    replay_counts_ : ndarray of shape (n_classes,)
        How many of 512 generator samples the network labels as each class of
        ``classes_`` after the last task: the classes the next task would replay.
        A ``UserWarning`` says so when they all fall in one class (a generator off
        the data's distribution, see ``generator_params``).

    Examples
    --------
    >>> from clestim import GR
    >>> est = GR(generator_epochs=50, random_state=0)  # doctest: +SKIP
    >>> est.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        generator=None,
        generator_params=None,
        replay_ratio=0.5,
        replay_batch_size=32,
        generator_epochs=500,
        generator_patience=20,
        generator_lr=1e-3,
        batch_size=32,
        patience=20,
        **params,
    ):
        super().__init__(batch_size=batch_size, patience=patience, **params)
        self.generator = generator
        self.generator_params = generator_params
        self.replay_ratio = replay_ratio
        self.replay_batch_size = replay_batch_size
        self.generator_epochs = generator_epochs
        self.generator_patience = generator_patience
        self.generator_lr = generator_lr

    def _check_params(self):
        super()._check_params()
        if not (self.generator is None or isinstance(self.generator, nn.Module)
                or callable(self.generator)):
            raise ValueError(
                f"generator must be None, a torch.nn.Module or a callable, got {self.generator!r}"
            )
        if self.generator_params is not None and (
            not isinstance(self.generator_params, dict) or isinstance(self.generator, nn.Module)
        ):
            raise ValueError(
                "generator_params must be a dict of keyword arguments for the default or "
                f"a callable generator, got {self.generator_params!r} with "
                f"generator={self.generator!r}"
            )
        if not 0.0 <= self.replay_ratio < 1.0:
            raise ValueError(f"replay_ratio must be in [0, 1), got {self.replay_ratio!r}")
        for name in ("replay_batch_size", "generator_epochs"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        p = self.generator_patience
        if p is not None and (not isinstance(p, numbers.Integral) or p < 1):
            raise ValueError(f"generator_patience must be a positive integer or None, got {p!r}")
        if not float(self.generator_lr) > 0:
            raise ValueError(f"generator_lr must be positive, got {self.generator_lr!r}")

    def _check_task(self, X, y, groups):
        if self.generator is None and X.ndim != 3:
            raise ValueError(
                "GR's default generator (TimeVAE) needs series input (n_samples, "
                f"n_channels, n_timepoints), got shape {X.shape}; pass a generator"
            )

    def _build_generator(self) -> nn.Module:
        if isinstance(self.generator, nn.Module):
            return copy.deepcopy(self.generator)
        return (self.generator or TimeVAE)(*self.input_shape_, **(self.generator_params or {}))

    # -- lifecycle hooks ----------------------------------------------------------
    def _before_task(self, X, y, groups):
        if not hasattr(self, "generator_"):
            self.generator_ = self._build_generator().to(self.device)
            if hasattr(self.generator_, "adapt"):
                self.generator_.adapt(self._tensor(X))
            self.generator_optimizer_ = torch.optim.Adam(
                self.generator_.parameters(), lr=self.generator_lr
            )
            self.generator_history_ = []
        first = self.n_tasks_seen_ == 0
        self.previous_ = None if first else (self._frozen_copy(), _frozen(self.generator_))

    def _task_data(self, train, valid):
        self._valid_X = valid[0]  # for the generator's early stopping; dropped after the task
        return train, valid

    def _replay(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` pseudo-samples of the previous generator, labelled by the previous network."""
        model, generator = self.previous_
        x = generator.sample(n, self._generator).float()  # float32 under autocast too
        with torch.no_grad():
            return x, model(x).argmax(1)

    def _training_loss(self, X, y):
        if self.previous_ is None:
            return super()._training_loss(X, y)
        x_replay, y_replay = self._replay(self.replay_batch_size)
        logits, logits_replay = self._forward(X, x_replay)
        rho = self.replay_ratio
        return 2.0 * (
            (1.0 - rho) * self._criterion(logits, y)
            + rho * self._criterion(logits_replay, y_replay)
        )

    def _after_task(self, X, y, groups):
        valid = self._valid_X
        del self._valid_X
        self._train_generator(self._tensor(X), self._tensor(valid))
        self.previous_ = None
        self._check_replay_coverage()

    def _check_replay_coverage(self, n: int = 512) -> None:
        # A generator of its own, so checking does not change the training's randomness.
        draws = torch.Generator().manual_seed(self.n_tasks_seen_)
        labels = self._eval_forward(self.generator_.sample(n, draws)).argmax(1).cpu()
        counts = np.bincount(labels.numpy(), minlength=len(self._head_classes))
        self.replay_counts_ = counts[self._labels.rows]  # in classes_ order
        if np.count_nonzero(self.replay_counts_) == 1 < len(self.classes_):
            (only,) = self.classes_[self.replay_counts_ > 0].tolist()
            warnings.warn(
                f"GR: the network labels all {n} generator samples as class {only!r}, so the "
                "next tasks will replay no other class: the generator's samples are off the "
                "data's distribution (for TimeVAE: standardise the input, "
                "generator_params['standardize']=True, the default; tune "
                "generator_params['recon_weight'], lower for inputs with large values, "
                "higher for small ones; or train it longer)",
                stacklevel=4,
            )

    # -- the generator's training ----------------------------------------------------
    def _train_generator(self, X: torch.Tensor, X_valid: torch.Tensor) -> None:
        gen, optimizer = self.generator_, self.generator_optimizer_
        previous = None if self.previous_ is None else self.previous_[1]
        rho = self.replay_ratio
        patience = self.generator_patience if len(X_valid) else None
        best, best_state, wait = math.inf, None, 0
        history = []
        self.generator_history_.append(history)
        for epoch in range(1, self.generator_epochs + 1):
            started = time.perf_counter()
            gen.train()
            order = torch.randperm(len(X), generator=self._generator).to(X.device)
            for start in range(0, len(X), self.batch_size):
                loss = gen.loss(X[order[start : start + self.batch_size]])
                if previous is not None:
                    replay = previous.sample(self.replay_batch_size, self._generator)
                    loss = (1.0 - rho) * loss + rho * gen.loss(replay)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            score = None if patience is None else self._generator_score(X_valid)
            history.append({"epoch": epoch, "valid_mse": score,
                            "dur": time.perf_counter() - started})
            if score is None:
                continue
            if score < best:
                best, wait = score, 0
                best_state = copy.deepcopy(gen.state_dict())
            else:
                wait += 1
                if wait >= patience:
                    break
        if best_state is not None:
            gen.load_state_dict(best_state)
        gen.eval()

    @torch.no_grad()
    def _generator_score(self, X: torch.Tensor) -> float:
        gen = self.generator_.eval()
        if hasattr(gen, "reconstruct"):
            errors = [
                F.mse_loss(gen.reconstruct(X[i : i + 512]), X[i : i + 512], reduction="sum")
                for i in range(0, len(X), 512)
            ]
            return float(sum(errors)) / X.numel()
        return float(sum(gen.loss(X[i : i + 512]) for i in range(0, len(X), 512)))


def _frozen(module: nn.Module) -> nn.Module:
    frozen = copy.deepcopy(module).eval()
    frozen.requires_grad_(False)
    return frozen
