"""Table 3 of the video continual-learning paper (Villa et al. 2022) on moving digits:
DER and DER++ with and without information-driven downsampling (IDD) of the memory.

Data: :func:`clestim.datasets.load_moving_digits` (real MNIST digits moved along
eight synthetic motion patterns, the classes), ``--n-frames`` frames of
``--size`` pixels. The eight classes are grouped once into a pool of four pairs
and ``--problems`` problems of ``--n-tasks`` tasks are drawn once from seed 0
(:class:`clestim.TaskPool`, the paper's protocol, as ``video_paper_ts.py``); each
method learns the same problems with the estimator seeded ``1234 + problem``.

Estimator: ``r2plus1d_small`` with the paper's clip protocol (random temporal
crops of ``--clip-length`` frames, random crops, flips), Adam at ``--lr``
(the paper's RMSProp at 1e-5 needs far more epochs than a CPU run allows),
``--max-epochs`` epochs per task, batch 16 new + 16 replayed. IDD
(``memory_frames``): a stored clip keeps its ``--idd-frames`` frames of largest
optical-flow norm (``cv2.calcOpticalFlowFarneback``) and is replayed with each
kept frame held until the next one (docs/video.md). In the paper both rows of a
buffer size hold the same bytes (IDD chooses which frames fill the model's
fixed input); here IDD stores fewer frames, so a buffer of ``2m`` IDD clips at
half the frames holds about the bytes of ``m`` whole clips.

Each problem reports, after the last task, C-IL (average accuracy over all
classes seen), T-IL (accuracy within each task's classes) and the memory in
clips and bytes (``memory_nbytes_``); the table is mean ± std over problems.
Every finished (method, buffer, IDD, problem) cell is written at once to
``OUT/cells/``; running again skips it.

Usage::

    python benchmarks/video_idd.py run                # the whole table
    python benchmarks/video_idd.py run --methods DER --buffers 50 --idd on --problems 1
    python benchmarks/video_idd.py summary            # OUT/table.md
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from video_paper_ts import buffer_label, evaluate_problem, load_cells, mean_std, write_table

import clestim
from clestim.benchmark import write_json_atomic
from clestim.datasets import load_moving_digits
from clestim.video import paper_params

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "video_idd"


def cells(args):
    """(label, method, params) of every cell of the table, as the paper orders it."""
    out = []
    for method in args.methods:
        for size in sorted(args.buffers, reverse=True):
            for idd in args.idd:
                frames = {"memory_frames": args.idd_frames} if idd == "on" else {}
                out.append((f"{method} {size} IDD={idd}", method,
                            {"memory_size": size, **frames}))
    return out


def estimator(method, params, args, seed):
    video = paper_params(args.clip_length, args.crop_size, small=True)
    video.update(optimizer="adam", lr=args.lr)
    return getattr(clestim, method)(
        **video, **params, max_epochs=args.max_epochs, replay_batch_size=16, patience=None,
        validation_fraction=0.0, random_state=seed)


def run(args):
    data = load_moving_digits(args.train_per_class, args.test_per_class, n_frames=args.n_frames,
                              size=args.size, random_state=0, data_home=args.data_home)
    pool = clestim.TaskPool(classes_per_task=2, n_tasks=args.n_tasks, n_problems=args.problems,
                            random_state=0)
    out = Path(args.out) / "cells"
    out.mkdir(parents=True, exist_ok=True)
    for e, stream in enumerate(pool.problems()):
        for label, method, params in cells(args):
            key = f"{label.replace(' ', '_')}__p{e}"
            if (out / f"{key}.json").exists():
                continue
            est = estimator(method, params, args, 1234 + e)
            record = {"label": label, "method": method, "params": params, "problem": e,
                      **evaluate_problem(est, stream, data.X_train, data.y_train,
                                         data.X_test, data.y_test),
                      "settings": {k: v for k, v in vars(args).items()
                                   if k not in ("command", "out", "data_home")}}
            write_json_atomic(out / f"{key}.json", record)
            print(f"{key}: C-IL {100 * record['C-IL']:.1f} T-IL {100 * record['T-IL']:.1f} "
                  f"memory {record['memory_nbytes'] / 1e6:.2f} MB ({record['wall_s']:.0f} s)",
                  flush=True)


def summary(args):
    groups = {}
    for r in load_cells(args.out):
        groups.setdefault((r["method"], r["params"]["memory_size"],
                           "memory_frames" in r["params"]), []).append(r)
    order = sorted(groups, key=lambda k: (k[0] != "DERpp", -k[1], k[2]))
    rows = [(method, buffer_label(groups[method, size, idd]), "✓" if idd else "",
             len(groups[method, size, idd]), mean_std(groups[method, size, idd], "C-IL"),
             mean_std(groups[method, size, idd], "T-IL"))
            for method, size, idd in order]
    write_table(args.out, ["method", "buffer", "IDD", "problems", "C-IL", "T-IL"], rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "summary"])
    parser.add_argument("--methods", nargs="+", default=["DERpp", "DER"])
    parser.add_argument("--buffers", nargs="+", type=int, default=[100, 50, 25])
    parser.add_argument("--idd", nargs="+", choices=["off", "on"], default=["off", "on"])
    parser.add_argument("--idd-frames", type=int, default=8)
    parser.add_argument("--problems", type=int, default=5)
    parser.add_argument("--n-tasks", type=int, default=3)
    parser.add_argument("--train-per-class", type=int, default=40)
    parser.add_argument("--test-per-class", type=int, default=20)
    parser.add_argument("--n-frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--clip-length", type=int, default=8)
    parser.add_argument("--crop-size", type=int, default=28)
    parser.add_argument("--max-epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.command == "summary":
        return summary(args)
    import torch

    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "1")))
    run(args)


if __name__ == "__main__":
    main()
