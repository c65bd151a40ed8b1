"""What calibration reads and produces: the data reader, methods, and per-tensor ranges.

``CalibrationDataReader`` feeds the calibration runs; ``TensorData`` holds what
was learned of one tensor (range, histogram, mean/std) and ``TensorsData`` maps
tensor names to it. Re-exported by :mod:`.calibrate` and the package, where
onnxruntime.quantization has them.
"""

from __future__ import annotations

import abc
from collections.abc import ItemsView, Iterator, KeysView, ValuesView
from enum import Enum
from typing import Any

import numpy as np

__all__ = ["CalibrationDataReader", "CalibrationMethod", "TensorData", "TensorsData"]


class CalibrationMethod(Enum):
    """How a tensor's range is chosen from the calibration data."""

    MinMax = 0
    Entropy = 1
    Percentile = 2
    Distribution = 3


class CalibrationDataReader(metaclass=abc.ABCMeta):
    """Feeds for calibration runs.

    ``get_next()`` returns ``{input name: array}``, or None at the end.
    """

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool:
        return (hasattr(subclass, "get_next") and callable(subclass.get_next)) or NotImplemented

    @abc.abstractmethod
    def get_next(self) -> dict[str, Any] | None:
        """The next feed, or None when the data is exhausted."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        result = self.get_next()
        if result is None:
            raise StopIteration
        return result

    def __len__(self) -> int:
        raise NotImplementedError

    def set_range(self, start_index: int, end_index: int) -> None:
        """Restrict the reader to feeds ``[start_index, end_index)`` (CalibStridedMinMax)."""
        raise NotImplementedError


class TensorData:
    """What calibration learned of one tensor: ``lowest``/``highest`` (and histogram, avg, std)."""

    # Declared, not assigned: a field exists only when given (hasattr tells which were).
    avg: np.ndarray
    std: np.ndarray
    lowest: np.ndarray
    highest: np.ndarray
    hist: np.ndarray
    hist_edges: np.ndarray
    bins: Any

    _allowed = frozenset(["avg", "std", "lowest", "highest", "hist", "hist_edges", "bins"])
    _floats = frozenset(["avg", "std", "lowest", "highest", "hist_edges"])

    def __init__(self, **kwargs: Any) -> None:
        self._attrs = list(kwargs)
        for k, v in kwargs.items():
            if k not in TensorData._allowed:
                raise ValueError(
                    f"TensorData: unexpected field {k!r}; allowed: {sorted(TensorData._allowed)}"
                )
            if k in TensorData._floats:
                if not hasattr(v, "dtype") or v.dtype not in (np.float16, np.float32):
                    raise ValueError(
                        f"TensorData: {k} must be a float32/float16 numpy value, got {v!r}"
                    )
            setattr(self, k, v)

    @property
    def range_value(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lowest, highest)``."""
        if not hasattr(self, "lowest") or not hasattr(self, "highest"):
            raise AttributeError("TensorData has no lowest/highest")
        return (self.lowest, self.highest)

    @property
    def avg_std(self) -> tuple[np.ndarray, np.ndarray]:
        """``(avg, std)`` (Distribution calibration)."""
        if not hasattr(self, "avg") or not hasattr(self, "std"):
            raise AttributeError("TensorData has no avg/std")
        return (self.avg, self.std)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (with ``CLS``)."""
        data = {k: getattr(self, k) for k in self._attrs}
        data["CLS"] = type(self).__name__
        return data

    def __repr__(self) -> str:
        return f"TensorData({', '.join(f'{k}={getattr(self, k)!r}' for k in self._attrs)})"


class TensorsData:
    """``{tensor name: TensorData}`` with the calibration method that produced it."""

    def __init__(self, calibration_method: CalibrationMethod, data: dict[str, Any]) -> None:
        self.calibration_method = calibration_method
        self.data: dict[str, TensorData] = {}
        for k, v in data.items():
            if not isinstance(k, str):
                raise TypeError(f"TensorsData keys must be tensor names, not {type(k).__name__}")
            if isinstance(v, tuple):
                if calibration_method == CalibrationMethod.MinMax and len(v) == 2:
                    v = TensorData(lowest=v[0], highest=v[1])
                elif len(v) == 4:
                    v = TensorData(lowest=v[0], highest=v[1], hist=v[2], bins=v[3])
                else:
                    raise TypeError(f"TensorsData: unexpected tuple of {len(v)} for {k!r}")
            if not isinstance(v, TensorData):
                raise TypeError(
                    f"TensorsData values must be TensorData, not {type(v).__name__} for {k!r}"
                )
            self.data[k] = v

    def __iter__(self) -> Iterator[str]:
        yield from self.data

    def __contains__(self, key: object) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> TensorData:
        return self.data[key]

    def __setitem__(self, key: str, value: TensorData) -> None:
        if key not in self.data:
            raise RuntimeError(f"only an existing tensor can be modified, {key!r} is not one")
        self.data[key] = value

    def __len__(self) -> int:
        return len(self.data)

    def keys(self) -> KeysView[str]:
        """Tensor names."""
        return self.data.keys()

    def values(self) -> ValuesView[TensorData]:
        """TensorData values."""
        return self.data.values()

    def items(self) -> ItemsView[str, TensorData]:
        """``(name, TensorData)`` pairs."""
        return self.data.items()
