"""Hostile attributes and sizes: a clean ortcore error, never a crash or a wrong shape.

A negative ``pads`` entry used to reach the Cython padded-plane paths of
MaxPool, AveragePool and the depthwise Conv and corrupt the heap (SIGABRT).
Cases that could crash run in a child process, so a regression fails the test
instead of killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import onnx
import onnxruntime
import ortcore
import pytest
from onnx import TensorProto, helper, numpy_helper
from ortcore.errors import OrtcoreError

from ortcore_cpu._ext import conv as conv_ext
from ortcore_cpu._ext import movement as movement_ext
from ortcore_cpu._ext import pool as pool_ext
from ortcore_cpu.kernels._window import check_window_attrs, window


def _model(
    op: str,
    x_shape: list[int],
    *,
    inits: list[onnx.TensorProto] = (),  # type: ignore[assignment]
    extra_inputs: list[str] = (),  # type: ignore[assignment]
    opset: int = 17,
    **attrs: object,
) -> bytes:
    node = helper.make_node(op, ["x", *extra_inputs], ["y"], name="n0", **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def _depthwise(x_shape: list[int], **attrs: object) -> bytes:
    c = x_shape[1]
    k = attrs.get("kernel_shape", [3] * (len(x_shape) - 2))
    w = numpy_helper.from_array(np.ones((c, 1, *k), np.float32), "w")  # type: ignore[misc]
    return _model("Conv", x_shape, inits=[w], extra_inputs=["w"], group=c, **attrs)


HOSTILE = [
    ("MaxPool", [1, 2, 8, 8], {"kernel_shape": [3, 3], "pads": [-1, -1, 1, 1]}),
    ("MaxPool", [1, 2, 8, 8], {"kernel_shape": [3, 3], "pads": [-5, 0, 0, 0]}),
    ("MaxPool", [1, 2, 8], {"kernel_shape": [3], "pads": [-2, -2]}),
    ("AveragePool", [1, 2, 8, 8], {"kernel_shape": [3, 3], "pads": [0, -1, 0, 1]}),
    ("AveragePool", [1, 2, 4, 4, 4], {"kernel_shape": [2, 2, 2], "pads": [0, 0, -1, 0, 0, 0]}),
    ("MaxPool", [1, 2, 8, 8], {"kernel_shape": [0, 3]}),
    ("MaxPool", [1, 2, 8, 8], {"kernel_shape": [3, 3], "strides": [0, 1]}),
    ("MaxPool", [1, 2, 8, 8], {"kernel_shape": [3, 3], "dilations": [1, -1]}),
    ("Depthwise", [1, 4, 8, 8], {"kernel_shape": [3, 3], "pads": [-1, -1, -1, -1]}),
    ("Depthwise", [1, 4, 8, 8], {"kernel_shape": [3, 3], "pads": [-3, 0, 0, 0]}),
    ("Depthwise", [1, 4, 8, 8], {"kernel_shape": [3, 3], "strides": [0, 0]}),
]


def test_hostile_window_attributes_fail_cleanly_in_a_child_process() -> None:
    """Every case ends in an OrtcoreError at session creation, in a process that survives."""
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, {here!r})
        import numpy as np
        import ortcore
        from ortcore.errors import OrtcoreError
        from test_hostile_attributes import HOSTILE, _depthwise, _model
        for op, shape, attrs in HOSTILE:
            data = _depthwise(shape, **attrs) if op == "Depthwise" else _model(op, shape, **attrs)
            try:
                sess = ortcore.InferenceSession(data, providers=["cpu"])
                sess.run(None, {{"x": np.ones(shape, np.float32)}})
            except OrtcoreError as exc:
                print("clean", op, type(exc).__name__, str(exc).replace(chr(10), " ")[:300])
            else:
                print("ran", op, attrs)
        """
    ).format(here=str(__import__("pathlib").Path(__file__).parent))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(HOSTILE), proc.stdout
    for line, (_op, _shape, attrs) in zip(lines, HOSTILE, strict=True):
        assert line.startswith("clean"), line
        bad = next(k for k in ("pads", "strides", "dilations", "kernel_shape") if k in attrs)
        assert bad in line or bad.rstrip("s") in line, line


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "pads": [-1, 0, 0, 0]},
        {"kernel_shape": [3, 0]},
        {"kernel_shape": [3, 3], "strides": [1, 0]},
        {"kernel_shape": [3, 3], "dilations": [0, 1]},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1]},
        {"kernel_shape": [3, 3], "strides": [1, 1, 1]},
        {"kernel_shape": [3, 3], "auto_pad": "SAME"},
        {"group": 0},
    ],
)
def test_check_window_attrs_names_the_attribute(attrs: dict[str, object]) -> None:
    with pytest.raises(
        ValueError, match=next(iter(k for k in attrs if k != "kernel_shape"), "kernel_shape")
    ):
        check_window_attrs(attrs)


