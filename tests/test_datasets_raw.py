"""Raw-format parsers, offline download path, windowing and custom data."""

import gzip
import pickle
import re
import zipfile

import numpy as np
import pytest
from scipy.io import savemat
from scipy.signal import resample

from clestim import datasets as D
from clestim.datasets import _benchmarks as B
from clestim.datasets._info import INFO

# ----------------------------------------------------------------------------- UCI-HAR


def _har_text(rows: np.ndarray) -> str:
    """Rows in the original layout: '  1.8085150e-004 -1.2345670e-002 ...'."""
    def fmt(v):
        s = f"{float(v): .7e}"
        return re.sub(r"e([+-])(\d\d)$", r"e\g<1>0\2", s)
    return "".join(" " + " ".join(fmt(v) for v in r) + "\n" for r in rows)


def _write_har(root, split, X, y, s):
    folder = root / split / "Inertial Signals"
    folder.mkdir(parents=True)
    for c, ch in enumerate(B.HAR_CHANNELS):
        (folder / f"{ch}_{split}.txt").write_text(_har_text(X[:, c]))
    (root / split / f"y_{split}.txt").write_text("".join(f"{v + 1}\n" for v in y))
    (root / split / f"subject_{split}.txt").write_text("".join(f"{v}\n" for v in s))


def test_uci_har_raw_release(shared_data, tmp_path):
    with np.load(shared_data / "uci_har_inertial.npz") as d:
        idx_tr, idx_te = [284, 0, 5000], [0, 2946]
        tr = d["X_train"][idx_tr], d["y_train"][idx_tr], d["subject_train"][idx_tr]
        te = d["X_test"][idx_te], d["y_test"][idx_te], d["subject_test"][idx_te]
    root = tmp_path / "uci_har" / "UCI HAR Dataset"
    _write_har(root, "train", *tr)
    _write_har(root, "test", *te)
    first_line = (root / "train/Inertial Signals/body_acc_x_train.txt").read_text()[:34]
    assert first_line.startswith("  1.80851") and "e-004" in first_line

    har = D.load_uci_har(tmp_path)
    np.testing.assert_array_equal(har.X_train, tr[0])  # exact, float32
    np.testing.assert_array_equal(har.y_train, tr[1])
    np.testing.assert_array_equal(har.subject_train, tr[2])
    np.testing.assert_array_equal(har.X_test, te[0])
    assert har.X_train[0, 3, 0] == np.float32(1.808515e-04) and har.y_train[0] == 4
    assert har.source.endswith("UCI HAR Dataset")
    # processed once, then served from the cached prepared file
    assert (tmp_path / "uci_har_inertial.npz").is_file()
    again = D.load_uci_har(tmp_path)
    assert again.source.endswith("uci_har_inertial.npz")
    np.testing.assert_array_equal(again.X_test, te[0])


def test_uci_har_raw_bad_files(tmp_path):
    X = np.ones((2, 9, 128))
    root = tmp_path / "UCI HAR Dataset"
    _write_har(root, "train", X, np.array([0, 1]), np.array([1, 1]))
    (root / "train" / "y_train.txt").write_text("1\n2\n3\n")
    with pytest.raises(ValueError, match="3 labels for 2 windows"):
        D.parse_uci_har_split(root, "train")
    p = root / "train/Inertial Signals/body_gyro_z_train.txt"
    p.write_text(p.read_text().replace("1.0000000e+000", "NaN", 1))
    with pytest.raises(ValueError, match="NaN"):
        D.parse_uci_har_split(root, "train")
    p.unlink()
    with pytest.raises(D.DatasetNotFoundError, match="body_gyro_z_train.txt"):
        D.parse_uci_har_split(root, "train")


# ----------------------------------------------------------------------------- DSA


