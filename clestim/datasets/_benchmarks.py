"""Loaders of the TSCIL benchmark datasets and MNIST.

Every loader looks in ``data_home`` (see :func:`get_data_home`) in this order:

1. the prepared ``.npz`` (``uci_har_inertial.npz``, ``dsa_18cls.npz``, ``uwave.npz``,
   ``wisdm.npz``, ``grabmyo.npz``, ``mnist.npz``) in the layout of the shared
   benchmark folder: ``X_train``, ``y_train``, ``X_test``, ``y_test`` and, where
   the source has them, ``subject_train``, ``subject_test``, ``channels``,
   ``class_names``;
2. the original raw release, anywhere below ``<data_home>/<name>/``; it is
   processed exactly as TSCIL's ``data/*.py`` scripts do and (``cache=True``)
   written back as the prepared ``.npz`` so the next load is fast;
3. with ``download=True`` and a public URL, the raw release is downloaded to
   ``<data_home>/<name>/``, extracted, and processed as in 2.

Offline and without files, the error names the folder and the files to put there.

Design note: TSCIL additionally holds out 10% of the training set for
validation (``train_test_split(test_size=0.1, random_state=0)``) for some
datasets. clestim leaves validation to the estimators (their per-task
validation split), so the loaders return the full training sets.
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from ._base import (
    DatasetNotFoundError,
    download,
    extract_zip,
    get_data_home,
    load_npz,
    make_bunch,
    verify_checksum,
)
from ._info import INFO, TSCIL_CITATION
from ._windows import tscil_windows

# ----------------------------------------------------------------------------- resolution


def _not_found(name: str, home: Path, extra: str = "") -> DatasetNotFoundError:
    info = INFO[name]
    msg = (
        f"dataset {name!r} not found in {home}.\n"
        f"  Either put the prepared file {home / info['prepared']}\n"
        f"  or the original release under {home / name}/ : {info['raw_files']}.\n"
    )
    if info.get("url"):
        msg += f"  Or pass download=True to fetch {info['url']} (needs network).\n"
    msg += ("  The folder can be set with data_home=... or the CLESTIM_DATA environment variable;"
            " by default a ../shared/data folder is also searched "
            "(clestim.datasets.get_data_home).")
    if extra:
        msg += "\n  " + extra
    return DatasetNotFoundError(msg)


def _resolve(name, data_home, *, download_ok, cache, verify, find_raw, parse_raw, fetch,
             required=("X_train", "y_train", "X_test", "y_test")):
    """Return (arrays dict, source description) for a benchmark dataset."""
    home = get_data_home(data_home)
    info = INFO[name]
    npz = home / info["prepared"]
    if npz.is_file():
        if verify and info.get("sha256"):
            verify_checksum(npz, info["sha256"])
        return load_npz(npz, required), str(npz)
    raw_root = home / name
    raw = find_raw(raw_root) if raw_root.is_dir() else None
    if raw is None and download_ok:
        if fetch is None:
            raise _not_found(name, home, "This dataset has no automatic download.")
        try:
            fetch(raw_root)
        except DatasetNotFoundError as exc:
            raise _not_found(name, home, f"Download failed: {exc}") from exc
        raw = find_raw(raw_root)
    if raw is None:
        raise _not_found(name, home)
    data = parse_raw(raw)
    if cache:
        home.mkdir(parents=True, exist_ok=True)
        tmp = npz.with_name(npz.stem + ".tmp.npz")
        np.savez_compressed(tmp, **data)
        tmp.replace(npz)
    return data, str(raw)


def _fetch_zip(name: str):
    def fetch(raw_root: Path):
        url = INFO[name]["url"]
        archive = raw_root / (name + ".zip")
        if not archive.is_file():
            download(url, archive, sha256=INFO[name].get("raw_sha256"))
        extract_zip(archive, raw_root)
    return fetch


def _first(root: Path, pattern: str) -> Path | None:
    return next(iter(sorted(root.rglob(pattern))), None)


def _bunch(name, data, source, **kw):
    info = INFO[name]
    channels = data.get("channels")
    classes = data.get("class_names")
    return make_bunch(
        name=name,
        X_train=data["X_train"],
        y_train=data["y_train"],
        X_test=data["X_test"],
        y_test=data["y_test"],
        subject_train=data.get("subject_train"),
        subject_test=data.get("subject_test"),
        channel_names=None if channels is None else [str(c) for c in channels],
        class_names=None if classes is None else [str(c) for c in classes],
        n_tasks=info["n_tasks"],
        descr=f"{info['summary']}.\nShape (train / test): {info['shape']}. TSCIL default: "
        f"{info['n_tasks']} tasks.\nLoaded from {source}.\n\nBenchmark: {TSCIL_CITATION}",
        citation=info["citation"],
        license=info["license"],
        source=source,
        **kw,
    )


# ----------------------------------------------------------------------------- UCI-HAR

HAR_CHANNELS = [
    "total_acc_x", "total_acc_y", "total_acc_z",
    "body_acc_x", "body_acc_y", "body_acc_z",
    "body_gyro_x", "body_gyro_y", "body_gyro_z",
]
HAR_CLASSES = ["WALKING", "WALKING_UPSTAIRS", "WALKING_DOWNSTAIRS", "SITTING", "STANDING",
               "LAYING"]


def _read_table(path: Path) -> np.ndarray:
    try:
        return np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"cannot parse {path}: {exc}") from exc


def parse_uci_har_split(root: str | os.PathLike, split: str):
    """Parse one split of the original UCI-HAR release, as TSCIL's ``har_inertial.py``.

    Parameters
    ----------
    root : path-like
        The ``UCI HAR Dataset`` folder (holding ``train/`` and ``test/``).
    split : {"train", "test"}

    Returns
    -------
    X : ndarray of shape (n, 9, 128), float32
        Channels in TSCIL order: total_acc xyz, body_acc xyz, body_gyro xyz.
    y : ndarray of shape (n,), int64
        ``y_<split>.txt`` minus 1 (0 WALKING ... 5 LAYING).
    subject : ndarray of shape (n,), int64
        The original subject ids 1..30 (TSCIL re-indexes them per split).
    """
    root = Path(root)
    folder = root / split / "Inertial Signals"
    cols = []
    for ch in HAR_CHANNELS:
        path = folder / f"{ch}_{split}.txt"
        if not path.is_file():
            raise DatasetNotFoundError(f"missing UCI-HAR file {path}")
        cols.append(_read_table(path))
    lengths = {c.shape for c in cols}
    if len(lengths) != 1:
        raise ValueError(f"UCI-HAR {split} signal files disagree in shape: {sorted(lengths)}")
    X = np.stack(cols, axis=1)
    if X.shape[2] != 128:
        raise ValueError(f"UCI-HAR windows must have 128 steps, got {X.shape[2]}")
    if not np.isfinite(X).all():
        raise ValueError(f"UCI-HAR {split} signals contain NaN or infinite values")
    y = _read_table(root / split / f"y_{split}.txt")[:, 0]
    sub = _read_table(root / split / f"subject_{split}.txt")[:, 0]
    for what, v in (("labels", y), ("subjects", sub)):
        if len(v) != len(X):
            raise ValueError(f"UCI-HAR {split}: {len(v)} {what} for {len(X)} windows")
    return X.astype(np.float32), y.astype(np.int64) - 1, sub.astype(np.int64)


def _har_find(raw_root: Path):
    hit = _first(raw_root, "y_train.txt")
    return None if hit is None else hit.parent.parent


def _har_parse(root: Path) -> dict:
    out = {}
    for split in ("train", "test"):
        X, y, s = parse_uci_har_split(root, split)
        out.update({f"X_{split}": X, f"y_{split}": y, f"subject_{split}": s})
    out["channels"] = np.array(HAR_CHANNELS)
    out["class_names"] = np.array(HAR_CLASSES)
    return out


def load_uci_har(data_home=None, *, download: bool = False, cache: bool = True,
                 verify: bool = False):
    """Load UCI-HAR, the 9 raw inertial signals (TSCIL's "har").

    Parameters
    ----------
    data_home : str or path-like, default=None
        Folder to search (see :func:`get_data_home`; env var ``CLESTIM_DATA``).
    download : bool, default=False
        Download the UCI release when nothing is found locally.
    cache : bool, default=True
        After parsing a raw release, save the prepared ``.npz`` in ``data_home``.
    verify : bool, default=False
        Check the prepared ``.npz`` against the SHA-256 of the shared copy.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train`` (7352, 9, 128) and ``X_test`` (2947, 9, 128) float32; labels
        0..5; ``subject_train``/``subject_test`` with the original ids 1..30 (official
        subject-wise split); ``channel_names``, ``class_names``, ``n_tasks=3``,
        ``DESCR``, ``citation``, ``license``.

    Examples
    --------
    >>> from clestim.datasets import load_uci_har
    >>> har = load_uci_har()  # doctest: +SKIP
    >>> har.X_train.shape  # doctest: +SKIP
    (7352, 9, 128)
    """
    data, source = _resolve("uci_har", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_har_find, parse_raw=_har_parse,
                            fetch=_fetch_zip("uci_har"))
    return _bunch("uci_har", data, source, sampling_rate=50.0)


# ----------------------------------------------------------------------------- DSA

DSA_UNITS = ["T", "RA", "LA", "RL", "LL"]
DSA_CHANNELS = [f"{u}_{a}{s}" for u in DSA_UNITS for s in ("acc", "gyro", "mag")
                for a in "xyz"]
DSA_ACTIVITIES = [
    "sitting", "standing", "lying on back", "lying on right side", "ascending stairs",
    "descending stairs", "standing in an elevator still", "moving around in an elevator",
    "walking in a parking lot", "walking on a treadmill 4 km/h flat",
    "walking on a treadmill 4 km/h 15 deg inclined", "running on a treadmill 8 km/h",
    "exercising on a stepper", "exercising on a cross trainer",
    "cycling on an exercise bike horizontal", "cycling on an exercise bike vertical",
    "rowing", "jumping", "playing basketball",
]
DSA_TSCIL_ACTIVITIES = tuple(a for a in range(1, 20) if a != 16)


def parse_dsa(root: str | os.PathLike, *, activities=DSA_TSCIL_ACTIVITIES,
              subjects=range(1, 9), segments=range(1, 61)):
    """Read DSA segment files ``a{act:02d}/p{sub}/s{seg:02d}.txt`` as TSCIL does.

    Parameters
    ----------
    root : path-like
        Folder holding ``a01`` ... ``a19``.
    activities, subjects, segments : iterables of int
        Which files to read, in TSCIL's loop order (activity, subject, segment).
        The default activities skip 16, as TSCIL does.

    Returns
    -------
    X : ndarray of shape (n, 45, 125), float32
    y : ndarray of shape (n,), int64
        ``act - 1`` for activities up to 15, ``act - 2`` above 16.
    subject : ndarray of shape (n,), int64
        Subject ids 1..8.
    """
    root = Path(root)
    X, y, s = [], [], []
    for act in activities:
        label = act - 1 if act < 16 else act - 2
        for sub in subjects:
            for seg in segments:
                path = root / f"a{act:02d}" / f"p{sub}" / f"s{seg:02d}.txt"
                if not path.is_file():
                    raise DatasetNotFoundError(f"missing DSA segment file {path}")
                arr = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
                if arr.shape != (125, 45):
                    raise ValueError(f"{path}: expected 125 rows x 45 columns, got {arr.shape}")
                if not np.isfinite(arr).all():
                    raise ValueError(f"{path} contains NaN or infinite values")
                X.append(arr.T)
                y.append(label)
                s.append(sub)
    return np.stack(X).astype(np.float32), np.array(y, np.int64), np.array(s, np.int64)


def split_tscil(X, y, subject=None, *, test_size=0.25, random_state=0) -> dict:
    """TSCIL's split: ``train_test_split(test_size=0.25, random_state=0, stratify=y)``."""
    arrays = [X, y] + ([] if subject is None else [subject])
    parts = train_test_split(*arrays, test_size=test_size, random_state=random_state,
                             stratify=y)
    out = {"X_train": parts[0], "X_test": parts[1], "y_train": parts[2], "y_test": parts[3]}
    if subject is not None:
        out["subject_train"], out["subject_test"] = parts[4], parts[5]
    return out


def _dsa_find(raw_root: Path):
    hit = _first(raw_root, "a01")
    return hit.parent if hit is not None and hit.is_dir() else None


def _dsa_parse(root: Path) -> dict:
    X, y, s = parse_dsa(root)
    out = split_tscil(X, y, s)
    out["channels"] = np.array(DSA_CHANNELS)
    out["class_names"] = np.array([DSA_ACTIVITIES[a - 1] for a in DSA_TSCIL_ACTIVITIES])
    return out


def load_dsa(data_home=None, *, download: bool = False, cache: bool = True,
             verify: bool = False):
    """Load UCI Daily and Sports Activities in TSCIL's 18-class form ("dailysports").

    Activity 16 (vertical exercise bike) is dropped as in TSCIL's code; the 8,640
    segments of 5 s at 25 Hz are split 75/25 stratified by class with
    ``random_state=0``. Subjects appear in both splits (not a subject-wise split).

    Parameters
    ----------
    data_home, download, cache, verify
        As in :func:`load_uci_har`.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train`` (6480, 45, 125) and ``X_test`` (2160, 45, 125) float32, labels
        0..17, ``subject_train``/``subject_test`` (1..8), ``n_tasks=9``. The shared
        prepared file stores float16 (relative rounding at most 2**-11).

    Examples
    --------
    >>> from clestim.datasets import load_dsa
    >>> dsa = load_dsa()  # doctest: +SKIP
    >>> dsa.X_test.shape  # doctest: +SKIP
    (2160, 45, 125)
    """
    data, source = _resolve("dsa", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_dsa_find, parse_raw=_dsa_parse,
                            fetch=_fetch_zip("dsa"))
    return _bunch("dsa", data, source, sampling_rate=25.0)


# ----------------------------------------------------------------------------- UWave

UWAVE_ORDER = [0, 2, 1, 3, 4, 6, 5, 7]  # TSCIL's preset class order


def _parse_ucr_rows(path: Path):
    """Rows of a univariate UCR file: (values (n, L), labels (n,))."""
    suffix = path.suffix.lower()
    text = path.read_text()
    rows, labels = [], []
    if suffix in (".ts", ".arff"):
        in_data = False
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "%")):
                continue
            if not in_data:
                in_data = line.lower() == "@data"
                continue
            if suffix == ".ts":
                values, _, lab = line.rpartition(":")
                vals = values.split(",")
            else:
                *vals, lab = line.split(",")
            rows.append([float(v) for v in vals])
            labels.append(lab.strip().strip("'\""))
    else:  # UCR text: label first, separated by commas, tabs or spaces
        for line in text.splitlines():
            parts = re.split(r"[,\s]+", line.strip())
            if parts == [""]:
                continue
            labels.append(parts[0])
            rows.append([float(v) for v in parts[1:]])
    lengths = {len(r) for r in rows}
    if len(lengths) != 1:
        raise ValueError(f"{path}: rows have different lengths {sorted(lengths)}")
    X = np.array(rows, dtype=np.float64)
    y = np.array([float(v) for v in labels])
    if not np.isfinite(X).all():
        raise ValueError(f"{path} contains NaN or infinite values")
    return X, y


