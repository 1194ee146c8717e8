"""What GR's generator and network do at a saved point of a benchmark cell.

A GR cell of ``clestim bench`` saves its estimator after every task
(``RESULTS/progress/<key>.pkl``, deleted when the cell finishes). This script reads
one such file and, on the test windows of the classes seen so far, prints:

* the generator's early-stopping history per task (epochs, best epoch);
* its early-stopping score, the mean squared reconstruction error, decoded from the
  latent mean (clestim) and from a sampled latent (TSCIL), with the spread of the
  sampled score over 20 draws: whether TSCIL's noisier score could stop the
  generator at another epoch;
* the posterior's size: KL per window, posterior standard deviation;
* how the cell's network labels the real windows of each seen class, their
  reconstructions, and 600 samples of the generator (what the next task replays);
* how an "oracle" (``Offline`` trained on all training windows) labels the same
  generator samples: whether the samples the network calls an old class look like
  that class at all.

Usage::

    python benchmarks/gr_progress_probe.py RESULTS/progress/dsa__GR__...__run4.pkl
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _counts(labels: np.ndarray, classes: np.ndarray) -> str:
    """``{class: count}`` over ``classes``, the rest as "other"."""
    parts = [f"{c}: {int((labels == c).sum())}" for c in classes]
    return "{" + ", ".join(parts) + f"}}, other {int((~np.isin(labels, classes)).sum())}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("progress", help="a GR cell's progress file")
    parser.add_argument("--dataset", choices=["dsa", "uci_har"],
                        help="default: the start of the file's name (the cell key)")
    parser.add_argument("--data-home", default=os.environ.get("CLESTIM_SHARED_DATA", DEFAULT_DATA))
    parser.add_argument("--oracle-epochs", type=int, default=8)
    parser.add_argument("--oracle-cache", help="a file keeping the oracle between calls")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("CLESTIM_THREADS", "1")))

    from clestim import Offline
    from clestim.datasets import load_dsa, load_uci_har
    from clestim.evaluation import load_progress

    state = load_progress(args.progress)
    est = state["estimator"]
    gen = est.generator_.eval()
    dataset = args.dataset or Path(args.progress).name.split("__")[0]
    print(f"{Path(args.progress).name}: {state['tasks_done']} tasks done, "
          f"generator {est.generator_params}, standardize={gen.standardize}")
    print("task classes:", [t.tolist() for t in est.task_classes_])
    print("accuracy matrix so far (rows: after task i):")
    done = state["tasks_done"]
    print(np.round(state["A"][:done, :done] * 100, 1))
    for t, history in enumerate(est.generator_history_):
        scores = np.array([e["valid_mse"] for e in history])
        best = int(scores.argmin())
        steps = np.abs(np.diff(scores[max(0, best - 10): best + 11]))
        print(f"generator, task {t}: {len(scores)} epochs, best epoch {best + 1} "
              f"(score {scores[best]:.4f}, first {scores[0]:.4f}); median epoch-to-epoch "
              f"change within 10 epochs of the best {np.median(steps):.5f}")

    data = (load_dsa if dataset == "dsa" else load_uci_har)(args.data_home)
    seen = np.isin(data.y_test, est.classes_)
    x = torch.as_tensor(data.X_test[seen].astype(np.float32))
    y = data.y_test[seen]
    draws = torch.Generator().manual_seed(0)
    head = np.asarray(est._head_classes)

    def label(batch: torch.Tensor) -> np.ndarray:
        return head[est._eval_forward(batch).argmax(1).cpu().numpy()]

    with torch.no_grad():
        mu, log_var = gen.encode(gen._standardized(x))
        sd = torch.exp(0.5 * log_var)
        recon = gen._in_data_units(gen.decode(mu))
        mean_score = F.mse_loss(recon, x).item()
        sampled = np.array([
            F.mse_loss(gen._in_data_units(gen.decode(mu + sd * torch.randn(
                mu.shape, generator=draws))), x).item() for _ in range(20)
        ])
        kl = (-0.5 * (1 + log_var - mu**2 - log_var.exp())).sum(1).mean().item()
        samples = gen.sample(600, torch.Generator().manual_seed(1))
    print(f"\nearly-stopping score on {len(x)} test windows of the seen classes: mean latent "
          f"{mean_score:.4f}, sampled latent {sampled.mean():.4f} (sd over 20 draws "
          f"{sampled.std():.5f}, ratio {sampled.mean() / mean_score:.4f})")
    print(f"posterior: KL {kl:.1f} nats a window; sd mean {sd.mean():.3f} (prior 1); "
          f"|mu| mean {mu.abs().mean():.3f}")

    real, recon_labels = label(x), label(recon)
    print("\nthe network labels, per seen class (real windows | their reconstructions):")
    for c in est.classes_:
        k = y == c
        print(f"  class {c:2d}: {_counts(real[k], est.classes_)} | "
              f"{_counts(recon_labels[k], est.classes_)}")
    print(f"the network's accuracy: real {np.mean(real == y):.3f}, "
          f"reconstructions {np.mean(recon_labels == y):.3f}")

    start = time.perf_counter()
    cache = Path(args.oracle_cache) if args.oracle_cache else None
    if cache is not None and cache.exists():
        oracle = pickle.loads(cache.read_bytes())
    else:
        X_train = data.X_train.astype(np.float32)
        oracle = Offline(max_epochs=args.oracle_epochs, random_state=0).fit(X_train, data.y_train)
        if cache is not None:
            cache.write_bytes(pickle.dumps(oracle))
    print(f"\noracle: Offline, {args.oracle_epochs} epochs on all training windows, "
          f"{time.perf_counter() - start:.0f} s, test accuracy "
          f"{oracle.score(data.X_test.astype(np.float32), data.y_test):.3f}")
    by_net, by_oracle = label(samples), oracle.predict(samples.numpy())
    print("600 generator samples (what the next task replays), per class the network "
          "gives them: how the oracle labels them")
    for c in est.classes_:
        k = by_net == c
        print(f"  network says {c:2d} ({int(k.sum()):3d}): "
              f"oracle {_counts(by_oracle[k], est.classes_)}")
    print(f"samples whose oracle label is the network's: {np.mean(by_net == by_oracle):.3f}")
    recon_by_oracle = oracle.predict(recon.numpy())
    print("the oracle on the real windows' reconstructions, per seen class:")
    for c in est.classes_:
        print(f"  class {c:2d}: {_counts(recon_by_oracle[y == c], est.classes_)}")
    print(f"its accuracy on them: {np.mean(recon_by_oracle == y):.3f}")


if __name__ == "__main__":
    main()
