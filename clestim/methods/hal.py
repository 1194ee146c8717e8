"""HAL: experience replay with anchors learned by maximising forgetting."""

from __future__ import annotations

import copy

import torch

from .replay import ER


class HAL(ER):
    r"""Hindsight Anchor Learning (Chaudhry et al., AAAI 2021), on top of ER.

    **Training step.** With :math:`\ell` ER's loss on the new and the memory batch
    and ``e`` the anchors of earlier tasks, the update at :math:`\theta` follows
    the gradient of

    .. math:: \ell(\theta) + \lambda \,\mathrm{mean}\big[(f_{\tilde\theta}(e) -
              f_\theta(e))^2\big], \qquad \tilde\theta = \theta - \eta \nabla\ell(\theta)

    where :math:`\tilde\theta` is a look-ahead SGD step of rate ``hal_lr`` (held
    fixed). Mammoth's code takes that step with the real optimizer, then returns
    to :math:`\theta` and steps on both gradients; our training optimizer is Adam,
    so the look-ahead is an explicit SGD step. After every step the running
    mean embedding of the new batches is updated,
    :math:`\phi \leftarrow \beta\phi + (1-\beta)\,\mathrm{mean}\,h_\theta(x)`
    (restarting from 0 each task).

    **Anchors**, after each task (once the memory holds the task's samples): a copy
    of the network is fine-tuned on ``finetuning_steps`` memory batches (SGD,
    ``hal_lr``) to :math:`\theta_m`; then for every class ``c`` of the task an
    anchor starts as uniform noise in ``[0, 1)`` and takes ``anchor_steps`` SGD
    steps (``hal_lr``) on

    .. math:: \mathrm{CE}(f_\theta(e), c) - \mathrm{CE}(f_{\theta_m}(e), c)
              + \gamma \|h_\theta(e) - \phi\|^2 ,

    an input the network classifies well now but would forget after more training,
    near the task's mean embedding. Both networks are frozen copies in eval mode.
    Defaults are the paper's and Mammoth's (``lambda=0.1, beta=0.5, gamma=0.1``,
    100 anchor steps, one fine-tuning step).

    Parameters
    ----------
    hal_lambda : float, default=0.1
    beta : float, default=0.5
    gamma : float, default=0.1
    anchor_steps : int, default=100
    finetuning_steps : int, default=1
    hal_lr : float, default=0.1
        SGD rate of the look-ahead, the fine-tuning and the anchor optimisation.
    **params
        The parameters of :class:`~clestim.ER`.

    Attributes
    ----------
    anchors_ : Tensor of shape (n_anchors, *input_shape)
        One anchor per class learned, counted in ``memory_nbytes_``.
    """

    def __init__(self, *, hal_lambda=0.1, beta=0.5, gamma=0.1, anchor_steps=100,
                 finetuning_steps=1, hal_lr=0.1, **params):
        super().__init__(**params)
        self.hal_lambda = hal_lambda
        self.beta = beta
        self.gamma = gamma
        self.anchor_steps = anchor_steps
        self.finetuning_steps = finetuning_steps
        self.hal_lr = hal_lr

    def _before_task(self, X, y, groups):
        super()._before_task(X, y, groups)
        if not hasattr(self, "anchors_"):
            self.anchors_ = torch.zeros((0, *X.shape[1:]))
        self._phi = None

    def _training_loss(self, X, y):
        loss = super()._training_loss(X, y)
        if len(self.anchors_) == 0:
            return loss
        return loss + self.hal_lambda * self._anchor_drift(loss)

    def _anchor_drift(self, loss):
        """``mean((f_lookahead(e) - f(e))^2)`` over the anchors ``e``."""
        from torch.func import functional_call

        named = [(n, p) for n, p in self.module_.named_parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, [p for _, p in named], retain_graph=True,
                                    allow_unused=True)
        anchors = self.anchors_.to(loss.device)
        with torch.no_grad():
            ahead = {n: p if g is None else p - self.hal_lr * g for (n, p), g in zip(named, grads)}
            target = functional_call(self.module_, ahead, (anchors,))
        return ((target - self.module_(anchors)) ** 2).mean()

    def _after_batch(self, X, y, epoch):
        super()._after_batch(X, y, epoch)
        with torch.no_grad():
            mean = self.module_.features(X).mean(0)
        self._phi = (1 - self.beta) * mean + (self.beta * self._phi if self._phi is not None else 0)

    def _after_task(self, X, y, groups):
        super()._after_task(X, y, groups)
        now = self._frozen_copy()
        later = self._finetuned_copy()
        phi = self._phi if self._phi is not None else 0.0
        anchors = [self._anchor(int(c), now, later, phi) for c in torch.unique(torch.as_tensor(y))]
        self.anchors_ = torch.cat([self.anchors_, torch.stack(anchors).cpu()])

    def _finetuned_copy(self):
        net = copy.deepcopy(self.module_).train()
        optimizer = torch.optim.SGD(net.parameters(), lr=self.hal_lr)
        for _ in range(self.finetuning_steps):
            batch = self.memory_.sample(self.batch_size, self._generator)
            if batch is None:  # nothing in memory (e.g. every sample gated out)
                break
            optimizer.zero_grad()
            self._criterion(net(batch["X"]), batch["y"]).backward()
            optimizer.step()
        net.eval().requires_grad_(False)
        return net

    def anchor_objective(self, e, c, now, later, phi):
        """The loss an anchor ``e`` (a batch of one) of class ``c`` minimises."""
        target = torch.full((len(e),), c, dtype=torch.long, device=e.device)
        return (
            self._criterion(now(e), target)
            - self._criterion(later(e), target)
            + self.gamma * ((now.features(e) - phi) ** 2).sum()
        )

    def _anchor(self, c, now, later, phi):
        e = torch.rand((1, *self.input_shape_), generator=self._generator).to(self.device)
        e.requires_grad_(True)
        optimizer = torch.optim.SGD([e], lr=self.hal_lr)
        for _ in range(self.anchor_steps):
            optimizer.zero_grad()
            self.anchor_objective(e, c, now, later, phi).backward()
            optimizer.step()
        return e.detach()[0]

    def _memory_tensors(self):
        return [*super()._memory_tensors(), self.anchors_]
