"""A compiled group and how values cross between numpy and OpenVINO.

Three things the plain ``infer_request.infer(dict)`` call gets wrong, fixed here:

* **inputs OpenVINO renamed or dropped.** The ONNX frontend drops inputs no
  converted op reads (an empty ``axes``, an optional input it ignores), and
  when an op passes its input through to a graph output (``Dropout``), the
  compiled model's input port takes the output's name. :func:`read_group`
  records which ONNX input each ``Parameter`` came from, and inputs are fed
  by position; outputs are taken by position too (the compiled model has
  the group's outputs in order).
* **types numpy does not have.** bfloat16, the float8 types and the 4-bit
  types travel as ``ml_dtypes`` arrays in ortcore; OpenVINO's Python API
  refuses them as inputs and returns their raw bits as ``float16``, ``uint8``
  or packed nibbles. :func:`to_tensor` and :func:`from_ov` move the bits.
* **0-d arrays.** ``np.ascontiguousarray`` makes them 1-d, which OpenVINO
  refuses; they are fed as they are.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from typing import Any

import ep_sdk
import numpy as np

__all__ = ["Engine", "from_ov", "read_group", "to_tensor"]


def read_group(model: bytes) -> tuple[Any, list[str]]:
    """The group's ONNX bytes as an ``openvino.Model``, and the name of the
    ONNX input each of its parameters (in order) came from."""
    from openvino.frontend import FrontEndManager

    frontend = FrontEndManager().load_by_framework("onnx")
    decoded = frontend.decode(frontend.load(io.BytesIO(model)))
    onnx_name = {p.get_instance_id(): p.get_friendly_name() for p in decoded.get_parameters()}
    frontend.convert(decoded)  # in place: drops unread inputs, may rename passed-through ones
    names = [onnx_name.get(p.get_instance_id(), "") for p in decoded.get_parameters()]
    return decoded, names


def to_tensor(array: np.ndarray, element_type: Any) -> Any:
    """An input as OpenVINO takes it: numpy arrays as they are (C-contiguous),
    ``ml_dtypes`` arrays (bfloat16, float8, 4-bit) as an ``openvino.Tensor``
    holding the same bits (4-bit values packed two to a byte, low nibble first)."""
    if array.dtype.isbuiltin == 1:  # a numpy type, not an ml_dtypes one (2)
        return array if array.flags.c_contiguous else array.copy(order="C")
    import openvino

    tensor = openvino.Tensor(element_type, openvino.Shape(list(array.shape)))
    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8 if array.itemsize == 1 else "u2")
    if element_type.bitwidth == 4:
        nibbles = raw & 0xF
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        raw = nibbles[0::2] | (nibbles[1::2] << 4)
    np.asarray(tensor.data).reshape(-1).view(raw.dtype)[:] = raw
    return tensor


def from_ov(array: Any, dtype: np.dtype | None, packed_shape: Sequence[int] | None = None) -> Any:
    """An output as ortcore wants it, of ``dtype`` (the group output's; ``None``
    when unknown), from what OpenVINO returned: for an ``ml_dtypes`` type its
    raw bits, and for a 4-bit one (``packed_shape``: the output's real shape)
    its values packed two to a byte, low nibble first."""
    out = np.asarray(array)
    if dtype is None:
        return out
    if dtype.isbuiltin == 1:
        return out if out.dtype == dtype else out.astype(dtype)
    raw = (out if out.flags.c_contiguous else out.copy()).view(
        np.uint8 if dtype.itemsize == 1 else "u2"
    )
    if packed_shape is not None:
        count = int(np.prod(packed_shape, dtype=np.int64))
        nibbles = np.stack([raw.reshape(-1) & 0xF, raw.reshape(-1) >> 4], axis=-1)
        raw = nibbles.reshape(-1)[:count].reshape(tuple(packed_shape))
    return raw.view(dtype)


class Engine:
    """A compiled group, and one infer request per thread that runs it.

    ``input_names`` is the ONNX input each of the compiled model's inputs
    reads (:func:`read_group`); group inputs OpenVINO dropped are not fed.
    ``blob``: the tensor an imported model came from, kept alive with it.
    """

    def __init__(
        self,
        compiled: Any,
        group: ep_sdk.FusedGroup,
        input_names: Sequence[str],
        blob: Any = None,
    ) -> None:
        self.compiled = compiled
        self.blob = blob  # what the model was imported from: kept while it may be read
        self.input_names = list(input_names)
        ports = list(compiled.inputs)
        where = {v.name or "": i for i, v in enumerate(group.inputs)}
        if len(ports) != len(self.input_names) or not set(self.input_names) <= set(where):
            raise RuntimeError(
                f"{group.name}: OpenVINO's inputs {self.input_names} are not the group's "
                f"({', '.join(where)})"
            )
        self.inputs = [
            (k, where[name], port.get_element_type())
            for k, (name, port) in enumerate(zip(self.input_names, ports))
        ]
        if len(compiled.outputs) != len(group.outputs):
            raise RuntimeError(
                f"{group.name}: OpenVINO compiled {len(compiled.outputs)} outputs for the "
                f"group's {len(group.outputs)}"
            )
        self.outputs = list(compiled.outputs)
        self.dtypes = [
            None if v.dtype is None else np.dtype(v.dtype.numpy()) for v in group.outputs
        ]
        self.packed = [v.dtype is not None and v.dtype.bitwidth == 4 for v in group.outputs]
        self._local = threading.local()

    def run(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        """The group's outputs for ``inputs`` (the values of ``group.inputs``)."""
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self.compiled.create_infer_request()
        feeds = {k: to_tensor(np.asarray(inputs[i]), t) for k, i, t in self.inputs}
        result = request.infer(feeds, share_inputs=True, share_outputs=False)
        return [
            from_ov(result[port], dtype, list(request.get_tensor(port).shape) if packed else None)
            for port, dtype, packed in zip(self.outputs, self.dtypes, self.packed)
        ]
