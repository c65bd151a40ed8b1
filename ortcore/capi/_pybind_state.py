"""onnxruntime's ``capi._pybind_state``: the same names as
:mod:`ortcore.capi.onnxruntime_pybind11_state`, which it re-exports."""

from __future__ import annotations

from .onnxruntime_pybind11_state import *  # noqa: F403
from .onnxruntime_pybind11_state import __all__ as __all__
