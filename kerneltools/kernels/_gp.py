"""scikit-learn Gaussian-process kernel objects, translated into formulas.

Each supported class of ``sklearn.gaussian_process.kernels`` becomes a builder
of its formula ``k(x_i, y_j)`` in which every hyperparameter is a run-time
parameter, named as scikit-learn names it (``k1__k2__length_scale``). The
derivatives with respect to ``theta`` then come from the symbolic gradient
rules (see :meth:`kerneltools.kernels.Kernel.__call__`), never from finite
differences. ``WhiteKernel`` is not a formula: it adds a diagonal to
``k(X, X)`` only, so it is carried apart as a sum of monomials of
hyperparameters (``white``).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from ._kernel import Kernel, _SourceDense
from ..lazy import LazyTensor

SUPPORTED = ("RBF", "Matern (nu = 0.5, 1.5, 2.5, inf)", "RationalQuadratic",
             "ExpSineSquared", "DotProduct", "ConstantKernel", "WhiteKernel",
             "Sum", "Product", "Exponentiation")


def _is_sklearn_kernel(obj) -> bool:
    return any(c.__module__.startswith("sklearn.gaussian_process")
               for c in type(obj).__mro__[:-1])


def from_sklearn(kernel, *, lazy: bool = False):
    """A :class:`~kerneltools.kernels.Kernel` computing the same values as the
    ``sklearn.gaussian_process.kernels`` object ``kernel``, with the same
    ``theta`` (log of the free hyperparameters, in scikit-learn's order).

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel object; its own evaluation is the dense one.
    lazy : bool, default=False
        Translate into a formula at the first use of the formula (``build``,
        ``params``, ``lazy()``, ...), not now: the dense evaluation needs none,
        and the translation costs about 0.1 ms, a sixth of a whole fit on 30
        points. For callers that already know the kernel translates; with
        False, an untranslatable kernel raises here (TypeError or ValueError,
        naming it).

    Returns
    -------
    Kernel
        The kernel, with scikit-learn's hyperparameters and ``theta``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> from kerneltools.kernels import from_sklearn
    >>> k = from_sklearn(2.0 * RBF(1.0))
    >>> np.round(np.exp(k.theta), 3)
    array([2., 1.])
    >>> np.round(k(np.array([[0.0], [1.0]]), np.array([[0.0]])), 3)
    array([[2.   ],
           [1.213]])
    """
    out = _Translated(kernel)
    if not lazy:
        out._parts()
    return out


class _Translated(Kernel):
    """A scikit-learn GP kernel object as a :class:`Kernel`, translated at the
    first use of its formula (see :func:`from_sklearn`). ``white=False``: the
    kernel without its white noise (:meth:`Kernel.without_white`)."""

    def __init__(self, kernel, white: bool = True):  # noqa: D107 - no super(): lazy
        self._kernel, self._white = kernel, white
        self._translation = self._free = None
        self.source = kernel if white else None  # its dense k(X) has the noise
        self.dense = _SourceDense(kernel, white=white)
        self.prepare = None

    def _parts(self):
        """(build, params, white): the translation (~15 us; a refusal checks it)."""
        if self._translation is None:
            params: dict = {}
            build, white, _ = _translate(self._kernel, "", params)
            self._translation = (build, params, white if self._white else ())
        return self._translation

    build = property(lambda self: self._parts()[0])
    params = property(lambda self: self._parts()[1])
    white = property(lambda self: self._parts()[2])
    name = property(lambda self: repr(self._kernel))

    @property
    def free(self) -> tuple:
        # scikit-learn's ``hyperparameters`` (~30-60 us): read where theta is
        if self._free is None:
            self._free = tuple(h.name for h in self._kernel.hyperparameters
                               if not h.fixed)
        return self._free

    def with_theta(self, theta) -> Kernel:
        """A copy whose free hyperparameters are ``exp(theta)`` (scikit-learn's
        ``clone_with_theta``), translated lazily too."""
        theta = np.asarray(theta, dtype=np.float64).ravel()
        if theta.size != self._kernel.theta.size:
            raise ValueError(f"theta has {theta.size} values; this kernel has "
                             f"{self._kernel.theta.size}")
        out = _Translated(self._kernel.clone_with_theta(theta), self._white)
        if self._translation is not None:
            out._parts()  # as translatable as this one: checked
        return out

    def without_white(self) -> Kernel:
        """This kernel without its white noise (see :meth:`Kernel.without_white`)."""
        if not self._white:
            return self
        out = _Translated(self._kernel, white=False)
        if self._translation is not None:
            out._translation = self._translation[:2] + ((),)
        return out


def _translate(k, prefix, params):
    """``(build, white, const)`` for kernel ``k``; ``const`` is the monomial of
    a kernel that is a product of constants (else None)."""
    from sklearn.gaussian_process import kernels as gk

    kind = type(k)
    if kind in (gk.Sum, gk.Product):
        b1, w1, c1 = _translate(k.k1, prefix + "k1__", params)
        b2, w2, c2 = _translate(k.k2, prefix + "k2__", params)
        if kind is gk.Sum:
            return _sum(b1, b2), w1 + w2, None
        return _product(k, b1, b2, w1, w2, c1, c2)
    if kind is gk.Exponentiation:
        b, w, _ = _translate(k.kernel, prefix + "kernel__", params)
        if w:
            raise ValueError(f"{k!r}: a WhiteKernel raised to a power is not supported")
        e = float(k.exponent)
        return (lambda x, y, P: _pow(b(x, y, P), e)), (), None
    leaf = _LEAVES.get(kind)
    if leaf is None:
        raise TypeError(
            f"cannot translate the Gaussian-process kernel {k!r} ({kind.__name__}) "
            f"into a formula; supported: {', '.join(SUPPORTED)}, or write the kernel "
            "as a callable (x_i, y_j) -> LazyTensor"
        )
    return leaf(k, prefix, params)


def _sum(b1, b2):
    def build(x, y, P):
        f1, f2 = b1(x, y, P), b2(x, y, P)
        return f2 if f1 is None else f1 if f2 is None else f1 + f2

    return build


def _product(k, b1, b2, w1, w2, c1, c2):
    def build(x, y, P):
        f1, f2 = b1(x, y, P), b2(x, y, P)
        return None if f1 is None or f2 is None else f1 * f2

    # (k1 + W1) * (k2 + W2) keeps a diagonal only where the other factor is a
    # constant c: W * c. A white term times a non-constant kernel would need
    # that kernel's own diagonal, which is not supported.
    if (w1 and c2 is None) or (w2 and c1 is None):
        raise ValueError(
            f"{k!r}: a WhiteKernel may be multiplied by a ConstantKernel only; "
            "add it to the product instead (k1 * k2 + WhiteKernel())"
        )
    white = tuple(t + c2 for t in w1) + tuple(t + c1 for t in w2)
    const = c1 + c2 if c1 is not None and c2 is not None else None
    return build, white, const


def _pow(f, e):
    if f is None:
        return None
    return f ** int(e) if e == int(e) else f ** e


def _register(params, prefix, k, attr, *, zero=False):
    """Record hyperparameter ``attr`` of ``k`` under ``prefix + attr``: finite
    and > 0 (>= 0 with ``zero``), else ValueError naming it."""
    value = getattr(k, attr)
    try:
        v = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        v = np.array(np.nan)
    if v.size == 0 or not (np.isfinite(v) & ((v >= 0) if zero else (v > 0))).all():
        raise ValueError(
            f"The {attr!r} parameter of {type(k).__name__} must be a float "
            f"{'>= 0' if zero else '> 0'} (or an array of them). Got {value!r} instead."
        )
    name = prefix + attr
    params[name] = float(v) if v.ndim == 0 else v.ravel().copy()
    return name


def _scaled_sqdist(x, y, ls):
    """``sum_k ((x_k - y_k) / l_k)^2`` with a scalar or per-feature ``l``."""
    return ((x - y) / ls).square().sum(-1)


def _safe_sqrt(s):
    """``sqrt(s)`` for ``s >= 0``, with a zero derivative at ``s = 0`` (where
    scikit-learn's kernels also take it as 0) instead of ``0 * inf = NaN``:
    the square root never sees 0, and the outer branch returns 0 there."""
    at_zero = -s  # IfElse picks its first branch where the condition is >= 0
    return at_zero.ifelse(0.0, at_zero.ifelse(1.0, s).sqrt())


def _constant(k, prefix, params):
    name = _register(params, prefix, k, "constant_value")
    return (lambda x, y, P: _param(P[name])), (), (name,)


def _white(k, prefix, params):
    name = _register(params, prefix, k, "noise_level")
    return (lambda x, y, P: None), ((name,),), None


def _rbf(k, prefix, params):
    name = _register(params, prefix, k, "length_scale")
    return (lambda x, y, P: (-0.5 * _scaled_sqdist(x, y, P[name])).exp()), (), None


def _matern(k, prefix, params):
    nu = float(k.nu)
    if nu not in (0.5, 1.5, 2.5, math.inf):
        raise ValueError(
            f"{k!r}: Matern with nu={nu} has no closed form here; supported nu: "
            "0.5, 1.5, 2.5, inf"
        )
    name = _register(params, prefix, k, "length_scale")

    def build(x, y, P):
        return _matern_of_sqdist(nu, _scaled_sqdist(x, y, P[name]))

    return build, (), None


def _matern_of_sqdist(nu, s):
    """The Matern correlation as a formula of the scaled squared distance ``s``."""
    if nu == math.inf:
        return (-0.5 * s).exp()
    r = _safe_sqrt(s)
    if nu == 0.5:
        return (-r).exp()
    if nu == 1.5:
        t = math.sqrt(3) * r
        return (1.0 + t) * (-t).exp()
    t = math.sqrt(5) * r
    return (1.0 + t + t.square() / 3.0) * (-t).exp()


class StationaryForm(NamedTuple):
    """``k(x, y) = c * phi(|x / l - y / l|^2)`` off the diagonal (see
    :func:`stationary_form`); ``constants`` and ``length_scale_name`` are the
    hyperparameter names (as in ``theta``) of c's factors and of l; ``nu``
    the Matern smoothness (``inf`` for RBF)."""

    c: float
    length_scale: np.ndarray
    phi: Callable
    constants: tuple
    length_scale_name: str
    nu: float = math.inf


def stationary_form(kernel):
    """Recognise ``c * RBF`` and ``c * Matern`` kernels (up to WhiteKernel terms).

    ``c`` is a product of ConstantKernels, possibly empty. Products with
    such a kernel can then run on the rescaled points ``X / l``, whose
    formula has no per-pair division by the length scales: the iterative
    GP solver's conjugate gradients and gradient use it.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel object.

    Returns
    -------
    StationaryForm or None
        Its form, or None for any other kernel.

    Examples
    --------
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from kerneltools.kernels import stationary_form
    >>> form = stationary_form(2.0 * RBF(1.0) + WhiteKernel())
    >>> form.c, form.length_scale_name
    (2.0, 'k1__k2__length_scale')
    >>> stationary_form(RBF(1.0) + RBF(2.0)) is None
    True
    """
    from sklearn.gaussian_process import kernels as gk

    def summands(k, prefix):
        if type(k) is gk.Sum:
            return summands(k.k1, prefix + "k1__") + summands(k.k2, prefix + "k2__")
        return [] if type(k) is gk.WhiteKernel else [(k, prefix)]

    def factors(k, prefix):
        if type(k) is gk.Product:
            return factors(k.k1, prefix + "k1__") + factors(k.k2, prefix + "k2__")
        return [(k, prefix)]

    terms = summands(kernel, "")
    if len(terms) != 1:
        return None
    c, leaf, constants = 1.0, None, []
    for f, prefix in factors(*terms[0]):
        if type(f) is gk.ConstantKernel:
            c *= float(f.constant_value)
            constants.append(prefix + "constant_value")
        elif type(f) in (gk.RBF, gk.Matern) and leaf is None:
            leaf, ls_name = f, prefix + "length_scale"
        else:
            return None
    if leaf is None:
        return None
    nu = math.inf if type(leaf) is gk.RBF else float(leaf.nu)
    if nu not in (0.5, 1.5, 2.5, math.inf):
        return None
    ls = np.asarray(leaf.length_scale, dtype=np.float64)
    return StationaryForm(c, ls, lambda s: _matern_of_sqdist(nu, s), tuple(constants),
                          ls_name, nu)


def _rational_quadratic(k, prefix, params):
    if np.ndim(k.length_scale) and np.size(k.length_scale) > 1:
        raise ValueError(f"{k!r}: RationalQuadratic takes a scalar length_scale only")
    a = _register(params, prefix, k, "alpha")
    ls = _register(params, prefix, k, "length_scale")

    def build(x, y, P):
        base = 1.0 + x.sqdist(y) / (2.0 * P[a] * P[ls].square())
        return (-P[a] * base.log()).exp()

    return build, (), None


def _exp_sine_squared(k, prefix, params):
    ls = _register(params, prefix, k, "length_scale")
    per = _register(params, prefix, k, "periodicity")

    def build(x, y, P):
        d = _safe_sqrt(x.sqdist(y))
        return (-2.0 * ((math.pi * d / P[per]).sin() / P[ls]).square()).exp()

    return build, (), None


def _dot_product(k, prefix, params):
    name = _register(params, prefix, k, "sigma_0", zero=True)
    return (lambda x, y, P: P[name].square() + (x * y).sum(-1)), (), None


def _param(p):
    return p if isinstance(p, LazyTensor) else LazyTensor(float(p))


def _leaves():
    from sklearn.gaussian_process import kernels as gk

    return {gk.ConstantKernel: _constant, gk.WhiteKernel: _white, gk.RBF: _rbf,
            gk.Matern: _matern, gk.RationalQuadratic: _rational_quadratic,
            gk.ExpSineSquared: _exp_sine_squared, gk.DotProduct: _dot_product}


class _LazyLeaves(dict):
    """The leaf table, filled on first use (scikit-learn is imported then)."""

    def get(self, key, default=None):
        if not self:
            self.update(_leaves())
        return super().get(key, default)


_LEAVES = _LazyLeaves()
