"""Feature preprocessing of ai.onnx.ml: Scaler, Normalizer, Binarizer, Imputer,
OneHotEncoder, LabelEncoder, CategoryMapper, ArrayFeatureExtractor,
FeatureVectorizer, DictVectorizer, ZipMap.

Numeric lookups (LabelEncoder, OneHotEncoder) use sorted keys and
``searchsorted``; string lookups go through a dict, one string at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, to_numpy

from . import registry
from ._ml_common import ML, as_2d, object_array
from ._versions import per_schema_version


@registry.kernel("Scaler", since=1, domain=ML)
def scaler(info: NodeInfo) -> Compute:
    """(x - offset) * scale per feature (or one value for all), float32 out."""
    offset = np.asarray(info.attrs.get("offset") or [0.0], np.float64)
    scale = np.asarray(info.attrs.get("scale") or [1.0], np.float64)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        return (((x.astype(np.float64) - offset) * scale).astype(np.float32),)

    return compute


@registry.kernel("Normalizer", since=1, domain=ML)
def normalizer(info: NodeInfo) -> Compute:
    """Divide each row by its MAX, L1 or L2 norm (rows with norm 0 unchanged); float32 out."""
    norm = info.attrs.get("norm", "MAX")
    if norm not in ("MAX", "L1", "L2"):
        raise ValueError(f"{info.describe()}: unknown norm {norm!r}")

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        x2 = as_2d(x).astype(np.float64)
        if norm == "MAX":  # the largest value, not the largest magnitude (onnxruntime)
            div = x2.max(axis=1, keepdims=True, initial=-np.inf)
        elif norm == "L1":
            div = np.abs(x2).sum(axis=1, keepdims=True)
        else:
            div = np.sqrt(np.square(x2).sum(axis=1, keepdims=True))
        out = np.where(div != 0, x2 / np.where(div != 0, div, 1), x2)
        return (out.reshape(x.shape).astype(np.float32),)

    return compute


@registry.kernel("Binarizer", since=1, domain=ML)
def binarizer(info: NodeInfo) -> Compute:
    """1 where x > threshold, else 0, in x's type."""
    threshold = float(info.attrs.get("threshold", 0.0))
    return lambda x: ((x > threshold).astype(x.dtype),)


@registry.kernel("Imputer", since=1, domain=ML)
def imputer(info: NodeInfo) -> Compute:
    """Replace ``replaced_value`` (NaN by default for floats) per feature."""
    floats = info.attrs.get("imputed_value_floats")
    ints = info.attrs.get("imputed_value_int64s")
    if floats is not None and len(floats):
        values: np.ndarray = np.asarray(floats, np.float64)
        replaced: float = float(info.attrs.get("replaced_value_float", 0.0))
    elif ints is not None and len(ints):
        values = np.asarray(ints, np.int64)
        replaced = int(info.attrs.get("replaced_value_int64", 0))
    else:
        raise ValueError(f"{info.describe()}: no imputed values")

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        x2 = as_2d(x)
        if values.size not in (1, x2.shape[1]):
            raise ValueError(
                f"{info.describe()}: {values.size} imputed values for {x2.shape[1]} features"
            )
        hit = np.isnan(x2) if np.isnan(replaced) else x2 == replaced
        out = np.where(hit, values.astype(x.dtype), x2)
        return (out.reshape(x.shape),)

    return compute


class _Lookup:
    """Maps keys (numbers or strings) to positions; -1 for unknown keys."""

    def __init__(self, keys: Sequence[Any]) -> None:
        self.is_str = bool(len(keys)) and isinstance(keys[0], str)
        if self.is_str:
            self.table = {k: i for i, k in reversed(list(enumerate(keys)))}
            return
        k = np.asarray(keys).reshape(-1)
        k = k.astype(np.int64 if k.dtype.kind in "iub" else np.float64)
        nan = np.isnan(k) if k.dtype.kind == "f" else np.zeros(k.shape, bool)
        self.nan_pos = int(np.flatnonzero(nan)[0]) if nan.any() else -1
        order = np.argsort(k, kind="stable")
        self.keys, self.pos = k[order], order
        # the first occurrence of a repeated key wins
        first = np.r_[True, self.keys[1:] != self.keys[:-1]]
        self.keys, self.pos = self.keys[first], self.pos[first]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.is_str or x.dtype == object:
            table = self.table if self.is_str else {}
            found = [table.get(s, -1) for s in x.reshape(-1).tolist()]
            return np.array(found, dtype=np.int64).reshape(x.shape)
        v = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(self.keys.dtype)
        if self.keys.size == 0:
            return np.full(x.shape, -1, np.int64)
        at = np.clip(np.searchsorted(self.keys, v), 0, self.keys.size - 1)
        out = np.where(self.keys[at] == v, self.pos[at], -1)
        if self.nan_pos >= 0:
            out = np.where(np.isnan(v), self.nan_pos, out)
        return out


