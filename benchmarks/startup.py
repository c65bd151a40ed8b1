"""Cold start: ortcore (CPU provider) next to onnxruntime, each in a fresh process.

Three measurements, each taken in a new Python process per repeat, the two
runtimes taking turns (one ortcore process, one onnxruntime process, ...) so
that machine noise hits both alike:

* ``import``: ``import ortcore`` against ``import onnxruntime``;
* ``cold start``: import, create a CPU session on a 2-node model
  (Add then Relu, written to a temporary file) and run it once;
* ``resnet50 session``: in a process that has imported the runtime, create a
  session on onnx's light ResNet-50 (from bytes, so reading the file is not
  timed): the first creation of the process (``first``), then a second one
  (``again``), when everything the first loaded is there.

Times are taken inside the child with ``time.perf_counter`` (the interpreter's
own start, the same for both, is left out; ``process`` adds the wall time of
the whole child process, as a user's shell sees it). Each row shows the
medians over ``--repeats`` processes and the ratio ortcore / onnxruntime.

Bytecode caches are allowed (``PYTHONDONTWRITEBYTECODE`` is removed from the
children's environment) and warmed by one untimed process of each kind, as on
a user's machine after the first import.

    python benchmarks/startup.py [--repeats 7] [--threads 0] [--skip resnet50]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNTIMES = ("ortcore", "onnxruntime")

_PRELUDE = """
import json, sys, time
t0 = time.perf_counter()
"""

_IMPORT = _PRELUDE + """
import {rt}
out = {{"import": time.perf_counter() - t0}}
"""

_COLD = _PRELUDE + """
import {rt}
import numpy as np
so = {rt}.SessionOptions()
so.intra_op_num_threads = {threads}
so.log_severity_level = 3
sess = {rt}.InferenceSession({model!r}, so, providers=["CPUExecutionProvider"])
sess.run(None, {{"x": np.ones((2, 3), dtype=np.float32)}})
out = {{"cold start": time.perf_counter() - t0}}
"""

_RESNET = _PRELUDE + """
import {rt}
model = open({model!r}, "rb").read()
so = {rt}.SessionOptions()
so.intra_op_num_threads = {threads}
so.log_severity_level = 3
t = time.perf_counter()
{rt}.InferenceSession(model, so, providers=["CPUExecutionProvider"])
first = time.perf_counter() - t
t = time.perf_counter()
{rt}.InferenceSession(model, so, providers=["CPUExecutionProvider"])
out = {{"resnet50 first": first, "resnet50 again": time.perf_counter() - t}}
"""

_EPILOGUE = """
print("STARTUP " + json.dumps(out))
"""


def two_node_model(folder: Path) -> Path:
    """Write a 2-node float model (``relu(x + x)``, x: [2, 3]) and return its path."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        "two_nodes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "two_nodes.onnx"
    onnx.save(model, path)
    return path


def light_resnet50() -> Path:
    """onnx's light ResNet-50 (the model ``ortcore run`` takes by default), found
    without importing onnx."""
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("startup.py: the onnx package is needed for the light ResNet-50")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"


def child_env() -> dict[str, str]:
    """The environment of a user's process: bytecode caches allowed."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(code: str, env: dict[str, str]) -> dict[str, float]:
    """Run ``code`` in a fresh interpreter; return its timings and the process's wall time."""
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code + _EPILOGUE],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"startup.py: child failed:\n{done.stderr[-3000:]}")
    line = next(s for s in done.stdout.splitlines() if s.startswith("STARTUP "))
    out: dict[str, float] = json.loads(line.removeprefix("STARTUP "))
    out["process"] = wall
    return out


def measure(
    name: str, template: str, args: dict[str, object], repeats: int, env: dict[str, str]
) -> None:
    """Time ``template`` for both runtimes, interleaved, and print one row per timing."""
    codes = {rt: template.format(rt=rt, **args) for rt in RUNTIMES}
    for rt in RUNTIMES:  # warm the bytecode caches and the file system
        run_child(codes[rt], env)
    samples: dict[str, list[dict[str, float]]] = {rt: [] for rt in RUNTIMES}
    for _ in range(repeats):
        for rt in RUNTIMES:
            samples[rt].append(run_child(codes[rt], env))
    for key in samples["ortcore"][0]:
        if key == "process" and name == "resnet50 session":
            continue  # the process also imports; the rows above say what is timed
        ours = statistics.median(s[key] for s in samples["ortcore"])
        ref = statistics.median(s[key] for s in samples["onnxruntime"])
        label = f"{name} (process)" if key == "process" else key
        print(
            f"{label:<26} ortcore {ours * 1e3:8.1f} ms  onnxruntime {ref * 1e3:8.1f} ms  "
            f"ratio {ours / ref:5.2f}",
            flush=True,
        )


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7, help="fresh processes per runtime")
    parser.add_argument(
        "--threads", type=int, default=0, help="intra-op threads (0: each runtime's default)"
    )
    parser.add_argument(
        "--skip", default="", help="comma-separated: import, cold, resnet50 (measurements to skip)"
    )
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    env = child_env()
    print(f"{args.repeats} fresh processes per runtime and row, medians; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        model = two_node_model(Path(tmp))
        if "import" not in skip:
            measure("import", _IMPORT, {}, args.repeats, env)
        if "cold" not in skip:
            measure(
                "cold start",
                _COLD,
                {"model": str(model), "threads": args.threads},
                args.repeats,
                env,
            )
        if "resnet50" not in skip:
            measure(
                "resnet50 session",
                _RESNET,
                {"model": str(light_resnet50()), "threads": args.threads},
                args.repeats,
                env,
            )


if __name__ == "__main__":
    main()
