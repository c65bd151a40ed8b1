"""What a custom operator's kernel returns is checked against what the op declares.

Every value a kernel hands back for an output that is not a tensor of the
declared element type, rank and fixed dims is one ``RuntimeException`` naming
the op, the node, the output and both sides; good values (and numpy scalars,
ndarray subclasses, odd strides) go on as plain arrays; the kernel's inputs
are read-only views (copies, to a kernel that writes into them), so no kernel
changes the caller's feeds, the model's weights or what other nodes read.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import json
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ep_sdk
import ortcore

from .conftest import fvi
from .providers import FakeTensor

DOMAIN = "test.outputs"
_names = itertools.count()
X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def _same(inputs: list[ortcore.TensorType], attrs: dict[str, Any]) -> list[ortcore.TensorType]:
    return [ortcore.TensorType(inputs[0].dtype, inputs[0].shape)]


def make_op(
    kernel: Callable[..., Any],
    *,
    inputs: Sequence[str] = ("X: T",),
    outputs: Sequence[str] = ("Y: T",),
    types: dict[str, list[str]] | None = None,
    shape: Any = _same,
    provider: str = "mini",
    context: bool = False,
) -> ortcore.CustomOp:
    """A fresh op (its own name) whose kernel is ``kernel`` for ``provider``."""
    op = ortcore.custom_op(
        domain=DOMAIN,
        name=f"Out{next(_names)}",
        inputs=list(inputs),
        outputs=list(outputs),
        types=types if types is not None else {"T": ["float", "double"]},
        shape=shape,
    )
    op.kernel(provider, context=context)(lambda info: kernel)
    return op


def make_model(
    nodes: Sequence[Any],
    *,
    inputs: Sequence[Any] = (),
    outputs: Sequence[Any] = (),
    initializers: Sequence[Any] = (),
) -> bytes:
    graph = helper.make_graph(
        list(nodes),
        "g",
        list(inputs) or [fvi("x", (2, 3))],
        list(outputs) or [fvi("y", None)],
        list(initializers),
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def node(op: ortcore.CustomOp, ins: Sequence[str], outs: Sequence[str], name: str) -> Any:
    return helper.make_node(op.name, list(ins), list(outs), domain=DOMAIN, name=name)


def session(
    model: bytes, *ops: ortcore.CustomOp, providers: Sequence[str] = ("mini",), **options: Any
) -> ortcore.InferenceSession:
    so = ortcore.SessionOptions()
    for key, value in options.items():
        setattr(so, key, value)
    so.register_custom_ops(*ops)
    return ortcore.InferenceSession(model, so, providers=list(providers))


def relu_after(op: ortcore.CustomOp) -> ortcore.InferenceSession:
    """x -> op (node 'custom', output 't') -> Relu -> y, on the mini provider."""
    model = make_model([node(op, ["x"], ["t"], "custom"), helper.make_node("Relu", ["t"], ["y"])])
    return session(model, op)


class _Lies:
    """Claims to be an ndarray (``__class__``) without being one."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return np.ndarray


class _LyingDtype(np.ndarray):
    """An ndarray subclass whose ``dtype`` says float32 whatever it holds."""

    @property  # type: ignore[misc]
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)


def _matrix(a: np.ndarray) -> Any:
    with warnings.catch_warnings():  # np.matrix is pending deprecation, and still made
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(a)


def _unaligned(a: np.ndarray) -> np.ndarray:
    raw = np.zeros(a.nbytes + 1, np.uint8)
    out = np.frombuffer(raw.data, a.dtype, a.size, offset=1).reshape(a.shape)
    out[...] = a
    return out


