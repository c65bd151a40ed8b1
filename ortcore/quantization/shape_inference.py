"""quant_pre_process: shape inference and light optimization before quantization."""

from __future__ import annotations

import logging
import os
from typing import Any

import onnx

from ._model import PREPROCESS_KEY, PREPROCESS_VALUE, load_inferred, set_metadata

__all__ = ["quant_pre_process"]

logger = logging.getLogger(__name__)


def _optimize(model: onnx.ModelProto) -> onnx.ModelProto:
    """Basic cleanups with onnx-ir's passes: small Constants lifted to initializers, unused nodes
    and opsets removed (a subset of what onnxruntime's ORT_ENABLE_BASIC level does)."""
    import onnx_ir as ir
    import onnx_ir.passes.common as common

    ir_model = ir.serde.deserialize_model(model)
    passes = [
        common.LiftConstantsToInitializersPass(lift_all_constants=False, size_limit=16),
        common.RemoveUnusedNodesPass(),
        common.RemoveUnusedOpsetsPass(),
    ]
    for p in passes:
        p(ir_model)
    return ir.serde.serialize_model(ir_model)


def quant_pre_process(
    input_model: str | os.PathLike[str] | onnx.ModelProto | None = None,
    output_model_path: str | os.PathLike[str] | None = None,
    skip_optimization: bool = False,
    skip_onnx_shape: bool = False,
    skip_symbolic_shape: bool = False,
    auto_merge: bool = False,
    int_max: int = 2**31 - 1,
    guess_output_rank: bool = False,
    verbose: int = 0,
    save_as_external_data: bool = False,
    all_tensors_to_one_file: bool = False,
    external_data_location: str | None = None,
    external_data_size_threshold: int = 1024,
    **deprecated_kwargs: Any,
) -> None:
    """Shape inference and model optimization, in preparation for quantization.

    onnx's shape inference stands in for both onnxruntime's symbolic and ONNX
    passes (``skip_symbolic_shape``/``auto_merge``/``int_max``/``guess_output_rank``
    are accepted; onnx's inference with data propagation infers the symbolic
    shapes it can). The output is marked as pre-processed, as onnxruntime marks it.
    """
    if input_model is None:
        input_model = deprecated_kwargs.pop("input_model_path", None)
    if input_model is None:
        raise ValueError("quant_pre_process: input_model is required")
    if output_model_path is None:
        raise ValueError("quant_pre_process: output_model_path is required")
    model = input_model if isinstance(input_model, onnx.ModelProto) else None
    if model is None:
        if not os.path.isfile(os.fspath(input_model)):
            raise FileNotFoundError(f"input_model: no model file at {os.fspath(input_model)!r}")
        model = onnx.load(os.fspath(input_model))
    if not skip_optimization:
        model = _optimize(model)
    if not (skip_onnx_shape and skip_symbolic_shape):
        model = onnx.shape_inference.infer_shapes(model, data_prop=not skip_symbolic_shape)
        model = load_inferred(model)
    set_metadata(model, PREPROCESS_KEY, PREPROCESS_VALUE)
    if save_as_external_data:
        onnx.save_model(
            model,
            os.fspath(output_model_path),
            save_as_external_data=True,
            all_tensors_to_one_file=all_tensors_to_one_file,
            location=external_data_location,
            size_threshold=external_data_size_threshold,
            convert_attribute=False,
        )
    else:
        onnx.save(model, os.fspath(output_model_path))
