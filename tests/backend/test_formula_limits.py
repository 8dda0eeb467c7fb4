"""Bounded work for any formula: limits, integer powers, deep formulas, digits.

A formula string, or a LazyTensor expression, must never make kerneltools
do work (Python loops, memory, generated code, recursion) out of proportion
to its own length: a variable index, a dimension, an exponent or a literal
beyond the documented limits of :mod:`kerneltools.backend._limits` is a
:class:`~kerneltools.exceptions.FormulaSyntaxError` at its position; an
integer power renders to code whose size does not depend on the exponent;
1,000-term sums and 300-deep nestings parse, differentiate, render and
compile, and agree with the NumPy reference. The checks that would exhaust
the machine on a regression run in a subprocess under a memory and time
limit.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cuda import _backend as _cuda_backend
from kerneltools.backend import _limits
from kerneltools.backend._dispatch import run_plan
from kerneltools.exceptions import FormulaSyntaxError
from kerneltools.keops.numpy import Genred

import _cuda_shim
from _helpers import assert_close

ALIASES = ["x = Vi(1)", "y = Vj(1)"]


def _limited(code: str, *, memory_mb: int = 3000, seconds: int = 60):
    """Run ``code`` in a fresh interpreter under an address-space limit and a
    CPU-time limit (a regression fails the test instead of the machine)."""
    prelude = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({memory_mb} << 20, {memory_mb} << 20))
        resource.setrlimit(resource.RLIMIT_CPU, ({seconds}, {seconds}))
    """)
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=4 * seconds)


def _syntax_error(fn, *args, **kwargs) -> FormulaSyntaxError:
    with pytest.raises(FormulaSyntaxError) as info:
        fn(*args, **kwargs)
    return info.value


