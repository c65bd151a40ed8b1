"""``intra_op_num_threads`` sizes numpy's BLAS pool for each run (in a child
process: the pool is process-wide), within the process's thread budget."""

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
    from ortcore_cpu.threads import blas_threads, cores, limit_blas_threads, set_load_sensing

    set_load_sensing(False)  # other processes on a CI machine must not move the numbers

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
    # 0 (the default) keeps the pool's own size, within the cores
    ortcore.InferenceSession(model, providers=["cpu"]).run(None, {"a": a, "b": a})
    assert blas_threads() == min(before, cores()), (blas_threads(), before)
    three_or_cores = min(3, cores())
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = 1
    one = ortcore.InferenceSession(model, so, providers=["cpu"])
    so.intra_op_num_threads = 3
    three = ortcore.InferenceSession(model, so, providers=["cpu"])
    # each run sizes the pool to its own session's setting
    assert np.array_equal(one.run(None, {"a": a, "b": a})[0], a)
    assert blas_threads() == 1, blas_threads()
    three.run(None, {"a": a, "b": a})
    assert blas_threads() == three_or_cores, blas_threads()
    one.run(None, {"a": a, "b": a})
    assert blas_threads() == 1, blas_threads()
    # from another thread too (threadpoolctl's one-controlling-thread rule)
    import threading
    t = threading.Thread(target=three.run, args=(None, {"a": a, "b": a}))
    t.start()
    t.join()
    assert blas_threads() == three_or_cores, blas_threads()
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


def test_concurrent_runs_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs in flight divide the cores; a run that ends gives its share back."""
    from ortcore_cpu import threads

    monkeypatch.setattr(threads, "_CORES", 8)
    monkeypatch.setattr(threads, "_sensing", False)
    monkeypatch.setattr(threads, "_others", 0)
    monkeypatch.setattr(threads, "_active", 0)
    monkeypatch.setattr(threads, "_blas", lambda: [])
    threads.run_started(0)
    assert threads.share() == 8
    threads.run_started(0)
    threads.run_started(0)
    assert threads.share() == 2  # 8 cores // 3 runs
    for _ in range(3):
        threads.run_ended()
    threads.run_started(0)
    assert threads.share() == 8
    threads.run_ended()


def test_cores_taken_by_other_processes_leave_the_run_fewer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Load that shows in two reads of three takes a core; one read does not."""
    from ortcore_cpu import threads
    from ortcore_cpu.kernels._common import threads_for

    monkeypatch.setattr(threads, "_CORES", 2)
    monkeypatch.setattr(threads, "_sensing", True)
    monkeypatch.setattr(threads, "_active", 0)
    monkeypatch.setattr(threads, "_samples", [0, 0])
    monkeypatch.setattr(threads, "_blas", lambda: [])

    def run_with_load(load: int) -> int:
        monkeypatch.setattr(threads, "_runnable_elsewhere", lambda blas_now: load)
        monkeypatch.setattr(threads, "_sensed_at", -1.0)
        threads.run_started(0)
        share = threads.share()
        assert threads_for(1 << 30, 2) == share
        threads.run_ended()
        return share

    assert run_with_load(1) == 2  # one busy read among quiet ones: a passing thread
    assert run_with_load(0) == 2
    assert run_with_load(0) == 2
    assert run_with_load(1) == 2
    assert run_with_load(1) == 1  # two of the last three: kernels stay on one thread
    assert run_with_load(0) == 1
    assert run_with_load(0) == 2  # the load is gone from two reads of three


