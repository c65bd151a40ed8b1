"""A generated comparison of the pooling ops over their geometry space:
ortcore (every build of the CPU provider's pooling loops) against
onnxruntime, with ``onnx.reference`` as a second opinion.

The space: MaxPool (with its Indices output and ``storage_order``),
AveragePool (``count_include_pad`` 0 and 1) and LpPool (``p`` 1, 2, 3);
1-3 spatial dims, each with a kernel of 1-5, a stride of 1-4, a dilation
of 1-3, pads of 0-4 on each side, an input length of 1-9; ``ceil_mode`` 0
and 1; every ``auto_pad``; float32, float64, float16 (int8 and uint8 for
MaxPool from opset 12); the opsets where each attribute exists. Geometries
are drawn at random from a seed, so a run is repeatable and a larger run
covers more of the space (``test_pool_geometry.py`` runs a few hundred;
``python plugins/cpu/tests/pool_geometry.py --count N`` or the environment
variable ``ORTCORE_POOL_GEOMETRIES=N`` any number).

Cases are batched, one node each, into graphs of up to ``BATCH`` nodes (a
session per case cost more than its pooling); a batch an engine refuses is
split until the refused cases stand alone.

Every disagreement is classified (:func:`classify`) by what differs and by
the kinds of window where it differs (:func:`window_kinds`): a window with
no tap on the input (taps all in the pads, or a dilation stepping over
the input), one starting in the end pads (``ceil_mode``), one reaching past
the padded end, one partly in the pads.

Where onnxruntime and onnx.reference differ, ortcore follows onnxruntime
(the project's anchor) except where onnxruntime breaks the ONNX spec's
text; each such decision is in :data:`DECISIONS`.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pool_oracle as oracle
from onnx import TensorProto, helper

OPSETS = {
    "MaxPool": (8, 10, 11, 12, 22),
    "AveragePool": (7, 10, 11, 19, 22),
    "LpPool": (11, 18, 22),
}
"""The opsets compared for each op: those that changed its attributes or types."""

BATCH = 64
"""Nodes in one compared graph."""

DECISIONS = {
    "pads >= kernel": (
        "onnxruntime refuses a pad as large as the kernel ('Pad should be smaller than "
        "kernel'); the spec's pads 'can take any value greater than or equal to 0' and "
        "onnx.reference computes them. ortcore computes them by the same rules as every "
        "other geometry; they are checked against the rules (pool_oracle), which agree "
        "with onnxruntime wherever it runs."
    ),
    "SAME with dilations": (
        "onnxruntime pads SAME_UPPER/SAME_LOWER for the undilated kernel, so with "
        "dilations its output is not the spec's ceil(input / stride) nor onnx shape "
        "inference's; the spec's pad_shape uses the dilated kernel. ortcore follows the "
        "spec; the comparison runs onnxruntime on the spec's pads written out."
    ),
    "SAME with negative padding": (
        "where a stride is larger than the dilated kernel, onnxruntime's SAME padding is "
        "negative and it refuses the node ('padding values must be non-negative'); onnx "
        "shape inference pads 0, as ortcore does (compared as for dilations)."
    ),
    "all -inf window": (
        "MaxPool over a window whose every input is -inf: onnxruntime's MLAS kernel "
        "gives float32's lowest finite value (its running max starts there and -inf "
        "never exceeds it); the max of those inputs is -inf, which ortcore gives. The "
        "comparison draws finite inputs; test_pool_geometry.py tests this case alone."
    ),
}
"""Where ortcore does not follow onnxruntime, and why (see the module docstring)."""

_DT = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
}


@dataclass(frozen=True)
class Case:
    """One pooling node: op, opset, element type, input shape and attributes."""

    op: str
    opset: int
    dtype: str
    shape: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    indices: bool = False
    seed: int = 0

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute ``name``, or ``default``."""
        return dict(self.attrs).get(name, default)

    def describe(self) -> str:
        """One line naming the case, to paste into a test."""
        extra = ", indices" if self.indices else ""
        return f"{self.op}-{self.opset} {self.dtype} {self.shape} {dict(self.attrs)}{extra}"

    def input(self) -> np.ndarray:
        """The case's input: multiples of 1/8 in [-5, 5] (exact in every float
        type, with ties for Indices to break), or the integer type's range."""
        rng = np.random.default_rng(self.seed)
        if self.dtype == "int8":
            return rng.integers(-128, 128, self.shape).astype(np.int8)
        if self.dtype == "uint8":
            return rng.integers(0, 256, self.shape).astype(np.uint8)
        return (rng.integers(-40, 41, self.shape) / 8).astype(self.dtype)


