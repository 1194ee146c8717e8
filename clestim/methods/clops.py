"""CLOPS: importance-guided storage and uncertainty-based retrieval."""

import numbers

import torch
from torch import nn

from ..memory import ImportanceSelection, UncertaintyRetrieval
from .replay import ER


class CLOPS(ER):
    r"""CLOPS (Kiyasseh et al., Nature Communications 2021), as in TSCIL (Qiao et
    al. 2024, App. B.8).

    Every training sample ``i`` of a task gets an importance ``beta_i = 1``; its
    cross-entropy is weighted by it and a regulariser keeps it near 1:

    .. math:: L = \frac{1}{B}\sum_{i=1}^{B} \big[\beta_i \ell_i
              + \lambda_\beta (\beta_i - 1)^2\big] + CE(f(x_{mem}), y_{mem})

    After each step ``beta_i <- beta_i - eta_beta * dL/dbeta_i`` with
    ``dL/dbeta_i = (l_i + 2 lambda_beta (beta_i - 1)) / B``. The value of ``beta_i``
    is recorded each time sample ``i`` is trained on (once per epoch); its score is
    the area under that trajectory by the trapezoidal rule with unit spacing
    (TSCIL's ``np.trapz``; a single recorded value, as in online mode, is its own
    score). After each task every class keeps the ``memory_size // n_classes``
    samples of highest score, old classes their first ones
    (:class:`~clestim.memory.ImportanceSelection`).

    ``beta`` is kept in float32, as in TSCIL's code. This matters: near 1
    float32 resolves steps of about 3e-8 only, so with the default ``beta_lr`` a
    sample's ``beta`` stops moving once its loss falls below about 0.01, many samples
    share a score, and storage breaks those ties in random order. In float64 the
    ranking would keep each class's samples of lowest cumulative loss, which replay
    worse: 2.2-5.9 points of A_T below float32 on three LN UCI-HAR runs of TSCIL's
    protocol (``benchmarks/clops_beta_precision.py``).

    Retrieval is random by default (TSCIL's choice); ``retrieval='uncertainty'``
    replays CLOPS's most uncertain memory samples, re-scored every ``mc_every``
    epochs by the BALD score of ``mc_passes`` Monte-Carlo-dropout predictions
    (:class:`~clestim.memory.UncertaintyRetrieval`). As TSCIL's code, no gradient
    clipping by default.

    Parameters
    ----------
    beta_lr : float, default=1e-4
        ``eta_beta`` (TSCIL grid: 1e-4, 1e-5).
    lambda_beta : float, default=1.0
        ``lambda_beta`` (TSCIL grid: 0.1, 1, 10, 100).
    retrieval : {'random', 'uncertainty', 'subject_balanced'}, default='random'
    mc_passes : int, default=10
    mc_every : int, default=3
    mc_dropout : float, default=0.25
        Dropout rate of the Monte-Carlo passes when the network has none (p = 0).
    grad_clip : float or None, default=None
    **params
        The parameters of :class:`ER`.
    """

    RETRIEVALS = (*ER.RETRIEVALS, "uncertainty")

    def __init__(
        self,
        *,
        beta_lr=1e-4,
        lambda_beta=1.0,
        mc_passes=10,
        mc_every=3,
        mc_dropout=0.25,
        grad_clip=None,
        **params,
    ):
        super().__init__(grad_clip=grad_clip, **params)
        self.beta_lr = beta_lr
        self.lambda_beta = lambda_beta
        self.mc_passes = mc_passes
        self.mc_every = mc_every
        self.mc_dropout = mc_dropout

    def _check_params(self):
        super()._check_params()
        for name in ("mc_passes", "mc_every"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if not 0.0 < float(self.mc_dropout) < 1.0:
            raise ValueError(f"mc_dropout must be in (0, 1), got {self.mc_dropout!r}")

    def _update_policy(self):
        return ImportanceSelection("score")

    def _retrieval_policy(self):
        if self.retrieval == "uncertainty":
            return UncertaintyRetrieval(self._mc_probs, refresh_every=self.mc_every)
        return super()._retrieval_policy()

    def _task_data(self, train, valid):
        n = len(train[1])
        self.beta_ = torch.ones(n, dtype=torch.float32)
        self._beta_sum = torch.zeros(n, dtype=torch.float64)
        self._beta_first = torch.zeros(n, dtype=torch.float64)
        self._beta_count = torch.zeros(n, dtype=torch.long)
        return super()._task_data(train, valid)

    def _training_loss(self, X, y):
        idx = self._batch_index.cpu()
        memory = self.memory_.sample(
            self.replay_batch_size, self._generator, X=X, y=y, epoch=self._epoch
        )
        if memory is None:
            logits, replay = self.module_(X), 0.0
        else:
            logits_memory, logits = self._forward(memory["X"], X)
            replay = self._replay_loss(logits_memory, memory)
        beta = self.beta_[idx]
        ce = self._criterion(logits, y, reduction="none")
        beta_t = beta.to(ce)
        loss = (beta_t * ce).mean() + self.lambda_beta * ((beta_t - 1) ** 2).mean() + replay
        grad = (ce.detach().double().cpu() + 2 * self.lambda_beta * (beta - 1)) / len(idx)
        self._track(idx, beta - self.beta_lr * grad)
        return loss

    def _track(self, idx, beta):
        """Store the new ``beta`` of samples ``idx``, rounded to ``beta_``'s float32,
        and record it in their trajectories (summed in float64, as ``np.trapz``)."""
        self.beta_[idx] = beta.to(self.beta_.dtype)
        recorded = self.beta_[idx].double()
        first = self._beta_count[idx] == 0
        self._beta_first[idx[first]] = recorded[first]
        self._beta_sum[idx] += recorded
        self._beta_count[idx] += 1

    def importance_scores(self):
        """Area under each training sample's ``beta`` trajectory in the current task."""
        last = self.beta_.double()
        trapz = self._beta_sum - (self._beta_first + last) / 2
        return torch.where(self._beta_count >= 2, trapz, last)

    def _memory_fields(self, X, y, groups, index=None):
        fields = super()._memory_fields(X, y, groups, index)
        fields["score"] = self.importance_scores()[torch.as_tensor(index)].to(X.device)
        return fields

    @torch.no_grad()
    def _mc_probs(self, X):
        """Softmax outputs of ``mc_passes`` passes with dropout on, shape (R, N, C)."""
        module = self.module_
        was_training = module.training
        module.eval()
        drops = [m for m in module.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
        rates = [m.p for m in drops]
        for m in drops:
            m.train()
            m.p = m.p or self.mc_dropout
        try:
            return torch.stack([torch.softmax(module(X), 1) for _ in range(self.mc_passes)])
        finally:
            for m, p in zip(drops, rates):
                m.p = p
            module.train(was_training)
