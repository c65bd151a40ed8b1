"""onnxruntime's exception module path: ``from ...onnxruntime_pybind11_state import Fail``.

Re-exports :mod:`ortcore.errors` under the names onnxruntime uses.
"""

from __future__ import annotations

from ..errors import (
    EPFail,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    NoSuchFile,
    NotImplementedOp,
    RuntimeException,
)

NotImplemented = NotImplementedOp  # onnxruntime's name for it

__all__ = [
    "EPFail",
    "Fail",
    "InvalidArgument",
    "InvalidGraph",
    "InvalidProtobuf",
    "NoSuchFile",
    "NotImplemented",
    "RuntimeException",
]