def test_cython_window_entry_points_refuse_bad_geometry() -> None:
    """The last line of defence: each native entry point checks its own arguments."""
    x = np.ones((2, 1, 6, 6), np.float32)
    out = np.empty((2, 1, 6, 6), np.float32)
    good = (1, 3, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1)
    pool_ext.max_pool(x, out, *good, 1)  # sanity: the good geometry runs
    for bad in (
        (1, 3, 3, 1, 1, 1, 0, -1, 1, 1, 1, 1),  # negative pad
        (1, 0, 3, 1, 1, 1, 0, 1, 1, 1, 1, 1),  # zero kernel
        (1, 3, 3, 1, 0, 1, 0, 1, 1, 1, 1, 1),  # zero stride
        (1, 3, 3, 1, 1, 1, 0, 1, 1, 1, -1, 1),  # negative dilation
    ):
        with pytest.raises(ValueError):
            pool_ext.max_pool(x, out, *bad, 1)
        with pytest.raises(ValueError):
            pool_ext.avg_pool(x, out, *bad[:9], 0, 0, 0, *bad[9:], False, 1)
        with pytest.raises(ValueError):
            col = np.empty((9, 36), np.float32)
            conv_ext.im2col(x[0], col, *bad, 1, 6, 6, 1)
    with pytest.raises(ValueError, match="plane counts"):
        pool_ext.max_pool(x, np.empty((3, 1, 6, 6), np.float32), *good, 1)
    w = np.ones((1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="pads"):
        conv_ext.depthwise2d(x[0], w, np.zeros((1, 6, 6), np.float32), 1, 1, -1, 0, 1, 1, 1)


def test_transpose_refuses_a_perm_that_is_no_permutation() -> None:
    src = np.arange(4, dtype=np.float32)
    dst = np.empty_like(src)
    with pytest.raises(ValueError, match="permutation"):
        movement_ext.transpose(src.view(np.uint8), dst.view(np.uint8), [2, 2], [0, 0], 4, 1)


# -- output sizes like onnxruntime -------------------------------------------------------


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "auto_pad"),
    [
        ([1, 3, 2], [3], [2], "NOTSET"),  # window wider than the input: one output
        ([1, 3, 3], [5], [3], "NOTSET"),
        ([1, 3, 2], [3], [1], "NOTSET"),  # zero outputs
        ([1, 3, 2], [5], [2], "NOTSET"),
        ([1, 3, 2], [3], [2], "VALID"),
        ([1, 3, 5, 4], [4, 3], [3, 2], "NOTSET"),
    ],
)
def test_pool_window_wider_than_input_matches_onnxruntime(
    op: str, shape: list[int], kernel: list[int], strides: list[int], auto_pad: str
) -> None:
    data = _model(op, shape, kernel_shape=kernel, strides=strides, auto_pad=auto_pad)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    got = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_pool_with_a_negative_output_size_is_refused() -> None:
    data = _model("MaxPool", [1, 3, 2], kernel_shape=[4])
    sess = ortcore.InferenceSession(data, providers=["cpu"])
    with pytest.raises(OrtcoreError, match="negative"):
        sess.run(None, {"x": np.ones((1, 3, 2), np.float32)})


