"""The OpenVINO execution provider: a bridge on :class:`ep_sdk.BridgeExecutionProvider`.

* What it runs: OpenVINO's own answer, less what OpenVINO would compute
  otherwise than ONNX (:mod:`ortcore_openvino.declines`: float64, uint64 and
  strings, saturating or 32-bit integer arithmetic, a few ops' attributes).
  A candidate group, exported as ONNX with its constants, is read by
  OpenVINO's ONNX frontend (partially: an op the frontend cannot convert
  stays a placeholder) and asked with ``Core.query_model``; the ops of the
  answer are mapped back to ONNX nodes through the tensor names OpenVINO
  keeps (an op without one belongs to the node its outputs feed).
* Build: ``Core.compile_model`` on the group's model, dynamic dimensions as
  the ONNX model has them; values cross as :mod:`ortcore_openvino._engine`
  says (inputs by position, bfloat16, float8 and 4-bit values by their
  bits). Cache: OpenVINO's own blob (``CompiledModel.export_model`` /
  ``Core.import_model``) after a line naming the group input each compiled
  input reads, in ortcore's compiled-artifact cache, keyed also by
  OpenVINO's version and the device's name and capabilities.
* Options: ``device`` (``CPU``; ``device_type``, onnxruntime's name for it, is
  accepted too, and is what :meth:`OpenVINOExecutionProvider.ep_devices`
  sets for each device), ``precision`` (``f32``, the default, so
  that results match the CPU provider's; ``bf16`` or ``f16`` on request,
  where OpenVINO's CPU plugin uses bf16 when the CPU has no f16 arithmetic),
  ``num_threads`` (0: the session's ``intra_op_num_threads``, else
  OpenVINO's default), ``performance_hint`` (``LATENCY`` or ``THROUGHPUT``),
  ``runtime_cache_capacity`` (entries of the CPU plugin's cache of what it
  prepared per input shape: 128, not OpenVINO's 5000, so that memory stays
  bounded when sizes keep changing) and the bridge's ``min_group_size``.
"""

from __future__ import annotations

import importlib.util
import io
import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, ClassVar

import ep_sdk
import numpy as np
import onnx
import onnx_ir as ir
from ep_sdk.bridge import Answer
from ep_sdk.hardware import VENDOR_IDS, host_cpu

from . import __version__
from ._engine import Engine, read_group
from .declines import decline_reason

__all__ = ["OpenVINOExecutionProvider"]

PRECISIONS = {"f32": "f32", "bf16": "bf16", "f16": "f16"}
HINTS = ("LATENCY", "THROUGHPUT")
_BLOB_MAGIC = b"ortcore-openvino blob 1\n"
_HEADER_LIMIT = 1 << 20  # the header line (input names as JSON) is never longer
# Ops that say nothing about support: graph inputs and outputs, weights.
_PASSIVE = {"Parameter", "Result", "Constant"}


@cache
def _core() -> Any:
    """One OpenVINO ``Core`` per process (it is thread-safe)."""
    import openvino

    return openvino.Core()


def _property(core: Any, device: str, name: str) -> str:
    """A device property as text (``""`` when OpenVINO does not answer it)."""
    try:
        return str(core.get_property(device, name))
    except Exception:  # a device without the property, a driver that fails to answer
        return ""


def _given(options: Mapping[str, Any] | None) -> set[str]:
    """The option names a user actually gave (not defaulted)."""
    return {k for k, v in (options or {}).items() if str(v)}


