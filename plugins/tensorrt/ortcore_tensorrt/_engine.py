"""Optimization profiles, and running a TensorRT engine on numpy values.

* :class:`Profile`: the shapes an engine is built for, one ``min/opt/max``
  triple per dynamic network input. :func:`parse_shapes` reads
  onnxruntime's option format (``"input:1x3x224x224,mask:1x128"``).
* :class:`Runner`: a deserialized engine with one execution context, one
  stream and one set of device buffers per thread (TensorRT's rule: a
  context is used by one thread at a time). Inputs are copied to the device,
  the context runs on the thread's stream, outputs are copied back; buffers
  are kept and grown, never allocated per run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ep_sdk
import numpy as np

from ._cuda import Memory
from ._module import logger

__all__ = ["Dims", "Profile", "Runner", "grow", "numpy_dtype", "parse_shapes"]

Dims = tuple[int, ...]


def parse_shapes(text: str, option: str) -> dict[str, Dims]:
    """``"a:1x3x224x224,b:1x128"`` as ``{"a": (1, 3, 224, 224), "b": (1, 128)}``.

    Raises:
        ValueError: a malformed entry (the message names ``option`` and the entry).
    """
    out: dict[str, Dims] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, sep, dims = entry.rpartition(":")
        try:
            shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        except ValueError:
            shape = (-1,)
        if not sep or not name or any(d < 0 for d in shape):
            raise ValueError(
                f"{option}: {entry!r} is not NAME:DIMS with DIMS like 1x3x224x224 "
                "(whole numbers >= 0, joined by 'x')"
            )
        if name in out:
            raise ValueError(f"{option}: input {name!r} is given twice")
        out[name] = shape
    return out


@dataclass(frozen=True)
class Profile:
    """``(name, min, opt, max)`` for each dynamic network input, by name.

    For a shape tensor input (named in ``values``: an input whose values
    are dims, e.g. the shape of a Reshape fed at run time) the triple bounds
    its values, not its shape.
    """

    shapes: tuple[tuple[str, Dims, Dims, Dims], ...] = ()
    values: frozenset[str] = frozenset()

    def covers(self, feeds: Mapping[str, Dims]) -> bool:
        """Whether every input named here has a shape within its range."""
        for name, lo, _, hi in self.shapes:
            shape = feeds.get(name)
            if shape is None or len(shape) != len(lo):
                return False
            if any(d < a or d > b for d, a, b in zip(shape, lo, hi)):
                return False
        return True

    def text(self) -> str:
        """``name:1x16/4x16/32x16;...`` (part of an engine's cache key)."""

        def dims(d: Dims) -> str:
            return "x".join(map(str, d))

        return ";".join(
            f"{n}{'=' if n in self.values else ':'}{dims(a)}/{dims(o)}/{dims(b)}"
            for n, a, o, b in self.shapes
        )


def grow(now: tuple[Dims, Dims, Dims] | None, shape: Dims) -> tuple[Dims, Dims, Dims]:
    """The smallest ``(min, opt, max)`` holding ``now`` and ``shape``; opt is
    ``shape`` (``now`` is ``None``, or of another rank: exactly ``shape``)."""
    if now is None or len(now[0]) != len(shape):
        return shape, shape, shape
    lo, _, hi = now
    return tuple(map(min, lo, shape)), shape, tuple(map(max, hi, shape))


_DTYPES: dict[str, np.dtype] = {
    "FLOAT": np.dtype(np.float32),
    "HALF": np.dtype(np.float16),
    "INT8": np.dtype(np.int8),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
}


def numpy_dtype(trt_dtype: Any) -> np.dtype:
    """The numpy type of a TensorRT ``DataType`` (bfloat16 and float8 through ml_dtypes).

    Raises:
        TypeError: a type ortcore has no array type for (FP4, INT4, E8M0).
    """
    name = getattr(trt_dtype, "name", str(trt_dtype)).rsplit(".", 1)[-1]
    found = _DTYPES.get(name)
    if found is not None:
        return found
    import ml_dtypes

    extra: dict[str, Any] = {"BF16": ml_dtypes.bfloat16, "FP8": ml_dtypes.float8_e4m3fn}
    if name in extra:
        return np.dtype(extra[name])
    raise TypeError(f"TensorRT type {name} has no numpy array type in ortcore")


class _ThreadState:
    """One thread's execution context, stream and device buffers."""

    def __init__(self, context: Any, stream: int) -> None:
        self.context = context
        self.stream = stream
        self.buffers: dict[str, tuple[int, int]] = {}  # name -> (address, capacity)
        self.shapes: dict[str, Dims] = {}

    def buffer(self, memory: Memory, name: str, nbytes: int) -> int:
        ptr, size = self.buffers.get(name, (0, 0))
        if nbytes > size or not ptr:
            if ptr:
                memory.free(ptr)
            size = max(nbytes, 256)
            ptr = memory.alloc(size)
            self.buffers[name] = (ptr, size)
        return ptr


class Runner:
    """A deserialized engine, run on numpy values (see the module docstring).

    Args:
        module: the TensorRT module.
        plan: the serialized engine.
        memory: device memory and copies (:class:`ortcore_tensorrt._cuda.CudaDriver`).
        outputs: the group's output names and numpy types, in order.
        device: the provider of the CUDA device whose tensors
            (``ep_sdk.ContiguousTensor``) the engine reads and writes in
            place, lent by the host (an ``ep_sdk.DevicePeer``; ``None``:
            numpy values, copied in and out).
    """

    def __init__(
        self,
        module: Any,
        plan: bytes,
        memory: Memory,
        outputs: Sequence[tuple[str, np.dtype]],
        device: ep_sdk.DevicePeer | None = None,
    ) -> None:
        self.module = module
        self.memory = memory
        self.device = device
        self.allocator = device.allocator() if device is not None else None
        memory.activate()
        self.runtime = module.Runtime(logger(module))
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise RuntimeError(
                f"{module.__name__} could not deserialize the engine (built by another "
                "version, or for another device)"
            )
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = module.TensorIOMode.INPUT
        self.inputs = [n for n in names if self.engine.get_tensor_mode(n) == is_input]
        # shape tensor inputs that TensorRT reads on the host: bound, not copied
        host = getattr(getattr(module, "TensorLocation", None), "HOST", None)
        self.host_inputs = {
            n
            for n in self.inputs
            if host is not None and self.engine.get_tensor_location(n) == host
        }
        known = set(names)
        missing = [n for n, _ in outputs if n not in known]
        if missing:
            raise RuntimeError(f"the engine has no output tensor {missing[0]!r}")
        self.outputs = list(outputs)
        self.types = {n: numpy_dtype(self.engine.get_tensor_dtype(n)) for n in names}
        self._local = threading.local()
        self._states: list[_ThreadState] = []
        self._lock = threading.Lock()

    def _state(self) -> _ThreadState:
        state: _ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            self.memory.activate()
            context = self.engine.create_execution_context()
            if context is None:
                raise RuntimeError("TensorRT could not create an execution context")
            state = _ThreadState(context, self.memory.stream())
            self._local.state = state
            with self._lock:
                self._states.append(state)
        return state

    def run(self, feeds: Mapping[str, Any]) -> list[Any]:
        """Run on ``feeds`` (by input name; names the engine dropped are
        ignored); the group's outputs in order, as their ONNX types: numpy
        arrays, or with ``device`` its tensors (inputs read where they are,
        outputs written into new ones; a value whose type the engine changes,
        or a shape tensor, goes by the host)."""
        state = self._state()
        memory, ctx, stream = self.memory, state.context, state.stream
        memory.activate()
        staged = []  # keeps the host copies alive until the stream is synchronized
        for name in self.inputs:
            value = feeds[name]
            # a device tensor (ep_sdk.ContiguousTensor; hasattr is the cheap check)
            if not isinstance(value, np.ndarray) and hasattr(value, "ptr"):
                if name not in self.host_inputs and value.dtype == self.types[name]:
                    value.wait()  # the work that made it, on its provider's stream
                    staged.append(value)
                    if state.shapes.get(name) != value.shape:
                        if not ctx.set_input_shape(name, value.shape):
                            raise ValueError(
                                f"TensorRT refused shape {value.shape} for input {name!r} "
                                "(outside the engine's optimization profile)"
                            )
                        state.shapes[name] = value.shape
                    ctx.set_tensor_address(name, value.ptr)
                    continue
                assert self.device is not None  # only a peer's tensors have a ptr
                value = self.device.to_host(value)
            value = np.ascontiguousarray(np.asarray(value), dtype=self.types[name])
            staged.append(value)
            if state.shapes.get(name) != value.shape:
                if not ctx.set_input_shape(name, value.shape):
                    raise ValueError(
                        f"TensorRT refused shape {value.shape} for input {name!r} "
                        "(outside the engine's optimization profile)"
                    )
                state.shapes[name] = value.shape
            if name in self.host_inputs:
                ctx.set_tensor_address(name, value.ctypes.data)
                continue
            ptr = state.buffer(memory, name, value.nbytes)
            memory.to_device(ptr, value, stream)
            ctx.set_tensor_address(name, ptr)
        results: list[Any] = []
        for name, onnx_type in self.outputs:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(
                    f"output {name!r} has a data-dependent shape {shape}, which this "
                    "provider does not run"
                )
            if self.allocator is not None and self.types[name] == onnx_type:
                out = self.allocator.allocate(shape, onnx_type)  # written in place
                ctx.set_tensor_address(
                    name, out.ptr if out.nbytes else state.buffer(memory, name, 1)
                )
            else:
                out = np.empty(shape, self.types[name])
                ctx.set_tensor_address(name, state.buffer(memory, name, out.nbytes))
            results.append(out)
        if not ctx.execute_async_v3(stream):
            raise RuntimeError("TensorRT's execute_async_v3 failed (see its log)")
        for (name, _), out in zip(self.outputs, results):
            if isinstance(out, np.ndarray):
                memory.to_host(out, state.buffers[name][0], stream)
        memory.synchronize(stream)
        del staged
        done = [r if r.dtype == t else r.astype(t) for r, (_, t) in zip(results, self.outputs)]
        device = self.device
        if device is not None:  # every output on the device
            done = [r if not isinstance(r, np.ndarray) else device.from_host(r) for r in done]
        return done

    def close(self) -> None:
        """Free every thread's device buffers."""
        with self._lock:
            states, self._states = self._states, []
        for state in states:
            for ptr, _ in state.buffers.values():
                try:
                    self.memory.free(ptr)
                except Exception:
                    pass
            state.buffers.clear()
