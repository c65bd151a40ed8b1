"""Calibration: run the float model on representative data and record each tensor's range.

The model is augmented to output the tensors to calibrate and run on an
``ortcore.InferenceSession``; MinMax keeps each batch's minimum and maximum,
Entropy/Percentile/Distribution build histograms (:mod:`._histogram`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ._calib_data import CalibrationDataReader, CalibrationMethod, TensorData, TensorsData
from ._histogram import HistogramCollector
from ._model import load_inferred

__all__ = [
    "CalibraterBase",
    "CalibrationDataReader",
    "CalibrationMethod",
    "DistributionCalibrater",
    "EntropyCalibrater",
    "HistogramCalibrater",
    "MinMaxCalibrater",
    "PercentileCalibrater",
    "TensorData",
    "TensorsData",
    "create_calibrator",
]


_FLOATS = {TensorProto.FLOAT, TensorProto.FLOAT16}


class CalibraterBase:
    """Loads the model, picks the tensors to calibrate, runs the augmented model on ortcore."""

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        symmetric: bool = False,
        use_external_data_format: bool = False,
        per_channel: bool = False,
    ) -> None:
        self.model = load_inferred(model_path, what="model_path")
        self.op_types_to_calibrate = op_types_to_calibrate
        self.augmented_model_path = augmented_model_path
        self.symmetric = symmetric
        self.use_external_data_format = use_external_data_format
        self.per_channel = per_channel
        self.infer_session: Any = None
        self.execution_providers: list[Any] = ["CPUExecutionProvider"]
        self.model_original_outputs = {o.name for o in self.model.graph.output}
        self.tensors_to_calibrate: list[str] = []

    def set_execution_providers(
        self, execution_providers: Sequence[Any] = ("CPUExecutionProvider",)
    ) -> None:
        """Run calibration on these providers (re-creates the session)."""
        self.execution_providers = list(execution_providers)
        self.create_inference_session()

    def create_inference_session(self) -> None:
        """An ortcore session on the augmented model, optimizations off (every tensor stays)."""
        import ortcore

        options = ortcore.SessionOptions()
        options.graph_optimization_level = ortcore.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.infer_session = ortcore.InferenceSession(
            str(self.augmented_model_path), sess_options=options, providers=self.execution_providers
        )

    def select_tensors_to_calibrate(
        self, model: onnx.ModelProto
    ) -> tuple[set[str], dict[str, Any]]:
        """Float inputs/outputs (not initializers) of the nodes whose type is calibrated."""
        value_infos = {vi.name: vi for vi in model.graph.value_info}
        value_infos.update({o.name: o for o in model.graph.output})
        value_infos.update({i.name: i for i in model.graph.input})
        initializers = {init.name for init in model.graph.initializer}
        tensors: set[str] = set()
        for node in model.graph.node:
            if self.op_types_to_calibrate and node.op_type not in self.op_types_to_calibrate:
                continue
            for name in itertools.chain(node.input, node.output):
                vi = value_infos.get(name)
                if (
                    vi is not None
                    and vi.type.HasField("tensor_type")
                    and vi.type.tensor_type.elem_type in _FLOATS
                    and name not in initializers
                ):
                    tensors.add(name)
        return tensors, value_infos

    def get_augment_model(self) -> onnx.ModelProto:
        """The augmented model (after :meth:`augment_graph`)."""
        return self.model

    def augment_graph(self) -> None:
        """Make every tensor to calibrate a graph output and save the augmented model."""
        tensors, value_infos = self.select_tensors_to_calibrate(self.model)
        self.tensors_to_calibrate = sorted(tensors)
        for name in self.tensors_to_calibrate:
            if name not in self.model_original_outputs:
                self.model.graph.output.append(value_infos[name])
        onnx.save(
            self.model,
            str(self.augmented_model_path),
            save_as_external_data=self.use_external_data_format,
        )

    def _run(self, data_reader: CalibrationDataReader) -> Iterator[dict[str, np.ndarray]]:
        """Each feed's values of the tensors to calibrate; errors name the feed at fault."""
        if self.infer_session is None:
            self.create_inference_session()
        expected = {i.name for i in self.infer_session.get_inputs()}
        names = [o.name for o in self.infer_session.get_outputs()]
        wanted = set(self.tensors_to_calibrate)
        index = 0
        while True:
            feed = data_reader.get_next()
            if not feed:
                return
            if not isinstance(feed, dict):
                raise TypeError(
                    f"calibration data reader: feed {index} is a {type(feed).__name__}, not a dict"
                )
            unknown = sorted(set(feed) - expected)
            missing = sorted(expected - set(feed))
            if unknown or missing:
                raise ValueError(
                    f"calibration data reader: feed {index} does not match the model's inputs "
                    f"{sorted(expected)}: unknown {unknown}, missing {missing}"
                )
            outputs = self.infer_session.run(None, feed)
            yield {n: np.asarray(v) for n, v in zip(names, outputs, strict=True) if n in wanted}
            index += 1

    def collect_data(self, data_reader: CalibrationDataReader) -> None:
        """Run the model on every feed of ``data_reader`` and accumulate statistics."""
        raise NotImplementedError

    def compute_data(self) -> TensorsData:
        """The ranges chosen from the data collected so far."""
        raise NotImplementedError