# What comes back, and a piece of how the error describes it. The output is
# declared tensor(float) of shape [2, 3] (the shape function keeps X's).
BAD = [
    pytest.param(X.astype(np.float64), "tensor(double)", id="float64"),
    pytest.param(X.astype(np.int64), "tensor(int64)", id="int64"),
    pytest.param(X.astype(np.int32), "tensor(int32)", id="int32-same-itemsize"),
    pytest.param(X.astype(np.float16), "tensor(float16)", id="float16"),
    pytest.param(X > 0, "tensor(bool)", id="bool"),
    pytest.param(X.astype(np.complex64), "tensor(complex64)", id="complex64"),
    pytest.param(X.astype(object), "numpy dtype object", id="object-of-floats"),
    pytest.param(np.full((2, 3), "a", object), "numpy dtype object", id="object-of-str"),
    pytest.param(np.full((2, 3), "a"), "<U1", id="unicode"),
    pytest.param(np.full((2, 3), b"a"), "|S1", id="bytes-array"),
    pytest.param(np.zeros((2, 3), "f4,f4"), "structured", id="structured"),
    pytest.param(np.zeros((2, 3), "V4"), "|V4", id="void"),
    pytest.param(X.astype(">f4"), "big-endian", id="big-endian"),
    pytest.param(1, "Python int", id="int"),
    pytest.param(1.0, "Python float", id="float"),
    pytest.param(True, "Python bool", id="bool-scalar"),
    pytest.param(1j, "Python complex", id="complex"),
    pytest.param("abc", "Python str", id="str"),
    pytest.param(b"abc", "Python bytes", id="bytes"),
    pytest.param(X.tolist(), "Python list", id="list"),
    pytest.param((1.0, 2.0), "Python tuple", id="tuple"),
    pytest.param({"y": X}, "Python dict", id="dict"),
    pytest.param({1.0}, "Python set", id="set"),
    pytest.param(object(), "Python object", id="object"),
    pytest.param(None, "None", id="None"),
    pytest.param(_Lies(), "_Lies", id="claims-to-be-ndarray"),
    pytest.param(X.astype(np.float64).view(_LyingDtype), "tensor(double)", id="lying-dtype"),
    pytest.param(np.float64(1.0), "tensor(double)", id="numpy-float64-scalar"),
    pytest.param(np.float32(1.0), "the rank must be 2", id="numpy-float32-scalar"),
    pytest.param(np.str_("a"), "<U1", id="numpy-str-scalar"),
    pytest.param(np.ma.masked_array(X, mask=X < 0), "mask would be lost", id="masked"),
    pytest.param(X.reshape(2, 3, 1), "the rank must be 2", id="rank-3"),
    pytest.param(X.reshape(6), "the rank must be 2", id="rank-1"),
    pytest.param(np.array(1.0, np.float32), "the rank must be 2", id="0-d"),
    pytest.param(X.reshape(3, 2), "dim 0 must be 2, dim 1 must be 3", id="dims-swapped"),
    pytest.param(np.zeros((2, 4), np.float32), "dim 1 must be 3", id="dim-1"),
    pytest.param(_matrix(X.T), "dim 0 must be 2", id="matrix-of-other-shape"),
]


@pytest.mark.parametrize(("value", "described"), BAD)
def test_a_bad_output_is_one_error_naming_op_node_output_and_both_sides(
    value: Any, described: str
) -> None:
    op = make_op(lambda x: (value,))
    with pytest.raises(ortcore.RuntimeException) as err:
        relu_after(op).run(None, {"x": X})
    text = str(err.value)
    assert f"custom operator {DOMAIN}::{op.name} (node 'custom')" in text
    assert "output 0 ('t') is declared tensor(float) of shape [2, 3]" in text
    assert described in text
    assert "Name:'custom'" in text  # onnxruntime's framing of a failed kernel


GOOD = [
    pytest.param(lambda x: X * 2, id="array"),
    pytest.param(lambda x: _matrix(X * 2), id="matrix"),
    pytest.param(lambda x: np.asfortranarray(X * 2), id="fortran-order"),
    pytest.param(lambda x: (X * 2)[::-1][::-1], id="negative-strides"),
    pytest.param(lambda x: np.ascontiguousarray((X * 2).T).T, id="transposed-view"),
    pytest.param(lambda x: _unaligned(X * 2), id="unaligned"),
    pytest.param(lambda x: np.broadcast_to((X * 2)[:1], (2, 3)) * 0 + X * 2, id="broadcast"),
    pytest.param(lambda x: x * 2, id="from-read-only-input"),
]


