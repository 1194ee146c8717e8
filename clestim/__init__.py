"""clestim: scikit-learn-compatible continual-learning estimators."""

from .base import ContinualClassifier
from .methods import DER, DT2W, ER, EWC, GR, MAS, DERpp, LwF, Naive, Offline

__all__ = [
    "DER",
    "DT2W",
    "ER",
    "EWC",
    "GR",
    "MAS",
    "ContinualClassifier",
    "DERpp",
    "LwF",
    "Naive",
    "Offline",
]
__version__ = "0.1.0"
