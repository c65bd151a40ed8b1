"""The ``dynamic`` and ``accumulate`` dimensions of ``explore``: cases that are
what they claim, and two faults of their classes caught.

The faulty providers live here (registered as a plugin for this module):
``explore-first-shape`` plans its Add from the first feed's shapes,
``explore-f16-sum`` sums a float16 MatMul in float16; ``explore-good`` is
their healthy baseline (Add, and a MatMul that accumulates in float32).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

import ep_sdk
from conformance.cases import Case
from conformance.explore import accumulate, dynamic
from conformance.outcomes import FAILURES, PASSED
from ortcore.plugins import default_manager

from . import faulty

PLUGIN = "tests.conformance.test_explore_dynamic"


@pytest.fixture(scope="module")
def quick() -> dict[str, Case]:
    """Both modules' cases at depth quick, by name."""
    return {c.name: c for c in (*dynamic.cases("quick"), *accumulate.cases("quick"))}


def test_names_unique_and_shaped(quick: dict[str, Case]) -> None:
    names = [c.name for c in (*dynamic.cases("quick"), *accumulate.cases("quick"))]
    assert len(names) == len(set(names))
    for case in quick.values():
        _, dimension, detail = case.name.split("/")
        assert case.kind == "explore" and case.dimension == dimension and detail
        assert dimension in ("dynamic", "accumulate") and case.seed is not None


def test_values_are_deterministic(quick: dict[str, Case]) -> None:
    for name in ("Add/dynamic/add_bcast_batch", "MatMul/accumulate/16x1024x8_float16"):
        again = {c.name: c for c in (*dynamic.cases("quick"), *accumulate.cases("quick"))}
        _, first = quick[name].load()
        _, second = again[name].load()
        for (ins_a, outs_a), (ins_b, outs_b) in zip(first, second, strict=True):
            for a, b in zip([*ins_a, *outs_a], [*ins_b, *outs_b], strict=True):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _dims(model: Any) -> list[list[str]]:
    return [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in model.graph.input]


def test_dynamic_dims_are_symbolic_and_sets_change_size(quick: dict[str, Case]) -> None:
    dyn = [c for c in quick.values() if c.dimension == "dynamic"]
    assert len({c.name.split("/")[0] for c in dyn}) >= 20
    for case in dyn:
        model, sets = case.materialize()
        dims = _dims(model)
        if case.name.endswith("_batch"):
            assert all(d[0] in ("batch", "") for d in dims) and any("batch" in d for d in dims)
        else:  # every dim of every input named, no name twice
            names = [n for d in dims for n in d]
            assert all(names) and len(names) == len(set(names))
        batched = [i for i, d in enumerate(dims) if d and d[0]]
        leading = [sets[k][0][batched[0]].shape[0] for k in range(len(sets))]
        assert leading[:3] == list(dynamic.BATCHES), case.name  # 1, then 3, then 1 again
        for ins, outs in sets:  # values drawn, outputs from the oracle, for each size
            assert ins and outs


def test_skipped_variants_are_counted() -> None:
    list(dynamic.cases("quick"))
    counts = dynamic.skipped()
    assert counts and all(isinstance(v, int) and v > 0 for v in counts.values())


def test_accumulate_is_long_positive_and_low_precision(quick: dict[str, Case]) -> None:
    acc = [c for c in quick.values() if c.dimension == "accumulate"]
    assert {c.name.rsplit("_", 1)[1] for c in acc} == {"float16", "bfloat16"}
    for case in acc:
        _, [(ins, outs)] = case.materialize()
        assert max(x.size for x in ins) >= 1024
        assert all(float(x.astype(np.float64).min()) >= 0 for x in ins)  # nothing cancels
        assert outs[0].dtype == ins[0].dtype


# -- faulty providers of these two classes ------------------------------------------


