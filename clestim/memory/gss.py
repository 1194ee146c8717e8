"""Gradient-based sample selection, greedy version (GSS-greedy; Aljundi et al.,
NeurIPS 2019), as an update policy.

A sample's score is the largest cosine similarity between its loss gradient and
the mean gradients of a few random subsets of memory; a low score means a
gradient unlike the memory's, which GSS prefers to keep. The order of operations
follows the GSS-greedy update of Mai et al.'s online-CL code, used by TSCIL
(``utils/buffer/gss_greedy_update.py``), applied to each offered batch:

- while the memory has room, samples enter in offered order with their score
  (0.1 for the very first batch, against an empty memory);
- once it is full, a batch is considered only when its mean gradient has a
  negative score; then ``n`` candidate slots are drawn without replacement with
  weights growing with their stored score (min-max normalised), and the offered
  sample ``i`` replaces candidate ``j`` with probability
  ``(s_j + 1) / ((s_i + 1) + (s_j + 1))``: the more redundant the stored sample
  and the more diverse the new one, the likelier the swap.

Two departures from that code: samples of a batch left over once the memory
fills are not dropped but go through the full-memory rule, and a small constant
(1e-6) keeps every draw weight positive (the min-max weights give the least
redundant slot weight 0 and fail when all scores are equal).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

_EPS = 1e-6


def gss_scores(grads: torch.Tensor, memory_grads: torch.Tensor) -> torch.Tensor:
    """Largest cosine similarity of each row of ``grads`` (N, P) with the rows of
    ``memory_grads`` (K, P), shape (N,)."""
    return (F.normalize(grads, dim=1) @ F.normalize(memory_grads, dim=1).T).max(1).values


class GSSGreedy:
    """GSS-greedy memory update; see the module docstring.

    Stores each sample's score in the ``'gss_score'`` field.

    Parameters
    ----------
    sample_grads : callable
        Maps ``(X, y)`` to per-sample loss gradients, shape (N, P).
    n_subsets : int, default=10
        Random memory subsets whose mean gradients a sample is compared with
        (TSCIL's ``gss_mem_strength``).
    subset_size : int, default=10
        Samples per subset (``gss_batch_size``).
    batch_size : int, default=32
        Offered samples are processed in batches of this size.
    """

    def __init__(self, sample_grads, n_subsets=10, subset_size=10, batch_size=32):
        self.sample_grads = sample_grads
        self.n_subsets = n_subsets
        self.subset_size = subset_size
        self.batch_size = batch_size

    def memory_grads(self, buffer, generator=None) -> torch.Tensor:
        """Mean gradients of ``min(n_subsets, len // size)`` disjoint random subsets."""
        size = min(self.subset_size, len(buffer))
        k = min(self.n_subsets, len(buffer) // size)
        slots = torch.randperm(len(buffer), generator=generator)[: k * size]
        grads = self.sample_grads(buffer["X"][slots], buffer["y"][slots])
        return grads.reshape(k, size, -1).mean(1)

    def update(self, buffer, fields, generator=None) -> None:
        n = len(fields["y"])
        for start in range(0, n, self.batch_size):
            self._update_batch(buffer, _rows(fields, slice(start, start + self.batch_size)),
                               generator)

    def _update_batch(self, buffer, fields, generator):
        buffer.n_seen += len(fields["y"])
        room = buffer.capacity - len(buffer)
        if room > 0:
            head = _rows(fields, slice(0, room))
            if len(buffer) == 0:
                score = torch.full((len(head["y"]),), 0.1)
            else:
                mem = self.memory_grads(buffer, generator)
                score = gss_scores(self.sample_grads(head["X"], head["y"]), mem)
            buffer.append({**head, "gss_score": score.to(head["y"].device)})
            fields = _rows(fields, slice(room, None))
            if len(fields["y"]) == 0:
                return
        fields = _rows(fields, slice(0, len(buffer)))
        mem = self.memory_grads(buffer, generator)
        grads = self.sample_grads(fields["X"], fields["y"])
        if gss_scores(grads.mean(0, keepdim=True), mem)[0] >= 0:
            return
        stored = buffer["gss_score"].cpu()
        weight = (stored - stored.min()) / (stored.max() - stored.min() + 0.01) + _EPS
        slots = torch.multinomial(weight, len(fields["y"]), replacement=False, generator=generator)
        score = gss_scores(grads, mem).cpu()
        odds = torch.stack([(score + 1) / 2, (stored[slots] + 1) / 2], 1) + _EPS
        swap = torch.multinomial(odds, 1, generator=generator).squeeze(1).bool()
        if swap.any():
            new = _rows(fields, torch.nonzero(swap).flatten())
            new["gss_score"] = score[swap].to(buffer["gss_score"].device)
            buffer.replace(slots[swap], new)


def _rows(fields: dict, idx) -> dict:
    if isinstance(idx, torch.Tensor):
        return {k: v[idx.to(v.device)] for k, v in fields.items()}
    return {k: v[idx] for k, v in fields.items()}
