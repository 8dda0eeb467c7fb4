"""kerneltools.torch.SamplesLoss: the parameters and inputs GeomLoss accepts,
and clear errors for the ones nobody can compute with.

- Parameters given as 0-d tensors (GeomLoss's own examples pass
  ``blur=torch.tensor(...)``) give the value of the same float.
- ``cluster_scale=0``: GeomLoss ignores ``cluster_scale`` outside its
  multiscale backend; here 0 means cells of width 0 (one point each), the
  plain Sinkhorn.
- float16 and bfloat16 points are computed in float32 and the loss comes back
  in the input's dtype (GeomLoss computes them in their own dtype: compared
  with the float32 value to the half type's rounding).
- Integer points are cast to float64 (the project's rule for integer input).
- A battery of malformed inputs: each a typed exception naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SamplesLoss needs PyTorch (an optional extra)")
geomloss = pytest.importorskip("geomloss", reason="the reference is GeomLoss")

from _array_api_helpers import torch_measures  # noqa: E402

from kerneltools.torch import SamplesLoss  # noqa: E402

# -- parameters as 0-d tensors ---------------------------------------------------------

TENSOR_PARAMETERS = [
    ("sinkhorn", {"blur": 0.1}),
    ("sinkhorn", {"reach": 0.7}),
    ("sinkhorn", {"diameter": 3.0}),
    ("sinkhorn", {"scaling": 0.7}),
    ("sinkhorn", {"truncate": 3.0, "backend": "multiscale"}),
    ("sinkhorn", {"cluster_scale": 0.2, "backend": "multiscale"}),
    ("gaussian", {"blur": 0.3}),
    ("hausdorff", {"blur": 0.2}),
]


@pytest.mark.parametrize("loss, kw", TENSOR_PARAMETERS,
                         ids=[f"{c[0]}-{next(iter(c[1]))}" for c in TENSOR_PARAMETERS])
def test_zero_dimensional_tensor_parameters_equal_floats(loss, kw):
    args = torch_measures(torch.float64)
    as_float = SamplesLoss(loss, **kw)(*args)
    as_tensor = SamplesLoss(loss, **{
        k: torch.tensor(v, dtype=torch.float64) if isinstance(v, float) else v
        for k, v in kw.items()})(*args)
    assert float(as_tensor) == float(as_float)


def test_tensor_blur_equals_geomloss():
    """GeomLoss's own use: ``SamplesLoss("sinkhorn", blur=torch.tensor(.05))``."""
    args = torch_measures(torch.float64)
    blur = torch.tensor(0.1, dtype=torch.float64)
    scaling = torch.tensor(0.8, dtype=torch.float64)
    ours = SamplesLoss("sinkhorn", blur=blur, scaling=scaling)(*args)
    ref = geomloss.SamplesLoss("sinkhorn", blur=blur, scaling=scaling,
                               backend="tensorized")(*args)
    # the same algorithm: only rounding differs (test_samples_loss's tolerance)
    assert abs(float(ours) - float(ref)) <= 1e-9 * abs(float(ref))


@pytest.mark.parametrize("backend", ["online", "multiscale"])
def test_cluster_scale_zero_is_the_plain_sinkhorn(backend):
    args = torch_measures(torch.float64)
    plain = SamplesLoss("sinkhorn", blur=0.1)(*args)
    zero = SamplesLoss("sinkhorn", blur=0.1, cluster_scale=0, backend=backend)(*args)
    assert abs(float(zero) - float(plain)) <= 1e-12 * abs(float(plain))


