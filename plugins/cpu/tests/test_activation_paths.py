"""Which path each activation and each fused op takes for float32, and the
Cython activations against their float64 formulas.

The tables below list every fused op the CPU provider registers and every
activation, with the path of its float32 work as the kernel modules mark it
(``ortcore_cpu.kernels._paths``): a kernel that falls back to numpy changes
a line here. Each mark is checked against what the kernel calls (a native
kernel must call into ``ortcore_cpu._ext``, a numpy one must not), and the
activations must all be native. The numeric tests compare the Cython
activations with their formulas in float64 on large |x|, NaN, ±inf, ±0,
non-contiguous inputs and sizes that cross the kernel's chunks, with every
build of the kernel this CPU runs (portable, AVX2, AVX-512: ``_isa.py``).
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from ep_sdk.fused_ops import DOMAIN, register_fused_schemas
from ep_sdk.testing import KernelKit

from ortcore_cpu import _ext
from ortcore_cpu._ext import activation as native
from ortcore_cpu.kernels import registry, unary
from ortcore_cpu.kernels._isa import BUILDS, FAMILIES, activation_module, runnable_builds
from ortcore_cpu.kernels._paths import MIXED, NATIVE, NUMPY, float32_path, float32_path_of
from ortcore_cpu.provider import CPUExecutionProvider

MS = "com.microsoft"
kit = KernelKit(CPUExecutionProvider, opset=17, threads=2)
RNG = np.random.default_rng(3)

FUSED_PATHS = {
    "BiasGelu": NATIVE,
    "FusedAttention": NATIVE,  # BLAS products, Cython softmax
    "FusedBatchNorm": NATIVE,
    "FusedConv": NATIVE,
    "FusedConvAdd": NATIVE,
    "FusedConvConcat": NATIVE,
    "FusedConvPool": NATIVE,
    "FusedConvShuffle": NATIVE,
    "FusedGelu": NATIVE,
    "FusedGemm": NATIVE,
    "FusedLayerNorm": NATIVE,
    "FusedMatMul": NATIVE,
    "FusedRMSNorm": NUMPY,
    "FusedSwish": NATIVE,
    "GrowingConcat": NATIVE,  # Cython copies
    "SkipLayerNormalization": NATIVE,
}
"""Every op of the fused domain and its float32 path."""

ACTIVATIONS = [
    *(("", op) for op in ("Celu", "Clip", "Elu", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu",
                          "Mish", "Relu", "Selu", "Shrink", "Sigmoid", "Softplus", "Softsign",
                          "Swish", "Tanh", "ThresholdedRelu")),
    *((MS, op) for op in ("BiasGelu", "FastGelu", "Gelu", "QuickGelu")),
    *((DOMAIN, op) for op in ("BiasGelu", "FusedGelu", "FusedSwish")),
]  # fmt: skip
"""Every activation (ops of onnx, of onnxruntime's contrib domain, fused): native."""

OTHER_PATHS = {("", "PRelu"): NUMPY}
"""Activation-like ops still on numpy (a slope tensor, not a scalar parameter)."""


# -- the tables ----------------------------------------------------------------


def _marks(domain: str, op: str) -> set[str | None]:
    return {float32_path_of(k.builder) for k in registry if (k.domain, k.op_type) == (domain, op)}


def test_every_fused_op_is_listed_with_its_path() -> None:
    fused = {op for domain, op in registry.ops() if domain == DOMAIN}
    assert fused == set(FUSED_PATHS), "a fused op was added or removed: list it in FUSED_PATHS"
    got = {op: _marks(DOMAIN, op) for op in sorted(fused)}
    assert got == {op: {path} for op, path in FUSED_PATHS.items()}


@pytest.mark.parametrize(("domain", "op"), ACTIVATIONS, ids=[f"{d}:{o}" for d, o in ACTIVATIONS])
def test_activation_is_native_at_every_opset(domain: str, op: str) -> None:
    assert _marks(domain, op) == {NATIVE}


def test_other_paths() -> None:
    assert {key: _marks(*key) for key in OTHER_PATHS} == {k: {v} for k, v in OTHER_PATHS.items()}


def test_unknown_path_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown float32 path 'fast'"):
        float32_path("fast")


# -- the marks against what the kernels call ------------------------------------


def _ext_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace every function of ``ortcore_cpu._ext``'s modules with a spy
    that records its name; return the record."""
    calls: list[str] = []

    def spy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return fn(*args, **kwargs)

        return record

    builds = {name for name, _ in BUILDS}
    runnable = {m.__name__ for family in FAMILIES for m in runnable_builds(family)}
    for info in pkgutil.iter_modules(_ext.__path__):
        name = f"{_ext.__name__}.{info.name}"
        if info.name in builds and name not in runnable:
            continue  # a build this CPU cannot run: importing it may crash
        module = importlib.import_module(name)
        for attr in dir(module):
            fn = getattr(module, attr)
            # set_thread_cap is the thread budget's callback, not a kernel's work.
            if attr.startswith("_") or isinstance(fn, type) or attr == "set_thread_cap":
                continue
            if callable(fn):
                monkeypatch.setattr(module, attr, spy(f"{info.name}.{attr}", fn))
    return calls


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _sample(domain: str, op: str) -> tuple[list[np.ndarray], dict[str, Any], int]:
    """Inputs, attributes and opset of a typical float32 node of ``op``."""
    attrs: dict[str, Any] = {}
    if domain == DOMAIN:
        x3 = _f(2, 3, 8)
        samples: dict[str, tuple[list[np.ndarray], dict[str, Any]]] = {
            "FusedConv": ([_f(1, 3, 6, 6), _f(4, 3, 3, 3), _f(4)], {"activation": "Relu"}),
            "FusedConvConcat": (
                [_f(1, 3, 6, 6), _f(4, 3, 3, 3), _f(4)],
                {"activation": "Relu", "channels": 6, "channel_offset": 2},
            ),
            "FusedConvShuffle": (
                [_f(1, 8, 6, 6), _f(8, 2, 1, 1), _f(8)],
                {"activation": "Relu", "group": 4, "shuffle_groups": 4},
            ),
            "FusedConvPool": (
                [_f(1, 3, 9, 9), _f(4, 3, 3, 3), _f(4)],
                {"activation": "Relu", "pool_kernel_shape": [3, 3], "pool_strides": [2, 2]},
            ),
            "FusedConvAdd": (
                [_f(1, 3, 6, 6), _f(4, 3, 3, 3), _f(1, 4, 4, 4), _f(4)],
                {"activation": "Relu"},
            ),
            "FusedBatchNorm": (
                [_f(1, 3, 4, 4), _f(3), _f(3), _f(3), np.abs(_f(3)) + 0.5],
                {"activation": "Relu"},
            ),
            "FusedGemm": ([_f(4, 6), _f(6, 5), _f(5)], {"activation": "Sigmoid"}),
            "FusedMatMul": ([_f(2, 4, 6), _f(6, 5), _f(5)], {"activation": "Tanh"}),
            "FusedGelu": ([_f(3, 8)], {"approximate": "tanh"}),
            "BiasGelu": ([_f(3, 8), _f(8)], {"approximate": "tanh"}),
            "FusedSwish": ([_f(3, 8)], {"alpha": 1.702}),
            "FusedLayerNorm": ([x3, _f(8), _f(8)], {}),
            "FusedRMSNorm": ([x3, _f(8)], {}),
            "SkipLayerNormalization": ([x3, _f(2, 3, 8), _f(8), _f(8), _f(8)], {}),
            "FusedAttention": ([_f(1, 2, 4, 8), _f(1, 2, 8, 4), _f(1, 2, 4, 8)], {}),
            "GrowingConcat": ([_f(1, 3, 4, 4), _f(1, 2, 4, 4)], {"capacity": 9}),
        }
        inputs, attrs = samples[op]
        return inputs, attrs, 17
    if op in ("BiasGelu", "FastGelu"):
        return [_f(3, 8), _f(8)], attrs, 17
    if op == "Gelu" and domain == "":
        return [_f(3, 8)], {"approximate": "tanh"}, 20
    opset = {"Swish": 24, "Mish": 22, "HardSwish": 22}.get(op, 17)
    return [_f(3, 8)], attrs, opset


_ACTIVATION_CALL = f"{activation_module().__name__.rsplit('.', 1)[1]}.activation_f32"
"""The spies' name of the activation kernel the provider calls."""
CHECKED = [(DOMAIN, op) for op in FUSED_PATHS] + [a for a in ACTIVATIONS if a[0] != DOMAIN]
CHECKED += list(OTHER_PATHS)


@pytest.mark.parametrize(("domain", "op"), CHECKED, ids=[f"{d or 'onnx'}:{o}" for d, o in CHECKED])
def test_mark_matches_what_the_kernel_calls(
    monkeypatch: pytest.MonkeyPatch, domain: str, op: str
) -> None:
    register_fused_schemas()
    if op == "PRelu":
        inputs, attrs, opset = [_f(3, 8), _f(8)], {}, 17
    else:
        inputs, attrs, opset = _sample(domain, op)
    calls = _ext_calls(monkeypatch)
    compute = kit.build_node(op, inputs, attrs, opset=opset, domain=domain)
    (path,) = _marks(domain, op)
    compute(*inputs)
    if path == NUMPY:
        assert calls == [], f"{op} is marked {NUMPY} but calls {calls}"
    else:
        assert path in (NATIVE, MIXED)
        assert calls, f"{op} is marked {path} but calls no Cython kernel"
    if (domain, op) in ACTIVATIONS:
        assert _ACTIVATION_CALL in calls or "elementwise.relu" in calls, calls


FUSED_ACTIVATIONS = {
    "": {},
    "Relu": {},
    "Clip": {"activation_params": [-0.5, 0.5]},
    "LeakyRelu": {"activation_params": [0.1]},
    "Sigmoid": {},
    "HardSigmoid": {"activation_params": [0.3, 0.4]},
    "Tanh": {},
}
"""Every activation of ``ep_sdk.fused_ops.ACTIVATIONS`` (and none)."""


@pytest.mark.parametrize("act", sorted(FUSED_ACTIVATIONS))
@pytest.mark.parametrize(
    "op", ["FusedConv", "FusedConvAdd", "FusedBatchNorm", "FusedGemm", "FusedMatMul"]
)
def test_fused_activation_runs_in_one_cython_pass(
    monkeypatch: pytest.MonkeyPatch, op: str, act: str
) -> None:
    register_fused_schemas()
    inputs, _, opset = _sample(DOMAIN, op)
    attrs = {"activation": act, **FUSED_ACTIVATIONS[act]}
    calls = _ext_calls(monkeypatch)
    (got,) = kit.build_node(op, inputs, attrs, opset=opset, domain=DOMAIN)(*inputs)
    # the bias (and residual) pass after im2col's matmul, or the direct
    # convolution, which adds them as it writes the output
    bias_pass = (".bias_add_clamp" if op == "FusedConvAdd" else ".bias_clamp", ".direct_conv2d")
    if op.startswith("FusedConv") and act in ("", "Relu", "Clip"):
        # a clamp: done in the pass that adds the Conv's bias (and residual)
        assert calls.count(_ACTIVATION_CALL) == 0, calls
        assert sum(c.endswith(bias_pass) for c in calls) == 1, calls
    elif op == "FusedBatchNorm" and act in ("", "Relu", "Clip"):
        # a clamp: done in the normalization's pass
        assert calls == ["elementwise.channel_affine"], calls
    else:
        assert calls.count(_ACTIVATION_CALL) == 1, calls
    if op == "FusedConvAdd":  # the residual is added in the bias's pass either way
        assert sum(c.endswith(bias_pass) for c in calls) == 1, calls
    (plain,) = kit.build_node(op, inputs, {}, opset=opset, domain=DOMAIN)(*inputs)
    np.testing.assert_allclose(got, _numpy_activation(act, plain.astype(np.float64)),
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def _numpy_activation(act: str, y: np.ndarray) -> np.ndarray:
    p = FUSED_ACTIVATIONS[act].get("activation_params", [])
    fns: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "": lambda v: v,
        "Relu": lambda v: np.maximum(v, 0),
        "Clip": lambda v: np.clip(v, p[0], p[1]) if p else v,
        "LeakyRelu": lambda v: np.where(v < 0, p[0] * v, v),
        "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "HardSigmoid": lambda v: np.clip(p[0] * v + p[1], 0, 1),
        "Tanh": np.tanh,
    }
    return np.asarray(fns[act](y))


# -- numerics --------------------------------------------------------------------

BUILD_MODULES = runnable_builds()
BUILD_IDS = [m.__name__.rsplit(".", 1)[1] for m in BUILD_MODULES]


@pytest.fixture(params=BUILD_MODULES, ids=BUILD_IDS)
def build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each build of the activation kernel this CPU runs, as the kernels' own."""
    monkeypatch.setattr(unary, "native", request.param)
    return request.param


def test_the_newest_runnable_build_is_used() -> None:
    assert unary.native is BUILD_MODULES[-1] is activation_module()
    assert BUILD_MODULES[0] is native  # the portable build runs everywhere
    assert native.cpu_level() in (0, 1, 2)


def test_isa_cap_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ORTCORE_CPU_ISA", raising=False)
    newest = activation_module()
    monkeypatch.setenv("ORTCORE_CPU_ISA", "baseline")
    assert activation_module() is native
    monkeypatch.setenv("ORTCORE_CPU_ISA", "sse9")
    assert activation_module() is newest
    assert "ORTCORE_CPU_ISA='sse9' is none of baseline, avx2, avx512" in caplog.text


_ERF = np.vectorize(math.erf, otypes=[np.float64])
_C = math.sqrt(2 / math.pi)


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1 + _ERF(x / math.sqrt(2))))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1 + np.tanh(_C * (x + 0.044715 * x**3))))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


