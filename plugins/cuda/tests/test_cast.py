"""Cast to and from bfloat16, the float8 and float4 types and the 4- and 2-bit
integers (:mod:`ortcore_cuda.kernels.cast`): every kernel under the CPU
emulation against an exact reference (:mod:`conformance.cast_reference`: what
``ml_dtypes`` 0.7 and ``onnx.numpy_helper`` give) over every bit pattern
of the small source types and a spread of floats (ties of every target,
subnormals, infinities, NaN, out of range), saturating or not, in every
float8e8m0 rounding mode; then the provider end to end on the emulation."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conformance.cast_reference import cast_exact
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels.cast import EXOTIC, all_kernels, cast_suffixes, castx_kernel

TYPES = cast_suffixes()
NATIVE = {s for s, (_, d) in TYPES.items() if s not in EXOTIC}
FLOAT8 = {"e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"}
BITS = {"i4": 4, "u4": 4, "f4e2m1": 4, "i2": 2, "u2": 2}
PAIRS = [(s, d) for s in TYPES for d in TYPES if s != d and (s in EXOTIC or d in EXOTIC)]


@pytest.fixture(scope="module")
def emu() -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(all_kernels())


def _dtype(s: str) -> np.dtype:
    return TYPES[s][1]


def _float_spread() -> np.ndarray:
    """float64 values: the midpoints of every small float type's neighbours (and
    just off them), powers of two across every range, random magnitudes, specials."""
    parts: list[np.ndarray] = []
    for s in ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "f4e2m1", "bf16"):
        n = 1 << (16 if s == "bf16" else BITS.get(s, 8))
        bits = np.arange(n, dtype=np.uint16 if s == "bf16" else np.uint8)
        if s == "bf16":
            bits = bits[::97]
        v = np.unique(bits.view(_dtype(s)).astype(np.float64))
        v = v[np.isfinite(v)]
        mid = (v[1:] + v[:-1]) / 2
        top = v[-1] + (v[-1] - v[-2]) / 2  # the tie just above the largest finite value
        mid = np.concatenate([mid, [top, -top, 2 * top]])
        parts += [mid, mid * (1 + 2.0**-20), mid * (1 - 2.0**-20), mid * (1 + 2.0**-45), v]
    p = 2.0 ** np.arange(-150, 131)
    parts += [p, p * 1.5, p * 1.25, p * 1.75, p * 1.125, p * 1.0625]
    rng = np.random.default_rng(0)
    parts.append(rng.standard_normal(4000) * 10.0 ** rng.uniform(-12, 12, 4000))
    parts.append(rng.uniform(-20, 20, 2000))
    parts.append(np.arange(-20, 20, 0.25))
    specials = [0.0, np.inf, np.nan, 1e300, 1e-300, 5e-324, 3.5e38, 3.4028234663852886e38]
    parts.append(np.array(specials))
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def _inputs(src: str) -> np.ndarray:
    d = _dtype(src)
    if src == "bf16" or src == "f16":
        return np.arange(1 << 16, dtype=np.uint16).view(d)
    if src in EXOTIC:
        return np.arange(1 << BITS.get(src, 8), dtype=np.uint8).view(d)
    if src == "b":
        return np.array([False, True, True, False])
    if d.kind == "f":
        x = _float_spread()
        with np.errstate(over="ignore"):
            y = x.astype(d)
        if src == "f32":
            rng = np.random.default_rng(1)
            noise = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
            y = np.concatenate([y, noise.view(np.float32), np.nextafter(y, np.inf)])
        return y
    info = np.iinfo(d)
    big = [info.min, info.max, info.min + 1, info.max - 1, 0, 1, -1, 2, -2, 7, 8, -8, -9, 15, 16]
    big += [*range(-300, 300, 7), 448, 449, 464, 480, 57344, 61440, 65504, 65520]
    big += [2**31 - 1, -(2**31), 2**60 + 2**52 + 1, 2**60 + 2**52, 2**40 + 2**32 + 5, -(2**62) - 3]
    rng = np.random.default_rng(2)
    vals = np.array([int(v) for v in big], dtype=object)
    ok = [(info.min <= int(v) <= info.max) for v in vals]
    rand = rng.integers(info.min, info.max, 500, dtype=d, endpoint=True)
    return np.concatenate([np.array([int(v) for v in vals[ok]], dtype=d), rand])


def reference(x: np.ndarray, src: str, dst: str, sat: bool, mode: str) -> np.ndarray:
    """ONNX's Cast written out exactly (:func:`conformance.cast_reference.cast_exact`,
    ml_dtypes 0.7's answers under whichever release is installed)."""
    return cast_exact(x, _dtype(dst), sat, mode)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(
        np.uint8 if a.itemsize == 1 else np.uint16 if a.itemsize == 2 else f"u{a.itemsize}"
    )


