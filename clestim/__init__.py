"""clestim: scikit-learn-compatible continual-learning estimators."""

from .base import ContinualClassifier
from .methods import (
    ASER,
    CLOPS,
    DER,
    DT2W,
    ER,
    EWC,
    GR,
    MAS,
    DERpp,
    Herding,
    LwF,
    Naive,
    Offline,
)

__all__ = [
    "ASER",
    "CLOPS",
    "DER",
    "ER",
    "ContinualClassifier",
    "DERpp",
    "DT2W",
    "EWC",
    "GR",
    "Herding",
    "LwF",
    "MAS",
    "Naive",
    "Offline",
]
__version__ = "0.1.0"
