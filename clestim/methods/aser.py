"""ASER: experience replay with adversarial Shapley value retrieval."""

import numbers

import torch

from ..memory import ASERRetrieval, ASERUpdate
from .replay import ER


class ASER(ER):
    r"""Adversarial Shapley value Experience Replay (Shim et al., AAAI 2021), as in
    TSCIL (Qiao et al. 2024, App. B.7).

    The memory batch is chosen among ``n_smp_per_class`` random candidates per class
    by the adversarial Shapley value on embeddings,

    .. math:: ASV(i) = \frac{1}{|S|}\sum_{j \in S} s_j(i)
              - \frac{1}{|B|}\sum_{k \in B} s_k(i)

    where ``s_j(i)`` is the exact KNN-Shapley value of candidate ``i`` for sample
    ``j`` (Jia et al. 2019), ``S`` a class-balanced evaluation draw of the other
    memory samples and ``B`` the incoming batch: samples that represent their class
    in memory and that the new batch's classes interfere with. See
    :class:`~clestim.memory.ASERRetrieval`. As TSCIL's code, new and memory samples
    are trained with one cross-entropy over the concatenated batch::

        loss = CE(f([x; x_mem]), [y; y_mem])

    in one forward pass, also with BatchNorm: the layer normalises new and memory
    samples with their joint batch statistics (ER and DER, as TSCIL's code, give
    each batch its own pass and statistics).

    The memory is updated by Shapley value too (:class:`~clestim.memory.ASERUpdate`,
    as TSCIL's code): offered samples replace memory samples of lower value;
    ``aser_update=False`` uses reservoir sampling.

    Parameters
    ----------
    k : int, default=3
        Neighbours of the KNN utility (TSCIL: 3).
    n_smp_per_class : int, default=2
        Candidates and evaluation samples per class (TSCIL grid: 2, 4).
    retrieval : {'aser', 'random', 'subject_balanced'}, default='aser'
    aser_update : bool, default=True
        Update the memory by Shapley value (else by reservoir sampling).
    **params
        The parameters of :class:`ER`.
    """

    RETRIEVALS = ("aser", *ER.RETRIEVALS)

    def __init__(self, *, k=3, n_smp_per_class=2, retrieval="aser", aser_update=True, **params):
        super().__init__(retrieval=retrieval, **params)
        self.k = k
        self.n_smp_per_class = n_smp_per_class
        self.aser_update = aser_update

    def _check_params(self):
        super()._check_params()
        for name in ("k", "n_smp_per_class"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")

    def _update_policy(self):
        if self.aser_update:
            return ASERUpdate(self._embed, k=self.k, n_smp_per_class=self.n_smp_per_class,
                              batch_size=self.batch_size)
        return super()._update_policy()

    def _retrieval_policy(self):
        if self.retrieval == "aser":
            return ASERRetrieval(self._embed, k=self.k, n_smp_per_class=self.n_smp_per_class)
        return super()._retrieval_policy()

    def _training_loss(self, X, y):
        memory = self.memory_.sample(self.replay_batch_size, self._generator, X=X, y=y)
        if memory is None:
            return super(ER, self)._training_loss(X, y)
        logits = self.module_(torch.cat([X, memory["X"]]))
        return self._criterion(logits, torch.cat([y, memory["y"]]))
