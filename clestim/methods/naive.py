"""Naive fine-tuning: the lower bound."""

from ..base import ContinualClassifier


class Naive(ContinualClassifier):
    """Fine-tuning: each task is learned with plain cross-entropy, nothing protects
    old classes. The lower bound of class-incremental learning (TSCIL, Qiao et al. 2024).

    Takes the parameters of :class:`~clestim.base.ContinualClassifier`.

    Examples
    --------
    >>> from clestim import Naive
    >>> est = Naive(max_epochs=5, random_state=0)  # doctest: +SKIP
    >>> est.partial_fit_task(X_task1, y_task1).partial_fit_task(X_task2, y_task2)  # doctest: +SKIP
    """
