"""Replay memory: storage plus update and retrieval policies."""

from .buffer import MemoryBuffer, RandomRetrieval, Reservoir, memory_capacity
from .gss import GSSGreedy, gss_scores
from .policies import (
    ASERRetrieval,
    ASERUpdate,
    ConfidenceGate,
    HerdingSelection,
    ImportanceSelection,
    SubjectBalancedRetrieval,
    SubjectSubset,
    TaskBalanced,
    UncertaintyRetrieval,
    bald,
    check_class_quota,
    herding_order,
    knn_shapley,
)

__all__ = [
    "ASERRetrieval",
    "ASERUpdate",
    "ConfidenceGate",
    "GSSGreedy",
    "HerdingSelection",
    "ImportanceSelection",
    "MemoryBuffer",
    "RandomRetrieval",
    "Reservoir",
    "SubjectBalancedRetrieval",
    "SubjectSubset",
    "TaskBalanced",
    "UncertaintyRetrieval",
    "bald",
    "check_class_quota",
    "gss_scores",
    "herding_order",
    "knn_shapley",
    "memory_capacity",
]
