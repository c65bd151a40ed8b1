"""A test provider for the QDQ fusions: the CPU provider's kernels plus
numpy kernels of onnxruntime's com.microsoft quantized ops, written from
their definitions (dequantize, compute in float64, quantize; the integer
products exactly), so that the fusion tests do not depend on the CPU
provider's own contrib kernels. ``without`` makes a variant that lacks the
kernels it names (a provider that cannot run a fused op)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np
import onnx
import onnx.reference
from onnx import helper

from ep_sdk import ExecutionProvider, KernelDef, KernelRegistry, NodeInfo

MS = "com.microsoft"


def _dq(x: np.ndarray, s: np.ndarray, z: np.ndarray | None) -> np.ndarray:
    zero = 0.0 if z is None else np.asarray(z, np.float64)
    return (x.astype(np.float64) - zero) * np.asarray(s, np.float64)


def _q(y: np.ndarray, s: np.ndarray, z: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    dtype = (z if z is not None else like).dtype
    info = np.iinfo(dtype)
    zero = 0 if z is None else np.asarray(z, np.float64)
    return np.clip(np.rint(y / np.asarray(s, np.float64)) + zero, info.min, info.max).astype(dtype)


def _float_op(op_type: str, attrs: dict[str, Any], arrays: list[np.ndarray]) -> np.ndarray:
    """``op_type`` on float32 ``arrays`` through onnx's reference evaluator
    (a test oracle: fine in a test provider)."""
    names = [f"i{k}" for k in range(len(arrays))]
    node = helper.make_node(op_type, names, ["o"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names],
        [helper.make_tensor_value_info("o", onnx.TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    feeds = {n: a.astype(np.float32) for n, a in zip(names, arrays, strict=True)}
    return np.asarray(onnx.reference.ReferenceEvaluator(model).run(None, feeds)[0], np.float64)


def _attrs(info: NodeInfo, drop: Iterable[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in info.attrs.items() if k not in set(drop) and v is not None}


def _unary(op_type: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        attrs = _attrs(info, ["channels_last"])

        def compute(x: Any, xs: Any, xz: Any, ys: Any, yz: Any = None) -> Any:
            return (_q(_float_op(op_type, attrs, [_dq(x, xs, xz)]), ys, yz, x),)

        return compute

    return build


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        def compute(*args: Any) -> Any:  # A, A_scale, A_zp, B, B_scale, B_zp, C_scale[, C_zp]
            a, a_s, a_z, b, b_s, b_z, c_s = args[:7]
            c_z = args[7] if len(args) > 7 else None
            return (_q(fn(_dq(a, a_s, a_z), _dq(b, b_s, b_z)), c_s, c_z, a),)

        return compute

    return build


def _concat(info: NodeInfo) -> Any:
    axis = int(info.attrs["axis"])

    def compute(ys: Any, yz: Any, *triples: Any) -> Any:
        parts = [_dq(*triples[k : k + 3]) for k in range(0, len(triples), 3)]
        return (_q(np.concatenate(parts, axis=axis), ys, yz, triples[0]),)

    return compute


def _columns(s: np.ndarray) -> np.ndarray:
    """A scale or zero point of B, along B's columns (the last axis)."""
    return np.asarray(s, np.float64).reshape(-1) if np.size(s) > 1 else np.asarray(s, np.float64)


def _int_product(a: Any, az: Any, b: Any, bz: Any) -> np.ndarray:
    a64 = a.astype(np.float64) - (0.0 if az is None else float(np.asarray(az).reshape(-1)[0]))
    b64 = b.astype(np.float64) - (0.0 if bz is None else _columns(bz))
    return np.matmul(a64, b64)


def _qgemm(info: NodeInfo) -> Any:
    ta, tb = int(info.attrs.get("transA", 0)), int(info.attrs.get("transB", 0))
    alpha = float(info.attrs.get("alpha", 1.0))

    def compute(a: Any, a_s: Any, a_z: Any, b: Any, b_s: Any, b_z: Any, c: Any = None,
                y_s: Any = None, y_z: Any = None) -> Any:  # fmt: skip
        a = a.T if ta else a
        b = b.T if tb else b
        acc = _int_product(a, a_z, b, b_z) + (0 if c is None else c.astype(np.float64))
        y = acc * alpha * float(np.asarray(a_s).reshape(-1)[0]) * _columns(b_s)
        return (y.astype(np.float32),) if y_s is None else (_q(y, y_s, y_z, a),)

    return compute


def _mitf(info: NodeInfo) -> Any:
    def compute(a: Any, b: Any, a_s: Any, b_s: Any, a_z: Any = None, b_z: Any = None,
                bias: Any = None) -> Any:  # fmt: skip
        y = _int_product(a, a_z, b, b_z) * float(np.asarray(a_s).reshape(-1)[0]) * _columns(b_s)
        return ((y + (0 if bias is None else bias)).astype(np.float32),)

    return compute


def _dqmm(info: NodeInfo) -> Any:
    def compute(x: Any, b: Any, b_s: Any, b_z: Any = None, bias: Any = None) -> Any:
        # DynamicQuantizeLinear, as the ONNX definition writes it
        hi, lo = max(0.0, float(x.max(initial=0))), min(0.0, float(x.min(initial=0)))
        scale = np.float32((hi - lo) / 255 if hi != lo else 1.0)
        zp = np.uint8(np.clip(np.rint(-np.float32(lo) / scale), 0, 255))
        a = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
        return _mitf(info)(a, b, scale, b_s, zp, b_z, bias)

    return compute


CONTRIB: dict[str, Callable[[NodeInfo], Any]] = {
    "QLinearAdd": _binary(np.add),
    "QLinearMul": _binary(np.multiply),
    "QLinearAveragePool": _unary("AveragePool"),
    "QLinearGlobalAveragePool": _unary("GlobalAveragePool"),
    "QLinearSigmoid": _unary("Sigmoid"),
    "QLinearLeakyRelu": _unary("LeakyRelu"),
    "QLinearConcat": _concat,
    "QGemm": _qgemm,
    "MatMulIntegerToFloat": _mitf,
    "DynamicQuantizeMatMul": _dqmm,
}


@functools.cache
def _cpu_kernels() -> tuple[KernelDef, ...]:
    from ortcore_cpu.provider import CPUExecutionProvider

    full = CPUExecutionProvider().registry() or KernelRegistry()
    return tuple(k for k in full if not (k.domain == MS and k.op_type in CONTRIB))


@functools.cache
def registry(without: frozenset[str] = frozenset()) -> KernelRegistry:
    """The CPU provider's kernels and :data:`CONTRIB`, less the ops in ``without``."""
    reg = KernelRegistry().with_kernels(k for k in _cpu_kernels() if k.op_type not in without)
    for op_type, build in CONTRIB.items():
        if op_type not in without:
            reg.kernel(op_type, domain=MS, since=1)(build)
    return reg


class QdqTestProvider(ExecutionProvider):
    __test__ = False  # not a test class, for pytest
    """Runs every op the CPU provider runs, and the contrib quantized ops."""

    name = "QdqTestExecutionProvider"
    without: ClassVar[frozenset[str]] = frozenset()

    def kernel_registry(self) -> KernelRegistry:
        return registry(self.without)


def without(*op_types: str) -> type[QdqTestProvider]:
    """A variant of :class:`QdqTestProvider` with no kernel for ``op_types``."""
    return type(
        "QdqTestWithout",
        (QdqTestProvider,),
        {"name": "QdqTestWithoutExecutionProvider", "without": frozenset(op_types)},
    )