def _frozen(attrs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))


def _pick(rng: np.random.Generator, values: Sequence[Any]) -> Any:
    return values[int(rng.integers(len(values)))]


def has_dilations(op: str, opset: int) -> bool:
    """Whether ``op`` of ``opset`` has the ``dilations`` attribute."""
    return opset >= {"MaxPool": 10, "AveragePool": 19, "LpPool": 18}[op]


def has_ceil_mode(op: str, opset: int) -> bool:
    """Whether ``op`` of ``opset`` has the ``ceil_mode`` attribute."""
    return opset >= {"MaxPool": 10, "AveragePool": 10, "LpPool": 18}[op]


def sample_case(rng: np.random.Generator) -> Case:
    """A random case from the space (see the module docstring)."""
    op = _pick(rng, ("MaxPool", "MaxPool", "AveragePool", "LpPool"))
    opset = int(_pick(rng, OPSETS[op]))
    rank = int(_pick(rng, (1, 1, 2, 2, 3)))
    kernel = [int(rng.integers(1, 6)) for _ in range(rank)]
    attrs: dict[str, Any] = {"kernel_shape": kernel}
    if rng.random() < 0.85:
        attrs["strides"] = [int(rng.integers(1, 5)) for _ in range(rank)]
    if has_dilations(op, opset) and rng.random() < 0.7:
        attrs["dilations"] = [int(rng.integers(1, 4)) for _ in range(rank)]
    if has_ceil_mode(op, opset) and rng.random() < 0.6:
        attrs["ceil_mode"] = 1
    auto_pad = _pick(rng, ("NOTSET",) * 6 + ("VALID", "SAME_UPPER", "SAME_LOWER"))
    if auto_pad == "NOTSET":
        # mostly pads below the kernel, which onnxruntime runs (see DECISIONS)
        top = [5 if rng.random() < 0.2 else k for k in kernel * 2]
        if rng.random() < 0.9:
            attrs["pads"] = [int(rng.integers(0, t)) for t in top]
    else:
        attrs["auto_pad"] = auto_pad
    indices = False
    if op == "MaxPool":
        indices = opset >= 8 and rng.random() < 0.4
        if opset >= 8 and rng.random() < 0.3:
            attrs["storage_order"] = 1
    elif op == "AveragePool":
        if rng.random() < 0.5:
            attrs["count_include_pad"] = 1
    else:
        attrs["p"] = int(_pick(rng, (1, 2, 3)))
    types = ["float32"] * 4 + ["float64", "float16"]
    if op == "MaxPool" and opset >= 12:
        types += ["int8", "uint8"]
    spatial = tuple(int(rng.integers(1, 10)) for _ in range(rank))
    batch = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    return Case(op, opset, _pick(rng, types), batch + spatial, _frozen(attrs),
                indices, int(rng.integers(2**31)))  # fmt: skip


def sample_cases(count: int, seed: int = 55) -> list[Case]:
    """``count`` random cases of the space, from ``seed``."""
    rng = np.random.default_rng(seed)
    return [sample_case(rng) for _ in range(count)]


