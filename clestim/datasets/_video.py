"""Clip data sets ``(n, C, T, H, W)``: moving MNIST digits and UCF101 from a local folder."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ._base import DatasetNotFoundError

#: The motion patterns of :func:`load_moving_digits`, one per class. None of them
#: changes under a horizontal flip (the paper's augmentation), so flipped clips
#: keep their class.
MOTIONS = ("down", "up", "zoom_in", "zoom_out", "bounce", "shake", "fast_down", "still")


def _trajectory(motion: str, u: np.ndarray, size: int, rng) -> tuple:
    """Centre (x, y) and scale of the digit at times ``u`` in [0, 1]."""
    c = size / 2
    x = np.full_like(u, c + rng.uniform(-2, 2))
    y = np.full_like(u, c + rng.uniform(-2, 2))
    s = np.ones_like(u)
    span = 0.25 * size
    if motion == "down":
        y = y - span / 2 + span * u
    elif motion == "up":
        y = y + span / 2 - span * u
    elif motion == "zoom_in":
        s = 0.6 + 0.8 * u
    elif motion == "zoom_out":
        s = 1.4 - 0.8 * u
    elif motion == "bounce":
        y = y - span / 2 + span * (1 - np.abs(2 * u - 1))
    elif motion == "shake":
        x = x + 0.15 * size * np.sin(4 * np.pi * u + rng.uniform(0, 2 * np.pi))
    elif motion == "fast_down":
        y = y - span + 2 * span * u
    return x, y, s


def _render(digit: np.ndarray, x, y, s, size: int, digit_size: float) -> np.ndarray:
    """Frames ``(T, size, size)`` of a 28x28 ``digit`` centred at (x, y), scaled by s."""
    import cv2

    frames = np.empty((len(x), size, size), dtype=np.float32)
    for t in range(len(x)):
        k = digit_size * s[t] / 28.0
        M = np.array([[k, 0, x[t] - 14 * k], [0, k, y[t] - 14 * k]], dtype=np.float32)
        frames[t] = cv2.warpAffine(digit, M, (size, size), flags=cv2.INTER_LINEAR)
    return frames


def load_moving_digits(
    n_train_per_class: int = 60,
    n_test_per_class: int = 20,
    *,
    n_frames: int = 16,
    size: int = 32,
    random_state=0,
    data_home=None,
):
    """Clips of real MNIST digits whose motion pattern is the class.

    The digits are real (MNIST, train digits in the train clips and test digits in
    the test clips); the motion is synthetic: each clip moves one randomly drawn
    digit along one of the eight patterns of ``MOTIONS`` (down, up, zoom in, zoom
    out, bounce, horizontal shake, fast down, still), with a random start offset of
    up to 2 pixels and, for shake, a random phase. No pattern changes under a
    horizontal flip. It stands in for an action-recognition set (none can be
    downloaded here) in tests and CPU benchmarks; the same ``random_state`` gives
    the same clips.

    Parameters
    ----------
    n_train_per_class, n_test_per_class : int, default=60, 20
    n_frames : int, default=16
    size : int, default=32
        Frame height and width; the digit is about ``0.6 * size`` pixels tall.
    random_state : int, RandomState or None, default=0
    data_home : str or path-like, optional
        Where :func:`load_mnist` finds ``mnist.npz``.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``, ``X_test`` float32 in [0, 1] of shape (n, 1, n_frames, size,
        size); ``y_train``, ``y_test`` (0..7, the index in ``class_names``);
        ``digit_train``, ``digit_test`` (the MNIST label of the digit shown);
        ``n_tasks=4`` (two motions per task).
    """
    from ._benchmarks import load_mnist

    if n_frames < 2 or size < 8:
        raise ValueError(f"need n_frames >= 2 and size >= 8, got {n_frames}, {size}")
    rng = check_random_state(random_state)
    mnist = load_mnist(data_home, flatten=False)
    u = np.linspace(0.0, 1.0, n_frames)
    out = {}
    for split, n in (("train", n_train_per_class), ("test", n_test_per_class)):
        images, labels = mnist[f"X_{split}"][:, 0], mnist[f"y_{split}"]
        y = np.repeat(np.arange(len(MOTIONS)), n)
        pick = rng.choice(len(images), size=len(y), replace=False)
        X = np.empty((len(y), 1, n_frames, size, size), dtype=np.float32)
        for i, (c, j) in enumerate(zip(y, pick)):
            x_c, y_c, s = _trajectory(MOTIONS[c], u, size, rng)
            X[i, 0] = _render(images[j], x_c, y_c, s, size, 0.6 * size)
        order = rng.permutation(len(y))
        out[split] = (np.clip(X[order], 0, 1), y[order], labels[pick][order].astype(np.int64))
    return Bunch(
        name="moving_digits",
        X_train=out["train"][0], y_train=out["train"][1], digit_train=out["train"][2],
        X_test=out["test"][0], y_test=out["test"][1], digit_test=out["test"][2],
        class_names=list(MOTIONS), n_tasks=4, class_order=None,
        DESCR="Real MNIST digits moved along synthetic motion patterns (the class): "
        f"{', '.join(MOTIONS)}; {n_frames} frames of {size}x{size}.\n",
    )


_UCF_NAME = re.compile(r"v_(?P<cls>[A-Za-z]+)_g(?P<group>\d+)_c(?P<clip>\d+)\.(avi|mp4)$")


def read_clip(path, clip_length: int, size: int) -> np.ndarray:
    """The first ``clip_length`` frames of a video as float32 RGB ``(3, T, size, size)``
    in [0, 1], each frame resized to ``size`` x ``size``; a shorter video is looped."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    frames = []
    while len(frames) < clip_length:
        ok, frame = cap.read()
        if not ok:
            break
        frame = cv2.resize(frame, (size, size), interpolation=cv2.INTER_AREA)
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    cap.release()
    if not frames:
        raise ValueError(f"cannot read any frame of {path}")
    frames = [frames[i % len(frames)] for i in range(clip_length)]
    return np.stack(frames).transpose(3, 0, 1, 2).astype(np.float32) / 255.0


