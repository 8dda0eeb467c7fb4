"""kerneltools.keops: pykeops' Genred, KernelSolve and generic_* against NumPy.

Every reduction of ``Genred`` against a dense NumPy reference on every
backend and dtype; batch axes, block-sparsity ranges, ``out=``, float64
accumulation; ``KernelSolve`` against ``numpy.linalg.solve``; the torch
module's gradients against torch autograd of the dense computation; the
names pykeops' modules export.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kerneltools import ranges as kr
from kerneltools.keops import numpy as kn

from _helpers import assert_close

try:  # the torch module is an optional extra
    import torch

    from kerneltools.keops import torch as ktk
except ImportError:
    torch = ktk = None

needs_torch = pytest.mark.skipif(
    torch is None, reason="kerneltools.keops.torch needs PyTorch (optional extra 'torch')")

ALIASES = ["x = Vi(3)", "y = Vj(3)", "b = Vj(2)", "g = Pm(1)"]
FORMULA = "Exp(-g * SqDist(x, y)) * b"


def _data(dtype, n=7, m=5, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 3)).astype(dtype), rng.random((m, 3)).astype(dtype),
            rng.random((m, 2)).astype(dtype), np.array([0.8], dtype=dtype))


def _dense(x, y, g):
    """(N, M) exp(-g |x_i - y_j|^2) and (N, M) squared distances, float64."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    D = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return np.exp(-float(g[0]) * D), D


@pytest.mark.parametrize("axis", [0, 1])
def test_sum_against_numpy(backend, dtype, rtol, axis):
    x, y, b, g = _data(dtype)
    if axis == 0:  # reduce over i: y and the weights b ride with i, x with j
        # (the formula with i and j exchanged: axis=1's kernel, through axis=0)
        aliases = ["x = Vj(3)", "y = Vi(3)", "b = Vi(2)", "g = Pm(1)"]
    else:
        aliases = ALIASES
    K, _ = _dense(x, y, g)
    out = kn.Genred(FORMULA, aliases, axis=axis)(x, y, b, g, backend=backend)
    ref = K @ b
    assert out.dtype == dtype and out.shape == ref.shape
    assert_close(out, ref, rtol, scale=np.abs(ref) + 1e-3)


def test_reduction_spelled_in_the_formula():
    x, y, b, g = _data(np.float64)
    K, _ = _dense(x, y, g)
    # keopscore's tag 0: the output is indexed by i (a reduction over j)
    out = kn.Genred(f"Sum_Reduction({FORMULA}, 0)", ALIASES)(x, y, b, g, backend="numpy")
    assert_close(out, K @ b, 1e-12)
    out = kn.Genred(FORMULA, ALIASES, reduction_op="Sum_Reduction", axis=1)(
        x, y, b, g, backend="numpy")
    assert_close(out, K @ b, 1e-12)


def test_min_max_arg_reductions(backend, dtype):
    x, y, _, g = _data(dtype, n=9, m=11)
    _, D = _dense(x, y, g)
    aliases = ["x = Vi(3)", "y = Vj(3)"]
    run = lambda red, **kw: kn.Genred("SqDist(x, y)", aliases, reduction_op=red, axis=1,
                                      **kw)(x, y, backend=backend)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert_close(run("Min"), D.min(1, keepdims=True), rtol)
    assert_close(run("Max"), D.max(1, keepdims=True), rtol)
    np.testing.assert_array_equal(run("ArgMin"), D.argmin(1)[:, None])
    np.testing.assert_array_equal(run("ArgMax"), D.argmax(1)[:, None])
    v, i = run("Min_ArgMin")
    assert_close(v, D.min(1, keepdims=True), rtol)
    np.testing.assert_array_equal(i, D.argmin(1)[:, None])
    order = np.argsort(D, axis=1)[:, :3]
    np.testing.assert_array_equal(run("ArgKMin", opt_arg=3), order)
    assert_close(run("KMin", opt_arg=3), np.take_along_axis(D, order, 1), rtol)
    v, i = run("KMin_ArgKMin", opt_arg=3)
    assert v.shape == i.shape == (9, 3, 1)  # pykeops keeps the feature axis here
    np.testing.assert_array_equal(i[..., 0], order)


