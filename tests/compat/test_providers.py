"""Provider lists: a listed provider that is not available here is skipped with
onnxruntime's warning; nothing listed left, the session runs on the CPU; an
unknown name falls back to the CPU while a session is created (onnxruntime's
retry) and is "Unknown Provider Type" otherwise; CPU provider options
onnxruntime's CPU provider takes are accepted."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "listed_twice": """
        import onnxruntime as ort
        sess = ort.InferenceSession(
            save(relu_model()),
            providers=[("CPUExecutionProvider", {}), "CPUExecutionProvider"],
        )
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        result = (sess.get_providers(), sess.run(None, {"X": x})[0])
    """,
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
        sess = ort.InferenceSession(save(relu_model()), providers=["CUDAExecutionProvider"])
        result = sess.get_providers()
    """,
    "unknown_alone": """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["NoSuchExecutionProvider"])
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        result = (sess.get_providers(), sess.run(None, {"X": x})[0])
    """,
    "unknown_without_fallback": """
        import onnxruntime as ort
        ort.InferenceSession(
            save(relu_model()), providers=["NoSuchExecutionProvider"], enable_fallback=0
        )
    """,
    "none_available_cpu_fallback_disabled": """
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        ort.InferenceSession(save(relu_model()), so, providers=["CUDAExecutionProvider"])
    """,
    "set_providers_unavailable_alone": """
        import onnxruntime as ort
        sess = ort.InferenceSession(save(relu_model()), providers=["CPUExecutionProvider"])
        sess.set_providers(["CUDAExecutionProvider"])
        result = sess.get_providers()
    """,
    "cpu_arena_options": """
        import onnxruntime as ort
        import warnings
        opts = {"arena_extend_strategy": "kSameAsRequested", "use_arena": "0"}
        sess = ort.InferenceSession(
            save(relu_model()), providers=[("CPUExecutionProvider", opts)]
        )
        again = ort.InferenceSession(
            save(relu_model()), providers=[("CPUExecutionProvider", opts)]
        )
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        result = (sess.get_provider_options(), again.run(None, {"X": x})[0])
    """,
}


def test_a_provider_listed_twice_is_warned_about_and_kept_once(results: Results) -> None:
    providers, _ = results.ok("listed_twice")
    assert providers == ["CPUExecutionProvider"]
    assert any(
        "Duplicate provider 'CPUExecutionProvider' encountered, ignoring." in w
        for w in results.warnings("listed_twice")
    )
    same(results.ours["listed_twice"], results.theirs("listed_twice"))


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
    assert "RuntimeError" in caught
    assert "Unknown Provider Type: NoSuchExecutionProvider" in message
    same(results.ours["set_providers_unknown"], results.theirs("set_providers_unknown"))


def test_set_providers_skips_unavailable(results: Results) -> None:
    assert results.ok("set_providers_cuda_then_cpu") == ["CPUExecutionProvider"]
    same(
        results.ours["set_providers_cuda_then_cpu"],
        results.theirs("set_providers_cuda_then_cpu"),
    )


def test_nothing_listed_available_runs_on_cpu(results: Results) -> None:
    assert results.ok("none_available") == ["CPUExecutionProvider"]
    assert any("'CUDAExecutionProvider'" in w for w in results.warnings("none_available"))
    same(results.ours["none_available"], results.theirs("none_available"))


def test_unknown_provider_falls_back_to_cpu(results: Results) -> None:
    providers, y = results.ok("unknown_alone")
    assert providers == ["CPUExecutionProvider"]
    assert (y >= 0).all()
    assert any(
        "Unknown Provider Type: NoSuchExecutionProvider" in w
        for w in results.warnings("unknown_alone")
    )
    same(results.ours["unknown_alone"], results.theirs("unknown_alone"))


def test_unknown_provider_without_fallback_is_a_runtime_error(results: Results) -> None:
    _, message, caught = results.raised("unknown_without_fallback")
    assert "RuntimeError" in caught
    assert message.startswith("Unknown Provider Type: NoSuchExecutionProvider")
    same(results.ours["unknown_without_fallback"], results.theirs("unknown_without_fallback"))


def test_cpu_fallback_disabled_and_nothing_available_fails(results: Results) -> None:
    name = "none_available_cpu_fallback_disabled"
    _, message, caught = results.raised(name)
    assert "capi.Fail" in caught
    assert "fallback to CPU EP has been explicitly disabled" in message
    same(results.ours[name], results.theirs(name))


def test_set_providers_with_only_unavailable_runs_on_cpu(results: Results) -> None:
    assert results.ok("set_providers_unavailable_alone") == ["CPUExecutionProvider"]
    same(
        results.ours["set_providers_unavailable_alone"],
        results.theirs("set_providers_unavailable_alone"),
    )


def test_cpu_arena_options_are_accepted_and_warn_once(results: Results) -> None:
    options, _ = results.ok("cpu_arena_options")
    assert options == {"CPUExecutionProvider": {}}
    ignored = [w for w in results.warnings("cpu_arena_options") if "accepted and ignored" in w]
    # two sessions, two options: one warning per option
    assert sorted(w.split("'")[1] for w in ignored) == ["arena_extend_strategy", "use_arena"]
    same(results.ours["cpu_arena_options"], results.theirs("cpu_arena_options"))
