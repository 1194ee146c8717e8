"""sktime transformers in front of a clestim estimator, learning task by task.

JapaneseVowels has series of unequal length (7 to 29 time points, 12 channels).
``PaddingTransformer`` pads them to a fixed length and a per-series
z-normalisation (``TabularToSeriesAdaptor(StandardScaler(), fit_in_transform=True)``)
scales each channel of each series; ``ContinualPipeline`` feeds the result to ER.
The pipeline fits its transformers on the first task only, then learns the
stream with ``partial_fit_task``; ``fit`` would do the same in one call.

    python examples/sktime_pipeline.py
"""

import numpy as np
from sklearn.preprocessing import StandardScaler
from sktime.datasets import load_japanese_vowels
from sktime.transformations.padder import PaddingTransformer
from sktime.transformations.series.adapt import TabularToSeriesAdaptor

from clestim import ER
from clestim.metrics import compute_metrics, snapshot_accuracy_matrix
from clestim.pipeline import make_continual_pipeline
from clestim.streams import ClassIncremental


def main():
    X, y = load_japanese_vowels()  # 640 series, 9 speakers
    rng = np.random.default_rng(0)
    test = np.zeros(len(y), dtype=bool)
    for c in np.unique(y):
        test[rng.permutation(np.flatnonzero(y == c))[:10]] = True
    X_train, y_train = X[~test].reset_index(drop=True), y[~test]
    X_test, y_test = X[test].reset_index(drop=True), y[test]

    stream = ClassIncremental(classes_per_task=3, shuffle=False)  # 3 tasks of 3 speakers
    pipe = make_continual_pipeline(
        PaddingTransformer(pad_length=29),  # fixed: later tasks may hold longer series
        TabularToSeriesAdaptor(StandardScaler(), fit_in_transform=True),
        ER(
            backbone="cnn",
            backbone_params={"channels": (16, 16, 16, 16)},
            max_epochs=3,
            memory_size=0.2,
            patience=None,
            stream=stream,
            random_state=0,
        ),
    )
    for t, idx in enumerate(stream.split(X_train, y_train)):
        pipe.partial_fit_task(X_train.iloc[idx].reset_index(drop=True), y_train[idx])
        print(f"learnt task {t + 1}: speakers {pipe.task_classes_[t].tolist()}")

    A = snapshot_accuracy_matrix(pipe, X_test, y_test)
    print("accuracy matrix (rows: after task i, columns: task j)")
    print(np.round(A, 3))
    print({k: round(v, 3) for k, v in compute_metrics(A).items()})


if __name__ == "__main__":
    main()