class MinMaxCalibrater(CalibraterBase):
    """Range = the minimum and maximum seen (or their moving average)."""

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        symmetric: bool = False,
        use_external_data_format: bool = False,
        moving_average: bool = False,
        averaging_constant: float = 0.01,
        max_intermediate_outputs: int | None = None,
        per_channel: bool = False,
    ) -> None:
        super().__init__(
            model_path,
            op_types_to_calibrate,
            augmented_model_path,
            symmetric,
            use_external_data_format,
            per_channel,
        )
        if moving_average and not 0 <= averaging_constant <= 1:
            raise ValueError(
                f"CalibMovingAverageConstant must be in [0, 1], got {averaging_constant}"
            )
        self.moving_average = moving_average
        self.averaging_constant = averaging_constant
        self.max_intermediate_outputs = max_intermediate_outputs
        self.intermediate_outputs: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []
        self.calibrate_tensors_range: TensorsData | None = None

    def _reduce(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if arr.size == 0:
            nan = np.full(1, np.nan, dtype=arr.dtype)
            return nan, nan
        if self.per_channel and arr.ndim >= 2:
            axes = (0, *range(2, arr.ndim))
            return np.min(arr, axis=axes), np.max(arr, axis=axes)
        return np.min(arr).reshape(1), np.max(arr).reshape(1)

    def clear_collected_data(self) -> None:
        """Forget the batches not yet folded into the ranges."""
        self.intermediate_outputs = []

    def collect_data(self, data_reader: CalibrationDataReader) -> None:
        """Record each feed's per-tensor min and max."""
        for values in self._run(data_reader):
            self.intermediate_outputs.append({n: self._reduce(v) for n, v in values.items()})
            if (
                self.max_intermediate_outputs is not None
                and len(self.intermediate_outputs) >= self.max_intermediate_outputs
            ):
                self.compute_data()
                self.clear_collected_data()
        if not self.intermediate_outputs and self.calibrate_tensors_range is None:
            raise ValueError("calibration data reader yielded no data: no ranges were collected")
        self.compute_data()
        self.clear_collected_data()

    def merge_range(self, old_range: TensorsData, new_range: TensorsData) -> TensorsData:
        """Fold a chunk's ranges into the running ones (min/max, or the moving average)."""
        for key, value in old_range.items():
            old_min, old_max = value.range_value
            new_min, new_max = new_range[key].range_value
            if self.moving_average:
                lo = old_min + self.averaging_constant * (new_min - old_min)
                hi = old_max + self.averaging_constant * (new_max - old_max)
            else:
                lo, hi = np.minimum(old_min, new_min), np.maximum(old_max, new_max)
            new_range[key] = TensorData(lowest=lo, highest=hi)
        return new_range

    def compute_data(self) -> TensorsData:
        """The ranges of every tensor calibrated so far."""
        if not self.intermediate_outputs:
            if self.calibrate_tensors_range is None:
                raise ValueError("no calibration data collected: call collect_data() first")
            return self.calibrate_tensors_range
        pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for name in self.tensors_to_calibrate:
            mins = [batch[name][0] for batch in self.intermediate_outputs]
            maxs = [batch[name][1] for batch in self.intermediate_outputs]
            with np.errstate(all="ignore"):
                if self.moving_average:
                    lo, hi = np.nanmean(mins, axis=0), np.nanmean(maxs, axis=0)
                else:
                    lo, hi = np.nanmin(mins, axis=0), np.nanmax(maxs, axis=0)
            lo = np.asarray(lo, dtype=mins[0].dtype)
            hi = np.asarray(hi, dtype=maxs[0].dtype)
            if self.symmetric:
                absmax = np.nanmax([np.abs(lo), np.abs(hi)], axis=0)
                pairs[name] = (-absmax, absmax)
            else:
                pairs[name] = (lo, hi)
        new = TensorsData(CalibrationMethod.MinMax, pairs)
        self.calibrate_tensors_range = (
            self.merge_range(self.calibrate_tensors_range, new)
            if self.calibrate_tensors_range
            else new
        )
        return self.calibrate_tensors_range


class HistogramCalibrater(CalibraterBase):
    """Collects every tensor's values into histograms; subclasses choose the range."""

    method_enum = CalibrationMethod.Entropy

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        use_external_data_format: bool = False,
        method: str = "percentile",
        symmetric: bool = False,
        num_bins: int = 128,
        num_quantized_bins: int = 2048,
        percentile: float = 99.999,
        scenario: str = "same",
    ) -> None:
        super().__init__(
            model_path,
            op_types_to_calibrate,
            augmented_model_path,
            symmetric,
            use_external_data_format,
        )
        self.collector: HistogramCollector | None = None
        self.method = method
        self.num_bins = num_bins
        self.num_quantized_bins = num_quantized_bins
        self.percentile = percentile
        self.scenario = scenario

    def collect_data(self, data_reader: CalibrationDataReader) -> None:
        """Add every feed's tensor values to the histograms."""
        merged: dict[str, list[np.ndarray]] = {}
        for values in self._run(data_reader):
            for name, value in values.items():
                merged.setdefault(name, []).append(value)
        if not merged:
            raise ValueError(
                "calibration data reader yielded no data: no histograms were collected"
            )
        if self.collector is None:
            self.collector = HistogramCollector(
                self.method,
                self.symmetric,
                self.num_bins,
                self.num_quantized_bins,
                self.percentile,
                self.scenario,
            )
        self.collector.collect(merged)

    def compute_data(self) -> TensorsData:
        """The ranges chosen from the histograms."""
        if self.collector is None:
            raise ValueError("no histogram collected: call collect_data() first")
        return TensorsData(self.method_enum, self.collector.compute_collection_result())


