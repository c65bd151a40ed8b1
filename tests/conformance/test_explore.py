"""The schema-driven exploration (``explore`` cases): built deterministically,
every dimension present, and faults no hand-listed case names are caught.

The faulty providers here are a plugin of this module's own (registered like
``tests/conformance/faulty.py``): a healthy one with ArgMax, Softmax and
LeakyRelu, and one fault each: an attribute default taken from numpy, a kernel
right only at rank 2, a Softmax that ignores its axis, kernels cached by op
and shape whatever the node's attributes.
"""

from __future__ import annotations

import re
import sys
import zlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

import ep_sdk
from conformance.cases import load_kind, set_depth
from conformance.explore import explore_cases
from conformance.outcomes import FAILURES, CaseResult, CaseSkipped
from ep_sdk import ExecutionProvider, KernelRegistry
from ep_sdk.dtypes import DataType
from ortcore.plugins import default_manager

FLOATS = {DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16}
Build = Callable[[ep_sdk.NodeInfo], Callable[..., Any]]
DIMENSIONS = {
    "range",
    "control",
    "attribute",
    "pair",
    "rank",
    "axis",
    "dtype",
    "empty",
    "inputs",
    "size",
    "opset",
    "dynamic",
    "accumulate",
}


def _raw(info: ep_sdk.NodeInfo, name: str, default: Any) -> Any:
    """An attribute as the node gives it (``default`` when absent): what a kernel
    that does not read the schema's defaults sees."""
    attr = info.node.attributes.get(name)
    return default if attr is None else attr.value


def _argmax(keepdims_default: int) -> Build:
    def build(info: ep_sdk.NodeInfo) -> Callable[..., Any]:
        axis = _raw(info, "axis", 0)
        keep = _raw(info, "keepdims", keepdims_default)
        last = _raw(info, "select_last_index", 0)

        def run(x: np.ndarray) -> np.ndarray:
            if last:
                y = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis)
            else:
                y = np.argmax(x, axis=axis)
            y = np.asarray(y, np.int64)
            return np.expand_dims(y, axis) if keep else y

        return run

    return build


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    w = x.astype(np.float64)
    e = np.exp(w - w.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _softmax_build(axis_of: Callable[[int, int], int]) -> Build:
    """Softmax (opset 13 on) whose axis is ``axis_of(attribute, rank)``."""

    def build(info: ep_sdk.NodeInfo) -> Callable[..., Any]:
        given = int(info.attrs.get("axis", -1))
        return lambda x: _softmax(x, axis_of(given, x.ndim))

    return build


def _leaky(info: ep_sdk.NodeInfo) -> Callable[..., Any]:
    alpha = float(info.attrs.get("alpha", 0.01))
    return lambda x: np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)


_CACHE: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _cached(build: Build) -> Build:
    """A kernel reused for every node of the same op and input shape: the second
    node of a pair runs with the first one's attributes."""

    def wrapped(info: ep_sdk.NodeInfo) -> Callable[..., Any]:
        key = (info.op_type, tuple(info.input_shapes[0] or ()))
        return _CACHE.setdefault(key, build(info))

    return wrapped


HEALTHY: dict[str, Build] = {
    "ArgMax": _argmax(1),
    "Softmax": _softmax_build(lambda axis, rank: axis),
    "LeakyRelu": _leaky,
}


class ExploreGood(ExecutionProvider):
    """ArgMax, Softmax (opset 13 on), LeakyRelu on float tensors: no fault."""

    name = "ExploreGoodExecutionProvider"
    aliases = ("explore-good",)
    version = "1.0"
    priority = 1
    kernels: ClassVar[dict[str, Build]] = {}

    def kernel_registry(self) -> KernelRegistry:
        reg = KernelRegistry()
        for op, build in {**HEALTHY, **type(self).kernels}.items():

            def make(info: ep_sdk.NodeInfo, build: Build = build) -> Callable[..., Any]:
                compute = build(info)
                return lambda *args: (compute(*args),)

            reg.kernel(op, since=13, types={"T": FLOATS})(make)
        return reg