def parse_uwave(train_file, test_file) -> dict:
    """Parse UCR ``UWaveGestureLibraryAll`` train/test files into (n, 3, 315).

    Each row of 945 values is the x, y and z series (315 each) laid end to end,
    so it is reshaped to ``(3, 315)``; labels 1..8 become 0..7. This equals TSCIL's
    ``uwave.py``, which stacks the UEA X/Y/Z files.
    """
    out = {}
    for split, f in (("train", Path(train_file)), ("test", Path(test_file))):
        X, y = _parse_ucr_rows(f)
        if X.shape[1] != 945:
            raise ValueError(f"{f}: UWaveGestureLibraryAll rows have 945 values, "
                             f"got {X.shape[1]}")
        out[f"X_{split}"] = X.reshape(len(X), 3, 315).astype(np.float32)
        out[f"y_{split}"] = y.astype(np.int64) - 1
    out["channels"] = np.array(["acc_x", "acc_y", "acc_z"])
    out["class_names"] = np.array([f"gesture_{i}" for i in range(1, 9)])
    return out


def _uwave_find(raw_root: Path):
    for ext in (".ts", ".tsv", ".txt", ".arff", ""):
        tr = _first(raw_root, f"UWaveGestureLibraryAll_TRAIN{ext}")
        te = _first(raw_root, f"UWaveGestureLibraryAll_TEST{ext}")
        if tr is not None and te is not None and tr.is_file() and te.is_file():
            return tr, te
    return None


