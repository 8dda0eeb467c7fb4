"""K-min of a squared distance in the dense C kernel: the expanded-distance prefilter.

``Kmin``, ``argKmin`` and ``Kmin_argKmin`` of ``F = |x_i - y_j|^2`` keep the
direct form of F (their outputs depend on the exact order of nearby
distances), D subtractions and D products per pair. After a row block's
first tile, almost every pair fails the test against the row's K-th kept
value; the prefilter makes that test cheaper: with the points moved by a
centre ``c`` and scaled by a power of two ``sigma`` (y' of unit size), in
float whatever the data's type (x' = fl((x - c) sigma), likewise y'; 16
lanes a vector), ``|y'_j|^2`` computed once per call and ``-2 x'_i`` once
per row,

    e_ij = |y'_j|^2 + sum_c (-2 x'_ic) y'_jc        (D FMAs per pair)

ranks like ``sigma^2 |x_i - y_j|^2 - |x'_i|^2``. A lane is flagged when e_ij
is not above the row's bound ``T_i`` (below), and only the vectors of lanes
with a flagged lane get their exact values, computed by the same generated
statements as the tile loop (so bit-identical) and folded (the lanes that
are not flagged cannot enter): values and indices are those of the buffered
kernel. Without AVX-512 the kernel is the buffered one. Below D = 32, a
call runs it only where a sampled estimate says that the bound will prune
(:func:`prunes`; y nearly equidistant from x: the buffered kernel).

The order: the kernel takes y in the seed order below (cells in Morton
order: tiles of nearby points) and the rows of x likewise (a block's rows
near each other; the caller permutes x and puts the outputs back). Each
tile has the box of its y' (``kbox``); a tile whose box is farther from
every row of a row group than their bounds allow is skipped whole
(``kt_kpf_near``: most tiles, at D <= 3). The fold is the block-sparse
kernel's (``ranges_tile``): it ranks by (value, caller's index) through
``jmap``, so that the order in which the values come does not matter: the
K smallest (value, index) pairs, NaN last, are the buffered kernel's
output, which takes them in index order with ties kept in that order.

The seed: the bound starts from ``U_i`` rather than from the first tile's
K-th value (with which most vectors of a block's first tile, and some 40 more
per row at K = 10, M = 3e4, reach the fold): the rows of y sorted by grid
cell in Morton order (:func:`_seed_order`, NumPy's radix sort of 16-bit
keys), the ``2K + 16`` of them around x_i's cell give, in double, the K-th
smallest squared distance among them, raised past both roundings
(``kt_kpf_seed``): every one of those K points has a kernel value strictly
below ``U_i``, so the row's final K-th value is, and a value at or above
``U_i`` is never in the output (it ranks after K smaller ones, whatever its
index). So the bound uses ``lim = min(thr, U_i)`` (``U_i`` alone while the
list is not full, or while its K-th value is NaN) and the fold, which keeps
the K smallest (value, index) pairs of what it is given, ends with the same
list. Any choice of the K points is correct; near ones make the bound tight
(at K = 10, M = 3e4, D = 3, in index order: about 18 vectors per row
reached the fold).

The bound (u: the data's unit roundoff, 2^-24 or 2^-53; u_p = 2^-24, the
prefilter's; X = |x'_i|^2, Y >= max_j |y'_j|^2 over the finite rows of y';
s = |x_i - y_j|^2 exactly; d the kernel's direct-form value; thr the row's
K-th kept value, a d, >= 0; lim = min(thr, U_i) as above; abs = 2 (sigma^2
(D + 2) eta_d + (D + 4) eta_p) + 2^-120, eta the smallest subnormals of the
data's type and of float: the underflows)::

    T_i = sigma^2 lim (1 + (2D + 8) u) - X + 2 (6D + 20) u_p (X + 2Y) + abs

(below, in units scaled by sigma^2, which is exact: a power of two)

Claim: e_ij > T_i implies d >= lim, so a lane that is not flagged cannot
enter (it would need d < thr; thr only decreases as the tile is folded) and
is not in the output (d >= U_i).

1. Direct form: the differences are rounded once, squared (rounded or fused)
   and D non-negative terms summed in some order (FMA contraction included):
   d = sum_c (x_c - y_c)^2 prod (1 + eps_k), at most D + 2 factors per term,
   so d >= (1 - a) s - (D + 2) eta with a = gamma_{D+2} <= (D + 3) u
   (eta: underflow in the products).
2. Centring: x' = (x - c) sigma + dx, |dx| <= 1.01 u_p |x'| (x - c rounded
   in the data's type, then to float), likewise y'. With r = |x' - y'|,
   | r - sqrt(s) | <= rho = 1.01 u (|x'| + |y'|), so
   | r^2 - s | <= rho (2 r + rho) <= 4.1 u_p (X + |y'|^2).
3. Prefilter: e is |y'|^2 (rounded: u_p |y'|^2) plus D float products
   accumulated by FMAs from it: | e - (r^2 - X) | <= gamma_D (|y'|^2 + 2 |x'|
   |y'|) + u_p |y'|^2 + D eta_p <= (2D + 2) u_p (X + 2Y) + D eta_p
   (2ab <= a^2 + b^2).
4. So e > T gives s >= r^2 - 4.1 u_p (X + Y) > T + X - ((2D + 2) u_p + 4.1
   u_p) (X + 2Y) - D eta_p, and with T as above (X computed in double from
   floats: exact but for 2^-53; T computed in double and rounded up to float;
   its rounding, 3 2^-53 of its terms, covered by the factor 2):
   s >= lim (1 + (2D + 8) u) + (D + 2) eta_d + ..., hence (1 - a) s - (D + 2)
   eta_d >= lim, and d >= lim (an overflow of d only makes it larger).
5. Seed: the kernel's d <= s (1 + (D + 3) u) + (D + 2) eta, and the double
   sum d' >= s (1 - (D + 3) 2^-53) - (underflow), so d < d' (1 + (2D + 10) u)
   + 2 eta (eta = 2^-120 or 2^-1000, above 8 (D + 4) eta_d): U_i, the
   K-th smallest d' so raised, is strictly above those K kernel values
   when it is below half the type's largest value (no difference, square
   or partial sum of such a value overflows); else U_i = +inf.

Non-finite values keep the kernel's semantics: a NaN e (an inf or NaN
feature, inf - inf) flags its lane; a row whose lim is +inf (no seed and a
list not full, or an inf K-th value), or whose X (or Y) is not below the
float's largest value / 16 (NaN and inf included) gets a NaN bound, every
lane flagged (float's largest value / 16: x far from y's cloud); the seed
leaves NaN distances out (+inf with fewer than K others); a centre that
would make a finite feature overflow is not used (c = 0). Y covers every
row of y' with finite features.
"""

