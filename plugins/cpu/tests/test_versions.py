"""Registrations driven by onnx's schemas (``ortcore_cpu.kernels._versions``)."""

from __future__ import annotations

import pytest

from ortcore_cpu.kernels import registry
from ortcore_cpu.kernels._versions import per_schema_version, schema_ranges, schema_versions


def _registered(op: str, domain: str = "") -> list[tuple[int, int | None, dict[int, str]]]:
    kernels = [k for k in registry if k.op_type == op and k.domain == domain]
    return [
        (k.since, k.until, dict(k.input_memory)) for k in sorted(kernels, key=lambda k: k.since)
    ]


def test_one_registration_per_schema_version() -> None:
    versions = schema_versions("Reshape")
    got = _registered("Reshape")
    assert [since for since, _, _ in got] == list(versions)
    assert [until for _, until, _ in got] == [v - 1 for v in versions[1:]] + [None]


def test_host_inputs_only_where_the_schema_has_them() -> None:
    # Reshape's shape is an attribute before opset 5, an input (read on the host) after.
    memory = {since: mem for since, _, mem in _registered("Reshape")}
    assert memory[1] == {} and all(m == {1: "host"} for v, m in memory.items() if v >= 5)
    # Pad: pads and constant_value from 11, axes from 18.
    pad = {since: mem for since, _, mem in _registered("Pad")}
    assert pad[2] == {} and set(pad[11]) == {1, 2} and set(pad[18]) == {1, 2, 3}


def test_ranges_stop_at_until_and_fold_after_newest() -> None:
    assert schema_ranges("ReduceMax", since=13, until=17) == [(13, 17)]
    assert schema_ranges("ReduceSum", until=12) == [(1, 10), (11, 12)]
    newest = schema_ranges("QuantizeLinear", newest=25)
    assert newest[-1] == (25, None) and len(newest) == len(schema_versions("QuantizeLinear")) - 1


def test_since_must_be_a_schema_version() -> None:
    with pytest.raises(ValueError, match="not a schema version"):
        schema_ranges("Reshape", since=6)
    with pytest.raises(ValueError, match="no schema version"):
        schema_ranges("Reshape", since=500)


def test_unknown_type_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="no type parameter"):
        per_schema_version("Reshape", since=25, params=("Nope",))(lambda info: None)  # type: ignore[arg-type,return-value]
