"""clestim: scikit-learn-compatible continual-learning estimators."""

from .base import ContinualClassifier
from .methods import DER, ER, DERpp, LwF, Naive, Offline

__all__ = ["DER", "ER", "ContinualClassifier", "DERpp", "LwF", "Naive", "Offline"]
__version__ = "0.1.0"