def load_uwave(data_home=None, *, download: bool = False, cache: bool = True,
               verify: bool = False):
    """Load uWave gestures, UCR ``UWaveGestureLibraryAll`` reshaped 945 -> 3x315.

    Parameters
    ----------
    data_home, download, cache, verify
        As in :func:`load_uci_har`.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train`` (896, 3, 315), ``X_test`` (3582, 3, 315) float32 with the official
        UCR split, labels 0..7, ``n_tasks=4``, and ``class_order`` = TSCIL's preset
        order [0, 2, 1, 3, 4, 6, 5, 7]. No subject ids (the UCR release has none).
    """
    data, source = _resolve("uwave", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_uwave_find,
                            parse_raw=lambda files: parse_uwave(*files),
                            fetch=_fetch_zip("uwave"))
    return _bunch("uwave", data, source, class_order=UWAVE_ORDER, sampling_rate=100.0)


# ----------------------------------------------------------------------------- WISDM

WISDM_CODES = "ABCDEFGHIJKLMOPQRS"  # N is absent from the release
WISDM_ACTIVITIES = [
    "walking", "jogging", "stairs", "sitting", "standing", "typing", "brushing teeth",
    "eating soup", "eating chips", "eating pasta", "drinking from cup", "eating sandwich",
    "kicking (soccer ball)", "playing catch w/tennis ball", "dribbling (basketball)",
    "writing", "clapping", "folding clothes",
]
WISDM_SUBJECTS = tuple(range(1600, 1651))


