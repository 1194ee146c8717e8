"""Clips (n, C, T, H, W): R(2+1)D backbones, the clip protocol, IDD and clip data."""

import pickle

import numpy as np
import pytest
import torch

from clestim.datasets import (
    MOTIONS,
    DatasetNotFoundError,
    load_moving_digits,
    load_ucf101,
)
from clestim.memory import MemoryBuffer
from clestim.methods import AGEM, ASER, CLOPS, DER, ER, FDR, GEM, GSS, HAL, DERpp, Herding
from clestim.nets import BACKBONES, ClipAugment
from clestim.streams import ClassIncremental
from clestim.video import (
    FlowFrameSelector,
    IDDStore,
    frame_motion,
    paper_params,
    windowed_predict_proba,
)

SMALL = {"channels": (8, 16), "stem_channels": (8, 8), "clip_length": 4, "crop_size": 14,
         "flip": True}


#: The fixture's motions: task 1 zoom in / zoom out, task 2 shake / still. (At 16x16
#: and 8 frames 'down' and 'up' move 0.6 pixel a frame, which the tiny network does
#: not tell apart in 4 epochs: a test on them only measured the second task.)
CLIP_MOTIONS = ("zoom_in", "zoom_out", "shake", "still")
CLIP_CLASSES = [MOTIONS.index(m) for m in CLIP_MOTIONS]


@pytest.fixture(scope="module")
def clips(shared_data):
    """Four motions of real digits (``CLIP_MOTIONS``): 8 frames of 16x16."""
    d = load_moving_digits(30, 10, n_frames=8, size=16, random_state=0, data_home=shared_data)
    tr, te = np.isin(d.y_train, CLIP_CLASSES), np.isin(d.y_test, CLIP_CLASSES)
    return d.X_train[tr], d.y_train[tr], d.X_test[te], d.y_test[te]


def _video_est(cls, **kw):
    return cls(memory_size=24, backbone="r2plus1d_small", backbone_params=SMALL, max_epochs=4,
               batch_size=8, replay_batch_size=8, patience=None, validation_fraction=0.0,
               lr=3e-3, random_state=0,
               stream=ClassIncremental(classes_per_task=2, class_order=CLIP_CLASSES), **kw)


@pytest.fixture(scope="module")
def fitted_er(clips):
    return _video_est(ER).fit(clips[0], clips[1])


def test_r2plus1d_is_the_r2plus1d_18_layout():
    # torchvision documents r2plus1d_18 (400 Kinetics classes) as 31,505,325 parameters
    net = BACKBONES["r2plus1d"](3)
    assert sum(p.numel() for p in net.parameters()) + 512 * 400 + 400 == 31_505_325
    assert net.out_features == 512
    assert "layer1.0.conv1.0.0.weight" in net.state_dict()  # torchvision's key names
    small = BACKBONES["r2plus1d_small"](1, **SMALL)
    assert small.out_features == 16
    small.eval()
    assert small(torch.zeros(2, 1, 8, 16, 16)).shape == (2, 16)
    assert small.feature_maps(torch.zeros(2, 1, 8, 16, 16)).shape[:2] == (2, 16)


def test_clip_augment_crops_flips_and_is_seeded():
    x = torch.arange(2 * 1 * 6 * 5 * 5, dtype=torch.float32).reshape(2, 1, 6, 5, 5)
    aug = ClipAugment(clip_length=3, crop_size=4, flip=True).train()
    torch.manual_seed(0)
    out = aug(x)
    torch.manual_seed(0)
    assert torch.equal(out, aug(x))
    assert out.shape == (2, 1, 3, 4, 4)
    for i in range(2):  # each output is a crop of its own clip, flipped or not
        crops = [x[i, :, t : t + 3, h : h + 4, w : w + 4] for t in range(4) for h in range(2)
                 for w in range(2)]
        assert any(torch.equal(out[i], c) or torch.equal(out[i], c.flip(-1)) for c in crops)
    aug.eval()
    assert torch.equal(aug(x), x[:, :, 1:4, :4, :4])  # centre window, centre crop
    aug.window = 1
    assert torch.equal(aug(x), x[:, :, 3:6, :4, :4])
    with pytest.raises(ValueError, match="clip_length"):
        ClipAugment(clip_length=8)(x)


#: What a method needs on top of ``_video_est`` (HAL's 100 anchor steps take 5 s here).
FAMILY_PARAMS = {HAL: {"anchor_steps": 10}}