def test_dsa_segments(shared_data, tmp_path):
    with np.load(shared_data / "dsa_18cls.npz") as d:
        X, y, s = d["X_train"], d["y_train"], d["subject_train"]
    acts, subs, segs = (1, 15, 17, 19), (1, 2), (1, 2)
    expected = []
    for act in acts:
        label = act - 1 if act < 16 else act - 2
        for sub in subs:
            rows = np.flatnonzero((y == label) & (s == sub))[: len(segs)]
            for seg, r in zip(segs, rows):
                folder = tmp_path / f"a{act:02d}" / f"p{sub}"
                folder.mkdir(parents=True, exist_ok=True)
                seg_rows = X[r].T.astype(np.float64)  # (125, 45) as in the release
                (folder / f"s{seg:02d}.txt").write_text(
                    "".join(",".join(repr(float(v)) for v in row) + "\n" for row in seg_rows))
                expected.append((X[r].astype(np.float32), label, sub))
    Xp, yp, sp = D.parse_dsa(tmp_path, activities=acts, subjects=subs, segments=segs)
    assert Xp.shape == (16, 45, 125) and Xp.dtype == np.float32
    np.testing.assert_array_equal(Xp, np.stack([e[0] for e in expected]))
    assert yp.tolist() == [0] * 4 + [14] * 4 + [15] * 4 + [17] * 4
    assert sp.tolist() == [1, 1, 2, 2] * 4
    parts = D.split_tscil(Xp, yp, sp, test_size=0.25)
    assert parts["X_train"].shape == (12, 45, 125) and np.bincount(parts["y_test"])[[0, 14]] \
        .tolist() == [1, 1]
    # a malformed segment is reported with its path
    bad = tmp_path / "a01" / "p1" / "s01.txt"
    bad.write_text("1,2,3\n")
    with pytest.raises(ValueError, match=r"s01.txt: expected 125 rows x 45 columns"):
        D.parse_dsa(tmp_path, activities=(1,), subjects=(1,), segments=(1,))


# ----------------------------------------------------------------------------- UWave


def _uwave_rows(n, seed):
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(size=(n, 945)), 6), rng.integers(1, 9, size=n)


def test_uwave_text_and_ts_formats(tmp_path):
    Xtr, ytr = _uwave_rows(4, 0)
    Xte, yte = _uwave_rows(3, 1)
    tsv = tmp_path / "tsv"
    tsv.mkdir()
    for split, X, y in (("TRAIN", Xtr, ytr), ("TEST", Xte, yte)):
        (tsv / f"UWaveGestureLibraryAll_{split}.tsv").write_text(
            "".join(f"{lab}\t" + "\t".join(repr(float(v)) for v in row) + "\n"
                    for row, lab in zip(X, y)))
    ts = tmp_path / "ts"
    ts.mkdir()
    for split, X, y in (("TRAIN", Xtr, ytr), ("TEST", Xte, yte)):
        head = "#comment\n@problemName UWaveGestureLibraryAll\n@univariate true\n@data\n"
        (ts / f"UWaveGestureLibraryAll_{split}.ts").write_text(head + "".join(
            ",".join(repr(float(v)) for v in row) + f":{lab}\n" for row, lab in zip(X, y)))
    for folder, ext in ((tsv, "tsv"), (ts, "ts")):
        out = D.parse_uwave(folder / f"UWaveGestureLibraryAll_TRAIN.{ext}",
                            folder / f"UWaveGestureLibraryAll_TEST.{ext}")
        assert out["X_train"].shape == (4, 3, 315) and out["X_test"].shape == (3, 3, 315)
        assert out["X_train"][1, 1, 0] == np.float32(Xtr[1, 315])
        assert out["X_train"][1, 2, 314] == np.float32(Xtr[1, 944])
        np.testing.assert_array_equal(out["y_test"], yte - 1)
    short = tmp_path / "short.txt"
    short.write_text("1 0.5 0.25\n")
    with pytest.raises(ValueError, match="945 values, got 2"):
        D.parse_uwave(short, short)