def parse_wisdm_file(path: str | os.PathLike):
    """Read one WISDM raw file (``subject,code,timestamp,x,y,z;`` per line).

    Returns
    -------
    xyz : ndarray of shape (n_rows, 3), float64
    activity : ndarray of shape (n_rows,), int64
        0..17 following the code order A..S without N.
    """
    path = Path(path)
    xyz, act = [], []
    lookup = {c: i for i, c in enumerate(WISDM_CODES)}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip().rstrip(";")
            if not line:
                continue
            parts = line.split(",")
            if len(parts) != 6 or parts[1] not in lookup:
                raise ValueError(f"{path}:{lineno}: not a WISDM row: {line[:60]!r}")
            act.append(lookup[parts[1]])
            xyz.append([float(v) for v in parts[3:]])
    xyz = np.array(xyz, dtype=np.float64).reshape(-1, 3)
    if not np.isfinite(xyz).all():
        raise ValueError(f"{path} contains NaN or infinite values")
    return xyz, np.array(act, dtype=np.int64)


def wisdm_windows(files, subjects, *, window: int = 200, stride: int = 200):
    """Window WISDM recordings per subject and activity as TSCIL's ``wisdm.py``.

    For each subject (in the given order) and activity 0..17, the rows of that
    activity (in file order) are cut with :func:`tscil_windows`.

    Returns
    -------
    X : ndarray of shape (n, 3, window), float32
    y, subject : ndarrays of shape (n,), int64
    """
    X, y, s = [], [], []
    for path, sub in zip(files, subjects, strict=True):
        xyz, act = parse_wisdm_file(path)
        for a in range(len(WISDM_CODES)):
            rows = xyz[act == a]
            if len(rows) == 0:
                continue
            w = tscil_windows(rows, window, stride)
            X.append(w)
            y.append(np.full(len(w), a, np.int64))
            s.append(np.full(len(w), sub, np.int64))
    return np.concatenate(X).astype(np.float32), np.concatenate(y), np.concatenate(s)


