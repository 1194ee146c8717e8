"""Replay memory: storage plus update and retrieval policies."""

from .buffer import MemoryBuffer, RandomRetrieval, Reservoir, memory_capacity
from .policies import (
    ASERRetrieval,
    ASERUpdate,
    HerdingSelection,
    ImportanceSelection,
    SubjectBalancedRetrieval,
    SubjectSubset,
    UncertaintyRetrieval,
    bald,
    check_class_quota,
    herding_order,
    knn_shapley,
)

__all__ = [
    "ASERRetrieval",
    "ASERUpdate",
    "HerdingSelection",
    "ImportanceSelection",
    "MemoryBuffer",
    "RandomRetrieval",
    "Reservoir",
    "SubjectBalancedRetrieval",
    "SubjectSubset",
    "UncertaintyRetrieval",
    "bald",
    "check_class_quota",
    "herding_order",
    "knn_shapley",
    "memory_capacity",
]