def test_uwave_download_path_offline(tmp_path, monkeypatch):
    """The download code path, run against a local file:// URL (no network)."""
    Xtr, ytr = _uwave_rows(8, 2)
    archive = tmp_path / "src" / "UWaveGestureLibraryAll.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        for split in ("TRAIN", "TEST"):
            zf.writestr(f"UWaveGestureLibraryAll/UWaveGestureLibraryAll_{split}.txt",
                        "".join(f"{lab:.7e} " + " ".join(f"{v:.7e}" for v in row) + "\n"
                                for row, lab in zip(Xtr, ytr)))
    home = tmp_path / "home"
    monkeypatch.setitem(INFO["uwave"], "url", archive.as_uri())
    with pytest.warns(UserWarning, match="no pinned checksum"):
        uw = D.load_uwave(home, download=True)
    assert uw.X_train.shape == (8, 3, 315) and uw.class_order == [0, 2, 1, 3, 4, 6, 5, 7]
    np.testing.assert_array_equal(uw.y_train, ytr - 1)
    assert (home / "uwave.npz").is_file() and (home / "uwave" / "uwave.zip").is_file()
    # a pinned digest that does not match removes the partial file
    monkeypatch.setitem(INFO["uwave"], "raw_sha256", "0" * 64)
    with pytest.raises(D.ChecksumError):
        D.download(archive.as_uri(), tmp_path / "x.zip", sha256="0" * 64)
    assert not (tmp_path / "x.zip").exists() and not (tmp_path / "x.zip.part").exists()
    # offline: a clear error that says where to put which files
    monkeypatch.setitem(INFO["uwave"], "url", (tmp_path / "nowhere.zip").as_uri())
    with pytest.raises(D.DatasetNotFoundError) as exc:
        D.load_uwave(tmp_path / "empty", download=True)
    msg = str(exc.value)
    assert "Download failed" in msg and "UWaveGestureLibraryAll_TRAIN" in msg
    assert str(tmp_path / "empty" / "uwave") in msg


# ----------------------------------------------------------------------------- WISDM


def _wisdm_lines(sub, code, xyz, t0=0):
    return "".join(f"{sub},{code},{t0 + i * 50000000},{float(x)!r},{float(y)!r},{float(z)!r};\n"
                   for i, (x, y, z) in enumerate(xyz))


def test_wisdm_windows_exact(tmp_path):
    a = np.arange(450 * 3, dtype=float).reshape(450, 3) / 8
    b = -np.arange(401 * 3, dtype=float).reshape(401, 3) / 4
    f = tmp_path / "data_1600_accel_phone.txt"
    # activity rows interleave in the file; each activity is windowed on its own rows
    f.write_text(_wisdm_lines(1600, "A", a[:300]) + _wisdm_lines(1600, "S", b)
                 + _wisdm_lines(1600, "A", a[300:]))
    xyz, act = D.parse_wisdm_file(f)
    assert xyz.shape == (851, 3) and act[0] == 0 and act[300] == 17
    X, y, s = B.wisdm_windows([f], [1600])
    # A: 450 rows -> 3 windows, last one padded with 150 zeros;
    # S: 401 rows -> 2 windows (the tsai horizon drops the last row)
    assert X.shape == (5, 3, 200) and y.tolist() == [0, 0, 0, 17, 17] and set(s) == {1600}
    np.testing.assert_array_equal(X[1], a[200:400].T.astype(np.float32))
    np.testing.assert_array_equal(X[2, :, :50], a[400:450].T.astype(np.float32))
    assert (X[2, :, 50:] == 0).all()
    np.testing.assert_array_equal(X[4], b[200:400].T.astype(np.float32))
    bad = tmp_path / "bad.txt"
    bad.write_text("1600,N,0,1.0,2.0,3.0;\n")
    with pytest.raises(ValueError, match="not a WISDM row"):
        D.parse_wisdm_file(bad)


