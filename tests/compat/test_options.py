"""The session constructor's keyword arguments and SessionOptions methods."""

from __future__ import annotations

from .conftest import Results, same

# Indented as the snippets are, which it is prepended to.
_FREE_DIM_MODEL = """
        def batch_model():
            x = fvi("X", ["batch", 3])
            x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
            w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "W")
            return graph_model([helper.make_node("Add", ["X", "W"], ["Y"])], [x],
                               [fvi("Y", ["batch", 3])], [w])
"""

SNIPPETS = {
    "keyword_arguments": """
        import onnxruntime as ort
        so = ort.SessionOptions()
        sess = ort.InferenceSession(
            save(relu_model()), so, ["CPUExecutionProvider"], None,
            read_config_from_model=0, disabled_optimizers=["ConstantFolding"], enable_fallback=0,
        )
        result = sess.run(None, {"X": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})[0]
    """,
    "free_dimension_by_name": _FREE_DIM_MODEL
    + """
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.add_free_dimension_override_by_name("batch", 2)
        sess = ort.InferenceSession(save(batch_model()), so, providers=["CPUExecutionProvider"])
        out = [sess.get_inputs()[0].shape, sess.run(None, {"X": np.ones((2, 3), np.float32)})[0]]
        try:
            sess.run(None, {"X": np.ones((4, 3), np.float32)})
        except Exception as exc:
            from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
            out.append(isinstance(exc, InvalidArgument))
        result = out
    """,
    "free_dimension_by_denotation": _FREE_DIM_MODEL
    + """
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.add_free_dimension_override_by_denotation("DATA_BATCH", 5)
        sess = ort.InferenceSession(save(batch_model()), so, providers=["CPUExecutionProvider"])
        result = sess.get_inputs()[0].shape
    """,
    "add_initializer_ortvalue": _FREE_DIM_MODEL
    + """
        import onnxruntime as ort
        w = ort.OrtValue.ortvalue_from_numpy(np.full(3, 10, np.float32))
        so = ort.SessionOptions()
        so.add_initializer("W", w)
        sess = ort.InferenceSession(save(batch_model()), so, providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.ones((1, 3), np.float32)})[0]
    """,
    "external_initializers": _FREE_DIM_MODEL
    + """
        import onnxruntime as ort
        onnx.save(batch_model(), "ext.onnx", save_as_external_data=True, location="ext.data",
                  size_threshold=0)
        os.rename("ext.data", "moved.data")  # the file the model names is gone
        w = ort.OrtValue.ortvalue_from_numpy(np.full(3, 5, np.float32))
        so = ort.SessionOptions()
        so.add_external_initializers(["W"], [w])
        sess = ort.InferenceSession("ext.onnx", so, providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.ones((1, 3), np.float32)})[0]
    """,
    "external_files_in_memory": _FREE_DIM_MODEL
    + """
        import onnxruntime as ort
        onnx.save(batch_model(), "ext.onnx", save_as_external_data=True, location="ext.data",
                  size_threshold=0)
        buffer = np.fromfile("ext.data", dtype=np.uint8)
        os.remove("ext.data")
        so = ort.SessionOptions()
        so.add_external_initializers_from_files_in_memory(["ext.data"], [buffer], [len(buffer)])
        sess = ort.InferenceSession("ext.onnx", so, providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": np.ones((1, 3), np.float32)})[0]
    """,
    "optimized_model_external_initializers": """
        import onnxruntime as ort
        big = numpy_helper.from_array(np.arange(3000, dtype=np.float32).reshape(1000, 3), "Big")
        small = numpy_helper.from_array(np.arange(3, dtype=np.float32), "Small")
        model = graph_model(
            [helper.make_node("Gather", ["Big", "I"], ["G"]),
             helper.make_node("Add", ["G", "Small"], ["Y"])],
            [fvi("I", [1], TensorProto.INT64)], [fvi("Y", [1, 3])], [big, small])
        os.makedirs("out")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = os.path.join("out", "opt.onnx")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "opt_weights.bin")
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "100")
        ort.InferenceSession(save(model), so, providers=["CPUExecutionProvider"])
        saved = onnx.load(os.path.join("out", "opt.onnx"), load_external_data=False)
        places = {t.name: (t.data_location,
                           {e.key: e.value for e in t.external_data}.get("location"))
                  for t in saved.graph.initializer}
        again = ort.InferenceSession(os.path.join("out", "opt.onnx"),
                                     providers=["CPUExecutionProvider"])
        result = (sorted(os.listdir("out")), places,
                  again.run(None, {"I": np.array([7], np.int64)})[0])
    """,
    "config_from_model": _FREE_DIM_MODEL
    + """
        import json
        import onnxruntime as ort
        model = batch_model()
        config = {"session_options": {"intra_op_num_threads": 3, "graph_optimization_level": 1}}
        helper.set_model_props(model, {"ort_config": json.dumps(config)})
        path = save(model)
        so = ort.SessionOptions()
        read = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"],
                                    read_config_from_model=1)
        plain = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        so2 = ort.SessionOptions()
        so2.add_session_config_entry("session.load_config_from_model", "1")
        entry = ort.InferenceSession(path, so2, providers=["CPUExecutionProvider"])
        opts = read.get_session_options()
        result = {
            "read": (opts.intra_op_num_threads, int(opts.graph_optimization_level)),
            "plain": plain.get_session_options().intra_op_num_threads,
            "entry": entry.get_session_options().intra_op_num_threads,
            "caller_untouched": so.intra_op_num_threads,
            "runs": read.run(None, {"X": np.ones((1, 3), np.float32)})[0],
        }
    """,
    "enum_text": """
        import onnxruntime as ort
        members = [
            ort.ExecutionMode.ORT_PARALLEL,
            ort.ExecutionOrder.PRIORITY_BASED,
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR,
            ort.OrtMemType.CPU_OUTPUT,
            ort.OrtSparseFormat.ORT_SPARSE_CSRC,
        ]
        result = [
            (str(m), f"{m}", repr(m), int(m), m.name) for m in members
        ]
    """,
}


