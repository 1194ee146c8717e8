"""Training speed on clips: clips per second of each ER training epoch, on CPU or GPU.

An ER estimator with an R(2+1)D backbone learns the first four motions of the
moving-digits clips (:func:`clestim.datasets.load_moving_digits`: real MNIST
digits, synthetic motion) for one epoch, which fills its memory and warms the
device up, then the other four for ``--epochs`` epochs. Each of those epochs is
timed by skorch's epoch timer (``history_[-1][e]['dur']``, the training and the
validation pass) and reported as clips per second: the task's training clips
over the epoch's duration, and the clips that went through the network (the
new batch and the replayed batch of every step). The clip protocol is the
paper's (random temporal crop, random spatial crop, flip), RMSProp, batch 16.

``--device cuda`` runs the same on the GPU when torch sees one and stops with a
message when it does not.

Usage::

    python benchmarks/video_speed.py                      # r2plus1d_small on the CPU
    python benchmarks/video_speed.py --device cuda --backbone r2plus1d --size 112 \\
        --n-frames 32 --clip-length 16 --crop-size 112
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from clestim import ER
from clestim.datasets import load_moving_digits
from clestim.video import paper_params

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def check_device(device: str) -> None:
    """Stop with a clear message when ``device`` is not usable here."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(
            f"--device {device}: torch {torch.__version__} sees no CUDA GPU here "
            f"(torch.cuda.is_available() is False); run on a GPU machine, or with "
            "--device cpu"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backbone", default="r2plus1d_small",
                        choices=["r2plus1d_small", "r2plus1d"])
    parser.add_argument("--train-per-class", type=int, default=20)
    parser.add_argument("--n-frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--clip-length", type=int, default=8)
    parser.add_argument("--crop-size", type=int, default=28)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--memory-size", type=int, default=40)
    parser.add_argument("--memory-frames", type=int, default=None,
                        help="IDD in memory: frames kept per stored clip")
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    args = parser.parse_args(argv)
    check_device(args.device)
    if args.device == "cpu":
        torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "2")))

    data = load_moving_digits(args.train_per_class, 1, n_frames=args.n_frames, size=args.size,
                              random_state=0, data_home=args.data_home)
    X, y = data.X_train, data.y_train
    first, second = y < 4, y >= 4
    params = paper_params(args.clip_length, args.crop_size, small=args.backbone != "r2plus1d")
    est = ER(**params, memory_size=args.memory_size, replay_batch_size=16,
             memory_frames=args.memory_frames, max_epochs=1,
             patience=None, validation_fraction=0.0, device=args.device, random_state=0)
    start = time.perf_counter()
    est.partial_fit_task(X[first], y[first])  # fills the memory, warms the device up
    warm = time.perf_counter() - start
    est.set_params(max_epochs=args.epochs)
    est.partial_fit_task(X[second], y[second])
    n_new = int(second.sum())
    steps = -(-n_new // est.batch_size)
    n_seen = n_new + steps * min(est.replay_batch_size, len(est.memory_))
    durations = [row["dur"] for row in est.history_[-1]]
    where = (torch.cuda.get_device_name(0) if args.device.startswith("cuda")
             else f"cpu, {torch.get_num_threads()} threads")
    print(f"{args.backbone}, clips {tuple(X.shape[1:])}, windows of {args.clip_length} "
          f"frames cropped to {args.crop_size}, batch {est.batch_size} new + "
          f"{est.replay_batch_size} replayed, {where}")
    print(f"first task (1 epoch, incl. warm-up): {warm:.1f} s")
    for e, dur in enumerate(durations):
        print(f"epoch {e}: {dur:.2f} s, {n_new / dur:.1f} new clips/s, "
              f"{n_seen / dur:.1f} clips/s through the network")
    median = float(np.median(durations))
    print(json.dumps({"device": args.device, "backbone": args.backbone,
                      "median_epoch_s": round(median, 3),
                      "new_clips_per_s": round(n_new / median, 2),
                      "clips_per_s": round(n_seen / median, 2)}))


if __name__ == "__main__":
    main()