from __future__ import annotations

import warnings
from string import Template

import numpy as np

from .._codegen import TEMPLATES, WIDE_MIN_DIM, indent
from .._plan import Plan

__all__ = ["prefilter_arrays", "prefilter_block", "prefilter_helper", "prefilter_pointers",
           "prefilter_tile", "prefilter_vars", "prunes", "seed_width", "worth"]

_HELPER = Template((TEMPLATES / "kmin_prefilter.h").read_text().rstrip("\n"))
_KMIN = ("KMin", "ArgKMin", "KMin_ArgKMin")
#: Whether the dense kernel uses the prefilter (the tests compare with and
#: without it; the kernel without it is the buffered one).
ENABLED = True
#: The tests' switch: the prefilter wherever it applies, paying or not.
FORCE = False
#: Pairs below which a call runs the buffered kernel (a second library,
#: compiled when first needed): the preparation (NumPy, ~3 ms at 3e4 points)
#: and the per-row seed do not pay. A/B, 1 thread, D = 3, K = 10, float32:
#: 2000^2 pairs 0.63x, 1e4^2 1.14x, 3e4^2 1.41x.
MIN_PAIRS = 1 << 26
#: Reduced rows below which likewise (a few tiles: the seed hardly helps).
MIN_NY = 2048


def worth(plan: Plan) -> bool:
    """Whether a call of ``plan`` (prefilter_vars not None) is large enough."""
    return plan.nx * plan.ny >= MIN_PAIRS and plan.ny >= MIN_NY


