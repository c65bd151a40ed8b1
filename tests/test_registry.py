"""The kernel registry: opset ranges, type constraints, overlaps, misses."""

from __future__ import annotations

import pytest

from ep_sdk import FLOAT_TYPES, KernelDef, KernelMiss, KernelRegistry, attribute_defaults
from ep_sdk.dtypes import DataType as DT


def _builder(tag: str):
    def build(info):
        return lambda *a: (tag,)

    build.tag = tag  # type: ignore[attr-defined]
    return build


def _tag(found) -> str:
    assert isinstance(found, KernelDef), str(found)
    return found.builder.tag


@pytest.fixture
def reg() -> KernelRegistry:
    r = KernelRegistry()
    r.kernel("Add", since=7, until=12, types={"T": {DT.FLOAT}})(_builder("add7"))
    r.kernel("Add", since=14, types={"T": {DT.FLOAT}})(_builder("add14"))
    return r


@pytest.mark.parametrize(
    ("opset", "tag"), [(7, "add7"), (10, "add7"), (12, "add7"), (14, "add14"), (21, "add14")]
)
def test_lookup_by_opset_range(reg: KernelRegistry, opset: int, tag: str) -> None:
    assert _tag(reg.lookup("Add", "", opset, [DT.FLOAT, DT.FLOAT], [DT.FLOAT])) == tag


@pytest.mark.parametrize("opset", [6, 13])
def test_opset_miss_lists_registered_versions(reg: KernelRegistry, opset: int) -> None:
    miss = reg.lookup("Add", "", opset, [DT.FLOAT, DT.FLOAT], [DT.FLOAT])
    assert isinstance(miss, KernelMiss)
    msg = str(miss)
    assert f"opset {opset}" in msg
    assert "7-12" in msg and "14+" in msg


def test_unknown_op_miss_names_op_and_domain(reg: KernelRegistry) -> None:
    miss = reg.lookup("Sigmoid", "", 17, [DT.FLOAT], [DT.FLOAT])
    assert isinstance(miss, KernelMiss)
    assert "Sigmoid" in str(miss) and "ai.onnx" in str(miss)
    miss = reg.lookup("Add", "com.example", 1)
    assert isinstance(miss, KernelMiss) and "com.example" in str(miss)


def test_type_param_constraint_miss_names_type(reg: KernelRegistry) -> None:
    miss = reg.lookup("Add", "", 14, [DT.DOUBLE, DT.DOUBLE], [DT.DOUBLE])
    assert isinstance(miss, KernelMiss)
    assert "tensor(double)" in str(miss)
    assert "tensor(float)" in str(miss)  # what is supported
    assert "'T'" in str(miss)


def test_unknown_types_match_any_constraint(reg: KernelRegistry) -> None:
    assert _tag(reg.lookup("Add", "", 14, [None, None], [None])) == "add14"
    assert _tag(reg.lookup("Add", "", 14)) == "add14"


def test_constraint_by_input_index() -> None:
    r = KernelRegistry()
    # Reshape's shape input (index 1) must be int64; data (index 0) anything.
    r.kernel("Reshape", since=14, types={1: {DT.INT64}})(_builder("reshape"))
    assert _tag(r.lookup("Reshape", "", 14, [DT.FLOAT, DT.INT64])) == "reshape"
    assert _tag(r.lookup("Reshape", "", 14, [DT.UINT8, DT.INT64])) == "reshape"
    miss = r.lookup("Reshape", "", 14, [DT.FLOAT, DT.INT32])
    assert isinstance(miss, KernelMiss)
    assert "tensor(int32)" in str(miss) and "input 1" in str(miss)


def test_variadic_param_applies_to_every_input() -> None:
    r = KernelRegistry()
    r.kernel("Sum", since=13, types={"T": {DT.FLOAT}})(_builder("sum"))
    assert _tag(r.lookup("Sum", "", 13, [DT.FLOAT] * 4, [DT.FLOAT])) == "sum"
    miss = r.lookup("Sum", "", 13, [DT.FLOAT, DT.FLOAT, DT.FLOAT16], [DT.FLOAT])
    assert isinstance(miss, KernelMiss) and "tensor(float16)" in str(miss)