@pytest.mark.parametrize("make", GOOD)
def test_good_outputs_go_on_as_plain_arrays(make: Callable[[np.ndarray], Any]) -> None:
    op = make_op(lambda x: (make(x),))
    (y,) = relu_after(op).run(None, {"x": X})
    assert type(y) is np.ndarray and y.dtype == np.float32
    np.testing.assert_array_equal(y, np.maximum(X * 2, 0))


def test_zero_strides_are_handed_on_as_a_plain_view() -> None:
    seen: list[Any] = []
    row = (X[:1] * 2).astype(np.float32)
    op = make_op(lambda x: (np.broadcast_to(row, (2, 3)),))
    sink = make_op(lambda t: (seen.append(t) or np.asarray(t, np.float32) + 0,))
    model = make_model([node(op, ["x"], ["t"], "custom"), node(sink, ["t"], ["y"], "sink")])
    (y,) = session(model, op, sink).run(None, {"x": X})
    np.testing.assert_array_equal(y, np.broadcast_to(row, (2, 3)))
    assert type(seen[0]) is np.ndarray and 0 in seen[0].strides


def test_a_scalar_output_takes_a_0d_array_or_a_numpy_scalar_of_its_type() -> None:
    def scalar(inputs: Any, attrs: Any) -> list[ortcore.TensorType]:
        return [ortcore.TensorType(inputs[0].dtype, ())]

    for value in (np.array(7.0, np.float32), np.float32(7.0)):
        op = make_op(lambda x, v=value: (v,), shape=scalar)
        (y,) = relu_after(op).run(None, {"x": X})
        assert type(y) is np.ndarray and y.shape == () and y.dtype == np.float32 and y == 7
    for value, described in (
        (np.float64(7.0), "tensor(double)"),
        (7.0, "Python float"),
        (np.ones(1, np.float32), "the rank must be 0"),
    ):
        op = make_op(lambda x, v=value: (v,), shape=scalar)
        with pytest.raises(
            ortcore.RuntimeException, match=r"declared tensor\(float\) of shape \[\]"
        ):
            relu_after(op).run(None, {"x": X})
        with pytest.raises(ortcore.RuntimeException, match=re.escape(described)):
            relu_after(op).run(None, {"x": X})


def test_another_spelling_of_the_declared_dtype_becomes_the_canonical_one() -> None:
    seen: list[np.dtype] = []
    op = make_op(
        lambda x: (np.ones((2, 3), dtype="q"),),  # long long: int64 on every platform
        outputs=["Y: I"],
        types={"T": ["float"], "I": ["int64"]},
        shape=lambda ins, a: [ortcore.TensorType(ortcore.custom_ops.ir.DataType.INT64, (2, 3))],
    )
    sink = make_op(
        lambda t: (seen.append(t.dtype) or np.zeros((2, 3), np.float32),),
        inputs=["X: I"],
        outputs=["Y: F"],
        types={"I": ["int64"], "F": ["float"]},
        shape=None,
    )
    model = make_model([node(op, ["x"], ["t"], "custom"), node(sink, ["t"], ["y"], "sink")])
    session(model, op, sink).run(None, {"x": X})
    assert seen[0] is np.dtype(np.int64)


def _string_op(value: Any) -> ortcore.CustomOp:
    return make_op(
        lambda x: (value,),
        outputs=["Y: S"],
        types={"T": ["float"], "S": ["string"]},
        shape=lambda ins, a: [
            ortcore.TensorType(ortcore.custom_ops.ir.DataType.STRING, ins[0].shape)
        ],
    )


def _string_model(op: ortcore.CustomOp) -> bytes:
    return make_model(
        [node(op, ["x"], ["y"], "custom")], outputs=[fvi("y", None, TensorProto.STRING)]
    )


def test_string_outputs_are_object_arrays_of_str() -> None:
    for value in (np.full((2, 3), "ab"), np.full((2, 3), "ab", object)):
        op = _string_op(value)
        (y,) = session(_string_model(op), op).run(None, {"x": X})
        assert y.dtype == object and y.tolist() == [["ab"] * 3] * 2
    for value, described in (
        (np.ones((2, 3), object), "holds a int"),
        (np.full((2, 3), b"ab"), "|S2"),
        (np.full((2, 3), b"ab", object), "holds a bytes"),
        (X, "tensor(float)"),
        (["ab"] * 3, "Python list"),
    ):
        op = _string_op(value)
        sess = session(_string_model(op), op)
        with pytest.raises(ortcore.RuntimeException) as err:
            sess.run(None, {"x": X})
        assert "is declared tensor(string)" in str(err.value) and described in str(err.value)


