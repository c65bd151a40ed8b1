"""``IOBinding``: inputs and outputs bound ahead of a run, on the host or a device.

Values bound on a provider's device stay there: the session runs a plan
variant whose inputs arrive on that device and whose outputs are handed back
on the device they were bound to, so no copy is made on the way in or out.

As in onnxruntime, a name the session does not have, and any bad argument
found while running a binding, raise a ``RuntimeError``
(:class:`~ortcore.InvalidArgumentRuntimeError`, still an ``InvalidArgument``).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from ep_sdk import Device

from .devices import OrtDevice
from .errors import InvalidArgument, InvalidArgumentRuntimeError
from .lora import warn_ignored
from .native_session import NativeSession
from .ortvalue import OrtValue, OrtValueVector, device_of, numpy_dtype

if TYPE_CHECKING:
    from .options import RunOptions

__all__ = ["BindingSession", "IOBinding", "run_binding"]


class BindingSession(Protocol):
    """What an :class:`IOBinding` needs from its session (``InferenceSession`` has it)."""

    def check_input_name(self, name: str) -> None:
        """Raise ``InvalidArgument`` unless a feed may set input ``name``."""
        ...

    def check_output_name(self, name: str) -> None:
        """Raise ``InvalidArgument`` unless ``name`` is one of the model's outputs."""
        ...

    def run_with_binding(
        self,
        inputs: Mapping[str, Any],
        outputs: Sequence[tuple[str, Device]],
        run_options: RunOptions | None = None,
    ) -> list[OrtValue]:
        """Run with ``inputs`` (OrtValues, host or device) and hand back one
        OrtValue per ``(name, device)`` of ``outputs``, on that device."""
        ...


@contextlib.contextmanager
def _as_runtime_error() -> Iterator[None]:
    """Re-raise an ``InvalidArgument`` that is not a ``RuntimeError`` as one
    (onnxruntime's binding calls raise ``RuntimeError``)."""
    try:
        yield
    except InvalidArgument as exc:
        if isinstance(exc, RuntimeError):
            raise
        raise InvalidArgumentRuntimeError(str(exc)) from exc