def _wisdm_find(raw_root: Path):
    first = _first(raw_root, "data_1600_accel_phone.txt")
    if first is None:
        return None
    files = [first.parent / f"data_{s}_accel_phone.txt" for s in WISDM_SUBJECTS]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise DatasetNotFoundError(f"WISDM folder {first.parent} lacks {missing}")
    return files


def _wisdm_parse(files) -> dict:
    X, y, s = wisdm_windows(files, WISDM_SUBJECTS)
    out = split_tscil(X, y, s)
    out["channels"] = np.array(["acc_x", "acc_y", "acc_z"])
    out["class_names"] = np.array(WISDM_ACTIVITIES)
    return out


def load_wisdm(data_home=None, *, download: bool = False, cache: bool = True,
               verify: bool = False):
    """Load WISDM 2019, smartphone accelerometer, 18 activities, windows of 200.

    Processing follows TSCIL's ``wisdm.py``: per subject (1600..1650) and activity,
    non-overlapping windows of 200 steps (10 s at 20 Hz) with zero padding of the
    last one (see :func:`tscil_windows`), then a stratified 75/25 split with
    ``random_state=0``.

    Parameters
    ----------
    data_home, download, cache, verify
        As in :func:`load_uci_har`.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``/``X_test`` shaped (n, 3, 200) float32, labels 0..17, subject ids
        1600..1650, ``n_tasks=9``.
    """
    data, source = _resolve("wisdm", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_wisdm_find, parse_raw=_wisdm_parse,
                            fetch=_fetch_zip("wisdm"))
    return _bunch("wisdm", data, source, sampling_rate=20.0)


