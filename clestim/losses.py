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

    The softmaxes are taken in float32 (logits from a bfloat16/float16 autocast
    forward pass are cast up first; autocast would keep them in the low precision).
    """
    student, teacher = student.float(), teacher.float()
    return F.kl_div(
        F.log_softmax(student / temperature, dim=1),
        F.softmax(teacher / temperature, dim=1),
        reduction="batchmean",
    )


#: The ``kd`` values of :class:`~clestim.methods.ER` and its subclasses.
KD_KINDS = (None, "features", "logits", "both")


def replay_distillation_loss(
    kind, features, logits, teacher_features, teacher_logits, temperature: float = 2.0
) -> torch.Tensor:
    """The KD variants of the SLU paper (Sect. 3.3) for replay methods.

    - ``'features'``, the analogue of its audio-KD (distillation at the encoder):
      ``MSE(h, h_old)``, the mean squared difference of the current and the
      previous (teacher) backbone embeddings.
    - ``'logits'``, the analogue of its seq-KD (at the decoder's outputs):
      :func:`distillation_loss` on the old classes' logits (the teacher's columns).
    - ``'both'``: their sum.

    Parameters
    ----------
    kind : {'features', 'logits', 'both'}
    features, teacher_features : Tensor of shape (n_samples, n_features)
    logits : Tensor of shape (n_samples, n_classes)
    teacher_logits : Tensor of shape (n_samples, n_old_classes)
    temperature : float, default=2.0
    """
    if kind not in KD_KINDS[1:]:
        raise ValueError(f"kind must be one of {KD_KINDS[1:]}, got {kind!r}")
    loss = features.new_zeros(())
    if kind in ("features", "both"):
        loss = loss + F.mse_loss(features, teacher_features)
    if kind in ("logits", "both"):
        old = teacher_logits.shape[1]
        loss = loss + distillation_loss(logits[:, :old], teacher_logits, temperature)
    return loss


def soft_dtw(x: torch.Tensor, y: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Soft dynamic time warping discrepancy of pairs of sequences (Cuturi & Blondel 2017).

    With the squared Euclidean point cost ``C[i, j] = ||x_i - y_j||^2`` and the
    soft minimum ``min_g(a_1..a_k) = -g log sum_k exp(-a_k / g)``, the recursion::

        R[0, 0] = 0,   R[i, 0] = R[0, j] = inf   (i, j > 0)
        R[i, j] = C[i, j] + min_g(R[i-1, j-1], R[i-1, j], R[i, j-1])

    gives ``soft_dtw(x, y) = R[n, m]``, unnormalised (``gamma -> 0`` is DTW). As
    TSCIL's DT2W code (``SoftDTW(gamma=1, normalize=False)``). The recursion runs
    over the ``n + m - 1`` anti-diagonals of ``R``, each computed for the whole batch
    at once, so autograd differentiates it directly.

    Parameters
    ----------
    x : Tensor of shape (n_pairs, n, n_features)
    y : Tensor of shape (n_pairs, m, n_features)
        Batches of sequences, time along dimension 1 (feature maps ``(N, C, L)`` are
        passed transposed, ``fmap.transpose(1, 2)``).
    gamma : float, default=1.0
        Smoothing, > 0.

    Returns
    -------
    Tensor of shape (n_pairs,)
        The discrepancy of each pair (can be negative: soft-DTW is not a distance).

    Raises
    ------
    ValueError
        If ``x`` or ``y`` is not 3-D, their batch or feature sizes differ, or
        ``gamma <= 0``.

    Examples
    --------
    >>> import torch
    >>> x = torch.zeros(2, 4, 3)
    >>> soft_dtw(x, x, gamma=0.01).abs().max() < 0.1
    tensor(True)
    """
    if x.dim() != 3 or y.dim() != 3:
        raise ValueError(
            "soft_dtw needs 3-D sequences (n_pairs, n_timepoints, n_features), got "
            f"shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[2]:
        raise ValueError(
            "soft_dtw needs the same number of pairs and features in x and y, got "
            f"shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )
    if not gamma > 0:
        raise ValueError(f"gamma must be positive, got {gamma!r}")
    n, m = x.shape[1], y.shape[1]
    # ||x_i||^2 + ||y_j||^2 - 2 <x_i, y_j>: one batched matmul instead of an
    # (n, m, n_features) difference tensor; clamped at 0 against rounding
    cost = (
        x.pow(2).sum(-1)[:, :, None] + y.pow(2).sum(-1)[:, None, :] - 2 * x @ y.transpose(1, 2)
    ).clamp_min(0)  # (n_pairs, n, m)
    # R is kept one anti-diagonal at a time, indexed by the row i in [0, n]; cells
    # outside the matrix (and its inf border) hold a large finite value so that
    # gradients stay finite.
    big = torch.full((), 1e10 * max(1.0, float(gamma)), dtype=cost.dtype, device=cost.device)
    i = torch.arange(n + 1, device=cost.device)
    j = torch.arange(2, n + m + 1, device=cost.device)[:, None] - i  # (n + m - 1, n + 1)
    valid = (i >= 1) & (j >= 1) & (j <= m)
    diagonals = cost[:, (i - 1).clamp(0, n - 1), (j - 1).clamp(0, m - 1)]  # all at once
    diagonals = torch.where(valid, diagonals, big)
    border = big.expand(len(cost), 1)
    prev2 = torch.where(i == 0, 0.0, big).expand(len(cost), n + 1)  # diagonal 0: R[0, 0]
    prev1 = big.expand(len(cost), n + 1)  # diagonal 1: R[0, 1], R[1, 0]
    for d in range(n + m - 1):
        options = torch.stack(
            [
                torch.cat([border, prev2[:, :-1]], dim=1),  # R[i-1, j-1]
                torch.cat([border, prev1[:, :-1]], dim=1),  # R[i-1, j]
                prev1,  # R[i, j-1]
            ]
        )
        softmin = -gamma * torch.logsumexp(options / -gamma, dim=0)
        prev2, prev1 = prev1, torch.where(valid[d], diagonals[:, d] + softmin, big)
    return prev1[:, n]
