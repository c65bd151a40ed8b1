"""onnxruntime.quantization's public API on ortcore: quantize models to int8 (and 4/16-bit).

``from ortcore.quantization import quantize_static, quantize_dynamic, ...``
works as ``from onnxruntime.quantization import ...`` does (and, after
``ortcore.install_as_onnxruntime()``, that import gives this package).
Calibration runs on ortcore sessions; the models written load in onnxruntime too.
"""

from .calibrate import (
    CalibraterBase,
    CalibrationDataReader,
    CalibrationMethod,
    MinMaxCalibrater,
    TensorData,
    TensorsData,
    create_calibrator,
)
from .quant_utils import QuantFormat, QuantizationMode, QuantType, write_calibration_table
from .quantize import (
    DynamicQuantConfig,
    QuantConfig,
    StaticQuantConfig,
    quantize,
    quantize_dynamic,
    quantize_static,
)
from .shape_inference import quant_pre_process

__all__ = [
    "CalibraterBase",
    "CalibrationDataReader",
    "CalibrationMethod",
    "DynamicQuantConfig",
    "MinMaxCalibrater",
    "QuantConfig",
    "QuantFormat",
    "QuantType",
    "QuantizationMode",
    "StaticQuantConfig",
    "TensorData",
    "TensorsData",
    "create_calibrator",
    "quant_pre_process",
    "quantize",
    "quantize_dynamic",
    "quantize_static",
    "write_calibration_table",
]
