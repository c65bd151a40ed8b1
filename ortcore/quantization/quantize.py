"""quantize_static, quantize_dynamic, quantize and their configuration classes."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnx

from ._base import Options, check_extra_options
from ._model import PREPROCESS_KEY, PREPROCESS_VALUE, has_metadata, load_inferred, opset_version
from .calibrate import CalibrationDataReader, CalibrationMethod, TensorsData, create_calibrator
from .qdq import QDQQuantizer
from .qoperator import QOperatorQuantizer
from .quant_utils import QuantFormat, QuantizationMode, QuantType, as_quant_type

__all__ = [
    "DynamicQuantConfig",
    "QuantConfig",
    "StaticQuantConfig",
    "quantize",
    "quantize_dynamic",
    "quantize_static",
]

logger = logging.getLogger(__name__)
ModelInput = str | os.PathLike[str] | onnx.ModelProto

# The op types each mode quantizes by default (onnxruntime's registries).
INTEGER_OPS = (
    "Conv",
    "MatMul",
    "Attention",
    "LSTM",
    "Gather",
    "Transpose",
    "EmbedLayerNormalization",
)
QLINEAR_OPS = (
    "ArgMax",
    "Conv",
    "Gemm",
    "MatMul",
    "Add",
    "Mul",
    "Relu",
    "Clip",
    "LeakyRelu",
    "Sigmoid",
    "MaxPool",
    "GlobalAveragePool",
    "Split",
    "Pad",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Resize",
    "AveragePool",
    "Concat",
    "Softmax",
    "Where",
    "Gather",
    "Transpose",
    "EmbedLayerNormalization",
)
QDQ_OPS = (
    "Conv",
    "ConvTranspose",
    "Gemm",
    "Clip",
    "Relu",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Resize",
    "MaxPool",
    "AveragePool",
    "Slice",
    "Pad",
    "MatMul",
    "Split",
    "Gather",
    "GatherElements",
    "Where",
    "InstanceNormalization",
    "LayerNormalization",
    "BatchNormalization",
    "TopK",
    "CumSum",
)


class QuantConfig:
    """What static and dynamic quantization share."""

    def __init__(
        self,
        activation_type: QuantType = QuantType.QUInt8,
        weight_type: QuantType = QuantType.QInt8,
        op_types_to_quantize: Sequence[str] | None = None,
        nodes_to_quantize: Sequence[str] | None = None,
        nodes_to_exclude: Sequence[str] | None = None,
        per_channel: bool = False,
        reduce_range: bool = False,
        use_external_data_format: bool = False,
    ) -> None:
        self.op_types_to_quantize = list(op_types_to_quantize or [])
        self.per_channel = per_channel
        self.reduce_range = reduce_range
        self.weight_type = weight_type
        self.activation_type = activation_type
        self.nodes_to_quantize = list(nodes_to_quantize or [])
        self.nodes_to_exclude = list(nodes_to_exclude or [])
        self.use_external_data_format = use_external_data_format


class StaticQuantConfig(QuantConfig):
    """Arguments of :func:`quantize_static`, for :func:`quantize`."""

    def __init__(
        self,
        calibration_data_reader: CalibrationDataReader,
        calibrate_method: CalibrationMethod = CalibrationMethod.MinMax,
        quant_format: QuantFormat = QuantFormat.QDQ,
        activation_type: QuantType = QuantType.QInt8,
        weight_type: QuantType = QuantType.QInt8,
        op_types_to_quantize: Sequence[str] | None = None,
        nodes_to_quantize: Sequence[str] | None = None,
        nodes_to_exclude: Sequence[str] | None = None,
        per_channel: bool = False,
        reduce_range: bool = False,
        use_external_data_format: bool = False,
        calibration_providers: Sequence[Any] | None = None,
        extra_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            activation_type,
            weight_type,
            op_types_to_quantize,
            nodes_to_quantize,
            nodes_to_exclude,
            per_channel,
            reduce_range,
            use_external_data_format,
        )
        self.calibration_data_reader = calibration_data_reader
        self.calibrate_method = calibrate_method
        self.quant_format = quant_format
        self.calibration_providers = calibration_providers
        self.extra_options = dict(extra_options or {})


class DynamicQuantConfig(QuantConfig):
    """Arguments of :func:`quantize_dynamic`, for :func:`quantize`."""

    def __init__(
        self,
        weight_type: QuantType = QuantType.QInt8,
        op_types_to_quantize: Sequence[str] | None = None,
        nodes_to_quantize: Sequence[str] | None = None,
        nodes_to_exclude: Sequence[str] | None = None,
        per_channel: bool = False,
        reduce_range: bool = False,
        use_external_data_format: bool = False,
        extra_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            weight_type=weight_type,
            op_types_to_quantize=op_types_to_quantize,
            nodes_to_quantize=nodes_to_quantize,
            nodes_to_exclude=nodes_to_exclude,
            per_channel=per_channel,
            reduce_range=reduce_range,
            use_external_data_format=use_external_data_format,
        )
        self.extra_options = dict(extra_options or {})


def _check_static_types(fmt: QuantFormat, act: QuantType, weight: QuantType) -> None:
    if act == QuantType.QInt8 and weight == QuantType.QUInt8:
        raise ValueError(
            "activation_type=QInt8 with weight_type=QUInt8 is not supported (as in onnxruntime)"
        )
    if (act == QuantType.QFLOAT8E4M3FN) != (weight == QuantType.QFLOAT8E4M3FN):
        raise ValueError(
            f"QFLOAT8E4M3FN must be both activation and weight type, got {act} and {weight}"
        )
    if (
        act in (QuantType.QInt16, QuantType.QUInt16)
        or weight in (QuantType.QInt16, QuantType.QUInt16)
    ) and (fmt != QuantFormat.QDQ):
        raise ValueError("only QuantFormat.QDQ supports 16-bit quantization types")
    if fmt != QuantFormat.QDQ and (
        act in (QuantType.QInt4, QuantType.QUInt4) or weight in (QuantType.QInt4, QuantType.QUInt4)
    ):
        raise ValueError("only QuantFormat.QDQ supports 4-bit quantization types")


def _update_opset(
    model: onnx.ModelProto, weight: QuantType, act: QuantType | None
) -> onnx.ModelProto:
    """Opset 21 for 16-bit types, 19 for float 8, at least 11 (what onnxruntime's tool does)."""
    version = opset_version(model)
    wide = (QuantType.QInt16, QuantType.QUInt16)
    target = version
    if version < 19 and weight == QuantType.QFLOAT8E4M3FN:
        target = 19
    elif version < 21 and (weight in wide or act in wide):
        target = 21
    elif version < 10:
        target = 11
    if target == version:
        return model
    logger.warning("the model's opset %d is converted to %d for this quantization", version, target)
    return load_inferred(onnx.version_converter.convert_version(model, target))


def _save(model: onnx.ModelProto, path: str | os.PathLike[str], external: bool) -> None:
    if external:
        onnx.save_model(
            model,
            os.fspath(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=Path(path).name + ".data",
        )
    else:
        onnx.save_model(model, os.fspath(path))


def _options(
    per_channel: bool,
    reduce_range: bool,
    weight: QuantType,
    act: QuantType,
    nodes_to_quantize: Sequence[str] | None,
    nodes_to_exclude: Sequence[str] | None,
    op_types: Sequence[str],
    extra: dict[str, Any],
) -> Options:
    return Options(
        per_channel=per_channel,
        reduce_range=reduce_range,
        weight_qtype=weight.tensor_type,
        activation_qtype=act.tensor_type,
        nodes_to_quantize=list(nodes_to_quantize or []),
        nodes_to_exclude=list(nodes_to_exclude or []),
        op_types_to_quantize=list(op_types),
        extra=extra,
    )


def quantize_static(
    model_input: ModelInput,
    model_output: str | os.PathLike[str],
    calibration_data_reader: CalibrationDataReader | None = None,
    quant_format: QuantFormat = QuantFormat.QDQ,
    op_types_to_quantize: Sequence[str] | None = None,
    per_channel: bool = False,
    reduce_range: bool = False,
    activation_type: QuantType = QuantType.QInt8,
    weight_type: QuantType = QuantType.QInt8,
    nodes_to_quantize: Sequence[str] | None = None,
    nodes_to_exclude: Sequence[str] | None = None,
    use_external_data_format: bool = False,
    calibrate_method: CalibrationMethod = CalibrationMethod.MinMax,
    calibration_providers: Sequence[Any] | None = None,
    extra_options: dict[str, Any] | None = None,
) -> None:
    """Calibrate on ``calibration_data_reader`` (on ortcore) and write the quantized model.

    ``quant_format`` QDQ inserts QuantizeLinear/DequantizeLinear around the float
    operators; QOperator replaces them by quantized operators. Arguments,
    defaults and ``extra_options`` keys are onnxruntime.quantization's.
    """
    act = as_quant_type(activation_type, "activation_type")
    weight = as_quant_type(weight_type, "weight_type")
    if isinstance(quant_format, str):
        quant_format = QuantFormat.from_string(quant_format)
    if isinstance(calibrate_method, str):
        try:
            calibrate_method = CalibrationMethod[calibrate_method]
        except KeyError:
            raise ValueError(f"unknown CalibrationMethod {calibrate_method!r}") from None
    if (
        QuantType.QFLOAT8E4M3FN in (act, weight)
    ) and calibrate_method != CalibrationMethod.Distribution:
        raise ValueError(
            "float 8 quantization needs calibrate_method=CalibrationMethod.Distribution"
        )
    _check_static_types(quant_format, act, weight)
    extra = dict(extra_options or {})
    check_extra_options(extra)
    if calibration_data_reader is None:
        raise ValueError("quantize_static needs a calibration_data_reader")
    if not callable(getattr(calibration_data_reader, "get_next", None)):
        raise TypeError(
            f"calibration_data_reader must have a get_next() method (a CalibrationDataReader), "
            f"got {type(calibration_data_reader).__name__}"
        )
    op_types = list(op_types_to_quantize or []) or sorted(set(QLINEAR_OPS) | set(QDQ_OPS))
    model = load_inferred(model_input)
    if not has_metadata(model, PREPROCESS_KEY, PREPROCESS_VALUE):
        logger.info(
            "the model was not pre-processed "
            "(ortcore.quantization.shape_inference.quant_pre_process)"
        )
    model = _update_opset(model, weight, act)
    calib_keys = {
        "CalibTensorRangeSymmetric": "symmetric",
        "CalibMovingAverage": "moving_average",
        "CalibMovingAverageConstant": "averaging_constant",
        "CalibMaxIntermediateOutputs": "max_intermediate_outputs",
        "CalibPercentile": "percentile",
    }
    calib_options = {dst: extra[src] for src, dst in calib_keys.items() if src in extra}
    with tempfile.TemporaryDirectory(prefix="ortcore.quant.") as tmp:
        path = Path(tmp) / "model_input.onnx"
        onnx.save_model(model, str(path), save_as_external_data=use_external_data_format)
        calibrator = create_calibrator(
            path,
            op_types,
            augmented_model_path=Path(tmp) / "augmented_model.onnx",
            calibrate_method=calibrate_method,
            use_external_data_format=use_external_data_format,
            providers=calibration_providers,
            extra_options=calib_options,
        )
        stride = extra.get("CalibStridedMinMax")
        if stride:
            total = len(calibration_data_reader)
            if total % stride:
                raise ValueError(
                    f"CalibStridedMinMax: {total} feeds do not divide into strides of {stride}"
                )
            for start in range(0, total, stride):
                calibration_data_reader.set_range(start_index=start, end_index=start + stride)
                calibrator.collect_data(calibration_data_reader)
        else:
            calibrator.collect_data(calibration_data_reader)
        tensors_range = calibrator.compute_data()
        if not isinstance(tensors_range, TensorsData):
            raise TypeError(f"calibrator returned {type(tensors_range).__name__}, not TensorsData")
        del calibrator
    opts = _options(
        per_channel, reduce_range, weight, act, nodes_to_quantize, nodes_to_exclude, op_types, extra
    )
    if quant_format == QuantFormat.QOperator:
        result = QOperatorQuantizer(
            model, opts, QuantizationMode.QLinearOps, True, tensors_range
        ).quantize_model()
    else:
        result = QDQQuantizer(model, opts, tensors_range).quantize_model()
    assert result is not None
    _save(result, model_output, use_external_data_format)


def quantize_dynamic(
    model_input: ModelInput,
    model_output: str | os.PathLike[str],
    op_types_to_quantize: Sequence[str] | None = None,
    per_channel: bool = False,
    reduce_range: bool = False,
    weight_type: QuantType = QuantType.QInt8,
    nodes_to_quantize: Sequence[str] | None = None,
    nodes_to_exclude: Sequence[str] | None = None,
    use_external_data_format: bool = False,
    extra_options: dict[str, Any] | None = None,
) -> None:
    """Quantize the weights now and the activations at run time (DynamicQuantizeLinear, uint8).

    MatMul with a constant B becomes MatMulInteger (MatMulConstBOnly defaults to
    True), Conv ConvInteger, Gemm a MatMul + Add first; Attention QAttention.
    """
    weight = as_quant_type(weight_type, "weight_type")
    if weight not in (QuantType.QInt8, QuantType.QUInt8):
        raise ValueError(f"quantize_dynamic supports weight_type QInt8 or QUInt8, got {weight}")
    extra = dict(extra_options or {})
    check_extra_options(extra)
    extra.setdefault("MatMulConstBOnly", True)
    op_types = list(op_types_to_quantize or []) or list(INTEGER_OPS)
    model = _update_opset(load_inferred(model_input), weight, None)
    opts = _options(
        per_channel,
        reduce_range,
        weight,
        QuantType.QUInt8,
        nodes_to_quantize,
        nodes_to_exclude,
        op_types,
        extra,
    )
    result = QOperatorQuantizer(
        model, opts, QuantizationMode.IntegerOps, False, None
    ).quantize_model()
    assert result is not None
    _save(result, model_output, use_external_data_format)


def quantize(
    model_input: ModelInput, model_output: str | os.PathLike[str], quant_config: QuantConfig
) -> None:
    """Quantize with a :class:`StaticQuantConfig` or :class:`DynamicQuantConfig`."""
    if isinstance(quant_config, StaticQuantConfig):
        quantize_static(
            model_input,
            model_output,
            quant_config.calibration_data_reader,
            calibrate_method=quant_config.calibrate_method,
            quant_format=quant_config.quant_format,
            activation_type=quant_config.activation_type,
            weight_type=quant_config.weight_type,
            op_types_to_quantize=quant_config.op_types_to_quantize,
            nodes_to_quantize=quant_config.nodes_to_quantize,
            nodes_to_exclude=quant_config.nodes_to_exclude,
            per_channel=quant_config.per_channel,
            reduce_range=quant_config.reduce_range,
            use_external_data_format=quant_config.use_external_data_format,
            calibration_providers=quant_config.calibration_providers,
            extra_options=quant_config.extra_options,
        )
    elif isinstance(quant_config, DynamicQuantConfig):
        quantize_dynamic(
            model_input,
            model_output,
            weight_type=quant_config.weight_type,
            op_types_to_quantize=quant_config.op_types_to_quantize,
            nodes_to_quantize=quant_config.nodes_to_quantize,
            nodes_to_exclude=quant_config.nodes_to_exclude,
            per_channel=quant_config.per_channel,
            reduce_range=quant_config.reduce_range,
            use_external_data_format=quant_config.use_external_data_format,
            extra_options=quant_config.extra_options,
        )
    else:
        raise TypeError(
            "quant_config must be a StaticQuantConfig or DynamicQuantConfig, "
            f"not {type(quant_config).__name__}"
            " (weight-only MatMulNBits configs are not supported by ortcore.quantization)"
        )