# ----------------------------------------------------------------------------- GRABMyo

GRABMYO_CHANNELS = [f"forearm_{i}" for i in range(1, 17)] + [f"wrist_{i}" for i in range(1, 13)]


def grabmyo_windows(files, subjects, *, n_trials: int = 7, n_gestures: int = 16,
                    resample_length: int = 256 * 5, window: int = 128, stride: int = 128):
    """Window GRABMyo session recordings as TSCIL's ``grabmyo.py`` ("combined" group).

    For each participant file, trial and gesture (the 17th, rest, is discarded):
    forearm (16) and wrist (12) channels are concatenated, NaNs set to 0
    (``np.nan_to_num``, as TSCIL does), the 5 s record is resampled with
    :func:`scipy.signal.resample` to ``resample_length`` steps (2048 -> 256 Hz), and
    cut with :func:`tscil_windows`.

    Returns
    -------
    X : ndarray of shape (n, 28, window), float32
    y, subject : ndarrays of shape (n,), int64
    """
    from scipy.io import loadmat
    from scipy.signal import resample

    X, y, s = [], [], []
    for path, sub in zip(files, subjects, strict=True):
        try:
            mat = loadmat(path)
        except Exception as exc:  # noqa: BLE001 - any failure is a bad file
            raise ValueError(f"cannot read {path}: {exc}") from exc
        try:
            fore, wrist = mat["DATA_FOREARM"], mat["DATA_WRIST"]
        except KeyError as exc:
            raise ValueError(f"{path} lacks DATA_FOREARM/DATA_WRIST") from exc
        for trial in range(n_trials):
            for g in range(n_gestures):
                rec = np.concatenate([np.asarray(fore[trial][g], np.float64),
                                      np.asarray(wrist[trial][g], np.float64)], axis=1)
                rec = resample(np.nan_to_num(rec), resample_length)
                w = tscil_windows(rec, window, stride)
                X.append(w)
                y.append(np.full(len(w), g, np.int64))
                s.append(np.full(len(w), sub, np.int64))
    return np.concatenate(X).astype(np.float32), np.concatenate(y), np.concatenate(s)


