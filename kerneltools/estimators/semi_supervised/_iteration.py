"""The label iteration shared by LabelSpreading and LabelPropagation (private).

:func:`iterate_labels` is scikit-learn's loop (``BaseLabelPropagation.fit``)
written against an injected graph product, so the graph may be a lazy
kernel (reductions) or a sparse matrix:

- spreading (Zhou et al., 2004): ``F <- alpha S F + (1 - alpha) Y``;
- propagation (Zhu and Ghahramani, 2002): ``F <- P F``, rows normalised to
  sum 1 (a zero row left as it is), labelled rows reset to their one-hot
  labels;

stopping before a step when ``sum |F - F_previous| < tol`` (the first test
against zeros), else after ``max_iter`` steps with scikit-learn's
ConvergenceWarning; rows of the result normalised to sum 1.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

__all__ = ["LabelIteration", "iterate_labels"]


class LabelIteration:
    """The outcome of :func:`iterate_labels`: ``distributions`` (n, c) and
    ``n_iter``."""

    def __init__(self, distributions, n_iter):
        self.distributions = distributions
        self.n_iter = n_iter


def iterate_labels(*, matmat, Y, unlabeled, variant, alpha, max_iter, tol,
                   verbose=0) -> LabelIteration:
    """Iterate the labels ``Y`` (n, c one-hot rows, zero rows where
    ``unlabeled``) with the graph product ``matmat`` until converged."""
    F = np.array(Y, dtype=np.float64)
    static = F.copy()
    if variant == "propagation":
        static[unlabeled] = 0
    else:
        static *= 1 - alpha
    previous = np.zeros_like(F)
    unlabeled = np.asarray(unlabeled)[:, None]
    for n_iter in range(max_iter):
        change = np.abs(F - previous).sum()
        if verbose:
            print(f"[label {variant}] iteration {n_iter}: change {change:.3e}",
                  file=sys.stderr, flush=True)
        if change < tol:
            break
        previous = F
        F = matmat(F)
        if variant == "propagation":
            F = F / _normalizer(F)
            F = np.where(unlabeled, F, static)
        else:
            F = alpha * F + static
    else:
        warnings.warn(f"max_iter={max_iter} was reached without convergence.",
                      category=ConvergenceWarning, stacklevel=3)
        n_iter += 1
    return LabelIteration(F / _normalizer(F), n_iter)


def _normalizer(F):
    """Row sums of ``F`` as a column, 1 where a row sums to 0."""
    total = F.sum(axis=1)[:, None]
    total[total == 0] = 1
    return total
