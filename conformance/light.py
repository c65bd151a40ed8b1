"""onnx's light models with seeded random weights, checked against the oracle.

onnx ships small copies of nine image models (``onnx/backend/test/data/light``):
the real graphs, but every weight is a ``ConstantOfShape`` filled with 0.02,
and the stored output is a uniform softmax. Such a case cannot catch a wrong
Conv (a flipped or transposed kernel of constants is the same kernel). The
``light/…`` cases of the suite are those graphs with random weights instead:

* each ``ConstantOfShape`` that makes a weight, and each float initializer,
  becomes an initializer of the same shape with values drawn from a generator
  seeded by :data:`SEED` and the tensor's name, scaled by the tensor's role so
  that activations stay near 1: He initialization for Conv kernels
  (``N(0, 2 / fan_in)``), ``N(0, 1 / fan_in)`` for Gemm and MatMul weights
  (moderate logits), ``U(0.5, 1.5)`` for BatchNormalization scales and for
  multipliers, ``N(0, 0.1²)`` for biases and anything else;
* BatchNormalization mean and variance are calibrated on the case's input, as
  training would have set them: while the oracle runs, each BatchNormalization
  takes the per-channel mean and variance of the tensor it receives, jittered
  (mean shifted by 0.2 standard deviations, variance scaled by 0.7 to 1.3, so
  that batch statistics are no substitute for the stored ones), and the model
  keeps them;
* the input is seeded too (``U(0, 1)``); the expected outputs are the oracle's
  (:mod:`conformance.oracle`: onnx's reference evaluator, which gets opset 9's
  Softmax and BatchNormalization wrong on its own).

The oracle is slow on these models (seconds to a minute each), so the
calibrated statistics and expected outputs are cached in :func:`cache_dir`,
keyed by the model file's bytes, the seed, the source of this module and of
:mod:`conformance.oracle`, and the onnx and numpy versions. Without a usable
cache folder they are computed on every run.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ep_sdk.files import write_atomically

from .oracle import batchnorm_inference, evaluator

__all__ = ["MODELS", "SEED", "cache_dir", "calibrate", "load_light", "randomize"]

SEED = 20250
"""Seed of the weights and inputs."""
MODELS = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)
"""The light models the suite runs (by file stem, without ``light_``)."""

CACHE_ENV = "ORTCORE_CONFORMANCE_CACHE"

DataSet = tuple[list[Any], list[Any]]


def cache_dir() -> Path:
    """``$ORTCORE_CONFORMANCE_CACHE``, else ``$XDG_CACHE_HOME/ortcore/conformance``
    (``~/.cache/ortcore/conformance``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ortcore" / "conformance"


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> Any:
    x = rng.random(shape, np.float32)  # uniform draws are ~10x faster than normal ones
    x *= np.float32(high - low)
    x += np.float32(low)
    return x


def _values(
    name: str, shape: tuple[int, ...], role: tuple[str, int, onnx.NodeProto | None], seed: int
) -> np.ndarray:
    """Random values for one weight, scaled by its role (op, input index)."""
    op, index, node = role
    rng = _rng(seed, name)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    std = 0.1
    if op == "Conv" and index == 1:
        std = np.sqrt(2.0 / fan_in)
    elif op in ("Gemm", "MatMul") and index == 1:
        trans_b = node is not None and any(a.name == "transB" and a.i for a in node.attribute)
        std = np.sqrt(1.0 / (shape[-1] if trans_b else shape[0]))
    elif (op == "BatchNormalization" and index in (1, 4)) or op == "Mul":
        return _uniform(rng, shape, 0.5, 1.5)  # type: ignore[no-any-return]
    half = float(std) * np.sqrt(3.0)  # U(-a, a) has standard deviation a / sqrt(3)
    return _uniform(rng, shape, -half, half)  # type: ignore[no-any-return]


def randomize(model: onnx.ModelProto, seed: int = SEED) -> onnx.ModelProto:
    """A copy of ``model`` whose weights are random (see the module docstring).

    BatchNormalization statistics are random too until :func:`calibrate` sets them.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: t for t in graph.initializer}
    roles: dict[str, tuple[str, int, onnx.NodeProto | None]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            roles.setdefault(name, (node.op_type, i, node))
    shapes: dict[str, tuple[int, ...]] = {}
    nodes = []
    for node in graph.node:
        shape_of = inits.get(node.input[0]) if node.op_type == "ConstantOfShape" else None
        if shape_of is not None and _fills_float(node):
            shapes[node.output[0]] = tuple(int(d) for d in numpy_helper.to_array(shape_of))
        else:
            nodes.append(node)
    for t in graph.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            shapes[t.name] = tuple(t.dims)
    used = {name for node in nodes for name in node.input}
    kept = [t for t in graph.initializer if t.name in used and t.name not in shapes]
    data_inputs = [vi for vi in graph.input if vi.name not in inits]
    del graph.node[:], graph.initializer[:], graph.input[:]
    graph.node.extend(nodes)
    graph.initializer.extend(kept)
    graph.input.extend(data_inputs)
    for name, shape in shapes.items():
        values = _values(name, shape, roles.get(name, ("", -1, None)), seed)
        t = graph.initializer.add()  # filled in place: no copy of large tensors
        t.name, t.data_type = name, onnx.TensorProto.FLOAT
        t.dims.extend(shape)
        t.raw_data = values.astype("<f4", copy=False).tobytes()
    out.ir_version = max(out.ir_version, 4)  # initializers need not be graph inputs
    return out


def _fills_float(node: onnx.NodeProto) -> bool:
    value = next((a.t for a in node.attribute if a.name == "value"), None)
    return value is None or value.data_type == onnx.TensorProto.FLOAT


def inputs_for(model: onnx.ModelProto, seed: int = SEED) -> list[np.ndarray]:
    """Seeded inputs ``U(0, 1)`` of the declared shapes (symbolic dims: 1)."""
    out = []
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        out.append(_rng(seed, "input:" + vi.name).uniform(0.0, 1.0, shape).astype(np.float32))
    return out


def _calibrating_batchnorm(seed: int, stats: dict[str, np.ndarray]) -> type:
    """A BatchNormalization for the oracle that sets its mean and variance from its input."""
    from .oracle import BatchNormalization

    class Calibrating(BatchNormalization):  # type: ignore[misc, valid-type]
        def _run(self, x: Any, scale: Any, bias: Any, mean: Any, var: Any, **attrs: Any) -> Any:
            if not self._inference():
                return super()._run(x, scale, bias, mean, var, **attrs)
            axes = tuple(i for i in range(x.ndim) if i != 1)
            m, v = x.mean(axis=axes, dtype=np.float64), x.var(axis=axes, dtype=np.float64)
            names = self.onnx_node.input
            rng = _rng(seed, "stats:" + names[3])
            m = m + 0.2 * np.sqrt(v) * rng.standard_normal(m.shape)
            v = v * rng.uniform(0.7, 1.3, v.shape)
            stats[names[3]], stats[names[4]] = m.astype(np.float32), v.astype(np.float32)
            eps = attrs.get("epsilon")
            y = batchnorm_inference(
                x, scale, bias, stats[names[3]], stats[names[4]], 1e-5 if eps is None else eps
            )
            return (y,)

    Calibrating.__name__ = "BatchNormalization"
    return Calibrating


def calibrate(
    model: onnx.ModelProto, inputs: list[np.ndarray], seed: int = SEED
) -> tuple[dict[str, np.ndarray], list[Any]]:
    """Run the oracle on ``inputs``, setting BatchNormalization statistics on the way.

    Returns:
        the statistics (initializer name -> values) and the outputs; with the
        statistics set (:func:`with_stats`), the oracle gives exactly these outputs.
    """
    stats: dict[str, np.ndarray] = {}
    feeds = {vi.name: x for vi, x in zip(model.graph.input, inputs)}
    ref = evaluator(model, (_calibrating_batchnorm(seed, stats),))
    return stats, list(ref.run(None, feeds))


def with_stats(model: onnx.ModelProto, stats: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` (changed in place) with the initializers named in ``stats`` replaced."""
    for t in model.graph.initializer:
        if t.name in stats:
            t.CopyFrom(numpy_helper.from_array(stats[t.name], t.name))
    return model


def _key(path: Path, seed: int) -> str:
    """What the cached values depend on: the model, the seed, the recipe and the oracle."""
    from . import oracle

    h = hashlib.sha256(path.read_bytes())
    for source in (__file__, oracle.__file__):
        h.update(Path(source).read_bytes())
    h.update(f"|seed={seed}|onnx={onnx.__version__}|numpy={np.__version__}".encode())
    return h.hexdigest()[:20]


def _read_cache(file: Path) -> tuple[dict[str, np.ndarray], list[Any]] | None:
    try:
        with np.load(file, allow_pickle=False) as data:
            stats = {k[len("stat:") :]: data[k] for k in data.files if k.startswith("stat:")}
            n = sum(1 for k in data.files if k.startswith("output:"))
            return stats, [data[f"output:{i}"] for i in range(n)]
    except (OSError, ValueError, KeyError):
        return None


def _write_cache(file: Path, stats: dict[str, np.ndarray], outputs: list[Any]) -> None:
    arrays: dict[str, Any] = {f"stat:{k}": v for k, v in stats.items()}
    arrays.update({f"output:{i}": np.asarray(v) for i, v in enumerate(outputs)})
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(file, lambda f: np.savez(f, **arrays), suffix=".npz")
    except OSError:
        pass  # no cache: the next run computes them again


def load_light(
    path: Path, seed: int = SEED, oracle: Callable[..., Any] = calibrate
) -> tuple[onnx.ModelProto, list[DataSet]]:
    """The random-weight version of the light model at ``path``, with its data set."""
    model = randomize(onnx.load(str(path)), seed)
    inputs = inputs_for(model, seed)
    file = cache_dir() / f"light-{path.stem.removeprefix('light_')}-{_key(path, seed)}.npz"
    cached = _read_cache(file)
    if cached is None:
        cached = oracle(model, inputs, seed)
        _write_cache(file, *cached)
    stats, outputs = cached
    return with_stats(model, stats), [(inputs, outputs)]