def test_logsumexp_and_softmax(backend, dtype, rtol):
    x, y, b, g = _data(dtype)
    _, D = _dense(x, y, g)
    aliases = ["x = Vi(3)", "y = Vj(3)", "b = Vj(2)", "g = Pm(1)"]
    F = -float(g[0]) * D
    lse = kn.Genred("-g * SqDist(x, y)", aliases, reduction_op="LogSumExp", axis=1)
    ref = np.log(np.exp(F).sum(1, keepdims=True))
    assert_close(lse(x, y, b, g, backend=backend), ref, 10 * rtol, scale=np.abs(ref) + 1)
    w = np.exp(F) / np.exp(F).sum(1, keepdims=True)
    soft = kn.Genred("-g * SqDist(x, y)", aliases, reduction_op="SumSoftMaxWeight", axis=1,
                     formula2="b")
    assert_close(soft(x, y, b, g, backend=backend), w @ b.astype(np.float64), 10 * rtol,
                 scale=1)
    wlse = kn.Genred("-g * SqDist(x, y)", aliases, reduction_op="LogSumExp", axis=1,
                     formula2="Elem(b, 0)")
    ref = np.log(np.exp(F) @ b[:, :1].astype(np.float64))
    assert_close(wlse(x, y, b, g, backend=backend), ref, 10 * rtol, scale=np.abs(ref) + 1)


def test_max_sum_shift_exp(backend, dtype, rtol):
    """pykeops' raw LogSumExp: one array [m_i, sum_j exp(F_ij - m_i) (G_ij)]."""
    x, y, b, g = _data(dtype)
    _, D = _dense(x, y, g)
    F = -float(g[0]) * D
    m = F.max(1, keepdims=True)
    out = kn.Genred("-g * SqDist(x, y)", ALIASES, reduction_op="Max_SumShiftExp", axis=1)(
        x, y, b, g, backend=backend)
    ref = np.concatenate([m, np.exp(F - m).sum(1, keepdims=True)], 1)
    assert out.shape == (7, 2)
    assert_close(out, ref, 10 * rtol, scale=np.abs(ref) + 1)
    out = kn.Genred("-g * SqDist(x, y)", ALIASES, reduction_op="Max_SumShiftExpWeight",
                    axis=1, formula2="b")(x, y, b, g, backend=backend)
    ref = np.concatenate([m, np.exp(F - m) @ b.astype(np.float64)], 1)
    assert out.shape == (7, 3)
    assert_close(out, ref, 10 * rtol, scale=np.abs(ref) + 1)


def test_unused_arguments_still_count_their_points():
    """pykeops sums N equal terms when the formula has no j-variable (the
    number of j-points is the arguments'); once this gave 1 term."""
    x, y, _, _ = _data(np.float64)
    out = kn.Genred("x * 2", ["x = Vi(3)", "y = Vj(3)"], axis=1)(x, y, backend="numpy")
    assert_close(out, 2 * x * len(y), 1e-12)
    out = kn.Genred("y", ["x = Vi(3)", "y = Vj(3)"], axis=1)(x, y, backend="numpy")
    assert_close(out, np.broadcast_to(y.sum(0), x.shape), 1e-12)


def test_repeated_calls_rebind_the_same_formula(backend, dtype, rtol):
    """A Genred builds its formula once per batch layout; later calls bind
    their arrays to it (no parsing, no planning of a new formula): new values
    and new sizes must still give their own results."""
    f = kn.Genred(FORMULA, ALIASES, axis=1)
    unused = kn.Genred("x * 2", ["x = Vi(3)", "y = Vj(3)"], axis=1)
    for n, m, seed in ((7, 5, 0), (9, 4, 1), (7, 5, 2)):
        x, y, b, g = _data(dtype, n, m, seed)
        K, _ = _dense(x, y, g)
        ref = K @ b.astype(np.float64)
        assert_close(f(x, y, b, g, backend=backend), ref, rtol, scale=np.abs(ref))
        assert_close(unused(x, y, backend="numpy"), 2 * x * m, rtol)
    assert len(f._templates) == 1 and len(unused._templates) == 1
    xb, yb = np.stack([x, x[::-1]]), np.stack([y, y])  # a batch: its own formula
    out = f(xb, yb, b, g, backend="numpy")
    assert_close(out[1], _dense(x[::-1], y, g)[0] @ b.astype(np.float64), rtol)
    assert len(f._templates) == 2


