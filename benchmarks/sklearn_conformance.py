"""The snippets of issue 13, with clestim's defaults: scorers, binary ROC AUC,
single-channel series and tabular data.

Run: ``python benchmarks/sklearn_conformance.py`` (a few minutes on 2 cores).
Prints one line per finding with the number the issue asks for.
"""

import numpy as np
from sklearn.datasets import load_digits, load_iris, make_blobs
from sklearn.metrics import get_scorer, log_loss
from sklearn.model_selection import cross_val_score

from clestim import ClassIncremental, Naive


def main():
    X, y = make_blobs(400, centers=4, random_state=0)
    y = np.array([2, 0, 1, 3])[y]  # first appearance is not sorted
    est = Naive(backbone="mlp", random_state=0).partial_fit_task(X, y)
    direct = -log_loss(y, est.predict_proba(X), labels=est.classes_)
    print(f"classes_ {est.classes_.tolist()}; task_classes_ {est.task_classes_[0].tolist()}")
    print(f"neg_log_loss scorer {get_scorer('neg_log_loss')(est, X, y):.4f} (direct {direct:.4f})")
    print(f"roc_auc_ovr scorer {get_scorer('roc_auc_ovr')(est, X, y):.4f}")

    Xb, yb = make_blobs(200, centers=2, random_state=0)
    auc = cross_val_score(Naive(backbone="mlp", random_state=0), Xb, yb, cv=3, scoring="roc_auc")
    print(f"binary cross_val_score roc_auc {np.round(auc, 4).tolist()}")

    Xd, yd = load_digits(return_X_y=True)
    Xd = Xd[:, None, :].astype(np.float32)  # (n, 1, 64)
    stream = ClassIncremental(classes_per_task=2, shuffle=False)
    est = Naive(random_state=0, stream=stream).fit(Xd, yd)
    last = np.isin(yd, est.task_classes_[-1])
    print(f"digits (n, 1, 64) defaults: input_norm_={est.input_norm_!r}, "
          f"{est.n_tasks_seen_} tasks, accuracy on the last (current) task "
          f"{np.mean(est.predict(Xd[last]) == yd[last]):.3f}")
    for t, classes in enumerate(est.task_classes_):
        keep = np.isin(yd, classes)
        acc = np.mean(est.predict(Xd[keep], after_task=t) == yd[keep])
        print(f"  task {t} {classes.tolist()}: current-task accuracy right after it {acc:.3f}")

    for name, (Xt, yt) in {
        "iris": load_iris(return_X_y=True),
        "make_blobs": make_blobs(300, random_state=0),
    }.items():
        est = Naive(random_state=0).fit(Xt, yt)
        print(f"{name} defaults: {est.n_tasks_seen_} task(s), training accuracy "
              f"{est.score(Xt, yt):.3f}")


if __name__ == "__main__":
    main()
