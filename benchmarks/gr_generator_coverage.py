"""Which classes does GR's VAE generate? Class coverage of TimeVAE samples on a task.

GR replays only what its generator produces, labelled by the previous network. This
script separates the generator from the learner: it trains an ``Offline`` network
on all training data (the "oracle"), then trains a TimeVAE on the classes of one
task of the TSCIL stream (seed 1234 + run, experiment part for DSA) exactly as GR trains
its generator on a first task, and at the given epochs prints how the oracle
labels 600 prior samples (per class of the task, and "other" for samples that it
assigns to a class outside the task, i.e. off the task's distribution), the oracle's
accuracy on the VAE's reconstructions of the task's test windows, and their
relative squared error per class.

Usage::

    python benchmarks/gr_generator_coverage.py --dataset dsa --task 1 --epochs 20,60,100,150
    python benchmarks/gr_generator_coverage.py --vae '{"recon_weight": 1.0, "standardize": true}'
    python benchmarks/gr_generator_coverage.py --dataset uci_har --run 2 --task 0
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="dsa", choices=["dsa", "uci_har"])
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    parser.add_argument("--task", type=int, default=1, help="task index in the stream")
    parser.add_argument("--run", type=int, default=0, help="run r: class order of seed 1234 + r")
    parser.add_argument("--epochs", default="20,60,100,150", help="epochs at which to report")
    parser.add_argument("--vae", default='{"standardize": false}',
                        help="TimeVAE keyword arguments, as JSON (default: TSCIL's VAE)")
    parser.add_argument("--oracle-epochs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "2")))

    from clestim import Offline
    from clestim.datasets import load_dsa, load_uci_har
    from clestim.nets.generators import TimeVAE
    from clestim.streams import ClassIncremental, StreamPart

    data = (load_dsa if args.dataset == "dsa" else load_uci_har)(args.data_home)
    X, y = data.X_train.astype(np.float32), data.y_train
    X_test, y_test = data.X_test.astype(np.float32), data.y_test
    stream = ClassIncremental(classes_per_task=2, random_state=1234 + args.run, remainder="drop")
    if args.dataset == "dsa":
        stream = StreamPart(stream, part="experiment")
    idx = list(stream.split(X, y))[args.task]
    classes = np.unique(y[idx])

    start = time.perf_counter()
    oracle = Offline(max_epochs=args.oracle_epochs, random_state=0).fit(X, y)
    print(f"oracle: {args.oracle_epochs} epochs in {time.perf_counter() - start:.0f} s, "
          f"test accuracy {oracle.score(X_test, y_test):.3f}")

    torch.manual_seed(0)
    draws = torch.Generator().manual_seed(0)
    vae = TimeVAE(*X.shape[1:], **json.loads(args.vae)).adapt(torch.tensor(X[idx]))
    optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3)
    X_task = torch.tensor(X[idx])
    in_task = np.isin(y_test, classes)
    real, y_real = torch.tensor(X_test[in_task]), y_test[in_task]
    checkpoints = sorted(int(e) for e in args.epochs.split(","))
    print(f"{args.dataset} run {args.run} task {args.task}, classes {classes.tolist()}, "
          f"{len(idx)} windows, TimeVAE {args.vae}")
    start = time.perf_counter()
    for epoch in range(1, checkpoints[-1] + 1):
        vae.train()
        order = torch.randperm(len(X_task), generator=draws)
        for s in range(0, len(X_task), 32):
            loss = vae.loss(X_task[order[s : s + 32]])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch not in checkpoints:
            continue
        vae.eval()
        with torch.no_grad():
            labels = oracle.predict(vae.sample(600, torch.Generator().manual_seed(1)).numpy())
            recon = vae.reconstruct(real)
        counts = {int(c): int((labels == c).sum()) for c in classes}
        error = {
            int(c): round(float(((recon - real)[y_real == c] ** 2).mean()
                                / real[y_real == c].var()), 3)
            for c in classes
        }
        recon_acc = float((oracle.predict(recon.numpy()) == y_real).mean())
        print(f"epoch {epoch:4d} ({time.perf_counter() - start:5.0f} s): samples per class "
              f"{counts}, other {600 - sum(counts.values())}; oracle accuracy on "
              f"reconstructions {recon_acc:.3f}; relative squared error {error}", flush=True)


if __name__ == "__main__":
    main()
