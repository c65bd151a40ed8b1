"""Losses, scans and selections: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss,
CumSum, CumProd, Hardmax, TopK, LpNormalization, ReverseSequence, Compress.

Kernels: :mod:`ortcore_cuda.kernels.losses`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

* The losses (float32, float16; int64 targets): SoftmaxCrossEntropyLoss is
  a LogSoftmax over axis 1 (its optional second output), then the negative
  log likelihood; ``reduction`` ``none`` writes each position's loss, ``sum``
  and ``mean`` fold them on the device in one block (``mean`` divides by the
  sum of the weights of the positions not ignored, as ONNX and PyTorch do).
* CumSum, CumProd (float32, float16, float64, int32, int64; the axis read on
  the host), Hardmax and LpNormalization (float32, float16, float64), TopK
  (those and uint64; ``k`` read on the host; sorted, ties to the lower
  index), along any axis.
* ReverseSequence and Compress move elements of any type; Compress reads its
  condition on the host (the output's size depends on it) and gathers the
  chosen slices on the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import elementwise as ew
from .kernels import losses as k
from .ops_common import MOVABLE, device_of
from .tensor import CudaTensor

__all__ = ["decline", "einsum_plan", "register"]

_D = ir.DataType
_SUFFIX = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.float64): "f64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint64): "u64",
}
_IR = {"f32": _D.FLOAT, "f16": _D.FLOAT16, "f64": _D.DOUBLE}
_IR.update({"i32": _D.INT32, "i64": _D.INT64, "u64": _D.UINT64})
LOSS_TYPES = tuple(_IR[t] for t in k.LOSS_TYPES)
VALUE_TYPES = tuple(_IR[t] for t in k.VALUE_TYPES)
SCAN_TYPES = tuple(_IR[t] for t in k.SCAN_TYPES)
TOPK_TYPES = tuple(_IR[t] for t in k.TOPK_TYPES)
_INDEX = (_D.INT32, _D.INT64)
_Types = dict[str | int, tuple[ir.DataType, ...]]
_LINE_THREADS = 128  # LogSoftmax lines at least this long get a block each


def _prod(dims: Sequence[int]) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _axis(axis: int, rank: int, what: str) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        raise ValueError(f"{what}: axis {axis} is outside a tensor of rank {rank}")
    return a


def _host_int(value: Any) -> int:
    return int(np.asarray(value).reshape(-1)[0])


# -- the losses ---------------------------------------------------------------------------


def _nll(
    info: NodeInfo,
    x: CudaTensor,
    target: CudaTensor,
    weight: CudaTensor | None,
    reduction: str,
    ignore: int | None,
) -> CudaTensor:
    """The negative log likelihood of ``x`` (``[N, C, d...]``, log
    probabilities) at ``target`` (``[N, d...]``)."""
    cuda = device_of(info)
    if x.ndim < 2:
        raise ValueError(f"{info.describe()}: input of rank {x.ndim} (needs N and C)")
    if target.shape != (x.shape[0], *x.shape[2:]):
        raise ValueError(f"{info.describe()}: target {target.shape} for input {x.shape}")
    if weight is not None and weight.shape != (x.shape[1],):
        raise ValueError(f"{info.describe()}: weight {weight.shape} for {x.shape[1]} classes")
    sfx = _SUFFIX[x.dtype]
    c, d = x.shape[1], _prod(x.shape[2:])
    n = x.shape[0] * d
    w_ptr = weight.ptr if weight is not None else 0
    ii, has_ii = (ignore, 1) if ignore is not None else (0, 0)
    kernel = k.nll_kernel(sfx)
    if reduction == "none":
        y = cuda.empty(target.shape, x.dtype)
        if n:
            cuda.launch_over(
                kernel, n, x.ptr, target.ptr, w_ptr, y.ptr, 0, 0, n, c, d, ii, has_ii, 0
            )
        return y
    y = cuda.empty((), x.dtype)
    loss = cuda.empty((max(n, 1),), np.float32)
    wsum = cuda.empty((max(n, 1),), np.float32)
    if n:
        cuda.launch_over(
            kernel, n, x.ptr, target.ptr, w_ptr, 0, loss.ptr, wsum.ptr, n, c, d, ii, has_ii, 1
        )
    cuda.launch(
        k.loss_reduce_kernel(sfx),
        1,
        k.REDUCE_THREADS,
        loss.ptr,
        wsum.ptr,
        y.ptr,
        n,
        int(reduction == "mean"),
    )
    return y


def _loss_attrs(info: NodeInfo) -> tuple[str, int | None]:
    reduction = info.attr("reduction", "mean")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    ignore = info.attr("ignore_index")
    return str(reduction), (int(ignore) if ignore is not None else None)


def _nll_op(info: NodeInfo) -> Any:
    reduction, ignore = _loss_attrs(info)

    def compute(
        x: CudaTensor, target: CudaTensor, weight: CudaTensor | None = None
    ) -> tuple[CudaTensor]:
        return (_nll(info, x, target, weight, reduction, ignore),)

    return compute


def _sce(info: NodeInfo) -> Any:
    cuda = device_of(info)
    reduction, ignore = _loss_attrs(info)
    log_prob = info.num_outputs > 1

    def compute(
        x: CudaTensor, target: CudaTensor, weight: CudaTensor | None = None
    ) -> tuple[CudaTensor, ...]:
        if x.ndim < 2:
            raise ValueError(f"{info.describe()}: input of rank {x.ndim} (needs N and C)")
        sfx = _SUFFIX[x.dtype]
        c, d = x.shape[1], _prod(x.shape[2:])
        lines = x.shape[0] * d
        logp = cuda.empty(x.shape, x.dtype)
        if x.size and c >= _LINE_THREADS:
            threads = min(k.REDUCE_THREADS, 1 << (c - 1).bit_length())
            grid = max(1, min(lines, cuda.max_grid * 32))
            kernel = k.log_softmax_lines_kernel(sfx)
            cuda.launch(kernel, grid, threads, x.ptr, logp.ptr, lines, c, d)
        elif x.size:
            kernel = k.log_softmax_axis_kernel(sfx)
            cuda.launch_over(kernel, lines, x.ptr, logp.ptr, lines, c, d)
        loss = _nll(info, logp, target, weight, reduction, ignore)
        return (loss, logp) if log_prob else (loss,)

    return compute


# -- scans and selections -------------------------------------------------------------------


def _lines(shape: Sequence[int], axis: int) -> tuple[int, int, int]:
    """``[outer, L, inner]`` of ``shape`` around ``axis``."""
    return _prod(shape[:axis]), shape[axis], _prod(shape[axis + 1 :])


def _scan(op: str) -> Any:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        exclusive = int(info.attr("exclusive", 0))
        reverse = int(info.attr("reverse", 0))

        def compute(x: CudaTensor, axis: Any) -> tuple[CudaTensor]:
            a = _axis(_host_int(axis), x.ndim, info.describe())
            outer, length, inner = _lines(x.shape, a)
            y = cuda.empty(x.shape, x.dtype)
            if y.size:
                cuda.launch_over(
                    k.scan_kernel(op, _SUFFIX[x.dtype]),
                    outer * inner,
                    x.ptr,
                    y.ptr,
                    outer * inner,
                    length,
                    inner,
                    exclusive,
                    reverse,
                )
            return (y,)

        return compute

    return build


def _hardmax(info: NodeInfo) -> Any:
    cuda = device_of(info)
    flatten = info.opset < 13
    axis_attr = int(info.attr("axis", 1 if flatten else -1))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        a = _axis(axis_attr, x.ndim, info.describe())
        if flatten:  # opsets 1 to 12: the input as a matrix [prod(dims[:a]), prod(dims[a:])]
            outer, length, inner = _prod(x.shape[:a]), _prod(x.shape[a:]), 1
        else:
            outer, length, inner = _lines(x.shape, a)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(
                k.hardmax_kernel(_SUFFIX[x.dtype]),
                outer * inner,
                x.ptr,
                y.ptr,
                outer * inner,
                length,
                inner,
            )
        return (y,)

    return compute


def _lpnorm(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", -1))
    p = int(info.attr("p", 2))

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        if p not in (1, 2):
            raise NotImplementedError(f"{info.describe()}: p={p} (1 and 2 only)")
        a = _axis(axis_attr, x.ndim, info.describe())
        outer, length, inner = _lines(x.shape, a)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(
                k.lpnorm_kernel(_SUFFIX[x.dtype]),
                outer * inner,
                x.ptr,
                y.ptr,
                outer * inner,
                length,
                inner,
                p,
            )
        return (y,)

    return compute


def _topk(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = int(info.attr("axis", -1))
    largest = int(info.attr("largest", 1))
    k_attr = info.attr("k")

    def compute(x: CudaTensor, k_in: Any = None) -> tuple[CudaTensor, CudaTensor]:
        count = _host_int(k_in) if k_in is not None else int(k_attr)
        a = _axis(axis_attr, x.ndim, info.describe())
        _, length, inner = _lines(x.shape, a)
        if not 0 <= count <= length:
            raise ValueError(f"{info.describe()}: k={count} for an axis of {length}")
        shape = list(x.shape)
        shape[a] = count
        values = cuda.empty(shape, x.dtype)
        indices = cuda.empty(shape, np.int64)
        if values.size:
            cuda.launch_over(
                k.topk_kernel(_SUFFIX[x.dtype]),
                x.size,
                x.ptr,
                values.ptr,
                indices.ptr,
                x.size,
                length,
                inner,
                count,
                largest,
            )
        return (values, indices)

    return compute


def _reverse_sequence(info: NodeInfo) -> Any:
    cuda = device_of(info)
    batch_axis = int(info.attr("batch_axis", 1))

    def compute(x: CudaTensor, lens: CudaTensor) -> tuple[CudaTensor]:
        if x.ndim < 2:
            raise ValueError(f"{info.describe()}: input of rank {x.ndim}")
        if lens.shape != (x.shape[batch_axis],):
            raise ValueError(f"{info.describe()}: sequence_lens {lens.shape} for {x.shape}")
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(
                k.reverse_sequence_kernel(x.dtype.itemsize),
                y.size,
                x.ptr,
                y.ptr,
                lens.ptr,
                y.size,
                x.shape[0],
                x.shape[1],
                _prod(x.shape[2:]),
                int(batch_axis == 0),
            )
        return (y,)

    return compute


def _compress(info: NodeInfo) -> Any:
    cuda = device_of(info)
    axis_attr = info.attr("axis")

    def compute(x: CudaTensor, condition: Any) -> tuple[CudaTensor]:
        keep = np.asarray(condition).reshape(-1).astype(bool)
        if axis_attr is None:  # the input flattened
            length, inner = x.size, 1
        else:
            a = _axis(int(axis_attr), x.ndim, info.describe())
            _, length, inner = _lines(x.shape, a)
        if keep[length:].any():
            raise IndexError(f"{info.describe()}: condition selects past the axis ({length})")
        idx = np.flatnonzero(keep[:length]).astype(np.int64)
        if axis_attr is None:
            shape: list[int] = [idx.size]
        else:
            shape = list(x.shape)
            shape[a] = idx.size
        y = cuda.empty(shape, x.dtype)
        if y.size:
            device_idx = cuda.from_host(idx)
            cuda.launch_over(
                ew.gather_kernel(x.dtype.itemsize),
                y.size,
                x.ptr,
                device_idx.ptr,
                y.ptr,
                y.size,
                idx.size,
                length,
                inner,
            )
        return (y,)

    return compute


def einsum_plan(
    equation: str, shapes: Sequence[Sequence[int]]
) -> tuple[list[int], list[int], list[list[int]]]:
    """The output shape, the sizes of the output letters then the summed
    ones, and each operand's element stride per letter (the sum of its
    strides where a letter repeats: a diagonal; 0 where it is absent or a
    broadcast 1 of an ellipsis), for ``equation`` of operands of ``shapes``.

    Raises:
        ValueError: the equation does not fit the shapes.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"Einsum {equation!r} of {len(shapes)} operands")
    ell_rank = max(
        (len(sh) - len(t.replace("...", "")) for t, sh in zip(terms, shapes) if "..." in t),
        default=0,
    )
    ell = [chr(0x100 + i) for i in range(ell_rank)]  # the ellipsis' letters
    spelled: list[list[str]] = []
    for t, sh in zip(terms, shapes):
        head, dots, tail = t.partition("...")
        mid = ell[ell_rank - (len(sh) - len(head) - len(tail)) :] if dots else []
        letters = [*head, *mid, *tail]
        if len(letters) != len(sh) or (dots and len(sh) < len(head) + len(tail)):
            raise ValueError(f"Einsum term {t!r} for a shape {tuple(sh)}")
        spelled.append(letters)
    size: dict[str, int] = {}
    for letters, sh in zip(spelled, shapes):
        for c, d in zip(letters, sh):
            if c in ell and size.get(c, 1) == 1:  # the ellipsis broadcasts
                size[c] = d
            elif size.setdefault(c, d) != d and not (c in ell and d == 1):
                raise ValueError(f"Einsum: letter {c!r} of sizes {size[c]} and {d}")
    seen = [c for letters in spelled for c in letters]
    if arrow:
        head, dots, tail = rhs.partition("...")
        out = [*head, *(ell if dots else []), *tail]
    else:
        out = ell + sorted(c for c in set(seen) if seen.count(c) == 1 and c not in ell)
    if any(c not in size for c in out) or len(set(out)) != len(out):
        raise ValueError(f"Einsum {equation!r}: output letters not in the inputs")
    summed = list(dict.fromkeys(c for c in seen if c not in out))
    order = out + summed
    strides: list[list[int]] = []
    for letters, sh in zip(spelled, shapes):
        st = [0] * len(order)
        for c, d, e in zip(letters, sh, ew.contiguous(sh)):
            if not (d == 1 and size[c] != 1):
                st[order.index(c)] += e
        strides.append(st)
    return [size[c] for c in out], [size[c] for c in order], strides


