"""Provider lists: a listed provider that is not available here is skipped with
onnxruntime's warning, as long as another listed provider is available."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "cuda_then_cpu": """
        import onnxruntime as ort
        sess = ort.InferenceSession(
            save(relu_model()), providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
        )
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        result = (sess.get_providers(), sess.run(None, {"X": x})[0])
    """,
    "unknown_with_options_then_cpu": """
        import onnxruntime as ort
        sess = ort.InferenceSession(
            save(relu_model()),
            providers=[("NoSuchExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"],
        )
        result = sess.get_providers()
    """,
    "set_providers_unknown": """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        sess.set_providers(["NoSuchExecutionProvider"])
    """,
    "set_providers_cuda_then_cpu": """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        sess.set_providers(["CUDAExecutionProvider", "CPUExecutionProvider"])
        result = sess.get_providers()
    """,
    "none_available": """
        import onnxruntime as ort
        ort.InferenceSession(save(relu_model()), providers=["CUDAExecutionProvider"])
    """,
}


def test_unavailable_provider_is_skipped_with_a_warning(results: Results) -> None:
    providers, _ = results.ok("cuda_then_cpu")
    assert providers == ["CPUExecutionProvider"]
    assert any(
        "Specified provider 'CUDAExecutionProvider' is not in available provider names" in w
        for w in results.warnings("cuda_then_cpu")
    )
    same(results.ours["cuda_then_cpu"], results.theirs("cuda_then_cpu"))


def test_unknown_provider_with_options_is_skipped(results: Results) -> None:
    assert results.ok("unknown_with_options_then_cpu") == ["CPUExecutionProvider"]
    same(
        results.ours["unknown_with_options_then_cpu"],
        results.theirs("unknown_with_options_then_cpu"),
    )


def test_set_providers_unknown_is_a_runtime_error(results: Results) -> None:
    _, message, caught = results.raised("set_providers_unknown")
    assert "RuntimeError" in caught and "NoSuchExecutionProvider" in message
    same(results.ours["set_providers_unknown"], results.theirs("set_providers_unknown"))


def test_set_providers_skips_unavailable(results: Results) -> None:
    assert results.ok("set_providers_cuda_then_cpu") == ["CPUExecutionProvider"]
    same(
        results.ours["set_providers_cuda_then_cpu"],
        results.theirs("set_providers_cuda_then_cpu"),
    )


def test_no_listed_provider_available_is_refused(results: Results) -> None:
    """A deliberate difference: onnxruntime silently runs such a session on the
    CPU; ortcore refuses it, naming what is available (docs/onnxruntime-compat.md)."""
    _, message, caught = results.raised("none_available")
    assert {"RuntimeError", "ValueError", "capi.InvalidArgument"} <= set(caught)
    assert "CUDAExecutionProvider" in message and "CPUExecutionProvider" in message