# -- where the declared type comes from ---------------------------------------------


def _sink() -> ortcore.CustomOp:
    """Takes anything, returns float32 zeros: keeps its input's type unknown."""
    return make_op(
        lambda t: (np.zeros(1, np.float32),),
        inputs=["X: A"],
        outputs=["Y: F"],
        types={"F": ["float"]},
        shape=None,
    )


def test_without_a_static_type_the_constraint_decides() -> None:
    sink = _sink()
    for allowed, value, declared in (
        (["int64"], X, r"tensor\(int64\)"),
        (["int32", "int64"], X, r"tensor\(int32\) or tensor\(int64\)"),
    ):
        op = make_op(
            lambda x, v=value: (v,),
            outputs=["Y: U"],
            types={"T": ["float"], "U": allowed},
            shape=None,
        )
        model = make_model([node(op, ["x"], ["t"], "custom"), node(sink, ["t"], ["y"], "sink")])
        with pytest.raises(ortcore.RuntimeException, match=rf"declared {declared}(?! of)"):
            session(model, op, sink).run(None, {"x": X})
        ok = make_op(
            lambda x: (np.ones(2, np.int64),),
            outputs=["Y: U"],
            types={"T": ["float"], "U": allowed},
            shape=None,
        )
        model = make_model([node(ok, ["x"], ["t"], "custom"), node(sink, ["t"], ["y"], "sink")])
        session(model, ok, sink).run(None, {"x": X})


def test_without_a_static_type_an_input_of_the_same_parameter_decides_at_run_time() -> None:
    opaque = make_op(  # float64 out, of a type inference cannot know
        lambda x: (x.astype(np.float64),), outputs=["Y: U"], types={"T": ["float"]}, shape=None
    )
    sink = _sink()
    for value, ok in ((lambda t: t.astype(np.float32), False), (lambda t: t * 2, True)):
        same = make_op(lambda t, f=value: (f(t),), types={}, shape=None)
        model = make_model(
            [
                node(opaque, ["x"], ["u"], "opaque"),
                node(same, ["u"], ["t"], "custom"),
                node(sink, ["t"], ["y"], "sink"),
            ]
        )
        sess = session(model, opaque, same, sink)
        assert sess.get_outputs()[0].type == "tensor(float)"
        if ok:
            sess.run(None, {"x": X})
        else:
            with pytest.raises(ortcore.RuntimeException, match=r"declared tensor\(double\)"):
                sess.run(None, {"x": X})


# -- several outputs, optional and variadic ones -------------------------------------


def _two_outputs(kernel: Callable[..., Any]) -> ortcore.CustomOp:
    return make_op(kernel, outputs=["Y: T?", "M: T?"], shape=lambda ins, a: [None, None])


def test_an_optional_output_the_node_omits() -> None:
    for result in ((X,), (X, X), (X, None)):
        op = _two_outputs(lambda x, r=result: r)
        (y,) = session(make_model([node(op, ["x"], ["y"], "custom")]), op).run(None, {"x": X})
        np.testing.assert_array_equal(y, X)
    op = _two_outputs(lambda x: (None, X))
    model = make_model([node(op, ["x"], ["", "m"], "custom")], outputs=[fvi("m", None)])
    np.testing.assert_array_equal(session(model, op).run(None, {"x": X})[0], X)
    # An output the node names must be computed; a value for an omitted one
    # is still checked; three values for two outputs are refused.
    for result, message in (
        ((None, X), r"output 0 \('y'\).*returned None"),
        ((X, "junk"), r"output 1 is declared.*Python str"),
        ((X, X, X), r"returned a tuple of 3 value\(s\) for 2 output\(s\)"),
    ):
        op = _two_outputs(lambda x, r=result: r)
        model = make_model([node(op, ["x"], ["y", ""], "custom")])
        with pytest.raises(ortcore.RuntimeException, match=message):
            session(model, op).run(None, {"x": X})


