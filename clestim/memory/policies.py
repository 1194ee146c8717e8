"""Memory policies beyond reservoir and random retrieval.

Update policies (``update(buffer, fields, generator)``):

- :class:`HerdingSelection`: iCaRL's class-balanced herding (Rebuffi et al. 2017).
- :class:`ImportanceSelection`: class-balanced top scores (CLOPS, Kiyasseh et al. 2021).
- :class:`SubjectSubset`: wraps any update policy; only chosen subjects enter.
- :class:`ConfidenceGate`: wraps any update policy; only confidently correct
  samples enter (CDR, Villa et al. 2022).
- :class:`TaskBalanced`: an equal share per task (GEM's episodic memory).

Retrieval policies (``retrieve(buffer, n, generator, **context)``):

- :class:`ASERRetrieval`: adversarial Shapley value (Shim et al. 2021).
- :class:`SubjectBalancedRetrieval`: as many samples from each subject (TSCIL Sect. 5.3).
- :class:`UncertaintyRetrieval`: Monte-Carlo-dropout BALD scores (CLOPS).

A policy that needs the network (embeddings, predictions) receives a function at
construction instead of the network itself, so the storage stays model-agnostic.
Subject ids are stored as integer codes in the ``'group'`` field.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch.nn import functional as F

from .buffer import MemoryBuffer, RandomRetrieval, Reservoir


def _fields_at(fields: dict, idx: torch.Tensor) -> dict:
    return {k: v[idx.to(v.device)] for k, v in fields.items()}


def check_class_quota(capacity: int, n_classes: int) -> int:
    """The per-class quota ``capacity // n_classes``; an error when it is 0."""
    if n_classes and capacity < n_classes:
        raise ValueError(
            f"the memory holds {capacity} samples but needs at least one per class for "
            f"{n_classes} classes; raise memory_size to at least {n_classes}"
        )
    return capacity // max(n_classes, 1)


class ClassBalancedSelection(ABC):
    """Equal per-class quota, rebuilt after every update, exemplars kept in rank order.

    After an update every class holds ``m = capacity // n_classes`` exemplars (or
    all of its samples when it has fewer). A class among the offered samples is
    ranked anew over its stored and offered samples with :meth:`rank`; a class that
    is not offered keeps the first ``m`` of its exemplars, so shrinking the quota
    drops the least important ones. Memory order: classes by encoded label, each in
    rank order. (TSCIL's code uses ``ceil`` for ``m``, which can overflow the
    budget by up to ``n_classes - 1``; the floor never does.)
    """

    @abstractmethod
    def rank(self, fields: dict, generator=None) -> torch.Tensor:
        """Order of importance of one class's samples (most important first)."""

    def update(self, buffer: MemoryBuffer, fields, generator=None) -> None:
        n_stored = len(buffer)
        offered = torch.unique(fields["y"]).cpu()
        stored = buffer.classes.cpu()
        classes = torch.unique(torch.cat([stored, offered]))
        m = check_class_quota(buffer.capacity, len(classes))
        buffer.n_seen += len(fields["y"])
        buffer.append(fields)
        y = buffer["y"].cpu()
        offered = set(offered.tolist())
        slots = []
        for c in classes.tolist():
            pool = torch.nonzero(y == c).flatten()
            if c in offered:
                pool = pool[self.rank(buffer.take(pool), generator).cpu()]
            else:
                pool = pool[pool < n_stored]
            slots.append(pool[:m])
        buffer.keep(torch.cat(slots))


