"""Malformed formulas at every public entry point: a typed error that names
the argument, and for strings the position.

pykeops-style strings go to ``Genred``, ``KernelSolve`` and the
``generic_*`` helpers of ``kerneltools.keops.numpy``; integer arguments of
LazyTensor methods (kerneltools' and the pykeops-flavoured one) are checked
the same way. Every case must raise at construction, quickly, with an
exception of the expected type whose message names the argument (and, for a
string, the position with a caret under it).
"""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.exceptions import FormulaSyntaxError
from kerneltools.keops import numpy as kn

ALIASES = ["x = Vi(3)", "y = Vj(3)", "b = Vj(1)"]

# (formula, position, words of the reason)
BAD_FORMULAS = [
    ("", 0, "empty"),
    ("   ", 0, "empty"),
    ("Exp(x", 5, "expected ',' or ')'"),
    ("Exp(x))", 6, "expected an operator"),
    ("((x)", 4, "expected ')'"),
    (")x(", 0, "expected a number"),
    ("x +* y", 3, "expected a number"),
    ("x ** ", 5, "expected a number"),
    ("Foo(x)", 0, "unknown operation 'Foo'"),
    ("Exp(x, y)", 0, "takes 1 argument(s), got 2"),
    ("Exp()", 0, "takes 1 argument(s), got 0"),
    ("SqDist(x)", 0, "takes 2 argument(s), got 1"),
    ("Elem(x, y)", 8, "integer literal"),
    ("Elem(x, 1.5)", 8, "integer literal"),
    ("z + x", 0, "unknown name 'z'"),
    ("x + Var(3, -3, 0)", 11, "must be integers"),
    ("x + Var(3, 0, 0)", 4, "must be >= 1"),
    ("x + Var(3, 3, 5)", 4, "category"),
    ("x + Vi(3)", 4, "needs an index"),
    ("x + Var(3, 10000000, 0)", 11, "dimension must be at most"),
    ("x + Var(1000000, 1, 0)", 8, "variable index must be at most"),
    ("OneHot(b, -1)", 10, "dimension must be at least 1"),
    ("OneHot(b, 0)", 10, "dimension must be at least 1"),
    ("SumT(b, 99999999)", 8, "dimension must be at most"),
    ("Pow(x, 99999999)", 7, "exponent must be at most"),
    ("x ** 99999999999999999999999", 5, "exponent must be at most"),
    ("Round(x, 99999)", 9, "decimals must be at most"),
    ("[1, 2]", 0, "a list is not a formula"),
    ("Exp([1])", 4, "a list is not a formula"),
    ("x $ y", 2, "unexpected character '$'"),
    ("x * \u0663", 4, "unexpected character"),
    ("x\u2003+ y", 1, "unexpected character"),
    ("x * " + "7" * 200, 4, "number literal of 200 characters"),
    ("__import__('os')", 11, "unexpected character"),
    ("Sum_Reduction(x, 3)", 0, "tag 0 or 1"),
    ("KMin_Reduction(x, 0)", 0, "expected KMin_Reduction(F, K, tag)"),
    ("Exp(" * 2000 + "x" + ")" * 1999, 10000, "expected ',' or ')'"),
]


@pytest.mark.parametrize("formula, pos, reason", BAD_FORMULAS,
                         ids=[repr(f[:30]) for f, _, _ in BAD_FORMULAS])
def test_bad_formula_names_the_argument_and_the_position(formula, pos, reason):
    with pytest.raises(FormulaSyntaxError) as info:
        kn.Genred(formula, ALIASES, axis=1)
    err = info.value
    assert err.pos == pos and reason in err.reason, str(err)
    assert err.argument == "Genred: 'formula'"
    first, shown, caret = str(err).splitlines()
    assert first.startswith("Genred: 'formula': ") and f"at position {pos}" in first
    assert len(shown) < 200 and caret.strip() == "^"  # an excerpt of a long string


# (aliases, exception type, words of the message, position or None)
BAD_ALIASES = [
    (["x = Vi(3)", 5], TypeError, "alias 1 must be a string", None),
    (None, TypeError, "'aliases' must be a list", None),
    ({"x": 3}, TypeError, "'aliases' must be a list", None),
    (["x = Vi(-3)"], FormulaSyntaxError, "'aliases'[0]", 7),
    (["x = Vi(0)"], FormulaSyntaxError, "must be >= 1", 4),
    (["x = Vi(3"], FormulaSyntaxError, "expected ',' or ')'", 8),
    (["x = Vq(3)"], FormulaSyntaxError, "expected Vi(...)", 4),
    (["x = Vi(99999999999)"], FormulaSyntaxError, "dimension must be at most", 7),
    (["x = Vi(2000, 3)"], FormulaSyntaxError, "variable index must be at most", 7),
    (["= Vi(3)"], FormulaSyntaxError, "an alias starts with a name", 0),
    ([""], FormulaSyntaxError, "an alias starts with a name", 0),
    (["x = Vi(3)", "x = Vj(3)"], ValueError, "declared twice in 'aliases'", None),
    (["x = Vi(3)", "y = Vj(2, 3)"], ValueError, "argument(s) [1];", None),
]


@pytest.mark.parametrize("aliases, exc, words, pos", BAD_ALIASES,
                         ids=[repr(a)[:30] for a, *_ in BAD_ALIASES])
def test_bad_aliases_name_the_argument(aliases, exc, words, pos):
    formula = "x" if aliases and isinstance(aliases, list) and len(aliases) < 2 else "x + y"
    with pytest.raises(exc) as info:
        kn.Genred(formula, aliases, axis=1)
    assert words in str(info.value) and "Genred" in str(info.value), str(info.value)
    if pos is not None:
        assert info.value.pos == pos and "'aliases'[" in info.value.argument