def test_runnable_elsewhere_discounts_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/loadavg counts our callers and spinning BLAS threads too."""
    import builtins
    import io

    from ortcore_cpu import threads

    real_open = builtins.open

    def fake_open(path: object, *args: object, **kwargs: object) -> object:
        if path == "/proc/loadavg":
            return io.BytesIO(b"1.00 1.00 1.00 5/300 1234\n")
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(threads, "_active", 2)
    assert threads._runnable_elsewhere(blas_now=2) == 5 - 2 - 1
    assert threads._runnable_elsewhere(blas_now=1) == 5 - 2


POOL_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading
    import numpy as np
    import ortcore
    from ortcore_cpu.threads import share_blas_pool

    ortcore.SessionOptions()
    from ortcore_cpu.provider import CPUExecutionProvider
    CPUExecutionProvider()  # installs the pool, once per process
    pooled = share_blas_pool()
    if os.environ.get("ORTCORE_CPU_BLAS_POOL") == "0":
        assert pooled == [], pooled
        print("off")
        raise SystemExit(0)
    import threadpoolctl
    openblas = [i for i in threadpoolctl.threadpool_info()
                if i["internal_api"] == "openblas" and i["threading_layer"] == "pthreads"]
    print("pooled", len(pooled), "openblas", len(openblas))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal((257, 301)).astype(np.float32)
    want = a.astype(np.float64) @ b
    assert np.abs(a @ b - want).max() < 1e-3
    # several Python threads multiplying at once: each gets a team of its own
    errors = []
    def work():
        try:
            for _ in range(20):
                assert np.abs(a @ b - want).max() < 1e-3
        except Exception as exc:
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join(60)
    assert not any(t.is_alive() for t in threads), "a matmul hung"
    assert not errors, errors
    # a forked child multiplies on OpenBLAS's own pool: OpenMP's threads
    # do not survive the fork
    pid = os.fork()
    if pid == 0:
        ok = np.abs(a @ b - want).max() < 1e-3
        os._exit(0 if ok else 3)
    deadline = __import__("time").monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if __import__("time").monotonic() > deadline:
            os.kill(pid, 9)
            raise AssertionError("numpy's matmul hung in a forked child")
        __import__("time").sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("ok")
    """
)


@pytest.mark.parametrize("setting", ["1", "0"])
def test_openblas_runs_on_the_kernels_pool(setting: str) -> None:
    env = {**__import__("os").environ, "ORTCORE_CPU_BLAS_POOL": setting}
    out = subprocess.run(
        [sys.executable, "-c", POOL_SCRIPT], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split()
    if setting == "0":
        assert lines == ["off"]
        return
    assert lines[-1] == "ok"
    # every OpenBLAS with its own (pthreads) pool found was handed the kernels' pool
    assert lines[1] == lines[3], out.stdout


def test_a_build_without_openmp_keeps_openblas_pool() -> None:
    # setup.py leaves blas_pool out of a build without OpenMP
    script = textwrap.dedent(
        """
        import sys
        sys.modules["ortcore_cpu._ext.blas_pool"] = None  # import fails, as when not built
        import numpy as np
        from ortcore_cpu.provider import CPUExecutionProvider
        from ortcore_cpu.threads import share_blas_pool
        CPUExecutionProvider()
        assert share_blas_pool() == []
        a = np.ones((64, 64), np.float32)
        assert (a @ a == 64).all()
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok"]


_FORKED_RUN = textwrap.dedent(
    """
    import os, time
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import ortcore
    from ortcore_cpu import threads

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["p"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ortcore.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
    x = rng.standard_normal((1, 16, 64, 64)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]  # the parent's OpenMP threads exist now
    pid = os.fork()
    if pid == 0:
        got = sess.run(None, {"x": x})[0]
        fresh = ortcore.InferenceSession(model.SerializeToString(), so, providers=["cpu"])
        again = fresh.run(None, {"x": x})[0]
        ok = threads.forked and np.allclose(got, want, atol=1e-4) and np.allclose(again, want, atol=1e-4)
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            raise AssertionError("a session run hung in a forked child")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert not threads.forked  # the parent keeps its threads
    print("ok")
    """
)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_session_runs_in_a_forked_child() -> None:
    """A child forked after runs (multiprocessing's fork start method) runs
    sessions, old and new, on one thread instead of waiting forever for
    OpenMP threads that did not survive the fork."""
    out = subprocess.run(
        [sys.executable, "-c", _FORKED_RUN], capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