def herding_order(features: torch.Tensor, m: int | None = None) -> torch.Tensor:
    r"""iCaRL's herding order of samples (Rebuffi et al., CVPR 2017, Alg. 4).

    With ``phi`` the L2-normalised features and ``mu`` their mean (not normalised
    again), the ``k``-th exemplar is

    .. math:: p_k = \arg\min_x \Big\| \mu - \frac{1}{k}\Big[\phi(x)
              + \sum_{j<k} \phi(p_j)\Big] \Big\|

    over the samples not chosen yet (TSCIL Eq. 12). Ties go to the lowest index.

    Parameters
    ----------
    features : Tensor of shape (n_samples, n_features)
    m : int, optional
        How many to order (default: all).

    Returns
    -------
    Tensor of shape (min(m, n_samples),), indices into ``features``.
    """
    phi = F.normalize(features.double(), dim=1)
    mu = phi.mean(0)
    n = len(phi)
    m = n if m is None else min(m, n)
    chosen = torch.zeros(n, dtype=torch.bool)
    total = torch.zeros_like(mu)
    order = []
    for k in range(1, m + 1):
        dist = torch.linalg.vector_norm(mu - (phi + total) / k, dim=1)
        dist[chosen] = torch.inf
        i = int(torch.argmin(dist))
        order.append(i)
        chosen[i] = True
        total += phi[i]
    return torch.as_tensor(order, dtype=torch.long)


class HerdingSelection(ClassBalancedSelection):
    """Class-balanced herding (iCaRL, Rebuffi et al. 2017); see :func:`herding_order`.

    Parameters
    ----------
    embed : callable
        Maps a batch of inputs to embeddings ``(N, D)`` (the current network's
        features, in eval mode).
    """

    def __init__(self, embed):
        self.embed = embed

    def rank(self, fields, generator=None):
        return herding_order(self.embed(fields["X"]).cpu())


class ImportanceSelection(ClassBalancedSelection):
    """Class-balanced storage of the highest scores of field ``field`` (CLOPS's
    area under the importance trajectory). Ties keep the offered order.

    Parameters
    ----------
    field : str, default='score'
    """

    def __init__(self, field: str = "score"):
        self.field = field

    def rank(self, fields, generator=None):
        return torch.sort(fields[self.field].cpu(), descending=True, stable=True).indices


class SubjectSubset:
    """Only samples of the chosen subjects enter memory; the rest is not offered.

    TSCIL's "ER (k Sub)" variant (Sect. 5.3, Table 5), which shifts the memory's
    subject distribution away from the data's.

    Parameters
    ----------
    subjects : iterable of int
        Subject codes (the ``'group'`` field) allowed into memory.
    inner : update policy, default=Reservoir()
    """

    def __init__(self, subjects, inner=None):
        self.subjects = sorted(int(s) for s in subjects)
        self.inner = inner if inner is not None else Reservoir()

    def update(self, buffer, fields, generator=None):
        keep = torch.isin(fields["group"], torch.as_tensor(self.subjects).to(fields["group"]))
        if keep.any():
            self.inner.update(buffer, _fields_at(fields, torch.nonzero(keep).flatten()), generator)


class ConfidenceGate:
    """Confidence-driven rehearsal (CDR; Villa et al. 2022, Sect. 4.3): a sample may
    enter memory only when the model's probability for its true class is above
    ``threshold``; the others are not offered to ``inner`` at all.

    Parameters
    ----------
    score : callable
        Maps ``(X, y)`` to the probability of each sample's true class, shape (N,).
    threshold : float
        ``delta`` in [0, 1); a sample with probability ``<= threshold`` never enters.
    inner : update policy, default=Reservoir()
    """

    def __init__(self, score, threshold: float, inner=None):
        self.score = score
        self.threshold = float(threshold)
        self.inner = inner if inner is not None else Reservoir()

    def update(self, buffer, fields, generator=None):
        keep = self.score(fields["X"], fields["y"]).to(fields["y"].device) > self.threshold
        if keep.any():
            self.inner.update(buffer, _fields_at(fields, torch.nonzero(keep).flatten()), generator)


class TaskBalanced:
    """An episodic memory per task (GEM, Lopez-Paz and Ranzato 2017): after every
    update each task stored in the ``'task'`` field holds its first
    ``capacity // n_tasks`` samples in offered order, so a new task shrinks the
    older ones' share by dropping their last samples."""

    def update(self, buffer, fields, generator=None):
        buffer.n_seen += len(fields["y"])
        buffer.append(fields)
        task = buffer["task"].cpu()
        tasks = torch.unique(task)
        m = buffer.capacity // len(tasks)
        if m < 1:
            raise ValueError(
                f"the memory holds {buffer.capacity} samples but needs at least one per task "
                f"for {len(tasks)} tasks; raise memory_size"
            )
        buffer.keep(torch.cat([torch.nonzero(task == t).flatten()[:m] for t in tasks.tolist()]))


