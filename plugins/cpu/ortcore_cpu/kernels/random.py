"""Random generators: RandomNormal, RandomUniform, their *Like forms,
Multinomial and Bernoulli.

With a ``seed`` attribute every run draws the same values (a generator seeded
with it is made per call, which keeps the kernel stateless and thread-safe);
without one each run draws fresh values. Draws are made in float64 and cast
to the output type, as the spec's reference does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, to_numpy

from ._common import DT
from ._versions import per_schema_version


def _rng(info: NodeInfo) -> Any:
    """A function returning the node's generator for one call."""
    seed = info.attrs.get("seed")
    if seed is None:
        return np.random.default_rng
    state = int(np.float32(seed).view(np.uint32))  # every float seed, bit for bit

    return lambda: np.random.default_rng(state)


def _dtype(info: NodeInfo, default: np.dtype) -> np.dtype:
    code = info.attrs.get("dtype")
    return default if code is None else to_numpy(DT(int(code)))


def _draw(info: NodeInfo, kind: str) -> Any:
    a = float(info.attrs.get("mean" if kind == "normal" else "low", 0.0))
    b = float(info.attrs.get("scale" if kind == "normal" else "high", 1.0))
    make = _rng(info)

    def draw(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        gen = make()
        values = gen.normal(a, b, shape) if kind == "normal" else gen.uniform(a, b, shape)
        return values.astype(dtype)

    return draw


def _from_attrs(kind: str) -> Any:
    def build(info: NodeInfo) -> Compute:
        shape = tuple(int(d) for d in info.attrs["shape"])
        dtype = _dtype(info, np.dtype(np.float32))
        draw = _draw(info, kind)
        return lambda: (draw(shape, dtype),)

    return build


def _like(kind: str) -> Any:
    def build(info: NodeInfo) -> Compute:
        fixed = info.attrs.get("dtype")
        draw = _draw(info, kind)

        def compute(x: np.ndarray) -> tuple[np.ndarray]:
            dtype = x.dtype if fixed is None else to_numpy(DT(int(fixed)))
            return (draw(x.shape, dtype),)

        return compute

    return build


for _op, _kind in (("RandomNormal", "normal"), ("RandomUniform", "uniform")):
    per_schema_version(_op, params=("T",))(_from_attrs(_kind))
    per_schema_version(f"{_op}Like")(_like(_kind))


@per_schema_version("Multinomial")
def multinomial(info: NodeInfo) -> Compute:
    """``sample_size`` class indices per row, drawn from unnormalized log-probabilities."""
    samples = int(info.attrs.get("sample_size", 1))
    dtype = _dtype(info, np.dtype(np.int32))
    make = _rng(info)

    def compute(logits: np.ndarray) -> tuple[np.ndarray]:
        z = logits.astype(np.float64)
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z)
        cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
        u = make().random((z.shape[0], samples))
        idx = (u[:, :, None] > cdf[:, None, :]).sum(axis=2)
        return (np.minimum(idx, z.shape[1] - 1).astype(dtype),)

    return compute


@per_schema_version("Bernoulli")
def bernoulli(info: NodeInfo) -> Compute:
    """1 with the input's probability, else 0, in ``dtype`` (default: the input's type)."""
    fixed = info.attrs.get("dtype")
    make = _rng(info)

    def compute(p: np.ndarray) -> tuple[np.ndarray]:
        dtype = p.dtype if fixed is None else to_numpy(DT(int(fixed)))
        return ((make().random(p.shape) < p).astype(dtype),)

    return compute