def test_batch_axes(dtype, rtol):
    rng = np.random.default_rng(3)
    x, y = rng.random((2, 6, 3)).astype(dtype), rng.random((2, 4, 3)).astype(dtype)
    b, g = rng.random((1, 4, 2)).astype(dtype), np.array([0.5], dtype=dtype)
    out = kn.Genred(FORMULA, ALIASES, axis=1)(x, y, b, g, backend="numpy")
    x64, y64, b64 = (a.astype(np.float64) for a in (x, y, b))
    K = np.exp(-0.5 * ((x64[:, :, None] - y64[:, None]) ** 2).sum(-1))
    assert out.shape == (2, 6, 2)
    assert_close(out, K @ b64, rtol, scale=np.abs(K @ b64) + 1e-3)


def test_ranges_are_honoured(backend):
    x, y, b, g = _data(np.float64, n=8, m=6)
    lab_x, lab_y = np.repeat([0, 1], [3, 5]), np.repeat([0, 1], [4, 2])
    keep = np.array([[True, False], [True, True]])
    r = kr.from_sorted(kr.cluster_ranges(lab_x), kr.cluster_ranges(lab_y), keep)
    K, _ = _dense(x, y, g)
    mask = keep[lab_x][:, lab_y]
    out = kn.Genred(FORMULA, ALIASES, axis=1)(x, y, b, g, backend=backend, ranges=r)
    assert not np.allclose(out, K @ b)  # the mask drops real terms
    assert_close(out, (K * mask) @ b, 1e-12)


def test_out_and_double_accumulation():
    x, y, b, g = _data(np.float32, n=50, m=40)
    K, _ = _dense(x, y, g)
    ref = K @ b.astype(np.float64)
    out = np.empty((50, 2), np.float32)
    res = kn.Genred(FORMULA, ALIASES, axis=1, use_double_acc=True)(
        x, y, b, g, backend="numpy", out=out)
    assert res is out and out.dtype == np.float32
    # computed in float64, rounded once: within one float32 rounding of the truth
    assert_close(out, ref, 2 ** -23)
    res = kn.Genred(FORMULA, ALIASES, axis=1, dtype_acc="float64", sum_scheme="kahan_scheme",
                    enable_chunks=False)(x, y, b, g, backend="numpy")
    assert res.dtype == np.float32
    assert_close(res, ref, 2 ** -23)


@pytest.mark.parametrize("name, ours", [("auto", None), ("CPU", "cpu"), ("GPU_1D", "cuda")])
def test_backend_names_are_mapped(name, ours):
    from kerneltools.keops._genred import BACKENDS

    assert BACKENDS[name] == ours