@pytest.mark.parametrize("name, value, error, match", [
    ("blur", torch.tensor([0.1, 0.2]), ValueError, "'blur' parameter.*one number"),
    ("blur", torch.tensor(float("nan")), ValueError, "'blur' parameter"),
    ("blur", float("inf"), ValueError, "'blur' parameter.*finite"),
    ("blur", torch.tensor(-0.1), ValueError, "'blur' parameter.*> 0"),
    ("blur", "0.1", TypeError, "'blur' parameter"),
    ("reach", torch.tensor(0.0), ValueError, "'reach' parameter"),
    ("diameter", np.float64(-1.0), ValueError, "'diameter' parameter"),
    ("scaling", torch.tensor(1.0), ValueError, "'scaling' parameter"),
    ("truncate", torch.tensor(-2.0), ValueError, "'truncate' parameter"),
    ("cluster_scale", -0.1, ValueError, "'cluster_scale' parameter.*>= 0"),
    ("cluster_scale", torch.tensor(float("nan")), ValueError, "'cluster_scale'"),
    ("blur", True, TypeError, "'blur' parameter"),
    ("backend", 3, ValueError, "'backend' parameter of SamplesLoss.*'online'.*'cpu'"),
    ("backend", "tpu", ValueError, "'backend' parameter of SamplesLoss.*'tpu'"),
    ("reach", float("inf"), ValueError, "'reach' parameter.*finite"),
])
def test_bad_parameter_values(name, value, error, match):
    with pytest.raises(error, match=match):
        SamplesLoss("sinkhorn", **{name: value})


# -- dtypes ------------------------------------------------------------------------------


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("loss, kw", [("sinkhorn", {"blur": 0.1}), ("gaussian", {}),
                                      ("energy", {}), ("hausdorff", {"blur": 0.1})])
def test_half_precision_points_are_computed_in_float32(half, loss, kw):
    """Without weights (the mass check must not see float16's rounding of
    1 / n); the value in the input's dtype, equal to the float32 loss of the
    same (rounded) points; the gradient in the points' dtype."""
    _, x, _, y = torch_measures(torch.float32, n=50, m=40)
    x, y = x.to(half).requires_grad_(), y.to(half)
    L = SamplesLoss(loss, **kw)
    value = L(x, y)
    assert value.dtype == half
    ref = L(x.detach().float(), y.float())
    assert abs(float(value.detach()) - float(ref)) <= 2 * torch.finfo(half).eps * abs(
        float(ref))
    (gx,) = torch.autograd.grad(value, x)
    assert gx.dtype == half and gx.shape == x.shape and torch.isfinite(gx).all()


def test_half_precision_value_agrees_with_geomloss():
    _, x, _, y = torch_measures(torch.float32, n=50, m=40)
    x, y = x.half(), y.half()
    ours = SamplesLoss("sinkhorn", blur=0.1)(x, y)
    ref = geomloss.SamplesLoss("sinkhorn", blur=0.1, backend="tensorized")(x, y)
    assert ours.dtype == ref.dtype == torch.float16
    # GeomLoss iterates in float16: its own rounding, about 1e-3 of the value
    assert abs(float(ours) - float(ref)) <= 5e-3 * abs(float(ours))


def test_half_precision_weights_of_equal_mass_up_to_their_rounding():
    """Weights normalised in float16 sum to 1 only up to float16's rounding:
    they are masses of the same total for balanced transport."""
    a, x, b, y = torch_measures(torch.float32, n=37, m=53)
    a16, b16 = a.half(), b.half()
    assert abs(float(a16.double().sum()) - float(b16.double().sum())) > 1e-5
    value = SamplesLoss("sinkhorn", blur=0.1)(a16, x.half(), b16, y.half())
    ref = SamplesLoss("sinkhorn", blur=0.1)(a16.float(), x.half().float(),
                                            b16.float() * (a16.float().sum() /
                                                           b16.float().sum()),
                                            y.half().float())
    assert abs(float(value) - float(ref)) <= 2e-3 * abs(float(ref))


@pytest.mark.parametrize("loss", ["sinkhorn", "energy", "hausdorff"])
def test_integer_points_are_cast_to_float64(loss):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(0, 6, (30, 2), generator=g)
    y = torch.randint(2, 9, (25, 2), generator=g)
    value = SamplesLoss(loss)(x, y)
    assert value.dtype == torch.float64
    assert float(value) == float(SamplesLoss(loss)(x.double(), y.double()))


