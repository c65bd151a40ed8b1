"""Recurrent and signal ops: RNN, GRU, LSTM, DFT, STFT, the window functions and
MelWeightMatrix.

Kernels: :mod:`ortcore_cuda.kernels.recurrent`. :func:`register` adds this
family's kernels to the provider's registry; :func:`decline` says why a node
of this family is not covered (or ``None``).

* RNN, GRU, LSTM (float32, float16): one strided-batched GEMM projects every
  time step's input for every direction up front (``X @ W^T``); each step is
  then a GEMM of the hidden states with ``R`` (both directions at once) and
  one kernel applying the gates (two GEMMs and two kernels for a GRU without
  ``linear_before_reset``). Every activation of the spec with its alpha and
  beta (consumed in the order of the activations, as the spec says), ``clip``,
  ``input_forget``, peepholes, the three directions, ``sequence_lens`` (past
  an item's length ``Y`` is zero and the state is kept), ``initial_h``,
  ``initial_c``, ``layout`` 0 and 1, and any of ``Y``, ``Y_h``, ``Y_c``. The
  cell state is kept in float32.
* DFT (opset 17 and 20), STFT (float32, float16, float64): a direct DFT in
  double, one thread per output element; real and complex inputs,
  ``onesided``, ``inverse`` (with ``onesided``: the real signal of a
  one-sided spectrum), ``dft_length`` and the axis read on the host.
* HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix: generator
  kernels (float32, float16, float64 output); their scalar inputs read on the
  host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import recurrent as k
from .ops_common import device_of
from .tensor import CudaTensor

__all__ = ["decline", "register"]

_D = ir.DataType
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.float64): "f64"}
RNN_FLOATS = (_D.FLOAT, _D.FLOAT16)
SIGNAL_FLOATS = (_D.FLOAT, _D.FLOAT16, _D.DOUBLE)
_INTS = (_D.INT32, _D.INT64)
_OUT_TYPES = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64)}
_THREADS = 128

# gates, activations per direction, default activations
_RECURRENT: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "RNN": (1, 1, ("Tanh",)),
    "GRU": (3, 2, ("Sigmoid", "Tanh")),
    "LSTM": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
}
# activation -> (number of alphas, number of betas, default alpha, default beta);
# None: no default (the value must be given)
_ACT_PARAMS: dict[str, tuple[int, int, float | None, float | None]] = {
    "sigmoid": (0, 0, 0.0, 0.0),
    "tanh": (0, 0, 0.0, 0.0),
    "relu": (0, 0, 0.0, 0.0),
    "softsign": (0, 0, 0.0, 0.0),
    "softplus": (0, 0, 0.0, 0.0),
    "affine": (1, 1, None, None),
    "leakyrelu": (1, 0, 0.01, 0.0),
    "thresholdedrelu": (1, 0, 1.0, 0.0),
    "scaledtanh": (1, 1, None, None),
    "hardsigmoid": (1, 1, 0.2, 0.5),
    "elu": (1, 0, 1.0, 0.0),
}
_WINDOWS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25.0 / 46.0, 21.0 / 46.0, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


def _prod(dims: Sequence[int]) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _host_int(value: Any) -> int:
    return int(np.asarray(value).reshape(-1)[0])


def _host_float(value: Any) -> float:
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def _activations(
    op: str,
    ndir: int,
    names: Sequence[str] | None,
    alphas: Sequence[float] | None,
    betas: Sequence[float] | None,
) -> np.ndarray | str:
    """The :data:`~ortcore_cuda.kernels.recurrent.RNN_ACTS` record of the
    activations, or why they are not covered."""
    _, per_dir, defaults = _RECURRENT[op]
    given = [_text(n) for n in names] if names else []
    if not given:
        given = list(defaults) * ndir
    elif len(given) == per_dir and ndir == 2:
        given = given * 2
    if len(given) != per_dir * ndir:
        return f"CUDA: {op} with {len(given)} activations ({per_dir * ndir} expected)"
    alist, blist = list(alphas or []), list(betas or [])
    rec = k.RNN_ACTS.pack()
    for i, name in enumerate(given):
        key = name.lower()
        if key not in _ACT_PARAMS:
            return f"CUDA: {op} with activation {name!r}"
        na, nb, da, db = _ACT_PARAMS[key]
        a = alist.pop(0) if na and alist else da
        b = blist.pop(0) if nb and blist else db
        if a is None or b is None:
            return f"CUDA: {op} with activation {name} without its alpha and beta"
        slot = (i // per_dir) * 3 + i % per_dir
        rec["kind"][slot] = k.ACTIVATIONS[key]
        rec["alpha"][slot] = a
        rec["beta"][slot] = b
    if alist or blist:
        return (
            f"CUDA: {op} with more activation_alpha/activation_beta values "
            "than its activations take"
        )
    return rec


def _recurrent(op: str) -> Any:
    gates, _, _ = _RECURRENT[op]

    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        direction = _text(info.attr("direction", "forward"))
        ndir = 2 if direction == "bidirectional" else 1
        rev0 = int(direction == "reverse")
        layout = int(info.attr("layout", 0))
        clip_attr = info.attr("clip")
        clip = -1.0 if clip_attr is None else float(clip_attr)
        forget = int(info.attr("input_forget", 0)) if op == "LSTM" else 0
        lbr = int(info.attr("linear_before_reset", 0)) if op == "GRU" else 1
        acts = _activations(
            op,
            ndir,
            _attr(info.node, "activations"),  # not the schema's default, made for two directions
            _attr(info.node, "activation_alpha"),
            _attr(info.node, "activation_beta"),
        )
        if isinstance(acts, str):
            raise ValueError(f"{info.describe()}: {acts}")
        node = info.node
        wanted = [i < len(node.outputs) and bool(node.outputs[i].name) for i in range(3)]
        nout = info.num_outputs

        def compute(
            x: CudaTensor,
            w: CudaTensor,
            r: CudaTensor,
            b: CudaTensor | None = None,
            lens: CudaTensor | None = None,
            h0: CudaTensor | None = None,
            c0: CudaTensor | None = None,
            p: CudaTensor | None = None,
        ) -> tuple[CudaTensor | None, ...]:
            if x.ndim != 3 or w.ndim != 3 or r.ndim != 3:
                raise ValueError(f"{info.describe()}: X, W and R must be of rank 3")
            if layout:
                batch, seq, isize = x.shape
            else:
                seq, batch, isize = x.shape
            hidden = r.shape[-1]
            gh = gates * hidden
            if w.shape != (ndir, gh, isize) or r.shape != (ndir, gh, hidden):
                raise ValueError(
                    f"{info.describe()}: W {w.shape} and R {r.shape} for {ndir} direction(s), "
                    f"hidden size {hidden}, input size {isize}"
                )
            if b is not None and b.shape != (ndir, 2 * gh):
                raise ValueError(f"{info.describe()}: B of shape {b.shape}")
            if lens is not None and lens.dtype != np.int32:
                raise TypeError(f"{info.describe()}: sequence_lens of {lens.dtype}")
            dtype, sfx = x.dtype, _SUFFIX[x.dtype]
            state = (batch, ndir, hidden) if layout else (ndir, batch, hidden)
            y_shape = (batch, seq, ndir, hidden) if layout else (seq, ndir, batch, hidden)
            y = cuda.empty(y_shape, dtype) if wanted[0] else None
            yh = cuda.empty(state, dtype) if wanted[1] else None
            yc = cuda.empty(state, dtype) if wanted[2] and op == "LSTM" else None
            h = cuda.empty((ndir, batch, hidden), dtype)
            c = cuda.empty((ndir, batch, hidden), np.float32) if op == "LSTM" else None
            n = ndir * batch * hidden
            if n == 0:
                return (y, yh, yc)[:nout]

            def ptr(t: CudaTensor | None) -> int:
                return t.ptr if t is not None else 0

            cuda.launch_over(
                k.rnn_init_kernel(sfx),
                n,
                ptr(h0),
                ptr(c0),
                h.ptr,
                ptr(c),
                ptr(yh),
                ptr(yc),
                n,
                batch,
                hidden,
                ndir,
                layout,
                threads=_THREADS,
            )
            if seq == 0:
                return (y, yh, yc)[:nout]
            rows = seq * batch
            gemm, stream = cuda.backend.gemm, cuda.stream
            xw = cuda.empty((ndir, rows, gh), dtype)
            if isize:
                gemm(
                    dtype, False, True, rows, gh, isize, 1.0, x.ptr, 0, w.ptr, gh * isize,
                    0.0, xw.ptr, rows * gh, ndir, stream,
                )  # fmt: skip
            else:
                cuda.backend.upload(xw.ptr, np.zeros(xw.size, dtype), stream)
                cuda.backend.synchronize(stream)
            split = op == "GRU" and not lbr
            width = 2 * hidden if split else gh
            hr = cuda.empty((ndir, batch, width), dtype)
            aux = cuda.empty((ndir, batch, hidden), dtype) if split else None
            hrh = cuda.empty((ndir, batch, hidden), dtype) if split else None
            cells = (
                ["gru_reset", "gru"]
                if split
                else [{"RNN": "rnn", "LSTM": "lstm"}.get(op, "gru_lbr")]
            )
            item = dtype.itemsize
            for step in range(seq):
                gemm(
                    dtype, False, True, batch, width, hidden, 1.0, h.ptr, batch * hidden,
                    r.ptr, gh * hidden, 0.0, hr.ptr, batch * width, ndir, stream,
                )  # fmt: skip
                for cell in cells:
                    if cell == "gru":
                        assert aux is not None and hrh is not None
                        gemm(
                            dtype, False, True, batch, hidden, hidden, 1.0, aux.ptr,
                            batch * hidden, r.ptr + 2 * hidden * hidden * item, gh * hidden,
                            0.0, hrh.ptr, batch * hidden, ndir, stream,
                        )  # fmt: skip
                    cuda.launch_over(
                        k.rnn_step_kernel(cell, sfx),
                        n,
                        xw.ptr,
                        hr.ptr,
                        ptr(b),
                        h.ptr,
                        ptr(c),
                        ptr(p),
                        ptr(lens),
                        ptr(y),
                        ptr(yh),
                        ptr(yc),
                        ptr(aux if cell == "gru_reset" else hrh),
                        n,
                        batch,
                        hidden,
                        seq,
                        step,
                        rev0,
                        layout,
                        ndir,
                        forget,
                        clip,
                        acts,
                        threads=_THREADS,
                    )
            return (y, yh, yc)[:nout]

        return compute

    return build


# -- signal ops ----------------------------------------------------------------------------


def _dft(axis_input: bool) -> Any:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        inverse = int(info.attr("inverse", 0))
        onesided = int(info.attr("onesided", 0))
        axis_attr = int(info.attr("axis", 1))

        def compute(
            x: CudaTensor, dft_length: Any = None, axis_value: Any = None
        ) -> tuple[CudaTensor]:
            axis = axis_attr
            if axis_input:
                axis = -2 if axis_value is None else _host_int(axis_value)
            rank = x.ndim
            a = axis + rank if axis < 0 else axis
            if rank < 2 or not 0 <= a < rank - 1 or x.shape[-1] not in (1, 2):
                raise ValueError(f"{info.describe()}: axis {axis} of an input {x.shape}")
            n_in = x.shape[a]
            irfft = bool(inverse and onesided)
            if dft_length is not None:
                length = _host_int(dft_length)
            else:
                length = 2 * (n_in - 1) if irfft else n_in
            if length < 1:
                raise ValueError(f"{info.describe()}: dft_length {length}")
            if irfft:
                n_out, c_out = length, 1
            else:
                n_out, c_out = (length // 2 + 1 if onesided else length), 2
            shape = (*x.shape[:a], n_out, *x.shape[a + 1 : -1], c_out)
            y = cuda.empty(shape, x.dtype)
            if y.size:
                inner = _prod(x.shape[a + 1 : -1])
                n = y.size // c_out
                cuda.launch_over(
                    k.dft_kernel(_SUFFIX[x.dtype]),
                    n,
                    x.ptr,
                    y.ptr,
                    n,
                    n_in,
                    inner,
                    x.shape[-1],
                    length,
                    n_out,
                    inverse,
                    int(irfft),
                    threads=_THREADS,
                )
            return (y,)

        return compute

    return build


def _stft(info: NodeInfo) -> Any:
    cuda = device_of(info)
    onesided = int(info.attr("onesided", 1))

    def compute(
        x: CudaTensor,
        frame_step: Any,
        window: CudaTensor | None = None,
        frame_length: Any = None,
    ) -> tuple[CudaTensor]:
        if x.ndim != 3 or x.shape[-1] not in (1, 2):
            raise ValueError(f"{info.describe()}: signal of shape {x.shape}")
        step = _host_int(frame_step)
        batch, siglen, c_in = x.shape
        if frame_length is not None:
            flen = _host_int(frame_length)
            if window is not None and window.shape != (flen,):
                raise ValueError(
                    f"{info.describe()}: window {window.shape} for frame_length {flen}"
                )
        elif window is not None:
            if window.ndim != 1:
                raise ValueError(f"{info.describe()}: window of shape {window.shape}")
            flen = window.shape[0]
        else:
            flen = siglen
        if step < 1 or flen < 1 or flen > siglen:
            raise ValueError(f"{info.describe()}: frame_step {step}, frame length {flen}")
        if window is not None and window.dtype != x.dtype:
            raise TypeError(f"{info.describe()}: window of {window.dtype} for {x.dtype}")
        frames = 1 + (siglen - flen) // step
        bins = flen // 2 + 1 if onesided else flen
        y = cuda.empty((batch, frames, bins, 2), x.dtype)
        n = batch * frames * bins
        if n:
            cuda.launch_over(
                k.stft_kernel(_SUFFIX[x.dtype]),
                n,
                x.ptr,
                window.ptr if window is not None else 0,
                y.ptr,
                n,
                siglen,
                c_in,
                frames,
                bins,
                flen,
                step,
                threads=_THREADS,
            )
        return (y,)

    return compute


def _window(op: str) -> Any:
    a0, a1, a2 = _WINDOWS[op]

    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        periodic = int(info.attr("periodic", 1))
        dtype = _OUT_TYPES[int(info.attr("output_datatype", 1))]

        def compute(size: Any) -> tuple[CudaTensor]:
            n = _host_int(size)
            if n < 0:
                raise ValueError(f"{info.describe()}: size {n}")
            y = cuda.empty((n,), dtype)
            if n:
                denom = float(n if periodic else n - 1)
                kernel = k.window_kernel(_SUFFIX[dtype])
                cuda.launch_over(kernel, n, y.ptr, n, denom, a0, a1, a2, threads=_THREADS)
            return (y,)

        return compute

    return build


def _mel(info: NodeInfo) -> Any:
    cuda = device_of(info)
    dtype = _OUT_TYPES[int(info.attr("output_datatype", 1))]

    def compute(
        num_mel_bins: Any, dft_length: Any, sample_rate: Any, lower: Any, upper: Any
    ) -> tuple[CudaTensor]:
        nmel, length, rate = (_host_int(v) for v in (num_mel_bins, dft_length, sample_rate))
        if nmel < 0 or length < 1 or rate < 1:
            raise ValueError(
                f"{info.describe()}: {nmel} mel bins, dft_length {length}, sample rate {rate}"
            )
        y = cuda.empty((length // 2 + 1, nmel), dtype)
        if y.size:
            cuda.launch_over(
                k.mel_kernel(_SUFFIX[dtype]),
                y.size,
                y.ptr,
                y.size,
                nmel,
                length,
                rate,
                _host_float(lower),
                _host_float(upper),
                threads=_THREADS,
            )
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    rnn: dict[str | int, tuple[ir.DataType, ...]] = {"T": RNN_FLOATS, "T1": (_D.INT32,)}
    for op in _RECURRENT:
        reg.kernel(op, since=7, types=rnn)(_recurrent(op))
    signal: dict[str | int, tuple[ir.DataType, ...]] = {"T1": SIGNAL_FLOATS, "T2": _INTS}
    reg.kernel("DFT", since=17, until=19, types=signal, input_memory={1: "host"})(_dft(False))
    reg.kernel("DFT", since=20, types=signal, input_memory={1: "host", 2: "host"})(_dft(True))
    stft: dict[str | int, tuple[ir.DataType, ...]] = {"T1": SIGNAL_FLOATS, "T2": _INTS}
    reg.kernel("STFT", since=17, types=stft, input_memory={1: "host", 3: "host"})(_stft)
    for op in _WINDOWS:
        reg.kernel(op, since=17, types={"T1": _INTS}, input_memory={0: "host"})(_window(op))
    host5 = {i: "host" for i in range(5)}
    reg.kernel("MelWeightMatrix", since=17, input_memory=host5)(_mel)


def _attr(node: ir.Node, name: str) -> Any:
    a = node.attributes.get(name)
    return None if a is None else a.value


def _given(node: ir.Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why the kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return None
    if op in _RECURRENT:
        direction = _text(_attr(node, "direction") or "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            return f"CUDA: {op} with direction {direction!r}"
        layout = _attr(node, "layout") or 0
        if layout not in (0, 1):
            return f"CUDA: {op} with layout {layout}"
        acts = _activations(
            op,
            2 if direction == "bidirectional" else 1,
            _attr(node, "activations"),
            _attr(node, "activation_alpha"),
            _attr(node, "activation_beta"),
        )
        if isinstance(acts, str):
            return acts
        return None
    if op in _WINDOWS or op == "MelWeightMatrix":
        out = _attr(node, "output_datatype")
        if out is not None and int(out) not in _OUT_TYPES:
            return f"CUDA: {op} with output_datatype {out} (float32, float16, float64 only)"
        return None
    if op == "STFT":
        v = node.inputs[0] if node.inputs else None
        if v is not None and v.shape is not None and len(v.shape) != 3:
            return f"CUDA: STFT of a signal of rank {len(v.shape)}"
        return None
    return None
