"""Replay memory: a bounded store of samples with pluggable update and retrieval.

The storage (:class:`MemoryBuffer`) knows nothing about which samples deserve a
slot or which ones to replay: an *update policy* decides what enters and what
leaves, a *retrieval policy* decides what a training step replays, and an
optional *store policy* decides how a sample is kept (for example IDD,
:class:`clestim.video.IDDStore`, which keeps only some frames of a clip). Every
random choice draws from the ``torch.Generator`` passed in, so a run is
reproducible.
"""

from __future__ import annotations

import numbers

import torch


class MemoryBuffer:
    """Samples stored as named tensor fields of equal length.

    Parameters
    ----------
    capacity : int
        Maximum number of stored samples.
    update : update policy, default=Reservoir()
        Object with ``update(buffer, fields, generator)``.
    retrieval : retrieval policy, default=RandomRetrieval()
        Object with ``retrieve(buffer, n, generator)`` returning slot indices.
    input_dtype : torch.dtype, optional
        The dtype the inputs ``'X'`` are stored in (for example ``torch.bfloat16``
        under mixed precision, half the bytes); they are read back as float32.
        None: as offered.
    store : store policy, optional
        Object with ``encode(fields)``, applied to samples as they are stored
        (``append``, ``replace``), ``decode(fields)``, applied to what is read
        (``buffer[name]``, ``take``, ``sample``), and ``decoded_fields``, the names
        of the offered fields that ``decode`` rebuilds. Reads give the offered
        fields back, so update and retrieval policies work unchanged. None: samples
        are stored as offered.

    Attributes
    ----------
    fields : dict of str to Tensor
        What is stored: ``'X'`` and ``'y'`` (encoded labels) always; methods add
        their own (for example ``'logits'``, ``'task'``, ``'group'``), a store
        policy may add more (IDD: ``'frames'``).
    n_seen : int
        Number of samples offered to the buffer so far.
    """

    #: The store policy (None: samples stored as offered; a class attribute, so a
    #: buffer pickled before store policies existed reads as one without).
    store_policy = None

    def __init__(self, capacity: int, update=None, retrieval=None, input_dtype=None,
                 store=None):
        self.capacity = int(capacity)
        self.input_dtype = input_dtype
        self.store_policy = store
        self.update_policy = update if update is not None else Reservoir()
        self.retrieval_policy = retrieval if retrieval is not None else RandomRetrieval()
        self.fields: dict[str, torch.Tensor] = {}
        self.n_seen = 0

    def __len__(self) -> int:
        return len(self.fields["y"]) if self.fields else 0

    def __getitem__(self, name: str) -> torch.Tensor:
        store = self.store_policy
        if store is not None and name in store.decoded_fields:
            return _read(name, store.decode(self.fields)[name])
        return _read(name, self.fields[name])

    @property
    def nbytes(self) -> int:
        """Bytes of every stored tensor (inputs, labels and any other field)."""
        return sum(v.nbytes for v in self.fields.values())

    @property
    def classes(self) -> torch.Tensor:
        """The encoded labels present in memory."""
        return torch.unique(self.fields["y"]) if self.fields else torch.empty(0, dtype=torch.long)

    def add(self, generator: torch.Generator | None = None, **fields: torch.Tensor) -> None:
        """Offer samples to the buffer; the update policy decides which are kept."""
        self.update_policy.update(self, fields, generator)

    def sample(self, n: int, generator: torch.Generator | None = None, **context):
        """Up to ``n`` stored samples chosen by the retrieval policy, as a dict of fields.

        Returns None while the buffer is empty.
        """
        if len(self) == 0 or n <= 0:
            return None
        idx = self.retrieval_policy.retrieve(self, n, generator, **context)
        return self.take(idx)

    def take(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """The fields at slot indices ``idx``."""
        idx = idx.to(self.fields["y"].device)
        fields = {k: v[idx] for k, v in self.fields.items()}
        if self.store_policy is not None:
            fields = self.store_policy.decode(fields)
        return {k: _read(k, v) for k, v in fields.items()}

    # --- storage primitives used by the policies -------------------------------
    def _encode(self, fields: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Offered samples as they are stored: through the store policy, inputs in
        ``input_dtype``."""
        if self.store_policy is not None:
            fields = self.store_policy.encode(fields)
        dtype = getattr(self, "input_dtype", None)
        if dtype is not None and "X" in fields:
            fields = {**fields, "X": fields["X"].to(dtype)}
        return fields

    def append(self, fields: dict[str, torch.Tensor]) -> None:
        fields = self._encode(fields)
        if not self.fields:
            self.fields = {k: v.detach().clone() for k, v in fields.items()}
        else:
            self._check_names(fields)
            self.fields = {k: torch.cat([v, fields[k].detach()]) for k, v in self.fields.items()}

    def replace(self, slots: torch.Tensor, fields: dict[str, torch.Tensor]) -> None:
        fields = self._encode(fields)
        self._check_names(fields)
        slots = slots.to(self.fields["y"].device)
        for k, v in self.fields.items():
            v[slots] = fields[k].detach().to(v.dtype)

    def keep(self, slots: torch.Tensor) -> None:
        """Keep only the samples at ``slots``, in that order."""
        self.fields = {k: v[slots.to(v.device)] for k, v in self.fields.items()}

    def set_field(self, name: str, values: torch.Tensor) -> None:
        """Add or overwrite a per-sample field (for example stored logits)."""
        if len(values) != len(self):
            raise ValueError(f"field {name!r} needs {len(self)} rows, got {len(values)}")
        self.fields[name] = values.detach()

    def _check_names(self, fields):
        if set(fields) != set(self.fields):
            raise ValueError(
                f"memory stores fields {sorted(self.fields)}, got {sorted(fields)}"
            )


def _read(name: str, values: torch.Tensor) -> torch.Tensor:
    """A stored field as methods use it: inputs kept in a reduced precision as float32."""
    if name == "X" and values.dtype in (torch.bfloat16, torch.float16):
        return values.float()
    return values


def _randint(high: int, generator) -> int:
    return int(torch.randint(high, (1,), generator=generator))


class Reservoir:
    """Reservoir sampling (Vitter 1985): every sample offered so far has the same
    chance ``capacity / n_seen`` of being in memory."""

    def update(self, buffer: MemoryBuffer, fields, generator=None) -> None:
        n = len(fields["y"])
        new_rows, rows = [], {}
        for i in range(n):
            if len(buffer) + len(new_rows) < buffer.capacity:
                new_rows.append(i)
            else:
                j = _randint(buffer.n_seen + i + 1, generator)
                if j < buffer.capacity:
                    rows[j] = i  # a later sample may overwrite an earlier one
        buffer.n_seen += n
        if new_rows:
            idx = torch.as_tensor(new_rows)
            buffer.append({k: v[idx.to(v.device)] for k, v in fields.items()})
        if rows:
            slots = torch.as_tensor(list(rows))
            idx = torch.as_tensor(list(rows.values()))
            buffer.replace(slots, {k: v[idx.to(v.device)] for k, v in fields.items()})


class RandomRetrieval:
    """Uniform random retrieval without replacement."""

    def retrieve(self, buffer: MemoryBuffer, n: int, generator=None, **context) -> torch.Tensor:
        return torch.randperm(len(buffer), generator=generator)[:n]


_UNIT_NAMES = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20,
               "GiB": 2**30}
_UNITS = {u.upper(): v for u, v in _UNIT_NAMES.items()}  # units are case-insensitive


def parse_nbytes(text: str) -> int:
    """Bytes of a size written like ``'50MB'``, ``'1.5 GB'`` or ``'512KiB'``."""
    import re

    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]+)\s*", text)
    unit = match and match.group(2).upper()
    if not match or unit not in _UNITS or float(match.group(1)) <= 0:
        raise ValueError(
            f"memory_size {text!r} is not a positive size in bytes such as '50MB' "
            f"(units: {', '.join(_UNIT_NAMES)})"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def memory_capacity(memory_size, n_seen: int, slot_nbytes: int = 1) -> int:
    """Slots for a budget given as a count (int), a fraction of the ``n_seen``
    training samples seen so far (float in (0, 1]) or a size in bytes (str such as
    ``'50MB'``: as many slots of ``slot_nbytes`` bytes as fit, at least one)."""
    if isinstance(memory_size, str):
        return max(1, parse_nbytes(memory_size) // max(int(slot_nbytes), 1))
    if isinstance(memory_size, bool):
        raise TypeError(f"memory_size must be an int or a float, got {memory_size!r}")
    if isinstance(memory_size, numbers.Integral):
        if memory_size < 1:
            raise ValueError(f"memory_size as a count must be >= 1, got {memory_size}")
        return int(memory_size)
    size = float(memory_size)
    if not 0.0 < size <= 1.0:
        raise ValueError(
            f"memory_size as a fraction of the training samples seen must be in (0, 1], "
            f"got {memory_size!r}"
        )
    return max(1, int(size * n_seen))