@registry.kernel("OneHotEncoder", since=1, domain=ML)
def one_hot_encoder(info: NodeInfo) -> Compute:
    """One float32 one-hot vector per element over the categories; unknown
    values give zeros, or an error when ``zeros=0``."""
    ints = info.attrs.get("cats_int64s")
    cats: list[Any] = (
        list(ints) if ints is not None and len(ints) else list(info.attrs.get("cats_strings") or [])
    )
    if not cats:
        raise ValueError(f"{info.describe()}: no categories")
    lookup = _Lookup(cats)
    allow_unknown = bool(info.attrs.get("zeros", 1))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        pos = lookup(x)
        if not allow_unknown and (pos < 0).any():
            raise ValueError(f"{info.describe()}: value not in the categories and zeros=0")
        return ((pos[..., None] == np.arange(len(cats))).astype(np.float32),)

    return compute


def _map_values(lookup: _Lookup, values: np.ndarray, default: Any, x: np.ndarray) -> np.ndarray:
    pos = lookup(x)
    picked = values[np.maximum(pos, 0)] if values.size else np.empty(pos.shape, values.dtype)
    fill = (
        np.array(default, dtype=values.dtype)
        if values.dtype != object
        else object_array([default])[0]
    )
    return np.where(pos >= 0, picked, fill).astype(values.dtype)


@registry.kernel("LabelEncoder", since=1, until=1, domain=ML)
def label_encoder_v1(info: NodeInfo) -> Compute:
    """LabelEncoder v1: strings to their index in ``classes_strings`` and back."""
    classes = list(info.attrs.get("classes_strings") or [])
    default_int = int(info.attrs.get("default_int64", -1))
    default_str = str(info.attrs.get("default_string", "_Unused"))
    lookup = _Lookup(classes)
    names = object_array(classes)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype == object:
            pos = lookup(x)
            return (np.where(pos >= 0, pos, default_int).astype(np.int64),)
        idx = x.astype(np.int64)
        ok = (idx >= 0) & (idx < len(classes))
        out = np.where(
            ok, names[np.where(ok, idx, 0)] if len(classes) else default_str, default_str
        )
        return (out.astype(object),)

    return compute


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _tensor_or_list(info: NodeInfo, kind: str) -> np.ndarray | None:
    """The keys or values of LabelEncoder v2+ as an array, whichever attribute holds them."""
    tensor = info.attrs.get(f"{kind}_tensor")
    if tensor is not None:
        arr = np.asarray(tensor).reshape(-1)
        if arr.dtype.kind in "OSU":
            return object_array([_text(v) for v in arr.tolist()])
        return arr
    for suffix, dtype in (("floats", np.float32), ("int64s", np.int64), ("strings", object)):
        v = info.attrs.get(f"{kind}_{suffix}")
        if v is not None and len(v):
            return object_array(v) if dtype is object else np.asarray(v, dtype)
    return None


@per_schema_version("LabelEncoder", domain=ML, since=2)
def label_encoder(info: NodeInfo) -> Compute:
    """Map keys to values (lists or, from v4, tensor attributes); unknown keys
    get the default of the values' type."""
    keys = _tensor_or_list(info, "keys")
    values = _tensor_or_list(info, "values")
    if keys is None or values is None or keys.size != values.size:
        raise ValueError(f"{info.describe()}: keys and values must be given, of equal length")
    out_type = info.output_types[0] if info.output_types else None
    if out_type is not None and values.dtype != object:
        values = values.astype(to_numpy(out_type))
    default_tensor = info.attrs.get("default_tensor")
    if default_tensor is not None:
        default: Any = np.asarray(default_tensor).reshape(-1)[0]
        default = _text(default) if values.dtype == object else default
    elif values.dtype == object:
        default = str(info.attrs.get("default_string", "_Unused"))
    elif values.dtype.kind == "f":
        default = float(info.attrs.get("default_float", -0.0))
    else:
        default = int(info.attrs.get("default_int64", -1))
    lookup = _Lookup(keys.tolist())

    return lambda x: (_map_values(lookup, values, default, x),)