class SubjectBalancedRetrieval:
    """As many samples from each subject in memory as possible (TSCIL's ER "Balanced").

    Each subject's slots are shuffled; the first slot of every subject is taken,
    then the second, and so on (subjects in random order within a round), until
    ``n`` are drawn. With ``S`` subjects each gives ``n // S`` or one more, and a
    subject with too few samples leaves its share to the others. TSCIL draws
    ``int(n / S)`` per subject and so returns fewer than ``n`` when ``S`` does not
    divide ``n``.
    """

    def retrieve(self, buffer, n, generator=None, **context):
        groups = buffer["group"].cpu()
        subjects = torch.unique(groups)
        priority = torch.randperm(len(subjects), generator=generator)
        round_ = torch.empty(len(groups), dtype=torch.long)
        rank_in_round = torch.empty(len(groups), dtype=torch.long)
        for s, p in zip(subjects.tolist(), priority.tolist()):
            slots = torch.nonzero(groups == s).flatten()
            slots = slots[torch.randperm(len(slots), generator=generator)]
            round_[slots] = torch.arange(len(slots))
            rank_in_round[slots] = p
        key = round_ * len(subjects) + rank_in_round
        return torch.argsort(key)[:n]


def _class_balanced_draw(y: torch.Tensor, per_class: int, generator=None) -> torch.Tensor:
    """Up to ``per_class`` random positions of each class in ``y``."""
    picks = []
    for c in torch.unique(y).tolist():
        slots = torch.nonzero(y == c).flatten()
        picks.append(slots[torch.randperm(len(slots), generator=generator)[:per_class]])
    return torch.cat(picks) if picks else torch.empty(0, dtype=torch.long)


def knn_shapley(train_features, train_y, eval_features, eval_y, k: int) -> torch.Tensor:
    r"""Exact Shapley values of training samples for a K-nearest-neighbour classifier.

    Jia et al., "Efficient task-specific data valuation for nearest neighbor
    algorithms", VLDB 2019, Theorem 1, as used by ASER (Shim et al., AAAI 2021). For
    an evaluation sample ``(x_e, y_e)``, sort the ``N`` training samples by squared
    Euclidean distance to ``x_e`` (ascending, ties by index), ``alpha_1..alpha_N``:

    .. math::

        s(\alpha_N) = \frac{1[y_{\alpha_N} = y_e]}{N}, \qquad
        s(\alpha_i) = s(\alpha_{i+1}) + \frac{1[y_{\alpha_i} = y_e]
                      - 1[y_{\alpha_{i+1}} = y_e]}{K} \frac{\min(K, i)}{i}

    the Shapley value for the utility ``U(S) = (1/K) * #{same-label samples among
    the min(K, |S|) nearest in S}``.

    Parameters
    ----------
    train_features : Tensor of shape (N, D)
    train_y : Tensor of shape (N,)
    eval_features : Tensor of shape (E, D)
    eval_y : Tensor of shape (E,)
    k : int

    Returns
    -------
    Tensor of shape (E, N): value of training sample ``j`` for evaluation sample ``e``.
    """
    n = len(train_y)
    dist = torch.cdist(eval_features.double(), train_features.double()) ** 2
    order = torch.argsort(dist, dim=1, stable=True)
    match = (train_y[order] == eval_y[:, None]).double()
    i = torch.arange(1, n + 1, dtype=torch.float64)
    step = torch.empty_like(match)
    step[:, :-1] = (match[:, :-1] - match[:, 1:]) / k * torch.clamp(i[:-1], max=k) / i[:-1]
    step[:, -1] = match[:, -1] / n
    sorted_values = step.flip(1).cumsum(1).flip(1)
    return torch.empty_like(sorted_values).scatter_(1, order, sorted_values)