def test_bad_calls_name_the_argument():
    x, y, b, g = _data(np.float64)
    f = kn.Genred(FORMULA, ALIASES, axis=1)
    with pytest.raises(TypeError, match="takes 4 arrays"):
        f(x, y, b)
    with pytest.raises(ValueError, match=r"argument 0 \(x = Vi\(3\)\) must have 3 column"):
        f(x[:, :2], y, b, g)
    with pytest.raises(ValueError, match=r"argument 2 \(b = Vj\(2\)\) has 4 rows but "
                                         r"argument 1 has 5"):
        f(x, y, b[:4], g)
    with pytest.raises(ValueError, match=r"argument 1 \(y = Vj\(3\)\) must be \(N, D\)"):
        f(x, y[:, 0], b, g)
    with pytest.raises(ValueError, match="unknown 'backend' 'GPU_3D'"):
        f(x, y, b, g, backend="GPU_3D")
    with pytest.raises(ValueError, match="unknown 'reduction_op' 'Mean'"):
        kn.Genred(FORMULA, ALIASES, reduction_op="Mean")
    with pytest.raises(ValueError, match="'axis' must be 0"):
        kn.Genred(FORMULA, ALIASES, axis=2)
    with pytest.raises(ValueError, match="needs 'opt_arg'"):
        kn.Genred("SqDist(x, y)", ALIASES, reduction_op="ArgKMin")
    with pytest.raises(ValueError, match="needs the weight formula"):
        kn.Genred("SqDist(x, y)", ALIASES, reduction_op="SumSoftMaxWeight")
    with pytest.raises(ValueError, match="'sum_scheme' must be one of"):
        kn.Genred(FORMULA, ALIASES, sum_scheme="fast")
    with pytest.raises(ValueError, match=r"argument\(s\) \[1\]"):
        kn.Genred("x + Var(2, 3, 1)", ["x = Vi(0, 3)"])
    with pytest.raises(ValueError, match="declared twice"):
        kn.Genred("x", ["x = Vi(3)", "x = Vj(3)"])


def test_generic_helpers():
    x, y, b, g = _data(np.float64)
    K, D = _dense(x, y, g)
    s = kn.generic_sum(FORMULA, "a = Vi(2)", *ALIASES)(x, y, b, g, backend="numpy")
    assert_close(s, K @ b, 1e-12)
    s = kn.generic_sum("Exp(-g * SqDist(x, y))", "a = Vj(1)", *ALIASES[:2], "g = Pm(1)")(
        x, y, g, backend="numpy")
    assert_close(s, K.sum(0)[:, None], 1e-12)
    lse = kn.generic_logsumexp("-SqDist(x, y)", "a = Vi(1)", *ALIASES[:2])(x, y)
    assert_close(lse, np.log(np.exp(-D).sum(1, keepdims=True)), 1e-12)
    np.testing.assert_array_equal(
        kn.generic_argmin("SqDist(x, y)", "a = Vi(1)", *ALIASES[:2])(x, y),
        D.argmin(1)[:, None])
    np.testing.assert_array_equal(
        kn.generic_argkmin("SqDist(x, y)", "a = Vi(2)", *ALIASES[:2])(x, y),
        np.argsort(D, 1)[:, :2])


@pytest.mark.parametrize("axis", [0, 1])
def test_kernel_solve_against_numpy_linalg(backend, dtype, axis):
    rng = np.random.default_rng(4)
    x = rng.random((30, 2)).astype(dtype)
    rhs = rng.random((30, 3)).astype(dtype)
    cats = ("Vj", "Vi") if axis == 0 else ("Vi", "Vj")
    aliases = [f"x = {cats[0]}(2)", f"y = {cats[1]}(2)", f"b = {cats[1]}(3)", "g = Pm(1)"]
    solve = kn.KernelSolve("Exp(-g * SqDist(x, y)) * b", aliases, "b", axis=axis)
    g = np.array([4.0], dtype)
    u = solve(x, x, rhs, g, alpha=0.5, eps=1e-10 if dtype == np.float64 else 1e-6,
              backend=backend)
    K, _ = _dense(x, x, g)
    ref = np.linalg.solve(K + 0.5 * np.eye(30), rhs.astype(np.float64))
    assert u.dtype == dtype and u.shape == rhs.shape
    assert_close(u, ref, 1e-8 if dtype == np.float64 else 1e-4, scale=np.abs(ref).max())


def _mixing_solve(module):
    """A KernelSolve whose operator mixes the unknown's components:
    ``A(u)_i = sum_j K_ij M u_j``, M SPD 2 x 2 (one system of 2 N unknowns)."""
    return module.KernelSolve("Exp(-SqDist(x, y)) * MatVecMult(m, u)",
                              ["x = Vi(3)", "y = Vj(3)", "u = Vj(2)", "m = Pm(4)"], "u",
                              axis=1)


