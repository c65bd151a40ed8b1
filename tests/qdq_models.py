"""Building QDQ test models and checking a fused session against the
unfused float path (one quantization unit) and onnxruntime."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ortcore
from ortcore.plugins import PluginManager

from .conftest import plugin_module
from .qdq_provider import QdqTestProvider

L = ortcore.GraphOptimizationLevel
CPU = "CPUExecutionProvider"
U8, I8 = np.uint8, np.int8

try:  # the comparison with onnxruntime runs where it is installed
    import onnxruntime as ort
except ImportError:  # pragma: no cover - depends on the environment
    ort = None


def qparams(lo: float, hi: float, dtype: Any) -> tuple[float, int]:
    """Scale and zero point covering ``[lo, hi]`` (and 0) in ``dtype``."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    info = np.iinfo(dtype)
    scale = (hi - lo) / 255 if hi > lo else 1.0
    zp = int(np.clip(np.rint(info.min - lo / scale), info.min, info.max))
    return float(np.float32(scale)), zp


class Builder:
    """A QDQ graph under construction."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []

    def const(self, name: str, a: Any, dtype: Any = np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(a, dtype), name))
        return name

    def node(self, op: str, ins: Sequence[str], out: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, list(ins), [out], name=f"{op}_{out}", **attrs))
        return out

    def dq(self, q: str, s: Any, z: Any, dtype: Any, out: str, axis: int | None = None) -> str:
        s_name = self.const(f"{out}_s", s)
        z_name = self.const(f"{out}_z", z, dtype)
        kw = {} if axis is None else {"axis": axis}
        return self.node("DequantizeLinear", [q, s_name, z_name], out, **kw)

    def q(self, x: str, s: float, z: int, dtype: Any, out: str) -> str:
        s_name = self.const(f"{out}_s", s)
        z_name = self.const(f"{out}_z", z, dtype)
        return self.node("QuantizeLinear", [x, s_name, z_name], out)

    def input(self, name: str, shape: Sequence[int], s: float, z: int, dtype: Any) -> str:
        """A float input, quantized and dequantized: returns the DQ's output."""
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        self.q(name, s, z, dtype, f"{name}_q")
        return self.dq(f"{name}_q", s, z, dtype, f"{name}_dq")

    def weight(self, name: str, w: np.ndarray, dtype: Any, axis: int | None) -> str:
        """A constant float tensor quantized symmetrically (int8) or
        asymmetrically (uint8), per tensor or along ``axis``."""
        if axis is None:
            lo, hi = np.array([w.min()]), np.array([w.max()])
        else:
            other = tuple(i for i in range(w.ndim) if i != axis)
            lo, hi = w.min(axis=other), w.max(axis=other)
        if dtype is np.int8:
            s = (np.maximum(np.abs(lo), np.abs(hi)) / 127).astype(np.float32)
            z = np.zeros(s.shape, np.int8)
        else:
            pairs = [qparams(float(a), float(b), dtype) for a, b in zip(lo, hi, strict=True)]
            s = np.array([p[0] for p in pairs], np.float32)
            z = np.array([p[1] for p in pairs], dtype)
        shape = [1] * w.ndim
        if axis is not None:
            shape[axis] = -1
        info = np.iinfo(dtype)
        wq = np.clip(np.rint(w / s.reshape(shape)) + z.reshape(shape), info.min, info.max)
        self.const(f"{name}_q", wq, dtype)
        if axis is None:
            return self.dq(f"{name}_q", s[0], z[0], dtype, f"{name}_dq")
        return self.dq(f"{name}_q", s, z, dtype, f"{name}_dq", axis=axis)

    def bias(self, name: str, b: np.ndarray, scale: np.ndarray) -> str:
        """An int32 bias of ``scale`` (zero point 0), as onnxruntime's quantizer writes it."""
        scale = np.asarray(scale, np.float32).reshape(-1)
        self.const(f"{name}_q", np.rint(b / scale), np.int32)
        s = scale if scale.size > 1 else scale[0]
        z = np.zeros(scale.shape, np.int32) if scale.size > 1 else 0
        return self.dq(f"{name}_q", s, z, np.int32, f"{name}_dq", axis=0)

    def model(self, outputs: Sequence[tuple[str, int]], opset: int = 17) -> bytes:
        outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
        graph = helper.make_graph(self.nodes, "g", self.inputs, outs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return m.SerializeToString()


@functools.cache
def _manager(cls: type) -> PluginManager:
    pm = PluginManager(autoload=True)
    pm.register_plugin(
        plugin_module(f"tests.qdq.{cls.__name__}", cls), name=f"tests.qdq.{cls.__name__}"
    )
    return pm


def run(
    model: bytes, feeds: dict[str, np.ndarray], tmp: Path, level: Any = L.ORT_ENABLE_ALL,
    provider: type | str = CPU,
) -> tuple[list[np.ndarray], list[str]]:  # fmt: skip
    """Outputs of ``model`` at ``level`` on ``provider`` (a name, or a test
    provider class), and the optimized model's op types (``domain:`` before
    those not of the default domain)."""
    so = ortcore.SessionOptions()
    so.graph_optimization_level = level
    path = tmp / f"opt{int(level)}.onnx"
    so.optimized_model_filepath = str(path)
    if isinstance(provider, str):
        sess = ortcore.InferenceSession(model, so, providers=[provider])
    else:
        sess = ortcore.InferenceSession(
            model, so, providers=[provider.name], plugin_manager=_manager(provider)
        )
    ops = [(f"{n.domain}:" if n.domain else "") + n.op_type for n in onnx.load(path).graph.node]
    return sess.run(None, feeds), ops


def within_one_unit(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Integer outputs differ by at most 1, and mostly not at all."""
    assert got.dtype == want.dtype, what
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= 1, f"{what}: {diff.max()} units apart"
    assert np.mean(diff == 0) >= 0.9, f"{what}: {np.mean(diff == 0):.2%} equal"


def close_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Float outputs equal up to float rounding of the integer products."""
    tol = 1e-5 * max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=tol, err_msg=what)


def check(
    model: bytes, feeds: dict[str, np.ndarray], tmp: Path, provider: type | str = CPU
) -> list[str]:
    """Run fused (``provider``, all optimizations) and unfused (CPU, none):
    outputs within one unit (integer) or float rounding (float), and the
    same against onnxruntime on the QDQ model where it is installed.
    Returns the fused model's op types."""
    want, _ = run(model, feeds, tmp, L.ORT_DISABLE_ALL)
    got, ops = run(model, feeds, tmp, L.ORT_ENABLE_ALL, provider)
    refs = [("unfused", want)]
    if ort is not None:
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        refs.append(("onnxruntime", sess.run(None, feeds)))
    for what, ref in refs:
        for g, w in zip(got, ref, strict=True):
            if g.dtype.kind in "iu":
                within_one_unit(g, w, what)
            else:
                close_floats(g, w, what)
    return ops


def calibrated(
    make: Callable[[tuple[float, int] | None], bytes],
    feeds: dict[str, np.ndarray],
    tmp: Path,
    dtype: Any,
) -> bytes:
    """``make((scale, zero_point))`` with the output parameters fitted to
    the range of the float output ``make(None)`` gives."""
    out = run(make(None), feeds, tmp, L.ORT_DISABLE_ALL)[0][0]
    return make(qparams(float(out.min()), float(out.max()), dtype))


def rng_input(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


ContribProvider = QdqTestProvider