def test_each_output_is_checked_and_named() -> None:
    op = _two_outputs(lambda x: (x * 1, x.astype(np.float64)))
    model = make_model(
        [node(op, ["x"], ["y", "m"], "custom")], outputs=[fvi("y", None), fvi("m", None)]
    )
    with pytest.raises(ortcore.RuntimeException, match=r"output 1 \('m'\).*tensor\(double\)"):
        session(model, op).run(None, {"x": X})


def test_variadic_outputs() -> None:
    def three(x: np.ndarray) -> tuple[Any, ...]:
        return (x * 1, x * 2, x.astype(np.int64))

    op = make_op(three, outputs=["Y: T..."], shape=lambda ins, a: [_same(ins, a)[0]] * 3)
    outs = [fvi(n, None) for n in ("a", "b", "c")]
    model = make_model([node(op, ["x"], ["a", "b", "c"], "custom")], outputs=outs)
    with pytest.raises(ortcore.RuntimeException, match=r"output 2 \('c'\).*tensor\(int64\)"):
        session(model, op).run(None, {"x": X})


def test_a_named_tuple_or_a_list_of_results() -> None:
    Result = collections.namedtuple("Result", ["y"])
    for result in (Result(X * 2), [X * 2]):
        op = make_op(lambda x, r=result: r)
        np.testing.assert_array_equal(relu_after(op).run(None, {"x": X})[0], np.maximum(X * 2, 0))


def test_wrong_count_and_a_builder_without_a_compute_function_name_the_op() -> None:
    op = make_op(lambda x: X)  # an array, not a tuple of one
    with pytest.raises(ortcore.RuntimeException, match=rf"{DOMAIN}::{op.name}.*not a tuple"):
        relu_after(op).run(None, {"x": X})
    op = ortcore.custom_op(domain=DOMAIN, name="NoCompute", inputs=["X"], outputs=["Y"])
    op.kernel("mini")(lambda info: 42)
    with pytest.raises(ortcore.InvalidGraph, match=rf"{DOMAIN}::NoCompute.*not a compute function"):
        relu_after(op)


# -- every path a kernel is called on ----------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="sequential"),
        pytest.param({"execution_mode": ortcore.ExecutionMode.ORT_PARALLEL}, id="parallel"),
        pytest.param({"enable_profiling": True}, id="profiled"),
    ],
)
def test_every_executor_loop_checks(options: dict[str, Any], tmp_path: Any) -> None:
    op = make_op(lambda x: (x.astype(np.float64),))
    if options.get("enable_profiling"):
        options = {**options, "profile_file_prefix": str(tmp_path / "p")}
    model = make_model(  # two branches: the parallel executor runs them at once
        [
            node(op, ["x"], ["a"], "custom"),
            helper.make_node("Relu", ["x"], ["b"]),
            helper.make_node("Add", ["a", "b"], ["y"]),
        ]
    )
    with pytest.raises(ortcore.RuntimeException, match=r"output 0 \('a'\).*tensor\(double\)"):
        session(model, op, **options).run(None, {"x": X})


def test_a_custom_op_inside_a_subgraph() -> None:
    op = make_op(lambda x: (x.astype(np.int64),))
    then_g = helper.make_graph([node(op, ["x"], ["t"], "inner")], "then", [], [fvi("t", (2, 3))])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [fvi("e", (2, 3))]
    )
    cond = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    model = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        initializers=[cond],
    )
    with pytest.raises(ortcore.RuntimeException, match=r"node 'inner'.*tensor\(int64\)"):
        session(model, op).run(None, {"x": X})


def test_a_context_kernel_is_checked_and_its_context_left_alone() -> None:
    seen: list[Any] = []

    def kernel(ctx: ep_sdk.RunContext, x: np.ndarray) -> tuple[Any]:
        seen.append(ctx)
        return (x.astype(np.float64),)

    op = make_op(kernel, context=True)
    with pytest.raises(ortcore.RuntimeException, match=r"tensor\(double\)"):
        relu_after(op).run(None, {"x": X})
    assert isinstance(seen[0], ep_sdk.RunContext)