class EntropyCalibrater(HistogramCalibrater):
    """Range minimizing the KL divergence between float and quantized distributions."""

    method_enum = CalibrationMethod.Entropy

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        use_external_data_format: bool = False,
        method: str = "entropy",
        symmetric: bool = False,
        num_bins: int = 128,
        num_quantized_bins: int = 128,
    ) -> None:
        super().__init__(
            model_path,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            method=method,
            symmetric=symmetric,
            num_bins=num_bins,
            num_quantized_bins=num_quantized_bins,
        )


class PercentileCalibrater(HistogramCalibrater):
    """Range covering ``percentile`` percent of the values."""

    method_enum = CalibrationMethod.Percentile

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        use_external_data_format: bool = False,
        method: str = "percentile",
        symmetric: bool = False,
        num_bins: int = 2048,
        percentile: float = 99.999,
    ) -> None:
        super().__init__(
            model_path,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            method=method,
            symmetric=symmetric,
            num_bins=num_bins,
            percentile=percentile,
        )


class DistributionCalibrater(HistogramCalibrater):
    """Mean and deviation of the values (float 8 scales)."""

    method_enum = CalibrationMethod.Distribution

    def __init__(
        self,
        model_path: str | Path | onnx.ModelProto,
        op_types_to_calibrate: Sequence[str] | None = None,
        augmented_model_path: str | Path = "augmented_model.onnx",
        use_external_data_format: bool = False,
        method: str = "distribution",
        num_bins: int = 128,
        scenario: str = "same",
    ) -> None:
        super().__init__(
            model_path,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            method=method,
            num_bins=num_bins,
            scenario=scenario,
        )


def create_calibrator(
    model: str | Path | onnx.ModelProto,
    op_types_to_calibrate: Sequence[str] | None = None,
    augmented_model_path: str | Path = "augmented_model.onnx",
    calibrate_method: CalibrationMethod = CalibrationMethod.MinMax,
    use_external_data_format: bool = False,
    providers: Sequence[Any] | None = None,
    extra_options: dict[str, Any] | None = None,
) -> CalibraterBase:
    """A calibrator for ``calibrate_method``, its model augmented and its ortcore session open.

    ``extra_options`` takes onnxruntime's keys: symmetric, moving_average,
    averaging_constant, max_intermediate_outputs, per_channel (MinMax);
    num_bins, num_quantized_bins, percentile, scenario (histograms).
    """
    opts = dict(extra_options or {})
    method = calibrate_method
    if isinstance(method, str):
        try:
            method = CalibrationMethod[method]
        except KeyError:
            raise ValueError(
                f"unknown CalibrationMethod {calibrate_method!r}; expected one of "
                + ", ".join(m.name for m in CalibrationMethod)
            ) from None
    calibrator: CalibraterBase
    if method == CalibrationMethod.MinMax:
        calibrator = MinMaxCalibrater(
            model,
            op_types_to_calibrate,
            augmented_model_path,
            symmetric=opts.get("symmetric", False),
            use_external_data_format=use_external_data_format,
            moving_average=opts.get("moving_average", False),
            averaging_constant=opts.get("averaging_constant", 0.01),
            max_intermediate_outputs=opts.get("max_intermediate_outputs"),
            per_channel=opts.get("per_channel", False),
        )
    elif method == CalibrationMethod.Entropy:
        calibrator = EntropyCalibrater(
            model,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            symmetric=opts.get("symmetric", False),
            num_bins=opts.get("num_bins", 128),
            num_quantized_bins=opts.get("num_quantized_bins", 128),
        )
    elif method == CalibrationMethod.Percentile:
        calibrator = PercentileCalibrater(
            model,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            symmetric=opts.get("symmetric", True),
            num_bins=opts.get("num_bins", 2048),
            percentile=opts.get("percentile", 99.999),
        )
    elif method == CalibrationMethod.Distribution:
        calibrator = DistributionCalibrater(
            model,
            op_types_to_calibrate,
            augmented_model_path,
            use_external_data_format,
            num_bins=opts.get("num_bins", 2048),
            scenario=opts.get("scenario", "same"),
        )
    else:
        raise ValueError(f"unsupported calibration method {calibrate_method!r}")
    calibrator.augment_graph()
    if providers:
        calibrator.execution_providers = list(providers)
    calibrator.create_inference_session()
    return calibrator