class ASERRetrieval:
    r"""Adversarial Shapley value retrieval (ASER, Shim et al., AAAI 2021).

    Candidates ``C`` are ``n_smp_per_class`` random memory samples of every class
    in memory; a cooperative set ``S`` is another class-balanced draw of the
    remaining memory, and the adversarial set is the incoming batch ``B``. With
    :func:`knn_shapley` values ``s_j(i)`` on embeddings, the retrieved samples are
    the ``n`` candidates of highest

    .. math:: ASV(i) = \frac{1}{|S|}\sum_{j\in S} s_j(i) - \frac{1}{|B|}\sum_{k\in B} s_k(i)

    (the mean variant, TSCIL Eq. 14). Until the buffer has been offered more
    samples than it holds, or without an incoming batch, retrieval is random. At
    most ``n_smp_per_class * n_classes`` samples are returned.

    Parameters
    ----------
    embed : callable
        Maps inputs to embeddings (the current network's features in eval mode).
    k : int, default=3
    n_smp_per_class : int, default=2
        TSCIL's grid: 2 or 4.
    """

    def __init__(self, embed, k: int = 3, n_smp_per_class: int = 2):
        self.embed = embed
        self.k = k
        self.n_smp_per_class = n_smp_per_class

    def retrieve(self, buffer, n, generator=None, X=None, y=None, **context):
        if X is None or buffer.n_seen <= buffer.capacity:
            return RandomRetrieval().retrieve(buffer, n, generator)
        labels = buffer["y"].cpu()
        candidates = _class_balanced_draw(labels, self.n_smp_per_class, generator)
        rest = torch.ones(len(labels), dtype=torch.bool)
        rest[candidates] = False
        rest = torch.nonzero(rest).flatten()
        coop = rest[_class_balanced_draw(labels[rest], self.n_smp_per_class, generator)]
        features = self.embed(torch.cat([buffer.take(candidates)["X"], buffer.take(coop)["X"], X]))
        features = features.cpu()
        f_cand, f_coop, f_new = features.split([len(candidates), len(coop), len(X)])
        y_cand = labels[candidates]
        score = -knn_shapley(f_cand, y_cand, f_new, y.cpu(), self.k).mean(0)
        if len(coop):
            score += knn_shapley(f_cand, y_cand, f_coop, labels[coop], self.k).mean(0)
        return candidates[torch.argsort(score, descending=True, stable=True)[:n]]


