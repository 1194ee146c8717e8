"""The video protocol of the continual action-recognition paper, on clips ``(n, C, T, H, W)``.

* Training augmentation lives in the backbone (:class:`clestim.nets.ClipAugment`,
  set through ``backbone_params``): a random temporal crop of ``clip_length``
  frames, a random spatial crop and a horizontal flip, drawn per sample of every
  batch, replayed ones included, from torch's RNG, which the estimator seeds from
  ``random_state`` for each task.
* :func:`windowed_predict_proba`: the test protocol, the mean of the class
  probabilities over every non-overlapping ``clip_length`` window, centre-cropped.
* :func:`paper_params`: the paper's settings (R(2+1)D, RMSProp, lr 1e-5, batch 16).
* :class:`FlowFrameSelector`: information-driven downsampling (IDD), which keeps
  the frames with the largest motion in time order.
* :class:`IDDStore`: IDD as the store policy of a replay memory (``ER(memory_frames=...)``
  and every rehearsal method).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from .nets.video import ClipAugment

__all__ = [
    "FlowFrameSelector", "IDDStore", "frame_motion", "paper_params", "windowed_predict_proba",
]


def paper_params(clip_length: int = 16, crop_size: int = 112, small: bool = False) -> dict:
    """Estimator parameters of the paper: R(2+1)D from scratch, RMSProp, lr 1e-5,
    batch 16, random ``clip_length``-frame temporal crops, ``crop_size`` crops and
    horizontal flips. ``small=True`` uses ``'r2plus1d_small'`` (CPU).

    Examples
    --------
    >>> from clestim.methods import DER
    >>> est = DER(**paper_params(clip_length=8, crop_size=28, small=True))
    """
    return {
        "backbone": "r2plus1d_small" if small else "r2plus1d",
        "backbone_params": {"clip_length": clip_length, "crop_size": crop_size, "flip": True},
        "optimizer": torch.optim.RMSprop,
        "lr": 1e-5,
        "batch_size": 16,
    }


def _clip_layers(estimator) -> list[ClipAugment]:
    check_is_fitted(estimator, "module_")
    layers = [m for m in estimator.module_.modules() if isinstance(m, ClipAugment)]
    if not layers:
        raise ValueError(
            "windowed_predict_proba needs a video backbone ('r2plus1d', 'r2plus1d_small' "
            "or a module holding a ClipAugment layer)"
        )
    return layers


def windowed_predict_proba(estimator, X, task=None) -> np.ndarray:
    """Mean class probabilities over all non-overlapping windows of each clip.

    The paper's test protocol: clip ``i`` of ``T`` frames gives ``T // clip_length``
    windows (frames ``[w * clip_length, (w + 1) * clip_length)``), each centre-cropped
    to ``crop_size``; the prediction is the mean of their softmax probabilities.

    Parameters
    ----------
    estimator : fitted ContinualClassifier with a video backbone
    X : array of shape (n_samples, C, T, H, W)
    task : int, optional
        As in :meth:`~clestim.base.ContinualClassifier.predict_proba`.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes), columns as ``classes_``
    """
    layers = _clip_layers(estimator)
    X = np.asarray(X)
    if X.ndim != 5:
        raise ValueError(f"X must be clips (n_samples, C, T, H, W), got shape {X.shape}")
    n_windows = layers[0].n_windows(X.shape[2])
    total = 0.0
    try:
        for w in range(n_windows):
            for layer in layers:
                layer.window = w
            total = total + estimator.predict_proba(X, task=task)
    finally:
        for layer in layers:
            layer.window = None
    return total / n_windows


def frame_motion(X, method: str = "farneback") -> np.ndarray:
    """Motion of each frame to the next: shape (n_samples, n_frames), last frame ``-inf``.

    ``'farneback'``: the L2 norm of the dense optical flow
    (``cv2.calcOpticalFlowFarneback``) between the grey-level frames ``t`` and
    ``t + 1`` of clips ``(n, C, T, H, W)``. ``'diff'``: the L2 norm of ``X[:, :, t+1]
    - X[:, :, t]``, for clips or series ``(n, C, T)``.
    """
    X = np.asarray(X, dtype=np.float32)
    score = np.full(X.shape[:1] + X.shape[2:3], -np.inf)
    if method == "diff":
        d = np.diff(X, axis=2).swapaxes(1, 2).reshape(len(X), X.shape[2] - 1, -1)
        score[:, :-1] = np.linalg.norm(d, axis=2)
        return score
    if method != "farneback":
        raise ValueError(f"method must be 'farneback' or 'diff', got {method!r}")
    if X.ndim != 5:
        raise ValueError(f"method='farneback' needs clips (n, C, T, H, W), got shape {X.shape}")
    import cv2

    for i, clip in enumerate(X):
        grey = clip.mean(axis=0)
        lo, hi = grey.min(), grey.max()
        grey = np.round((grey - lo) / max(hi - lo, 1e-12) * 255).astype(np.uint8)
        for t in range(len(grey) - 1):
            flow = cv2.calcOpticalFlowFarneback(
                grey[t], grey[t + 1], None, pyr_scale=0.5, levels=2, winsize=9,
                iterations=3, poly_n=5, poly_sigma=1.1, flags=0,
            )
            score[i, t] = np.linalg.norm(flow)
    return score


class FlowFrameSelector(TransformerMixin, BaseEstimator):
    """Information-driven downsampling (IDD): keep the ``n_frames`` frames of largest motion.

    For each clip, the motion of frame ``t`` is the L2 norm of its optical flow to
    frame ``t + 1`` (:func:`frame_motion`; the last frame has none and is kept only
    when every frame is); the ``n_frames`` frames of largest motion are kept in their
    original order, ties going to the earlier frame. Stateless: ``fit`` only checks
    the input.

    Parameters
    ----------
    n_frames : int
    method : {'farneback', 'diff'}, default='farneback'
        Dense Farneback optical flow (OpenCV), or the cheaper frame-difference norm,
        which also works on time series ``(n, C, T)``.
    """

    def __init__(self, n_frames: int = 8, method: str = "farneback"):
        self.n_frames = n_frames
        self.method = method

    def _check(self, X) -> np.ndarray:
        X = check_array(X, dtype=np.float32, allow_nd=True, estimator=self)
        if X.ndim not in (3, 5):
            raise ValueError(f"X must be (n, C, T) or (n, C, T, H, W), got shape {X.shape}")
        if not (isinstance(self.n_frames, int | np.integer) and 1 <= self.n_frames <= X.shape[2]):
            raise ValueError(
                f"n_frames must be an int in [1, {X.shape[2]}] (the clip length), "
                f"got {self.n_frames!r}"
            )
        if self.method not in ("farneback", "diff"):
            raise ValueError(f"method must be 'farneback' or 'diff', got {self.method!r}")
        return X

    def fit(self, X, y=None):
        self._check(X)
        self.n_frames_in_ = np.asarray(X).shape[2]
        return self

    def selected_frames(self, X) -> np.ndarray:
        """Indices (n_samples, n_frames) of the kept frames, increasing."""
        X = self._check(X)
        order = np.argsort(-frame_motion(X, self.method), axis=1, kind="stable")
        return np.sort(order[:, : self.n_frames], axis=1)

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "n_frames_in_")
        X = self._check(X)
        idx = self.selected_frames(X)
        shape = (len(X), 1, self.n_frames) + (1,) * (X.ndim - 3)
        return np.take_along_axis(X, idx.reshape(shape), axis=2)


def _position_dtype(length: int) -> torch.dtype:
    """The smallest integer dtype that holds frame positions ``0..length-1``."""
    return torch.uint8 if length <= 256 else torch.int16 if length <= 2**15 else torch.int32


class IDDStore:
    """Information-driven downsampling as the store policy of a replay memory.

    A sample entering the buffer keeps only the ``n_frames`` frames of largest
    motion, in time order (:class:`FlowFrameSelector`), and their positions, in
    the ``'frames'`` field (the smallest unsigned or signed integer dtype that
    holds ``length``: ``uint8`` up to 256 frames). Its bytes shrink from ``T``
    frames to ``n_frames`` frames plus ``n_frames`` positions.

    Read back, a stored clip is rebuilt at its original ``length`` by holding each
    kept frame until the next kept one (frames before the first kept one show the
    first kept one): with kept positions ``p_0 < ... < p_{k-1}``, frame ``t`` is the
    kept frame ``p_j`` with the largest ``p_j <= t`` (``j = 0`` when there is
    none). The paper (Villa et al. 2022) does not say how downsampled clips are
    replayed; the hold keeps the clip length, so replayed clips batch with new
    ones and the network's temporal crop applies to both.

    Parameters
    ----------
    n_frames : int
        Frames kept per sample.
    method : {'farneback', 'diff'}, default='farneback'
        The motion score (:func:`frame_motion`); ``'diff'`` also works on series
        ``(n, C, T)``, where frames are time steps.
    length : int
        Frames of the offered samples (``T``), the length reads rebuild.
    """

    #: The offered fields that :meth:`decode` rebuilds.
    decoded_fields = ("X",)

    def __init__(self, n_frames: int, method: str = "farneback", *, length: int):
        self.n_frames = n_frames
        self.method = method
        self.length = length
        self.selector = FlowFrameSelector(n_frames, method)

    def sample_nbytes(self, shape: tuple) -> int:
        """Bytes IDD stores for one float32 sample of ``shape`` ``(C, T, ...)``:
        ``n_frames`` of its frames and their positions."""
        frame = int(np.prod(shape)) // shape[1]
        return self.n_frames * (4 * frame + _position_dtype(self.length).itemsize)

    def encode(self, fields: dict) -> dict:
        """The offered fields with ``'X'`` downsampled and its ``'frames'`` positions."""
        X = fields["X"]
        if X.shape[2] != self.length:
            raise ValueError(f"IDDStore stores samples of {self.length} frames, got {X.shape[2]}")
        idx = self.selector.selected_frames(X.detach().float().cpu().numpy())
        positions = torch.as_tensor(idx, device=X.device)
        return {**fields, "X": _take_frames(X, positions),
                "frames": positions.to(_position_dtype(self.length))}

    def decode(self, fields: dict) -> dict:
        """Stored fields with ``'X'`` rebuilt at ``length`` frames, without ``'frames'``."""
        fields = dict(fields)
        positions = fields.pop("frames").long()
        t = torch.arange(self.length, device=positions.device).expand(len(positions), -1)
        held = torch.searchsorted(positions, t.contiguous(), right=True).sub(1).clamp_min(0)
        fields["X"] = _take_frames(fields["X"], held)
        return fields


def _take_frames(X: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``X[i, :, idx[i]]`` for every sample ``i``: frames along axis 2."""
    shape = (len(X), 1, idx.shape[1]) + (1,) * (X.dim() - 3)
    index = idx.to(X.device).reshape(shape).expand(*X.shape[:2], idx.shape[1], *X.shape[3:])
    return torch.gather(X, 2, index)
