"""A fast ``--list``: the exploration's seeds and its case ids are cached on disk,
keyed by what they depend on, and what the cache gives equals what is made."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conformance import cli, idcache
from conformance.explore import seedcache
from conformance.explore.seeds import InputSlot, Seed


def _seed() -> Seed:
    slot = InputSlot("X", "T", ("tensor(float)", "tensor(bfloat16)"), "single", True)
    return Seed(
        "test_x",
        "Op",
        "",
        13,
        {
            "axis": -1,
            "alpha": 0.1,
            "mode": b"constant",
            "perm": [1, 0],
            "names": [b"a", b"b"],
            "value": numpy_helper.from_array(np.array([1.5], np.float32)),
        },
        [
            np.arange(6, dtype=np.float32).reshape(2, 3),
            np.array([1.0, -2.0], dtype=ml_dtypes.bfloat16),
            np.array([0.5], dtype=ml_dtypes.float8_e5m2),
            np.array(["a", "bc"], dtype=object),
            None,
        ],
        [slot],
        1,
        (1e-3, 1e-7),
    )


def test_a_seed_decodes_to_what_was_encoded() -> None:
    seed = _seed()
    back = seedcache.decode(json.loads(json.dumps(seedcache.encode(seed))))
    assert seedcache.same(seed, back)
    assert back.inputs[1].dtype == ml_dtypes.bfloat16 and back.inputs[2].dtype.name == "float8_e5m2"
    assert isinstance(back.attrs["value"], onnx.TensorProto)
    assert back.slots[0].allowed == ("tensor(float)", "tensor(bfloat16)")
    other = _seed()
    other.inputs[0] = other.inputs[0].astype(np.float64)  # same values, another dtype
    assert not seedcache.same(seed, other)


def test_seeds_are_stored_and_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(tmp_path))
    table = {("", "Op"): (_seed(),)}
    assert seedcache.load() is None
    assert seedcache.store(table)
    assert seedcache.cache_file().parent == tmp_path
    loaded = seedcache.load()
    assert loaded is not None and seedcache.same(loaded, table)
    seedcache.cache_file().write_text("{broken")
    assert seedcache.load() is None  # made again by the caller, never an error


def test_a_value_it_cannot_hold_is_not_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(tmp_path))
    odd = _seed()
    odd.attrs["graph"] = onnx.GraphProto()
    assert not seedcache.store({("", "Op"): (odd,)})
    assert not list(tmp_path.iterdir())


def test_the_cached_seeds_are_those_onnx_makes() -> None:
    """The real table, through the cache, equals the table made from onnx's node tests."""
    from conformance.explore import seeds

    made = seeds._table()
    loaded = seedcache.load()
    assert loaded is not None and seedcache.same(loaded, made)


def test_list_reads_the_ids_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    monkeypatch.setenv("ORTCORE_CONFORMANCE_CACHE", str(tmp_path))
    built: list[str] = []

    def load_kind(kind: str) -> tuple[Any, ...]:
        built.append(kind)
        return tuple(SimpleNamespace(id=f"{kind}/case{i}") for i in range(3))

    load_kind.cache_clear = lambda: None  # type: ignore[attr-defined]  # as functools.cache's
    monkeypatch.setattr("conformance.cases.load_kind", load_kind)
    args = ["--provider", "cpu", "--list", "--kinds", "explore", "-k", "case[12]"]
    args += ["--depth", "quick"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.split() == ["explore/case1", "explore/case2"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out.split() == ["explore/case1", "explore/case2"]
    assert built == ["explore"]  # the second --list built nothing
    assert idcache.kind_ids("explore") == ["explore/case0", "explore/case1", "explore/case2"]
    for file in tmp_path.glob("ids-explore-*.json"):
        file.write_text("not json")
    assert idcache.kind_ids("explore") == ["explore/case0", "explore/case1", "explore/case2"]
    assert built == ["explore", "explore"]  # a broken file: made again
