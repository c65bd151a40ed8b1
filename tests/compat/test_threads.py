"""onnxruntime's global thread pool rules: a session asking for the global
pools before they exist is refused; after ``set_global_thread_pool_sizes``,
sessions must use them (per-session threads are refused), and the pools
cannot be replaced. The snippets share one process, in this order."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "global_threads_without_pools": """
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.use_per_session_threads = False
        ort.InferenceSession(save(relu_model()), so, providers=["CPUExecutionProvider"])
    """,
    "create_pools": """
        import onnxruntime as ort
        result = ort.set_global_thread_pool_sizes(2, 2)
    """,
    "session_on_global_pools": """
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.use_per_session_threads = False
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        sess = ort.InferenceSession(save(relu_model()), so, providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})[0]
    """,
    "per_session_threads_with_pools": """
        import onnxruntime as ort
        ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
    """,
    "replace_pools": """
        import onnxruntime as ort
        ort.set_global_thread_pool_sizes(3, 3)
    """,
}


def test_global_threads_need_the_pools(results: Results) -> None:
    _, message, caught = results.raised("global_threads_without_pools")
    assert "RuntimeError" in caught
    assert "CreateEnvWithGlobalThreadPools" in message
    same(
        results.ours["global_threads_without_pools"],
        results.theirs("global_threads_without_pools"),
    )


def test_sessions_run_on_the_global_pools(results: Results) -> None:
    assert results.ok("create_pools") is None
    y = results.ok("session_on_global_pools")
    assert (y >= 0).all() and y.max() == 6
    same(results.ours["session_on_global_pools"], results.theirs("session_on_global_pools"))


def test_per_session_threads_are_refused_with_global_pools(results: Results) -> None:
    _, message, caught = results.raised("per_session_threads_with_pools")
    assert "RuntimeError" in caught
    assert "use_per_session_threads must be false when using a global thread pool" in message
    same(
        results.ours["per_session_threads_with_pools"],
        results.theirs("per_session_threads_with_pools"),
    )


def test_global_pools_cannot_be_replaced(results: Results) -> None:
    _, message, caught = results.raised("replace_pools")
    assert "capi.Fail" in caught
    assert "Global thread pools have already been created" in message
    same(results.ours["replace_pools"], results.theirs("replace_pools"))