def test_a_device_output_is_the_providers_tensor() -> None:
    for value, ok in ((lambda x: FakeTensor(x._data * 2), True), (lambda x: X * 2, False)):
        op = make_op(lambda x, f=value: (f(x),), provider="fake")
        sess = session(make_model([node(op, ["x"], ["y"], "custom")]), op, providers=["fake"])
        if ok:
            np.testing.assert_array_equal(sess.run(None, {"x": X})[0], X * 2)
        else:
            with pytest.raises(ortcore.RuntimeException, match="lives on the provider's device"):
                sess.run(None, {"x": X})


# -- inputs are the caller's: a kernel may hand one on, never write into it ---------


def _writes_in_place(calls: list[bool] | None = None) -> ortcore.CustomOp:
    """``x += 1`` in place, noting whether each call's input was writable."""

    def kernel(x: np.ndarray) -> tuple[np.ndarray]:
        if calls is not None:
            calls.append(x.flags.writeable)
        np.add(x, 1, out=x)
        return (x,)

    return make_op(kernel)


def test_a_kernel_returning_its_input_hands_on_the_original_and_the_feed_stays_intact() -> None:
    seen: list[np.ndarray] = []
    ident = make_op(lambda x: (seen.append(x) or x,))
    for later, expect in ((_writes_in_place(), X + 1), (None, X)):
        nodes = [node(ident, ["x"], ["t" if later else "y"], "identity")]
        if later is not None:
            nodes.append(node(later, ["t"], ["y"], "in_place"))
        ops = [ident] + ([later] if later is not None else [])
        feed = X.copy()
        (y,) = session(make_model(nodes), *ops).run(None, {"x": feed})
        np.testing.assert_array_equal(y, expect)
        np.testing.assert_array_equal(feed, X)  # the in-place kernel wrote into a copy
        assert not np.shares_memory(y, feed) and y.flags.writeable
    assert not seen[0].flags.writeable  # the kernel saw a read-only view


def test_a_kernel_writing_into_its_input_works_on_copies_and_the_feed_stays_intact() -> None:
    ident = make_op(lambda x: (x,))
    view = make_op(lambda x: (x[::-1][::-1],))
    for first in (None, ident, view):
        calls: list[bool] = []
        in_place = _writes_in_place(calls)
        nodes = [node(in_place, ["t" if first else "x"], ["y"], "in_place")]
        if first is not None:
            nodes.insert(0, node(first, ["x"], ["t"], "first"))
        ops = [in_place] + ([first] if first is not None else [])
        sess = session(make_model(nodes), *ops)
        feed = X.copy()
        for _ in range(3):
            (y,) = sess.run(None, {"x": feed})
            np.testing.assert_array_equal(y, X + 1)
        np.testing.assert_array_equal(feed, X)
        # Refused once on a read-only view, then given copies on every call.
        assert calls == [False, True, True, True]


def test_every_way_of_writing_into_an_input_gets_copies() -> None:
    def through_memoryview(x: np.ndarray) -> None:
        memoryview(x).cast("B")[0] = 0

    writes = [
        lambda x: x.sort(),
        lambda x: x.fill(0),
        lambda x: np.copyto(x, 0),
        lambda x: np.put(x, [0], 0),
        through_memoryview,
        lambda x: ctypes.c_char.from_buffer(x),
    ]
    for write in writes:
        op = make_op(lambda x, w=write: (w(x), x * 2)[1:])
        feed = X.copy()
        relu_after(op).run(None, {"x": feed})
        np.testing.assert_array_equal(feed, X)


def test_a_kernel_writing_into_a_read_only_array_of_its_own_fails_once() -> None:
    calls: list[int] = []

    def kernel(x: np.ndarray) -> tuple[np.ndarray]:
        calls.append(1)
        y = np.broadcast_to(x, x.shape)  # read-only, whatever x is
        y += 1
        return (y,)

    op = make_op(kernel)
    with pytest.raises(ortcore.RuntimeException, match=rf"{op.name} node.*read-only"):
        relu_after(op).run(None, {"x": X})
    assert len(calls) == 2  # the view, then copies: still its own array


