"""Replay memory: storage plus update and retrieval policies."""

from .buffer import MemoryBuffer, RandomRetrieval, Reservoir, memory_capacity

__all__ = ["MemoryBuffer", "RandomRetrieval", "Reservoir", "memory_capacity"]