def one_d_cases(op: str, opset: int, *, extra: dict[str, Any] | None = None,
                dtype: str = "float32", lengths: Iterable[int] = range(1, 10),
                indices: bool = False) -> list[Case]:  # fmt: skip
    """Every 1-D geometry of the space (kernel, stride, dilation, both pads,
    ``ceil_mode``, input length) for one op, of the attributes its opset
    has: the exhaustive sweep."""
    cases = []
    dilations = range(1, 4) if has_dilations(op, opset) else (1,)
    ceil_modes = (0, 1) if has_ceil_mode(op, opset) else (0,)
    for n, k, s, d, pb, pe, ceil in itertools.product(
        lengths, range(1, 6), range(1, 5), dilations, range(5), range(5), ceil_modes
    ):
        attrs = {"kernel_shape": [k], "strides": [s], "pads": [pb, pe], **(extra or {})}
        if d > 1:
            attrs["dilations"] = [d]
        if ceil:
            attrs["ceil_mode"] = 1
        seed = hash((n, k, s, d, pb, pe, ceil)) & 0x7FFFFFFF
        cases.append(Case(op, opset, dtype, (1, 2, n), _frozen(attrs), indices, seed))
    return cases


# -- the windows --------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """One spatial axis of a window: input length, kernel, stride, dilation, pads."""

    size: int
    kernel: int
    stride: int
    dilation: int
    begin: int
    end: int


def axes(case: Case) -> list[Axis]:
    """The case's spatial axes, ``auto_pad`` resolved by the spec (``pool_oracle``)."""
    spatial = case.shape[2:]
    n = len(spatial)
    kernel = list(case.attr("kernel_shape"))
    strides = list(case.attr("strides") or [1] * n)
    dil = list(case.attr("dilations") or [1] * n)
    pads = list(case.attr("pads") or [0] * (2 * n))
    auto_pad = case.attr("auto_pad", "NOTSET")
    out = []
    for i, size in enumerate(spatial):
        b, e = pads[i], pads[n + i]
        if auto_pad == "VALID":
            b = e = 0
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            b, e = oracle.same_pads(size, kernel[i], strides[i], dil[i], auto_pad == "SAME_UPPER")
        out.append(Axis(size, kernel[i], strides[i], dil[i], b, e))
    return out