#: The per-call guard (:func:`prunes`; False: the prefilter wherever
#: :func:`worth`), its sample (rows of x, of y) and its last decision
#: ``[ratio, chosen]`` (the tests' introspection hook).
GUARD = True
_GUARD_ROWS = 32
_GUARD_COLS = 2048
last_guard = [None, None]


def prune_ratio(plan: Plan, args) -> float:
    """How far apart, in y's own size, a row's K nearest points of y and its
    typical ones are: with ``m`` rows of y (evenly spaced; 2048, 1024 from
    WIDE_MIN_DIM), ``k = K m / M`` (at least 1), ``c`` and ``s`` the sample's
    mean and RMS distance to it, the median over 32 rows of x (evenly
    spaced) of ``(sqrt(|x_i - c|^2 + s^2) - r_k(x_i)) / s``, r_k the k-th
    smallest distance to the sample (the first term: the root mean square
    of the distances), in double. Near 0 where every y is nearly
    equidistant from each x (y on a sphere around x's cluster: neither
    tiles nor lanes are pruned), about 1 or more on a uniform cube, clusters,
    or queries far from y's cloud (whose tiles' boxes are pruned although
    the distances are all similar). Sampled rows with a NaN or inf feature
    are left out; NaN (no finite row sampled, or an overflow): the buffered
    kernel. 0.4 ms at load 4 on two cores (the guard does not run from
    WIDE_MIN_DIM)."""
    xk, yk, d = prefilter_vars(plan)
    x, y = np.asarray(args[xk]), np.asarray(args[yk])
    nx, ny = len(x), len(y)
    if nx == 0 or ny == 0:
        return float("nan")
    cols = _GUARD_COLS if d < WIDE_MIN_DIM else _GUARD_COLS // 2
    xs = np.asarray(x[np.linspace(0, nx - 1, min(nx, _GUARD_ROWS)).astype(np.intp)],
                    dtype=np.float64)
    ys = np.asarray(y[np.linspace(0, ny - 1, min(ny, cols)).astype(np.intp)],
                    dtype=np.float64)
    with np.errstate(all="ignore"):
        # (rows with a NaN or inf feature left out: a few do not stop pruning)
        xs = xs[np.isfinite(xs).all(axis=1)]
        ys = ys[np.isfinite(ys).all(axis=1)]
        m = len(ys)
        if m == 0 or len(xs) == 0:
            return float("nan")
        k = max(1, min(m, round(plan.K * m / ny)))
        c = ys.mean(axis=0)
        ys = ys - c
        xs = xs - c
        yy = np.einsum("ij,ij->i", ys, ys)
        xx = np.einsum("ij,ij->i", xs, xs)
        s2 = float(yy.mean())
        # (BLAS where the product is small: 0.03 ms at D <= 5; at D = 32
        # a threaded BLAS on a loaded machine took 30 ms, einsum 0.7)
        d2 = xs @ ys.T if d <= 8 else np.einsum("id,jd->ij", xs, ys)
        d2 *= -2
        d2 += xx[:, None]
        d2 += yy[None, :]
        if not (np.isfinite(d2).all() and np.isfinite(s2)):
            return float("nan")
        if not s2 > 0:
            return 0.0  # one point repeated: nothing to prune
        near = d2.min(axis=1) if k == 1 else np.partition(d2, k - 1, axis=1)[:, k - 1]
        g = (np.sqrt(xx + s2) - np.sqrt(np.maximum(near, 0))) / np.sqrt(s2)
        return float(np.median(g))


