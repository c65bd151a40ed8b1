"""The core's parameter checks guard this provider's kernels too: a
BatchNormalization whose channels are symbolic at load, given 2 statistics
for 4 channels, is refused before the device kernel runs (which would read
past the statistics' buffers: it ran, silently, before the checks).

On the CPU emulation of CUDA, in a child process: a regression reads out of
bounds, which may crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    import ortcore, ortcore_cpu.plugin, ortcore_cuda.plugin
    from ortcore.plugins import PluginManager

    def model(stats):
        inits = [numpy_helper.from_array(np.full(stats, 0.5 + i, np.float32), n)
                 for i, n in enumerate("sbmv")]
        node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")
        graph = helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "C", 3, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        opset = [helper.make_opsetid("", 15)]
        return helper.make_model(graph, opset_imports=opset).SerializeToString()

    pm = PluginManager(autoload=False)
    pm.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    pm.register_plugin(ortcore_cpu.plugin, name="ortcore_cpu")
    x = np.ones((1, 4, 3, 3), np.float32)
    out = {}
    for stats in (4, 2):
        sess = ortcore.InferenceSession(
            model(stats), providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
            plugin_manager=pm)
        out["providers"] = [r.provider for r in sess.get_partition().nodes]
        try:
            sess.run(None, {"x": x})
            out[stats] = "ran"
        except Exception as exc:
            out[stats] = [type(exc).__name__, str(exc)]
    print(json.dumps(out))
    """
)


def test_batchnorm_on_the_device_is_checked_at_run_time() -> None:
    from ortcore_cuda.emulator import compiler

    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    import ortcore_cuda

    root = str(Path(ortcore_cuda.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ORTCORE_CUDA_EMULATE": "1", "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["providers"] == ["CUDAExecutionProvider"]
    assert out["4"] == "ran"
    cls, msg = out["2"]
    assert cls == "RunInvalidArgument"
    assert "(provider CUDAExecutionProvider)" in msg
    assert "input scale ('s') has 2 elements, X has 4 channels (dim 1)" in msg
