"""Herding: experience replay with iCaRL's class-balanced exemplar selection."""

from ..memory import HerdingSelection
from .replay import ER


class Herding(ER):
    r"""Experience replay whose memory is chosen by herding (iCaRL, Rebuffi et al.,
    CVPR 2017), as benchmarked by TSCIL (Qiao et al. 2024, App. B.5).

    Training is :class:`ER`'s (``CE(new) + CE(memory)``, random retrieval). After each
    task every class gets an equal quota ``m = memory_size // n_classes_seen``; the
    exemplars of each new class are chosen greedily so that their mean embedding
    tracks the class mean:

    .. math:: p_k = \arg\min_x \Big\| \mu_c - \frac{1}{k}\Big[\phi(x)
              + \sum_{j<k}\phi(p_j)\Big]\Big\|, \quad k = 1..m

    with ``phi`` the L2-normalised embedding of the network just trained and
    ``mu_c`` the mean of ``phi`` over the class's training samples. Old classes keep
    their first ``m`` exemplars in selection order (the last ones are dropped).
    Works with any labels and uneven class sizes (a class smaller than ``m`` keeps
    all its samples). A ``ValueError`` is raised before training when the budget is
    smaller than the number of classes. See :class:`~clestim.memory.HerdingSelection`.

    Parameters
    ----------
    **params
        The parameters of :class:`ER` (``memory_size`` default 0.05; TSCIL's 5% of
        UCI-HAR's 3-task stream is ``memory_size=366``).

    Examples
    --------
    >>> from clestim import Herding
    >>> est = Herding(memory_size=366, random_state=0)  # doctest: +SKIP
    >>> est.fit(X, y)  # doctest: +SKIP
    """

    def _update_policy(self):
        return HerdingSelection(self._embed)
