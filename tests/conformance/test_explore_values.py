"""The value dimensions of the exploration: ``range`` (each type's whole
range), ``control`` (control inputs explored) and the empty results of
zero-size cases whose oracle fails.

Each test checks that a kernel with the bug class the dimension is for gets a
different answer than the case expects, and a correct one the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import pytest

from conformance.cases import Case
from conformance.explore import controls, values
from conformance.explore.spec import Feed, Spec, materialize, np_dtype
from conformance.outcomes import CaseSkipped

_T = onnx.TensorProto
INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _draw(elem: int, span: values.Span, shape: tuple[int, ...] = (6, 4)) -> np.ndarray:
    rng = np.random.default_rng(7)
    return values.draw_span(Feed(elem, shape, True, None, span), rng)


@pytest.mark.parametrize("name", sorted(INTS))
def test_integers_reach_both_ends(name: str) -> None:
    """A range draw holds the type's smallest value (0 or INT_MIN) and values in
    the top quarter (unsigned: at or above 2^(bits-1), where a signed reading
    goes negative)."""
    elem = values.TYPES[name]
    x = _draw(elem, values.Span())
    info = np.iinfo(np_dtype(elem))
    assert x.dtype == np_dtype(elem)
    assert x.min() == info.min
    assert (x >= info.max - info.max // 4).any()
    if info.min == 0:
        assert (x >= np.asarray(2 ** (info.bits - 1), dtype=x.dtype)).any()


@pytest.mark.parametrize("name", ["bfloat16", "float", "double"])
def test_floats_go_beyond_float16(name: str) -> None:
    """bfloat16, float32 and float64 draws hold magnitudes above float16's
    largest (65504) and non-zero ones below its smallest normal (6.1e-5)."""
    x = np.abs(_draw(values.TYPES[name], values.Span()).astype(np.float64))
    assert (x > 65504).any()
    assert ((x > 0) & (x < 6.1e-5)).any()
    assert np.isfinite(x).all()


@pytest.mark.parametrize("name", sorted(INTS))
def test_limits_hold(name: str) -> None:
    """Divisors have no 0 (nor -1 when signed); a negated input no INT_MIN;
    sums stay within max/8 and products within sqrt(max): nothing undefined."""
    elem = values.TYPES[name]
    info = np.iinfo(np_dtype(elem))
    div = _draw(elem, values.Span(divisor=True), (40,))
    assert not (div == 0).any()
    if info.min:
        assert not (div == -1).any()
        assert not (_draw(elem, values.Span(negated=True), (40,)) == info.min).any()
    assert np.abs(_draw(elem, values.Span(shrink=8), (40,)).astype(object)).max() <= info.max // 8
    assert _draw(elem, values.Span(shrink=0), (40,)).astype(object).max() ** 2 <= info.max


def test_casts_stay_within_the_target() -> None:
    """A cast's values are ones the target type holds, whole where it is an integer."""
    x = _draw(_T.DOUBLE, values.Span(within=_T.INT8), (40,))
    assert x.min() >= -128 and x.max() <= 127
    assert np.array_equal(x, np.trunc(x))
    y = _draw(_T.UINT64, values.Span(within=_T.FLOAT16), (40,)).astype(np.float64)
    assert y.max() <= values.BIG[_T.FLOAT16]


def _range_case(op: str, name: str) -> Case:
    from conformance.explore.base import targets

    for s, opset, suffix in targets("quick"):
        if s.op == op and not suffix:
            for c in values.cases_of(s, opset, suffix, "full"):
                if c.name == f"{op}/range/T={name}":
                    return c
    raise AssertionError(f"no {op}/range/T={name}")