def _expm1_neg(x: np.ndarray) -> np.ndarray:
    return np.expm1(np.minimum(x, 0))


SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875

# (domain, op, attrs, opset, float64 formula)
CASES: list[tuple[str, str, dict[str, Any], int, Callable[[np.ndarray], np.ndarray]]] = [
    ("", "Gelu", {}, 20, _gelu),
    ("", "Gelu", {"approximate": "tanh"}, 20, _gelu_tanh),
    ("", "Sigmoid", {}, 17, lambda x: 1 / (1 + np.exp(-x))),
    ("", "Tanh", {}, 17, np.tanh),
    ("", "Relu", {}, 17, lambda x: np.where(x < 0, 0, x)),
    ("", "LeakyRelu", {"alpha": 0.1}, 17, lambda x: np.where(x >= 0, x, 0.1 * x)),
    ("", "Elu", {"alpha": 0.7}, 17, lambda x: np.where(x >= 0, x, 0.7 * _expm1_neg(x))),
    ("", "Selu", {}, 17, lambda x: SELU_G * np.where(x > 0, x, SELU_A * _expm1_neg(x))),
    ("", "Celu", {"alpha": 2.0}, 17, lambda x: np.where(x >= 0, x, 2.0 * _expm1_neg(x / 2.0))),
    ("", "Softplus", {}, 17, _softplus),
    ("", "Softsign", {}, 17, lambda x: x / (1 + np.abs(x))),
    ("", "HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 17, lambda x: np.clip(0.3 * x + 0.4, 0, 1)),
    ("", "HardSwish", {}, 22, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    ("", "Mish", {}, 22, lambda x: x * np.tanh(_softplus(x))),
    ("", "Swish", {}, 24, lambda x: x * (1 / (1 + np.exp(-x)))),
    ("", "Swish", {"alpha": 1.702}, 24, lambda x: x * (1 / (1 + np.exp(-1.702 * x)))),
    ("", "ThresholdedRelu", {"alpha": 0.5}, 17, lambda x: np.where(x > 0.5, x, 0)),
    ("", "Shrink", {"lambd": 0.5, "bias": 0.25}, 17,
     lambda x: np.where(x < -0.5, x + 0.25, np.where(x > 0.5, x - 0.25, 0))),
    (MS, "Gelu", {}, 1, _gelu),
    (MS, "FastGelu", {}, 1, _gelu_tanh),
    (MS, "QuickGelu", {}, 1, lambda x: x * (1 / (1 + np.exp(-1.702 * x)))),
    (DOMAIN, "FusedGelu", {"approximate": "tanh"}, 1, _gelu_tanh),
    (DOMAIN, "FusedSwish", {"alpha": 1.702}, 1, lambda x: x * (1 / (1 + np.exp(-1.702 * x)))),
]  # fmt: skip

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 20, -20, 100, -100, 1e-30, -1e-30, 3e38, -3e38,
           1e-45, 88.5, -88.5, 104, -104, 9, -9, 17, -17, 0.5, -0.5]  # fmt: skip


def _inputs(shape: tuple[int, ...]) -> np.ndarray:
    """Special values first, then values of every magnitude up to 30."""
    n = math.prod(shape)
    x = RNG.standard_normal(n) * np.exp(RNG.uniform(-8, 3.4, n))
    k = min(n, len(SPECIAL))
    x[:k] = SPECIAL[:k]
    return x.astype(np.float32).reshape(shape)


def _check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Within float32 tolerance of the float64 formula: NaN where it is NaN,
    infinities equal, and a zero's sign where the formula's is defined."""
    assert got.dtype == np.float32 and got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=what)
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), what


def _case_id(case: tuple[Any, ...]) -> str:
    domain, op, attrs = case[:3]
    return f"{domain or 'onnx'}:{op}" + "".join(f"-{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
@pytest.mark.parametrize("shape", [(4, 7), (3, 8201)], ids=["small", "past-a-chunk"])
def test_activation_against_float64_formula(
    build: Any, case: tuple[Any, ...], shape: tuple[int, ...]
) -> None:
    register_fused_schemas()
    domain, op, attrs, opset, formula = case
    x = _inputs(shape)
    with np.errstate(all="ignore"):
        want = formula(x.astype(np.float64))
    compute = kit.build_node(op, [x], attrs, opset=opset, domain=domain)
    strided = np.zeros((shape[0], 2 * shape[1]), np.float32)
    strided[:, ::2] = x
    for feed in (x, strided[:, ::2], np.asfortranarray(x)):
        before = feed.copy()
        (got,) = compute(feed)
        np.testing.assert_array_equal(feed, before)  # the input is untouched
        layout = "C" if feed.flags.c_contiguous else "strided"
        _check(got, want, f"{op} {attrs} on a {layout} input")


BIAS_CASES = [
    (DOMAIN, "BiasGelu", {"approximate": "tanh"}, _gelu_tanh),
    (DOMAIN, "BiasGelu", {}, _gelu),
    (MS, "FastGelu", {}, _gelu_tanh),
    (MS, "BiasGelu", {}, _gelu),
]


@pytest.mark.parametrize("case", BIAS_CASES, ids=[_case_id(c) for c in BIAS_CASES])
@pytest.mark.parametrize("shape", [(2, 5, 7), (6, 3072), (1, 1)])
def test_bias_activation_against_float64_formula(
    build: Any, case: tuple[Any, ...], shape: tuple[int, ...]
) -> None:
    register_fused_schemas()
    domain, op, attrs, formula = case
    x, bias = _inputs(shape), _f(shape[-1])
    with np.errstate(all="ignore"):
        want = formula(x.astype(np.float64) + bias.astype(np.float32))
    compute = kit.build_node(op, [x, bias], attrs, opset=17, domain=domain)
    for feed in (x, np.asfortranarray(x)):
        (got,) = compute(feed, bias)
        _check(got, want, f"{op} {attrs}")
    # A bias not along the last axis: numpy adds it, Cython activates the sum.
    column = _f(*shape[:-1], 1)
    (got,) = kit.build_node(op, [x, column], attrs, opset=17, domain=domain)(x, column)
    with np.errstate(all="ignore"):
        _check(got, formula(x.astype(np.float64) + column), f"{op} {attrs} column bias")


def test_fast_gelu_without_bias() -> None:
    x = _inputs((3, 8))
    (got,) = kit.build_node("FastGelu", [x], domain=MS)(x)
    with np.errstate(all="ignore"):
        _check(got, _gelu_tanh(x.astype(np.float64)), "FastGelu")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_dtypes_stay_on_numpy(dtype: Any) -> None:
    x = (RNG.standard_normal((3, 8)) * 3).astype(dtype)
    bias = RNG.standard_normal(8).astype(dtype)
    tol = {"rtol": 1e-12, "atol": 0} if dtype == np.float64 else {"rtol": 3e-3, "atol": 1e-3}
    for op, attrs, domain, ins, formula in [
        ("Gelu", {"approximate": "tanh"}, "", [x], lambda: _gelu_tanh(x.astype(np.float64))),
        ("Mish", {}, "", [x], lambda: x * np.tanh(_softplus(x.astype(np.float64)))),
        ("FastGelu", {}, MS, [x, bias], lambda: _gelu_tanh(x.astype(np.float64) + bias)),
    ]:
        opset = {"Gelu": 20, "Mish": 22}.get(op, 17)
        (got,) = kit.build_node(op, ins, attrs, opset=opset, domain=domain)(*ins)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, formula(), err_msg=op, **tol)


# -- the Cython kernel itself ------------------------------------------------------


def _all_ops() -> Iterator[tuple[int, float, float]]:
    for op in native.Activation:
        alpha, beta = {
            native.Activation.CLIP: (-0.5, 2.0),
            native.Activation.HARD_SIGMOID: (0.2, 0.5),
            native.Activation.SELU: (SELU_A, SELU_G),
            native.Activation.SHRINK: (0.5, 0.1),
        }.get(op, (0.8, 0.0))
        yield op, alpha, beta


@pytest.mark.parametrize("op", list(_all_ops()), ids=[a[0].name for a in _all_ops()])
def test_kernel_same_on_any_thread_count_and_in_place(
    build: Any, op: tuple[int, float, float]
) -> None:
    native = build
    code, alpha, beta = op
    x = _inputs((5, 8191)).reshape(-1)  # chunks of 8192 cut through rows and the bias
    bias = _f(8191)
    one = np.empty_like(x)
    native.activation_f32(code, x, bias, one, alpha, beta, 1)
    four = np.empty_like(x)
    native.activation_f32(code, x, bias, four, alpha, beta, 4)
    np.testing.assert_array_equal(one, four)
    inplace = x.copy()
    native.activation_f32(code, inplace, bias, inplace, alpha, beta, 3)
    np.testing.assert_array_equal(inplace, one)
    no_bias = np.empty_like(x)
    native.activation_f32(code, x + np.tile(bias, 5), np.zeros(0, np.float32), no_bias,
                          alpha, beta, 2)  # fmt: skip
    np.testing.assert_array_equal(no_bias, one)


def test_kernel_refuses_bad_arguments(build: Any) -> None:
    native = build
    x, out = np.zeros(6, np.float32), np.zeros(6, np.float32)
    none = np.zeros(0, np.float32)
    with pytest.raises(ValueError, match="unknown op 99"):
        native.activation_f32(99, x, none, out, 0, 0, 1)
    with pytest.raises(ValueError, match="lengths differ"):
        native.activation_f32(native.Activation.RELU, x, none, out[:5], 0, 0, 1)
    with pytest.raises(ValueError, match="bias length 4 does not divide 6"):
        native.activation_f32(native.Activation.RELU, x, np.zeros(4, np.float32), out, 0, 0, 1)
    native.activation_f32(native.Activation.TANH, x[:0], none, out[:0], 0, 0, 1)  # empty: fine


@pytest.mark.parametrize(
    ("code", "reference", "ulps"),
    [(native.Activation.SIGMOID, lambda v: 1 / (1 + np.exp(-v)), 4),
     (native.Activation.SOFTPLUS, _softplus, 4),
     (native.Activation.ELU, lambda v: np.where(v >= 0, v, _expm1_neg(v)), 4),
     (native.Activation.SWISH, lambda v: v / (1 + np.exp(-v)), 4),
     (native.Activation.MISH, lambda v: v * np.tanh(_softplus(v)), 4),
     (native.Activation.TANH, np.tanh, 6)],
    ids=["sigmoid", "softplus", "elu", "swish", "mish", "tanh"],
)  # fmt: skip
def test_transcendentals_within_a_few_ulp(
    build: Any, code: int, reference: Callable[[np.ndarray], np.ndarray], ulps: int
) -> None:
    """exp, expm1 and log1p within 4 ULP of the float32 rounding of the
    float64 result (so Sigmoid, Softplus, Elu, Swish, Mish); Tanh's rational
    approximation within 6. Up to |x| = 80: past it exp(|x|) leaves float32's
    normal range, and results built from it lose digits as float32 does."""
    native = build
    parts = [np.linspace(-80, 80, 100001), np.linspace(-3, 3, 100001)]
    parts += [np.geomspace(1e-30, 10, 20000), -np.geomspace(1e-30, 10, 20000)]
    x = np.concatenate(parts).astype(np.float32)
    got = np.empty_like(x)
    native.activation_f32(code, x, np.zeros(0, np.float32), got, 1.0, 0.0, 1)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64))
    normal = np.abs(want) >= np.finfo(np.float32).tiny
    ulp = np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]).astype(np.float32))
    assert ulp.max() <= ulps, (float(ulp.max()), x[normal][np.argmax(ulp)])


def test_contrib_ops_match_onnxruntime() -> None:
    pytest.importorskip("onnxruntime")
    x, bias = _inputs((4, 16)), _f(16)
    finite = np.where(np.isfinite(x), x, 0).astype(np.float32)
    for op, ins in [("FastGelu", [finite, bias]), ("FastGelu", [finite]), ("QuickGelu", [finite]),
                    ("Gelu", [finite]), ("BiasGelu", [finite, bias])]:  # fmt: skip
        kit.check_node(op, ins, domain=MS, oracle="onnxruntime", rtol=1e-5, atol=1e-6)
