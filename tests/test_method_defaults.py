"""Every method's documented defaults, as ``get_params()`` of a fresh estimator returns
them (the values the papers and TSCIL use; a changed default changes published
numbers, so it must be a deliberate edit of this table)."""

import pytest

import clestim

REPLAY = {
    "memory_size": 0.05, "memory_update": "after_task", "replay_batch_size": 32,
    "online": False, "memory_subjects": None, "retrieval": "random", "kd": None,
    "kd_weight": 1.0, "kd_temperature": 2.0, "memory_gate": None,
    "confidence_threshold": 0.7, "memory_frames": None, "memory_motion": "farneback",
    "batch_size": 32, "patience": 20,
}
ENS = {
    "hidden": (500, 250, 125), "theta": 0.1, "backbone": "mlp", "norm": None,
    "input_norm": None, "classifier": "bce", "lr": 1e-4, "batch_size": 128,
    "max_epochs": 1000, "patience": None, "validation_fraction": 0.0, "grad_clip": None,
}
ENSGEN = {**ENS, "theta_ae": 7.0, "autoencoder_hidden": (500, 200), "latent": 8,
          "n_generated": 1000, "max_epochs": 10}
DEFAULTS = {
    "Naive": {"patience": 5},
    "Offline": {"patience": 20},
    "LwF": {"lambda_kd": 1.0, "temperature": 2.0, "adaptive_weight": True},
    "DT2W": {"lambda_fmap": 0.01, "lambda_proto": 10.0, "gamma": 1.0, "lambda_kd": 1.0,
             "temperature": 2.0, "adaptive_weight": True},
    "MAS": {"alpha": 0.8, "lambda_reg": 1000.0},
    "EWC": {"mode": "separate", "decay": 0.5, "lambda_reg": 1000.0},
    "GR": {"generator": None, "generator_params": None, "replay_ratio": 0.5,
           "replay_batch_size": 32, "generator_epochs": 500, "generator_patience": 20,
           "generator_lr": 1e-3, "batch_size": 32, "patience": 20},
    "ER": REPLAY,
    "Herding": REPLAY,
    "FDR": REPLAY,
    "AGEM": REPLAY,
    "DER": {**REPLAY, "alpha": 0.5},
    "DERpp": {**REPLAY, "alpha": 0.5, "beta": 0.5},
    "GEM": {**REPLAY, "margin": 0.5},
    "ASER": {**REPLAY, "k": 3, "n_smp_per_class": 2, "retrieval": "aser", "aser_update": True},
    "CLOPS": {**REPLAY, "beta_lr": 1e-4, "lambda_beta": 1.0, "mc_passes": 10, "mc_every": 3,
              "mc_dropout": 0.25, "grad_clip": None},
    "GSS": {**REPLAY, "n_subsets": 10, "subset_size": 10, "memory_update": "per_batch"},
    "HAL": {**REPLAY, "hal_lambda": 0.1, "beta": 0.5, "gamma": 0.1, "anchor_steps": 100,
            "finetuning_steps": 1, "hal_lr": 0.1},
    "ENS": ENS,
    "ENSGEN": ENSGEN,
    "ENSGENDEL": {**ENSGEN, "epsilon": 0.1},
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_documented_defaults(name):
    params = getattr(clestim, name)().get_params()
    assert {k: params[k] for k in DEFAULTS[name]} == DEFAULTS[name]


def test_every_estimator_is_listed():
    estimators = {
        n for n in clestim.__all__
        if isinstance(getattr(clestim, n), type)
        and issubclass(getattr(clestim, n), clestim.ContinualClassifier)
        and getattr(clestim, n) is not clestim.ContinualClassifier
    }
    assert estimators == set(DEFAULTS)
