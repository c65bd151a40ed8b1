"""Child process of ``test_fuzz_native.py``: runs generated one-node models
through ortcore and the oracles, one JSON line per step on stdout.

Usage: ``python fuzz_worker.py CASES.json START``. ``CASES.json`` holds a list
of cases (see :func:`build_model`); the worker runs them from index ``START``
on. ``python fuzz_worker.py '{"op": ...}'`` runs one case given as JSON (the
failure reports of the fuzz tests print that command line). For each case it prints ``{"i": i, "phase": "start"}`` before anything
native runs, ``{"i": i, "phase": "ortcore", ...}`` once ortcore has returned
or raised, and ``{"i": i, "phase": "done", "verdict": ...}`` at the end, each
flushed at once, so the parent can tell which case (and which side) a crash,
an abort or a hang belongs to.

Verdicts (the parent decides which are failures):

``match``          ortcore's outputs equal onnx.reference's.
``match_ort``      they equal onnxruntime's instead (the reference is wrong).
``match_spec``     MaxPool / AveragePool: they equal a brute-force reading of
                   the spec (both oracles are wrong: 3-D, SAME, dilations).
``match_rewritten`` they equal an oracle's for an equivalent model: Conv
                   with the spec's explicit pads for auto_pad, Resize with
                   non-negative axes (what the oracles get wrong).
``match_groups``   grouped ConvTranspose: they equal the reference's run one
                   group at a time (it gets grouped ones wrong).
``match_infer``    empty outputs of the shapes onnx shape inference gives.
``match_batch1``   empty outputs of an (N, C, ...) op with N = 0 of the
                   shapes an oracle gives with N = 1 (but for N).
``both_reject``    ortcore raised an ortcore error; so did onnx.reference.
``ort_reject``     ortcore raised an ortcore error, onnx.reference gave a
                   result, onnxruntime refused the model.
``rejected``       ortcore raised an ortcore error on a model the generator
                   made invalid on purpose (``hostile``), the oracles ran it.
``lenient``        ortcore gave a result for a model onnxruntime refuses and
                   onnx.reference cannot run or that is invalid on purpose.
``unchecked``      ortcore gave a result too large for the reference, or the
                   case only checks for crashes (``crash_only``).
``mismatch``       ortcore's outputs differ from every oracle's, or are not
                   of the declared types or the inferred shapes.
``spurious``       ortcore raised an ortcore error on a valid model that the
                   oracles run.
``raw``            ortcore raised an exception that is not an ortcore error.
``harness``        the case could not be built or judged (a bug here).
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import traceback
import warnings
from typing import Any

import numpy as np
import onnx
from onnx import helper

MEMORY_LIMIT = 6 << 30
"""Address space of the worker: a huge tensor fails to allocate (MemoryError)
instead of swapping the machine to a halt."""
REF_MAX_ELEMENTS = 200_000
"""Outputs larger than this are not checked against onnx.reference (its
pooling and convolution loops are Python: too slow)."""

_DTYPES = {
    "float32": (np.float32, onnx.TensorProto.FLOAT),
    "float16": (np.float16, onnx.TensorProto.FLOAT16),
    "float64": (np.float64, onnx.TensorProto.DOUBLE),
    "int8": (np.int8, onnx.TensorProto.INT8),
    "uint8": (np.uint8, onnx.TensorProto.UINT8),
    "int32": (np.int32, onnx.TensorProto.INT32),
    "int64": (np.int64, onnx.TensorProto.INT64),
    "bool": (np.bool_, onnx.TensorProto.BOOL),
}


def make_array(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """The tensor an input spec describes: its ``values``, or random data of
    its ``dtype`` and ``shape`` (with some NaN and infinities if ``special``,
    infinities only if it is ``"inf"``, -inf only if ``"-inf"``)."""
    dtype = _DTYPES[spec["dtype"]][0]
    shape = tuple(spec["shape"])
    if spec.get("values") is not None:
        return np.array(spec["values"], dtype=dtype).reshape(shape)
    if np.issubdtype(dtype, np.floating):
        a = np.array(rng.standard_normal(shape))
        if spec.get("special") and a.size:
            pick = rng.random(shape) < 0.15
            pool = {"inf": [np.inf, -np.inf], "-inf": [-np.inf]}.get(
                spec["special"], [np.nan, np.inf, -np.inf]
            )
            a[pick] = rng.choice(pool, size=int(pick.sum()))
        return a.astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def build_model(case: dict[str, Any], arrays: list[np.ndarray | None]) -> onnx.ModelProto:
    """A one-node model (or ``case["nodes"]``, a small graph) of the case.

    A case has ``op``, ``domain``, ``opset`` (of the default domain), ``attrs``,
    ``inputs`` (specs, or None for an omitted optional input), ``outputs``
    (element type names) and optionally ``opsets`` (extra domains).
    """
    in_names = [f"x{i}" if a is not None else "" for i, a in enumerate(arrays)]
    out_names = [f"y{i}" for i in range(len(case["outputs"]))]
    specs = case.get("nodes") or [
        {"op": case["op"], "inputs": in_names, "outputs": out_names,
         "domain": case.get("domain", ""), "attrs": case.get("attrs", {})}
    ]  # fmt: skip
    nodes = []
    for n in specs:
        node = helper.make_node(n["op"], n["inputs"], n["outputs"], domain=n.get("domain", ""))
        node.attribute.extend(_attribute(k, v) for k, v in n.get("attrs", {}).items())
        nodes.append(node)
    graph_inputs, inits = [], []
    for name, spec, a in zip(in_names, case["inputs"], arrays, strict=True):
        if a is None:
            continue
        if spec.get("const"):
            inits.append(onnx.numpy_helper.from_array(a, name))
        else:
            elem = _DTYPES[spec["dtype"]][1]
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(a.shape)))
    graph_outputs = [
        helper.make_tensor_value_info(name, _DTYPES[t][1], None)
        for name, t in zip(out_names, case["outputs"], strict=True)
    ]
    graph = helper.make_graph(nodes, "fuzz", graph_inputs, graph_outputs, initializer=inits)
    opset = int(case["opset"])
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(d, v) for d, v in case.get("opsets", {}).items()]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8 if opset < 21 else 10
    return model


def _attribute(name: str, value: Any) -> onnx.AttributeProto:
    """``helper.make_attribute``, taking an empty list as INTS."""
    if isinstance(value, list) and not value:
        return helper.make_attribute(name, value, attr_type=onnx.AttributeProto.INTS)
    return helper.make_attribute(name, value)


def feeds_of(case: dict[str, Any], arrays: list[np.ndarray | None]) -> dict[str, np.ndarray]:
    """The graph inputs' values (constant inputs are initializers)."""
    return {
        f"x{i}": a
        for i, (spec, a) in enumerate(zip(case["inputs"], arrays, strict=True))
        if a is not None and not spec.get("const")
    }