def test_enums_print_as_onnxruntime_prints_them(results: Results) -> None:
    """``str``/``f""`` give "Class.MEMBER" (pybind11's), not the number."""
    texts = results.ok("enum_text")
    assert texts[0][:2] == ("ExecutionMode.ORT_PARALLEL", "ExecutionMode.ORT_PARALLEL")
    same(results.ours["enum_text"], results.theirs("enum_text"))


def test_onnxruntime_keyword_arguments_are_accepted(results: Results) -> None:
    same(results.ours["keyword_arguments"], results.theirs("keyword_arguments"))


def test_free_dimension_override_by_name(results: Results) -> None:
    shape, _, refused = results.ok("free_dimension_by_name")
    assert shape == [2, 3] and refused is True
    same(results.ours["free_dimension_by_name"], results.theirs("free_dimension_by_name"))


def test_free_dimension_override_by_denotation(results: Results) -> None:
    assert results.ok("free_dimension_by_denotation") == [5, 3]
    same(
        results.ours["free_dimension_by_denotation"],
        results.theirs("free_dimension_by_denotation"),
    )


def test_add_initializer_takes_an_ortvalue(results: Results) -> None:
    assert results.ok("add_initializer_ortvalue").tolist() == [[11.0, 11.0, 11.0]]
    same(results.ours["add_initializer_ortvalue"], results.theirs("add_initializer_ortvalue"))


def test_add_external_initializers(results: Results) -> None:
    assert results.ok("external_initializers").tolist() == [[6.0, 6.0, 6.0]]
    same(results.ours["external_initializers"], results.theirs("external_initializers"))


def test_external_data_files_in_memory(results: Results) -> None:
    assert results.ok("external_files_in_memory").tolist() == [[1.0, 2.0, 3.0]]
    same(results.ours["external_files_in_memory"], results.theirs("external_files_in_memory"))


def test_optimized_model_external_initializers_file(results: Results) -> None:
    files, places, _ = results.ok("optimized_model_external_initializers")
    assert files == ["opt.onnx", "opt_weights.bin"]
    assert places["Big"] == (1, "opt_weights.bin") and places["Small"] == (0, None)
    same(
        results.ours["optimized_model_external_initializers"],
        results.theirs("optimized_model_external_initializers"),
    )


def test_session_options_from_the_model(results: Results) -> None:
    """onnxruntime applies ``ort_config`` inside its C++ session without showing
    it in ``get_session_options()``: only ortcore's answer is checked."""
    got = results.ok("config_from_model")
    assert got["read"] == (3, 1)
    assert got["plain"] == 0 and got["caller_untouched"] == 0
    assert got["entry"] == 3