class OpenVINOExecutionProvider(ep_sdk.BridgeExecutionProvider):
    """Runs fused groups with OpenVINO; declines what OpenVINO refuses."""

    name = "OpenVINOExecutionProvider"
    aliases = ("openvino", "ov")
    version = __version__
    engine_name = "OpenVINO"
    priority = 50  # listed after TensorRT (60) and CUDA (55), before the CPU provider (0)
    vendor = "ortcore"
    load_compiled_mapped = True  # import_model reads the cached blob from its mapping
    default_options: ClassVar[Mapping[str, str]] = {
        **ep_sdk.BridgeExecutionProvider.default_options,
        "device": "CPU",
        "device_type": "",
        "precision": "f32",
        "num_threads": "0",
        "performance_hint": "LATENCY",
        "runtime_cache_capacity": "128",
    }

    def __init__(
        self, options: Mapping[str, Any] | None = None, config: ep_sdk.SessionConfig | None = None
    ) -> None:
        super().__init__(options, config)
        o = self.options
        self.ov_device = (o["device_type"] or o["device"]).strip().upper()
        if not self.ov_device:
            raise ep_sdk.ProviderOptionError(f"{self.name}: device must not be empty (e.g. CPU)")
        chosen = {
            o[k].strip().upper() for k in ("device", "device_type") if k in _given(options)
        }
        if len(chosen) > 1:
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: device={o['device']!r} and device_type={o['device_type']!r} "
                "name different devices; give one"
            )
        if o["precision"].lower() not in PRECISIONS:
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: precision must be one of {', '.join(PRECISIONS)}, "
                f"got {o['precision']!r}"
            )
        if o["performance_hint"].upper() not in HINTS:
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: performance_hint must be LATENCY or THROUGHPUT, "
                f"got {o['performance_hint']!r}"
            )
        threads = o["num_threads"]
        if not threads.isdigit():
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: num_threads must be a whole number >= 0, got {threads!r}"
            )
        self.threads = int(threads) or max(self.config.intra_op_num_threads, 0)
        capacity = o["runtime_cache_capacity"]
        if not capacity.isdigit():
            raise ep_sdk.ProviderOptionError(
                f"{self.name}: runtime_cache_capacity must be a whole number >= 0, got {capacity!r}"
            )

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why it cannot run here: the ``openvino`` package is not installed."""
        try:
            found = importlib.util.find_spec("openvino") is not None
        except Exception as exc:  # a broken sys.modules entry, a bad path
            return f"the openvino package cannot be found ({exc!r}); pip install openvino"
        return None if found else "the openvino package is not installed; pip install openvino"

    @classmethod
    def ep_devices(cls) -> Sequence[ep_sdk.EpDevice]:
        """OpenVINO's ``available_devices``: ``CPU`` as the host CPU, ``GPU*``
        and ``NPU*`` as Intel GPUs and NPUs (``Description``: OpenVINO's
        ``FULL_DEVICE_NAME``; ``Discrete``: from its ``DEVICE_TYPE``), each
        with ``ep_options`` ``{"device_type": name}``; other OpenVINO devices
        (plugins such as ``HETERO``) are not hardware and are left out."""
        if cls.unavailable_reason() is not None:
            return []
        core = _core()
        out = []
        for name in core.available_devices:
            kind = name.split(".")[0].upper()
            meta = {
                "ov_device": name,
                "full_device_name": _property(core, name, "FULL_DEVICE_NAME"),
            }
            if kind == "CPU":
                hw = host_cpu()
            elif kind in ("GPU", "NPU"):
                discrete = _property(core, name, "DEVICE_TYPE").upper().endswith("DISCRETE")
                hw = ep_sdk.HardwareDevice(
                    ep_sdk.HardwareDeviceType[kind],
                    "Intel",
                    VENDOR_IDS["Intel"],
                    metadata={
                        "Description": meta["full_device_name"],
                        **({"Discrete": "1" if discrete else "0"} if kind == "GPU" else {}),
                    },
                )
            else:
                continue
            out.append(ep_sdk.EpDevice(hw, ep_metadata=meta, ep_options={"device_type": name}))
        return out

    # -- what OpenVINO runs --------------------------------------------------------

    def supports_node(self, node: ir.Node, graph: ep_sdk.GraphContext) -> Answer:
        """Decline what OpenVINO runs otherwise than ONNX says
        (:mod:`ortcore_openvino.declines`); the rest is asked of OpenVINO."""
        return decline_reason(node, graph) or True

    def query_model(self, model: onnx.ModelProto) -> Mapping[str, Answer]:
        """OpenVINO's answer for every node of ``model`` (``Core.query_model``)."""
        from openvino.frontend import FrontEndManager

        frontend = FrontEndManager().load_by_framework("onnx")
        ov_model = frontend.convert_partially(frontend.load(io.BytesIO(model.SerializeToString())))
        supported = set(_core().query_model(ov_model, self.ov_device, self._config()))
        producer = {out: n.name for n in model.graph.node for out in n.output if out}
        op_type = {n.name: n.op_type for n in model.graph.node}
        answers: dict[str, Answer] = dict.fromkeys(op_type, True)
        owners: dict[str, set[str]] = {}
        for op in reversed(ov_model.get_ordered_ops()):  # consumers before producers
            names = {producer[t] for out in op.outputs() for t in out.get_names() if t in producer}
            if not names:  # an op a node's conversion added: it belongs to its consumers' nodes
                for out in op.outputs():
                    for user in out.get_target_inputs():
                        names |= owners.get(user.get_node().get_name(), set())
            owners[op.get_name()] = names
            kind = op.get_type_name()
            if kind in _PASSIVE or op.get_friendly_name() in supported:
                continue
            for name in names:
                if answers[name] is not True:
                    continue
                if "Framework" in kind or "NotSupported" in kind:
                    answers[name] = f"OpenVINO's ONNX frontend cannot convert {op_type[name]}"
                else:
                    answers[name] = (
                        f"OpenVINO {self.ov_device} refuses it (Core.query_model: "
                        f"{kind} {op.get_friendly_name()!r} is not supported)"
                    )
        return answers

    def engine_version(self) -> str:
        """OpenVINO's version string (part of every compiled blob's cache key)."""
        import openvino

        return str(openvino.get_version())

    def engine_target(self) -> str:
        """The device and, for a real one, its full name and optimization
        capabilities: a blob compiled for one CPU is never loaded on another."""
        core = _core()
        device = self.ov_device
        try:
            full = core.get_property(device, "FULL_DEVICE_NAME")
            caps = core.get_property(device, "OPTIMIZATION_CAPABILITIES")
        except Exception:  # a virtual device (AUTO, HETERO) has no such properties
            return device
        return f"{device}: {full} [{', '.join(map(str, caps))}]"

    # -- build, run, cache ---------------------------------------------------------

    def _config(self) -> dict[str, str]:
        config = {
            "INFERENCE_PRECISION_HINT": PRECISIONS[self.options["precision"].lower()],
            "PERFORMANCE_HINT": self.options["performance_hint"].upper(),
        }
        if self.threads:
            config["INFERENCE_NUM_THREADS"] = str(self.threads)
        if self.ov_device == "CPU":
            # The CPU plugin keeps what it prepares for each input shape in a
            # cache of 5000 entries by default (about 0.7 MB each for a MatMul):
            # a model fed ever new sizes grows by hundreds of MB. Bounded
            # lower, memory stays flat; shapes seen lately stay fast.
            config["CPU_RUNTIME_CACHE_CAPACITY"] = self.options["runtime_cache_capacity"]
        return config

    def build(self, model: bytes, group: ep_sdk.FusedGroup) -> Engine:
        """Read the group's ONNX bytes and ``compile_model`` them for the device."""
        ov_model, input_names = read_group(model)
        compiled = _core().compile_model(ov_model, self.ov_device, self._config())
        return Engine(compiled, group, input_names)

    def run(self, engine: Any, inputs: Sequence[Any]) -> list[np.ndarray]:
        """Run the compiled group on this thread's infer request."""
        return engine.run(inputs)  # type: ignore[no-any-return]

    def serialize(self, engine: Any) -> bytes:
        """OpenVINO's own blob export of the compiled model, after a line
        naming the ONNX input each compiled input reads (the compiled model's
        own names may be a graph output's, see :mod:`ortcore_openvino._engine`)."""
        blob = engine.compiled.export_model()
        header = _BLOB_MAGIC + json.dumps(engine.input_names).encode() + b"\n"
        return header + (blob.getvalue() if isinstance(blob, io.BytesIO) else bytes(blob))

    def deserialize(self, data: bytes, group: ep_sdk.FusedGroup) -> Engine:
        """``import_model`` of a blob :meth:`serialize` wrote. A mapped cache
        entry (:attr:`load_compiled_mapped`) reaches OpenVINO as a tensor over
        the mapping, neither read nor copied beforehand; bytes are copied once
        (``import_model`` takes bytes or a writable tensor, not a view)."""
        view = memoryview(data)
        head = bytes(view[: len(_BLOB_MAGIC) + _HEADER_LIMIT])
        if not head.startswith(_BLOB_MAGIC):
            raise ValueError(f"{self.name}: not a blob this version wrote")
        end = head.find(b"\n", len(_BLOB_MAGIC))
        if end < 0:
            raise ValueError(f"{self.name}: a blob without its header line")
        input_names = json.loads(head[len(_BLOB_MAGIC) : end])
        body = view[end + 1 :]
        if body.readonly:
            stream: Any = bytes(body)
        else:
            import openvino

            stream = openvino.Tensor(np.frombuffer(body, dtype=np.uint8), shared_memory=True)
        compiled = _core().import_model(stream, self.ov_device, self._config())
        return Engine(compiled, group, input_names, blob=stream)
