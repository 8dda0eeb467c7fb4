"""The named element-wise and vector operations of :class:`~kerneltools.LazyTensor`.

A mixin of the class (``lazy.py``): each method builds one formula node
(``self._apply``) or a composite of nodes (``self._compose``, the composites
of :mod:`kerneltools.backend._ops`); arithmetic, comparisons and reductions
live in the class itself.
"""

from __future__ import annotations

from ._args import int_arg as _int_arg
from ._sections import sections
from ..backend import _ops

__all__ = ["MathMethods"]


class MathMethods:
    """``atan2``, ``clamp``, ``ifelse``, ``mod``, ``round``, ``power`` and the
    vector operations (norms, distances, extraction, products)."""

    # element-wise functions with arguments
    @sections(x="LazyTensor or float: The first coordinate of the point.")
    def atan2(self, x) -> "LazyTensor":
        """``atan2(self, x)``: the angle of the point (x, self)."""
        return self._apply("Atan2", x)

    @sections(lo="LazyTensor or float: The lower bound.",
              hi="LazyTensor or float: The upper bound.")
    def clamp(self, lo, hi) -> "LazyTensor":
        """``self`` clamped to ``[lo, hi]``."""
        return self._apply("Clamp", lo, hi)

    @sections(a="LazyTensor or float: The value where ``self >= 0``.",
              b="LazyTensor or float: The value elsewhere.")
    def ifelse(self, a, b) -> "LazyTensor":
        """``a`` where ``self >= 0``, else ``b``."""
        return self._apply("IfElse", a, b)

    @sections(modulus="LazyTensor or float: The length of the interval.",
              offset="LazyTensor or float, default=0: The start of the interval.")
    def mod(self, modulus, offset=0) -> "LazyTensor":
        """``self`` wrapped into ``[offset, offset + modulus)``."""
        return self._compose(_ops.mod, modulus, offset)

    @sections(decimals="int, default=0: The number of decimals kept.")
    def round(self, decimals: int = 0) -> "LazyTensor":
        """Rounded to ``decimals`` decimals (half to even, as NumPy)."""
        return self._apply("Round", attrs=(_int_arg(decimals, "decimals"),))

    @sections(p="LazyTensor or float: The exponent.")
    def power(self, p) -> "LazyTensor":
        """``self ** p``."""
        return self ** p

    # vector operations
    @sections()
    def sqnorm2(self) -> "LazyTensor":
        """Squared Euclidean norm over the feature axis."""
        return self._compose(_ops.sqnorm2)

    @sections()
    def norm2(self) -> "LazyTensor":
        """Euclidean norm over the feature axis."""
        return self._compose(_ops.norm2)

    @sections()
    def normalize(self) -> "LazyTensor":
        """``self / |self|`` (0 where ``self`` is 0)."""
        return self._compose(_ops.normalize)

    @sections(other="LazyTensor: The second point, of the same dimension.")
    def sqdist(self, other) -> "LazyTensor":
        """``|self - other|^2``."""
        return self._compose(_ops.sqdist, other)

    @sections(s="LazyTensor: The weights S, of dimension 1, D or D*D.")
    def weightedsqnorm(self, s) -> "LazyTensor":
        """``self^T S self``, S scalar, diagonal (D) or full (D*D, row-major)."""
        return self._lift(s)._compose(_ops.weightedsqnorm, self)

    @sections(other="LazyTensor: The second point.",
              s="LazyTensor: The weights S, of dimension 1, D or D*D.")
    def weightedsqdist(self, other, s) -> "LazyTensor":
        """``(self - other)^T S (self - other)``."""
        return self._lift(s)._compose(_ops.weightedsqdist, self, other)

    @sections(k="int: The index of the component (negative: from the end).")
    def elem(self, k: int) -> "LazyTensor":
        """Component ``k`` (dimension 1)."""
        k = _int_arg(k, "k")
        return self._apply("Extract", attrs=(k + self.dim if k < 0 else k, 1))

    @sections(start="int: The index of the first component.",
              d="int: The number of components.")
    def extract(self, start: int, d: int) -> "LazyTensor":
        """Components ``start`` to ``start + d - 1``."""
        return self._apply("Extract", attrs=(_int_arg(start, "start"), _int_arg(d, "d")))

    @sections(other="LazyTensor: The components appended after ``self``'s.")
    def concat(self, other) -> "LazyTensor":
        """Concatenation along the feature axis."""
        return self._apply("Concat", other)

    @sections(v="LazyTensor: The vector, of dimension m.")
    def matvecmult(self, v) -> "LazyTensor":
        """``A v``: ``self`` is a row-major matrix of ``n * m`` entries, ``v`` of dim m."""
        return self._apply("MatVecMult", v)

    @sections(A="LazyTensor: The matrix, n * m values, row-major.")
    def vecmatmult(self, A) -> "LazyTensor":
        """``v^T A``: ``self`` is a vector of dim n, ``A`` a row-major n x m matrix."""
        return self._apply("VecMatMult", A)

    @sections(other="LazyTensor: The second factor.")
    def tensorprod(self, other) -> "LazyTensor":
        """Outer product, flattened row-major."""
        return self._apply("TensorProd", other)

    @sections(D="int: The dimension of the encoding.")
    def one_hot(self, D: int) -> "LazyTensor":
        """One-hot encoding of ``round(self)`` in dimension ``D``."""
        return self._apply("OneHot", attrs=(_int_arg(D, "D"),))
