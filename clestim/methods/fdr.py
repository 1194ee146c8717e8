"""FDR: function distance regularisation on the buffer's stored outputs."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..memory import TaskBalanced
from .replay import ER


def function_distance(logits: torch.Tensor, stored: torch.Tensor) -> torch.Tensor:
    r"""FDR's distance :math:`\mathrm{mean}_i \|\mathrm{softmax}(f(x_i)) -
    \mathrm{softmax}(z_i)\|_2` (Mammoth's form). Stored logits narrower than the
    head (older tasks) are padded with ``-inf``: probability 0 for the classes
    learned since."""
    target = torch.softmax(_pad_to(stored, logits.shape[1]), 1)
    return torch.linalg.vector_norm(torch.softmax(logits, 1) - target, dim=1).mean()


class FDR(ER):
    """Function Distance Regularization (Benjamin et al., ICLR 2019), as in Mammoth.

    Each training step is the cross-entropy of the new batch alone; then, as its
    own optimizer step, the network's softmax on a memory batch is pulled towards
    the softmax of the outputs stored with it (:func:`function_distance`). The
    memory is per task (:class:`~clestim.memory.TaskBalanced`: ``memory_size //
    n_tasks`` samples of each task, filled after the task with their outputs from
    the task's final network in eval mode).

    Parameters
    ----------
    **params
        The parameters of :class:`~clestim.ER`.
    """

    def _update_policy(self):
        return TaskBalanced()

    def _memory_fields(self, X, y, groups, index=None):
        fields = super()._memory_fields(X, y, groups, index)
        fields["task"] = torch.full_like(y, self.n_tasks_seen_)
        fields["logits"] = self._eval_forward(X)
        if len(self.memory_):
            width = fields["logits"].shape[1]
            self.memory_.set_field("logits", _pad_to(self.memory_["logits"], width))
        return fields

    def _training_loss(self, X, y):
        return self._criterion(self.module_(X), y)

    def _after_batch(self, X, y, epoch):
        super()._after_batch(X, y, epoch)
        if len(self.memory_) == 0:
            return
        memory = self.memory_.sample(self.replay_batch_size, self._generator)
        optimizer = self._optimizer
        optimizer.zero_grad()
        function_distance(self.module_(memory["X"]), memory["logits"]).backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.module_.parameters(), self.grad_clip)
        optimizer.step()
        optimizer.zero_grad()


def _pad_to(logits, width):
    return F.pad(logits, (0, width - logits.shape[1]), value=-torch.inf)


__all__ = ["FDR", "function_distance"]