# -- limits --------------------------------------------------------------------------
def test_huge_variable_index_is_a_syntax_error_without_a_huge_list():
    out = _limited("""
        from kerneltools.keops.numpy import Genred
        from kerneltools.exceptions import FormulaSyntaxError
        try:
            Genred("Var(99999999999,3,0)", [], axis=1)
        except FormulaSyntaxError as exc:
            print("pos", exc.pos)
            print(exc)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("pos 4"), out.stdout
    assert f"at most {_limits.MAX_ARGUMENTS - 1}" in out.stdout


@pytest.mark.parametrize("formula, aliases, pos, reason", [
    ("x + Var(1024, 1, 0)", ["x = Vi(1)"], 8, "index"),
    ("x", ["x = Vi(5000, 1)"], 7, "index"),
    ("x", ["x = Vi(99999999999999)"], 7, "dimension"),
    ("x + Var(1, 99999999999, 1)", ["x = Vi(1)"], 11, "dimension"),
    ("OneHot(x, 10000000000)", ["x = Vi(1)"], 10, "dimension"),
    ("SumT(x, 10000000000)", ["x = Vi(1)"], 8, "dimension"),
    ("ElemT(x, 10000000000, 0)", ["x = Vi(1)"], 9, "dimension"),
    ("ExtractT(x, 0, 10000000000)", ["x = Vi(1)"], 15, "dimension"),
    ("Elem(x, 10000000000)", ["x = Vi(1)"], 8, "index"),
    ("Pow(x, 1000000000)", ["x = Vi(1)"], 7, "exponent"),
    ("Pow(x, -1000000000)", ["x = Vi(1)"], 7, "exponent"),
    ("x ** 1180591620717411303424", ["x = Vi(1)"], 5, "exponent"),
    ("x ** -1180591620717411303424", ["x = Vi(1)"], 5, "exponent"),
    ("Round(x, 1000000)", ["x = Vi(1)"], 9, "decimals"),
])
def test_limits_are_syntax_errors_at_the_position(formula, aliases, pos, reason):
    err = _syntax_error(Genred, formula, aliases, axis=1)
    assert err.pos == pos, str(err)
    assert reason in err.reason, err.reason
    assert "at most" in err.reason or "at least" in err.reason, err.reason


def test_limits_themselves_are_accepted():
    n = _limits.MAX_EXPONENT
    Genred(f"Pow(x, {n}) + Pow(x, -{n}) + x ** {n}", ALIASES, axis=1)
    # the largest index passes the limit; the arguments before it must exist
    with pytest.raises(ValueError, match=r"argument\(s\) \[1, 2, .*, \.\.\.\] \(1022 in all\)"):
        Genred(f"x + Var({_limits.MAX_ARGUMENTS - 1}, 1, 0)", ["x = Vi(1)"], axis=1)


def test_long_literal_is_a_syntax_error_at_its_position():
    for literal in ("1" * 5000, "0." + "1" * 5000, "1" * 4000 + "e5"):
        err = _syntax_error(Genred, "x * " + literal, ALIASES, axis=1)
        assert err.pos == 4 and "literal" in err.reason, err.reason
        assert str(_limits.MAX_LITERAL_CHARS) in err.reason


def test_lazytensor_power_beyond_the_limit_names_the_exponent():
    x = kt.Vi(np.ones((3, 1)))
    with pytest.raises(ValueError, match="exponent"):
        x ** (2 ** 70)
    with pytest.raises(ValueError, match="exponent"):
        x ** -(10 ** 9)
    with pytest.raises(ValueError, match="'D'"):
        x.one_hot(10 ** 12)


def test_non_ascii_digits_are_not_numbers():
    for text, pos in (("x * \u0663", 4), ("x * 1\u0663", 5), ("x *\u00a03", 3),
                      ("Elem(x, \uff11)", 8)):
        err = _syntax_error(Genred, text, ALIASES, axis=1)
        assert err.pos == pos and "unexpected character" in err.reason, str(err)


def test_big_integer_literals_are_the_same_number_on_every_backend():
    """An integer beyond int64 was a C literal too large for its type: the C
    kernel used a truncated value (1e20 became 9.6e18)."""
    x, y = np.linspace(0.5, 1, 3)[:, None], np.ones((2, 1))
    g = Genred("x * 100000000000000000000 + x * " + "9" * 60, ALIASES, axis=1)
    ref = g(x, y, backend="numpy")
    assert_close(g(x, y, backend="cpu"), ref, 1e-15)
    assert_close(ref, 2 * (1e20 + 1e60) * x, 1e-15)


# -- integer powers ------------------------------------------------------------------
def _power_plan(n: int, dtype=np.float64):
    x, y = kt.Vi(np.ones((4, 1), dtype)), kt.Vj(np.ones((5, 1), dtype))
    return ((x ** n) * y)._plan("Sum", 1)[0]


def test_integer_power_code_grows_like_the_log_of_the_exponent():
    sizes = {n: len(_cpu_backend.generate_source(_power_plan(n), key="k"))
             for n in (5, 100, 10000, 100000, _limits.MAX_EXPONENT, -_limits.MAX_EXPONENT)}
    # one squaring per bit of n, in each of the kernel's few code variants
    # (an n-fold product was 10 characters per unit of n)
    for n, size in sizes.items():
        assert size - sizes[5] < 600 * abs(n).bit_length(), sizes
    cuda = {n: len(_cuda_backend.generate_cuda_source(_power_plan(n))[0])
            for n in (5, 10000, _limits.MAX_EXPONENT)}
    for n, size in cuda.items():
        assert size - cuda[5] < 600 * abs(n).bit_length(), cuda


def test_small_powers_stay_products():
    source = _cpu_backend.generate_source(_power_plan(3), key="k")
    assert "pow(" not in source and "kt_powi" not in source


EXPONENTS = [3, 4, 5, 7, 16, 17, 33, 100, 1001, 99999, -3, -5, -100, -1001,
             _limits.MAX_EXPONENT, -_limits.MAX_EXPONENT]


def _power_data(n: int, dtype):
    """x where x ** n is finite and not 0: |x| in [1 - 8/|n|, 1 + 8/|n|]
    (fewer than e^8 = 3000 fold), of both signs, and y."""
    rng = np.random.default_rng(abs(n))
    x = (1 + rng.uniform(-8, 8, (7, 1)) / abs(n)) * rng.choice([-1, 1], (7, 1))
    return x.astype(dtype), rng.uniform(0.5, 1, (6, 1)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_integer_powers_agree_across_backends(dtype):
    """Every exponent of EXPONENTS, each on variables of its own, against the
    exact sum: the powers are the columns of one formula (one compiled
    kernel per dtype instead of one per exponent: 30 C compiles fewer from
    an empty cache), each column checked on its own."""
    data = [_power_data(n, dtype) for n in EXPONENTS]
    aliases = [a for k in range(len(EXPONENTS)) for a in (f"x{k} = Vi(1)", f"y{k} = Vj(1)")]
    terms = [f"Pow(x{k}, {n}) * y{k}" for k, n in enumerate(EXPONENTS)]
    g = Genred(functools.reduce(lambda a, b: f"Concat({a}, {b})", terms), aliases, axis=1)
    # a product of up to 16 factors rounds up to 15 times, pow() about once
    rtol = (1e-5 if dtype == np.float32 else 1e-14)
    for backend in ("numpy", "cpu"):
        got = g(*[a for xy in data for a in xy], backend=backend)
        assert got.shape == (7, len(EXPONENTS))
        for k, (n, (x, y)) in enumerate(zip(EXPONENTS, data)):
            exact = np.array([float(math.fsum([(float(a) ** n) * float(b) for b in y[:, 0]]))
                              for a in x[:, 0]])[:, None]
            assert_close(got[:, k : k + 1], exact, rtol, err_msg=f"{backend}, n={n}")


@pytest.mark.skipif(not _cuda_shim.available()[0], reason=_cuda_shim.available()[1])
def test_integer_powers_cuda_kernel_runs_on_the_cpu_shim(tmp_path):
    """The CUDA rendering of powers (the generated source, compiled around the
    CPU shim of ``_cuda_shim``) against the NumPy reference."""
    for n in (3, 17, 1001, -_limits.MAX_EXPONENT):
        x, y = _power_data(n, np.float32)
        F = kt.Vi(x) ** n * kt.Vj(y)
        plan, args = F._plan("Sum", 1)
        tuning = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
                  "by_reduction": {"Sum": {4: (8, 4)}}}
        (got,) = _cuda_shim.run(plan, args, tuning, tmp_path)
        (ref,) = run_plan(plan, args, "numpy")
        assert_close(got, ref, 1e-5, err_msg=str(n))


@pytest.mark.skipif(not _cuda_shim.nvrtc_status()[0],
                    reason=f"NVRTC: {_cuda_shim.nvrtc_status()[1]}")
def test_large_power_compiles_with_nvrtc():
    for dtype in (np.float32, np.float64):
        source, _ = _cuda_backend.generate_cuda_source(_power_plan(100000, dtype))
        res = _cuda_backend.nvrtc_compile(source, "sm_90")
        assert res.ok, res.log


@pytest.mark.parametrize("n", [17, 1001, -100])
def test_power_gradient_stays_exact(n):
    """d/dx x^n = n x^(n-1): one Pow node of exponent n - 1, whatever n."""
    x, y = _power_data(n, np.float64)
    xi = kt.Vi(x)
    F = xi ** n * kt.Vj(y)
    G = F.grad(xi, kt.Vi(np.ones_like(x)))
    pows = [node.attrs[0] for node in _nodes(G.formula) if node.op == "Pow"]
    assert pows == [n - 1], pows
    exact = n * x ** (n - 1) * y.sum()
    for backend in ("numpy", "cpu"):
        assert_close(G.sum(axis=1, backend=backend), exact, 1e-13, err_msg=backend)


def _nodes(formula):
    from kerneltools.backend._ir import topo_order
    return topo_order([formula])


# -- deep formulas -------------------------------------------------------------------
def _long_sum_formula(n: int = 1000) -> str:
    return "(" + " + ".join(f"Sin(x * {k})" for k in range(1, n + 1)) + ") * y"


def _deep_formula(depth: int = 300) -> str:
    return "Exp(-" * depth + "x" + ")" * depth + " * y"


def _omega(x, depth: int = 300):
    v = x
    for _ in range(depth):
        v = np.exp(-v)
    return v


def _points():
    return np.linspace(-1, 1, 9)[:, None], np.linspace(0.5, 1, 7)[:, None]


@pytest.mark.parametrize("make, reference", [
    (_long_sum_formula, lambda x: sum(np.sin(k * x) for k in range(1, 1001))),
    (_deep_formula, _omega),
], ids=["1000-term sum", "300-deep Exp"])
def test_long_and_deep_formula_strings(make, reference):
    x, y = _points()
    g = Genred(make(), ALIASES, axis=1)
    exact = reference(x) * y.sum()
    for backend in ("numpy", "cpu"):
        assert_close(g(x, y, backend=backend), exact, 1e-12, scale=np.abs(exact) + 1000,
                     err_msg=backend)


def test_deep_syntax_parses_without_recursion():
    """Nestings far beyond Python's recursion limit, in every form the grammar
    nests: parentheses, calls, unary signs, right-associative powers, lists."""
    from kerneltools.keops import parse_formula
    depth = 5 * sys.getrecursionlimit()
    for text in ("(" * depth + "x" + ")" * depth, "Exp(" * depth + "x" + ")" * depth,
                 "-" * depth + "x", "+-" * depth + "x", "x ** " * depth + "2",
                 "Sum(" * depth + "[1, 2]" + ")" * depth):
        parse_formula(text)


def test_long_sum_with_exp_renders_without_recursion():
    """The sign analysis of exp's argument walks a 1000-term sum."""
    terms = " + ".join(f"SqDist(x, y) / {k}" for k in range(1, 1001))
    x, y = _points()
    g = Genred(f"Exp(-({terms}))", ALIASES, axis=1)
    h = sum(1 / k for k in range(1, 1001))
    exact = np.exp(-h * (x - y.T) ** 2).sum(1, keepdims=True)
    for backend in ("numpy", "cpu"):
        assert_close(g(x, y, backend=backend), exact, 1e-12, err_msg=backend)


def _product_formulas():
    """A 1,000-factor product, and a 1,000-deep chain of constant factors and
    divisors inside an exp (the renderers take both apart, CPU and CUDA)."""
    product = " * ".join(f"Cos(x * y / {k})" for k in range(1, 1001))
    scaled = "SqDist(x, y)" + " * 3 / 3" * 500
    return {"product": (product, lambda x, y: np.prod([np.cos(x * y.T / k)
                                                       for k in range(1, 1001)], 0)),
            "scaled": (f"Exp(-{scaled}) * y", lambda x, y: np.exp(-(x - y.T) ** 2) * y.T)}


@pytest.mark.parametrize("name", ["product", "scaled"])
def test_long_products_render_without_recursion(name, tmp_path):
    text, reference = _product_formulas()[name]
    x, y = _points()
    g = Genred(text, ALIASES, axis=1)
    exact = reference(x, y).sum(1, keepdims=True)
    for backend in ("numpy", "cpu"):
        assert_close(g(x, y, backend=backend), exact, 1e-12, err_msg=backend)
    if _cuda_shim.available()[0]:
        x32, y32 = x.astype(np.float32), y.astype(np.float32)
        plan, args = Genred(text, ALIASES, axis=1)._lazy((x32, y32))[0]._plan("Sum", 1)
        tuning = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
                  "by_reduction": {"Sum": {4: (8, 4)}}}
        (got,) = _cuda_shim.run(plan, args, tuning, tmp_path)
        assert_close(got, exact, 1e-4, scale=np.abs(exact) + 1)