def out_shape(case: Case) -> list[int]:
    """The output's spatial sizes by the rules (``pool_oracle``)."""
    if case.attr("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        return [-(-ax.size // ax.stride) for ax in axes(case)]
    ceil = bool(case.attr("ceil_mode", 0))
    return [oracle.out_size(ax.size, ax.kernel, ax.stride, ax.dilation, ax.begin, ax.end, ceil)
            for ax in axes(case)]  # fmt: skip


def window_kinds(case: Case) -> set[str]:
    """The unusual kinds of window the case's output has (per axis; a
    window is of a kind when it is on any axis)."""
    kinds: set[str] = set()
    out = out_shape(case)
    if min(out) < 1:
        return {"no output"}
    for ax, o in zip(axes(case), out, strict=True):
        for i in range(o):
            start = i * ax.stride - ax.begin
            taps = [start + j * ax.dilation for j in range(ax.kernel)]
            inside = [t for t in taps if 0 <= t < ax.size]
            if not inside:
                kinds.add("no tap on the input")
                if ax.dilation > 1 and taps[0] < 0 < taps[-1]:
                    kinds.add("dilation steps over the input")
            elif len(inside) < len(taps):
                kinds.add("partly in the pads")
            if start >= ax.size:
                kinds.add("starts in the end pads")
            if taps[-1] >= ax.size + ax.end:
                kinds.add("past the padded end")
    return kinds


def rules(case: Case) -> Result:
    """The case's outputs by the rules ortcore follows (``pool_oracle``)."""
    out = out_shape(case)
    if min(out) < 0:
        return "ValueError: negative output size"
    x = case.input()
    ax = axes(case)
    whole = case.op == "AveragePool" and case.opset < 19 and not case.attr("ceil_mode", 0)
    y, idx = oracle.pool(
        case.op, x, kernel=[a.kernel for a in ax], strides=[a.stride for a in ax],
        dilations=[a.dilation for a in ax], begin=[a.begin for a in ax],
        end=[a.end for a in ax], out=out, count_include_pad=bool(case.attr("count_include_pad", 0)),
        whole_kernel=whole, p=int(case.attr("p", 2)),
        column_major=bool(case.attr("storage_order", 0)),
    )  # fmt: skip
    with np.errstate(over="ignore", invalid="ignore"):
        y = y.astype(case.dtype)
    return (y, idx) if case.indices else (y,)


# -- running the engines ---------------------------------------------------------------


def model_of(cases: Sequence[Case]) -> onnx.ModelProto:
    """One graph holding a node per case, input ``x{i}``, outputs ``y{i}``
    (and ``i{i}``, the Indices)."""
    opset = max(c.opset for c in cases)
    if len({c.opset for c in cases}) != 1:
        raise ValueError("one opset per graph")
    nodes, inputs, outputs = [], [], []
    for i, c in enumerate(cases):
        names = [f"y{i}"] + ([f"i{i}"] if c.indices else [])
        nodes.append(helper.make_node(c.op, [f"x{i}"], names, name=f"pool{i}", **dict(c.attrs)))
        inputs.append(helper.make_tensor_value_info(f"x{i}", _DT[c.dtype], list(c.shape)))
        outputs.append(helper.make_tensor_value_info(f"y{i}", _DT[c.dtype], None))
        if c.indices:
            outputs.append(helper.make_tensor_value_info(f"i{i}", TensorProto.INT64, None))
    graph = helper.make_graph(nodes, "pools", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


Result = tuple[np.ndarray, ...] | str
"""An engine's outputs for a case, or its error message."""

Engine = Callable[[onnx.ModelProto, dict[str, np.ndarray]], list[np.ndarray]]


def ort_engine(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's CPU provider."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.log_severity_level = 4
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so, ["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def reference_engine(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnx.reference."""
    from onnx.reference import ReferenceEvaluator

    with np.errstate(all="ignore"):
        return list(ReferenceEvaluator(model).run(None, feeds))


def ortcore_engine(build: ModuleType | None = None, threads: int = 2) -> Engine:
    """ortcore's CPU provider, its pooling loops from ``build`` (one of
    ``runnable_builds("pool")``; None: the one it picks)."""

    def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        import ortcore

        from ortcore_cpu.kernels import pool

        so = ortcore.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ortcore.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])  # fmt: skip
        kept = pool.ext
        pool.ext = build or kept
        try:
            return list(sess.run(None, feeds))
        finally:
            pool.ext = kept

    return run


def cuda_engine() -> Engine:
    """ortcore's CUDA provider on its emulation (``ORTCORE_CUDA_EMULATE``),
    the CPU provider taking what it declines (MaxPool's Indices and
    storage_order)."""
    os.environ["ORTCORE_CUDA_EMULATE"] = "1"
    cuda_plugin = os.path.join(os.path.dirname(__file__), "..", "..", "cuda")
    if cuda_plugin not in sys.path:
        sys.path.append(cuda_plugin)
    import ortcore
    import ortcore_cuda.plugin
    from ortcore.plugins import PluginManager

    import ortcore_cpu.plugin

    manager = PluginManager(autoload=False)
    manager.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    manager.register_plugin(ortcore_cpu.plugin, name="ortcore_cpu")

    def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        sess = ortcore.InferenceSession(model.SerializeToString(), providers=["cuda", "cpu"],
                                        plugin_manager=manager)  # fmt: skip
        return list(sess.run(None, feeds))

    return run


def ort_refuses(case: Case) -> bool:
    """Whether onnxruntime refuses the case's attributes: a pad as large as
    the kernel (see :data:`DECISIONS`)."""
    pads, kernel = case.attr("pads") or (), case.attr("kernel_shape")
    return any(p >= kernel[i % len(kernel)] for i, p in enumerate(pads))


def run_cases(engine: Engine, cases: Sequence[Case],
              alone: Callable[[Case], bool] | None = None) -> dict[Case, Result]:  # fmt: skip
    """Each case's outputs from ``engine``, batched (see the module
    docstring); a refused batch is halved until each refused case stands
    alone. Cases ``alone`` expects refused run in batches of their own."""
    results: dict[Case, Result] = {}
    by_opset: dict[tuple[int, bool], list[Case]] = {}
    for c in cases:
        by_opset.setdefault((c.opset, bool(alone and alone(c))), []).append(c)
    todo = [group[i : i + BATCH] for group in by_opset.values()
            for i in range(0, len(group), BATCH)]  # fmt: skip
    while todo:
        batch = todo.pop()
        try:
            outs = engine(model_of(batch), {f"x{i}": c.input() for i, c in enumerate(batch)})
        except Exception as e:
            if len(batch) == 1:
                results[batch[0]] = f"{type(e).__name__}: {e}"
            else:
                todo += [batch[: len(batch) // 2], batch[len(batch) // 2 :]]
            continue
        it = iter(outs)
        for c in batch:
            results[c] = tuple(next(it) for _ in range(2 if c.indices else 1))
    return results


# -- comparing --------------------------------------------------------------------------


def _close(case: Case, got: np.ndarray, want: np.ndarray) -> bool:
    if case.op == "MaxPool" or got.dtype.kind in "iu":
        return bool(np.array_equal(got, want, equal_nan=got.dtype.kind == "f"))
    rtol, atol = {"float16": (2e-3, 2e-3)}.get(case.dtype, (1e-5, 1e-5))
    return bool(np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                            atol=atol, equal_nan=True))  # fmt: skip


def classify(case: Case, got: Result, want: Result) -> str | None:
    """None where ``got`` matches ``want``; else what differs: ``refused``
    (only ``got`` is an error), ``computed`` (only ``want`` is), ``shape``,
    ``indices``, ``dtype`` or ``values``, then the window kinds where it
    differs."""
    if isinstance(want, str) or isinstance(got, str):
        if isinstance(want, str) and isinstance(got, str):
            return None
        return "refused" if isinstance(got, str) else "computed"
    for g, w in zip(got, want, strict=True):
        if g.shape != w.shape:
            more = "more" if math.prod(g.shape) > math.prod(w.shape) else "fewer"
            return f"shape: {more} outputs [{', '.join(sorted(window_kinds(case)))}]"
        if g.dtype != w.dtype:
            return f"dtype {g.dtype} != {w.dtype}"
    what = [n for n, g, w in zip(("values", "indices"), got, want, strict=False)
            if not _close(case, g, w)]  # fmt: skip
    if not what:
        return None
    return f"{'+'.join(what)} [{', '.join(sorted(window_kinds(case))) or 'plain windows'}]"


def anchor_case(case: Case) -> Case:
    """The case onnxruntime runs for ``case``: itself; in float32 where
    onnxruntime has no kernel for the type (AveragePool, LpPool float64);
    with ``SAME_*`` padding where onnxruntime's differs from the spec's
    (see :data:`DECISIONS`), the spec's pads written out."""
    attrs = dict(case.attrs)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        spec = [(ax.begin, ax.end) for ax in axes(case)]
        ort = []
        for ax in axes(case):  # onnxruntime pads for the undilated kernel, negative ones too
            need = (-(-ax.size // ax.stride) - 1) * ax.stride + ax.kernel - ax.size
            head = need // 2 if auto_pad == "SAME_UPPER" else need - need // 2
            ort.append((head, need - head))
        if ort != spec:
            del attrs["auto_pad"]
            attrs["pads"] = tuple(b for b, _ in spec) + tuple(e for _, e in spec)
    dtype = "float32" if case.dtype == "float64" and case.op != "MaxPool" else case.dtype
    return Case(case.op, case.opset, dtype, case.shape, _frozen(attrs), case.indices, case.seed)


def as_type(result: Result, dtype: str) -> Result:
    """``result``'s values in ``dtype`` (Indices unchanged)."""
    if isinstance(result, str):
        return result
    return (result[0].astype(dtype), *result[1:])


def path_of(case: Case, build: str) -> str:
    """The loop of ortcore's CPU provider that pools ``case`` with the pool
    build ``build`` (a replica of ``kernels/pool.py``'s and ``_pool.pxi``'s
    choice, for the report)."""
    rank = len(case.shape) - 2
    if case.op == "LpPool" or case.dtype == "float64" or rank > 3:
        return "numpy"
    out = out_shape(case)
    if min(out) < 1:
        return "no output"
    ax = axes(case)
    lead = 3 - rank
    k = [1] * lead + [a.kernel for a in ax]
    st = [1] * lead + [a.stride for a in ax]
    pb = [0] * lead + [a.begin for a in ax]
    size = [1] * lead + [a.size for a in ax]
    o = [1] * lead + out
    if case.op == "MaxPool" and case.indices:
        return "indices"
    if (
        case.op == "AveragePool"
        and not any(a.begin or a.end for a in ax)
        and all(a.kernel == a.size and a.dilation == 1 for a in ax)
    ):
        return "whole plane"
    two_d = size[0] == 1 and o[0] == 1 and k[0] == 1 and st[0] == 1 and pb[0] == 0
    unit = two_d and st[1] == 1 and st[2] == 1
    if build.endswith("avx512") and unit and o[2] == size[2] and o[1] * size[2] <= 3136:
        return "masked"
    if unit and o[2] == size[2] and o[1] * size[2] <= 512:
        return "flat"
    if two_d:
        return "rows"
    return "general"


@dataclass
class Tally:
    """Counts of a comparison: cases, and per pairing (an engine against
    onnxruntime or the rules) the cases compared and the disagreements by
    class and by ortcore's loop (:func:`path_of`)."""

    cases: int = 0
    classes: dict[str, Counter[str]] = field(default_factory=dict)
    paths: dict[str, Counter[str]] = field(default_factory=dict)
    examples: dict[tuple[str, str], Case] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)

    def add(self, pairing: str, case: Case, verdict: str | None, path: str = "") -> None:
        """Count ``verdict`` (None: agreement) of ``pairing`` on ``case``."""
        counts = self.classes.setdefault(pairing, Counter())
        counts["compared"] += 1
        if path:
            by_path = self.paths.setdefault(pairing, Counter())
            by_path[f"{path} compared"] += 1
            if verdict is not None:
                by_path[f"{path} disagree"] += 1
        if verdict is not None:
            counts[verdict] += 1
            counts["disagree"] += 1
            self.examples.setdefault((pairing, verdict), case)

    def disagreements(self, pairing: str) -> int:
        """Disagreements counted for ``pairing``."""
        return self.classes.get(pairing, Counter())["disagree"]

    def report(self) -> str:
        """A table of the counts, with an example case for each class."""
        lines = [f"{self.cases} cases; onnxruntime refused {sum(self.refused.values())}:"]
        lines += [f"    {n:6d}  {why}" for why, n in self.refused.most_common()]
        for pairing, counts in sorted(self.classes.items()):
            lines.append(f"  {pairing}: {counts['compared']} compared, "
                         f"{counts['disagree']} disagree")  # fmt: skip
            by_path = self.paths.get(pairing)
            if by_path:
                names = sorted({k.rsplit(" ", 1)[0] for k in by_path})
                lines.append(
                    "    by loop: "
                    + ", ".join(
                        f"{n} {by_path[n + ' disagree']}/{by_path[n + ' compared']}" for n in names
                    )
                )
            for verdict, n in counts.most_common():
                if verdict not in ("compared", "disagree"):
                    lines.append(f"    {n:6d}  {verdict}")
                    lines.append(f"            e.g. {self.examples[(pairing, verdict)].describe()}")
        return "\n".join(lines)


def _refusal(message: str) -> str:
    """onnxruntime's reason, without the file and line."""
    for reason in ("Pad should be smaller than kernel", "padding values must be non-negative",
                   "Calculated output dimension is negative"):  # fmt: skip
        if reason in message:
            return reason
    return message.split(":")[-1].strip()[:80]


def compare(cases: Sequence[Case], engines: dict[str, Engine], *,
            reference: bool = True) -> tuple[Tally, dict[str, dict[Case, str]]]:  # fmt: skip
    """Run ``cases`` on onnxruntime, the rules (:func:`rules`), ``onnx.reference``
    and each of ``engines`` (an ortcore engine named ``ortcore BUILD``).
    Each engine is classified against onnxruntime where onnxruntime
    computes the case, and against the rules everywhere; the rules and the
    reference against onnxruntime. Returns the tally and, per engine, each
    disagreeing case's class."""
    anchors = {c: anchor_case(c) for c in cases}
    ort = run_cases(ort_engine, sorted(set(anchors.values()), key=Case.describe), ort_refuses)
    want = {c: as_type(ort[anchors[c]], c.dtype) for c in cases}
    ruled = {c: rules(c) for c in cases}
    tally = Tally(len(cases))
    found: dict[str, dict[Case, str]] = {}
    for c in cases:
        if isinstance(want[c], str):
            tally.refused[_refusal(str(want[c]))] += 1
        else:
            tally.add("rules vs onnxruntime", c, classify(c, ruled[c], want[c]))
    named = dict(engines)
    if reference:
        named["onnx.reference"] = reference_engine
    for name, engine in named.items():
        got = run_cases(engine, cases)
        found[name] = {}
        build = name.split(" ")[-1] if name.startswith("ortcore pool") else ""
        for c in cases:
            path = path_of(c, build) if build else ""
            if not isinstance(want[c], str):
                verdict = classify(c, got[c], want[c])
                tally.add(f"{name} vs onnxruntime", c, verdict, path)
                if verdict is not None:
                    found[name][c] = f"vs onnxruntime: {verdict}"
            if name != "onnx.reference":
                verdict = classify(c, got[c], ruled[c])
                tally.add(f"{name} vs rules", c, verdict, path)
                if verdict is not None:
                    found[name].setdefault(c, f"vs rules: {verdict}")
    return tally, found


SWEEPS: list[tuple[str, int, dict[str, Any], bool]] = [
    ("MaxPool", 12, {}, False),
    ("MaxPool", 12, {}, True),
    ("MaxPool", 12, {"storage_order": 1}, True),
    ("AveragePool", 11, {"count_include_pad": 1}, False),
    ("AveragePool", 19, {}, False),
    ("AveragePool", 19, {"count_include_pad": 1}, False),
    ("LpPool", 18, {"p": 1}, False),
    ("LpPool", 18, {"p": 3}, False),
]
"""The exhaustive 1-D sweeps of ``--sweep``: op, opset, fixed attributes, Indices."""


def _engines(threads: int) -> dict[str, Engine]:
    from ortcore_cpu.kernels._isa import runnable_builds

    return {f"ortcore {m.__name__.rsplit('.', 1)[1]}": ortcore_engine(m, threads)
            for m in runnable_builds("pool")}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Compare a sample of the space (``--count``, ``--seed``) and the
    exhaustive 1-D sweeps (``--sweep``); print the tallies."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--count", type=int, default=int(os.environ.get("ORTCORE_POOL_GEOMETRIES", "2000"))
    )
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--sweep", action="store_true", help="every 1-D geometry of each op")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cuda", action="store_true", help="the CUDA provider (emulated) too")
    args = parser.parse_args(argv)
    engines = _engines(args.threads)
    if args.cuda:
        engines["ortcore cuda (emulated)"] = cuda_engine()
    start = time.perf_counter()
    tally, _ = compare(sample_cases(args.count, args.seed), engines,
                       reference=not args.no_reference)  # fmt: skip
    print(f"sample (seed {args.seed}):\n{tally.report()}")
    if args.sweep:
        for op, opset, extra, indices in SWEEPS:
            t, _ = compare(one_d_cases(op, opset, extra=extra, indices=indices), engines,
                           reference=not args.no_reference)  # fmt: skip
            print(f"1-D sweep {op}-{opset} {extra}{' indices' if indices else ''}:\n{t.report()}")
    print(f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
