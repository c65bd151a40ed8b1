"""Ownership, overridable initializers, memory across shapes, the compile path's cases.

Each provider here has one realistic fault of a class the suite did not catch
before (issue 52, points 2 to 4), each caught by the check or case named in
its test; the healthy baselines pass the same checks. The providers are this
module's own plugin (registered like ``faulty.py``).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

import ep_sdk
from ep_sdk import ExecutionProvider
from ortcore.plugins import default_manager

from . import faulty
from .conftest import by_id, run

PLUGIN = "tests.conformance.test_ownership"
Fn = faulty.Fn


def _provider(alias: str, base: type, doc: str, **attrs: Any) -> type:
    name = "".join(p.title() for p in alias.split("-"))
    attrs = {
        "name": f"{name}ExecutionProvider",
        "aliases": (alias,),
        "__doc__": doc,
        "__module__": __name__,
        **attrs,
    }
    return type(f"{name}Provider", (base,), attrs)


# -- two outputs that are one array ----------------------------------------------


class _Memo:
    """The provider's result cache: the last input buffer Relu saw, and its result."""

    last: ClassVar[list[Any]] = [None, None]


def _memo_relu(x: np.ndarray) -> np.ndarray:
    """Relu that hands back its last result when it gets the same input buffer
    again (a cache of the last call, shared by the provider's kernels): two
    nodes reading one value get one array, and so does a caller running again
    with the same arrays."""
    if _Memo.last[0] is x:
        return _Memo.last[1]
    out = np.maximum(x, 0).astype(x.dtype)
    _Memo.last[:] = [x, out]
    return out


class DedupingFusing(faulty.FusingProvider):
    """Faulty: its engine merges identical computations, and a fused group whose
    outputs hold the same values returns one array for all of them."""

    def outputs(self, values: list[Any]) -> list[Any]:
        out: list[Any] = []
        for v in values:
            same = next((o for o in out if o.shape == v.shape and np.array_equal(o, v)), None)
            out.append(v if same is None else same)
        return out


MemoRelu = faulty._fault("own-memo", Relu=_memo_relu)
DedupFused = _provider("own-fused-dedup", DedupingFusing, DedupingFusing.__doc__ or "")


# -- an output that is a view of the input ---------------------------------------


