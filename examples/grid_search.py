"""GridSearchCV over ER hyperparameters, scored by average forgetting.

Each candidate learns a class-incremental stream (digits, 3 tasks of 2 classes)
on the training folds; the scorer rebuilds the accuracy matrix from the
estimator's per-task weight snapshots on the held-out fold and returns minus the
average forgetting F_T (scikit-learn maximises scores). Runs in a few seconds.

    python examples/grid_search.py
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split

from clestim import ER
from clestim.evaluation import evaluate_stream
from clestim.metrics import make_stream_scorer
from clestim.streams import ClassIncremental


def main():
    X, y = load_digits(return_X_y=True)
    keep = y < 6  # 6 classes -> 3 tasks of 2
    X, y = (X[keep] / 16.0).astype(np.float32), y[keep]
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )

    stream = ClassIncremental(classes_per_task=2, random_state=0)
    er = ER(
        backbone="mlp",
        backbone_params={"hidden": (64,)},
        max_epochs=3,
        patience=None,
        validation_fraction=0.0,
        stream=stream,
        random_state=0,
    )
    search = GridSearchCV(
        er,
        {"memory_size": [0.02, 0.2], "lr": [1e-3, 3e-3]},
        scoring={
            "forgetting": make_stream_scorer("average_forgetting"),
            "accuracy": make_stream_scorer("average_accuracy"),
        },
        refit="forgetting",
        cv=StratifiedKFold(3, shuffle=True, random_state=0),
        n_jobs=2,
    )
    search.fit(X_train, y_train)

    print("candidate                          F_T (%)   A_T (%)")
    for params, f, a in zip(
        search.cv_results_["params"],
        search.cv_results_["mean_test_forgetting"],
        search.cv_results_["mean_test_accuracy"],
    ):
        print(f"{str(params):34s} {-100 * f:7.1f}   {100 * a:7.1f}")
    print("best:", search.best_params_)

    # the chosen configuration, trained once more and evaluated after every task
    result = evaluate_stream(search.best_estimator_, stream, X_train, y_train, X_test, y_test)
    print(result.to_frame("matrix").round(3))
    print({k: round(v, 3) for k, v in result.metrics.items()})


if __name__ == "__main__":
    main()