def _fault(alias: str, **kernels: Build) -> type[ExploreGood]:
    name = "".join(p.title() for p in alias.split("-"))
    attrs = {
        "name": f"{name}ExecutionProvider",
        "aliases": (alias,),
        "kernels": kernels,
        "__doc__": f"Faulty: {', '.join(kernels)}.",
    }
    return type(name, (ExploreGood,), attrs)


PROVIDERS = [
    ExploreGood,
    # keepdims absent taken as numpy's False instead of ONNX's 1
    _fault("explore-argmax-keepdims", ArgMax=_argmax(0)),
    # the axis normalized as if every input had rank 2
    _fault("explore-softmax-rank2", Softmax=_softmax_build(lambda axis, rank: axis % 2)),
    # the axis attribute ignored: always the last one
    _fault("explore-softmax-axis", Softmax=_softmax_build(lambda axis, rank: -1)),
    # one kernel per op and shape, built from the first node's attributes
    _fault("explore-kernel-cache", LeakyRelu=_cached(_leaky)),
]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """This module's providers."""
    return PROVIDERS


PLUGIN = "tests.conformance.test_explore"


@pytest.fixture(scope="module")
def explore_plugin(faulty_plugin: str) -> Iterator[str]:
    """This module registered as a plugin (beside the faulty providers)."""
    default_manager().register_plugin(sys.modules[__name__], name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


@pytest.fixture(scope="module")
def quick() -> tuple[Any, ...]:
    """Every case explored from an ONNX schema at quick depth (not the contrib
    table's, :mod:`conformance.qcontrib`, which have no schema)."""
    set_depth("quick")
    return tuple(c for c in load_kind("explore") if not hasattr(c.load, "qspec"))


def test_contrib_cases_are_named_and_seeded_like_explored_ones() -> None:
    set_depth("quick")
    contrib = [c for c in load_kind("explore") if hasattr(c.load, "qspec")]
    assert len(contrib) > 100
    assert {c.dimension for c in contrib} >= {"per_channel", "broadcast", "dtype", "empty"}
    for c in contrib:
        op, dim, detail = c.name.split("/", 2)
        assert dim == c.dimension and op and detail
        assert c.seed == zlib.crc32(c.name.encode())


def _values(case: Any) -> list[Any]:
    _, sets = case.load()  # a fresh build, not the materialized one
    return [x for ins, outs in sets for x in (*ins, *outs)]


def test_cases_are_named_by_dimension_and_unique(quick: tuple[Any, ...]) -> None:
    names = [c.name for c in quick]
    assert len(names) == len(set(names))
    assert {c.dimension for c in quick} == DIMENSIONS
    for c in quick:
        op, dim, detail = c.name.split("/", 2)
        assert c.kind == "explore" and dim == c.dimension and op and detail
        assert c.seed == zlib.crc32(c.name.encode())
    ops = {c.name.split("/")[0] for c in quick}
    assert len(ops) > 150  # every op with a seed, not a hand list


def test_quick_is_a_subset_of_full() -> None:
    quick = {c.name for c in explore_cases("quick")}
    full = {c.name for c in explore_cases("full")}
    assert quick <= full and len(full) > 3 * len(quick)
    assert any(re.search(r"@v\d+$", n) for n in full - quick)  # older opsets at full


def test_cases_are_deterministic(quick: tuple[Any, ...]) -> None:
    rng = np.random.default_rng(52)
    picked = [quick[i] for i in rng.choice(len(quick), 40, replace=False)]
    checked = 0
    for case in picked:
        try:
            first, second = _values(case), _values(case)
        except CaseSkipped:
            continue
        assert len(first) == len(second)
        for a, b in zip(first, second):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes() if a.dtype != object else list(a.flat) == list(b.flat)
        checked += 1
    assert checked >= 30


def test_a_case_describes_its_reproducer(quick: tuple[Any, ...]) -> None:
    case = next(c for c in quick if c.name.startswith("ArgMax/attribute/"))
    line = case.load.spec.describe()
    assert "ArgMax opset" in line and f"seed {case.seed}" in line and "float" in line


def test_skips_are_counted_apart_from_the_rates(suite: Any) -> None:
    from conformance.summary import _rates

    results = suite("faulty-good", ("explore",), r"^explore/(Add|Relu|Neg|Abs|Sub|Mul)/")
    outcomes = {r.outcome for r in results.values()}
    assert outcomes <= {"passed", "unsupported", "skipped"}, [
        (k, r.outcome, r.detail) for k, r in results.items() if r.outcome in FAILURES
    ]
    passed = [r for r in results.values() if r.outcome == "passed"]
    assert len(passed) >= 20
    assert {r.dimension for r in passed} >= {"rank", "dtype", "empty"}
    # a skipped case is left out of the rates: a pass rate is of what was judged
    judged = [CaseResult("explore/A/rank/r1", "operators", "passed")]
    rates = _rates([*judged, CaseResult("explore/A/rank/r0", "operators", "skipped")])
    assert rates["total"] == 1 and rates["pass_rate"] == 100.0
    assert rates["outcomes"]["skipped"] == 1


def test_unclaimed_contrib_ops_are_not_graded(suite: Any) -> None:
    """onnxruntime's com.microsoft ops are optional: a provider that claims
    none of them is not marked down for their cases (skipped, out of the
    rates), where an unclaimed standard op counts as unsupported."""
    results = suite("faulty-good", ("explore",), r"^explore/(QLinearAdd|QLinearSigmoid)/")
    assert results, "no quantized contrib case was generated"
    assert {r.outcome for r in results.values()} == {"skipped"}
    assert all("com.microsoft" in r.detail for r in results.values())


def test_healthy_explore_provider_passes(suite: Any, explore_plugin: str) -> None:
    results = suite("explore-good", ("explore",), r"^explore/(ArgMax|Softmax|LeakyRelu)/")
    bad = {k: (r.outcome, r.detail[:200]) for k, r in results.items() if r.failed}
    assert not bad
    assert sum(r.outcome == "passed" for r in results.values()) >= 15


@pytest.mark.parametrize(
    ("provider", "op", "dimension", "example"),
    [
        ("explore-argmax-keepdims", "ArgMax", "attribute", r"keepdims=(absent|default)"),
        # the seed gives axis=1, right at every rank under ``axis % 2``: the
        # negative axes at ranks other than 2 show it
        ("explore-softmax-rank2", "Softmax", "axis", r"r[013-5]_axis=-"),
        ("explore-softmax-axis", "Softmax", "axis", r"axis="),
        ("explore-kernel-cache", "LeakyRelu", "pair", r"alpha="),
    ],
)
def test_fault_is_caught_by_explore(
    suite: Any, explore_plugin: str, provider: str, op: str, dimension: str, example: str
) -> None:
    results = suite(provider, ("explore",), rf"^explore/{op}/")
    failed = {k: r for k, r in results.items() if r.failed}
    assert any(r.dimension == dimension and re.search(example, k) for k, r in failed.items()), (
        sorted(failed)
    )


def _specs(cases: tuple[Any, ...], op: str, dimension: str) -> list[Any]:
    return [c.load.spec for c in cases if c.name.startswith(f"{op}/{dimension}/")]


def test_seeds_are_representative() -> None:
    from conformance.explore.base import chosen
    from conformance.explore.seeds import degenerate, seeds

    checked = 0
    for (domain, op), found in seeds().items():
        picked = chosen(domain, op, "quick")
        if not picked or all(degenerate(s) for s in found):
            continue
        first = picked[0]
        # an op whose node tests have a non-degenerate node starts from one
        assert not degenerate(first), (op, first.test)
        assert all(v is None or v.size for v in first.inputs), (op, first.test)
        checked += 1
    assert checked > 150
    full = chosen("", "Gemm", "full")
    assert len({s.test for s in full}) >= 3 and degenerate(full[-1])  # a degenerate one extra


def test_broadcast_inputs_reach_every_shape_of_the_output(quick: tuple[Any, ...]) -> None:
    from conformance.explore.base import chosen
    from conformance.explore.spec import build, infer

    seed = chosen("", "Gemm", "quick")[0]
    specs = _specs(quick, "Gemm", "rank")
    (_, (m, n)), *_ = infer(build(specs[0]))
    shapes = {s.inputs[2].shape for s in specs if s.detail.startswith("bcast_x2=")}
    shapes.add(seed.inputs[2].shape)
    assert {(m, n), (m, 1), (1, n), (n,), (1,), ()} <= shapes
    # scalar with scalar for every multidirectional op with two data inputs or more
    from conformance.explore.rules import broadcasting

    schema_rank = [c for c in quick if c.dimension == "rank"]
    multi = {
        c.name.split("/")[0]
        for c in schema_rank
        if broadcasting(c.load.spec.op, c.load.spec.domain, c.load.spec.opset)[0] == "multi"
        and len([f for f in c.load.spec.inputs if f is not None and f.data]) >= 2
    }
    scalars = {
        c.name.split("/")[0]
        for c in schema_rank
        if all(f is None or not f.data or f.shape == () for f in c.load.spec.inputs)
    }
    assert len(multi) > 15 and multi <= scalars, sorted(multi - scalars)


def test_sizes_not_divisible_by_an_attribute(quick: tuple[Any, ...]) -> None:
    ops = {c.name.split("/")[0] for c in quick if c.dimension == "size"}
    assert len(ops) > 120
    uneven = [
        s
        for s in _specs(quick, "Split", "size")
        if "num_outputs" in s.attrs[0]
        and s.inputs[0].shape[s.attrs[0].get("axis", 0)] % s.attrs[0]["num_outputs"]
    ]
    assert uneven and all(s.outputs == s.attrs[0]["num_outputs"] for s in uneven)
    sizes = {d for c in quick if c.dimension == "size" for d in c.load.spec.inputs[0].shape}
    assert {1, 5, 7} <= sizes


def test_optional_inputs_are_crossed_with_attributes(quick: tuple[Any, ...]) -> None:
    crossed = [c for c in quick if c.dimension == "inputs" and "," in c.name]
    assert len({c.name.split("/")[0] for c in crossed}) > 10
    identity = [
        s
        for s in _specs(quick, "ReduceSum", "inputs")
        if len(s.inputs) < 2 and s.attrs[0].get("noop_with_empty_axes") == 1
    ]
    assert identity  # no axes and noop_with_empty_axes=1: the identity
    clip = _specs(quick, "Clip", "inputs")
    assert any(len(s.inputs) == 3 and s.inputs[1] is None for s in clip)  # max alone


def test_older_opsets_at_quick(quick: tuple[Any, ...]) -> None:
    from conformance.explore.base import seed_at
    from conformance.explore.seeds import seeds, versions

    names = {c.name for c in quick}
    older = [
        (op, v)
        for domain, op in seeds()
        for v in versions(op, domain)[:-1]
        if seed_at(domain, op, v) is not None
    ]
    have = [(op, v) for op, v in older if f"{op}/opset/v{v}" in names]
    assert len(older) > 250 and len(have) > 0.8 * len(older)
    softmax = {v for op, v in older if op == "Softmax"}
    assert softmax and all(f"Softmax/opset/v{v}" in names for v in softmax)
    assert any(n.startswith("Softmax/opset/v11_axis=") for n in names)  # the rule changed
