"""A stand-in for TensorRT's runtime and for GPU memory, for machines with no GPU.

TensorRT (and TensorRT-RTX) build engines without a GPU but cannot
deserialize or run one. The tests of the provider's runtime path (binding
inputs and outputs by name, shapes, per-thread execution contexts, device
buffers, host copies, rebuilding for a new profile) run against this:

* :class:`FakeMemory` is "device" memory in host RAM: ``alloc`` returns the
  address of a numpy buffer, copies are ``memmove`` between addresses; it
  counts allocations and copies.
* :func:`fake_plan` makes a "plan": the group's ONNX bytes with the profile
  it was built for. :class:`FakeModule` is the real TensorRT module (its
  parser and builder types) with ``Runtime`` replaced: its engine runs the
  plan's ONNX model with ortcore's CPU provider, reading inputs from and
  writing outputs to the addresses the provider bound, and refuses input
  shapes outside the plan's profile as TensorRT does.

Nothing here runs on a GPU; the real runtime path is exercised only on the
GPU machine (tests marked ``gpu``).
"""

from __future__ import annotations

import ctypes
import itertools
import json
import threading
from typing import Any

import numpy as np

_MAGIC = b"fake-plan\n"


def fake_plan(model: bytes, profile: Any) -> bytes:
    """A plan the fake runtime can run: ``model`` for ``profile``."""
    shapes = [[n, list(a), list(o), list(b), n in profile.values] for n, a, o, b in profile.shapes]
    return _MAGIC + json.dumps(shapes).encode() + b"\n" + model


class FakeMemory:
    """Host memory behind the provider's ``Memory`` interface."""

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.allocs = 0
        self.frees = 0
        self.to_device_copies = 0
        self.to_host_copies = 0
        self._streams = itertools.count(1)
        self.threads: set[int] = set()

    def alloc(self, nbytes: int) -> int:
        buf = np.zeros(max(nbytes, 1), np.uint8)
        ptr = buf.ctypes.data
        self.buffers[ptr] = buf
        self.allocs += 1
        return ptr

    def free(self, ptr: int) -> None:
        del self.buffers[ptr]
        self.frees += 1

    def stream(self) -> int:
        return next(self._streams)

    def _check(self, ptr: int, nbytes: int) -> None:
        buf = self.buffers.get(ptr)
        assert buf is not None, f"copy to or from an address never allocated: {ptr:#x}"
        assert nbytes <= buf.nbytes, f"{nbytes} bytes into a buffer of {buf.nbytes}"

    def to_device(self, ptr: int, array: np.ndarray, stream: int) -> None:
        assert array.flags.c_contiguous
        self._check(ptr, array.nbytes)
        ctypes.memmove(ptr, array.ctypes.data, array.nbytes)
        self.to_device_copies += 1

    def to_host(self, array: np.ndarray, ptr: int, stream: int) -> None:
        assert array.flags.c_contiguous
        self._check(ptr, array.nbytes)
        ctypes.memmove(array.ctypes.data, ptr, array.nbytes)
        self.to_host_copies += 1

    def synchronize(self, stream: int) -> None:
        pass

    def activate(self) -> None:
        self.threads.add(threading.get_ident())


