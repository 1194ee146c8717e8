"""Loaders over the shared benchmark files, embedded sets, registry and bad input."""

import hashlib
import re

import numpy as np
import pytest

from clestim import datasets as D

HAR_TRAIN_COUNTS = [1226, 1073, 986, 1286, 1374, 1407]
HAR_TEST_COUNTS = [496, 471, 420, 491, 532, 537]


# ----------------------------------------------------------------------------- shared data


def test_uci_har_shared(shared_data):
    har = D.load_uci_har(shared_data, verify=True)
    assert har.X_train.shape == (7352, 9, 128) and har.X_test.shape == (2947, 9, 128)
    assert har.X_train.dtype == np.float32 and har.X_test.dtype == np.float32
    assert np.bincount(har.y_train).tolist() == HAR_TRAIN_COUNTS
    assert np.bincount(har.y_test).tolist() == HAR_TEST_COUNTS
    assert set(np.unique(har.subject_test)) == {2, 4, 9, 10, 12, 13, 18, 20, 24}
    assert not set(har.subject_train) & set(har.subject_test)
    assert np.sum(har.subject_train == 1) == 347
    assert har.channel_names[0] == "total_acc_x" and har.channel_names[3] == "body_acc_x"
    assert har.class_names[0] == "WALKING" and har.n_tasks == 3
    assert "Anguita" in har.DESCR and "commercial" in har.DESCR and "Qiao" in har.DESCR
    # the known first training row of subject 1 (STANDING)
    i = int(np.flatnonzero(np.abs(har.X_train[:, 3, 0] - 1.808515e-04) < 5e-11)[0])
    assert har.y_train[i] == 4 and har.subject_train[i] == 1
    np.testing.assert_allclose(har.X_train[i, 0, :2], [1.012817, 1.022833], rtol=1e-6)


def test_dsa_shared(shared_data):
    dsa = D.load_dsa(shared_data)
    assert dsa.X_train.shape == (6480, 45, 125) and dsa.X_test.shape == (2160, 45, 125)
    assert dsa.X_train.dtype == np.float32
    assert np.bincount(dsa.y_train).tolist() == [360] * 18
    assert np.bincount(dsa.y_test).tolist() == [120] * 18
    assert set(np.unique(dsa.subject_train)) == set(range(1, 9))
    assert len(dsa.channel_names) == 45 and dsa.channel_names[0] == "T_xacc"
    assert dsa.channel_names == D._benchmarks.DSA_CHANNELS
    assert dsa.class_names[15] == "rowing" and dsa.n_tasks == 9


def test_mnist_shared(shared_data):
    m = D.load_mnist(shared_data)
    assert m.X_train.shape == (60000, 784) and m.X_test.shape == (10000, 784)
    assert m.y_train[:5].tolist() == [5, 0, 4, 1, 9] and m.y_test[:5].tolist() == [7, 2, 1, 0, 4]
    assert np.bincount(m.y_test).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028,
                                               974, 1009]
    assert abs(float(m.X_train.mean()) - 0.1307) < 1e-3 and m.X_train.max() == 1.0
    img = D.load_mnist(shared_data, flatten=False, scale=False)
    assert img.X_train.shape == (60000, 1, 28, 28) and img.X_train.max() == 255.0
    np.testing.assert_array_equal(img.X_train.reshape(60000, -1) / 255.0, m.X_train)
    assert m.n_tasks == 5


def test_env_var_and_registry(shared_data, monkeypatch):
    monkeypatch.setenv("CLESTIM_DATA", str(shared_data))
    assert D.get_data_home() == shared_data
    info = D.list_datasets()
    assert info["uci_har"]["where"].startswith("prepared file")
    assert info["basic_motions"]["where"].startswith("embedded")
    har = D.load_dataset("HAR")
    assert har.name == "uci_har" and har.X_test.shape == (2947, 9, 128)


# ----------------------------------------------------------------------------- registry


