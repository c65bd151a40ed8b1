"""The exploration's seeds, cached on disk: listing cases without onnx's node tests.

Making the seeds (:func:`conformance.explore.seeds.seeds`) imports onnx's
node test modules, whose classes compute every expected output as they are
defined: about 8 of the 13 seconds ``ortcore conformance --list`` took at full
depth. The seeds are plain data (op, attributes, input arrays, schema slots),
so they are kept, once per installed onnx, in the suite's cache folder
(:func:`conformance.light.cache_dir`) as JSON: arrays as dtype, shape and
base64 bytes, onnx protos as their serialized bytes. The key covers what
:mod:`conformance.nodeindex` keys its index by (onnx's version, place and
node test files) and the source of the modules that make seeds, so an
upgraded onnx or an edited seed maker gets fresh ones.

What is stored is checked before it is written: the seeds decoded from the
text must equal those made, value for value and dtype for dtype, or nothing
is written. A cache file that cannot be read, or holds anything else, is
ignored (the seeds are made again): never an error.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cache_file", "decode", "encode", "load", "store"]

FORMAT = 1
"""Bumped when the file's layout changes."""


def cache_file() -> Path:
    """``seeds-<key>.json`` in the suite's cache folder (see the module docstring)."""
    from .. import nodeindex
    from ..light import cache_dir

    h = hashlib.sha256(f"{FORMAT}|{nodeindex._key()}".encode())
    # the code that makes the seeds (read, not imported: it imports this module)
    here = Path(__file__).parent
    for path in (here / "seeds.py", here / "seedtypes.py", Path(str(nodeindex.__file__))):
        h.update(path.read_bytes())
    return cache_dir() / f"seeds-{h.hexdigest()[:16]}.json"


def load() -> dict[tuple[str, str], tuple[Any, ...]] | None:
    """The cached seeds, or ``None`` (no file, or one that cannot be used)."""
    try:
        text = cache_file().read_text(encoding="utf-8")
        data = json.loads(text)
        return {(d, op): tuple(decode(s) for s in seeds) for d, op, seeds in data["table"]}
    except (OSError, RuntimeError, ValueError, TypeError, KeyError, AttributeError):
        return None


def store(table: dict[tuple[str, str], tuple[Any, ...]]) -> bool:
    """Write ``table`` to the cache when it decodes back equal; whether it was written."""
    try:
        rows = [[d, op, [encode(s) for s in seeds]] for (d, op), seeds in table.items()]
        text = json.dumps({"format": FORMAT, "table": rows})
        back = json.loads(text)["table"]
        made = [s for seeds in table.values() for s in seeds]
        stored = [decode(e) for _, _, encoded in back for e in encoded]
        if len(made) != len(stored) or not all(map(same, made, stored)):
            return False
        file = cache_file()
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, file)  # atomic: workers may write it at the same time
        return True
    except (OSError, RuntimeError, TypeError, ValueError):
        return False


def _classes() -> dict[str, type]:
    from .seedtypes import InputSlot, Seed

    return {"Seed": Seed, "InputSlot": InputSlot}


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data (see the module docstring).

    Raises:
        TypeError: a value of a kind the cache does not hold.
    """
    import onnx

    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (np.ndarray, np.generic)):
        return {"array": _array(value), "scalar": isinstance(value, np.generic)}
    if isinstance(value, onnx.TensorProto):
        return {"tensor": base64.b64encode(value.SerializeToString()).decode()}
    if dataclasses.is_dataclass(value) and type(value).__name__ in _classes():
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"dataclass": type(value).__name__, "fields": fields}
    raise TypeError(f"the seed cache does not hold a {type(value).__name__}")


def _array(a: np.ndarray | np.generic) -> dict[str, Any]:
    a = np.asarray(a)
    if a.dtype == object:
        return {"object": [encode(v) for v in a.reshape(-1).tolist()], "shape": list(a.shape)}
    dtype = a.dtype.str if _native(a.dtype) else a.dtype.name  # ml_dtypes' types by name
    raw = np.ascontiguousarray(a).tobytes()
    return {"dtype": dtype, "shape": list(a.shape), "data": base64.b64encode(raw).decode()}


def _native(dtype: np.dtype[Any]) -> bool:
    """Whether numpy makes ``dtype`` back from its ``str`` (ml_dtypes' types: no)."""
    try:
        return np.dtype(dtype.str) == dtype
    except TypeError:
        return False


def decode(data: Any) -> Any:
    """What :func:`encode` made ``data`` of."""
    import onnx

    if data is None or isinstance(data, str):
        return data
    if not isinstance(data, dict):
        raise ValueError(f"not a cached value: {data!r}")
    if "bool" in data:
        return bool(data["bool"])
    if "int" in data:
        return int(data["int"])
    if "float" in data:
        return float.fromhex(data["float"])
    if "bytes" in data:
        return base64.b64decode(data["bytes"])
    if "list" in data:
        return [decode(v) for v in data["list"]]
    if "tuple" in data:
        return tuple(decode(v) for v in data["tuple"])
    if "dict" in data:
        return {decode(k): decode(v) for k, v in data["dict"]}
    if "array" in data:
        a = _unarray(data["array"])
        return a[()] if data["scalar"] else a
    if "tensor" in data:
        t = onnx.TensorProto()
        t.ParseFromString(base64.b64decode(data["tensor"]))
        return t
    if "dataclass" in data:
        cls = _classes()[data["dataclass"]]
        return cls(**{k: decode(v) for k, v in data["fields"].items()})
    raise ValueError(f"not a cached value: {sorted(data)}")


def _unarray(data: dict[str, Any]) -> np.ndarray:
    shape = tuple(data["shape"])
    if "object" in data:
        out = np.empty(len(data["object"]), dtype=object)
        out[:] = [decode(v) for v in data["object"]]
        return out.reshape(shape)
    name = data["dtype"]
    if name[:1] in "<>|=":
        dtype = np.dtype(name)
    else:
        import ml_dtypes

        dtype = np.dtype(getattr(ml_dtypes, name))
    return np.frombuffer(base64.b64decode(data["data"]), dtype=dtype).reshape(shape).copy()


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` equal in value and kind (arrays: dtype, shape and bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return all(same(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1)))
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, float) and a != a:
        return b != b  # NaN
    return bool(a == b)
