"""Keep freed memory in the process's heap while a benchmark cell trains (glibc only).

glibc's ``malloc`` serves every request above its mmap threshold (at most 32 MiB)
with a fresh ``mmap`` and unmaps it on ``free``. A training step that allocates
tensors that large, such as the gradient of TimeVAE's 5625 x 5625 output layer on
DSA and Adam's temporaries for it, then faults its memory in page by page at every
step: on DSA a third of GR's generator step. Inside :func:`retained_heap` large
blocks come from the heap and stay there once freed, so the next step reuses them.
Only where memory comes from changes, not what is computed: results are bit-for-bit
those without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import platform
import threading

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # mallopt's parameter numbers (malloc.h)
_GLIBC_DEFAULTS = {_M_TRIM_THRESHOLD: 128 * 1024, _M_MMAP_MAX: 65536}
_RETAIN = {_M_TRIM_THRESHOLD: 2**31 - 1, _M_MMAP_MAX: 0}

_lock = threading.Lock()
_depth = 0


@functools.cache
def _glibc():
    """The process's glibc, or None on any other C library."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(None)  # the C library the interpreter runs on
    except OSError:
        return None


def _set(libc, params: dict) -> None:
    for param, value in params.items():
        libc.mallopt(param, value)


@contextlib.contextmanager
def retained_heap():
    """While inside, freed memory stays in the heap for reuse (no mmap, no trimming);
    on leaving the outermost one, glibc's defaults come back and the heap's unused top
    goes back to the system. Does nothing on other C libraries."""
    global _depth
    libc = _glibc()
    if libc is None:
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            _set(libc, _RETAIN)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set(libc, _GLIBC_DEFAULTS)
                libc.malloc_trim(0)
