"""The cost of checking mapped external data around every run.

A session whose external data is memory-mapped (over the read-in limit,
``session.external_data_read_in_bytes``) checks before and after each run
that every data file still has the size and modification time it had at
load (one ``fstat`` per file, see ``ortcore.external_data``). This times it
where it weighs most: a model whose runs cost almost nothing, ``y = x + w0 +
... + w{n-1}`` on 16 x 64 float32 values, each ``w`` in a data file of its
own. The same model runs read in (``all``: no check) and mapped (``0``), the
sessions taking turns; the table shows the medians in microseconds, the
difference, and the check alone.

    python benchmarks/external_data_check.py [--files 1 10 100] [--runs 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from timing import kept, timed_turns

ROWS, COLS = 16, 64


def write_model(folder: Path, files: int) -> Path:
    """``folder/m.onnx``: ``y = x + w0 + ...``, each ``w`` in its own data file."""
    inits, nodes, prev = [], [], "x"
    for i in range(files):
        w = np.full((ROWS, COLS), i, np.float32)
        (folder / f"w{i}.data").write_bytes(w.tobytes())
        t = numpy_helper.from_array(w, f"w{i}")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value=f"w{i}.data")
        inits.append(t)
        out = "y" if i == files - 1 else f"t{i}"
        nodes.append(helper.make_node("Add", [prev, f"w{i}"], [out], name=f"add{i}"))
        prev = out
    graph = helper.make_graph(
        nodes,
        "adds",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, COLS])],
        inits,
    )
    path = folder / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main() -> None:
    """Time read-in and mapped sessions for each file count; print a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()

    import ortcore
    from ortcore.external_data import EXTERNAL_DATA_KEY, READ_IN_CONFIG

    x = np.ones((ROWS, COLS), np.float32)
    print("| data files | read in, us/run | mapped, us/run | difference | check alone, us |")
    print("| --- | --- | --- | --- | --- |")
    for files in args.files:
        with tempfile.TemporaryDirectory() as tmp:
            path = write_model(Path(tmp), files)
            sessions = []
            for limit in ("all", "0"):
                so = ortcore.SessionOptions()
                so.add_session_config_entry(READ_IN_CONFIG, limit)
                sessions.append(ortcore.InferenceSession(str(path), so, providers=["cpu"]))
            runners = [kept(lambda s=s: s.run(None, {"x": x})) for s in sessions]
            rounds = max(args.runs // 100, 1)
            read_in, mapped = (
                statistics.median(t) * 1e6
                for t in timed_turns(runners, rounds, settle=5, block=100)
            )
            check = sessions[1]._model.meta[EXTERNAL_DATA_KEY].check
            t0 = time.perf_counter()
            for _ in range(args.runs):
                check()
            alone = (time.perf_counter() - t0) / args.runs * 1e6
            print(
                f"| {files} | {read_in:.1f} | {mapped:.1f} | {mapped - read_in:+.1f} "
                f"| {alone:.2f} |"
            )


if __name__ == "__main__":
    main()
