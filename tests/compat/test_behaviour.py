"""Behaviour: Python lists as feeds, and profiling events named as onnxruntime names them."""

from __future__ import annotations

from .conftest import Results, same

SNIPPETS = {
    "list_feeds": """
        import onnxruntime as ort
        model = graph_model(
            [helper.make_node("Relu", ["X"], ["Y"]), helper.make_node("Neg", ["I"], ["J"]),
             helper.make_node("Not", ["B"], ["C"])],
            [fvi("X", [2, 3]), fvi("I", [2], TensorProto.INT64), fvi("B", [2], TensorProto.BOOL)],
            [fvi("Y", [2, 3]), fvi("J", [2], TensorProto.INT64), fvi("C", [2], TensorProto.BOOL)])
        sess = ort.InferenceSession(save(model), providers=["CPUExecutionProvider"])
        result = sess.run(None, {"X": [[1, -2, 3], [-4.5, 5, -6]], "I": [3, -4],
                                 "B": [True, False]})
    """,
    "profiling_names": """
        import json
        import onnxruntime as ort
        w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "W")
        b = numpy_helper.from_array(np.ones(3, np.float32), "B")
        model = graph_model(
            [helper.make_node("Conv", ["X", "W", "B"], ["C"], name="conv0"),
             helper.make_node("Relu", ["C"], ["R"], name="relu0"),
             helper.make_node("Sigmoid", ["R"], ["Y"], name="sig0")],
            [fvi("X", [1, 2, 5, 5])], [fvi("Y", None)], [w, b])
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(WORK, "trace")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        sess = ort.InferenceSession(save(model), so, providers=["CPUExecutionProvider"])
        sess.run(None, {"X": np.ones((1, 2, 5, 5), np.float32)})
        with open(sess.end_profiling()) as f:
            events = json.load(f)
        result = sorted((e["name"], e["args"]["op_name"]) for e in events if e["cat"] == "Node")
    """,
}


def test_python_lists_become_the_declared_type(results: Results) -> None:
    y, j, c = results.ok("list_feeds")
    assert y.dtype.name == "float32" and j.dtype.name == "int64" and c.dtype.name == "bool"
    same(results.ours["list_feeds"], results.theirs("list_feeds"))


def test_profiling_events_name_the_model_node(results: Results) -> None:
    got = results.ok("profiling_names")
    assert ("conv0_kernel_time", "FusedConv") in got
    same(results.ours["profiling_names"], results.theirs("profiling_names"))