def _grabmyo_find(raw_root: Path):
    first = _first(raw_root, "session1_participant1.mat")
    if first is None:
        return None
    files = [first.parent / f"session1_participant{p}.mat" for p in range(1, 44)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise DatasetNotFoundError(f"GRABMyo folder {first.parent} lacks {missing}")
    return files


def _grabmyo_parse(files) -> dict:
    X, y, s = grabmyo_windows(files, range(1, 44))
    out = split_tscil(X, y, s)
    out["channels"] = np.array(GRABMYO_CHANNELS)
    out["class_names"] = np.array([f"gesture_{i}" for i in range(1, 17)])
    return out


def load_grabmyo(data_home=None, *, download: bool = False, cache: bool = True,
                 verify: bool = False):
    """Load GRABMyo session 1 (28-channel sEMG), 16 gestures, 256 Hz windows of 128.

    See :func:`grabmyo_windows` for the processing (TSCIL's ``grabmyo.py``), followed
    by a stratified 75/25 split with ``random_state=0``. There is no automatic
    download: the PhysioNet release is WFDB and several GB; convert session 1 to
    ``session1_participant{1..43}.mat`` and place the files under
    ``<data_home>/grabmyo/``.

    Parameters
    ----------
    data_home, download, cache, verify
        As in :func:`load_uci_har`.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train`` (36120, 28, 128) and ``X_test`` (12040, 28, 128) float32, labels
        0..15, participant ids 1..43, ``n_tasks=8``.
    """
    data, source = _resolve("grabmyo", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_grabmyo_find, parse_raw=_grabmyo_parse,
                            fetch=None)
    return _bunch("grabmyo", data, source, sampling_rate=256.0)


# ----------------------------------------------------------------------------- MNIST

MNIST_FILES = {  # name -> md5 of the uncompressed IDX file
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}


def parse_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an IDX file (magic 2049 labels / 2051 images), optionally gzipped."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path} is too short to be an IDX file")
    magic = int.from_bytes(raw[:4], "big")
    if magic not in (2049, 2051):
        raise ValueError(f"{path}: bad IDX magic number {magic}")
    ndim = magic - 2048
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    n = int(np.prod(dims))
    if len(raw) - offset != n:
        raise ValueError(f"{path}: header promises {n} bytes of data, found {len(raw) - offset}")
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def _mnist_find(raw_root: Path):
    found = {}
    for name in MNIST_FILES:
        hit = _first(raw_root, name) or _first(raw_root, name + ".gz")
        if hit is None:
            return None
        found[name] = hit
    return found


