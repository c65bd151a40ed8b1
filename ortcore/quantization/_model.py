"""Loading the model to quantize: path or ModelProto, shape inference, metadata."""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path

import onnx

__all__ = ["has_metadata", "load_inferred", "set_metadata"]

INFER_KEY, INFER_VALUE = "onnx.infer", "onnxruntime.quant"
PREPROCESS_KEY, PREPROCESS_VALUE = "onnx.quant.pre_process", "onnxruntime.quant"


def load_inferred(
    model_input: str | os.PathLike[str] | onnx.ModelProto, what: str = "model_input"
) -> onnx.ModelProto:
    """The model with onnx's shape inference applied (external data loaded).

    Raises:
        FileNotFoundError: ``model_input`` is a path with no file, named in the message.
        TypeError: ``model_input`` is neither a path nor a ModelProto.
    """
    with tempfile.TemporaryDirectory(prefix="ortcore.quant.") as tmp:
        if isinstance(model_input, onnx.ModelProto):
            path = Path(tmp) / "model.onnx"
            # Saved with external data (infer_shapes_path then works past 2 GB), from a copy:
            # onnx.save_model turns the tensors it externalizes into references in place.
            onnx.save_model(
                copy.deepcopy(model_input),
                str(path),
                save_as_external_data=True,
                location="model.onnx.data",
            )
        elif isinstance(model_input, (str, os.PathLike)):
            path = Path(model_input)
            if not path.is_file():
                raise FileNotFoundError(f"{what}: no model file at {str(path)!r}")
        else:
            raise TypeError(
                f"{what} must be a path or an onnx.ModelProto, not {type(model_input).__name__}"
            )
        inferred = Path(tmp) / "inferred.onnx"
        try:
            onnx.shape_inference.infer_shapes_path(str(path), str(inferred))
            model = onnx.load(str(inferred), load_external_data=False)
            onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
        except (
            onnx.onnx_cpp2py_export.shape_inference.InferenceError,
            onnx.checker.ValidationError,
        ):
            # Ops onnx does not know (contrib ops): keep the model as it is.
            model = onnx.load(str(path))
    set_metadata(model, INFER_KEY, INFER_VALUE)
    return model


def set_metadata(model: onnx.ModelProto, key: str, value: str) -> None:
    """Set ``key`` in the model's metadata_props (once)."""
    for prop in model.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    model.metadata_props.add(key=key, value=value)


def has_metadata(model: onnx.ModelProto, key: str, value: str) -> bool:
    """Whether the model's metadata_props holds ``key: value``."""
    return any(p.key == key and p.value == value for p in model.metadata_props)


def opset_version(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset version."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise ValueError("the model imports no ai.onnx opset")
