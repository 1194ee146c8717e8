"""One small module per continual-learning method or family."""

from .aser import ASER
from .clops import CLOPS
from .dt2w import DT2W
from .ensembles import ENS, ENSGEN, ENSGENDEL
from .fdr import FDR
from .gem import AGEM, GEM
from .generative import GR
from .gss import GSS
from .hal import HAL
from .herding import Herding
from .lwf import LwF
from .naive import Naive
from .offline import Offline
from .regularization import EWC, MAS, QuadraticPenalty
from .replay import DER, ER, DERpp

__all__ = [
    "AGEM",
    "ASER",
    "CLOPS",
    "DER",
    "DT2W",
    "ENS",
    "ENSGEN",
    "ENSGENDEL",
    "ER",
    "EWC",
    "FDR",
    "GEM",
    "GR",
    "GSS",
    "HAL",
    "MAS",
    "DERpp",
    "Herding",
    "LwF",
    "Naive",
    "Offline",
    "QuadraticPenalty",
]
