"""The float64 2^z of the C kernels has two implementations
(templates/kt_exp.h): with AVX-512, a table of 2^(j/2) and a degree-9
polynomial on |r| <= 1/4; elsewhere the degree-11 polynomial on |r| <= 1/2.
The other test modules run the one this machine's compiler picks; here the
kernels are also built with -mno-avx512f, so that both run on an AVX-512
machine (the default flags' path is tested by
tests/test_cpu_backend.py::test_generated_exps_are_accurate_over_their_range
and the reductions' tests)."""

import pytest

from kerneltools.backend._compiler import find_compiler

from _helpers import run_without_avx512

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)

#: Runs in the child: exp(-g x^2) as the kernel's 2^(x^2 k), element by
#: element, against the longdouble 2^ of the argument it computes (within
#: 1.25 eps, as tests/test_cpu_backend.py asks of either path), and a
#: Gaussian K @ b and a log-sum-exp against dense NumPy / SciPy.
_CODE = """
    import numpy as np, kerneltools as kt
    from scipy.special import logsumexp
    a = np.concatenate([np.linspace(-707.0, 0.0, 20001), np.linspace(-1, 0, 4001)])
    x = np.sqrt(-a)[:, None]
    g = np.array([0.7])
    one = kt.Vj(np.ones((1, 1)))
    F = (-((kt.Vi(x) * one) ** 2) * kt.Pm(g)).exp()
    k = -1.4426950408889634074 * g[0]
    ref = np.exp2(((x * x) * k).astype(np.longdouble))
    got = F.sum(axis=1, backend="cpu").astype(np.longdouble)
    keep = ref > np.finfo(float).tiny * 4
    rel = float((np.abs(got[keep] - ref[keep]) / ref[keep]).max())
    assert rel <= 1.25 * np.finfo(float).eps, rel
    rng = np.random.default_rng(0)
    x, y, b = rng.random((40, 3)), rng.random((700, 3)), rng.standard_normal((700, 1))
    d2 = ((x[:, None] - y[None]) ** 2).sum(-1)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * 8.0).exp()
    np.testing.assert_allclose(K @ b, np.exp(-8.0 * d2) @ b, rtol=1e-12, atol=1e-13)
    h = 0.1 * rng.standard_normal((700, 1))
    L = (-kt.Vi(x).sqdist(kt.Vj(y)) * 400.0 + kt.Vj(h)).logsumexp(axis=1, backend="cpu")
    np.testing.assert_allclose(L[:, 0], logsumexp(-400.0 * d2 + h.T, axis=1), rtol=1e-13)
    print("ok")
    """


def test_float64_exp2_without_avx512(tmp_path):
    """The portable float64 2^z (-mno-avx512f): accurate over the range of
    normal results, and the Gaussian sum and log-sum-exp that use it equal
    dense NumPy / SciPy."""
    assert run_without_avx512(_CODE, tmp_path).strip() == "ok"