def test_kernel_solve_operator_that_mixes_components(backend, dtype):
    """Once each column of u ran its own CG recurrence, as if the operator
    acted column by column: with M's coupling 0.2 the answer was 4% off,
    without a warning (0.5: NotPositiveDefiniteError). Batch axes too."""
    rng = np.random.default_rng(11)
    x, b = rng.random((2, 8, 3)).astype(dtype), rng.random((2, 8, 2)).astype(dtype)
    M = np.array([[2.0, 0.5], [0.5, 1.0]], dtype)
    eps, rtol = (1e-12, 1e-9) if dtype == np.float64 else (1e-6, 1e-4)
    u = _mixing_solve(kn)(x[0], x[0], b[0], M.ravel(), alpha=0.5, eps=eps,
                          backend=backend)
    ub = _mixing_solve(kn)(x, x, b, M.ravel(), alpha=0.5, eps=eps, backend=backend)
    for k, got in ((0, u), (0, ub[0]), (1, ub[1])):
        K = np.exp(-((x[k][:, None] - x[k][None]) ** 2).sum(-1).astype(np.float64))
        ref = np.linalg.solve(np.kron(K, M) + 0.5 * np.eye(16),
                              b[k].astype(np.float64).ravel()).reshape(8, 2)
        assert got.dtype == dtype
        assert_close(got, ref, rtol, scale=np.abs(ref).max())


def test_kernel_solve_bad_input():
    with pytest.raises(ValueError, match="'varinvalias' 'c' is not one of the aliases"):
        kn.KernelSolve(FORMULA, ALIASES, "c", axis=1)
    with pytest.raises(ValueError, match="the unknown 'x' is Vi; with axis=1 it must be Vj"):
        kn.KernelSolve(FORMULA, ALIASES, "x", axis=1)


def test_exports_mirror_pykeops():
    """The names of pykeops 2.3's numpy and torch modules (their __all__, and
    ComplexLazyTensor) are importable from ours."""
    names = ["Genred", "KernelSolve", "LazyTensor", "ComplexLazyTensor", "Vi", "Vj", "Pm",
             "generic_sum", "generic_logsumexp", "generic_argmin", "generic_argkmin"]
    mods = [kn] + ([ktk] if ktk is not None else [])
    for mod in mods:
        for name in names:
            assert hasattr(mod, name), (mod.__name__, name)
    from kerneltools.keops.numpy.cluster import from_matrix, grid_cluster  # noqa: F401
    from kerneltools.keops.numpy.operations import KernelSolve  # noqa: F401
    z = kn.ComplexLazyTensor(np.ones((3, 1, 2)) * 1j)  # complex numbers: issue 21
    assert z.is_complex and z.shape == (3, 1, 2)


def test_dask_arrays_stay_lazy():
    da = pytest.importorskip("dask.array", reason="Dask is an optional extra")
    x, y, b, g = _data(np.float64, n=12, m=5)
    K, _ = _dense(x, y, g)
    out = kn.Genred(FORMULA, ALIASES, axis=1)(da.from_array(x, chunks=4), y, b, g,
                                                backend="numpy")
    assert isinstance(out, da.Array)
    assert_close(out.compute(), K @ b, 1e-12)


@pytest.mark.skipif(importlib.util.find_spec("pykeops") is None,
                    reason="the conformance run reads pykeops' installed test files")
def test_conformance_plugin_maps_pykeops_names_to_ours():
    """tests/conformance/pykeops_plugin.py (in a subprocess: it fills sys.modules;
    NumPy's module only, torch's takes seconds to import)."""
    code = (
        "import pykeops_plugin; pykeops_plugin.install(bindings=('numpy',))\n"
        "import pykeops.numpy, pykeops.config\n"
        "from pykeops.numpy.utils import squared_distances\n"
        "from pykeops.numpy.cluster import from_matrix\n"
        "import kerneltools.keops.numpy as ours\n"
        "assert pykeops.numpy is ours and pykeops.numpy.Genred is ours.Genred\n"
        "assert isinstance(pykeops.config.gpu_available, bool)\n"
        "print('ok')\n")
    conformance = Path(__file__).resolve().parents[1] / "conformance"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(conformance), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_cluster_helpers():
    from kerneltools.keops.numpy import cluster as kc

    x = np.array([[0.0], [0.5], [1.0], [2.0], [3.0]])
    lab = np.array([0, 0, 1, 1, 1])
    r, c, w = kc.cluster_ranges_centroids(x, lab)
    np.testing.assert_array_equal(r, [[0, 2], [2, 5]])
    assert_close(c, [[0.25], [2.0]], 1e-15)
    assert_close(w, [2.0, 3.0], 1e-15)
    (xs,), ls = kc.sort_clusters((x[::-1],), lab[::-1])
    np.testing.assert_array_equal(ls, np.sort(lab))
    assert_close(xs[:, 0], x[::-1][np.argsort(lab[::-1], kind="stable"), 0], 0)
    ranges = kc.from_matrix(r, r, np.array([[True, False], [False, True]]))
    assert len(ranges) == 6
    assert [a.tolist() for a in kc.swap_axes(ranges)] == [a.tolist() for a in
                                                          ranges[3:] + ranges[:3]]


