"""One small module per continual-learning method or family."""

from .aser import ASER
from .clops import CLOPS
from .dt2w import DT2W
from .ensembles import ENS, ENSGEN, ENSGENDEL
from .generative import GR
from .herding import Herding
from .lwf import LwF
from .naive import Naive
from .offline import Offline
from .regularization import EWC, MAS, QuadraticPenalty
from .replay import DER, ER, DERpp

__all__ = [
    "ASER",
    "CLOPS",
    "DER",
    "DT2W",
    "ENS",
    "ENSGEN",
    "ENSGENDEL",
    "ER",
    "EWC",
    "GR",
    "MAS",
    "DERpp",
    "Herding",
    "LwF",
    "Naive",
    "Offline",
    "QuadraticPenalty",
]
