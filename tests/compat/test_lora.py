"""LoRA adapters as onnxruntime has them: ``AdapterFormat`` export and read,
``LoraAdapter.Load``, ``RunOptions.add_active_adapter``, and onnxruntime's
rules for a run with active adapters (adapter over feed, first adapter over
later ones, bad parameters failing as feeds do, IO binding ignoring them)."""

from __future__ import annotations

import numpy as np

from .conftest import Results, same

_MODEL = """
        import onnxruntime as ort

        def lora_model():
            # output = x @ W + (x @ A) @ B, with A [4, r] and B [r, 4] overridable
            # initializers of rank 0 (empty), as onnxruntime's LoRA test model has them
            w = helper.make_tensor("W", TensorProto.FLOAT, [4, 4], np.arange(1.0, 17.0))
            a0 = helper.make_tensor("lora_A", TensorProto.FLOAT, [4, 0], [])
            b0 = helper.make_tensor("lora_B", TensorProto.FLOAT, [0, 4], [])
            nodes = [
                helper.make_node("MatMul", ["x", "W"], ["xw"]),
                helper.make_node("MatMul", ["x", "lora_A"], ["xa"]),
                helper.make_node("MatMul", ["xa", "lora_B"], ["xab"]),
                helper.make_node("Add", ["xw", "xab"], ["y"]),
            ]
            inputs = [fvi("x", [4, 4]), fvi("lora_A", [4, "r"]), fvi("lora_B", ["r", 4])]
            return save(graph_model(nodes, inputs, [fvi("y", [4, 4])], [w, a0, b0]), "lora.onnx")

        A = np.array([[3], [4], [5], [6]], np.float32)
        B = np.array([[7, 8, 9, 10]], np.float32)
        X = np.ones((4, 4), np.float32)

        def adapter(name, **params):
            fmt = ort.AdapterFormat()
            fmt.set_adapter_version(1)
            fmt.set_model_version(1)
            fmt.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
            path = os.path.join(WORK, name)
            fmt.export_adapter(path)
            loaded = ort.LoraAdapter()
            loaded.Load(path)
            return loaded

        def run_with(*adapters, feeds=None, sess=None):
            sess = sess or ort.InferenceSession(lora_model(), providers=["CPUExecutionProvider"])
            ro = ort.RunOptions()
            for a in adapters:
                ro.add_active_adapter(a)
            return sess.run(None, {"x": X, **(feeds or {})}, ro)[0]
"""


def _run(line: str) -> str:
    """A snippet of :data:`_MODEL` and one line (indented as the snippets are)."""
    return _MODEL + "        " + line + "\n"