@pytest.mark.parametrize(
    "cls", [ER, DER, DERpp, Herding, ASER, CLOPS, GSS, HAL, FDR, GEM, AGEM],
    ids=lambda c: c.__name__,
)
def test_rehearsal_family_learns_clips_above_chance(clips, fitted_er, cls):
    X, y, X_test, y_test = clips
    est = fitted_er if cls is ER else _video_est(cls, **FAMILY_PARAMS.get(cls, {})).fit(X, y)
    assert est.input_shape_ == (1, 8, 16, 16)
    # chance, and a constant predictor, score 0.25 on the four balanced classes; a
    # method that forgets the first task entirely (A-GEM in class-IL) still gets 0.5
    assert est.score(X_test, y_test) > 0.4
    first = np.isin(y_test, CLIP_CLASSES[:2])  # task 1: zoom in, zoom out
    # the first task is still told apart within its classes (a constant: 0.5)
    assert np.mean(est.predict(X_test[first], task=0) == y_test[first]) > 0.75
    assert est.transform(X_test[:3]).shape == (3, 16)


def test_video_estimator_is_deterministic_and_pickles(clips, fitted_er):
    X, y, X_test, _ = clips
    again = _video_est(ER).fit(X, y)
    np.testing.assert_array_equal(again.predict_proba(X_test), fitted_er.predict_proba(X_test))
    loaded = pickle.loads(pickle.dumps(fitted_er))
    np.testing.assert_array_equal(loaded.predict_proba(X_test), fitted_er.predict_proba(X_test))
    np.testing.assert_array_equal(
        fitted_er.predict(X_test, after_task=0), loaded.predict(X_test, after_task=0)
    )


