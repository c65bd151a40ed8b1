"""What the fusion tests share: building a float model, running it at every
optimization level and checking the outputs agree (:func:`_check`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.reference
from onnx import TensorProto, helper, numpy_helper

import ortcore

L = ortcore.GraphOptimizationLevel
LEVELS = [L.ORT_DISABLE_ALL, L.ORT_ENABLE_BASIC, L.ORT_ENABLE_EXTENDED, L.ORT_ENABLE_ALL]
RNG = np.random.default_rng(0)


def _init(name: str, a: Any) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, Sequence[int]],
    outputs: Sequence[str],
    inits: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
) -> bytes:
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        list(inits),
    )  # fmt: skip
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)]
    ).SerializeToString()


def _run(
    model: bytes, feeds: dict[str, np.ndarray], level: L, tmp: Path, providers: Any = None
) -> tuple[list[np.ndarray], list[str]]:
    so = ortcore.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = str(tmp / f"opt{int(level)}.onnx")
    sess = ortcore.InferenceSession(model, so, providers=providers or ["CPUExecutionProvider"])
    ops = [
        (f"{n.domain}:" if n.domain else "") + n.op_type
        for n in onnx.load(so.optimized_model_filepath).graph.node
    ]
    return sess.run(None, feeds), ops


def _check(model: bytes, feeds: dict[str, np.ndarray], tmp: Path, **kw: Any) -> list[str]:
    """Run at every level; outputs agree; return the ops at ORT_ENABLE_ALL.

    The optimized model is also reloaded and run (schemas of fused ops are
    known to onnx)."""
    want, _ = _run(model, feeds, L.ORT_DISABLE_ALL, tmp, **kw)
    ops: list[str] = []
    for level in LEVELS[1:]:
        got, ops = _run(model, feeds, level, tmp, **kw)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=str(level))
    reloaded, _ = _run(
        (tmp / f"opt{int(L.ORT_ENABLE_ALL)}.onnx").read_bytes(), feeds, L.ORT_DISABLE_ALL, tmp
    )
    for g, w in zip(reloaded, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg="reloaded")
    return ops


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)
