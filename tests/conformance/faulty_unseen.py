"""Faulty providers the suite was never told about: one realistic bug each.

Each provider is :class:`UnseenHealthy` (the 20 numpy ops of
:mod:`tests.conformance.unseen_kernels`, claimed for the opsets and types a
real provider of them claims) with one bug a provider author really ships,
described in its docstring. None of these bugs is of a class the suite's
cases or contract checks were written for before issue 52; each is caught
only by exploring the space the provider claims (ranks, attribute defaults,
dtypes, zero-size and symbolic dims, optional inputs, two nodes of an op,
ownership of outputs, overridable initializers, memory over many shapes).

``unseen-fused`` is the compile-path counterpart: it claims every group of
the same ops (``ep_sdk.group_nodes``) and runs each group through the same
kernels, one after the other, as an engine would; the ``unseen-fused-*``
providers are it with one bug in the engine.

Registered as one plugin: ``--plugin tests.conformance.faulty_unseen``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

import ep_sdk
from ep_sdk import Capability, ExecutionProvider, KernelRegistry, NodeInfo
from ep_sdk.dtypes import to_numpy

from .unseen_fused import FUSED
from .unseen_kernels import (
    KERNELS,
    Builder,
    Fn,
    Kernel,
    arg_reduce,
    axis_of,
    int_div,
    is_narrow_float,
    layer_norm,
    narrow,
    reduce_sum,
    registry,
    softmax_along,
    tensors_only,
    widen,
)

# -- the providers' base ----------------------------------------------------------


class UnseenHealthy(ExecutionProvider):
    """No bug: the healthy counterpart of every kernel-path provider here."""

    name = "UnseenHealthyExecutionProvider"
    aliases = ("unseen-healthy",)
    version = "1.0"
    priority = 1
    faults: ClassVar[Mapping[str, Kernel]] = {}
    bug: ClassVar[str] = ""
    """The bug's class (what the issue's dimensions call it); empty: none."""
    ops: ClassVar[tuple[str, ...]] = ()
    """The ops the bug lives in (what a test selects cases by)."""

    def get_capability(self, graph: ep_sdk.GraphContext) -> Capability:
        cap = ep_sdk.claim_registered_nodes(graph, self.registry() or KernelRegistry())
        claims = []
        for claim in cap.claims:
            if tensors_only(claim.nodes[0]):
                claims.append(claim)
            else:
                cap.declined[claim.nodes[0]] = f"{self.name}: tensors only, no sequences"
        return Capability(claims=claims, declined=cap.declined)

    def kernel_registry(self) -> KernelRegistry:
        reg: KernelRegistry | None = self.__dict__.get("_registry")
        if reg is None:
            reg = self.__dict__["_registry"] = self.make_registry()
        return reg

    def make_registry(self) -> KernelRegistry:
        """The provider's kernels: the healthy ones with :attr:`faults` in their place."""
        return registry({**KERNELS, **type(self).faults})


def _replace(op: str, build: Builder) -> dict[str, Kernel]:
    """``op``'s healthy claim (opsets, types) with another builder."""
    k = KERNELS[op]
    return {op: Kernel(build, k.since, k.types, k.until)}


def _healthy(op: str, info: NodeInfo) -> Fn:
    return KERNELS[op].build(info)


# -- ranks --------------------------------------------------------------------------


def _softmax_rows_fast_path(info: NodeInfo) -> Fn:
    general = _healthy("Softmax", info)

    def compute(x: np.ndarray) -> np.ndarray:
        if x.ndim == 2:  # the common case (logits): one softmax per row, vectorized
            return narrow(softmax_along(widen(x), 1), x.dtype)
        return general(x)

    return compute