def test_list_datasets_names_and_fields(tmp_path):
    info = D.list_datasets(tmp_path)
    assert set(info) == {"uci_har", "dsa", "uwave", "wisdm", "grabmyo", "mnist",
                         "basic_motions", "japanese_vowels", "acsf1", "osuleaf", "digits"}
    for row in info.values():
        assert row["description"] and row["citation"] and row["license"] and row["n_tasks"]
    assert info["uwave"]["where"].startswith("not found") and "download=True" in \
        info["uwave"]["where"]
    assert "no automatic download" in info["grabmyo"]["where"]


def test_load_dataset_unknown_name_lists_valid():
    with pytest.raises(ValueError, match=r"unknown dataset 'cifar'.*basic_motions.*uci_har"):
        D.load_dataset("cifar")


def test_data_home_default(monkeypatch, tmp_path):
    from clestim.datasets import _base

    for var in ("CLESTIM_DATA", "CLESTIM_SHARED_DATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_base, "_CHECKOUT", None)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert D.get_data_home() == tmp_path / "clestim"


def test_data_home_search_order(monkeypatch, tmp_path):
    """--data-home, $CLESTIM_DATA, $CLESTIM_SHARED_DATA, ../shared/data from the
    current directory, then shared/data next to the checkout, then the cache."""
    from clestim.datasets import _base

    for var in ("CLESTIM_DATA", "CLESTIM_SHARED_DATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work, checkout = tmp_path / "a" / "work", tmp_path / "b" / "repo"
    work.mkdir(parents=True), checkout.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setattr(_base, "_CHECKOUT", checkout)
    assert D.get_data_home() == tmp_path / "cache" / "clestim"  # no shared folder yet
    (tmp_path / "b" / "shared" / "data").mkdir(parents=True)
    assert D.get_data_home() == tmp_path / "b" / "shared" / "data"
    (tmp_path / "a" / "shared" / "data").mkdir(parents=True)
    assert D.get_data_home() == tmp_path / "a" / "shared" / "data"
    monkeypatch.setenv("CLESTIM_SHARED_DATA", str(tmp_path / "s"))
    assert D.get_data_home() == tmp_path / "s"
    monkeypatch.setenv("CLESTIM_DATA", str(tmp_path / "d"))
    assert D.get_data_home() == tmp_path / "d"
    assert D.get_data_home(tmp_path / "x") == tmp_path / "x"
    # `clestim datasets` with no flag reports what that folder holds
    assert str(tmp_path / "d") in D.list_datasets()["uci_har"]["where"]


# ----------------------------------------------------------------------------- embedded


@pytest.mark.parametrize("name, train, test, n_classes", [
    ("basic_motions", (40, 6, 100), (40, 6, 100), 4),
    ("acsf1", (100, 1, 1460), (100, 1, 1460), 10),
    ("osuleaf", (200, 1, 427), (242, 1, 427), 6),
    ("japanese_vowels", (270, 12, 29), (370, 12, 29), 9),
])
def test_embedded_sktime(name, train, test, n_classes):
    b = D.load_dataset(name)
    assert b.X_train.shape == train and b.X_test.shape == test
    assert b.X_train.dtype == np.float32 and np.isfinite(b.X_train).all()
    assert len(b.class_names) == n_classes
    assert set(np.unique(b.y_train)) == set(range(n_classes))
    assert b.n_tasks * 2 <= n_classes + 1 and b.citation and b.license
    assert "Citation" in b.DESCR and "Licence" in b.DESCR


def test_basic_motions_matches_sktime_official_split():
    from sktime.datasets import load_basic_motions

    X, y = load_basic_motions(split="test", return_type="numpy3D")
    b = D.load_basic_motions()
    np.testing.assert_array_equal(b.X_test, X.astype(np.float32))
    assert [b.class_names[i] for i in b.y_test] == list(y)


def test_japanese_vowels_pad_and_truncate():
    from sktime.datasets import load_japanese_vowels

    df, _ = load_japanese_vowels(split="train")
    first = np.stack([np.asarray(df.iloc[0, c]) for c in range(12)]).astype(np.float32)
    L = first.shape[1]
    jv = D.load_japanese_vowels()
    assert jv.lengths_train[0] == L
    np.testing.assert_array_equal(jv.X_train[0, :, :L], first)
    assert (jv.X_train[0, :, L:] == 0).all()
    edge = D.load_japanese_vowels(pad_mode="edge")
    np.testing.assert_array_equal(edge.X_train[0, :, L:],
                                  np.repeat(first[:, -1:], 29 - L, axis=1))
    short = D.load_japanese_vowels(length=10)
    np.testing.assert_array_equal(short.X_train[0], first[:, :10])
    assert jv.lengths_test.max() == 29
    with pytest.raises(ValueError, match="pad_mode"):
        D.load_japanese_vowels(pad_mode="wrap")


def test_digits_deterministic():
    a, b = D.load_digits(), D.load_digits()
    assert a.X_train.shape == (1347, 64) and a.X_test.shape == (450, 64)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert a.X_train.max() == 1.0
    img = D.load_digits(flatten=False)
    assert img.X_train.shape == (1347, 1, 8, 8)


# ----------------------------------------------------------------------------- bad input


def test_missing_files_error_says_where(tmp_path):
    with pytest.raises(D.DatasetNotFoundError) as exc:
        D.load_uci_har(tmp_path)
    msg = str(exc.value)
    assert str(tmp_path / "uci_har_inertial.npz") in msg
    assert str(tmp_path / "uci_har") in msg and "Inertial Signals" in msg
    assert "download=True" in msg and "CLESTIM_DATA" in msg
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, FileNotFoundError)
    with pytest.raises(ValueError, match="no automatic download"):
        D.load_grabmyo(tmp_path, download=True)


def test_corrupt_npz(tmp_path):
    (tmp_path / "dsa_18cls.npz").write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(ValueError, match="corrupt"):
        D.load_dsa(tmp_path)


def test_npz_checksum_mismatch(tmp_path):
    X = np.zeros((4, 9, 128), np.float32)
    np.savez(tmp_path / "uci_har_inertial.npz", X_train=X, y_train=np.arange(4),
             X_test=X, y_test=np.arange(4))
    assert D.load_uci_har(tmp_path).X_train.shape == (4, 9, 128)
    with pytest.raises(D.ChecksumError, match="sha256 mismatch"):
        D.load_uci_har(tmp_path, verify=True)


def test_npz_with_nan_or_bad_labels(tmp_path):
    X = np.zeros((4, 3, 315), np.float32)
    X[2, 1, 7] = np.nan
    np.savez(tmp_path / "uwave.npz", X_train=X, y_train=np.arange(4), X_test=X[:2],
             y_test=np.arange(2))
    with pytest.raises(ValueError, match="NaN.*sample 2"):
        D.load_uwave(tmp_path)
    X[2, 1, 7] = 0
    np.savez(tmp_path / "uwave.npz", X_train=X, y_train=np.arange(3), X_test=X[:2],
             y_test=np.arange(2))
    with pytest.raises(ValueError, match="3 labels but X has 4 samples"):
        D.load_uwave(tmp_path)
    np.savez(tmp_path / "uwave.npz", X_train=X[:, 0], y_train=np.arange(4))
    with pytest.raises(ValueError, match="lacks the array"):
        D.load_uwave(tmp_path)


def test_verify_checksum_and_digest(tmp_path):
    f = tmp_path / "a.bin"
    f.write_bytes(b"clestim")
    good = hashlib.sha256(b"clestim").hexdigest()
    D.verify_checksum(f, good.upper())
    with pytest.raises(D.ChecksumError, match=re.escape(good)):
        D.verify_checksum(f, "0" * 64)
