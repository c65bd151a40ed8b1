"""``intra_op_num_threads`` sizes numpy's BLAS pool for each run (in a child
process: the pool is process-wide)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("threadpoolctl")

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from onnx import TensorProto, helper
    import ortcore
    from ortcore_cpu.threads import blas_threads, limit_blas_threads

    before = blas_threads()
    if before is None:
        print("no-blas")
        raise SystemExit(0)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 4]) for n in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    a = np.eye(4, dtype=np.float32)
    # 0 (the default) leaves the pool alone
    ortcore.InferenceSession(model, providers=["cpu"]).run(None, {"a": a, "b": a})
    assert blas_threads() == before, (blas_threads(), before)
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = 1
    one = ortcore.InferenceSession(model, so, providers=["cpu"])
    so.intra_op_num_threads = 3
    three = ortcore.InferenceSession(model, so, providers=["cpu"])
    # each run sizes the pool to its own session's setting
    assert np.array_equal(one.run(None, {"a": a, "b": a})[0], a)
    assert blas_threads() == 1, blas_threads()
    three.run(None, {"a": a, "b": a})
    assert blas_threads() == 3, blas_threads()
    one.run(None, {"a": a, "b": a})
    assert blas_threads() == 1, blas_threads()
    # from another thread too (threadpoolctl's one-controlling-thread rule)
    import threading
    t = threading.Thread(target=three.run, args=(None, {"a": a, "b": a}))
    t.start()
    t.join()
    assert blas_threads() == 3, blas_threads()
    one.run(None, {"a": a, "b": a})
    assert blas_threads() == 1, blas_threads()
    try:
        limit_blas_threads(0)
    except ValueError as exc:
        assert "intra_op_num_threads" in str(exc)
    else:
        raise AssertionError("0 threads accepted")
    print("ok", before)
    """
)


def test_intra_op_num_threads_sizes_the_blas_pool() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("no-blas"):
        pytest.skip("numpy is not linked against a BLAS threadpoolctl knows")
    assert out.stdout.startswith("ok")