def _array_at(
    buffer_ptr: int, element_type: Any, shape: Sequence[int], what: str = "bind_input"
) -> np.ndarray:
    """A numpy view of host memory at ``buffer_ptr`` (as onnxruntime binds raw pointers).

    Raises:
        InvalidArgumentRuntimeError: a string element type (Python string
            objects cannot be read from raw memory).
    """
    dtype = numpy_dtype(element_type)
    if dtype.kind in "OUS":
        raise InvalidArgumentRuntimeError(
            f"{what}: string tensors cannot be bound by raw pointer (buffer_ptr); bind the "
            "array with bind_cpu_input / bind_ortvalue_input, or let the output be "
            "allocated (bind_output(name)), then read it with copy_outputs_to_cpu()"
        )
    dims = [int(d) for d in shape]
    count = int(np.prod(dims)) if dims else 1
    raw = (ctypes.c_byte * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(cast(Any, raw), dtype=dtype, count=count).reshape(dims)


class IOBinding:
    """Inputs and outputs bound to a session (``onnxruntime.IOBinding``).

    Create with ``session.io_binding()``, bind, then
    ``session.run_with_iobinding(binding)``.
    """

    def __init__(self, session: BindingSession) -> None:
        # onnxruntime's SessionIOBinding(sess._sess) binds to the native layer's
        # session object: bind to the ortcore session it stands for.
        if isinstance(session, NativeSession):
            session = session.session
        self._session = session
        self._inputs: dict[str, OrtValue] = {}
        self._outputs: dict[str, tuple[Device, OrtValue | None]] = {}
        self._results: list[OrtValue] = []

    # -- inputs ------------------------------------------------------------

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        """Bind a numpy array as input ``name``."""
        self.bind_ortvalue_input(name, OrtValue.ortvalue_from_numpy(arr_on_cpu))

    def bind_input(
        self,
        name: str,
        device_type: Any,
        device_id: int = 0,
        element_type: Any = None,
        shape: Sequence[int] | None = None,
        buffer_ptr: int | None = None,
    ) -> None:
        """Bind input ``name`` to memory at ``buffer_ptr`` (host memory), or to an
        :class:`OrtValue` given in place of ``device_type``. An :class:`OrtDevice`
        in place of ``device_type`` takes onnxruntime's native-layer arguments,
        ``(name, device, element_type, shape, buffer_ptr)``."""
        if isinstance(device_type, OrtValue):
            self.bind_ortvalue_input(name, device_type)
            return
        if isinstance(device_type, OrtDevice):
            device = device_type.to_device()
            element_type, shape, buffer_ptr = device_id, element_type, shape  # type: ignore[assignment]
        else:
            device = device_of(device_type, device_id)
        if buffer_ptr is None or element_type is None or shape is None:
            raise InvalidArgument(
                f"bind_input({name!r}): give element_type, shape and buffer_ptr, or an OrtValue"
            )
        if not device.is_host:
            raise InvalidArgument(
                f"bind_input({name!r}): a raw pointer into {device} memory cannot be bound; "
                "bind an OrtValue created on that device instead"
            )
        array = _array_at(buffer_ptr, element_type, shape, f"bind_input({name!r})")
        self.bind_ortvalue_input(name, OrtValue(array))

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        """Bind an :class:`OrtValue` (host or device) as input ``name``."""
        with _as_runtime_error():
            self._session.check_input_name(name)
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"bind_ortvalue_input({name!r}) takes an OrtValue")
        self._inputs[name] = ortvalue

    # -- outputs -----------------------------------------------------------

    def bind_output(
        self,
        name: str,
        device_type: Any = "cpu",
        device_id: int = 0,
        element_type: Any = None,
        shape: Sequence[int] | None = None,
        buffer_ptr: int | None = None,
    ) -> None:
        """Bind output ``name``: produced on ``device_type`` (the host by default),
        or written into host memory at ``buffer_ptr``. An :class:`OrtDevice` in
        place of ``device_type`` takes onnxruntime's native-layer arguments,
        ``(name, device)`` or ``(name, device, element_type, shape, buffer_ptr)``."""
        if isinstance(device_type, OrtValue):
            self.bind_ortvalue_output(name, device_type)
            return
        with _as_runtime_error():
            self._session.check_output_name(name)
        if isinstance(device_type, OrtDevice):
            device = device_type.to_device()
            if element_type is not None:  # the native call's element type, shape, pointer
                element_type, shape, buffer_ptr = device_id, element_type, shape  # type: ignore[assignment]
        else:
            device = device_of(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = (device, None)
            return
        if element_type is None or shape is None:
            raise InvalidArgument(f"bind_output({name!r}): buffer_ptr needs element_type and shape")
        if not device.is_host:
            raise InvalidArgument(
                f"bind_output({name!r}): a raw pointer into {device} memory cannot be bound; "
                "bind an OrtValue created on that device instead"
            )
        array = _array_at(buffer_ptr, element_type, shape, f"bind_output({name!r})")
        self._outputs[name] = (device, OrtValue(array))

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Bind output ``name`` to a preallocated :class:`OrtValue`; runs write into it."""
        with _as_runtime_error():
            self._session.check_output_name(name)
        if not isinstance(ortvalue, OrtValue):
            raise InvalidArgument(f"bind_ortvalue_output({name!r}) takes an OrtValue")
        self._outputs[name] = (ortvalue.device, ortvalue)

    # -- results -----------------------------------------------------------

    def synchronize_inputs(self) -> None:
        """Wait until bound inputs are ready (ortcore copies synchronously: nothing to do)."""

    def synchronize_outputs(self) -> None:
        """Wait until outputs are ready (ortcore runs synchronously: nothing to do)."""

    def get_outputs(self) -> list[OrtValue]:
        """The last run's outputs, in the order they were bound."""
        return list(self._results)

    def get_outputs_as_ortvaluevector(self) -> OrtValueVector:
        """The last run's outputs as an :class:`~ortcore.ortvalue.OrtValueVector`."""
        return OrtValueVector(self._results)

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """The last run's outputs as numpy arrays."""
        return [v.numpy() for v in self._results]

    def clear_binding_inputs(self) -> None:
        """Forget every bound input."""
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        """Forget every bound output (and the last results)."""
        self._outputs.clear()
        self._results = []


def run_binding(
    session: BindingSession, binding: IOBinding, run_options: RunOptions | None = None
) -> None:
    """Run ``session`` with the values bound in ``binding`` (``run_with_iobinding``).

    Outputs bound to a preallocated :class:`OrtValue` are written into it; the
    run's outputs, in the order they were bound, are then the binding's
    ``get_outputs()``.

    Raises:
        InvalidArgumentRuntimeError: no output is bound, or a bad input as
            ``InferenceSession.run`` finds it (onnxruntime raises ``RuntimeError``).
    """
    outputs = binding._outputs
    if not outputs:
        raise InvalidArgumentRuntimeError(
            "run_with_iobinding: bind at least one output (onnxruntime: At least one "
            "output should be requested.)"
        )
    names = list(outputs)
    warn_ignored(run_options)  # onnxruntime's binding path feeds no adapters either
    with _as_runtime_error():
        results = session.run_with_binding(
            binding._inputs, [(n, outputs[n][0]) for n in names], run_options
        )
    values = []
    for name, value in zip(names, results):
        bound = outputs[name][1]
        if bound is None:
            values.append(value)
        else:
            bound._store(value.value)
            values.append(bound)
    binding._results = values
