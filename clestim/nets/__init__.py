"""Torch modules only: backbones, heads, normalisation layers and the composed network."""

from .backbones import BACKBONES, CNN1D, MLP, TransformerEncoder
from .generators import TimeVAE
from .heads import GrowingLinear, SplitCosineLinear
from .network import ContinualNetwork
from .norms import InputNorm
from .video import ClipAugment, R2Plus1D

__all__ = [
    "BACKBONES",
    "CNN1D",
    "ClipAugment",
    "MLP",
    "R2Plus1D",
    "ContinualNetwork",
    "GrowingLinear",
    "InputNorm",
    "SplitCosineLinear",
    "TimeVAE",
    "TransformerEncoder",
]