def guard_ratio(d: int, dtype, pairs: float = 9e8) -> float | None:
    """The :func:`prune_ratio` below which the prefilter's kernel runs: where
    it measured as fast as the buffered kernel on y in a spherical shell of
    thickness t (from the sphere, t = 0, to the ball, t = 1) around x's
    small cluster, on a cube and Gaussian data (K = 10, two threads:
    asv_bench/RESULTS.md, "the K-min prefilter's guard"), at N = M = 1e4 and
    3e4, interpolated in log(pairs) between them (the prefilter's gain
    grows with the size: its preparation is per call). None from
    WIDE_MIN_DIM: the buffered kernel is 5-8x slower there, whatever the
    data."""
    if d >= WIDE_MIN_DIM:
        return None
    small, large = (_GUARD_F64 if dtype == np.float64 else _GUARD_F32).get(d, (0.0, 0.0))
    w = min(1.0, max(0.0, float(np.log(9e8 / max(pairs, 1.0)) / np.log(9.0))))
    return large + w * (small - large)


#: guard_ratio per D (float32, float64): (at 1e4^2 pairs and below, at
#: 3e4^2 and above), measured: see guard_ratio.
_GUARD_F32 = {2: (1.2, 0.2), 3: (1.25, 0.6), 4: (1.03, 1.03), 5: (1.1, 1.03)}
_GUARD_F64 = {2: (0.1, 0.03), 3: (1.1, 0.1), 4: (0.5, 0.0), 5: (0.5, 0.0), 6: (0.2, 0.0)}


def prunes(plan: Plan, args) -> bool:
    """Whether a call that passes :func:`worth` runs the prefilter's kernel:
    its bound must prune (:func:`prune_ratio` not below :func:`guard_ratio`);
    on data with nothing to prune (y nearly equidistant from x) the
    buffered kernel is faster (5.9x at D = 2, 1.6x at D = 3, float32, 3e4^2;
    at 1e4^2 also on a ball or Gaussian data at D = 3).
    Both kernels give the same outputs. Decided per call, in Python: one
    kernel each (a run-time switch inside one kernel cost 0.90x)."""
    d = prefilter_vars(plan)[2]
    need = guard_ratio(d, np.dtype(plan.dtype), float(plan.nx) * plan.ny)
    if FORCE or not GUARD or need is None or need <= 0:
        last_guard[:] = [None, True]
        return True
    r = prune_ratio(plan, args)
    last_guard[:] = [r, bool(r >= need)]
    return last_guard[1]


#: Rows of y whose mean is the centre.
_CENTRE_SAMPLE = 1024


def prefilter_vars(plan: Plan):
    """``(x position, y position, D)`` when ``plan`` is a K-min of
    ``|x_i - y_j|^2`` (either order, any D) of two variables, else None."""
    if not ENABLED or plan.reduction not in _KMIN or len(plan.formulas) != 1:
        return None
    f = plan.formulas[0]
    if f.op == "SumFeat":
        f = f.children[0]
    elif f.dim != 1:
        return None
    if f.op != "Square" or f.children[0].op != "Sub":
        return None
    a, b = f.children[0].children
    if a.op != "Var" or b.op != "Var" or a.dim != b.dim:
        return None
    if a.cat == "j":
        a, b = b, a
    if a.cat != "i" or b.cat != "j" or plan.formulas[0].dim != 1:
        return None
    if not (FORCE or _pays(a.dim, np.dtype(plan.dtype))):
        return None
    return a.attrs[1], b.attrs[1], a.dim


def _pays(d: int, dtype) -> bool:
    """Where the prefilter measured faster than the buffered kernel (A/B, one
    thread, N = M = 1e4, K = 10: see the commit log): float32 at D = 2..5
    (2.0x, 1.5x, 1.3x, 1.08x; 3e4^2: 2.4x at D = 3, 2.1x at D = 4), float64
    at D = 2..6 (2.0x at D = 3, 1.6x, 1.5x, 1.3x; 3e4^2 D = 3: 3.2x), and
    from WIDE_MIN_DIM (5x: the buffered kernel's feature loop): the seed
    order's cells cover (up to 5) coordinates, tiles are compact and most
    are skipped. Not at D = 1 (the direct form is one subtraction and one
    product), nor float32 at 6 <= D < 32 (0.90x at D = 6), nor float64 at
    7 <= D < 32 (1.05x at D = 8, 1.03x at D = 16): the cells of 5 of D
    coordinates leave loose boxes and seeds."""
    if d < 2:
        return False
    return d <= (6 if dtype == np.float64 else 5) or d >= WIDE_MIN_DIM


