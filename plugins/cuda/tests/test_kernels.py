"""Every kernel's own source, run under the CPU emulation of CUDA, against numpy;
and every kernel compiled by nvcc for sm_80 and sm_90.

These stand in for GPU runs on machines without a GPU: what runs is the
kernel code the GPU would run (grid, blocks, threads, shared memory,
barriers and warp shuffles emulated), not a re-implementation of it.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ortcore_cuda.emulator import EmulationError, Emulator, compiler
from ortcore_cuda.kernels import all_kernels
from ortcore_cuda.kernels.elementwise import BINARY, INTS, UNARY, broadcast_args
from ortcore_cuda.kernels.rows import row_threads
from ortcore_cuda.kernels.spec import translation_unit

_erf = np.vectorize(math.erf, otypes=[np.float64])

NUMPY_UNARY = {
    "Relu": lambda v: np.where(v < 0, 0, v),
    "Sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "Tanh": np.tanh,
    "Exp": np.exp,
    "Log": np.log,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal,
    "Erf": _erf,
    "Sin": np.sin,
    "Cos": np.cos,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Softplus": lambda v: np.log1p(np.exp(v)),
    "Sign": np.sign,
    "Round": np.round,  # half to even
    "HardSwish": lambda v: v * np.clip(v / 6 + 0.5, 0, 1),
    "Mish": lambda v: v * np.tanh(np.log1p(np.exp(v))),
    "Softsign": lambda v: v / (1 + np.abs(v)),
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Gelu": lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))),
    "GeluTanh": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
}
NUMPY_BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Pow": np.power,
    "Max": np.maximum,
    "Min": np.minimum,
    "PRelu": lambda u, v: np.where(u < 0, u * v, u),
    "Mod": np.mod,
    "FMod": np.fmod,
}
NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64}
TOL = {
    "f32": dict(rtol=2e-6, atol=1e-6),
    "f16": dict(rtol=2e-3, atol=2e-3),
    "f64": dict(rtol=1e-13, atol=1e-14),  # computed in double: far beyond float's 1e-7
}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(all_kernels(), tmp_path_factory.mktemp("emu"))


def test_every_op_has_a_numpy_reference() -> None:
    assert set(NUMPY_UNARY) == set(UNARY) and set(NUMPY_BINARY) == set(BINARY)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(emu: Emulator, op: str, dtype: str) -> None:
    rng = np.random.default_rng(len(op))
    x = (rng.standard_normal(777) * 2).astype(NP[dtype])
    if op in ("Log", "Sqrt"):
        x = np.abs(x) + NP[dtype](0.1)
    if op in ("Asin", "Acos", "Atanh"):
        x = np.tanh(x).astype(NP[dtype]) * NP[dtype](0.99)
    if op == "Acosh":
        x = np.abs(x) + NP[dtype](1)
    if op == "Round":
        x[3:9] = [0.5, 1.5, 2.5, -0.5, -1.5, 2.4999]
    x[:3] = [0, -0.0, np.nan]
    y = np.full_like(x, 7)
    # 2 blocks of 128 threads for 777 elements: the grid-stride loop covers the rest
    emu.launch(f"unary_{op.lower()}_{dtype}", 2, 128, x, y, x.size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want = NUMPY_UNARY[op](x.astype(np.float64)).astype(NP[dtype])
    np.testing.assert_allclose(y[3:], want[3:], **TOL[dtype])
    assert np.isnan(y[2])
    np.testing.assert_array_equal(y[:2], want[:2])


BROADCASTS = [
    ((7,), (7,)),
    ((3, 1, 5), (4, 1)),
    ((2, 3, 4), ()),
    ((1,), (2, 3, 1, 2)),
    ((2, 1, 3, 1, 2, 1), (1, 2, 1, 3, 1, 2)),
    ((), ()),
]


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary_broadcasting(emu: Emulator, op: str, dtype: str, shapes: Any) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shapes[0]).astype(NP[dtype])
    b = rng.standard_normal(shapes[1]).astype(NP[dtype])
    if op == "Pow":
        a = np.abs(a) + NP[dtype](0.5)
    out, rank, s = broadcast_args(a.shape, b.shape)
    y = np.empty(out, NP[dtype])
    emu.launch(
        f"binary_{op.lower()}_{dtype}_r{rank}",
        1,
        32,
        np.ascontiguousarray(a),
        np.ascontiguousarray(b),
        y,
        y.size,
        s,
    )
    want = NUMPY_BINARY[op](a.astype(np.float64), b.astype(np.float64)).astype(NP[dtype])
    np.testing.assert_allclose(y, want, **TOL[dtype])


def test_max_and_min_propagate_nan_as_numpy(emu: Emulator) -> None:
    a = np.array([np.nan, 1, 2], np.float32)
    b = np.array([1, np.nan, 3], np.float32)
    for op, ref in (("max", np.maximum), ("min", np.minimum)):
        out, rank, s = broadcast_args(a.shape, b.shape)
        y = np.empty(out, np.float32)
        emu.launch(f"binary_{op}_f32_r{rank}", 1, 32, a, b, y, y.size, s)
        np.testing.assert_array_equal(y, ref(a, b))


def test_broadcast_args_refuse_what_numpy_refuses() -> None:
    with pytest.raises(ValueError):
        broadcast_args((2, 3), (4,))
    with pytest.raises(ValueError, match="rank 7"):
        broadcast_args((1,) * 7, (1,))


ROWS = [(1, 1), (3, 5), (4, 32), (2, 256), (3, 1000), (70, 7)]


def _launch_rows(emu: Emulator, name: str, x: np.ndarray, y: np.ndarray, *extra: Any) -> None:
    rows, cols = x.shape
    emu.launch(name, rows, row_threads(cols), x, *extra, y, rows, cols)


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", ROWS, ids=str)
def test_softmax_rows(emu: Emulator, shape: tuple[int, int], log: bool, dtype: str) -> None:
    x = (np.random.default_rng(shape[1]).standard_normal(shape) * 4).astype(NP[dtype])
    y = np.empty_like(x)
    rows, cols = shape
    emu.launch(f"{'log' if log else ''}softmax_{dtype}", rows, row_threads(cols), x, y, rows, cols)
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    want = (
        z - np.log(np.exp(z).sum(1, keepdims=True))
        if log
        else np.exp(z) / np.exp(z).sum(1, keepdims=True)
    )
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize("shape", ROWS, ids=str)
def test_layernorm_rows(emu: Emulator, shape: tuple[int, int], dtype: str) -> None:
    rng = np.random.default_rng(shape[0])
    x = (rng.standard_normal(shape) + 3).astype(NP[dtype])
    scale = rng.standard_normal(shape[1]).astype(NP[dtype])
    bias = rng.standard_normal(shape[1]).astype(NP[dtype])
    y = np.empty_like(x)
    rows, cols = shape
    emu.launch(f"layernorm_{dtype}", rows, row_threads(cols), x, scale, bias, y, rows, cols, 1e-5)
    x64 = x.astype(np.float64)
    mean = x64.mean(1, keepdims=True)
    want = (x64 - mean) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * scale + bias
    np.testing.assert_allclose(
        y, want.astype(NP[dtype]), **{k: v * 10 for k, v in TOL[dtype].items()}
    )


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax"])
@pytest.mark.parametrize("shape", ROWS, ids=str)
def test_reduce_last_axis(emu: Emulator, shape: tuple[int, int], op: str) -> None:
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    y = np.empty(shape[0], np.float32)
    rows, cols = shape
    emu.launch(f"{op.lower()}_last_f32", rows, row_threads(cols), x, y, rows, cols)
    ref = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max}[op]
    np.testing.assert_allclose(y, ref(x.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


def test_a_block_of_one_warp_and_of_several(emu: Emulator) -> None:
    """The block reduction is right whatever the block size (a power of two
    from 32): the warp-shuffle path with one warp, and across 8."""
    x = np.random.default_rng(1).standard_normal((2, 300)).astype(np.float32)
    scale, bias = np.ones(300, np.float32), np.zeros(300, np.float32)
    for threads in (32, 64, 256):
        y = np.empty_like(x)
        emu.launch("layernorm_f32", 2, threads, x, scale, bias, y, 2, 300, 0.0)
        want = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_bad_launches_are_refused(emu: Emulator) -> None:
    x = np.zeros(4, np.float32)
    with pytest.raises(EmulationError, match="no kernel"):
        emu.launch("nope", 1, 1)
    with pytest.raises(EmulationError, match="takes 3 arguments"):
        emu.launch("unary_relu_f32", 1, 32, x)
    with pytest.raises(EmulationError, match="C-contiguous"):
        emu.launch("unary_relu_f32", 1, 32, x[::2], x, 2)
    with pytest.raises(EmulationError, match="refused the launch"):
        emu.launch("unary_relu_f32", 1, 2048, x, x, 4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_compiles_with_nvcc(arch: str, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on this machine")
    source = tmp_path / "kernels.cu"
    source.write_text(translation_unit(all_kernels()))
    cubin = tmp_path / f"kernels.{arch}.cubin"
    done = subprocess.run(
        [nvcc, "--cubin", f"-arch={arch}", "-o", str(cubin), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = cubin.read_bytes()
    for kernel in all_kernels():  # extern "C": pycuda finds them by these names
        assert kernel.name.encode() + b"\0" in data


PERMS = [
    ((5,), (0,)),
    ((2, 3), (1, 0)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 1, 3, 2, 2, 3), (5, 3, 1, 0, 4, 2)),
]


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("case", PERMS, ids=str)
def test_transpose_moves_elements_of_any_type(emu: Emulator, case: Any, dtype: Any) -> None:
    from ortcore_cuda.kernels.elementwise import permute_args

    shape, perm = case
    x = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
    out, s = permute_args(shape, perm)
    y = np.empty(out, dtype)
    emu.launch(f"transpose_b{x.itemsize}_r{len(shape)}", 1, 64, x, y, y.size, s)
    np.testing.assert_array_equal(y, x.transpose(perm))


def test_cast_rounds_as_the_gpu(emu: Emulator) -> None:
    x = np.array([1.0, 1 / 3, 65504, 65520, 1e-8, -2.5e-5, np.inf, np.nan], np.float32)
    h = np.empty(x.shape, np.float16)
    emu.launch("cast_f32_f16", 1, 32, x, h, x.size)
    np.testing.assert_array_equal(h, x.astype(np.float16))  # round to nearest even, as cvt.rn
    back = np.empty(x.shape, np.float32)
    emu.launch("cast_f16_f32", 1, 32, h, back, x.size)
    np.testing.assert_array_equal(back, h.astype(np.float32))


CASTS = ["f32", "f16", "f64", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8", "b"]


@pytest.mark.parametrize("src", CASTS)
@pytest.mark.parametrize("dst", CASTS)
def test_cast_between_every_pair(emu: Emulator, src: str, dst: str) -> None:
    from ortcore_cuda.kernels.elementwise import CAST_TYPES

    if src == dst:
        return
    values = np.array([0, 1, -2, 3.75, -0.5, 100, 7, -9.25, 120, 0.125])
    a = CAST_TYPES[src][1]
    if a.kind == "u" or CAST_TYPES[dst][1].kind == "u":
        values = np.abs(values)  # in range for both: C leaves the rest undefined
    x = (values != 0) if a == np.bool_ else values.astype(a)
    y = np.empty(x.shape, CAST_TYPES[dst][1])
    emu.launch(f"cast_{src}_{dst}", 1, 32, np.ascontiguousarray(x), y, x.size)
    np.testing.assert_array_equal(y, x.astype(CAST_TYPES[dst][1]))


def test_not_and_trilu(emu: Emulator) -> None:
    b = np.array([True, False, True])
    y = np.empty_like(b)
    emu.launch("logical_not", 1, 32, b, y, b.size)
    np.testing.assert_array_equal(y, ~b)
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    for upper, k in ((1, 0), (0, 0), (1, 2), (0, -1)):
        out = np.empty_like(x)
        emu.launch("trilu_b4", 1, 32, x, out, x.size, 3, 5, k, upper)
        want = np.triu(x, k) if upper else np.tril(x, k)
        np.testing.assert_array_equal(out, want)


NUMPY_PARAM = {
    "LeakyRelu": lambda v, a, b: np.where(v < 0, a * v, v),
    "Elu": lambda v, a, b: np.where(v < 0, a * (np.exp(v) - 1), v),
    "Selu": lambda v, a, b: np.where(v <= 0, b * (a * np.exp(v) - a), b * v),
    "Celu": lambda v, a, b: np.maximum(0, v) + np.minimum(0, a * (np.exp(v / a) - 1)),
    "HardSigmoid": lambda v, a, b: np.clip(a * v + b, 0, 1),
    "ThresholdedRelu": lambda v, a, b: np.where(v > a, v, 0),
    "Shrink": lambda v, a, b: np.where(v < -b, v + a, np.where(v > b, v - a, 0)),
    "Swish": lambda v, a, b: v / (1 + np.exp(-a * v)),
}


@pytest.mark.parametrize("op", sorted(NUMPY_PARAM))
def test_unary_with_attributes(emu: Emulator, op: str) -> None:
    from ortcore_cuda.kernels.elementwise import PARAM_UNARY

    assert set(PARAM_UNARY) == set(NUMPY_PARAM)
    x = np.random.default_rng(2).standard_normal(300).astype(np.float32) * 3
    y = np.empty_like(x)
    emu.launch(f"unary_{op.lower()}_f32", 2, 64, x, y, x.size, 0.7, 1.3)
    want = NUMPY_PARAM[op](x.astype(np.float64), 0.7, 1.3)
    np.testing.assert_allclose(y, want.astype(np.float32), rtol=2e-6, atol=1e-6)


INT_NUMPY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": lambda u, v: np.where(v == 0, 0, np.trunc(u / np.where(v == 0, 1, v))),
    "Max": np.maximum,
    "Min": np.minimum,
    "Mod": lambda u, v: np.where(v == 0, 0, np.mod(u, np.where(v == 0, 1, v))),
    "FMod": lambda u, v: np.where(v == 0, 0, np.fmod(u, np.where(v == 0, 1, v))),
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
}


@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"])
@pytest.mark.parametrize("op", sorted(INT_NUMPY))
def test_integer_binary(emu: Emulator, op: str, dtype: str) -> None:
    t = INTS[dtype][1]
    rng = np.random.default_rng(3)
    low = 0 if t.kind == "u" else -20  # unsigned: no wrapped negatives (numpy's Div goes by float)
    a = rng.integers(low, 20, (4, 1, 5)).astype(t)
    b = rng.integers(low // 3, 6, (3, 1)).astype(t)
    out, rank, s = broadcast_args(a.shape, b.shape)
    compare = op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
    y = np.empty(out, np.bool_ if compare else t)
    emu.launch(f"ibinary_{op.lower()}_{dtype}_r{rank}", 1, 64, a, b, y, y.size, s)
    np.testing.assert_array_equal(y, INT_NUMPY[op](a, b).astype(y.dtype))


INT_UNARY_NUMPY = {
    "Abs": np.abs,
    "Neg": np.negative,
    "Sign": np.sign,
    "Relu": lambda u: np.maximum(u, 0),
    "BitwiseNot": np.invert,
}


@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64", "u8", "u64"])
@pytest.mark.parametrize("op", sorted(INT_UNARY_NUMPY))
def test_integer_unary(emu: Emulator, op: str, dtype: str) -> None:
    t = INTS[dtype][1]
    info = np.iinfo(t)
    values = [info.min, info.min + 1, -3, -1, 0, 1, 7, info.max]
    x = np.array([v for v in values if info.min <= v <= info.max], t)  # Abs, Neg of min wrap
    y = np.empty_like(x)
    emu.launch(f"iunary_{op.lower()}_{dtype}", 1, 32, x, y, x.size)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y, INT_UNARY_NUMPY[op](x).astype(t))


@pytest.mark.parametrize("dtype", ["i8", "i32", "u8", "u64"])
@pytest.mark.parametrize("direction", ["Left", "Right"])
def test_bit_shifts_by_any_amount(emu: Emulator, dtype: str, direction: str) -> None:
    t = INTS[dtype][1]
    bits = 8 * t.itemsize
    x = np.array([1, 5, 100, -1, -128, 77], np.int64).astype(t)[:, None]
    v = np.array([-1, 0, 1, 3, bits - 1, bits, bits + 2], np.int64).astype(t)[None, :]
    out, rank, s = broadcast_args(x.shape, v.shape)
    y = np.empty(out, t)
    emu.launch(f"ibinary_bitshift{direction.lower()}_{dtype}_r{rank}", 1, 64, x, v, y, y.size, s)
    shift = v.astype(np.int64)
    inside = (shift >= 0) & (shift < bits)
    safe = np.where(inside, shift, 0)
    x, safe, inside = np.broadcast_arrays(x, safe, inside)
    if direction == "Left":
        u = x.view(f"u{t.itemsize}")
        want = (u << safe.astype(u.dtype)).view(t)
        want[~inside] = 0
    else:
        want = x >> safe.astype(t)
        want[~inside] = np.where(x < 0, np.array(-1).astype(t), np.zeros((), t))[~inside]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_bool_binary(emu: Emulator, op: str) -> None:
    a = np.array([[True, False, True, False]])
    b = np.array([[True], [False]])
    out, rank, s = broadcast_args(a.shape, b.shape)
    y = np.empty(out, np.bool_)
    emu.launch(f"ibinary_{op.lower()}_b_r{rank}", 1, 32, a, b, y, y.size, s)
    ref = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[op]
    np.testing.assert_array_equal(y, ref(a, b))


MORE_REDUCE = {
    "ReduceMin": lambda x: x.min(1),
    "ReduceProd": lambda x: x.prod(1),
    "ReduceL1": lambda x: np.abs(x).sum(1),
    "ReduceL2": lambda x: np.sqrt((x * x).sum(1)),
    "ReduceSumSquare": lambda x: (x * x).sum(1),
    "ReduceLogSum": lambda x: np.log(x.sum(1)),
    "ReduceLogSumExp": lambda x: np.log(np.exp(x).sum(1)),
}


@pytest.mark.parametrize("op", sorted(MORE_REDUCE))
@pytest.mark.parametrize("shape", [(3, 5), (2, 300), (1, 1)], ids=str)
def test_more_reductions(emu: Emulator, op: str, shape: tuple[int, int]) -> None:
    x = np.random.default_rng(4).uniform(0.5, 1.5, shape).astype(np.float32)
    y = np.empty(shape[0], np.float32)
    emu.launch(f"{op.lower()}_last_f32", shape[0], row_threads(shape[1]), x, y, *shape)
    np.testing.assert_allclose(y, MORE_REDUCE[op](x.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reductions_break_ties_as_asked(emu: Emulator, op: str, last: int) -> None:
    x = np.random.default_rng(5).integers(0, 4, (6, 300)).astype(np.float32)  # many ties
    x[5, 7] = np.nan
    y = np.empty(6, np.int64)
    emu.launch(f"{op.lower()}_last_f32", 6, 256, x, y, 6, 300, last)
    ref = np.argmax if op == "ArgMax" else np.argmin
    want = ref(x, 1) if not last else x.shape[1] - 1 - ref(x[:, ::-1], 1)
    np.testing.assert_array_equal(y[:5], want[:5])
    assert y[5] == 7  # NaN wins, as numpy


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad_in_every_mode_with_cropping(emu: Emulator, mode: str) -> None:
    from ortcore_cuda.kernels.elementwise import pad_args

    x = np.arange(4 * 6, dtype=np.int16).reshape(4, 6)
    dims, kept, args = pad_args(x.shape, [2, -1], [-1, 3])  # crop, then pad what is kept
    assert kept == 3 * 5
    kw = {"constant_values": -7} if mode == "constant" else {}
    want = np.pad(x[:-1, 1:], [(2, 0), (0, 3)], mode=mode, **kw)  # type: ignore[call-overload]
    assert dims == list(want.shape)
    y = np.empty(want.shape, np.int16)
    bits = int.from_bytes(np.int16(-7).tobytes(), "little")
    emu.launch(f"pad_{mode}_b2", 2, 32, x, y, y.size, args, bits)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(("base", "exponent"), [("f32", "i64"), ("i32", "f32"), ("i64", "u8")])
def test_pow_of_mixed_types(emu: Emulator, base: str, exponent: str) -> None:
    from ortcore_cuda.kernels.elementwise import CAST_TYPES, MAX_RANK

    a = np.array([[1, 2, 3], [4, 5, 6]]).astype(CAST_TYPES[base][1])
    e = np.array([0, 1, 3]).astype(CAST_TYPES[exponent][1])
    _, _, s = broadcast_args((1,) * (MAX_RANK - 2) + a.shape, (1,) * (MAX_RANK - 1) + e.shape)
    y = np.empty_like(a)
    emu.launch(f"pow_{base}_{exponent}", 1, 32, a, e, y, y.size, s)
    want = np.power(a.astype(np.float64), e.astype(np.float64)).astype(a.dtype)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", ["i8", "u8", "i64", "u64"])
def test_integer_clip(emu: Emulator, dtype: str) -> None:
    t = INTS[dtype][1]
    info = np.iinfo(t)
    x = np.array([info.min, 0, 3, 9, info.max], t)
    y = np.empty_like(x)
    lo, hi = (int.from_bytes(np.array([v], t).tobytes(), "little") for v in (2, 8))
    emu.launch(f"iclip_{dtype}", 1, 32, x, y, x.size, lo, hi)
    np.testing.assert_array_equal(y, np.clip(x, t.type(2), t.type(8)))
