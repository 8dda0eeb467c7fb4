"""Variables keep their identity across processes (``lazy/_symbolic.py``).

A LazyTensor pickled in one process combines correctly with the variables of
another; two processes give one formula the same kernel key whatever
variables they made before; a forked child's variables do not collide with
the parent's; unpickling keeps variables shared between formulas shared.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kerneltools as kt

RNG = np.random.default_rng(19)


_PICKLER = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import kerneltools as kt
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(6, 2))
    K = (kt.Vi(x) - kt.Vj(y)).sum(-1)
    sys.stdout.buffer.write(pickle.dumps((K, x, y)))
""")


def _run(code: str, stdin: bytes = b"") -> bytes:
    env = dict(os.environ, KERNELTOOLS_BACKEND="numpy")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          env=env, timeout=120, input=stdin).stdout


_COMBINER = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import kerneltools as kt
    rng = np.random.default_rng(1)
    # fresh variables of this process, made before and after the unpickling
    a, b = rng.normal(size=(5, 2)), rng.normal(size=(6, 2))
    G = (kt.Vi(a) * kt.Vj(b)).sum(-1)
    K, x, y = pickle.loads(sys.stdin.buffer.read())
    H = kt.Vj(b[:, :1])
    out = (K + G + H).sum(axis=1)
    sys.stdout.buffer.write(pickle.dumps((out, x, y, a, b)))
""")


def test_lazytensor_pickled_in_another_process_combines_correctly():
    # pickled in one fresh process, combined with new variables in another
    out, x, y, a, b = pickle.loads(_run(_COMBINER, stdin=_run(_PICKLER)))
    ref = ((x[:, None] - y[None]).sum(-1) + a @ b.T + b[None, :, 0]).sum(1)
    np.testing.assert_allclose(out[:, 0], ref, rtol=1e-12)


def test_two_processes_compute_the_same_kernel_key():
    code = textwrap.dedent("""
        import numpy as np, kerneltools as kt
        for _ in range({extra}):  # variables made before: other ids
            kt.Vi(np.ones((2, 1)))
        x = np.ones((5, 3))
        K = (-kt.Pm(0.5) * kt.Vi(x).sqdist(kt.Vj(x))).exp()
        print(K._plan("Sum", 1)[0].key)
    """)
    keys = {_run(code.format(extra=e)).decode().strip() for e in (0, 7)}
    x = np.zeros((9, 3))
    here = (-kt.Pm(2.0) * kt.Vi(x).sqdist(kt.Vj(x))).exp()._plan("Sum", 1)[0].key
    assert keys == {here}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_variables_made_in_a_forked_child_do_not_collide():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new variable, sent back pickled
        try:
            os.close(r)
            payload = pickle.dumps(kt.Vi(np.full((4, 1), 10.0)))
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(0)
    os.close(w)
    mine = kt.Vi(np.ones((4, 1)))  # made after the fork, as the child's was
    with os.fdopen(r, "rb") as f:
        theirs = pickle.loads(f.read())
    os.waitpid(pid, 0)
    out = ((mine + theirs) * kt.Vj(np.ones((3, 1)))).sum(axis=1, backend="numpy")
    np.testing.assert_array_equal(out[:, 0], np.full(4, 33.0))


def test_pickled_tensor_keeps_shared_variables_in_one_process():
    x = RNG.normal(size=(6, 2))
    x_i = kt.Vi(x)
    K = (x_i - kt.Vj(x)).sqnorm2()
    K2, x_i2 = pickle.loads(pickle.dumps((K, x_i)))
    g = K2.grad(x_i2, 1.0).sum(axis=1, backend="numpy")
    ref = (2 * (x[:, None] - x[None])).sum(1)
    np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-12)