class ASERUpdate:
    r"""ASER's memory update (Shim et al., AAAI 2021; TSCIL's ``ASER_update``).

    While the buffer has room, offered samples are appended. Afterwards, for each
    chunk of ``batch_size`` offered samples:

    1. the evaluation set is a class-balanced draw of ``n_smp_per_class`` memory
       samples per class, plus the offered samples of *minority* classes, those
       whose share of the memory is below ``U(0, 1 / n_classes)`` (so a class absent
       from memory always gets evaluation samples and can enter);
    2. the candidates are ``n_smp_per_class * n_classes`` other random memory
       samples and the offered chunk;
    3. each candidate's value is its KNN-Shapley value (:func:`knn_shapley`,
       embeddings of the current network) summed over the evaluation set; the
       offered samples that rank among the top ``n_cand`` (the number of memory
       candidates) replace the memory candidates that fall out of it.

    Parameters
    ----------
    embed : callable
    k : int, default=3
    n_smp_per_class : int, default=2
    batch_size : int, default=32
    """

    def __init__(self, embed, k: int = 3, n_smp_per_class: int = 2, batch_size: int = 32):
        self.embed = embed
        self.k = k
        self.n_smp_per_class = n_smp_per_class
        self.batch_size = batch_size

    def update(self, buffer: MemoryBuffer, fields, generator=None) -> None:
        n = len(fields["y"])
        room = min(max(buffer.capacity - len(buffer), 0), n)
        if room:
            buffer.append(_fields_at(fields, torch.arange(room)))
            buffer.n_seen += room
        for start in range(room, n, self.batch_size):
            chunk = _fields_at(fields, torch.arange(start, min(start + self.batch_size, n)))
            self._replace(buffer, chunk, generator)
            buffer.n_seen += len(chunk["y"])

    def _replace(self, buffer: MemoryBuffer, new: dict, generator) -> None:
        labels, new_y = buffer["y"].cpu(), new["y"].cpu()
        classes = torch.unique(torch.cat([labels, new_y]))
        evaluation = _class_balanced_draw(labels, self.n_smp_per_class, generator)
        rest = torch.ones(len(labels), dtype=torch.bool)
        rest[evaluation] = False
        rest = torch.nonzero(rest).flatten()
        n_cand = min(len(rest), self.n_smp_per_class * len(classes))
        cand = rest[torch.randperm(len(rest), generator=generator)[:n_cand]]
        share = torch.stack([(labels == c).float().mean() for c in new_y])
        threshold = torch.rand(1, generator=generator) / len(classes)
        minority = torch.nonzero(share < threshold).flatten()
        features = self.embed(torch.cat([buffer.take(evaluation)["X"], buffer.take(cand)["X"],
                                         new["X"]])).cpu()
        f_eval, f_cand, f_new = features.split([len(evaluation), len(cand), len(new_y)])
        f_eval = torch.cat([f_eval, f_new[minority]])
        y_eval = torch.cat([labels[evaluation], new_y[minority]])
        value = knn_shapley(torch.cat([f_cand, f_new]), torch.cat([labels[cand], new_y]),
                            f_eval, y_eval, self.k).sum(0)
        top = torch.argsort(value, descending=True, stable=True)[:n_cand]
        entering = top[top >= n_cand] - n_cand
        in_top = torch.zeros(len(value), dtype=torch.bool)
        in_top[top] = True
        leaving = torch.nonzero(~in_top[:n_cand]).flatten()
        if len(entering):
            buffer.replace(cand[leaving], _fields_at(new, entering))


def bald(probs: torch.Tensor) -> torch.Tensor:
    r"""BALD mutual information of ``R`` stochastic predictions per sample.

    .. math:: H\Big(\frac{1}{R}\sum_r p_r\Big) - \frac{1}{R}\sum_r H(p_r)

    the generalised Jensen-Shannon divergence of the ``R`` distributions with equal
    weights (CLOPS's uncertainty score).

    Parameters
    ----------
    probs : Tensor of shape (R, n_samples, n_classes)
    """

    def entropy(p):
        return -(p * torch.log(p.clamp_min(1e-12))).sum(-1)

    return entropy(probs.mean(0)) - entropy(probs).mean(0)


class UncertaintyRetrieval:
    """Monte-Carlo-dropout uncertainty retrieval (CLOPS, Kiyasseh et al. 2021).

    Every ``refresh_every`` epochs the memory is scored with :func:`bald` on
    ``mc_probs(X)`` (``R`` dropout passes), and the ``ceil(n / n_classes)`` most
    uncertain samples of each class form the replay set, returned unchanged until
    the next refresh (TSCIL: every 3 epochs, 10 passes). TSCIL's benchmark turns
    this off in favour of random retrieval.

    Parameters
    ----------
    mc_probs : callable
        Maps inputs to probabilities of shape ``(R, N, n_classes)``.
    refresh_every : int, default=3
    """

    def __init__(self, mc_probs, refresh_every: int = 3):
        self.mc_probs = mc_probs
        self.refresh_every = refresh_every
        self.selection_ = None
        self._epoch = None

    def retrieve(self, buffer, n, generator=None, epoch=0, **context):
        refresh = epoch % self.refresh_every == 0 and epoch != self._epoch
        if self.selection_ is None or refresh:
            self._epoch = epoch
            score = bald(self.mc_probs(buffer["X"])).cpu()
            labels = buffer["y"].cpu()
            classes = torch.unique(labels)
            per_class = math.ceil(n / len(classes))
            picks = []
            for c in classes.tolist():
                slots = torch.nonzero(labels == c).flatten()
                best = torch.argsort(score[slots], descending=True, stable=True)[:per_class]
                picks.append(slots[best])
            self.selection_ = torch.cat(picks)
        return self.selection_[self.selection_ < len(buffer)]
