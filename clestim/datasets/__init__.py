"""Datasets for continual learning: TSCIL benchmarks, MNIST, embedded sets, user data.

All loaders return a :class:`sklearn.utils.Bunch` with ``X_train``, ``y_train``,
``X_test``, ``y_test`` (time series as float32 ``(n, channels, length)``),
``subject_train``/``subject_test`` (``None`` where the source has no subjects),
``channel_names``, ``class_names``, ``n_tasks`` (TSCIL's default number of
tasks), ``class_order``, ``sampling_rate``, ``citation``, ``license``, ``source``
and ``DESCR``.
"""

from ._base import (
    ChecksumError,
    DatasetNotFoundError,
    download,
    get_data_home,
    verify_checksum,
)
from ._benchmarks import (
    load_dsa,
    load_grabmyo,
    load_mnist,
    load_uci_har,
    load_uwave,
    load_wisdm,
    parse_dsa,
    parse_idx,
    parse_uci_har_split,
    parse_uwave,
    parse_wisdm_file,
    split_tscil,
)
from ._custom import from_arrays, load_tscil_pickles
from ._embedded import (
    load_acsf1,
    load_basic_motions,
    load_digits,
    load_japanese_vowels,
    load_osuleaf,
)
from ._registry import list_datasets, load_dataset
from ._video import MOTIONS, load_moving_digits, load_ucf101, read_clip
from ._windows import sliding_windows, subject_train_test_split, tscil_windows

__all__ = [
    "MOTIONS",
    "ChecksumError",
    "DatasetNotFoundError",
    "download",
    "from_arrays",
    "get_data_home",
    "list_datasets",
    "load_acsf1",
    "load_basic_motions",
    "load_dataset",
    "load_digits",
    "load_dsa",
    "load_grabmyo",
    "load_japanese_vowels",
    "load_mnist",
    "load_moving_digits",
    "load_osuleaf",
    "load_tscil_pickles",
    "load_ucf101",
    "load_uci_har",
    "load_uwave",
    "load_wisdm",
    "parse_dsa",
    "parse_idx",
    "parse_uci_har_split",
    "parse_uwave",
    "parse_wisdm_file",
    "read_clip",
    "sliding_windows",
    "split_tscil",
    "subject_train_test_split",
    "tscil_windows",
    "verify_checksum",
]