# -- torch -------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("axis", [0, 1])
def test_torch_genred_gradients_against_dense_autograd(axis):
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.random((6, 3)), requires_grad=True)
    y = torch.tensor(rng.random((5, 3)), requires_grad=True)
    w = torch.tensor(rng.random((6 if axis == 0 else 5, 2)), requires_grad=True)
    g = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    cat = "Vi" if axis == 0 else "Vj"
    f = ktk.Genred(FORMULA, ["x = Vi(3)", "y = Vj(3)", f"b = {cat}(2)", "g = Pm(1)"],
                   axis=axis)
    out = f(x, y, w, g, backend="numpy")
    K = torch.exp(-g * ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))
    ref = K.T @ w if axis == 0 else K @ w
    assert isinstance(out, torch.Tensor) and out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    e = torch.tensor(rng.random(ref.shape))
    grads = torch.autograd.grad((out * e).sum(), (x, y, w, g))
    refs = torch.autograd.grad((ref * e).sum(), (x, y, w, g))
    for a, r in zip(grads, refs):
        torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)


@needs_torch
def test_torch_genred_repeated_calls_differentiate_the_new_tensors():
    rng = np.random.default_rng(6)
    f = ktk.Genred(FORMULA, ALIASES, axis=1)
    for n in (6, 4):  # the second call rebinds the first call's formula
        x = torch.tensor(rng.random((n, 3)), requires_grad=True)
        y, b = torch.tensor(rng.random((5, 3))), torch.tensor(rng.random((5, 2)))
        g = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
        out = f(x, y, b, g, backend="numpy")
        ref = torch.exp(-g * ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)) @ b
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        grads = torch.autograd.grad(out.sum(), (x, g))
        for a, r in zip(grads, torch.autograd.grad(ref.sum(), (x, g))):
            torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-12)
    assert len(f._templates) == 1


@needs_torch
def test_torch_genred_gradcheck_logsumexp():
    rng = np.random.default_rng(6)
    x = torch.tensor(rng.random((4, 2)), requires_grad=True)
    y = torch.tensor(rng.random((3, 2)), requires_grad=True)
    f = ktk.Genred("-SqDist(x, y)", ["x = Vi(2)", "y = Vj(2)"], reduction_op="LogSumExp",
                   axis=1)
    assert torch.autograd.gradcheck(lambda a, b: f(a, b, backend="numpy"), (x, y))