def _short(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {str(exc)[:400]}"


def run_ortcore(model: bytes, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ok", outputs), ("error", message) for an ortcore error, or ("raw", message)."""
    import ortcore
    from ortcore.errors import OrtcoreError

    try:
        sess = ortcore.InferenceSession(model, providers=["CPUExecutionProvider"])
        return "ok", [np.asarray(o) for o in sess.run(None, feeds)]
    except OrtcoreError as exc:
        return "error", _short(exc)
    except Exception as exc:
        return "raw", _short(exc) + "\n" + traceback.format_exc(limit=8)


def run_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ok", outputs) from onnx.reference, or ("error", message)."""
    from onnx.reference import ReferenceEvaluator

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = ReferenceEvaluator(model).run(None, feeds)
        return "ok", [np.asarray(o) for o in outs]
    except Exception as exc:
        return "error", _short(exc)


def run_onnxruntime(model: bytes, feeds: dict[str, np.ndarray]) -> tuple[str, Any]:
    """("ok", outputs) from onnxruntime, or ("error", message)."""
    import onnxruntime as ort

    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        return "ok", [np.asarray(o) for o in sess.run(None, feeds)]
    except Exception as exc:
        return "error", _short(exc)


def compare_outputs(
    got: list[np.ndarray],
    want: list[np.ndarray],
    rtol: float,
    atol: float,
    defined: list[np.ndarray | None] | None = None,
    int_atol: int = 0,
) -> str | None:
    """Why ``got`` differs from ``want`` (dtype, shape, values), or None.
    Values where ``defined`` (per output, optional) is False are not compared;
    integers may differ by ``int_atol`` (rounding of interpolated values)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.dtype != w.dtype:
            return f"output {k}: dtype {g.dtype}, expected {w.dtype}"
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, expected {w.shape}"
        mask = defined[k] if defined is not None else None
        if g.dtype.kind == "f":
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            finite = np.abs(w64[np.isfinite(w64)])
            tol = atol * max(1.0, float(finite.max()) if finite.size else 1.0)
            ok = np.isclose(g64, w64, rtol=rtol, atol=tol, equal_nan=True)
        elif g.dtype.kind in "iu" and int_atol:
            ok = np.abs(g.astype(np.int64) - w.astype(np.int64)) <= int_atol
        else:
            ok = g == w
        if mask is not None:
            ok = ok | ~mask
        if not np.all(ok):
            at = tuple(int(v) for v in np.argwhere(~np.asarray(ok))[0])
            return (
                f"output {k}: {int(np.sum(~ok))} of {g.size} values differ, "
                f"first at {at}: {g[at]!r} vs {w[at]!r}"
            )
    return None


def inferred_outputs(model: onnx.ModelProto) -> list[tuple[int, tuple[int, ...] | None]] | None:
    """(element type, static shape or None) of each output by onnx shape
    inference (strict, as ortcore runs it), or None where it fails."""
    try:
        graph = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    except Exception:
        return None
    found = []
    for out in graph.output:
        t = out.type.tensor_type
        dims = t.shape.dim
        static = t.HasField("shape") and all(d.HasField("dim_value") for d in dims)
        found.append((t.elem_type, tuple(d.dim_value for d in dims) if static else None))
    return found


def explicit_pads(case: dict[str, Any], arrays: list[np.ndarray | None]) -> dict[str, Any] | None:
    """The case with ``auto_pad`` SAME_UPPER, SAME_LOWER or VALID replaced by
    the explicit pads the ONNX spec defines; None for other cases.

    onnx.reference gets some of those wrong (dilated kernels, 3-D) and
    onnxruntime too; with explicit pads the reference gets them right.
    """
    a = case.get("attrs", {})
    auto = a.get("auto_pad")
    if case.get("op") not in ("Conv", "FusedConv") or auto not in (
        "SAME_UPPER",
        "SAME_LOWER",
        "VALID",
    ):
        return None
    geometry = _geometry(a, arrays[0], arrays[1])
    if geometry is None:
        return None
    attrs = {k: v for k, v in a.items() if k not in ("auto_pad", "pads")}
    attrs["pads"] = list(geometry[3]) + list(geometry[4])
    if case.get("ref"):
        nodes = [{**n, "attrs": attrs} if n["op"] == "Conv" else n for n in case["ref"]["nodes"]]
        return {**case, "ref": {**case["ref"], "nodes": nodes}}
    return {**case, "attrs": attrs}


def positive_axes(case: dict[str, Any], arrays: list[np.ndarray | None]) -> dict[str, Any] | None:
    """The case with Resize's negative ``axes`` counted from the front; None
    for other cases (both oracles mishandle negative axes)."""
    axes = case.get("attrs", {}).get("axes")
    x = arrays[0]
    if case.get("op") != "Resize" or not axes or x is None or min(axes) >= 0:
        return None
    if not all(-x.ndim <= a < x.ndim for a in axes):
        return None
    attrs = {**case["attrs"], "axes": [a % x.ndim for a in axes]}
    return {**case, "attrs": attrs}


Geometry = tuple[list[int], list[int], list[int], list[int], list[int]]


def _geometry(a: dict[str, Any], x: np.ndarray | None, w: np.ndarray | None) -> Geometry | None:
    """(kernel, strides, dilations, pads_begin, pads_end) of a window op by
    the ONNX spec (SAME pads from the spec's output size, clamped at 0), or
    None if the attributes are not usable (bad lengths, values < 1)."""
    if x is None or x.ndim < 3:
        return None
    sp = x.shape[2:]
    n = len(sp)
    kernel = list(a.get("kernel_shape") or (w.shape[2:] if w is not None else []))
    strides = list(a.get("strides") or [1] * n)
    dil = list(a.get("dilations") or [1] * n)
    if not len(kernel) == len(strides) == len(dil) == n or min([*kernel, *strides, *dil]) < 1:
        return None
    auto = a.get("auto_pad") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [
            max(0, (-(-i // s) - 1) * s + (k - 1) * d + 1 - i)
            for i, k, s, d in zip(sp, kernel, strides, dil, strict=True)
        ]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin, strict=True)]
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        pads = list(a.get("pads") or [0] * (2 * n))
        if len(pads) != 2 * n or min(pads) < 0:
            return None
        begin, end = pads[:n], pads[n:]
    return kernel, strides, dil, begin, end


def pool_oracle(
    case: dict[str, Any], arrays: list[np.ndarray | None], model: onnx.ModelProto
) -> tuple[list[np.ndarray], list[np.ndarray | None]] | None:
    """MaxPool / AveragePool by the ONNX spec, by brute force over each
    window, with the output shape of onnx shape inference (the spec's for
    SAME): (outputs, where they are defined) or None. The spec leaves a window of padding only
    open (onnxruntime refuses pads >= kernel): ortcore's max of nothing is
    onnxruntime's, the lowest finite value of the type pooled in (float32
    for float16: -inf there; the type's minimum for integers), its mean of
    nothing 0, and MaxPool's Indices there are not compared. With
    ``count_include_pad``, opsets 7-18 with ``ceil_mode`` 0 divide by the
    whole kernel, as onnxruntime's kernel of those opsets (see
    ``pool_oracle.py``).

    The third oracle: onnx.reference gets 3-D and SAME pooling wrong, and
    onnxruntime refuses pads >= kernel and mis-sizes SAME with dilations.
    """
    op, a = case.get("op"), case.get("attrs", {})
    x = arrays[0]
    inferred = inferred_outputs(model)
    if op not in ("MaxPool", "AveragePool") or x is None or not inferred:
        return None
    geometry = _geometry(a, x, None)
    if geometry is None or inferred[0][1] is None:
        return None
    kernel, strides, dil, begin, end = geometry
    sp = x.shape[2:]
    out = inferred[0][1][2:]
    if a.get("auto_pad") in ("SAME_UPPER", "SAME_LOWER"):
        # the spec's SAME size (shape inference adds ceil_mode's rounding on top)
        out = tuple(-(-i // s) for i, s in zip(sp, strides, strict=True))
    if (
        len(out) != len(sp)
        or any(k > 64 for k in kernel)
        or math.prod(out) * math.prod(kernel) > 1e6
    ):
        return None
    # per axis: input position of each (output index, kernel tap), inside the data, inside the padding
    pos, inside, padded = [], [], []
    for i, size in enumerate(sp):
        p = [
            [o * strides[i] - begin[i] + j * dil[i] for j in range(kernel[i])]
            for o in range(out[i])
        ]
        pos.append(
            np.array([[v if 0 <= v < size else 0 for v in row] for row in p], np.int64).reshape(
                out[i], kernel[i]
            )
        )
        inside.append(
            np.array([[0 <= v < size for v in row] for row in p], bool).reshape(out[i], kernel[i])
        )
        padded.append(
            np.array([[v < size + end[i] for v in row] for row in p], bool).reshape(
                out[i], kernel[i]
            )
        )
    n = len(sp)
    if min(sp) == 0:  # no input element at all: every tap is padding
        vals = np.zeros((*x.shape[:2], *out, math.prod(kernel)))
    else:
        ix = np.ix_(*[q.reshape(-1) for q in pos])
        vals = x.astype(np.float64)[(slice(None), slice(None), *ix)]
        # (N, C, o0, k0, o1, k1, ...) -> (N, C, o0, o1, ..., k0 * k1 * ...)
        vals = vals.reshape(*x.shape[:2], *[v for i in range(n) for v in (out[i], kernel[i])])
        order = [0, 1, *range(2, 2 + 2 * n, 2), *range(3, 3 + 2 * n, 2)]
        vals = vals.transpose(order).reshape(*x.shape[:2], *out, math.prod(kernel))

    def joint(masks: list[np.ndarray]) -> np.ndarray:
        m = np.ones((), bool)
        for q in masks:
            m = np.multiply.outer(m, q)
        m = m.reshape([v for i in range(n) for v in (out[i], kernel[i])])
        order = [*range(0, 2 * n, 2), *range(1, 2 * n, 2)]
        return m.transpose(order).reshape(*out, math.prod(kernel))

    valid = joint(inside)
    if op == "AveragePool":
        total = np.where(valid, vals, 0.0).sum(axis=-1)
        whole = int(case["opset"]) < 19 and not a.get("ceil_mode", 0)
        if a.get("count_include_pad", 0):
            count = joint(padded).sum(axis=-1) if not whole else np.full(out, math.prod(kernel))
        else:
            count = joint(inside).sum(axis=-1)
        y = total / np.maximum(count, 1)
        return [y.astype(x.dtype)], [None]
    masked = np.where(valid, vals, -np.inf)
    y = masked.max(axis=-1)
    if x.dtype.kind in "iu":
        y = np.maximum(y, np.iinfo(x.dtype).min)
    defined = np.broadcast_to(valid.any(axis=-1), y.shape)
    if x.dtype.kind == "f" and x.dtype != np.float16:
        y = np.where(defined, y, np.finfo(x.dtype).min)
    outs = [y.astype(x.dtype)]
    if len(case["outputs"]) > 1:
        tap = masked.argmax(axis=-1)  # the first maximum, as onnxruntime
        taps = np.unravel_index(tap, kernel)
        grid = np.indices(out)
        coords = [pos[i][grid[i], taps[i]] for i in range(n)]
        axes = range(n - 1, -1, -1) if a.get("storage_order", 0) else range(n)
        flat = np.zeros(y.shape, np.int64)
        for i in axes:
            flat = flat * sp[i] + coords[i]
        plane = np.arange(x.shape[0] * x.shape[1]).reshape(*x.shape[:2], *[1] * n)
        outs.append(flat + plane * math.prod(sp))
    return outs, [None, defined][: len(outs)]


def _per_group(case: dict[str, Any], arrays: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """A grouped ConvTranspose by onnx.reference one group at a time (models
    of one group on channel slices, concatenated), or None: the reference
    adds the first group's bias to every group and fails on groups of more
    than one output channel."""
    a = case.get("attrs", {})
    g = a.get("group", 1)
    if case.get("op") != "ConvTranspose" or not isinstance(g, int) or g <= 1:
        return None
    x, w = arrays[0], arrays[1] if len(arrays) > 1 else None
    b = arrays[2] if len(arrays) > 2 else None
    if x is None or w is None or x.ndim < 3 or x.shape[1] % g or w.shape[0] != x.shape[1]:
        return None
    cg, mg = x.shape[1] // g, w.shape[1]
    if b is not None and b.shape != (g * mg,):
        return None
    part = {**case, "attrs": {**a, "group": 1}}
    outs = []
    for i in range(g):
        sliced = [x[:, i * cg : (i + 1) * cg], w[i * cg : (i + 1) * cg]]
        if b is not None:
            sliced.append(b[i * mg : (i + 1) * mg])
        kind, got = run_reference(build_model(part, sliced), feeds_of(part, sliced))
        if kind != "ok":
            return None
        outs.append(got[0])
    return [np.concatenate(outs, axis=1)]


def _same_transpose_shape(
    case: dict[str, Any], arrays: list[np.ndarray | None]
) -> tuple[int, ...] | None:
    """The output shape of a ConvTranspose with SAME auto_pad by the spec
    (input * strides), or None: onnxruntime sizes some differently, and the
    reference fails on grouped ones."""
    a, x, w = case.get("attrs", {}), arrays[0], arrays[1] if len(arrays) > 1 else None
    if case.get("op") != "ConvTranspose" or a.get("auto_pad") not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    if x is None or w is None or a.get("output_shape") or x.ndim < 3:
        return None
    strides = a.get("strides") or [1] * (x.ndim - 2)
    channels = w.shape[1] * int(a.get("group", 1))
    return (x.shape[0], channels, *(i * s for i, s in zip(x.shape[2:], strides, strict=False)))


_NCHW_OPS = ("MaxPool", "AveragePool", "Conv", "ConvTranspose", "FusedConv")


def _batch_of_one(
    case: dict[str, Any], arrays: list[np.ndarray | None], feeds: dict[str, np.ndarray],
    outs: list[np.ndarray],
) -> bool:  # fmt: skip
    """Whether the empty ``outs`` of an (N, C, ...) op with N = 0 have the
    shapes an oracle gives for N = 1, but for N. The oracles often fail on an
    empty batch, and shape inference disagrees with them on some shapes."""
    x = arrays[0]
    if case.get("op") not in _NCHW_OPS or x is None or x.ndim < 3 or x.shape[0] or not x.shape[1]:
        return False
    one = np.ones((1, *x.shape[1:]), x.dtype)
    probe_case = {**case, "inputs": [{**case["inputs"][0], "const": False}, *case["inputs"][1:]]}
    probe_arrays = [one, *arrays[1:]]
    probe_model = _oracle_model(probe_case, probe_arrays, build_model(probe_case, probe_arrays))
    probe_feeds = {**feeds, "x0": one}
    for run in (run_reference, lambda m, f: run_onnxruntime(m.SerializeToString(), f)):
        kind, got = run(probe_model, probe_feeds)
        if kind == "ok" and [(0, *g.shape[1:]) for g in got] == [o.shape for o in outs]:
            return True
    return False


def _tolerance(case: dict[str, Any]) -> tuple[float, float]:
    """(rtol, atol): the case's, or float16's where an input is float16."""
    dtypes = {s["dtype"] for s in case["inputs"] if s is not None}
    rtol, atol = case.get("rtol") or 1e-4, case.get("atol") or 1e-5
    if "float16" in dtypes:
        return max(rtol, 1e-2), max(atol, 1e-2)
    return rtol, atol


def _types_promised(case: dict[str, Any], outs: list[np.ndarray]) -> str | None:
    """Why ortcore's outputs are not of the element types the model declares
    (and the session promises), or None. Shapes are left to the oracles: onnx
    shape inference disagrees with onnxruntime on some (ceil_mode, SAME)."""
    for k, (name, got) in enumerate(zip(case["outputs"], outs, strict=False)):
        if got.dtype != _DTYPES[name][0]:
            return f"output {k}: dtype {got.dtype}, the model declares {name}"
    return None


def _declared(case: dict[str, Any], outcome: tuple[str, Any]) -> tuple[str, Any]:
    """An oracle's outcome with its outputs in the element types the model
    declares (onnx.reference gives LayerNormalization's float32 statistics
    the input's type, for one)."""
    kind, outs = outcome
    if kind != "ok" or len(outs) != len(case["outputs"]):
        return outcome
    return kind, [
        o.astype(_DTYPES[t][0], copy=False) for o, t in zip(outs, case["outputs"], strict=True)
    ]


def _oracle_model(
    case: dict[str, Any], arrays: list[np.ndarray | None], model: onnx.ModelProto
) -> onnx.ModelProto:
    """The model the oracles run: the case's, or its ``ref`` (an equivalent
    graph of standard ops, for ortcore's own fused ops; extra inputs are
    constants)."""
    if not case.get("ref"):
        return model
    ref_case = {**case, "domain": "", "opsets": {}, **case["ref"]}
    extra = [make_array(s, np.random.default_rng(0)) for s in ref_case["inputs"][len(arrays) :]]
    return build_model(ref_case, [*arrays, *extra])


def judge(case: dict[str, Any], arrays: list[np.ndarray | None], model: onnx.ModelProto,
          ours: tuple[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The verdict for a case whose ortcore outcome is ``ours``."""
    feeds = feeds_of(case, arrays)
    kind, value = ours
    hostile = bool(case.get("hostile"))
    if kind == "raw":
        return {"verdict": "raw", "detail": value}
    if kind == "ok":
        broken = _types_promised(case, value)
        if broken is not None:
            return {"verdict": "mismatch", "detail": broken}
        if case.get("crash_only") or sum(o.size for o in value) > REF_MAX_ELEMENTS:
            return {"verdict": "unchecked"}
    elif case.get("crash_only"):
        return {"verdict": "unchecked"}
    elif hostile:
        # invalid on purpose: refusing it is right whatever the oracles make of it
        return {"verdict": "rejected", "detail": value}
    oracle_model = _oracle_model(case, arrays, model)
    rtol, atol = _tolerance(case)
    int_atol = int(case.get("int_atol", 0))

    def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float, atol: float,
                defined: list[np.ndarray | None] | None = None) -> str | None:  # fmt: skip
        return compare_outputs(got, want, rtol, atol, defined, int_atol)

    ref = _declared(case, run_reference(oracle_model, feeds))
    why = compare(value, ref[1], rtol, atol) if kind == "ok" and ref[0] == "ok" else None
    if kind == "ok" and ref[0] == "ok" and why is None:
        return {"verdict": "match"}
    ort = _declared(case, run_onnxruntime(oracle_model.SerializeToString(), feeds))
    if kind == "error":
        if ref[0] == "error":
            return {"verdict": "both_reject"}
        if ort[0] == "error":
            return {"verdict": "ort_reject", "detail": value}
        return {"verdict": "spurious", "detail": value}
    why_ort = compare(value, ort[1], rtol, atol) if ort[0] == "ok" else None
    if ort[0] == "ok" and why_ort is None:
        return {"verdict": "match_ort"}
    inferred = [shape for _, shape in inferred_outputs(model) or []]
    if all(o.size == 0 for o in value) and inferred == [o.shape for o in value]:
        return {"verdict": "match_infer"}  # empty: dtypes and shapes are all there is
    if all(o.size == 0 for o in value) and _batch_of_one(case, arrays, feeds, value):
        return {"verdict": "match_batch1"}
    if all(o.size == 0 for o in value) and _same_transpose_shape(case, arrays) == value[0].shape:
        return {"verdict": "match_infer"}
    spec = pool_oracle(case, arrays, model)
    if spec is not None and compare(value, spec[0], rtol, atol, spec[1]) is None:
        return {"verdict": "match_spec"}
    for rewrite in (explicit_pads, positive_axes):
        same = rewrite(case, arrays)
        if same is None:
            continue
        again = _oracle_model(same, arrays, build_model(same, arrays))
        for run in (run_reference, lambda m, f: run_onnxruntime(m.SerializeToString(), f)):
            kind, outs = _declared(case, run(again, feeds))
            if kind == "ok" and compare(value, outs, rtol, atol) is None:
                return {"verdict": "match_rewritten"}
    grouped = _per_group(case, arrays)
    if grouped is not None and compare(value, grouped, rtol, atol) is None:
        return {"verdict": "match_groups"}
    if ort[0] == "error" and (hostile or ref[0] == "error"):
        # an invalid model (onnxruntime refuses it): no oracle defines the result
        return {"verdict": "lenient", "detail": f"{ref[1] if ref[0] == 'error' else why}"}
    ref_says = f"reference raised {ref[1]}" if ref[0] == "error" else f"vs reference: {why}"
    ort_says = f"onnxruntime raised {ort[1]}" if ort[0] == "error" else f"vs onnxruntime: {why_ort}"
    if spec is not None:
        ort_says += f"; vs the spec: {compare(value, spec[0], rtol, atol, spec[1])}"
    return {"verdict": "mismatch", "detail": f"{ref_says}; {ort_says}"}


_out = sys.stdout


def _emit(record: dict[str, Any]) -> None:
    _out.write(json.dumps(record) + "\n")
    _out.flush()


def main(argv: list[str]) -> int:
    global _out
    # The records get stdout to themselves: anything native code prints goes to stderr.
    _out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    if argv[1].lstrip().startswith(("[", "{")):
        cases = json.loads(argv[1])
        cases = cases if isinstance(cases, list) else [cases]
    else:
        with open(argv[1]) as f:
            cases = json.load(f)
    start = int(argv[2]) if len(argv) > 2 else 0
    import ortcore  # noqa: F401  (imported before the first case starts)

    for i in range(start, len(cases)):
        case = cases[i]
        rng = np.random.default_rng(case.get("seed", i))
        _emit({"i": i, "phase": "start"})
        try:
            arrays = [None if s is None else make_array(s, rng) for s in case["inputs"]]
            model = build_model(case, arrays)
        except Exception:
            _emit({"i": i, "phase": "done", "verdict": "harness", "detail": traceback.format_exc()})
            continue
        ours = run_ortcore(model.SerializeToString(), feeds_of(case, arrays))
        _emit({"i": i, "phase": "ortcore", "outcome": ours[0]})
        try:
            verdict = judge(case, arrays, model, ours)
        except Exception:
            verdict = {"verdict": "harness", "detail": traceback.format_exc()}
        _emit({"i": i, "phase": "done", **verdict})
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
    sys.exit(main(sys.argv))