def test_a_weight_written_in_place_stays_what_the_model_says_run_after_run() -> None:
    bump = _writes_in_place()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make_model(
        [node(bump, ["w"], ["t"], "bump"), helper.make_node("Add", ["t", "x"], ["y"])],
        initializers=[numpy_helper.from_array(np.zeros_like(w), "w")],
    )
    so = ortcore.SessionOptions()
    so.register_custom_ops(bump)
    user_w = w.copy()
    so.add_initializer("w", user_w)  # the caller's writable array, shared
    sess = ortcore.InferenceSession(model, so, providers=["mini"])
    first = sess.run(None, {"x": X})[0]
    second = sess.run(None, {"x": X})[0]
    np.testing.assert_array_equal(first, w + 1 + X)
    np.testing.assert_array_equal(second, first)
    np.testing.assert_array_equal(user_w, w)


def test_a_kernel_writing_into_an_input_others_read_leaves_them_their_value() -> None:
    bump = _writes_in_place()
    model = make_model(
        [node(bump, ["x"], ["t"], "bump"), helper.make_node("Add", ["t", "x"], ["y"])]
    )
    (y,) = session(model, bump).run(None, {"x": X})
    np.testing.assert_array_equal(y, (X + 1) + X)


# -- the same bad values in front of the CPU provider's compiled kernels ------------

_CPU_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from onnx import helper, TensorProto
    import ortcore

    D = "test.outputs.cpu"
    X = np.arange(2 * 4 * 5 * 5, dtype=np.float32).reshape(2, 4, 5, 5)
    W = np.ones((3, 4, 3, 3), np.float32)
    BAD = {
        "float64": X.astype(np.float64), "int32": X.astype(np.int32),
        "object": X.astype(object), "structured": np.zeros(X.shape, "f4,f4"),
        "big-endian": X.astype(">f4"), "str": "abc", "None": None, "list": X.tolist(),
        "rank-2": X.reshape(8, 25), "dims": X.reshape(2, 5, 4, 5), "0-d": np.float32(1),
        "float16": X.astype(np.float16), "void": np.zeros(X.shape, "V4"),
    }
    FOLLOW = {
        "Conv": (["t", "w"], {"pads": [1, 1, 1, 1]}),
        "MaxPool": (["t"], {"kernel_shape": [2, 2]}),
        "Relu": (["t"], {}),
        "Softmax": (["t"], {}),
        "Transpose": (["t"], {"perm": [0, 2, 3, 1]}),
    }
    report = {}
    for key, value in BAD.items():
        op = ortcore.custom_op(domain=D, name="Bad", inputs=["X: T"], outputs=["Y: T"],
                               types={"T": ["float"]},
                               shape=lambda i, a: [ortcore.TensorType(i[0].dtype, i[0].shape)])
        op.kernel("cpu")(lambda info, v=value: lambda x: (v,))
        so = ortcore.SessionOptions()
        so.register_custom_ops(op)
        for follow, (ins, attrs) in FOLLOW.items():
            nodes = [helper.make_node("Bad", ["x"], ["t"], domain=D, name="bad"),
                     helper.make_node(follow, ins, ["y"], **attrs)]
            vi = helper.make_tensor_value_info
            g = helper.make_graph(nodes, "g", [vi("x", 1, X.shape)], [vi("y", 1, None)],
                                  [helper.make_tensor("w", 1, W.shape, W.ravel())])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(D, 1)])
            sess = ortcore.InferenceSession(m.SerializeToString(), so, providers=["cpu"])
            try:
                sess.run(None, {"x": X})
                report[f"{key}/{follow}"] = "ran"
            except Exception as exc:
                report[f"{key}/{follow}"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(report))
    """
)


def test_bad_outputs_never_reach_the_cpu_providers_kernels(cpu: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _CPU_SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report) == 13 * 5
    for case, outcome in report.items():
        assert outcome.startswith("RuntimeException: "), (case, outcome)
        assert "custom operator test.outputs.cpu::Bad (node 'bad'): output 0 ('t')" in outcome