def _check(got: np.ndarray, want: np.ndarray, x: np.ndarray, what: str) -> None:
    if got.dtype.kind == "f" and got.dtype.itemsize >= 2:  # float16/32/64: NaN is NaN
        g, w = got.astype(np.float64), want.astype(np.float64)
        same = (_bits(got) == _bits(want)) | (np.isnan(g) & np.isnan(w))
    else:
        same = _bits(got) == _bits(want)
    bad = np.nonzero(~same)[0]
    if bad.size:
        k = bad[:8]
        raise AssertionError(
            f"{what}: {bad.size} of {x.size} differ, e.g. x={x[k]!r} ({_bits(x)[k]}) "
            f"got {_bits(got)[k]} want {_bits(want)[k]}"
        )


def _run(emu: Emulator, x: np.ndarray, src: str, dst: str, sat: int, mode: int) -> np.ndarray:
    y = np.empty(x.shape, _dtype(dst))
    emu.launch(castx_kernel(src, dst).name, 2, 48, np.ascontiguousarray(x), y, x.size, sat, mode)
    return y


MODES = {"up": 0, "down": 1, "nearest": 2}


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_cast_pair_as_ml_dtypes(emu: Emulator, src: str, dst: str) -> None:
    x = _inputs(src)
    variants = [(True, "up")]
    if dst in FLOAT8:
        variants.append((False, "up"))
    if dst == "e8m0":
        variants = [(s, m) for s in (True, False) for m in MODES]
    for sat, mode in variants:
        got = _run(emu, x, src, dst, int(sat), MODES[mode])
        _check(got, reference(x, src, dst, sat, mode), x, f"{src}->{dst} sat={sat} {mode}")


def test_sub_byte_types_read_only_their_low_bits(emu: Emulator) -> None:
    raw = np.arange(256, dtype=np.uint8)
    for src in ("i4", "u4", "f4e2m1", "i2", "u2"):
        mask = (1 << BITS[src]) - 1
        got = _run(emu, raw.view(_dtype(src)), src, "f32", 1, 0)
        want = (raw & mask).view(_dtype(src)).astype(np.float32)
        np.testing.assert_array_equal(got, want)


def test_written_sub_byte_values_have_high_bits_zero(emu: Emulator) -> None:
    x = np.arange(-40, 40, 0.5, dtype=np.float32)
    for dst in ("i4", "u4", "f4e2m1", "i2", "u2"):
        got = _run(emu, x, "f32", dst, 1, 0).view(np.uint8)
        assert got.max() < (1 << BITS[dst]), dst