def test_window_rounds_toward_zero_like_onnxruntime() -> None:
    assert window([2], [3], strides=[2]).out == (1,)
    assert window([2], [3], strides=[1]).out == (0,)
    with pytest.raises(ValueError, match="negative"):
        window([2], [4], strides=[1])
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        window([2], [3], strides=[2], partial=False)


def test_conv_kernel_wider_than_padded_input_is_refused() -> None:
    w = numpy_helper.from_array(np.ones((1, 1, 5, 5), np.float32), "w")
    data = _model("Conv", [1, 1, 3, 3], inits=[w], extra_inputs=["w"], strides=[3, 3])
    sess = ortcore.InferenceSession(data, providers=["cpu"])
    with pytest.raises(OrtcoreError, match="smaller than the dilated kernel"):
        sess.run(None, {"x": np.ones((1, 1, 3, 3), np.float32)})


# -- Pad --------------------------------------------------------------------------------


def _pad_model(pads: list[int]) -> bytes:
    p = numpy_helper.from_array(np.array(pads, np.int64), "p")
    return _model("Pad", [3], inits=[p], extra_inputs=["p"], opset=18)


@pytest.mark.parametrize("pads", [[-2, -2], [-4, 0], [0, -5], [-4, 2]])
def test_pad_cropping_past_the_input_is_an_error(pads: list[int]) -> None:
    # A negative output size is known from shapes: refused at session creation.
    with pytest.raises(OrtcoreError, match=r"crop more than|negative dimension"):
        sess = ortcore.InferenceSession(_pad_model(pads), providers=["cpu"])
        sess.run(None, {"x": np.arange(3, dtype=np.float32)})


@pytest.mark.parametrize("pads", [[-3, 0], [-1, -1], [-1, 2], [0, 0]])
def test_pad_cropping_within_the_input_matches_onnxruntime(pads: list[int]) -> None:
    x = np.arange(3, dtype=np.float32)
    data = _pad_model(pads)
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    got = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)


# -- sizes that come from data ------------------------------------------------------------