def seed_width(plan: Plan) -> int:
    """Points of y' near each x_i (in the seed order) whose distances give the
    seed bound U_i: 2K + 16, at most M."""
    return min(plan.ny, 2 * plan.K + 16)


def prefilter_helper(plan: Plan) -> str:
    """The seed, scan and bound functions (``templates/kmin_prefilter.h``)."""
    return _HELPER.substitute(D=prefilter_vars(plan)[2], K=plan.K, W=seed_width(plan))


def prefilter_pointers() -> list:
    """(C type, name) of the arrays that the run appends (prefilter_arrays)."""
    return [("const float", "kyp"), ("const float", "kyn"), ("const double", "kpar"),
            ("const int64_t", "kws"), ("const real_t", "kysp"), ("const int64_t", "kjmap"),
            ("const double", "kbox")]


def prefilter_block(plan: Plan) -> list:
    """Block setup lines: the block's rows moved by the centre, ``-2 x'``
    (``kxm``, exact), ``|x'|^2`` in double (``kxx``) and the seed bounds
    U_i (``kU``)."""
    xk, _, d = prefilter_vars(plan)
    return [
        "#if defined(__AVX512F__)",
        f"float kxm[IB * {d}];",
        "double kxx[IB], kU[IB];",
        "float kT[IB]; /* the rows' bounds, updated as their lists change */",
        "for (int r = 0; r < IB; r++) {",
        "  const int64_t ir = r < ni ? i0 + r : i0 + ni - 1;",
        "  double s = 0;",
        f"  for (int c = 0; c < {d}; c++) {{",
        f"    const float v = (float)((a{xk}[ir * {d} + c] - KT_KPF_C(c)) * KT_KPF_S);",
        f"    kxm[r * {d} + c] = -2 * v;",
        "    s += (double)v * v;",
        "  }",
        "  kxx[r] = s;",
        f"  kU[r] = kt_kpf_seed(a{xk} + ir * {d}, kysp, kws[ir]);",
        "  kT[r] = r < ni ? " + _bound(plan, "st[r]", "r") + " : -INFINITY;",
        "}",
        "#endif",
    ]


def _bound(plan: Plan, state: str, r: str) -> str:
    """Row r's bound T from its state ``state`` (an lvalue)."""
    K = plan.K
    return (f"kt_kpf_bound({state}.kv[0][{K} - 1], {state}.ki[0][{K} - 1] >= 0, "
            f"kU[{r}], kxx[{r}], kpar)")


def prefilter_tile(plan: Plan, rows, tile: str, fold: str) -> str:
    """The dense kernel's tile for ``len(rows)`` rows: the prefilter scan
    with AVX-512, else ``tile`` (the buffered loop and fold); ``fold``: the
    reduction's fold of ``buf0`` by (value, caller's index), ``jmap``."""
    yk = prefilter_vars(plan)[1]
    setup = ["real_t kcand[32];", "int64_t kqj[KT_KPF_Q];", "uint32_t kqm[KT_KPF_Q][RB];"]
    events = []
    j_code = rows[0].code("j", "  ")
    for r, row in enumerate(rows):
        code = "\n".join(x for x in (j_code, row.code("ij", "  ")) if x)
        exact = [
            "#pragma omp simd",
            "for (int64_t jj = jv; jj < jv + KT_KPF_VL; jj++) {",
            "  const int64_t j = kjmap[j0 + jj];",
            code,
            f"  kcand[jj - jv] = {row.outputs[0][0]};",
            "}",
            "{",
            f"  kt_state *S = &st[ii + {r}];",
            "  const int64_t kt_j0 = j0 + jv, kt_nj = nj - jv < KT_KPF_VL ? nj - jv : KT_KPF_VL;",
            "  {",
            "    const int64_t j0 = kt_j0, nj = kt_nj, njv = KT_KPF_VL;",
            "    const int64_t *restrict jmap = kjmap;",
            "    real_t *const buf0 = kcand;",
            indent(fold, 4),
            "  }",
            f"  kT[ii + {r}] = " + _bound(plan, "(*S)", f"ii + {r}") + ";",
            "}",
        ]
        guard = f"if (km[{r}] && ii + {r} < ni) {{" if r else "if (km[0]) {"
        events += [guard, indent("\n".join(exact), 2), "}"]
    scan = [
        "for (int64_t jn = 0; jn < nj;) {",
        "  const int nq = kt_kpf_scan(kyp + j0 * KPD, kyn + j0, &jn, nj, kxm + ii * KPD, kT + ii,",
        "                             kqj, kqm);",
        "  for (int q = 0; q < nq; q++) { /* the queued vectors, in order */",
        "    const int64_t jv = kqj[q];",
        "    const uint32_t *km = kqm[q];",
        indent("\n".join(events), 4),
        "  }",
        "}",
    ]
    return "\n".join([
        "#if defined(__AVX512F__) /* the expanded-distance prefilter (_cpu_kmin) */",
        "if (kt_kpf_near(kbox + j0 / TJ * 2 * KPD, kxm + ii * KPD, kxx + ii, kT + ii,",
        "                ni - ii < RB ? ni - ii : RB)) {",
        f"  const real_t *restrict y{yk} = kysp + j0 * KPD; /* the tile, in the seed order */",
        indent("\n".join(setup + scan), 2),
        "}",
        "#else",
        tile,
        "#endif",
    ])


