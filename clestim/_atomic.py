"""Atomic files: a reader never sees a half-written file, whatever kills the writer."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file in the same folder, then rename it into place.

    The temporary file is named '.<name>.<random suffix>.tmp'; the file gets the
    permissions of any new file (``0o666`` less the umask)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, record: dict) -> None:
    """:func:`write_bytes_atomic` of ``record`` as indented JSON."""
    write_bytes_atomic(path, json.dumps(record, indent=1).encode())