def _first_shape_add(info: ep_sdk.NodeInfo) -> Any:
    """Add planned from the first feed: its output shape (and element count)
    computed once, as a kernel that sizes its buffers at the first run does."""
    plan: dict[str, Any] = {}

    def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if "shape" not in plan:
            plan["shape"] = np.broadcast_shapes(a.shape, b.shape)
        size = int(np.prod(plan["shape"]))
        return np.add(a, b).reshape(-1)[:size].reshape(plan["shape"])

    return add


def _sum_in(dtype: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` with products and a running sum kept in ``dtype``: np.matmul on
    float16 arrays need not accumulate in float16, so the sum is written out."""
    prods = (a[..., :, :, None] * b[..., None, :, :]).astype(dtype)
    return np.add.accumulate(prods, axis=-2, dtype=dtype)[..., -1, :].astype(a.dtype)


def _f16_sum_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _sum_in(a.dtype, a, b)  # float16 in, float16 accumulator


def _f32_sum_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """At least float32 accumulation (float64 stays float64)."""
    return _sum_in(np.float64 if a.dtype == np.float64 else np.float32, a, b)


class ExploreGood(faulty.GoodProvider):
    """Healthy: faulty-good's ops and a MatMul that accumulates in float32."""

    name = "ExploreGoodExecutionProvider"
    aliases = ("explore-good",)
    faults: ClassVar[dict[str, Any]] = {"MatMul": _f32_sum_matmul}


class FirstShapeAdd(ExploreGood):
    """Faulty: Add's output shape planned from the first feed."""

    name = "ExploreFirstShapeExecutionProvider"
    aliases = ("explore-first-shape",)
    faults: ClassVar[dict[str, Any]] = {
        "MatMul": _f32_sum_matmul,
        "Add": faulty.Built(_first_shape_add),
    }


class Float16Sum(ExploreGood):
    """Faulty: MatMul accumulates float16 products in float16."""

    name = "ExploreF16SumExecutionProvider"
    aliases = ("explore-f16-sum",)
    faults: ClassVar[dict[str, Any]] = {"MatMul": _f16_sum_matmul}


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ep_sdk.ExecutionProvider]]:
    """This module's providers."""
    return [ExploreGood, FirstShapeAdd, Float16Sum]


@pytest.fixture(scope="module")
def explore_plugin(faulty_plugin: str) -> Iterator[str]:
    """This module registered as a plugin (beside tests.conformance.faulty)."""
    default_manager().register_plugin(sys.modules[__name__], name=PLUGIN)
    yield PLUGIN
    default_manager().unregister_plugin(PLUGIN)


CAUGHT = [
    ("explore-first-shape", "explore/Add/dynamic/add_bcast_batch", "wrong_type", "shape"),
    ("explore-first-shape", "explore/Add/dynamic/add_bcast_dims", "wrong_type", "shape"),
    ("explore-f16-sum", "explore/MatMul/accumulate/16x1024x8_float16", "mismatch", "rtol=0.002"),
]


@pytest.mark.parametrize(("provider", "case", "outcome", "words"), CAUGHT)
def test_fault_is_caught(
    suite: Any, explore_plugin: str, provider: str, case: str, outcome: str, words: str
) -> None:
    result = suite(provider, ("explore",), f"^{case}$", depth="quick")[case]
    assert result.outcome == outcome, result
    assert words in result.detail, result.detail
    healthy = suite("explore-good", ("explore",), f"^{case}$", depth="quick")[case]
    assert healthy.outcome == PASSED, healthy


def test_faulty_good_passes_what_it_claims(suite: Any, explore_plugin: str) -> None:
    pattern = r"^explore/(Add|Mul|Relu|MatMul)/"
    for provider in ("faulty-good", "explore-good"):
        results = suite(provider, ("explore",), pattern, depth="quick")
        assert not [r for r in results.values() if r.outcome in FAILURES], provider
        assert sum(r.outcome == PASSED for r in results.values()) >= 4, provider