SNIPPETS = {
    "export_read": """
        import onnxruntime as ort
        params = {
            "f32": np.arange(10, dtype=np.float32).reshape(5, 2),
            "i64": np.arange(10, dtype=np.int64).reshape(2, 5),
            "f16": np.array([[1.5, -2.0, 65504.0]], np.float16),
            "u8": np.arange(6, dtype=np.uint8).reshape(1, 2, 3),
            "empty": np.zeros((0, 3), np.float32),
        }
        fmt = ort.AdapterFormat()
        fmt.set_adapter_version(7)
        fmt.set_model_version(3)
        fmt.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
        path = os.path.join(WORK, "a.onnx_adapter")
        fmt.export_adapter(path)
        back = ort.AdapterFormat.read_adapter(path)
        got = back.get_parameters()
        result = (back.get_format_version(), back.get_adapter_version(), back.get_model_version(),
                  sorted(got), {k: (v.is_tensor(), v.data_type(), v.element_type(), v.shape(),
                                    v.numpy()) for k, v in got.items()})
    """,
    "export_read_onnx_type": """
        import onnxruntime as ort
        bf16 = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            np.array([[0x3F80, 0x4000]], np.uint16), 16)
        fmt = ort.AdapterFormat()
        fmt.set_parameters({"bf16": bf16})
        path = os.path.join(WORK, "bf.onnx_adapter")
        fmt.export_adapter(path)
        v = ort.AdapterFormat.read_adapter(path).get_parameters()["bf16"]
        result = (v.element_type(), v.shape(), v.data_type())
    """,
    "defaults": """
        import onnxruntime as ort
        fmt = ort.AdapterFormat()
        path = os.path.join(WORK, "empty.onnx_adapter")
        fmt.export_adapter(path)
        back = ort.AdapterFormat.read_adapter(path)
        result = (fmt.get_adapter_version(), fmt.get_model_version(), fmt.get_parameters(),
                  back.get_format_version(), back.get_parameters())
    """,
    "run_base": _run("result = run_with()"),
    "run_adapter": _run("result = run_with(adapter('ab', lora_A=A, lora_B=B))"),
    "run_with_ort_values": _MODEL
    + """
        sess = ort.InferenceSession(lora_model(), providers=["CPUExecutionProvider"])
        ro = ort.RunOptions()
        ab = adapter("ab", lora_A=A, lora_B=B)  # onnxruntime's options do not keep it alive
        ro.add_active_adapter(ab)
        out = sess.run_with_ort_values(None, {"x": ort.OrtValue.ortvalue_from_numpy(X)}, ro)
        result = out[0].numpy()
    """,
    "same_session_switched": _MODEL
    + """
        sess = ort.InferenceSession(lora_model(), providers=["CPUExecutionProvider"])
        one, two = adapter("one", lora_A=A, lora_B=B), adapter("two", lora_A=2 * A, lora_B=B)
        result = [run_with(one, sess=sess), run_with(two, sess=sess), run_with(sess=sess),
                  run_with(one, sess=sess)]
    """,
    "adapter_over_feed": _run(
        "result = run_with(adapter('ab', lora_A=A, lora_B=B), feeds={'lora_A': 0 * A, 'lora_B': B})"
    ),
    "first_adapter_wins": _MODEL
    + """
        one, two = adapter("one", lora_A=A, lora_B=B), adapter("two", lora_A=2 * A, lora_B=B)
        result = [run_with(one, two), run_with(two, one), run_with(one, one)]
    """,
    "partial_adapter_and_feed": _run(
        "result = run_with(adapter('a', lora_A=A), feeds={'lora_B': 3 * B})"
    ),
    "empty_adapter": _run("result = run_with(ort.LoraAdapter())"),
    "unknown_parameter": _run("result = run_with(adapter('u', nope=A))"),
    "wrong_dtype": _run("result = run_with(adapter('d', lora_A=A.astype(np.float64)))"),
    "wrong_shape": _run("result = run_with(adapter('s', lora_A=np.ones((3, 1), np.float32)))"),
    "required_input_not_from_adapter": """
        import onnxruntime as ort
        m = graph_model([helper.make_node("Add", ["x", "w"], ["y"])],
                        [fvi("x", [2]), fvi("w", [2])], [fvi("y", [2])])
        sess = ort.InferenceSession(save(m), providers=["CPUExecutionProvider"])
        fmt = ort.AdapterFormat()
        fmt.set_parameters({"w": ort.OrtValue.ortvalue_from_numpy(np.ones(2, np.float32))})
        path = os.path.join(WORK, "w.onnx_adapter")
        fmt.export_adapter(path)
        a = ort.LoraAdapter()
        a.Load(path)
        ro = ort.RunOptions()
        ro.add_active_adapter(a)
        result = sess.run(None, {"x": np.ones(2, np.float32)}, ro)
    """,
    "iobinding_ignores": _MODEL
    + """
        sess = ort.InferenceSession(lora_model(), providers=["CPUExecutionProvider"])
        ro = ort.RunOptions()
        ab = adapter("ab", lora_A=A, lora_B=B)  # onnxruntime's options do not keep it alive
        ro.add_active_adapter(ab)
        io = sess.io_binding()
        io.bind_cpu_input("x", X)
        io.bind_output("y")
        sess.run_with_iobinding(io, ro)
        result = io.copy_outputs_to_cpu()[0]
    """,
    "load_missing": """
        import onnxruntime as ort
        ort.LoraAdapter().Load(os.path.join(WORK, "no_such.onnx_adapter"))
    """,
    "read_missing": """
        import onnxruntime as ort
        ort.AdapterFormat.read_adapter(os.path.join(WORK, "no_such.onnx_adapter"))
    """,
    "load_corrupt": """
        import onnxruntime as ort
        path = os.path.join(WORK, "bad.onnx_adapter")
        with open(path, "wb") as f:
            f.write(b"not an adapter at all" * 4)
        ort.LoraAdapter().Load(path)
    """,
    "read_truncated": """
        import onnxruntime as ort
        fmt = ort.AdapterFormat()
        fmt.set_parameters({"p": ort.OrtValue.ortvalue_from_numpy(np.ones((4, 4), np.float32))})
        path = os.path.join(WORK, "t.onnx_adapter")
        fmt.export_adapter(path)
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:40])
        ort.AdapterFormat.read_adapter(path)
    """,
    "add_not_an_adapter": """
        import onnxruntime as ort
        ort.RunOptions().add_active_adapter("model.onnx_adapter")
    """,
    "names": """
        import onnxruntime as ort
        from onnxruntime.capi import onnxruntime_pybind11_state as C
        from onnxruntime.capi.onnxruntime_inference_collection import AdapterFormat
        result = (hasattr(C, "LoraAdapter"), hasattr(C, "AdapterFormat"),
                  AdapterFormat is ort.AdapterFormat, ort.LoraAdapter is C.LoraAdapter,
                  callable(ort.RunOptions().add_active_adapter))
    """,
}

_BASE = np.arange(1, 17, dtype=np.float32).reshape(4, 4).sum(axis=0)
_A = np.array([[3], [4], [5], [6]], np.float32)
_B = np.array([[7, 8, 9, 10]], np.float32)