def test_windowing_is_the_mean_of_per_window_probabilities(clips, fitted_er):
    X_test = clips[2][:6]
    got = windowed_predict_proba(fitted_er, X_test)
    net = fitted_er.module_.eval()
    expected = []
    with torch.no_grad():
        for w in range(2):  # 8 frames = two windows of 4, centre crop 14 of 16
            window = torch.as_tensor(X_test[:, :, 4 * w : 4 * w + 4, 1:15, 1:15])
            p = torch.softmax(net(window), dim=1).numpy()
            expected.append(p[:, fitted_er._labels.rows])
    np.testing.assert_allclose(got, np.mean(expected, axis=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(expected[0], expected[1])  # the windows do differ
    assert all(layer.window is None for layer in net.modules() if isinstance(layer, ClipAugment))


def test_paper_params():
    params = paper_params()
    assert (params["optimizer"], params["lr"], params["batch_size"]) == (
        torch.optim.RMSprop, 1e-5, 16)
    assert params["backbone"] == "r2plus1d"
    assert params["backbone_params"] == {"clip_length": 16, "crop_size": 112, "flip": True}
    ER(**params)._check_params()


def _moving_blob(moves, size=24):
    """A Gaussian blob that moves ``moves[t]`` pixels right between frames t and t+1."""
    yy, xx = np.mgrid[:size, :size]
    x, frames = 6.0, []
    for step in (*moves, 0):
        frames.append(np.exp(-((xx - x) ** 2 + (yy - size / 2) ** 2) / 8.0))
        x += step
    return np.asarray(frames, dtype=np.float32)[None, None]  # (1, 1, T, H, W)


@pytest.mark.parametrize("method", ["farneback", "diff"])
def test_idd_keeps_the_frames_of_largest_motion_in_order(method):
    X = _moving_blob([0, 3, 0, 0, 2, 0, 1, 0])  # motion after frames 1, 4 and 6
    sel = FlowFrameSelector(n_frames=3, method=method).fit(X)
    assert sel.selected_frames(X).tolist() == [[1, 4, 6]]
    np.testing.assert_array_equal(sel.transform(X), X[:, :, [1, 4, 6]])
    motion = frame_motion(X, method)[0]
    assert motion[1] > motion[4] > motion[6] > motion[0] and motion[-1] == -np.inf


def test_idd_diff_on_series_and_errors():
    X = np.zeros((1, 2, 6), dtype=np.float32)
    X[0, :, 3:] = 1.0  # a step: only frame 2 -> 3 changes
    assert FlowFrameSelector(1, method="diff").fit(X).selected_frames(X).tolist() == [[2]]
    assert FlowFrameSelector(6, method="diff").fit_transform(X).shape == (1, 2, 6)
    with pytest.raises(ValueError, match="n_frames"):
        FlowFrameSelector(7).fit(X)
    with pytest.raises(ValueError, match="farneback"):
        FlowFrameSelector(2).fit(X).transform(X)


@pytest.mark.parametrize("method", ["farneback", "diff"])
def test_idd_store_keeps_the_frames_of_largest_motion_and_replays_them_held(method):
    forward = torch.as_tensor(_moving_blob([0, 3, 0, 0, 2, 0, 1, 0]))  # 9 frames
    X = torch.cat([forward, forward.flip(2)])  # motion after frames 1, 4, 6 / 1, 3, 6
    buffer = MemoryBuffer(2, store=IDDStore(3, method, length=9))
    buffer.add(X=X, y=torch.tensor([0, 1]))
    assert buffer.fields["frames"].tolist() == [[1, 4, 6], [1, 3, 6]]
    assert buffer.fields["frames"].dtype == torch.uint8
    assert torch.equal(buffer.fields["X"], torch.stack([X[0][:, [1, 4, 6]], X[1][:, [1, 3, 6]]]))
    # read back: each kept frame held until the next kept one (the first also before it)
    held = [[1, 1, 1, 1, 4, 4, 6, 6, 6], [1, 1, 1, 3, 3, 3, 6, 6, 6]]
    expected = torch.stack([X[0][:, held[0]], X[1][:, held[1]]])
    assert torch.equal(buffer["X"], expected)
    batch = buffer.take(torch.tensor([1, 0]))
    assert sorted(batch) == ["X", "y"] and torch.equal(batch["X"], expected[[1, 0]])
    assert torch.equal(buffer.sample(5, torch.Generator().manual_seed(0))["X"].sum(0),
                       expected.sum(0))
    buffer.replace(torch.tensor([0]), {"X": X[1:], "y": torch.tensor([1])})  # encoded too
    assert buffer.fields["frames"].tolist() == [[1, 3, 6], [1, 3, 6]]
    assert torch.equal(buffer["X"], expected[[1, 1]])


def test_idd_store_on_series_and_bytes_per_clip(clips):
    series = torch.tensor([[[0.0, 0, 5, 5, 1, 1], [0, 0, 5, 5, 1, 1]]])  # jumps after 1 and 3
    buffer = MemoryBuffer(1, store=IDDStore(2, "diff", length=6))
    buffer.add(X=series, y=torch.tensor([0]))
    assert buffer.fields["frames"].tolist() == [[1, 3]]
    assert buffer["X"].tolist() == [[[0, 0, 0, 5, 5, 5]] * 2]
    X, y = torch.as_tensor(clips[0][:6]), torch.as_tensor(clips[1][:6])
    whole, idd = MemoryBuffer(6), MemoryBuffer(6, store=IDDStore(2, "diff", length=8))
    whole.add(X=X, y=y)
    idd.add(X=X, y=y)
    # a clip: 8 float32 frames of 16x16 and an int64 label; with IDD 2 of its frames
    # and their 2 uint8 positions
    assert whole.nbytes == 6 * (8 * 256 * 4 + 8)
    assert idd.nbytes == 6 * (2 * 256 * 4 + 2 + 8)
    assert IDDStore(2, "diff", length=8).sample_nbytes((1, 8, 16, 16)) == 2 * 256 * 4 + 2
    assert idd["X"].shape == whole["X"].shape


def test_rehearsal_with_idd_memory_learns_clips(clips):
    from sklearn.base import clone

    X, y, X_test, y_test = clips
    est = _video_est(ER, memory_frames=2).fit(X, y)  # optical flow (the default)
    assert est.memory_.fields["X"].shape == (24, 1, 2, 16, 16)
    assert est.memory_["X"].shape == (24, 1, 8, 16, 16)
    assert est.memory_nbytes_ == 24 * (2 * 256 * 4 + 2 + 8)  # a quarter of the frames
    assert est.score(X_test, y_test) > 0.4  # chance: 0.25
    loaded = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(loaded.predict(X_test), est.predict(X_test))
    assert torch.equal(loaded.memory_["X"], est.memory_["X"])
    assert clone(est).get_params()["memory_frames"] == 2


def test_idd_memory_errors_leave_the_estimator_unchanged(fitted_er):
    import copy

    X = np.zeros((4, 1, 8, 16, 16), np.float32)
    y = np.array([0, 1, 0, 1])
    series = np.zeros((4, 2, 6), np.float32)
    with pytest.raises(ValueError, match="more frames than the input has"):
        ER(memory_frames=9).partial_fit_task(X, y)
    with pytest.raises(ValueError, match="memory_motion='diff'"):
        ER(memory_frames=2).partial_fit_task(series, y)
    with pytest.raises(ValueError, match="downsamples clips"):
        ER(memory_frames=2, memory_motion="diff").partial_fit_task(np.zeros((4, 5)), y)
    for bad in ({"memory_frames": 0}, {"memory_frames": True}, {"memory_motion": "flow"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ER(**bad).partial_fit_task(X, y)
    est = copy.deepcopy(fitted_er).set_params(memory_frames=2)  # its memory holds whole clips
    before = est.memory_nbytes_
    with pytest.raises(ValueError, match="cannot change once samples are stored"):
        est.partial_fit_task(X, y)
    assert est.memory_nbytes_ == before and est.n_tasks_seen_ == fitted_er.n_tasks_seen_


def test_moving_digits_are_real_digits_moving_deterministically(shared_data):
    a = load_moving_digits(2, 1, n_frames=6, size=16, random_state=3, data_home=shared_data)
    b = load_moving_digits(2, 1, n_frames=6, size=16, random_state=3, data_home=shared_data)
    assert a.X_train.shape == (2 * len(MOTIONS), 1, 6, 16, 16)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert np.bincount(a.y_train).tolist() == [2] * len(MOTIONS)
    motion = frame_motion(a.X_train, "diff")[:, :-1]
    still = a.y_train == MOTIONS.index("still")
    assert np.all(motion[still] == 0) and np.all(motion[~still].sum(axis=1) > 0)
    assert set(a.digit_train) <= set(range(10)) and a.X_train.max() > 0.5


def _write_video(path, colour, n_frames=6, size=(32, 24)):
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25, size)
    for t in range(n_frames):
        frame = np.zeros((size[1], size[0], 3), np.uint8)
        frame[:] = colour  # BGR
        frame[:, : 4 * t] = 0
        writer.write(frame)
    writer.release()


def test_load_ucf101_reads_the_videos_it_finds(tmp_path):
    colours = {"ApplyLipstick": (0, 0, 200), "Biking": (200, 0, 0)}  # BGR: red, blue
    for action, colour in colours.items():
        (tmp_path / action).mkdir()
        for group in (1, 8):  # group 1 tests in split 1, group 8 trains
            _write_video(tmp_path / action / f"v_{action}_g{group:02d}_c01.avi", colour)
    d = load_ucf101(tmp_path, clip_length=4, size=16)
    assert d.class_names == ["ApplyLipstick", "Biking"]
    assert d.X_train.shape == (2, 3, 4, 16, 16) and d.X_test.shape == (2, 3, 4, 16, 16)
    assert d.y_train.tolist() == [0, 1] and d.subject_test.tolist() == [1, 1]
    # frame 0 is uniform: RGB red for ApplyLipstick, blue for Biking
    np.testing.assert_allclose(d.X_train[0, :, 0].mean(axis=(1, 2)), [200 / 255, 0, 0], atol=0.05)
    np.testing.assert_allclose(d.X_train[1, :, 0].mean(axis=(1, 2)), [0, 0, 200 / 255], atol=0.05)
    assert d.X_train[0, 0, 3, :, :2].max() < 0.1  # later frames have the black band
    d2 = load_ucf101(tmp_path, classes=["Biking"], clip_length=8, size=8, split=2)
    assert d2.X_test.shape == (1, 3, 8, 8, 8)  # split 2 tests on groups 8-14; looped frames
    with pytest.raises(DatasetNotFoundError, match="ucf101"):
        load_ucf101(tmp_path / "absent")
    with pytest.raises(ValueError, match="Archery"):
        load_ucf101(tmp_path, classes=["Archery"])


def test_idd_in_a_continual_pipeline(clips):
    from clestim.pipeline import make_continual_pipeline

    X, y, X_test, y_test = clips
    est = _video_est(ER).set_params(max_epochs=1)
    pipe = make_continual_pipeline(FlowFrameSelector(4, method="diff"), est)
    first = np.isin(y, CLIP_CLASSES[:2])
    pipe.partial_fit_task(X[first], y[first]).partial_fit_task(X[~first], y[~first])
    assert pipe.steps[-1][1].input_shape_ == (1, 4, 16, 16)  # 8 frames -> the 4 that move most
    assert pipe.predict(X_test).shape == y_test.shape


def test_backbone_dimensions_checked_and_auto_picks_r2plus1d_small():
    from clestim.nets import R2Plus1D

    clips5 = np.zeros((4, 1, 4, 16, 16), dtype=np.float32)
    with pytest.raises(ValueError, match="needs 5-D input"):
        ER(backbone="r2plus1d").initialize(np.zeros((4, 2, 32), np.float32), [0, 1])
    with pytest.raises(ValueError, match="needs 3-D input"):
        ER(backbone="cnn").initialize(clips5, [0, 1])
    est = ER(random_state=0).initialize(clips5, [0, 1])
    assert isinstance(est.module_.backbone, R2Plus1D) and est.module_.backbone.out_features == 32
    assert est.predict_proba(clips5).shape == (4, 2)
