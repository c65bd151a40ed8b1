"""onnxruntime as a provider under test: the sanity check of the suite's oracle.

A test-only compile-path provider (alias ``ort-oracle``) that claims every
node onnxruntime's CPU provider can run and runs each group with an
``onnxruntime.InferenceSession`` (graph optimizations off, so its kernels
answer, not its fusions). Running the suite's operator cases through it
shows where onnx.reference (the oracle) and onnxruntime disagree: a case
onnxruntime fails is either a bug of onnxruntime's or a doubt about the
oracle, and is worth a look either way.

onnxruntime is used here, in the project's tests, as a comparison; ortcore
itself never imports it. Registered as a plugin:
``--plugin tests.conformance.ort_provider``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

import ep_sdk
from ep_sdk import BridgeExecutionProvider, FusedGroup, GraphContext
from ep_sdk.bridge import export_candidate
from ep_sdk.dtypes import to_numpy


def _exchangeable(v: ir.Value | None) -> bool:
    """Whether onnxruntime's Python binding takes and gives ``v`` as a numpy
    array: a tensor of one of numpy's own types (not bfloat16, float8, 4-bit
    or 2-bit types, which numpy knows only through ml_dtypes)."""
    if v is None:
        return True
    if v.type is not None and not isinstance(v.type, ir.TensorType):
        return False
    if v.dtype is None:
        return True
    try:
        return np.dtype(to_numpy(v.dtype)).type.__module__ == "numpy"
    except Exception:  # a type ep_sdk has no numpy type for
        return False
    try:
        return np.dtype(to_numpy(v.dtype)).type.__module__ == "numpy"
    except Exception:  # a type ep_sdk has no numpy type for
        return False


def _session(model: bytes) -> Any:
    import onnxruntime as ort

    ort.set_default_logger_severity(3)  # its refusals are answers here, not errors to log
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


class OnnxruntimeOracle(BridgeExecutionProvider):
    """onnxruntime's CPU provider behind ep_sdk's bridge (test only)."""

    name = "OnnxruntimeOracleExecutionProvider"
    aliases = ("ort-oracle",)
    version = "1.0"
    priority = 1
    engine_name = "onnxruntime"

    _answers: dict[str, ep_sdk.bridge.Answer] = {}  # noqa: RUF012 - a process-wide memo
    _lock = threading.Lock()

    def supports_node(self, node: ir.Node, graph: GraphContext) -> ep_sdk.bridge.Answer:
        """Whether onnxruntime loads the node on its own (its error otherwise)."""
        if node.domain == "com.microsoft" and any(v is None for v in node.inputs):
            # onnxruntime 1.32 aborts the process (not an exception) creating a
            # session of a quantized contrib op with an omitted zero point
            return "onnxruntime aborts on a com.microsoft op with an omitted optional input"
        if not all(_exchangeable(v) for v in (*node.inputs, *node.outputs)):
            return "onnxruntime's Python binding exchanges only tensors of numpy's own types"
        model, _ = export_candidate(graph.graph, [node], graph.opsets)
        data = model.SerializeToString()
        key = hashlib.sha256(data).hexdigest()
        with self._lock:
            known = self._answers.get(key)
        if known is not None:
            return known
        try:
            _session(data)
            answer: ep_sdk.bridge.Answer = True
        except Exception as exc:  # onnxruntime's own refusal, kept as the reason
            answer = f"onnxruntime cannot load it: {str(exc).splitlines()[0][:200]}"
        with self._lock:
            self._answers[key] = answer
        return answer

    def build(self, model: bytes, group: FusedGroup) -> Any:
        """An onnxruntime session of the group, with its feeds' and outputs' names."""
        return _session(model), [v.name for v in group.inputs], [v.name for v in group.outputs]

    def run(self, engine: Any, inputs: Sequence[Any]) -> Sequence[Any]:
        """Run the session."""
        sess, names, outputs = engine
        return sess.run(outputs, dict(zip(names, inputs)))


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    """The onnxruntime oracle provider."""
    return [OnnxruntimeOracle]