def _transpose_as_4d(info: NodeInfo) -> Fn:
    perm = info.attrs.get("perm")

    def compute(x: np.ndarray) -> np.ndarray:
        p = list(perm) if perm is not None else list(range(x.ndim))[::-1]
        if x.ndim <= 4:
            return np.transpose(x, p).copy()
        # the engine's transpose is 4-D: fold the leading dims into one and
        # permute the last three
        lead = x.ndim - 3
        folded = x.reshape((-1, *x.shape[lead:]))
        p4 = [0] + [d - lead + 1 for d in p[lead:]]
        y = np.transpose(folded, p4)
        return y.reshape(tuple(x.shape[d] for d in p)).copy()

    return compute


def _device_buffer(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An output buffer from the device allocator, which wants at least one dim."""
    return np.empty(shape or (1,), dtype)


def _into_buffer(op: str) -> Builder:
    def build(info: NodeInfo) -> Fn:
        compute = _healthy(op, info)

        def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = _device_buffer(np.broadcast_shapes(a.shape, b.shape), a.dtype)
            out[...] = compute(a, b)
            return out

        return run

    return build


def _gather_indices_1d(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])

    def compute(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
        a = axis_of(axis, data.ndim)
        idx = np.atleast_1d(indices).astype(np.int64)  # the device gather takes a list
        idx = np.where(idx < 0, idx + data.shape[a], idx)
        return np.take(data, idx, axis=a)

    return compute


# -- attributes and opsets -------------------------------------------------------------


def _raw(info: NodeInfo, name: str, default: Any) -> Any:
    """An attribute as the provider's own importer reads it: from the node,
    with the default of the numpy function it maps to."""
    attr = info.node.attributes.get(name)
    return default if attr is None else attr.value


def _arg_with_numpy_defaults(fn: Fn) -> Builder:
    def build(info: NodeInfo) -> Fn:
        axis = int(_raw(info, "axis", 0))
        keep = bool(_raw(info, "keepdims", False))  # np.argmax(keepdims=False)
        last = bool(_raw(info, "select_last_index", 0))
        return lambda x: arg_reduce(x, axis, keep, last, fn)

    return build


def _split_like_numpy(info: NodeInfo) -> Fn:
    general = _healthy("Split", info)
    axis, num = int(info.attrs["axis"]), info.attrs.get("num_outputs")

    def compute(x: np.ndarray, split: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        if split is not None or num is None:
            return general(x, split)
        parts = np.array_split(x, int(num), axis=axis_of(axis, x.ndim))
        return tuple(p.copy() for p in parts)

    return compute


def _softmax_always_13(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])
    return lambda x: narrow(softmax_along(widen(x), axis_of(axis, x.ndim)), x.dtype)


def _cached_kernels(owner: Any) -> Callable[[str, Builder], Builder]:
    """A per-session cache of built kernels keyed by op, types and shapes:
    building is the expensive part (the engine JIT-compiles each kernel)."""
    cache: dict[tuple[Any, ...], Fn] = owner.__dict__.setdefault("_jit", {})

    def wrap(op: str, build: Builder) -> Builder:
        def cached(info: NodeInfo) -> Fn:
            key = (op, tuple(info.input_types), tuple(info.input_shapes))
            if key not in cache:
                cache[key] = build(info)
            return cache[key]

        return cached

    return wrap


# -- optional inputs ----------------------------------------------------------------


def _gemm_bias_as_vector(info: NodeInfo) -> Fn:
    alpha, beta = float(info.attrs["alpha"]), float(info.attrs["beta"])
    ta, tb = int(info.attrs["transA"]), int(info.attrs["transB"])

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        x, w = widen(a), widen(b)
        y = alpha * ((x.T if ta else x) @ (w.T if tb else w))
        if c is not None:
            bias = widen(c)
            if bias.shape != y.shape:
                bias = bias.reshape(-1)  # a bias: one value per output column
            y = y + beta * bias
        return narrow(y, a.dtype)

    return compute


def _layer_norm_last_input_bias(info: NodeInfo) -> Fn:
    axis, eps = int(info.attrs["axis"]), float(info.attrs["epsilon"])
    stats = [to_numpy(t) if t is not None else np.dtype(np.float32) for t in info.output_types]

    def compute(*inputs: np.ndarray) -> tuple[Any, ...]:
        x, w, b = inputs[0], inputs[1], inputs[-1]
        return layer_norm(x, w, b, axis, eps, stats)

    return compute


def _reduce_noop_only_when_empty(info: NodeInfo) -> Fn:
    keep, noop = bool(info.attrs["keepdims"]), bool(info.attrs["noop_with_empty_axes"])

    def compute(x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        if axes is not None and axes.size == 0 and noop:
            return x.copy()
        if axes is None or axes.size == 0:
            return reduce_sum(x, None, keep)
        return reduce_sum(x, [int(a) for a in axes.reshape(-1)], keep)

    return compute


# -- dtypes and precision ---------------------------------------------------------------


def _matmul_half_accumulator(info: NodeInfo) -> Fn:
    general = _healthy("MatMul", info)

    def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype != np.float16:
            return general(a, b)
        # tensor-core style: each product added into a float16 accumulator
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        shape = (*np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2]), a2.shape[-2], b2.shape[-1])
        acc = np.zeros(shape, np.float16)
        for k in range(a2.shape[-1]):
            acc += a2[..., :, k : k + 1] * b2[..., k : k + 1, :]
        if a.ndim == 1:
            acc = acc[..., 0, :]
        if b.ndim == 1:
            acc = acc[..., 0]
        return acc

    return compute


_SIGNED = {np.dtype(np.uint32): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.int64)}


def _signed_only(fn: Fn, same_type: bool) -> Builder:
    """The device has signed 32/64-bit divide and compare only: unsigned
    operands are reinterpreted as signed."""

    def build(info: NodeInfo) -> Fn:
        def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            signed = _SIGNED.get(a.dtype)
            if signed is None:
                return np.asarray(fn(widen(a), widen(b))).astype(a.dtype if same_type else bool)
            y = np.asarray(fn(a.view(signed), b.view(signed)))
            return y.view(a.dtype) if same_type else y

        return compute

    return build


def _div_any(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return int_div(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


def _bf16_through_f16(fn: Fn) -> Builder:
    """bfloat16 computed by the float16 units (the device has no bfloat16 ALU)."""

    def build(info: NodeInfo) -> Fn:
        def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if is_narrow_float(a.dtype) and a.dtype != np.float16:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    y = fn(a.astype(np.float16), b.astype(np.float16))
                return narrow(y, a.dtype)
            with np.errstate(divide="ignore", invalid="ignore"):
                return narrow(fn(widen(a), widen(b)), a.dtype)

        return compute

    return build


def _argmin_as_argmax_of_negation(info: NodeInfo) -> Fn:
    axis, keep = int(info.attrs["axis"]), bool(info.attrs["keepdims"])
    last = bool(info.attrs.get("select_last_index", 0))

    def compute(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            flipped = np.negative(x)  # the smallest is the largest of the negation
        return arg_reduce(flipped, axis, keep, last, np.argmax)

    return compute


# -- shapes at run time, memory, ownership ---------------------------------------------------


def _softmax_planned_from_static_shape(info: NodeInfo) -> Fn:
    general = _healthy("Softmax", info)
    shape = info.input_shapes[0]
    if (
        info.opset < 13
        or not shape
        or axis_of(int(info.attrs["axis"]), len(shape)) != len(shape) - 1
    ):
        return general
    rows = math.prod(d if d is not None else 1 for d in shape[:-1])  # the plan: unknown dims as 1

    def compute(x: np.ndarray) -> np.ndarray:
        y = softmax_along(widen(x).reshape(rows, -1), 1)
        return narrow(y.reshape(x.shape), x.dtype)

    return compute


def _flatten_reshape_minus_one(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])

    def compute(x: np.ndarray) -> np.ndarray:
        a = axis_of(axis, x.ndim)
        return x.reshape(math.prod(x.shape[:a]), -1).copy()

    return compute


_PLANS: dict[tuple[Any, ...], np.ndarray] = {}
"""Transpose plans (gather indices) by shape and permutation, for the process."""


def _transpose_by_planned_gather(info: NodeInfo) -> Fn:
    perm = info.attrs.get("perm")

    def compute(x: np.ndarray) -> np.ndarray:
        p = tuple(perm) if perm is not None else tuple(range(x.ndim))[::-1]
        key = (x.shape, p)
        index = _PLANS.get(key)
        if index is None:
            index = _PLANS[key] = np.arange(x.size).reshape(x.shape).transpose(p).reshape(-1)
        return x.reshape(-1)[index].reshape(tuple(x.shape[d] for d in p))

    return compute


def _constant_made_once(info: NodeInfo) -> Fn:
    make = _healthy("ConstantOfShape", info)
    made: dict[tuple[int, ...], np.ndarray] = {}

    def compute(shape: np.ndarray) -> np.ndarray:
        key = tuple(int(d) for d in shape)
        if key not in made:  # a constant: made once, handed out every run
            made[key] = make(shape)
        return made[key]

    return compute


def _matmul_packed_at_load(info: NodeInfo) -> Fn:
    general = _healthy("MatMul", info)
    weight = info.node.inputs[1].const_value if info.node.inputs[1] is not None else None
    if weight is None:
        return general
    packed = np.ascontiguousarray(widen(weight.numpy()))  # packed once, at session creation

    def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return narrow(np.matmul(widen(a), packed), a.dtype)

    return compute


def _provider(
    alias: str, doc: str, bug: str, ops: tuple[str, ...], faults: Mapping[str, Kernel]
) -> type[UnseenHealthy]:
    cls_name = "".join(p.title() for p in alias.split("-"))
    attrs = {
        "name": f"{cls_name}ExecutionProvider",
        "aliases": (alias,),
        "faults": dict(faults),
        "bug": bug,
        "ops": ops,
        "__doc__": doc,
    }
    return type(cls_name, (UnseenHealthy,), attrs)


class UnseenAttrCache(UnseenHealthy):
    """Bug: the session keeps its built kernels in a cache keyed by op, input
    types and input shapes (building is the expensive part: the engine
    JIT-compiles each kernel), attributes forgotten in the key. A second node
    of the same op on the same shapes, with other attributes (two LeakyRelu
    of different slopes, two Softmax over different axes, two Transposes),
    runs the first node's kernel."""

    name = "UnseenAttrCacheExecutionProvider"
    aliases = ("unseen-attr-cache",)
    bug = "two nodes of one op: the second runs the first's attributes"
    ops = ("LeakyRelu", "Softmax", "Transpose", "Gemm", "ArgMax")

    def make_registry(self) -> KernelRegistry:
        return registry(dict(KERNELS), _cached_kernels(self))


KERNEL_PATH: list[type[UnseenHealthy]] = [
    UnseenHealthy,
    _provider(
        "unseen-softmax-rank2",
        """Bug: Softmax has a fast path for 2-D inputs (logits, the common
        case) that always normalizes rows: at rank 2 the axis is ignored
        (axis 0 or -2 gives the softmax of each row). Every other rank is right.""",
        "rank: a fast path for one rank ignores an attribute",
        ("Softmax",),
        _replace("Softmax", _softmax_rows_fast_path),
    ),
    _provider(
        "unseen-transpose-rank5",
        """Bug: the engine's Transpose is 4-D; a rank-5 or higher input has its
        leading dims folded into one and the last three permuted, which is
        right only when the permutation keeps the leading dims in place (the
        default reversal at rank 5 fails).""",
        "rank: right up to rank 4 only",
        ("Transpose",),
        _replace("Transpose", _transpose_as_4d),
    ),
    _provider(
        "unseen-scalar-binary",
        """Bug: elementwise Add, Sub, Mul, Div write into a buffer from a device
        allocator that wants at least one dimension: a rank-0 input with a
        rank-0 input gives shape (1,) instead of ().""",
        "rank 0: scalar with scalar gives shape (1,)",
        ("Add", "Sub", "Mul", "Div"),
        {
            op: Kernel(_into_buffer(op), KERNELS[op].since, KERNELS[op].types)
            for op in ("Add", "Sub", "Mul", "Div")
        },
    ),
    _provider(
        "unseen-gather-scalar-index",
        """Bug: Gather turns its indices into a 1-D list for the device's gather:
        rank-0 indices (``x[:, 0]`` as exporters write it) keep a dim of 1
        that must be dropped.""",
        "rank 0: a scalar index keeps its dim",
        ("Gather",),
        _replace("Gather", _gather_indices_1d),
    ),
    _provider(
        "unseen-argmax-keepdims",
        """Bug: ArgMax and ArgMin read their attributes from the node as the
        provider's own importer does, with the defaults of np.argmax: keepdims
        absent means False (ONNX's default is 1). Right whenever keepdims is
        given.""",
        "attribute absent: numpy's default instead of ONNX's",
        ("ArgMax", "ArgMin"),
        {
            **_replace("ArgMax", _arg_with_numpy_defaults(np.argmax)),
            **_replace("ArgMin", _arg_with_numpy_defaults(np.argmin)),
        },
    ),
    _provider(
        "unseen-split-uneven",
        """Bug: Split with num_outputs uses np.array_split, whose uneven parts
        differ from ONNX's (ceil(n/k) each, the last smaller): 7 into 3 gives
        3,2,2 instead of 3,3,1. 7 into 4 and 8 into 3 happen to agree.""",
        "attribute value: num_outputs not dividing the axis",
        ("Split",),
        _replace("Split", _split_like_numpy),
    ),
    _provider(
        "unseen-softmax-opset11",
        """Bug: Softmax is claimed from opset 1 but always computed with opset
        13's semantics (along one axis); before 13 the input is coerced to 2-D
        at the axis (default 1) and normalized over all the trailing dims.""",
        "opset: an older opset's semantics ignored",
        ("Softmax",),
        _replace("Softmax", _softmax_always_13),
    ),
    _provider(
        "unseen-gemm-bias-column",
        """Bug: Gemm treats a C that is not the full (M, N) as a bias vector of
        one value per column (``c.reshape(-1)``): a C of shape (M, 1) is added
        as a row (wrong numbers when M == N, an error otherwise).""",
        "optional input shape: Gemm C of shape (M, 1)",
        ("Gemm",),
        _replace("Gemm", _gemm_bias_as_vector),
    ),
    _provider(
        "unseen-layernorm-no-bias",
        """Bug: LayerNormalization takes its bias as the last input it was given;
        with the optional B absent, that is the scale W, added as a bias.""",
        "optional input absent: another input taken in its place",
        ("LayerNormalization",),
        _replace("LayerNormalization", _layer_norm_last_input_bias),
    ),
    _provider(
        "unseen-reduce-noop",
        """Bug: ReduceSum honours noop_with_empty_axes=1 only for an empty axes
        tensor; with axes absent (which the standard treats the same) it
        reduces every axis.""",
        "optional input absent with a non-default attribute",
        ("ReduceSum",),
        _replace("ReduceSum", _reduce_noop_only_when_empty),
    ),
    _provider(
        "unseen-matmul-f16-acc",
        """Bug: float16 MatMul adds each product into a float16 accumulator (as
        fast tensor-core modes do); with K in the thousands the sum loses
        several bits. Short products (every case of K < 100) pass.""",
        "precision: float16 product accumulated in float16",
        ("MatMul",),
        _replace("MatMul", _matmul_half_accumulator),
    ),
    _provider(
        "unseen-unsigned-div",
        """Bug: the device divides and compares signed 32/64-bit integers only;
        uint32 and uint64 Div and Less reinterpret their operands as signed,
        wrong for values of 2**31 (2**63) and up. Small values pass.""",
        "dtype: an unsigned type computed as the signed one",
        ("Div", "Less"),
        {
            **_replace("Div", _signed_only(_div_any, True)),
            **_replace("Less", _signed_only(np.less, False)),
        },
    ),
    _provider(
        "unseen-bf16-via-f16",
        """Bug: bfloat16 Add, Sub, Mul, Div run on the float16 units: results
        beyond 65504 become inf and those below 6e-5 lose their precision;
        values near 1 are exact.""",
        "dtype: bfloat16 computed through float16",
        ("Add", "Sub", "Mul", "Div"),
        {
            op: Kernel(_bf16_through_f16(fn), KERNELS[op].since, KERNELS[op].types)
            for op, fn in (
                ("Add", np.add),
                ("Sub", np.subtract),
                ("Mul", np.multiply),
                ("Div", _div_any),
            )
        },
    ),
    _provider(
        "unseen-argmin-negate",
        """Bug: ArgMin is ArgMax of the negation, which is right for floats and
        wrong where the negation wraps: an unsigned input holding 0 (the
        negation of every other value is larger than 0's) and the smallest
        signed integer.""",
        "dtype: an identity that holds for floats only",
        ("ArgMin",),
        _replace("ArgMin", _argmin_as_argmax_of_negation),
    ),
    _provider(
        "unseen-flatten-empty",
        """Bug: Flatten is ``x.reshape(outer, -1)``, which numpy refuses when
        outer is 0 (a zero-size leading dim): a run error where ONNX gives an
        empty (0, inner) tensor.""",
        "zero-size dims: a reshape with -1",
        ("Flatten",),
        _replace("Flatten", _flatten_reshape_minus_one),
    ),
    _provider(
        "unseen-softmax-static-plan",
        """Bug: Softmax over the last axis plans its rows from the input's
        static shape at session creation, taking a symbolic dim as 1. Fed
        with batch 1 it is right; with a larger batch every row is normalized
        together.""",
        "symbolic dims: a plan from static shapes",
        ("Softmax",),
        _replace("Softmax", _softmax_planned_from_static_shape),
    ),
    _provider(
        "unseen-transpose-plan-cache",
        """Bug: Transpose is a gather through an index plan kept for the process
        per (shape, perm) and never evicted: memory grows with every new shape
        (flat over any number of runs of one shape).""",
        "memory: a cache that grows with every new shape",
        ("Transpose",),
        _replace("Transpose", _transpose_by_planned_gather),
    ),
    _provider(
        "unseen-constant-kept",
        """Bug: ConstantOfShape makes its output once per shape and hands the
        same array out every run: a caller who writes into an output changes
        what every later run returns.""",
        "ownership: an output the provider keeps",
        ("ConstantOfShape",),
        _replace("ConstantOfShape", _constant_made_once),
    ),
    _provider(
        "unseen-matmul-packed-init",
        """Bug: MatMul packs a weight that has a value in the model
        (``const_value``) once, at session creation, and ignores the fed
        value: an initializer that is also a graph input (overridable) is fed
        in vain.""",
        "overridable initializer: the stored value wins over the feed",
        ("MatMul",),
        _replace("MatMul", _matmul_packed_at_load),
    ),
    UnseenAttrCache,
]
"""The kernel-path providers: the healthy one first."""

PROVIDERS: list[type[ExecutionProvider]] = [*KERNEL_PATH, *FUSED]
"""Every provider of the module, healthy counterparts included."""

FAULTY: list[type[ExecutionProvider]] = [p for p in PROVIDERS if getattr(p, "bug", "")]
"""The providers with a bug."""


@ep_sdk.hookimpl
def ortcore_providers() -> list[type[ExecutionProvider]]:
    """Every provider of this module."""
    return PROVIDERS
