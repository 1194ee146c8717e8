"""One small module per continual-learning method or family."""

from .lwf import LwF
from .naive import Naive
from .offline import Offline
from .replay import DER, ER, DERpp

__all__ = ["DER", "ER", "DERpp", "LwF", "Naive", "Offline"]
