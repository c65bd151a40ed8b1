"""The cases of the suite: where they come from and how they are named.

Every case has an id ``<kind>/<name>``:

* ``node/…``: onnx's backend node tests, generated in memory from the
  installed onnx package, with the expected outputs onnx stores for them;
* ``generated/…``: the suite's own cases (:mod:`conformance.generated`),
  checked against onnx's reference evaluator;
* ``explore/…``: cases built from each operator's ONNX schema
  (:mod:`conformance.explore`), as many as the depth (:func:`set_depth`) asks;
* ``simple/…``, ``pytorch-converted/…``, ``pytorch-operator/…``: onnx's
  stored models with their stored outputs (model-level cases, which may mix
  in the CPU provider);
* ``light/…``: onnx's light models (ResNet-50, SqueezeNet, ...) with seeded
  random weights, checked against the oracle (:mod:`conformance.light`).

Contract checks have ids ``contract/…`` and live in :mod:`conformance.contract`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import onnx
from onnx import numpy_helper

from .case import DEPTHS, KINDS, MODEL_KINDS, Case, DataSet
from .cast_reference import defined_casts_only
from .precision import Tolerance

__all__ = [
    "DEPTHS",
    "KINDS",
    "MODEL_KINDS",
    "Case",
    "DataSet",
    "depth",
    "load_kind",
    "set_depth",
]

DEPTH_ENV = "ORTCORE_CONFORMANCE_DEPTH"
_depth: list[str] = []
EXCLUDED = re.compile(r"bernoulli")  # random outputs: nothing to compare


def _tensor(x: Any) -> Any:
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def _node_cases() -> Iterator[Case]:
    """onnx's node tests, by name from the cached index; each is built (its module
    imported) when first run, so listing them costs no reference computation."""
    from .nodeindex import load_index

    for name, module, rtol, atol in load_index():
        yield Case(name, "node", _node_loader(name, module), Tolerance(rtol, atol))


def _node_loader(name: str, module: str) -> Callable[[], tuple[onnx.ModelProto, list[DataSet]]]:
    def load() -> tuple[onnx.ModelProto, list[DataSet]]:
        from .nodeindex import node_test

        c = node_test(name, module)
        sets = [
            ([_tensor(i) for i in ins], [_tensor(o) for o in outs]) for ins, outs in c.data_sets
        ]
        return c.model, defined_casts_only(c.model, sets)

    return load


def _load_value(path: Path, type_proto: onnx.TypeProto) -> Any:
    data = path.read_bytes()
    if type_proto.HasField("sequence_type"):
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    if type_proto.HasField("optional_type"):
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def data_root() -> Path:
    """onnx's stored backend test data."""
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def _load_stored(model_dir: Path) -> tuple[onnx.ModelProto, list[DataSet]]:
    model = onnx.load(str(model_dir / "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    inputs_info = [i for i in model.graph.input if i.name not in inits]
    sets = []
    for ds in sorted(model_dir.glob("test_data_set_*")):
        ins = [
            _load_value(ds / f"input_{k}.pb", inputs_info[k].type)
            for k in range(len(list(ds.glob("input_*.pb"))))
        ]
        outs = [
            _load_value(ds / f"output_{k}.pb", model.graph.output[k].type)
            for k in range(len(list(ds.glob("output_*.pb"))))
        ]
        sets.append((ins, outs))
    return model, sets


def _stored_cases(kind: str) -> Iterator[Case]:
    root = data_root() / kind
    if not root.is_dir():
        return
    for model_dir in sorted(root.iterdir()):
        if (model_dir / "model.onnx").exists():
            name = model_dir.name
            yield Case(name, kind, lambda d=model_dir: _load_stored(d))  # type: ignore[misc]


def _light_cases() -> Iterator[Case]:
    from .light import MODELS, load_light

    for stem in MODELS:
        path = data_root() / "light" / f"light_{stem}.onnx"
        if path.exists():
            load = lambda p=path: load_light(p)  # noqa: E731
            yield Case(f"test_{stem}", "light", load, large=True)  # type: ignore[arg-type]


def set_depth(value: str) -> None:
    """Choose how far ``explore`` goes (``quick`` or ``full``) in this process.

    Raises:
        ValueError: ``value`` is not one of :data:`DEPTHS`.
    """
    if value not in DEPTHS:
        raise ValueError(f"unknown depth {value!r}; known depths: {', '.join(DEPTHS)}")
    if depth() != value:
        _depth[:] = [value]
        load_kind.cache_clear()


def depth() -> str:
    """The depth ``explore`` cases are built at: :func:`set_depth`'s, else
    ``$ORTCORE_CONFORMANCE_DEPTH``, else ``quick``."""
    if _depth:
        return _depth[0]
    value = os.environ.get(DEPTH_ENV, "quick")
    return value if value in DEPTHS else "quick"


@cache
def load_kind(kind: str) -> tuple[Case, ...]:
    """Every case of one kind (cached for the process, per depth)."""
    if kind == "node":
        source: Iterator[Case] = _node_cases()
    elif kind == "generated":
        from .generated import generated_cases

        source = generated_cases()
    elif kind == "explore":
        from .explore import explore_cases

        source = explore_cases(depth())
    elif kind == "light":
        source = _light_cases()
    elif kind in MODEL_KINDS:
        source = _stored_cases(kind)
    else:
        raise ValueError(f"unknown case kind {kind!r}; known kinds: {', '.join(KINDS)}")
    return tuple(c for c in source if not EXCLUDED.search(c.name))


def iter_cases(kinds: Sequence[str] = KINDS, pattern: str | None = None) -> Iterator[Case]:
    """Every case of ``kinds`` whose id matches ``pattern`` (``re.search``)."""
    rx = re.compile(pattern) if pattern else None
    for kind in kinds:
        for case in load_kind(kind):
            if rx is None or rx.search(case.id):
                yield case