def test_wisdm_release_layout(tmp_path):
    folder = tmp_path / "wisdm" / "wisdm-dataset" / "raw" / "phone" / "accel"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for sub in B.WISDM_SUBJECTS:
        folder.joinpath(f"data_{sub}_accel_phone.txt").write_text(
            _wisdm_lines(sub, "A", np.round(rng.normal(size=(400, 3)), 4))
            + _wisdm_lines(sub, "B", np.round(rng.normal(size=(400, 3)), 4)))
    w = D.load_wisdm(tmp_path)
    assert w.X_train.shape == (153, 3, 200) and w.X_test.shape == (51, 3, 200)
    assert sorted(np.bincount(w.y_train).tolist()) == [76, 77]
    assert set(w.subject_train) | set(w.subject_test) == set(B.WISDM_SUBJECTS)
    assert w.class_names[1] == "jogging" and w.n_tasks == 9
    folder.joinpath("data_1650_accel_phone.txt").unlink()
    (tmp_path / "wisdm.npz").unlink()
    with pytest.raises(ValueError, match="data_1650_accel_phone.txt"):
        D.load_wisdm(tmp_path)


# ----------------------------------------------------------------------------- GRABMyo


def test_grabmyo_mat(tmp_path):
    rng = np.random.default_rng(0)
    fore = np.empty((2, 17), dtype=object)
    wrist = np.empty((2, 17), dtype=object)
    for t in range(2):
        for g in range(17):
            fore[t, g] = rng.normal(size=(2048, 16))
            wrist[t, g] = rng.normal(size=(2048, 12))
    fore[1, 1][5, 3] = np.nan
    path = tmp_path / "session1_participant1.mat"
    savemat(path, {"DATA_FOREARM": fore, "DATA_WRIST": wrist})
    X, y, s = B.grabmyo_windows([path], [7], n_trials=2, n_gestures=2, resample_length=256)
    assert X.shape == (8, 28, 128) and y.tolist() == [0, 0, 1, 1] * 2 and set(s) == {7}
    rec = np.concatenate([fore[1, 1], wrist[1, 1]], axis=1)
    expected = resample(np.nan_to_num(rec), 256)
    np.testing.assert_allclose(X[6], expected[:128].T.astype(np.float32), rtol=0, atol=0)
    np.testing.assert_allclose(X[7], expected[128:].T.astype(np.float32), rtol=0, atol=0)
    savemat(path, {"OTHER": np.zeros(3)})
    with pytest.raises(ValueError, match="DATA_FOREARM"):
        B.grabmyo_windows([path], [1], n_trials=1, n_gestures=1, resample_length=256)


def test_tscil_windows_count_rule():
    rec = np.arange(12.0)[:, None]
    assert D.tscil_windows(rec, 4, 4).shape == (3, 1, 4)     # 12 = 3 * 4
    assert D.tscil_windows(rec[:9], 4, 4).shape == (2, 1, 4)  # 9 = 2 * 4 + 1: horizon drop
    w = D.tscil_windows(rec[:10], 4, 4)
    assert w.shape == (3, 1, 4) and w[2, 0].tolist() == [8, 9, 0, 0]
    assert D.tscil_windows(rec[:2], 4, 4)[0, 0].tolist() == [0, 1, 0, 0]


# ----------------------------------------------------------------------------- MNIST IDX


def _idx(arr: np.ndarray) -> bytes:
    magic = (2048 + arr.ndim).to_bytes(4, "big")
    return magic + b"".join(d.to_bytes(4, "big") for d in arr.shape) + arr.tobytes()