def _check(case: Case, kernel: Callable[..., Any]) -> bool:
    """Whether ``kernel`` on the case's inputs gives its expected outputs (in
    their type, within the case's tolerance)."""
    _, data = case.load()
    feeds, want = data[0]
    got = kernel(*feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    tol = case.tolerance
    with np.errstate(all="ignore"):
        return all(
            np.shape(g) == np.shape(w)
            and np.allclose(
                np.asarray(g).astype(w.dtype).astype(np.float64),
                w.astype(np.float64),
                rtol=max(tol.rtol, 1.6e-2 if w.dtype.itemsize == 2 else 0.0),
                atol=tol.atol,
                equal_nan=True,
            )
            for g, w in zip(got, want)
        )


def _signed_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = {np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}[a.dtype]
    x, y = a.view(s), b.view(s)
    with np.errstate(all="ignore"):
        q = (np.abs(x) // np.abs(y)) * np.sign(x) * np.sign(y)
    return q.astype(s).view(a.dtype)


@pytest.mark.parametrize("name", ["uint32", "uint64"])
def test_unsigned_divide_as_signed_fails_a_range_case(name: str) -> None:
    case = _range_case("Div", name)
    assert not _check(case, _signed_div)
    assert _check(case, lambda a, b: a // b)


def test_argmin_by_negation_fails_a_range_case() -> None:
    from onnx.reference import ReferenceEvaluator

    for name in ("uint64", "int32"):
        case = _range_case("ArgMin", name)
        model, _ = case.load()
        good = ReferenceEvaluator(model)
        bad = ReferenceEvaluator(_renamed(model, "ArgMax"))
        assert _check(case, lambda x, g=good: g.run(None, {"x0": x}))
        with np.errstate(over="ignore"):
            assert not _check(case, lambda x, b=bad: b.run(None, {"x0": np.negative(x)}))


def _renamed(model: onnx.ModelProto, op: str) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[0].op_type = op
    return m


def test_bfloat16_through_float16_fails_a_range_case() -> None:
    for op, fn in (("Add", np.add), ("Mul", np.multiply), ("Div", np.divide)):
        case = _range_case(op, "bfloat16")
        with np.errstate(all="ignore"):
            assert not _check(
                case, lambda a, b, f=fn: f(a.astype(np.float16), b.astype(np.float16))
            )
            assert _check(case, lambda a, b, f=fn: f(a.astype(np.float32), b.astype(np.float32)))


def test_every_family_has_a_reason_and_no_op_twice() -> None:
    seen: set[str] = set()
    for fam in values.FAMILIES:
        assert len(fam.reason) > 20
        assert not fam.ops & seen
        seen |= fam.ops


def _control_cases(op: str) -> Iterator[Case]:
    from conformance.explore.base import targets

    # every seed of the op at full depth: the representative one may not give the
    # control input (Split's has num_outputs, not split)
    for s, opset, suffix in targets("full"):
        if s.op == op and "@v" not in suffix:
            yield from controls.cases_of(s, opset, suffix, "full")


def test_scalar_and_negative_indices_are_explored() -> None:
    """Gather gets rank-0 to rank-3 indices with negative values; a kernel that
    makes indices 1-D fails the rank-0 case, np.take passes them all."""
    cases = {c.name: c for c in _control_cases("Gather")}
    ranks = set()
    for case in cases.values():
        model, _ = case.load()
        idx = onnx.numpy_helper.to_array(model.graph.initializer[0])
        ranks.add(idx.ndim)
        axis = next(a.i for a in model.graph.node[0].attribute if a.name == "axis")
        assert _check(case, lambda x, i=idx, a=axis: np.take(x, i, axis=a))
        if idx.ndim == 0:
            assert not _check(case, lambda x, i=idx, a=axis: np.take(x, np.atleast_1d(i), axis=a))
    assert ranks == {0, 1, 2, 3}
    assert any(
        (onnx.numpy_helper.to_array(c.load()[0].graph.initializer[0]) < 0).any()
        for c in cases.values()
    )


@pytest.mark.parametrize("op", ["Reshape", "Slice", "Split", "Tile", "TopK", "Pad"])
def test_control_values_are_explored(op: str) -> None:
    """Each op with a control input gets several cases, each legal for the oracle
    or counted as skipped."""
    names = []
    for case in _control_cases(op):
        names.append(case.name)
        assert case.dimension == "control"
        try:
            case.load()
        except CaseSkipped:
            pass
    assert len(names) >= 2, names


def _flatten(shape: tuple[int, ...], axis: int) -> Spec:
    return Spec(
        "Flatten", "", 21, [Feed(_T.FLOAT, shape, True, None)], [{"axis": axis}], 1, "empty", "t"
    )


def test_an_empty_result_is_expected_where_the_oracle_fails() -> None:
    """Flatten of a (0, 3, 4) input at axis 1: the reference's reshape(0, -1)
    fails, shape inference says (0, 12): the expected output is that empty array."""
    _, data = materialize(_flatten((0, 3, 4), 1))
    (want,) = data[0][1]
    assert want.shape == (0, 12) and want.dtype == np.float32


def test_no_empty_result_is_made_up_where_a_control_input_is_given() -> None:
    """ScatterElements into an emptied data with indices into it: not judged."""
    spec = Spec(
        "ScatterElements",
        "",
        18,
        [
            Feed(_T.FLOAT, (0, 5), True, None),
            Feed(_T.INT64, (1, 2), False, np.array([[1, 3]])),
            Feed(_T.FLOAT, (1, 2), True, None),
        ],
        [{"axis": 1}],
        1,
        "empty",
        "t",
    )
    with pytest.raises(CaseSkipped):
        materialize(spec)