@registry.kernel("CategoryMapper", since=1, domain=ML)
def category_mapper(info: NodeInfo) -> Compute:
    """Strings to int64 ids and back through the paired category lists."""
    strings = list(info.attrs.get("cats_strings") or [])
    ints = np.asarray(info.attrs.get("cats_int64s") or [], np.int64)
    default_int = int(info.attrs.get("default_int64", -1))
    default_str = str(info.attrs.get("default_string", "_Unused"))
    by_string, by_int = _Lookup(strings), _Lookup(ints.tolist())
    names = object_array(strings)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype == object:
            return (_map_values(by_string, ints, default_int, x),)
        return (_map_values(by_int, names, default_str, x),)

    return compute


@registry.kernel("ArrayFeatureExtractor", since=1, domain=ML)
def array_feature_extractor(info: NodeInfo) -> Compute:
    """Select elements of the last axis by index (1-D data gives one row)."""

    def compute(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        idx = indices.astype(np.int64).reshape(-1)
        last = x.shape[-1]
        if idx.size and (idx.min() < 0 or idx.max() >= last):
            raise IndexError(f"{info.describe()}: index out of range for last dim {last}")
        out = np.take(x, idx, axis=-1)
        return (out.reshape(1, -1) if x.ndim == 1 else out,)

    return compute


@registry.kernel("FeatureVectorizer", since=1, domain=ML)
def feature_vectorizer(info: NodeInfo) -> Compute:
    """Concatenate the inputs' columns, each cut or zero-padded to its
    ``inputdimensions`` entry; float32 out."""
    dims = [int(d) for d in info.attrs.get("inputdimensions") or []]

    def compute(*xs: np.ndarray) -> tuple[np.ndarray]:
        parts = []
        for x, d in zip(xs, dims, strict=False):
            x2 = x.reshape(-1, 1) if x.ndim == 1 else as_2d(x)
            x2 = x2.astype(np.float32)[:, :d]
            if x2.shape[1] < d:
                x2 = np.pad(x2, [(0, 0), (0, d - x2.shape[1])])
            parts.append(x2)
        return (np.concatenate(parts, axis=1),)

    return compute


@registry.kernel("DictVectorizer", since=1, domain=ML)
def dict_vectorizer(info: NodeInfo) -> Compute:
    """A map (or a list of maps) to a dense ``[rows, vocabulary]`` tensor."""
    vocab = info.attrs.get("string_vocabulary") or info.attrs.get("int64_vocabulary") or []
    index = {k: i for i, k in enumerate(vocab)}
    out_type = info.output_types[0] if info.output_types else None

    def compute(x: Any) -> tuple[np.ndarray]:
        rows = [x] if isinstance(x, dict) else list(x)
        dtype = to_numpy(out_type) if out_type is not None else None
        cells = [
            (r, index[k], v) for r, row in enumerate(rows) for k, v in row.items() if k in index
        ]
        if dtype is None:
            dtype = np.asarray([c[2] for c in cells] or [0.0]).dtype
        out = np.zeros((len(rows), len(vocab)), dtype=dtype)
        if cells:
            r, c, v = zip(*cells, strict=True)
            out[list(r), list(c)] = v
        return (out,)

    return compute


@registry.kernel("ZipMap", since=1, domain=ML)
def zip_map(info: NodeInfo) -> Compute:
    """Turn ``[N, C]`` scores into a list of N ``{label: score}`` dicts."""
    strings = info.attrs.get("classlabels_strings")
    ints = info.attrs.get("classlabels_int64s")
    labels: list[Any] = list(strings) if strings else [int(v) for v in ints or []]

    def compute(x: np.ndarray) -> tuple[list[dict[Any, float]]]:
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        if x2.shape[1] != len(labels):
            raise ValueError(f"{info.describe()}: {x2.shape[1]} scores for {len(labels)} labels")
        return ([dict(zip(labels, row, strict=True)) for row in x2.tolist()],)

    return compute