def _shape_model(op: str, shape_input: np.ndarray | None, feed_shape: bool = False) -> bytes:
    """op(shape) -> Shape: the big tensor is only ever measured."""
    inits = [] if feed_shape else [numpy_helper.from_array(shape_input, "s")]
    inputs = [helper.make_tensor_value_info("s", TensorProto.INT64, [1])] if feed_shape else []
    nodes = [helper.make_node(op, ["s"], ["big"]), helper.make_node("Shape", ["big"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.INT64, [1])], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_constant_folding_bomb_costs_nothing() -> None:
    """A ~100-byte model whose ConstantOfShape asks for 4 GB, read only by Shape."""
    script = textwrap.dedent(
        """
        import resource, time
        import numpy as np
        import ortcore
        from onnx import TensorProto, helper, numpy_helper
        s = numpy_helper.from_array(np.array([1_000_000_000], np.int64), "s")
        nodes = [helper.make_node("ConstantOfShape", ["s"], ["big"]),
                 helper.make_node("Shape", ["big"], ["y"])]
        graph = helper.make_graph(nodes, "g", [],
            [helper.make_tensor_value_info("y", TensorProto.INT64, [1])], [s])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        sess = ortcore.InferenceSession(data, providers=["cpu"])
        took = time.perf_counter() - t
        (y,) = sess.run(None, {})
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(int(y[0]), took, grew)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    value, took, grew_kb = proc.stdout.split()
    assert int(value) == 1_000_000_000
    assert float(took) < 5.0
    assert int(grew_kb) < 200_000  # KiB: far below the 4 GB the tensor would take


@pytest.mark.parametrize(
    ("op", "feeds"),
    [
        ("ConstantOfShape", {"s": np.array([1 << 40], np.int64)}),
        ("ConstantOfShape", {"s": np.array([-3], np.int64)}),
    ],
)
def test_run_time_sizes_from_feeds_are_checked(op: str, feeds: dict[str, np.ndarray]) -> None:
    sess = ortcore.InferenceSession(_shape_model(op, None, feed_shape=True), providers=["cpu"])
    t = time.perf_counter()
    with pytest.raises(OrtcoreError, match=r"needs|negative"):
        sess.run(None, feeds)
    assert time.perf_counter() - t < 5.0


def test_session_config_limit_applies_to_kernels() -> None:
    data = _shape_model("ConstantOfShape", None, feed_shape=True)
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.max_tensor_bytes", "4096")
    sess = ortcore.InferenceSession(data, so, providers=["cpu"])
    assert sess.run(None, {"s": np.array([1024], np.int64)})[0].tolist() == [1024]
    with pytest.raises(OrtcoreError, match=r"session\.max_tensor_bytes"):
        sess.run(None, {"s": np.array([1025], np.int64)})


def test_bad_limit_is_refused() -> None:
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.max_tensor_bytes", "lots")
    with pytest.raises(ValueError, match=r"session\.max_tensor_bytes"):
        ortcore.InferenceSession(_shape_model("ConstantOfShape", None, True), so, providers=["cpu"])


def test_static_output_past_the_limit_fails_at_session_creation() -> None:
    """A node whose inferred output shape alone exceeds the limit never runs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 1])
    t = helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 100000])
    nodes = [helper.make_node("Add", ["x", "t"], ["y"], name="outer")]
    graph = helper.make_graph(
        nodes, "g", [x, t], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    so = ortcore.SessionOptions()
    so.add_session_config_entry("session.max_tensor_bytes", str(1 << 30))
    with pytest.raises(OrtcoreError, match=r"outer.*40,000,000,000 bytes"):
        ortcore.InferenceSession(data, so, providers=["cpu"])


@pytest.mark.parametrize(
    ("op", "inputs", "attrs"),
    [
        ("Expand", [np.ones((1,), np.float32), np.array([1 << 40], np.int64)], {}),
        ("Tile", [np.ones((2,), np.float32), np.array([1 << 40], np.int64)], {}),
        ("Range", [np.float32(0), np.float32(1e12), np.float32(1)], {}),
        ("Range", [np.float32(0), np.float32(np.inf), np.float32(1)], {}),
        ("OneHot", [np.array([1], np.int64), np.int64(1 << 40), np.array([0, 1], np.float32)], {}),
    ],
)
def test_value_sized_kernels_check_before_allocating(
    op: str, inputs: list[np.ndarray], attrs: dict[str, object]
) -> None:
    names = [f"i{k}" for k in range(len(inputs))]
    vis = [
        helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.asarray(a).shape
        )
        for n, a in zip(names, inputs, strict=True)
    ]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], name="bomb", **attrs)],
        "g",
        vis,
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    sess = ortcore.InferenceSession(data, providers=["cpu"])
    with pytest.raises(OrtcoreError, match="bomb"):
        sess.run(None, dict(zip(names, (np.asarray(a) for a in inputs), strict=True)))


# -- found by the fuzz tests (test_fuzz_native.py) ----------------------------------------

HUGE = [
    # strides near int64's limit: _first_valid's -off + step - 1 wrapped around and
    # MaxPool read before its input (a garbage value instead of -inf)
    ("MaxPool", [1, 1, 5], {"kernel_shape": [1], "strides": [2**63 - 1], "pads": [2, 2]}),
    ("AveragePool", [1, 1, 5], {"kernel_shape": [1], "strides": [2**62], "pads": [3, 3]}),
    (
        "MaxPool",
        [1, 1, 4, 4],
        {"kernel_shape": [3, 3], "dilations": [1, 2**40], "pads": [1, 2**40, 1, 2**40]},
    ),
    ("MaxPool", [1, 1, 4], {"kernel_shape": [2], "pads": [2**40, 2**40], "strides": [2**41]}),
    (
        "Depthwise",
        [1, 2, 6, 6],
        {"kernel_shape": [3, 3], "strides": [1, 2**63 - 1], "pads": [1, 2, 1, 2]},
    ),
]