def _einsum(info: NodeInfo) -> Any:
    cuda = device_of(info)
    equation = str(info.attr("equation"))

    def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
        out, sizes, strides = einsum_plan(equation, [x.shape for x in xs])
        if len(sizes) > k.EINSUM_LETTERS:
            raise NotImplementedError(f"{info.describe()}: over {k.EINSUM_LETTERS} letters")
        y = cuda.empty(out, xs[0].dtype)
        if y.size:
            pad = [0] * (k.EINSUM_LETTERS - len(sizes))
            args = k.EINSUM.pack(
                dims=sizes + [1] * len(pad),
                sa=strides[0] + pad,
                sb=(strides[1] if len(xs) > 1 else [0] * len(sizes)) + pad,
            )
            cuda.launch_over(
                k.einsum_kernel(_SUFFIX[y.dtype]),
                y.size,
                xs[0].ptr,
                xs[-1].ptr,
                y.ptr,
                y.size,
                args,
                len(out),
                len(sizes) - len(out),
                _prod(sizes[len(out) :]),
                int(len(xs) > 1),
            )
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    losses: _Types = {"T": LOSS_TYPES, "Tind": (_D.INT64,)}
    reg.kernel("SoftmaxCrossEntropyLoss", since=12, types=losses)(_sce)
    reg.kernel("NegativeLogLikelihoodLoss", since=12, types=losses)(_nll_op)
    host_axis = {1: "host"}
    scans: _Types = {"T": SCAN_TYPES, "T2": _INDEX}
    reg.kernel("CumSum", since=11, types=scans, input_memory=host_axis)(_scan("sum"))
    reg.kernel("CumProd", since=26, types=scans, input_memory=host_axis)(_scan("prod"))
    values: _Types = {"T": VALUE_TYPES}
    topk: _Types = {"T": TOPK_TYPES}
    moved: _Types = {"T": MOVABLE}
    reg.kernel("Hardmax", since=1, types=values)(_hardmax)
    reg.kernel("LpNormalization", since=1, types=values)(_lpnorm)
    reg.kernel("TopK", since=1, until=9, types=topk)(_topk)
    reg.kernel("TopK", since=10, types=topk, input_memory=host_axis)(_topk)
    reg.kernel("ReverseSequence", since=10, types=moved)(_reverse_sequence)
    reg.kernel("Compress", since=9, types=moved, input_memory=host_axis)(_compress)
    reg.kernel("Einsum", since=12, types=values)(_einsum)