def test_long_and_deep_lazytensors_and_their_gradients():
    x, y = _points()
    xi, yj = kt.Vi(x), kt.Vj(y)
    s = xi * 0
    for k in range(1, 1001):
        s = s + (xi * k).sin()
    d = xi
    for _ in range(300):
        d = (-d).exp()
    for F, ref in ((s * yj, sum(np.sin(k * x) for k in range(1, 1001))),
                   (d * yj, _omega(x))):
        exact = ref * y.sum()
        gx = F.grad(xi, kt.Vi(np.ones_like(x)))
        for backend in ("numpy", "cpu"):
            assert_close(F.sum(axis=1, backend=backend), exact, 1e-12,
                         scale=np.abs(exact) + 1000, err_msg=backend)
        assert_close(gx.sum(axis=1, backend="cpu"), gx.sum(axis=1, backend="numpy"),
                     1e-10, scale=np.abs(gx.sum(axis=1, backend="numpy")) + 1000)


@pytest.mark.skipif(not _cuda_shim.available()[0], reason=_cuda_shim.available()[1])
def test_long_and_deep_formulas_cuda_kernel_runs_on_the_cpu_shim(tmp_path):
    x, y = (a.astype(np.float32) for a in _points())
    tuning = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
              "by_reduction": {"Sum": {4: (8, 4)}}}
    for text in (_long_sum_formula(), _deep_formula()):
        F = Genred(text, ALIASES, axis=1)._lazy((x, y))[0]
        plan, args = F._plan("Sum", 1)
        (got,) = _cuda_shim.run(plan, args, tuning, tmp_path)
        (ref,) = run_plan(plan, args, "numpy")
        assert_close(got, ref, 1e-4, scale=np.abs(ref) + 100)