@needs_torch
def test_torch_kernel_solve_and_its_gradient():
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.random((20, 2)), requires_grad=True)
    b = torch.tensor(rng.random((20, 2)), requires_grad=True)
    g = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    solve = ktk.KernelSolve("Exp(-g * SqDist(x, y)) * b",
                            ["x = Vi(2)", "y = Vj(2)", "b = Vj(2)", "g = Pm(1)"], "b", axis=1)
    u = solve(x, x, b, g, alpha=alpha, eps=1e-12, backend="numpy")
    K = torch.exp(-g * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    ref = torch.linalg.solve(K + alpha * torch.eye(20, dtype=torch.float64), b)
    torch.testing.assert_close(u, ref, rtol=1e-8, atol=1e-9)
    e = torch.tensor(rng.random((20, 2)))
    grads = torch.autograd.grad((u * e).sum(), (x, b, g, alpha))
    refs = torch.autograd.grad((ref * e).sum(), (x, b, g, alpha))
    for a, r in zip(grads, refs):
        torch.testing.assert_close(a, r.reshape(a.shape), rtol=1e-6, atol=1e-8)


@needs_torch
def test_torch_kernel_solve_operator_that_mixes_components():
    rng = np.random.default_rng(12)
    x = torch.tensor(rng.random((2, 8, 3)), requires_grad=True)
    b = torch.tensor(rng.random((2, 8, 2)), requires_grad=True)
    m = torch.tensor([2.0, 0.5, 0.5, 1.0], dtype=torch.float64, requires_grad=True)
    u = _mixing_solve(ktk)(x, x, b, m, alpha=0.5, eps=1e-12, backend="numpy")
    K = torch.exp(-((x[:, :, None] - x[:, None]) ** 2).sum(-1))
    big = torch.stack([torch.kron(K[k], m.reshape(2, 2)) for k in range(2)])
    ref = torch.linalg.solve(big + 0.5 * torch.eye(16, dtype=torch.float64),
                             b.reshape(2, 16)).reshape(2, 8, 2)
    torch.testing.assert_close(u, ref, rtol=1e-9, atol=1e-10)
    e = torch.tensor(rng.random((2, 8, 2)))
    for a, r in zip(torch.autograd.grad((u * e).sum(), (x, b, m)),
                    torch.autograd.grad((ref * e).sum(), (x, b, m))):
        torch.testing.assert_close(a, r, rtol=1e-7, atol=1e-9)


@needs_torch
def test_torch_genred_float32_on_every_backend(backend):
    rng = np.random.default_rng(8)
    x, y = torch.tensor(rng.random((6, 3)), dtype=torch.float32), \
        torch.tensor(rng.random((5, 3)), dtype=torch.float32)
    b, g = torch.tensor(rng.random((5, 2)), dtype=torch.float32), torch.tensor([0.5])
    if backend == "cuda":
        x, y, b, g = (t.cuda() for t in (x, y, b, g))
    out = ktk.Genred(FORMULA, ALIASES, axis=1)(x, y, b, g, backend=backend)
    K, _ = _dense(x.cpu().numpy(), y.cpu().numpy(), g.cpu().numpy())
    assert out.dtype == torch.float32 and out.device == x.device
    assert_close(out.cpu().numpy(), K @ b.cpu().numpy().astype(np.float64), 1e-5)


@needs_torch
@pytest.mark.parametrize("cost, dense", [
    ("(SqDist(X,Y) / IntCst(2))", lambda x, y: ((x[:, None] - y[None]) ** 2).sum(-1) / 2),
    ("Norm2(X-Y)", lambda x, y: ((x[:, None] - y[None]) ** 2).sum(-1).sqrt()),
])
def test_geomloss_softmin_formula(cost, dense):
    """GeomLoss' legacy "online" softmin, written for pykeops.torch, unchanged:
    -eps log sum_j exp(h_j - C(x_i, y_j) / eps), and its gradient."""
    rng = np.random.default_rng(9)
    x = torch.tensor(rng.random((8, 3)), requires_grad=True)
    y = torch.tensor(rng.random((6, 3)) + 0.1, requires_grad=True)
    h = torch.tensor(rng.random((6, 1)), requires_grad=True)
    eps = 0.1
    log_conv = ktk.generic_logsumexp("( B - (P * " + cost + " ) )", "A = Vi(1)", "X = Vi(3)",
                                     "Y = Vj(3)", "B = Vj(1)", "P = Pm(1)")
    out = -eps * log_conv(x, y, h, torch.Tensor([1 / eps]).type_as(x)).view(-1)
    ref = -eps * torch.logsumexp(h.view(1, -1) - dense(x, y) / eps, dim=1)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    grads = torch.autograd.grad(out.sum(), (x, y, h))
    refs = torch.autograd.grad(ref.sum(), (x, y, h))
    for a, r in zip(grads, refs):
        torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-11)