_OPS = {
    "SoftmaxCrossEntropyLoss",
    "NegativeLogLikelihoodLoss",
    "CumSum",
    "CumProd",
    "Hardmax",
    "LpNormalization",
    "TopK",
    "ReverseSequence",
    "Compress",
    "Einsum",
}


def _rank(node: ir.Node, index: int = 0) -> int | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    return len(v.shape) if v is not None and v.shape is not None else None


def _attr_int(node: ir.Node, name: str, default: int) -> int:
    a = node.attributes.get(name)
    return a.as_int() if a is not None else default


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if op not in _OPS:
        return None
    rank = _rank(node)
    if op in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"):
        if rank is not None and rank < 2:
            return f"CUDA: {op} of an input of rank {rank} (needs N and C)"
        reduction = node.attributes.get("reduction")
        if reduction is not None and reduction.as_string() not in ("none", "sum", "mean"):
            return f"CUDA: {op} with reduction {reduction.as_string()!r}"
    elif op == "ReverseSequence":
        axes = {_attr_int(node, "batch_axis", 1), _attr_int(node, "time_axis", 0)}
        if axes != {0, 1}:
            return "CUDA: ReverseSequence with axes other than 0 and 1"
        if rank is not None and rank < 2:
            return f"CUDA: ReverseSequence of rank {rank}"
    elif op == "LpNormalization":
        p = _attr_int(node, "p", 2)
        if p not in (1, 2):
            return f"CUDA: LpNormalization with p={p} (1 and 2 only)"
    elif op == "Compress":
        cond = _rank(node, 1)
        if cond is not None and cond != 1:
            return f"CUDA: Compress with a condition of rank {cond}"
    elif op == "Einsum":
        eq = node.attributes.get("equation")
        terms = eq.as_string().split("->")[0].split(",") if eq is not None else []
        if len(terms) not in (1, 2) or len(node.inputs) != len(terms):
            return f"CUDA: Einsum of {len(node.inputs)} operands (1 or 2 only)"
        if any(_rank(node, i) in (0, None) for i in range(len(node.inputs))):
            # cuda.from_host uploads a 0-d array as shape (1,)
            return "CUDA: Einsum of a scalar or of an input of unknown rank"
        return None
    if rank == 0 and op != "Compress":
        return f"CUDA: {op} of a scalar"
    return None