def _mnist_parse(files) -> dict:
    arrays = {k: parse_idx(p) for k, p in files.items()}
    import hashlib

    for k, arr in arrays.items():
        # the md5 covers the whole uncompressed file; rebuild its header
        ndim = arr.ndim
        header = (2048 + ndim).to_bytes(4, "big") + b"".join(
            d.to_bytes(4, "big") for d in arr.shape)
        got = hashlib.md5(header + arr.tobytes()).hexdigest()
        if got != MNIST_FILES[k]:
            raise ValueError(f"md5 mismatch for {files[k]}: expected {MNIST_FILES[k]}, got {got}; "
                             "the file is corrupt or not the original MNIST")
    return {
        "X_train": arrays["train-images-idx3-ubyte"], "y_train": arrays["train-labels-idx1-ubyte"],
        "X_test": arrays["t10k-images-idx3-ubyte"], "y_test": arrays["t10k-labels-idx1-ubyte"],
    }


def _mnist_fetch(raw_root: Path):
    for name in MNIST_FILES:
        dest = raw_root / (name + ".gz")
        if not dest.is_file():
            # integrity is checked on the uncompressed bytes (md5 above)
            download(INFO["mnist"]["url"] + name + ".gz", dest, sha256=None)


def load_mnist(data_home=None, *, flatten: bool = True, scale: bool = True,
               download: bool = False, cache: bool = True, verify: bool = False):
    """Load MNIST (60,000 train / 10,000 test handwritten digits).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Folder holding ``mnist.npz`` or the four IDX files under ``mnist/``.
    flatten : bool, default=True
        True gives flat vectors ``(n, 784)``; False gives images ``(n, 1, 28, 28)``.
    scale : bool, default=True
        Divide pixels by 255 (values in [0, 1]); False keeps 0..255 as float32.
    download, cache, verify
        As in :func:`load_uci_har`. Raw IDX files are checked against the md5 of
        the original release.

    Returns
    -------
    data : sklearn.utils.Bunch
        ``X_train``, ``y_train`` (0..9), ``X_test``, ``y_test``; ``n_tasks=5``
        (split MNIST). ``channel_names`` is ``None``: this is image data.

    Examples
    --------
    >>> from clestim.datasets import load_mnist
    >>> mnist = load_mnist(flatten=False)  # doctest: +SKIP
    >>> mnist.X_train.shape  # doctest: +SKIP
    (60000, 1, 28, 28)
    """
    data, source = _resolve("mnist", data_home, download_ok=download, cache=cache,
                            verify=verify, find_raw=_mnist_find, parse_raw=_mnist_parse,
                            fetch=_mnist_fetch)
    info = INFO["mnist"]
    out = {}
    for split in ("train", "test"):
        X = np.asarray(data[f"X_{split}"])
        if X.ndim != 3 or X.shape[1:] != (28, 28):
            raise ValueError(f"MNIST X_{split} must be (n, 28, 28), got {X.shape}")
        y = np.asarray(data[f"y_{split}"]).astype(np.int64)
        if len(y) != len(X):
            raise ValueError(f"MNIST: {len(y)} labels for {len(X)} images ({split})")
        X = X.astype(np.float32)
        if scale:
            X /= 255.0
        out[split] = (X.reshape(len(X), -1) if flatten else X[:, None], y)
    from sklearn.utils import Bunch

    descr = (f"{info['summary']}.\nShape: {info['shape']}. Default: {info['n_tasks']} tasks "
             f"(split MNIST).\nLoaded from {source}.")
    return Bunch(
        name="mnist", X_train=out["train"][0], y_train=out["train"][1],
        X_test=out["test"][0], y_test=out["test"][1], subject_train=None, subject_test=None,
        channel_names=None, class_names=[str(i) for i in range(10)], n_tasks=info["n_tasks"],
        class_order=None, sampling_rate=None, citation=info["citation"],
        license=info["license"], source=source,
        DESCR=f"{descr}\n\nCitation\n--------\n{info['citation']}\n\nLicence\n-------\n"
        f"{info['license']}\n",
    )