def test_mnist_idx(shared_data, tmp_path):
    with np.load(shared_data / "mnist.npz") as d:
        imgs, labels = d["X_train"][:5], d["y_train"][:5].astype(np.uint8)
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(imgs)))
    (folder / "train-labels-idx1-ubyte").write_bytes(_idx(labels))
    np.testing.assert_array_equal(D.parse_idx(folder / "train-images-idx3-ubyte.gz"), imgs)
    assert D.parse_idx(folder / "train-labels-idx1-ubyte").tolist() == [5, 0, 4, 1, 9]
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (folder / name).write_bytes(_idx(labels))
    # a truncated copy is not the MNIST release: the md5 check refuses it
    with pytest.raises(ValueError, match="md5 mismatch"):
        D.load_mnist(tmp_path)
    (folder / "t10k-labels-idx1-ubyte").write_bytes(b"\x00\x00\x08\x01\x00\x00\x00\x09ab")
    with pytest.raises(ValueError, match="header promises 9 bytes"):
        D.parse_idx(folder / "t10k-labels-idx1-ubyte")


# ----------------------------------------------------------------------------- windowing


def test_sliding_windows_rules():
    sig = np.vstack([np.arange(10.0), 10 + np.arange(10.0)])
    lab = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    X, y, s = D.sliding_windows(sig, lab, window=4, step=3)
    assert X.shape == (3, 2, 4) and X.dtype == np.float32 and s is None
    assert X[:, 0, 0].tolist() == [0, 3, 6] and X[2, 1].tolist() == [16, 17, 18, 19]
    assert y.tolist() == [0, 1, 2]  # majority; window 6..9 has labels 1,2,2,2
    assert D.sliding_windows(sig, lab, 4, 3, label_rule="first")[1].tolist() == [0, 1, 1]
    assert D.sliding_windows(sig, lab, 4, 3, label_rule="last")[1].tolist() == [1, 1, 2]
    assert D.sliding_windows(sig, lab, 4, 3, label_rule="center")[1].tolist() == [0, 1, 2]
    Xp, yp, _ = D.sliding_windows(sig, lab, 4, 3, label_rule="pure")
    assert yp.tolist() == [1] and Xp[0, 0].tolist() == [3, 4, 5, 6]
    # tie 2-2 goes to the label seen first
    assert D.sliding_windows(np.zeros(4), [3, 3, 1, 1], 4)[1].tolist() == [3]


def test_sliding_windows_subjects_padding_axis():
    sig = np.arange(20.0).reshape(10, 2)  # (time, channels)
    X, y, s = D.sliding_windows(sig, "walk", window=4, channel_axis=1, subjects=[5] * 6 + [6] * 4,
                                pad_remainder=True, pad_value=-1)
    assert X.shape == (3, 2, 4) and y.tolist() == ["walk"] * 3 and s.tolist() == [5, 5, 6]
    assert X[2, 0].tolist() == [16, 18, -1, -1] and X[0, 1].tolist() == [1, 3, 5, 7]
    X2, _, s2 = D.sliding_windows(sig, 0, window=4, channel_axis=1, subjects=9)
    assert len(X2) == 2 and s2.tolist() == [9, 9]


@pytest.mark.parametrize("kwargs, match", [
    (dict(window=11), "window=11 is longer than the signal"),
    (dict(window=0), "window must be a positive integer"),
    (dict(window=4, step=0), "step must be a positive integer"),
    (dict(window=4, label_rule="mode"), "label_rule must be one of"),
])
def test_sliding_windows_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        D.sliding_windows(np.zeros((2, 10)), 0, **kwargs)