def test_output_type_constraint() -> None:
    r = KernelRegistry()
    # Cast: T2 is the output's type parameter.
    r.kernel("Cast", since=13, types={"T2": {DT.FLOAT}})(_builder("cast"))
    assert _tag(r.lookup("Cast", "", 13, [DT.INT64], [DT.FLOAT])) == "cast"
    miss = r.lookup("Cast", "", 13, [DT.INT64], [DT.INT8])
    assert isinstance(miss, KernelMiss)
    assert "output 0" in str(miss) and "tensor(int8)" in str(miss)


def test_same_range_disjoint_types_both_registered() -> None:
    r = KernelRegistry()
    r.kernel("Relu", since=14, types={"T": {DT.FLOAT}})(_builder("f32"))
    r.kernel("Relu", since=14, types={"T": {DT.DOUBLE}})(_builder("f64"))
    assert _tag(r.lookup("Relu", "", 14, [DT.FLOAT], [DT.FLOAT])) == "f32"
    assert _tag(r.lookup("Relu", "", 14, [DT.DOUBLE], [DT.DOUBLE])) == "f64"
    assert len(r) == 2
    assert r.ops() == [("", "Relu")]


@pytest.mark.parametrize(("since", "until"), [(10, 12), (12, None), (5, 7), (1, None), (7, 7)])
def test_overlapping_registration_refused(reg: KernelRegistry, since: int, until: int) -> None:
    with pytest.raises(ValueError, match="overlaps"):
        reg.kernel("Add", since=since, until=until, types={"T": FLOAT_TYPES})(_builder("x"))


def test_adjacent_ranges_do_not_overlap(reg: KernelRegistry) -> None:
    reg.kernel("Add", since=13, until=13, types={"T": {DT.FLOAT}})(_builder("add13"))
    assert _tag(reg.lookup("Add", "", 13, [DT.FLOAT, DT.FLOAT], [DT.FLOAT])) == "add13"
    assert len(reg) == 3


def test_unconstrained_overlap_refused() -> None:
    r = KernelRegistry()
    r.kernel("Neg", since=6)(_builder("a"))
    with pytest.raises(ValueError):
        r.kernel("Neg", since=13)(_builder("b"))
    # a different domain is a different op
    r.kernel("Neg", since=13, domain="com.example")(_builder("c"))
    assert _tag(r.lookup("Neg", "com.example", 13)) == "c"
    assert _tag(r.lookup("Neg", "", 13)) == "a"


def test_until_before_since_refused() -> None:
    with pytest.raises(ValueError, match="until"):
        KernelRegistry().kernel("Neg", since=13, until=6)(_builder("a"))


def test_stacked_decorators_register_several_ranges() -> None:
    r = KernelRegistry()

    @r.kernel("Abs", since=6, until=12)
    @r.kernel("Abs", since=13)
    def build(info):
        return lambda x: (x,)

    assert len(r) == 2
    assert r.lookup("Abs", "", 6).builder is build  # type: ignore[union-attr]
    assert r.lookup("Abs", "", 20).builder is build  # type: ignore[union-attr]
    assert isinstance(r.lookup("Abs", "", 5), KernelMiss)


def test_kernel_def_records_memory_and_context() -> None:
    r = KernelRegistry()
    r.kernel("Expand", since=13, input_memory={1: "host"}, context=True, inplace={0: 0})(
        _builder("e")
    )
    k = r.lookup("Expand", "", 13)
    assert isinstance(k, KernelDef)
    assert k.input_memory == {1: "host"} and k.context and k.inplace == {0: 0}
    assert k.version_range() == "13+"


def test_attribute_defaults_from_schema() -> None:
    d = attribute_defaults("LeakyRelu", "", 16)
    assert d["alpha"] == pytest.approx(0.01)
    assert attribute_defaults("NoSuchOp", "", 16) == {}