def test_huge_window_attributes_fail_cleanly_in_a_child_process() -> None:
    """Window values past int32 are refused at session creation, by name."""
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, {here!r})
        import numpy as np
        import ortcore
        from ortcore.errors import OrtcoreError
        from test_hostile_attributes import HUGE, _depthwise, _model
        for op, shape, attrs in HUGE:
            data = _depthwise(shape, **attrs) if op == "Depthwise" else _model(op, shape, **attrs)
            try:
                sess = ortcore.InferenceSession(data, providers=["cpu"])
                out = sess.run(None, {{"x": np.ones(shape, np.float32)}})[0]
            except OrtcoreError as exc:
                print("clean", str(exc).replace(chr(10), " ")[:300])
            else:
                print("ran", op, attrs, out.ravel()[:4].tolist())
        """
    ).format(here=str(__import__("pathlib").Path(__file__).parent))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(HUGE), proc.stdout
    for line in lines:
        assert line.startswith("clean") and "<= 2147483647" in line, line


def test_cython_window_entry_points_refuse_huge_geometry_in_a_child_process() -> None:
    """Called directly, each native entry point refuses values its index
    arithmetic cannot hold instead of reading or writing out of bounds."""
    script = textwrap.dedent(
        """
        import numpy as np
        from ortcore_cpu._ext import conv, pool, winograd
        x = np.ones((1, 1, 1, 5), np.float32)
        out = np.empty((1, 1, 1, 1), np.float32)
        idx = np.empty((1, 1, 1, 1), np.int64)
        big = 2**63 - 1
        calls = {{
            "max_pool": lambda: pool.max_pool(x, out, 1, 1, 1, 1, 1, big, 0, 0, 2, 1, 1, 1, 1),
            "max_pool_indices": lambda: pool.max_pool_indices(
                x, out, idx, False, 1, 1, 1, 1, 1, big, 0, 0, 2, 1, 1, 1, 1),
            "avg_pool": lambda: pool.avg_pool(
                x, out, 1, 1, 1, 1, 1, big, 0, 0, 2, 0, 0, 2, 1, 1, 1, True, 1),
            "avg_pool ends": lambda: pool.avg_pool(
                x, out, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 2**62, 1, 1, 1, True, 1),
            "im2col": lambda: conv.im2col(
                x[0:1].reshape(1, 1, 1, 5), np.empty((1, 1), np.float32),
                1, 1, 1, 1, 1, big, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1),
            "im2col col": lambda: conv.im2col(
                x[0:1].reshape(1, 1, 1, 5), np.empty((1, 1), np.float32),
                1, 1, 2**32, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 2**32, 1),
            "col2im": lambda: conv.col2im(
                np.ones((1, 1), np.float32), np.zeros((1, 1, 1, 5), np.float32),
                1, 1, 1, 1, 1, big, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1),
            "depthwise2d": lambda: conv.depthwise2d(
                np.ones((1, 1, 5), np.float32), np.ones((1, 1, 1), np.float32),
                np.zeros((1, 1, 1), np.float32), 1, big, 0, 2, 1, 1, 1),
            "winograd": lambda: winograd.input_transform(
                np.ones((1, 1, 4, 4), np.float32), np.empty((16, 4), np.float32),
                0, 0, 0, 2**62, 2**62, 1),
        }}
        for name, call in calls.items():
            try:
                call()
            except ValueError as exc:
                print("clean", name, exc)
            else:
                print("ran", name)
        """
    ).format()
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 9, proc.stdout
    assert all(line.startswith("clean") for line in lines), proc.stdout


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "Depthwise"])
def test_huge_dilation_takes_the_general_loops(op: str) -> None:
    """A stride-1 window dilated by 2**30 reaches one input column and one
    column of padding: the padded-plane paths would have copied each plane
    into a buffer of a billion columns; the general loops need none."""
    d = 1 << 30
    attrs = {"kernel_shape": [1, 2], "dilations": [1, d], "pads": [0, d, 0, 0]}
    shape = [1, 2, 3, 4]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    data = _depthwise(shape, **attrs) if op == "Depthwise" else _model(op, shape, opset=19, **attrs)
    t = time.perf_counter()
    got = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})[0]
    assert time.perf_counter() - t < 5.0
    # tap 0 lies in the padding, tap 1 on column j
    want = {"MaxPool": x, "AveragePool": x, "Depthwise": x}[op]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_window_of_padding_only_is_the_type_minimum(dtype: type) -> None:
    """8-bit MaxPool runs in float32; a window of padding only (-inf) came back
    through an undefined float-to-int cast."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1], pads=[1, 1])
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", elem, [1, 1, 3])],
        [helper.make_tensor_value_info("y", elem, None)],
    )  # fmt: skip
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    x = np.array([[[5, 7, 9]]], dtype)
    sess = ortcore.InferenceSession(data.SerializeToString(), providers=["cpu"])
    (got,) = sess.run(None, {"x": x})
    low = np.iinfo(dtype).min
    np.testing.assert_array_equal(got, np.array([[[low, 5, 7, 9, low]]], dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_layer_norm_statistics_are_float32(dtype: type) -> None:
    """Mean and InvStdDev are float32 with stash_type=1, as the model declares
    them (a float64 input gave float64 statistics)."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "m", "r"], axis=-1)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", elem, [2, 5]), helper.make_tensor_value_info("s", elem, [5])],
        [helper.make_tensor_value_info("y", elem, None),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
    )  # fmt: skip
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 5)).astype(dtype),
             "s": np.ones(5, dtype)}  # fmt: skip
    got = ortcore.InferenceSession(data, providers=["cpu"]).run(None, feeds)
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert [g.dtype for g in got] == [np.dtype(dtype), np.float32, np.float32]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-2 if dtype == np.float16 else 1e-5, atol=1e-3)


def test_transpose_of_a_scalar_stays_a_scalar() -> None:
    """np.ascontiguousarray made the 0-d result 1-d."""
    node = helper.make_node("Transpose", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
    )  # fmt: skip
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    (y,) = ortcore.InferenceSession(data.SerializeToString(), providers=["cpu"]).run(
        None, {"x": np.array(2.5)}
    )
    assert y.shape == () and y == 2.5


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
@pytest.mark.parametrize("length", [1, 3])
def test_conv_bias_of_the_wrong_length_is_an_error(op: str, length: int) -> None:
    """A bias of another length than the output channels was read modulo its
    length (float32 path) instead of being refused, as onnxruntime does."""
    w_shape = [2, 1, 1, 1]  # Conv: 2 output channels; ConvTranspose: 2 input, 1 output
    w = numpy_helper.from_array(np.ones(w_shape, np.float32), "w")
    b = numpy_helper.from_array(np.ones(length + (op == "ConvTranspose"), np.float32), "b")
    data = _model(op, [1, 1 if op == "Conv" else 2, 3, 3], inits=[w, b], extra_inputs=["w", "b"])
    shape = [1, 1 if op == "Conv" else 2, 3, 3]
    with pytest.raises(OrtcoreError, match="bias"):
        sess = ortcore.InferenceSession(data, providers=["cpu"])
        sess.run(None, {"x": np.ones(shape, np.float32)})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_transpose_same_with_a_kernel_narrower_than_the_stride(auto_pad: str) -> None:
    """The output (input * stride) is wider than the full result: SAME pads are
    negative, so the result starts with zeros (was refused)."""
    w = numpy_helper.from_array(np.array([[[1.0, 10.0]]], np.float32), "w")
    data = _model("ConvTranspose", [1, 1, 3], inits=[w], extra_inputs=["w"], opset=22,
                  strides=[4], auto_pad=auto_pad)  # fmt: skip
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    (y,) = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})
    # full result (10 wide) in an output of 12: one zero before, one after
    want = [0, 1, 10, 0, 0, 2, 20, 0, 0, 3, 30, 0]
    np.testing.assert_array_equal(y.ravel(), np.array(want, np.float32))


@pytest.mark.parametrize(
    ("op", "shape"),
    [
        ("GlobalMaxPool", [0, 3, 4]),
        ("GlobalAveragePool", [2, 0, 4, 4]),
        ("Conv", [0, 1, 2, 2, 2, 2]),
    ],
)
def test_zero_size_batch_or_channels(op: str, shape: list[int]) -> None:
    """An empty batch or channel axis gives an empty output (reshape(..., -1)
    of an empty array failed)."""
    inits, extra = [], []
    if op == "Conv":
        inits = [numpy_helper.from_array(np.ones([1, 1, 1, 1, 1, 1], np.float32), "w")]
        extra = ["w"]
    data = _model(op, shape, inits=inits, extra_inputs=extra)
    (y,) = ortcore.InferenceSession(data, providers=["cpu"]).run(
        None, {"x": np.ones(shape, np.float32)}
    )
    want_spatial = [1] * (len(shape) - 2) if op.startswith("Global") else shape[2:]
    assert y.shape == (*shape[:2], *want_spatial)


@pytest.mark.parametrize(("out", "want"), [(5, [1, 10, 100, 0, 0]), (6, None)])
def test_conv_transpose_output_shape_past_the_full_output(out: int, want: list[int] | None) -> None:
    """Up to a stride past the full output the extra positions are zeros at the
    end, as onnxruntime and onnx.reference (was refused); further is an error."""
    w = numpy_helper.from_array(np.array([[[1.0, 10.0, 100.0]]], np.float32), "w")
    data = _model("ConvTranspose", [1, 1, 1], inits=[w], extra_inputs=["w"], opset=22,
                  strides=[3], output_shape=[out])  # fmt: skip
    x = np.ones((1, 1, 1), np.float32)
    if want is None:
        with pytest.raises(OrtcoreError, match="output_shape"):
            ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})
        return
    (y,) = ortcore.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})
    np.testing.assert_array_equal(y.ravel(), np.array(want, np.float32))


def test_global_max_pool_float64_over_no_positions() -> None:
    """float64 took numpy's max, which refuses an empty axis; float32's kernel gives -inf."""
    node = helper.make_node("GlobalMaxPool", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3, 0, 4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
    )  # fmt: skip
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    (y,) = ortcore.InferenceSession(data.SerializeToString(), providers=["cpu"]).run(
        None, {"x": np.ones((2, 3, 0, 4))}
    )
    assert y.shape == (2, 3, 1, 1) and np.all(y == -np.inf)


def test_conv_transpose_negative_output_size_is_an_error() -> None:
    """Pads larger than the full output gave an empty result instead of an error."""
    w = numpy_helper.from_array(np.ones((1, 1, 2), np.float32), "w")
    data = _model("ConvTranspose", [1, 1, 2], inits=[w], extra_inputs=["w"], pads=[2, 2])
    with pytest.raises(OrtcoreError, match="negative"):
        sess = ortcore.InferenceSession(data, providers=["cpu"])
        sess.run(None, {"x": np.ones((1, 1, 2), np.float32)})


def test_axis_past_int32_is_refused_before_shape_inference() -> None:
    """onnx's shape inference segfaults on LayerNormalization with axis = 2**32
    and a Mean output: ortcore refuses the attribute before running it."""
    script = textwrap.dedent(
        """
        import numpy as np
        import ortcore
        from onnx import TensorProto, helper
        node = helper.make_node(
            "LayerNormalization", ["x", "s"], ["y", "mean"], name="ln", axis=2**32
        )
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
             helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
             helper.make_tensor_value_info("mean", TensorProto.FLOAT, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        try:
            ortcore.InferenceSession(model.SerializeToString(), providers=["cpu"])
        except ortcore.InvalidGraph as exc:
            print("clean", exc)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("clean") and "axis 4294967296" in proc.stdout, proc.stdout
