"""Torch modules only: backbones, heads, normalisation layers and the composed network."""

from .backbones import BACKBONES, CNN1D, MLP, TransformerEncoder
from .generators import TimeVAE
from .heads import GrowingLinear, SplitCosineLinear
from .network import ContinualNetwork
from .norms import InputNorm

__all__ = [
    "BACKBONES",
    "CNN1D",
    "MLP",
    "ContinualNetwork",
    "GrowingLinear",
    "InputNorm",
    "SplitCosineLinear",
    "TimeVAE",
    "TransformerEncoder",
]
