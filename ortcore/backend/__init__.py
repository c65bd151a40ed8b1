"""ONNX's backend API on ortcore (onnxruntime's ``onnxruntime.backend``).

``prepare(model)`` gives a :class:`~ortcore.backend.backend_rep.OrtcoreBackendRep`
whose ``run(inputs)`` runs it; ``run_model(model, inputs)`` does both;
``supports_device("CPU")`` and ``is_compatible(model)`` answer as onnxruntime's
CPU build does. See :mod:`onnx.backend.base`.
"""

from __future__ import annotations

from .backend import (
    OrtcoreBackend,
    is_compatible,
    prepare,
    run,
    run_model,
    run_node,
    supports_device,
)
from .backend_rep import OrtcoreBackendRep

__all__ = [
    "OrtcoreBackend",
    "OrtcoreBackendRep",
    "is_compatible",
    "prepare",
    "run",
    "run_model",
    "run_node",
    "supports_device",
]