def _expected(a: np.ndarray | None = None, b: np.ndarray | None = None) -> np.ndarray:
    delta = 0 if a is None or b is None else (np.ones((4, 4), np.float32) @ a @ b)
    return np.broadcast_to(_BASE, (4, 4)) + delta


def test_export_read_round_trip(results: Results) -> None:
    fmt, adapter_v, model_v, names, params = results.ok("export_read")
    assert (fmt, adapter_v, model_v) == (1, 7, 3)
    assert names == ["empty", "f16", "f32", "i64", "u8"]
    assert params["f32"][1:4] == ("tensor(float)", 1, [5, 2])
    np.testing.assert_array_equal(params["f16"][4], np.array([[1.5, -2.0, 65504.0]], np.float16))
    assert params["u8"][3] == [1, 2, 3] and params["empty"][3] == [0, 3]
    same(results.ours["export_read"], results.theirs("export_read"))


def test_onnx_type_kept(results: Results) -> None:
    assert results.ok("export_read_onnx_type") == (16, [1, 2], "tensor(bfloat16)")
    same(results.ours["export_read_onnx_type"], results.theirs("export_read_onnx_type"))


def test_defaults(results: Results) -> None:
    assert results.ok("defaults") == (0, 0, {}, 1, {})
    same(results.ours["defaults"], results.theirs("defaults"))


def test_run_with_adapter(results: Results) -> None:
    np.testing.assert_array_equal(results.ok("run_base"), _expected())
    np.testing.assert_array_equal(results.ok("run_adapter"), _expected(_A, _B))
    np.testing.assert_array_equal(results.ok("run_with_ort_values"), _expected(_A, _B))
    for name in ("run_base", "run_adapter", "run_with_ort_values"):
        same(results.ours[name], results.theirs(name))


def test_adapters_switch_per_run(results: Results) -> None:
    one, two, none, again = results.ok("same_session_switched")
    np.testing.assert_array_equal(one, _expected(_A, _B))
    np.testing.assert_array_equal(two, _expected(2 * _A, _B))
    np.testing.assert_array_equal(none, _expected())
    np.testing.assert_array_equal(again, one)
    same(results.ours["same_session_switched"], results.theirs("same_session_switched"))


def test_precedence(results: Results) -> None:
    # onnxruntime 1.32: the adapter wins over a feed, the first adapter over later ones
    np.testing.assert_array_equal(results.ok("adapter_over_feed"), _expected(_A, _B))
    first, swapped, twice = results.ok("first_adapter_wins")
    np.testing.assert_array_equal(first, _expected(_A, _B))
    np.testing.assert_array_equal(swapped, _expected(2 * _A, _B))
    np.testing.assert_array_equal(twice, first)
    np.testing.assert_array_equal(results.ok("partial_adapter_and_feed"), _expected(_A, 3 * _B))
    np.testing.assert_array_equal(results.ok("empty_adapter"), _expected())
    for name in (
        "adapter_over_feed",
        "first_adapter_wins",
        "partial_adapter_and_feed",
        "empty_adapter",
    ):
        same(results.ours[name], results.theirs(name))


def test_bad_parameters_fail_as_feeds(results: Results) -> None:
    _, msg, _ = results.raised("unknown_parameter")
    assert "Invalid input name: nope" in msg
    _, msg, _ = results.raised("wrong_dtype")
    assert "Unexpected input data type" in msg and "lora_A" in msg and "double" in msg
    _, msg, _ = results.raised("wrong_shape")
    assert "invalid dimensions for input: lora_A" in msg
    _, msg, _ = results.raised("required_input_not_from_adapter")
    assert "Required inputs (['w']) are missing" in msg
    for name in ("unknown_parameter", "wrong_dtype", "wrong_shape"):
        same(results.ours[name], results.theirs(name))
    same(
        results.ours["required_input_not_from_adapter"],
        results.theirs("required_input_not_from_adapter"),
    )


def test_iobinding_ignores_adapters(results: Results) -> None:
    np.testing.assert_array_equal(results.ok("iobinding_ignores"), _expected())
    same(results.ours["iobinding_ignores"], results.theirs("iobinding_ignores"))


def test_file_errors(results: Results) -> None:
    for name in ("load_missing", "read_missing"):
        _, msg, catchers = results.raised(name)
        assert "no_such.onnx_adapter" in msg and "RuntimeError" in catchers
    for name in ("load_corrupt", "read_truncated"):
        _, msg, catchers = results.raised(name)
        assert "not appear to be a valid lora parameter format" in msg
        assert "RuntimeError" in catchers
    _, msg, catchers = results.raised("add_not_an_adapter")
    assert "TypeError" in catchers and "LoraAdapter" in msg
    for name in ("load_missing", "read_missing", "load_corrupt", "read_truncated"):
        same(results.ours[name], results.theirs(name))
    same(results.ours["add_not_an_adapter"], results.theirs("add_not_an_adapter"))


def test_names(results: Results) -> None:
    assert results.ok("names") == (True, True, True, True, True)
    same(results.ours["names"], results.theirs("names"))
