"""The CPU provider's lazy kernel registry (``kernels/_index.py``).

The index the registry defers with must name, for every op, exactly the family
modules that register its kernels: built afresh from the real registry in a
new process, it must equal the committed one; every kernel of the eager
registry must be found by a lookup through the index before anything lists
the registry, and the lazy registry must hold no kernel the eager one lacks.
A session imports only the families of its model's ops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ortcore_cpu.kernels._index import INDEX

_KERNELS = """
def kernels(registry):
    return sorted(
        [k.op_type, k.domain, k.since, k.until, k.builder.__module__, k.builder.__qualname__,
         sorted([str(p), sorted(t.name for t in ts)] for p, ts in k.types.items())]
        for k in registry
    )
"""


def _run(code: str) -> object:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code + "\nprint('RESULT ' + json.dumps(result))"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(s for s in done.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _eager() -> dict[str, object]:
    code = f"""import json
{_KERNELS}
from ortcore_cpu.kernels._make_index import attribute
from ortcore_cpu.kernels import registry
index = attribute()
result = {{"index": [[list(k), list(v)] for k, v in index.items()], "kernels": kernels(registry)}}
"""
    out = _run(code)
    assert isinstance(out, dict)
    return out


def test_index_is_the_registry_s() -> None:
    eager = _eager()
    built = {tuple(k): tuple(v) for k, v in eager["index"]}  # type: ignore[union-attr]
    assert built == INDEX, "kernels/_index.py is stale: python -m ortcore_cpu.kernels._make_index"


def test_lookups_through_the_index_find_every_kernel_and_no_other() -> None:
    eager = _eager()["kernels"]
    wanted = [[op, domain, since] for op, domain, since, *_ in eager]  # type: ignore[union-attr]
    code = f"""import json
{_KERNELS}
from ep_sdk import KernelDef
from ortcore_cpu.kernels import registry
wanted = {wanted!r}
# lookups first (they import through the index), listing after (it imports everything)
missed = [w for w in wanted if not isinstance(registry.lookup(w[0], w[1], w[2]), KernelDef)]
result = {{"missed": missed, "kernels": kernels(registry)}}
"""
    lazy = _run(code)
    assert isinstance(lazy, dict)
    assert lazy["missed"] == []
    assert lazy["kernels"] == eager


def test_ops_come_from_the_index_without_importing() -> None:
    code = """import json, sys
from ortcore_cpu.kernels import FAMILIES, registry
ops = registry.ops()
result = {"ops": ops, "imported": [f for f in FAMILIES if f"ortcore_cpu.kernels.{f}" in sys.modules]}
"""
    out = _run(code)
    assert isinstance(out, dict)
    assert [tuple(o) for o in out["ops"]] == sorted(INDEX)
    assert out["imported"] == []


def test_a_session_imports_only_its_ops_families(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        "two_nodes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    listing = "[f for f in FAMILIES if f'ortcore_cpu.kernels.{f}' in sys.modules]"
    session = _run(f"""import json, sys
import numpy as np
import ortcore
sess = ortcore.InferenceSession({str(path)!r}, providers=["CPUExecutionProvider"])
sess.run(None, {{"x": np.ones((2, 3), np.float32)}})
from ortcore_cpu.kernels import FAMILIES
result = {listing}
""")
    # What importing the index's families of Add and Relu imports (they may import others).
    needed = sorted({f for op in ("Add", "Relu") for f in INDEX[("", op)]})
    direct = _run(f"""import json, sys, importlib
from ortcore_cpu.kernels import FAMILIES
for f in {needed!r}:
    importlib.import_module("ortcore_cpu.kernels." + f)
result = {listing}
""")
    assert session == direct
    assert set(needed) <= set(session)  # type: ignore[arg-type]