class FakeModule:
    """The real TensorRT module with a fake ``Runtime`` (see the module docstring)."""

    def __init__(self, real: Any, memory: FakeMemory) -> None:
        self._real = real
        self.memory = memory
        self.contexts = 0
        self.deserialized = 0
        self.__name__ = real.__name__
        self.__version__ = real.__version__
        module = self

        class Runtime:
            def __init__(self, logger: Any) -> None:
                pass

            def deserialize_cuda_engine(self, plan: bytes) -> Any:
                if not bytes(plan[: len(_MAGIC)]) == _MAGIC:
                    return None
                module.deserialized += 1
                return _Engine(module, bytes(plan))

        self.Runtime = Runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _Engine:
    def __init__(self, module: FakeModule, plan: bytes) -> None:
        import onnx
        import ortcore

        self.module = module
        head, _, model = plan[len(_MAGIC) :].partition(b"\n")
        entries = json.loads(head)
        self.profile = {n: (tuple(a), tuple(b)) for n, a, _, b, value in entries if not value}
        self.values = {n: (tuple(a), tuple(b)) for n, a, _, b, value in entries if value}
        proto = onnx.load_from_string(model)
        inits = {t.name for t in proto.graph.initializer}
        self.inputs = [i for i in proto.graph.input if i.name not in inits]
        self.outputs = list(proto.graph.output)
        self.session = ortcore.InferenceSession(model, providers=["cpu"])
        self.names = [i.name for i in self.inputs] + [o.name for o in self.outputs]
        self.num_io_tensors = len(self.names)

    def get_tensor_name(self, i: int) -> str:
        return self.names[i]

    def get_tensor_mode(self, name: str) -> Any:
        modes = self.module.TensorIOMode
        return modes.INPUT if name in {i.name for i in self.inputs} else modes.OUTPUT

    def get_tensor_dtype(self, name: str) -> Any:
        from onnx import TensorProto

        for v in (*self.inputs, *self.outputs):
            if v.name == name:
                kinds = {
                    TensorProto.FLOAT: "FLOAT",
                    TensorProto.FLOAT16: "HALF",
                    TensorProto.INT32: "INT32",
                    TensorProto.INT64: "INT64",
                    TensorProto.BOOL: "BOOL",
                    TensorProto.INT8: "INT8",
                    TensorProto.UINT8: "UINT8",
                }
                return getattr(self.module.DataType, kinds[v.type.tensor_type.elem_type])
        raise KeyError(name)

    def get_tensor_location(self, name: str) -> Any:
        """Shape tensor inputs are read on the host, as TensorRT reads them."""
        where = self.module.TensorLocation
        return where.HOST if name in self.values else where.DEVICE

    def create_execution_context(self) -> Any:
        self.module.contexts += 1
        return _Context(self)


class _Context:
    def __init__(self, engine: _Engine) -> None:
        self.engine = engine
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self.results: dict[str, np.ndarray] | None = None
        self.thread = threading.get_ident()

    def _same_thread(self) -> None:
        assert threading.get_ident() == self.thread, "a context used from two threads"

    def set_input_shape(self, name: str, shape: Any) -> bool:
        self._same_thread()
        shape = tuple(shape)
        if name in self.engine.values:
            return True  # its values are checked when they are read
        lo, hi = self.engine.profile.get(name, (shape, shape))
        if len(shape) != len(lo) or any(not a <= d <= b for d, a, b in zip(shape, lo, hi)):
            return False
        self.shapes[name] = shape
        self.results = None
        return True

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.addresses[name] = ptr
        if name in self.shapes:
            self.results = None  # new input data
        return True

    def _compute(self) -> dict[str, np.ndarray]:
        if self.results is None:
            from ortcore_tensorrt._engine import numpy_dtype

            feeds = {}
            for i in self.engine.inputs:
                dtype = numpy_dtype(self.engine.get_tensor_dtype(i.name))
                shape = self.shapes[i.name] if i.name in self.shapes else _static(i)
                size = int(np.prod(shape)) * dtype.itemsize
                raw = (ctypes.c_char * size).from_address(self.addresses[i.name])
                value = np.frombuffer(raw, dtype, int(np.prod(shape))).reshape(shape).copy()
                if i.name in self.engine.values:
                    lo, hi = self.engine.values[i.name]
                    host = self.addresses[i.name] not in self.engine.module.memory.buffers
                    assert host, f"shape tensor {i.name} bound to device memory"
                    assert all(a <= v <= b for v, a, b in zip(value.tolist(), lo, hi)), (
                        f"shape tensor {i.name} = {value.tolist()} outside {lo}..{hi}"
                    )
                feeds[i.name] = value
            names = [o.name for o in self.engine.outputs]
            self.results = dict(zip(names, self.engine.session.run(names, feeds)))
        return self.results

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._compute()[name].shape)

    def execute_async_v3(self, stream: int) -> bool:
        self._same_thread()
        for name, value in self._compute().items():
            value = np.ascontiguousarray(value)
            ctypes.memmove(self.addresses[name], value.ctypes.data, value.nbytes)
        self.results = None
        return True


def _static(value: Any) -> tuple[int, ...]:
    return tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