def load_ucf101(root, classes=None, clip_length: int = 16, size: int = 112, split: int = 1):
    """UCF101 (Soomro et al. 2012) from a local copy, as clips ``(n, 3, T, size, size)``.

    ``root`` holds the release's videos, one folder per action
    (``root/<Action>/v_<Action>_gGG_cCC.avi``). Nothing is downloaded. The train/test
    split is the official one by group: split ``k`` tests on groups ``7k-6`` to
    ``7k`` (the lists in ``ucfTrainTestlist`` follow the same rule).

    Parameters
    ----------
    root : str or path-like
    classes : list of str, optional
        Action folders to load (default: all). 101 classes at 112x112 need ~30 GB:
        choose a few classes, a smaller ``size`` or ``clip_length`` on a small machine.
    clip_length : int, default=16
        Frames kept per video (the first ones; a shorter video is looped).
    size : int, default=112
        Frames are resized to ``size`` x ``size``.
    split : {1, 2, 3}, default=1

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``, ``X_test`` float32 RGB in [0, 1]; ``y_train``, ``y_test``
        (index into ``class_names``); ``subject_train``/``subject_test`` the group
        (actor) ids; ``files_train``/``files_test``.
    """
    root = Path(root)
    if split not in (1, 2, 3):
        raise ValueError(f"split must be 1, 2 or 3, got {split!r}")
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if classes is not None:
        missing = sorted(set(classes) - {p.name for p in folders})
        if missing and folders:
            raise ValueError(f"classes {missing} are not folders of {root}")
        folders = [p for p in folders if p.name in set(classes)]
    videos = [(f, p.name) for p in folders for f in sorted(p.iterdir()) if _UCF_NAME.search(f.name)]
    if not videos:
        raise DatasetNotFoundError(
            f"dataset 'ucf101' not found in {root}.\n"
            "  Put the UCF101 videos there, one folder per action "
            "(root/<Action>/v_<Action>_gGG_cCC.avi), from "
            "https://www.crcv.ucf.edu/data/UCF101.php. It is never downloaded."
        )
    class_names = sorted({c for _, c in videos})
    test_groups = set(range(7 * split - 6, 7 * split + 1))
    parts = {"train": ([], [], [], []), "test": ([], [], [], [])}
    for f, c in videos:
        group = int(_UCF_NAME.search(f.name)["group"])
        X, y, g, names = parts["test" if group in test_groups else "train"]
        X.append(read_clip(f, clip_length, size))
        y.append(class_names.index(c))
        g.append(group)
        names.append(str(f))
    shape = (0, 3, clip_length, size, size)
    arrays = {}
    for name, (X, y, g, names) in parts.items():
        arrays[name] = (np.stack(X) if X else np.empty(shape, np.float32),
                        np.asarray(y, dtype=np.int64), np.asarray(g, dtype=np.int64), names)
    return Bunch(
        name="ucf101",
        X_train=arrays["train"][0], y_train=arrays["train"][1],
        subject_train=arrays["train"][2], files_train=arrays["train"][3],
        X_test=arrays["test"][0], y_test=arrays["test"][1],
        subject_test=arrays["test"][2], files_test=arrays["test"][3],
        class_names=class_names, source=str(root),
        DESCR=f"UCF101 split {split} from {root}: {len(class_names)} actions, clips of "
        f"{clip_length} frames at {size}x{size}.\n",
    )