@pytest.mark.parametrize("kwargs, exc, words", [
    ({"formula": 123}, TypeError, "'formula' must be a string"),
    ({"formula": None}, TypeError, "'formula' must be a string"),
    ({"formula": b"x"}, TypeError, "'formula' must be a string"),
    ({"formula": ["x"]}, TypeError, "'formula' must be a string"),
    ({"reduction_op": "Foo"}, ValueError, "'reduction_op'"),
    ({"reduction_op": 3}, TypeError, "'reduction_op'"),
    ({"axis": 2}, ValueError, "'axis'"),
    ({"axis": "1"}, ValueError, "'axis'"),
    ({"reduction_op": "KMin", "opt_arg": -1}, ValueError, "'opt_arg'"),
    ({"reduction_op": "LogSumExp", "formula2": "Exp("}, FormulaSyntaxError, "'formula2'"),
    ({"reduction_op": "LogSumExp", "formula2": 3}, TypeError, "'formula2'"),
    ({"use_double_acc": "yes"}, TypeError, "'use_double_acc'"),
])
def test_bad_genred_arguments_are_named(kwargs, exc, words):
    args = {"formula": "SqDist(x, y)", "aliases": ALIASES, "axis": 1, **kwargs}
    with pytest.raises(exc, match=words.replace("(", r"\(").replace(")", r"\)")):
        kn.Genred(**args)


@pytest.mark.parametrize("make", [
    lambda f: kn.KernelSolve(f, ALIASES, "b", axis=1),
    lambda f: kn.generic_sum(f, "a = Vi(1)", *ALIASES),
    lambda f: kn.generic_argkmin(f, "a = Vi(2)", *ALIASES),
], ids=["KernelSolve", "generic_sum", "generic_argkmin"])
def test_other_entry_points_name_the_formula(make):
    with pytest.raises(FormulaSyntaxError) as info:
        make("Exp(-SqDist(x, y) * b")
    assert info.value.pos == 21 and "'formula'" in str(info.value)


def test_torch_binding_names_the_argument_and_the_position():
    kt_torch = pytest.importorskip("kerneltools.keops.torch")
    for formula, pos, reason in BAD_FORMULAS[::4]:
        with pytest.raises(FormulaSyntaxError) as info:
            kt_torch.Genred(formula, ALIASES, axis=1)
        assert info.value.pos == pos and reason in info.value.reason
        assert info.value.argument == "Genred: 'formula'"


@pytest.mark.parametrize("output, exc, words", [
    ("a = Vk(1)", FormulaSyntaxError, "generic_sum: 'output'"),
    ("a = Vi(1", FormulaSyntaxError, "generic_sum: 'output'"),
    (3, TypeError, "generic_sum: 'output' must be a string"),
    ("a = Pm(1)", ValueError, "generic_sum: the output"),
])
def test_generic_output_alias_is_named(output, exc, words):
    with pytest.raises(exc) as info:
        kn.generic_sum("x", output, *ALIASES)
    assert words in str(info.value), str(info.value)


def _lazy_cases(LazyTensor):
    x = LazyTensor(np.ones((4, 1, 3)))
    s = LazyTensor(np.ones((4, 1, 1)))
    return [
        (lambda: s.one_hot(-1), ValueError, "'D'"),
        (lambda: s.one_hot(10 ** 12), ValueError, "'D'"),
        (lambda: s.one_hot("3"), TypeError, "'D'"),
        (lambda: x.elem("0"), TypeError, "'k'"),
        (lambda: x.elem(10 ** 12), ValueError, "extract"),
        (lambda: x.extract(2, 5), ValueError, "extract"),
        (lambda: x.extract(0, "2"), TypeError, "'d'"),
        (lambda: x ** (2 ** 70), ValueError, "exponent"),
        (lambda: x ** -(10 ** 9), ValueError, "exponent"),
        (lambda: x ** "2", TypeError, ""),
        (lambda: x.round(10 ** 6), ValueError, "decimals"),
        (lambda: x.round("1"), TypeError, "'decimals'"),
        (lambda: x.sum(axis=5), ValueError, "axis"),
    ]


def test_complex_power_beyond_the_limit_names_the_exponent():
    z = kt.ComplexLazyTensor(np.ones((3, 1, 2)) + 1j)
    with pytest.raises(ValueError, match="exponent"):
        z ** (2 ** 70)


@pytest.mark.parametrize("LazyTensor", [kt.LazyTensor, kn.LazyTensor],
                         ids=["kerneltools", "keops.numpy"])
@pytest.mark.parametrize("case", range(13))
def test_lazytensor_methods_refuse_bad_integers(LazyTensor, case):
    fn, exc, words = _lazy_cases(LazyTensor)[case]
    with pytest.raises(exc) as info:
        fn()
    assert words in str(info.value), str(info.value)


def test_every_case_is_quick():
    """No case of this battery does work out of proportion: all of them, once
    more, well within a second of CPU time."""
    import time
    start = time.process_time()
    for formula, _, _ in BAD_FORMULAS:
        with pytest.raises(FormulaSyntaxError):
            kn.Genred(formula, ALIASES, axis=1)
    assert time.process_time() - start < 1.0


def test_syntax_errors_pickle_with_their_fields():
    """A FormulaSyntaxError crosses process boundaries (multiprocessing, joblib)
    with its reason, string, position and argument."""
    import pickle
    with pytest.raises(FormulaSyntaxError) as info:
        kn.Genred("Exp(x", ALIASES, axis=1)
    err = pickle.loads(pickle.dumps(info.value))
    assert (err.reason, err.text, err.pos, err.argument) == (
        info.value.reason, "Exp(x", 5, "Genred: 'formula'")
    assert str(err) == str(info.value)
