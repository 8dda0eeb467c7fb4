"""Losses for torch, multiscale Sinkhorn and kernel two-sample tests (issue 27).

The problems, defined once (``losses_compare.py`` times the same ones side
by side with GeomLoss and a dense NumPy test):

- ``SamplesLoss`` forward + backward (a training step's loss), uniform
  clouds in the unit cube, the second shifted by 0.3 along the first axis,
  D = 3, float32: ``"sinkhorn"`` (blur 0.05, scaling 0.5) and ``"gaussian"``
  (blur 0.1).
- The Sinkhorn divergence at blur 0.05 (scaling 0.5), D = 3, float32, dense
  ("online") and multiscale.
- The MMD permutation test, 1,000 permutations (first parameter: 20).

The first value of each parameter is small: ``tests/test_asv_benchmarks.py``
runs every benchmark once with it.
"""

from __future__ import annotations

import numpy as np


def clouds(n, d=3, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((n, d)).astype(dtype)
    y[:, 0] += 0.3
    return x, y


def two_samples(n, d=79, seed=0):
    """Two Gaussian samples in D = 79 that differ by a small mean shift."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    Y = rng.standard_normal((n, d)).astype(np.float32)
    Y[:, 0] += 0.1
    return X, Y


def samples_loss_step(L, x, y):
    """One forward + backward of ``L(x, y)`` in x (a fresh leaf each time)."""
    import torch

    xs = torch.from_numpy(x).requires_grad_()
    value = L(xs, torch.from_numpy(y))
    value.backward()
    return float(value), xs.grad


def _torch_or_skip():
    try:
        import torch  # noqa: F401
    except ImportError:
        raise NotImplementedError("needs PyTorch") from None


class SamplesLossStep:
    """kerneltools.torch.SamplesLoss, forward + backward."""

    params = ([1000, 10_000], ["sinkhorn", "gaussian"])
    param_names = ["n", "loss"]
    timeout = 600

    def setup(self, n, loss):
        _torch_or_skip()
        from kerneltools.torch import SamplesLoss

        self.x, self.y = clouds(n)
        self.L = SamplesLoss(loss, blur=0.05 if loss == "sinkhorn" else 0.1)

    def time_forward_backward(self, n, loss):
        samples_loss_step(self.L, self.x, self.y)


class SinkhornMultiscale:
    """sinkhorn_divergence at blur 0.05, D = 3: dense against multiscale."""

    params = ([1000, 10_000], [False, True])
    param_names = ["n", "multiscale"]
    timeout = 600

    def setup(self, n, multiscale):
        self.x, self.y = clouds(n)

    def time_divergence(self, n, multiscale):
        from kerneltools.estimators.optimal_transport import sinkhorn_divergence

        sinkhorn_divergence(self.x, self.y, blur=0.05, multiscale=multiscale)


class MMDPermutationTest:
    """kerneltools.stats.mmd_test, 1,000 permutations, D = 79."""

    params = ([(200, 20), (2000, 1000)],)
    param_names = ["n, permutations"]
    timeout = 600

    def setup(self, case):
        self.X, self.Y = two_samples(case[0])

    def time_mmd_test(self, case):
        from kerneltools import stats

        stats.mmd_test(self.X, self.Y, n_permutations=case[1], random_state=0)
