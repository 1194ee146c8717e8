"""One small module per continual-learning method or family."""

from .dt2w import DT2W
from .generative import GR
from .lwf import LwF
from .naive import Naive
from .offline import Offline
from .regularization import EWC, MAS, QuadraticPenalty
from .replay import DER, ER, DERpp

__all__ = [
    "DER",
    "DT2W",
    "ER",
    "EWC",
    "GR",
    "MAS",
    "DERpp",
    "LwF",
    "Naive",
    "Offline",
    "QuadraticPenalty",
]