def prefilter_arrays(plan: Plan, args, tj: int, pack_tiles) -> list:
    """(arrays, xorder): the arrays of :func:`prefilter_pointers`, y in the
    seed order (``jmap`` its indices): y' = (y - c) s packed by tiles
    (``pack_tiles``), |y'_j|^2 padded to whole tiles, ``[Y, s, abs, c_0,
    ..., c_{D-1}]`` in double, each x row's seed window start, y packed by
    tiles, jmap, and the tiles' boxes of y' (lo, hi); and the
    order of x's rows in which the kernel takes them (the caller permutes
    x and its outputs back; see the module docstring)."""
    xk, yk, d = prefilter_vars(plan)
    dtype = np.dtype(plan.dtype)
    x = np.asarray(args[xk], dtype=dtype)
    y = np.asarray(args[yk], dtype=dtype)
    order, start, xorder = _seed_order(x, y, seed_width(plan))
    y = np.take(y, order, axis=0)  # the seed order, in which the kernel scans
    every = bool(np.isfinite(y).all())
    rows = slice(None) if every else np.isfinite(y).all(axis=1)
    c = _centre(y, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        dev = np.subtract(y, c, dtype=np.float64)
        if not np.isfinite(dev if every else dev[rows]).all():
            c = np.zeros(d)  # a centre that makes a finite feature overflow: none
            dev = y.astype(np.float64)
        fin = dev if every else dev[rows]
        top = float(max(fin.max(), -fin.min())) if len(fin) else 0.0
        # a power of two (exact) that brings y' near unit size in float
        scale = 2.0 ** -np.frexp(top)[1] if 0 < top < np.inf else 1.0
        yc = (dev * scale).astype(np.float32)
        yc64 = yc.astype(np.float64)
        yn64 = np.einsum("ij,ij->i", yc64, yc64)
        big = float((yn64 if every else yn64[rows]).max()) if len(fin) else 0.0
    up = 2.0 ** -24
    yy = big * (1 + (d + 8) * up)  # >= every finite row's |y'|^2, rounded or not
    tiny = float(np.finfo(dtype).smallest_subnormal)
    # the direct form's underflow, scaled, and the float prefilter's
    absolute = 2 * (scale * scale * (d + 2) * tiny + (d + 4) * 2.0**-149) + 2.0**-120
    padded = -(-len(y) // tj) * tj
    yn = np.zeros(padded, dtype=np.float32)
    with np.errstate(over="ignore"):
        yn[:len(y)] = yn64.astype(np.float32)
    # each tile's box of y' (NaN where a row is NaN: that coordinate then
    # bounds nothing), the rows past ny repeating the last one
    ext = np.concatenate([yc64, np.repeat(yc64[-1:], padded - len(y), axis=0)])
    ext = ext.reshape(padded // tj, tj, d)
    with np.errstate(invalid="ignore"):
        box = np.stack([ext.min(axis=1), ext.max(axis=1)], axis=1)
    jmap = np.zeros(padded, dtype=np.int64)  # (whole tiles: the exact loop's lanes)
    jmap[:len(y)] = order
    arrays = [pack_tiles(yc, tj), yn, np.array([yy, scale, absolute, *c], dtype=np.float64),
              start[xorder], pack_tiles(y, tj), jmap, np.ascontiguousarray(box)]
    return arrays, xorder


#: Coordinates of the seed order (those of y's widest ranges).
_AXES = 5
#: Bits of the seed order's cells: 2^16 cells at most (NumPy's argsort of
#: 16-bit keys is a radix sort), per coordinate for 1 to 5 coordinates.
_CELL_BITS = {1: 16, 2: 8, 3: 5, 4: 4, 5: 3}
_SPREAD = {}


def _spread(k: int) -> np.ndarray:
    """The bits of 0 .. 2^b - 1 spread k apart (b = _CELL_BITS[k]): Morton order."""
    if k not in _SPREAD:
        v = np.arange(1 << _CELL_BITS[k])
        out = np.zeros_like(v)
        for b in range(_CELL_BITS[k]):
            out |= ((v >> b) & 1) << (k * b)
        _SPREAD[k] = out.astype(np.uint16)
    return _SPREAD[k]


def _seed_order(x, y, w: int):
    """(order, start, xorder): the rows of y sorted by grid cell in Morton
    order over (at most) the five coordinates of y's widest ranges, for each
    x_i the start of the ``w`` consecutive sorted rows around its cell (any
    choice is correct: it only makes the seed bound tighter), and x's rows
    sorted likewise."""
    finite = np.isfinite(y).all()
    with np.errstate(invalid="ignore", over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column
        # (column by column: NumPy's reductions over axis 0 of a narrow
        # C-ordered array are ~10x slower)
        lo, hi = (np.array([f(y[:, a]) for a in range(y.shape[1])])
                  for f in ((np.min, np.max) if finite else (np.nanmin, np.nanmax)))
        width = np.nan_to_num((hi - lo).astype(np.float64), nan=0.0, posinf=0.0)
    axes = np.argsort(-width, kind="stable")[:_AXES]
    k, bits = len(axes), _CELL_BITS[len(axes)]
    spread = _spread(k)

    def cells(p, finite):
        code = np.zeros(len(p), dtype=np.uint16)
        for q, a in enumerate(axes):
            if not width[a] > 0:
                continue
            with np.errstate(invalid="ignore", over="ignore"):
                t = np.subtract(p[:, a], lo[a], dtype=np.float64)
                t *= (1 << bits) / width[a]
                if not finite:
                    np.nan_to_num(t, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
            np.clip(t, 0, (1 << bits) - 1, out=t)
            code |= spread[t.astype(np.intp)] << np.uint16(q)
        return code

    cy = cells(y, finite)
    order = np.argsort(cy, kind="stable")
    first = np.concatenate([[0], np.cumsum(np.bincount(cy, minlength=1 << (k * bits)))])
    cx = cells(x, bool(np.isfinite(x).all()))
    mid = (first[cx] + first[cx.astype(np.int64) + 1]) // 2
    start = np.clip(mid - w // 2, 0, len(y) - w).astype(np.int64)
    return order, start, np.argsort(cx, kind="stable")


def _centre(y: np.ndarray, dtype) -> np.ndarray:
    """The mean of a sample of the finite rows of y, rounded to ``dtype``
    (then exact in it), in double; zeros where there is none."""
    sample = np.asarray(y[:: max(1, len(y) // _CENTRE_SAMPLE)], dtype=np.float64)
    sample = sample[np.isfinite(sample).all(axis=1)]
    if len(sample) == 0:
        return np.zeros(y.shape[1])
    with np.errstate(over="ignore"):
        c = sample.mean(axis=0).astype(dtype).astype(np.float64)
    return c if np.isfinite(c).all() else np.zeros(y.shape[1])