def test_float8_saturation_table() -> None:
    """The spec's table, spelled out (the emulated kernels are checked above
    against the same reference): +-inf and out of range to +-max when saturating;
    else NaN (e4m3fn keeps the sign), infinity (e5m2), 0x80 (fnuz)."""
    x = np.array([np.inf, -np.inf, 1e6, -1e6, np.nan, -0.0], np.float32)
    want = {
        ("e4m3fn", 1): [0x7E, 0xFE, 0x7E, 0xFE, 0x7F, 0x80],
        ("e4m3fn", 0): [0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x80],
        ("e4m3fnuz", 1): [0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x00],
        ("e4m3fnuz", 0): [0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        ("e5m2", 1): [0x7B, 0xFB, 0x7B, 0xFB, 0x7E, 0x80],
        ("e5m2", 0): [0x7C, 0xFC, 0x7C, 0xFC, 0x7E, 0x80],
        ("e5m2fnuz", 1): [0x7F, 0xFF, 0x7F, 0xFF, 0x80, 0x00],
        ("e5m2fnuz", 0): [0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
    }
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    emu = Emulator([castx_kernel("f32", d) for d in FLOAT8])
    for (dst, sat), bits in want.items():
        got = _run(emu, x, "f32", dst, sat, 0).view(np.uint8)
        assert list(got) == bits, (dst, sat, [hex(b) for b in got])


def test_kernel_refuses_pairs_of_standard_types() -> None:
    with pytest.raises(ValueError):
        castx_kernel("f32", "f16")
    with pytest.raises(ValueError):
        castx_kernel("bf16", "bf16")


# -- the provider on the emulation ----------------------------------------------------


ONNX_TYPE = {
    "f32": TensorProto.FLOAT,
    "f16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
    "e4m3fn": TensorProto.FLOAT8E4M3FN,
    "e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "e5m2": TensorProto.FLOAT8E5M2,
    "e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "e8m0": TensorProto.FLOAT8E8M0,
    "f4e2m1": TensorProto.FLOAT4E2M1,
    "i4": TensorProto.INT4,
    "u4": TensorProto.UINT4,
    "i2": TensorProto.INT2,
    "u2": TensorProto.UINT2,
    "i8": TensorProto.INT8,
    "i64": TensorProto.INT64,
}


def _chain(types: list[str], opset: int = 25, **attrs: Any) -> bytes:
    """x -> Cast -> Cast ... through ``types``; every intermediate is an output."""
    nodes, outs = [], []
    for k, t in enumerate(types[1:], 1):
        nodes.append(helper.make_node("Cast", [f"v{k - 1}"], [f"v{k}"], to=ONNX_TYPE[t], **attrs))
        outs.append(helper.make_tensor_value_info(f"v{k}", ONNX_TYPE[t], [3, 7]))
    graph = helper.make_graph(
        nodes, "casts", [helper.make_tensor_value_info("v0", ONNX_TYPE[types[0]], [3, 7])], outs
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _session(manager: Any, model: bytes, providers: list[str]) -> Any:
    import ortcore

    return ortcore.InferenceSession(model, providers=providers, plugin_manager=manager)


def test_provider_takes_and_matches_a_chain_of_casts(emulated: Any) -> None:
    types = ["f32", "bf16", "f16", "e4m3fn", "f32", "e5m2fnuz", "f16", "i4", "i8", "u2", "f32"]
    types += ["f4e2m1", "f16", "e8m0", "f32"]
    model = _chain(types)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 7)) * 4).astype(np.float32)
    cuda = _session(emulated, model, ["cuda"])
    assert all(p == "CUDAExecutionProvider" for p in cuda.get_providers()[:1])
    got = cuda.run(None, {"v0": x})
    want = _session(emulated, model, ["cpu"]).run(None, {"v0": x})
    for g, w, t in zip(got, want, types[1:]):
        assert g.dtype == w.dtype, t
        np.testing.assert_array_equal(g.astype(np.float64), w.astype(np.float64), err_msg=f"to {t}")


def test_provider_saturate_and_round_mode_attributes(emulated: Any) -> None:
    x = np.array([[1e6, -1e6, np.inf, 300.0, 0.3, -0.001, 1.5]] * 3, np.float32)
    for dst, attrs in (
        ("e4m3fn", {"saturate": 0}),
        ("e5m2", {"saturate": 0}),
        ("e4m3fnuz", {"saturate": 1}),
        ("e8m0", {"saturate": 0, "round_mode": "nearest"}),
        ("e8m0", {"round_mode": "down"}),
    ):
        model = _chain(["f32", dst], **attrs)
        (got,) = _session(emulated, model, ["cuda"]).run(None, {"v0": x})
        sat, mode = bool(attrs.get("saturate", 1)), str(attrs.get("round_mode", "up"))
        want = reference(x, "f32", dst, sat, mode)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=dst)


def test_provider_castlike_of_int4(emulated: Any) -> None:
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    graph = helper.make_graph(
        [node],
        "castlike",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT16, [5, 5]),
            helper.make_tensor_value_info("like", TensorProto.INT4, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT4, [5, 5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    x = np.arange(-9, 16, dtype=np.float16).reshape(5, 5)
    like = np.zeros(1, ml_dtypes.int4)
    (got,) = _session(emulated, model.SerializeToString(), ["cuda"]).run(
        None, {"x": x, "like": like}
    )
    want = cast_exact(x, ml_dtypes.int4)  # truncated, 0 out of range
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_decline_says_why() -> None:
    from ortcore_cuda.ops_cast import decline

    model = onnx.load_from_string(_chain(["f32", "e8m0"], round_mode="sideways"))
    (node,) = ir.from_proto(model).graph
    assert decline(node, None) == "CUDA: Cast with round_mode 'sideways'"  # type: ignore[arg-type]
    model = onnx.load_from_string(_chain(["f32", "e8m0"], round_mode="nearest"))
    (node,) = ir.from_proto(model).graph
    assert decline(node, None) is None  # type: ignore[arg-type]