def test_sliding_windows_bad_labels_and_nan():
    with pytest.raises(ValueError, match=r"one entry per time step \(10\)"):
        D.sliding_windows(np.zeros((2, 10)), [0] * 9, window=4)
    sig = np.zeros((2, 10))
    sig[1, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        D.sliding_windows(sig, 0, window=4)


def test_subject_train_test_split():
    X = np.arange(40.0).reshape(20, 1, 2)
    y = np.tile([0, 1], 10)
    subj = np.repeat([1, 2, 3, 4, 5], 4)
    Xtr, Xte, ytr, yte, s_tr, s_te = D.subject_train_test_split(X, y, subj, test_size=0.4,
                                                                random_state=0)
    assert not set(s_tr) & set(s_te) and len(set(s_te)) == 2 and len(Xtr) + len(Xte) == 20
    again = D.subject_train_test_split(X, y, subj, test_size=0.4, random_state=0)
    np.testing.assert_array_equal(again[5], s_te)
    fixed = D.subject_train_test_split(X, y, subj, test_subjects=[2, 4])
    assert set(fixed[5]) == {2, 4} and np.array_equal(fixed[1][:, 0, 0], X[subj % 2 == 0][:, 0, 0])
    with pytest.raises(ValueError, match="not in subjects"):
        D.subject_train_test_split(X, y, subj, test_subjects=[9])
    with pytest.raises(ValueError, match="different lengths"):
        D.subject_train_test_split(X, y[:5], subj)


# ----------------------------------------------------------------------------- custom data


def test_from_arrays_layouts_and_splits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 30, 3))  # (n, length, channels)
    y = np.array(["a", "b", "c"] * 4)
    subj = np.repeat([1, 2, 3, 4], 3)
    data = D.from_arrays(X, y, subj, axis="channels_last")
    assert data.X_train.shape == (12, 3, 30) and data.X_test.shape == (0, 3, 30)
    np.testing.assert_array_equal(data.X_train[4, 2], X[4, :, 2].astype(np.float32))
    assert data.class_names == ["a", "b", "c"] and data.y_train.dtype.kind == "U"
    split = D.from_arrays(X, y, subj, axis=2, test_size=0.25)
    assert split.X_test.shape == (3, 3, 30) and sorted(split.y_test) == ["a", "b", "c"]
    by_subj = D.from_arrays(X, y, subj, axis=2, test_size=1, by_subject=True)
    assert len(set(by_subj.subject_test)) == 1
    assert not set(by_subj.subject_test) & set(by_subj.subject_train)
    explicit = D.from_arrays(X[:, :, 0], y, X_test=X[:2, :, 0], y_test=y[:2])
    assert explicit.X_train.shape == (12, 1, 30) and explicit.X_test.shape == (2, 1, 30)


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.zeros((2, 3, 4, 5)), [0, 1]), {}, "must be 2-D"),
    ((np.zeros((3, 2, 5)), [0, 1]), {}, "2 labels but X has 3 samples"),
    ((np.zeros((3, 2, 5)), [0, 1, 2], [1, 2]), {}, "subjects has 2 labels"),
    ((np.full((2, 2, 5), np.nan), [0, 1]), {}, "NaN"),
    ((np.zeros((2, 2, 5)), [0, 1]), {"axis": 0}, "axis must be"),
    ((np.zeros((2, 2, 5)), [0, 1]), {"X_test": np.zeros((1, 2, 4)), "y_test": [0]},
     r"X_test samples are \(2, 4\)"),
])
def test_from_arrays_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        D.from_arrays(*args, **kwargs)


def test_tscil_pickles(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.normal(size=(6, 20, 4)), "state_train": np.arange(6) % 3 * 1.0,
              "x_test": rng.normal(size=(3, 20, 4)), "state_test": np.arange(3) * 1.0,
              "subject_label_train": np.arange(6) // 2, "subject_label_test": np.zeros(3, int)}
    for k, v in arrays.items():
        with open(tmp_path / f"{k}.pkl", "wb") as f:
            pickle.dump(v, f)
    data = D.load_tscil_pickles(tmp_path, n_tasks=3)
    assert data.X_train.shape == (6, 4, 20) and data.y_train.dtype == np.int64
    np.testing.assert_array_equal(data.X_test[2], arrays["x_test"][2].T.astype(np.float32))
    assert data.subject_train.tolist() == [0, 0, 1, 1, 2, 2] and data.n_tasks == 3

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with open(tmp_path / "x_test.pkl", "wb") as f:
        pickle.dump(Evil(), f)
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        D.load_tscil_pickles(tmp_path)
    (tmp_path / "state_test.pkl").unlink()
    with pytest.raises(D.DatasetNotFoundError, match="state_test.pkl"):
        D.load_tscil_pickles(tmp_path)
