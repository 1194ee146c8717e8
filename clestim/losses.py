"""Loss terms shared by several methods."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float = 2.0):
    """Knowledge distillation ``KL(softmax(t/T) || softmax(s/T))``, averaged over the batch.

    As in TSCIL's LwF (Li & Hoiem 2017): summed over classes, divided by the batch
    size, without the ``T**2`` factor of Hinton et al. (2015). It differs from the
    cross-entropy form of the LwF paper only by the teacher's entropy, a constant.

    Parameters
    ----------
    student, teacher : Tensor of shape (n_samples, n_classes)
        Logits over the same (old) classes.
    temperature : float, default=2.0
    """
    return F.kl_div(
        F.log_softmax(student / temperature, dim=1),
        F.softmax(teacher / temperature, dim=1),
        reduction="batchmean",
    )
