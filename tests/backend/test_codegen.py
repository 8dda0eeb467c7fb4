"""The code generation both targets share (``backend/_codegen.py``): a
formula that renders to more scalar temporaries than the C backend's limit is
declined with the reason, and ``backend="auto"`` falls back with a warning
saying it, then computes the right result.
"""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.exceptions import BackendFallbackWarning, BackendUnavailableError

RNG = np.random.default_rng(19)


def _cpu_available():
    from kerneltools.backend._dispatch import BACKENDS

    return BACKENDS["cpu"].available()[0]


@pytest.mark.skipif(not _cpu_available(), reason="needs the C backend")
def test_a_formula_too_wide_for_the_c_backend_says_why():
    d = 12_000  # Var i, Var j, Mul: 36,000 scalar temporaries, then SumFeat
    x, y = RNG.normal(size=(3, d)), RNG.normal(size=(2, d))
    F = (kt.Vi(x) * kt.Vj(y)).sum(-1)
    with pytest.raises(BackendUnavailableError,
                       match=r"too wide for the cpu backend: 36001 scalar temporaries "
                             r"> limit 20000"):
        F.sum(axis=1, backend="cpu")
    from kerneltools.backend._dispatch import BACKENDS

    if BACKENDS["cuda"].available()[0]:
        pytest.skip("auto picks CUDA here, which has its own limit")
    with pytest.warns(BackendFallbackWarning,
                      match=r"too wide for the cpu backend: 36001 scalar temporaries "
                            r"> limit 20000"):
        out = F.sum(axis=1, backend="auto")
    np.testing.assert_allclose(out[:, 0], (x @ y.T).sum(1), rtol=1e-10)