def _zero_copy_reshape(data: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Reshape through an engine that binds the input buffer without a copy and
    hands the output back as a new array over the same address."""
    if not data.flags.c_contiguous or not data.size:
        data = np.ascontiguousarray(data)
    dims = [d if d != 0 else data.shape[i] for i, d in enumerate(shape.tolist())]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = data.size // known if known else 0
    buffer = (ctypes.c_char * data.nbytes).from_address(data.ctypes.data)
    return np.frombuffer(buffer, data.dtype).reshape(dims)


ZeroCopyReshape = faulty._fault("own-zero-copy", Reshape=_zero_copy_reshape)


# -- an output that is a buffer the provider keeps -------------------------------


def _cached_transpose(info: ep_sdk.NodeInfo) -> Fn:
    """Transpose that transposes a constant input once, when it builds, and
    returns that array on every run."""
    value = info.node.inputs[0]
    perm = info.attrs.get("perm")
    cached = None
    if ep_sdk.graph.is_constant(value):
        cached = np.ascontiguousarray(np.transpose(value.const_value.numpy(), perm))

    def transpose(x: np.ndarray) -> np.ndarray:
        return cached if cached is not None else np.ascontiguousarray(np.transpose(x, perm))

    return transpose


CachedWeight = faulty._fault("own-cached-weight", Transpose=faulty.Built(_cached_transpose))


# -- a cache that grows with every new shape -------------------------------------

_SCRATCH: dict[tuple[Any, ...], np.ndarray] = {}


def _scratch_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Add through a scratch buffer per shape, kept for the process."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    key = (shape, a.dtype)
    if key not in _SCRATCH:
        _SCRATCH[key] = np.empty(shape, a.dtype)
    np.add(a, b, out=_SCRATCH[key])
    return _SCRATCH[key].copy()


ShapeCache = faulty._fault("own-shape-cache", Add=_scratch_add)


def _lru_add(info: ep_sdk.NodeInfo) -> Fn:
    """No fault: Add through scratch buffers per shape, at most 64 kept (least
    recently used dropped)."""
    scratch: dict[tuple[Any, ...], np.ndarray] = {}

    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(a.shape, b.shape)
        key = (shape, a.dtype)
        buf = scratch.pop(key, None)
        if buf is None:
            buf = np.empty(shape, a.dtype)
        scratch[key] = buf
        while len(scratch) > 64:
            scratch.pop(next(iter(scratch)))
        np.add(a, b, out=buf)
        return buf.copy()

    return add


BoundedCache = faulty._fault("own-lru", Add=faulty.Built(_lru_add))


# -- overridable initializers --------------------------------------------------


class BakingFusing(faulty.FusingProvider):
    """Faulty: bakes every initializer its group reads into the engine, the
    overridable ones too: a feed of one is ignored."""

    def compile(self, group: ep_sdk.FusedGroup) -> Any:
        run = super().compile(group)
        baked = {
            i: v.const_value.numpy()
            for i, v in enumerate(group.inputs)
            if v.const_value is not None
        }

        def engine(*args: Any) -> Any:
            return run(*(baked.get(i, a) for i, a in enumerate(args)))

        return engine


def _packed_matmul(info: ep_sdk.NodeInfo) -> Fn:
    """MatMul that packs B when it builds if B has a stored value, without
    asking whether a feed may override it."""
    b = info.node.inputs[1]
    packed = None if b is None or b.const_value is None else b.const_value.numpy().T.copy()

    def matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return x @ (packed.T if packed is not None else w)

    return matmul


def _wrong_add() -> type:
    from onnx.reference.ops.op_add import Add

    class WrongAdd(Add):  # type: ignore[misc]
        """Add that adds 0.5 more."""

        def _run(self, a: Any, b: Any) -> Any:
            return ((a + b + np.float32(0.5)).astype(a.dtype),)

    WrongAdd.__name__ = "Add"
    return WrongAdd


class WrongAddFusing(faulty.FusingProvider):
    """Faulty: only fuses groups, and computes Add 0.5 too large."""

    def ops(self) -> tuple[type, ...]:
        return (_wrong_add(),)


FusedWrongAdd = _provider("own-fused-add", WrongAddFusing, WrongAddFusing.__doc__ or "")
BakedFused = _provider("own-fused-baked", BakingFusing, BakingFusing.__doc__ or "")
PackedMatMul = faulty._fault("own-packed", MatMul=faulty.Built(_packed_matmul))

PROVIDERS: list[type[ExecutionProvider]] = [
    MemoRelu,
    DedupFused,
    ZeroCopyReshape,
    CachedWeight,
    ShapeCache,
    BoundedCache,
    BakedFused,
    PackedMatMul,
    FusedWrongAdd,
]


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """The providers of this module."""
    return PROVIDERS


@pytest.fixture(scope="module")
def owned(faulty_plugin: str) -> Iterator[Any]:
    """``owned(provider, kinds, pattern)`` -> results by id, with this module's
    providers registered (and faulty.py's)."""
    default_manager().register_plugin(sys.modules[__name__], name=PLUGIN)

    def go(provider: str, kinds: tuple[str, ...], pattern: str | None = None) -> Any:
        return by_id(run(provider, kinds, pattern))

    yield go
    default_manager().unregister_plugin(PLUGIN)


OWN_CHECKS = r"^contract/(ownership|overridable|shape_memory)$"


@pytest.mark.parametrize("provider", ["faulty-good", "faulty-tidy", "own-lru"])
def test_healthy_kernel_providers_pass_the_new_checks(owned: Any, provider: str) -> None:
    results = owned(provider, ("contract",), OWN_CHECKS)
    assert len(results) == 3
    for r in results.values():
        assert r.outcome == "passed", r
        assert "Add" in r.detail  # ran on the probes, not unsupported


def test_healthy_fusing_provider_passes_ownership_and_overridable(owned: Any) -> None:
    results = owned("faulty-fusing", ("contract",), r"^contract/(ownership|overridable)$")
    for r in results.values():
        assert r.outcome == "passed", r
        assert "conv_relu_pool" in r.detail


@pytest.mark.parametrize(
    ("provider", "check", "outcome", "words"),
    [
        # two outputs that are one array
        ("own-memo", "ownership", "mismatch", "wrote into the outputs"),
        ("own-fused-dedup", "ownership", "run_error", "one buffer for outputs"),
        # an output that is a buffer the provider keeps
        ("own-cached-weight", "ownership", "mismatch", "wrote into the outputs"),
        # a cache that grows with every new shape
        ("own-shape-cache", "shape_memory", "run_error", "never forgets"),
        # an overridable initializer's feed ignored
        ("own-fused-baked", "overridable", "mismatch", "fed values must win"),
        ("own-packed", "overridable", "mismatch", "fed values must win"),
    ],
)
def test_contract_check_catches(
    owned: Any, provider: str, check: str, outcome: str, words: str
) -> None:
    r = owned(provider, ("contract",), rf"^contract/{check}$")[f"contract/{check}"]
    assert r.outcome == outcome, r
    assert words in r.detail, r.detail


@pytest.mark.parametrize(
    ("provider", "case", "outcome", "words"),
    [
        # an output that is a view of the caller's input (no common base array)
        ("own-zero-copy", "node/test_reshape_reordered_all_dims", "run_error", "shares memory"),
        # a run repeated with the caller's arrays gets the result it kept
        ("own-memo", "generated/dtype_Relu_float", "mismatch", "wrote into the outputs"),
        # the fed weight ignored, in a case of the op
        ("own-packed", "node/test_matmul_2d", "mismatch", "fed values"),
    ],
)
def test_operator_case_catches(
    owned: Any, provider: str, case: str, outcome: str, words: str
) -> None:
    r = owned(provider, ("node", "generated"), rf"^{case}$")[case]
    assert r.outcome == outcome, r
    assert words in r.detail, r.detail
    assert r.dimension in ("ownership", "overridable")


def test_healthy_baseline_passes_the_same_cases(owned: Any) -> None:
    pattern = r"^(node/test_reshape_reordered_all_dims|generated/dtype_Relu_float|node/test_add)$"
    results = owned("faulty-good", ("node", "generated"), pattern)
    assert results["generated/dtype_Relu_float"].outcome == "passed"
    assert results["node/test_add"].outcome == "passed"
    assert results["node/test_reshape_reordered_all_dims"].outcome == "unsupported"


def test_compile_path_provider_runs_single_node_cases_in_groups(owned: Any) -> None:
    """A provider that only fuses groups declined every single-node case; now each
    runs with companions, and a wrong kernel reachable only in a group shows."""
    pattern = r"^(node/test_add|node/test_basic_conv_with_padding|generated/bcast_Add_5)$"
    healthy = owned("faulty-fusing", ("node", "generated"), pattern)
    for r in healthy.values():
        assert r.outcome == "passed", r
        assert r.detail.startswith("ran as a group"), r.detail
        assert r.nodes is not None and r.nodes["provider"] >= 2
    wrong = owned("own-fused-add", ("node",), r"^node/test_add$")["node/test_add"]
    assert wrong.outcome == "mismatch", wrong
    assert "as a group" in wrong.detail


def test_fused_feed_ignored_in_a_grouped_case(owned: Any) -> None:
    """The overridable variant runs on the grouped case too."""
    r = owned("own-fused-baked", ("generated",), r"^generated/bcast_Add_5$")
    result = r["generated/bcast_Add_5"]
    assert result.outcome == "mismatch", result
    assert "as a group" in result.detail and "fed values" in result.detail


def test_the_checks_do_not_flag_the_cpu_provider_on_the_probes(cpu: str) -> None:
    results = by_id(run(cpu, ("contract",), OWN_CHECKS))
    assert {r.outcome for r in results.values()} == {"passed"}, results