# -- malformed inputs ----------------------------------------------------------------


def _bad_calls():
    a, x, b, y = torch_measures(torch.float64)
    nan = x.clone()
    nan[3, 1] = float("nan")
    return [
        ("1-d x", (x[:, 0], y), ValueError, "'x' must be a non-empty"),
        ("4-d y", (x, y[None, None]), ValueError, "'y' must be a non-empty"),
        ("0-d x", (torch.tensor(1.0), y), ValueError, "'x' must be a non-empty"),
        ("empty x", (x[:0], y), ValueError, "'x' must be a non-empty"),
        ("no features", (x[:, :0], y[:, :0]), ValueError, "'x' must be a non-empty"),
        ("features differ", (x, y[:, :2]), ValueError, "'x' and 'y'"),
        ("batch and not", (x[None], y), ValueError, "'x' and 'y'"),
        ("nan point", (nan, y), ValueError, "'x' contains NaN"),
        ("complex", (x.to(torch.complex128), y), TypeError, "'x' must be real"),
        ("list", (x.tolist(), y), TypeError, "'x' must be a torch tensor"),
        ("3 arguments", (a, x, y), TypeError, "L\\(x, y\\) or L\\(a, x, b, y\\)"),
        ("a 2-d", (a[:, None].expand(-1, 2), x, b, y), ValueError, "'a' must have shape"),
        ("b too short", (a, x, b[:-1], y), ValueError, "'b' must have shape"),
        ("a negative", (-a, x, b, y), ValueError, "'a' must be finite and >= 0"),
        ("b nan", (a, x, b * float("nan"), y), ValueError, "'b' must be finite"),
        ("a numpy", (a.numpy(), x, b, y), TypeError, "'a' must be a torch tensor"),
        ("a complex", (a.to(torch.complex128), x, b, y), TypeError, "'a' must be real"),
    ]


@pytest.mark.parametrize("loss", ["sinkhorn", "gaussian", "energy", "hausdorff"])
def test_malformed_inputs_raise_typed_errors_naming_the_argument(loss):
    L = SamplesLoss(loss)
    calls = _bad_calls()
    if loss in ("sinkhorn", "hausdorff"):  # log-weights: a measure of mass 0 has none
        a, x, b, y = torch_measures(torch.float64)
        calls.append(("a zero sum", (a * 0, x, b, y), ValueError, "'a' sums to 0"))
    for what, args, error, match in calls:
        with pytest.raises(error, match=match):
            L(*args)
        # the message names the caller too
        with pytest.raises(error, match="SamplesLoss"):
            L(*args)


def test_a_measure_of_mass_zero_has_a_kernel_norm():
    """The kernel losses are defined for the zero measure (GeomLoss computes
    them): ``1/2 |b|_k^2``."""
    a, x, b, y = torch_measures(torch.float64)
    L = SamplesLoss("gaussian", blur=0.5)
    K_yy = torch.exp(-torch.cdist(y, y) ** 2 / (2 * 0.5**2))
    assert abs(float(L(a * 0, x, b, y)) - 0.5 * float(b @ K_yy @ b)) <= 1e-12


def test_parameters_of_every_real_dtype():
    args = torch_measures(torch.float64)
    ref = float(SamplesLoss("sinkhorn", blur=0.5)(*args))
    for blur in (torch.tensor(0.5, dtype=torch.bfloat16), torch.tensor([0.5]),
                 np.float32(0.5), np.array(0.5), torch.tensor(0.5, requires_grad=True)):
        assert float(SamplesLoss("sinkhorn", blur=blur)(*args)) == ref
    for bad in (torch.tensor(0.5 + 0j), torch.tensor(True), np.array("0.5")):
        with pytest.raises(TypeError, match="'blur' parameter of SamplesLoss"):
            SamplesLoss("sinkhorn", blur=bad)
