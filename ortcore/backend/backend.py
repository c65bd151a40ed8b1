"""ONNX's backend API (:class:`onnx.backend.base.Backend`) on ortcore sessions."""

from __future__ import annotations

import os
import unittest
from typing import Any

import onnx
from onnx.backend.base import Backend

from ..options import SessionOptions
from ..providers import get_available_providers
from ..session import InferenceSession
from .backend_rep import OrtcoreBackendRep, apply_allowed

__all__ = [
    "OnnxRuntimeBackend",
    "OrtcoreBackend",
    "is_compatible",
    "prepare",
    "run",
    "run_model",
    "run_node",
    "supports_device",
]

ALLOWED_SESSION_OPTIONS = frozenset(
    {
        "enable_cpu_mem_arena",
        "enable_mem_pattern",
        "enable_mem_reuse",
        "execution_mode",
        "execution_order",
        "graph_optimization_level",
        "inter_op_num_threads",
        "intra_op_num_threads",
        "log_severity_level",
        "log_verbosity_level",
        "logid",
        "use_deterministic_compute",
        "use_per_session_threads",
    }
)
"""``SessionOptions`` attributes ``prepare(model, **kwargs)`` sets; those that
write files (``optimized_model_filepath``, profiling) are refused, as in
onnxruntime's backend."""

EXCLUDE_PROVIDERS_ENV = "ORT_ONNX_BACKEND_EXCLUDE_PROVIDERS"


def _device() -> str:
    return "CPU"


class OrtcoreBackend(Backend):  # type: ignore[misc]
    """ONNX's backend API run by ortcore (onnxruntime's ``OnnxRuntimeBackend``)."""

    allowReleasedOpsetsOnly = os.getenv("ALLOW_RELEASED_ONNX_OPSET_ONLY", "1") == "1"

    @classmethod
    def is_compatible(cls, model: Any, device: str | None = None, **kwargs: Any) -> bool:
        """Whether ``device`` (default: this build's, ``"CPU"``) is supported."""
        return cls.supports_device(device or _device())

    @classmethod
    def is_opset_supported(cls, model: onnx.ModelProto) -> tuple[bool, str]:
        """Whether every opset the model imports is a released one (when
        ``ALLOW_RELEASED_ONNX_OPSET_ONLY`` is ``1``, the default), and why not."""
        if not cls.allowReleasedOpsetsOnly:
            return True, ""
        for opset in model.opset_import:
            domain = opset.domain or "ai.onnx"
            if (domain, opset.version) not in onnx.helper.OP_SET_ID_VERSION_MAP:
                return False, (
                    "Skipping this test as only released onnx opsets are supported."
                    "To run this test set env variable ALLOW_RELEASED_ONNX_OPSET_ONLY to 0."
                    f" Got Domain '{domain}' version '{opset.version}'."
                )
        return True, ""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Whether this build runs on ``device`` (``"CPU"``; ``"CUDA"`` means ``"GPU"``)."""
        if device == "CUDA":
            device = "GPU"
        build = _device()
        return "-" + device in build or device + "-" in build or device == build

    @classmethod
    def prepare(cls, model: Any, device: str | None = None, **kwargs: Any) -> OrtcoreBackendRep:
        """Load ``model`` (a path, bytes, ``onnx.ModelProto``, session or
        prepared model) into a session on every available provider.

        Args:
            model: the model.
            device: the device asked for (``None``: the default).
            kwargs: ``SessionOptions`` attributes among
                :data:`ALLOWED_SESSION_OPTIONS`; others that exist are refused,
                unknown names ignored.

        Raises:
            RuntimeError: a refused option, or an unsupported device.
            unittest.SkipTest: the model imports an unreleased opset.
        """
        if isinstance(model, OrtcoreBackendRep):
            return model
        if isinstance(model, InferenceSession):
            return OrtcoreBackendRep(model)
        if isinstance(model, (str, bytes, os.PathLike)):
            options = apply_allowed(SessionOptions(), kwargs, ALLOWED_SESSION_OPTIONS)
            excluded = os.getenv(EXCLUDE_PROVIDERS_ENV, "").split(",")
            providers = [p for p in get_available_providers() if p not in excluded]
            session = InferenceSession(model, sess_options=options, providers=providers)
            session.disable_fallback()
            if device is not None and not cls.supports_device(device):
                raise RuntimeError(f"Incompatible device expected '{device}', got '{_device()}'")
            return cls.prepare(session, device, **kwargs)
        onnx.checker.check_model(model.SerializeToString())
        supported, why = cls.is_opset_supported(model)
        if not supported:
            raise unittest.SkipTest(why)
        return cls.prepare(model.SerializeToString(), device, **kwargs)

    @classmethod
    def run_model(  # type: ignore[override]
        cls, model: Any, inputs: Any, device: str | None = None, **kwargs: Any
    ) -> list[Any]:
        """Prepare ``model`` and run it on ``inputs`` (see :meth:`prepare` and
        :meth:`OrtcoreBackendRep.run`)."""
        rep = cls.prepare(model, device, **kwargs)
        return rep.run(inputs, **kwargs)

    @classmethod
    def run_node(
        cls,
        node: Any,
        inputs: Any,
        device: str | None = None,
        outputs_info: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Not provided (as in onnxruntime): run a whole model instead.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "It is much more efficient to run a whole model than every node independently."
        )


OnnxRuntimeBackend = OrtcoreBackend  # onnxruntime's name

is_compatible = OrtcoreBackend.is_compatible
prepare = OrtcoreBackend.prepare
run = OrtcoreBackend.run_model
run_model = OrtcoreBackend.run_model
run_node = OrtcoreBackend.run_node
supports_device = OrtcoreBackend.supports_device
