"""Recurrent layers: RNN, GRU and LSTM.

The input projections of every time step are one matmul; the recurrence loops
over time steps. Batches shorter than the sequence (``sequence_lens``) keep
their state past their end and output zeros there; the reverse direction runs
over each batch's own valid prefix, reversed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import Compute, NodeInfo, check_terminate

from ._common import FLOATS, INDEX
from ._versions import per_schema_version

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1)


def _activation(name: str, alpha: float | None, beta: float | None) -> Activation:
    """The named activation with its alpha / beta (schema defaults when None)."""

    def a(default: float) -> float:
        return default if alpha is None else alpha

    def b(default: float) -> float:
        return default if beta is None else beta

    key = name.lower()
    if key == "tanh":
        return np.tanh
    if key == "sigmoid":
        return _sigmoid
    if key == "relu":
        return lambda x: np.maximum(x, 0)
    if key == "affine":
        return lambda x: a(1.0) * x + b(0.0)
    if key == "leakyrelu":
        return lambda x: np.where(x >= 0, x, a(0.01) * x)
    if key == "thresholdedrelu":
        return lambda x: np.where(x > a(1.0), x, 0)
    if key == "scaledtanh":
        return lambda x: a(1.0) * np.tanh(b(1.0) * x)
    if key == "hardsigmoid":
        return lambda x: np.clip(a(0.2) * x + b(0.5), 0, 1)
    if key == "elu":
        return lambda x: np.where(x >= 0, x, a(1.0) * (np.exp(np.minimum(x, 0)) - 1))
    if key == "softsign":
        return lambda x: x / (1 + np.abs(x))
    if key == "softplus":
        return lambda x: np.logaddexp(x, 0)
    raise ValueError(f"unsupported RNN activation {name!r}")


_TAKES_ALPHA = {"affine", "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid", "elu"}
_TAKES_BETA = {"affine", "scaledtanh", "hardsigmoid"}


def _activations(info: NodeInfo, defaults: Sequence[str], num_dir: int) -> list[Activation]:
    """One activation per (direction, function); alphas and betas are consumed
    in order by the functions that take them."""
    names = list(info.attrs.get("activations") or [])
    if not names:
        names = list(defaults) * num_dir
    elif len(names) == len(defaults) and num_dir == 2:
        names = names * 2
    alphas = list(info.attrs.get("activation_alpha") or [])
    betas = list(info.attrs.get("activation_beta") or [])
    out = []
    for name in names:
        key = name.lower()
        alpha = float(alphas.pop(0)) if key in _TAKES_ALPHA and alphas else None
        beta = float(betas.pop(0)) if key in _TAKES_BETA and betas else None
        out.append(_activation(name, alpha, beta))
    return out


# One direction's step: (projected input x_t @ W^T + Wb, states) -> new states,
# where states is (h,) or (h, c); h comes first.
Step = Callable[[np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _reverse_index(lens: np.ndarray, seq: int) -> np.ndarray:
    """Per (t, b): the time index that reversing each batch's valid prefix maps t to."""
    t = np.arange(seq)[:, None]
    return np.where(t < lens[None, :], lens[None, :] - 1 - t, t)


def _run_direction(
    xw: np.ndarray, states: tuple[np.ndarray, ...], step: Step, lens: np.ndarray, reverse: bool
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run the recurrence over xw (seq, batch, G*H); returns Y (seq, batch, H)
    and the final states."""
    seq, batch = xw.shape[:2]
    if reverse:
        idx = _reverse_index(lens, seq)
        xw = xw[idx, np.arange(batch)[None, :]]
    hidden = states[0].shape[-1]
    y = np.zeros((seq, batch, hidden), xw.dtype)
    for t in range(seq):
        check_terminate()
        new = step(xw[t], states)
        live = (t < lens)[:, None]
        states = tuple(np.where(live, n, s) for n, s in zip(new, states, strict=True))
        y[t] = np.where(live, new[0], 0)
    if reverse:
        back = np.empty_like(y)
        back[idx, np.arange(batch)[None, :]] = y
        y = back
    return y, states


class _Layer:
    """Shapes and options shared by the three ops."""

    def __init__(self, info: NodeInfo, gates: int, defaults: Sequence[str]) -> None:
        a = info.attrs
        self.info = info
        self.gates = gates
        self.direction = str(a.get("direction", "forward"))
        self.num_dir = 2 if self.direction == "bidirectional" else 1
        self.layout = int(a.get("layout", 0))
        clip = a.get("clip")
        self.clip = None if clip is None else float(clip)
        self.acts = _activations(info, defaults, self.num_dir)
        self.per_dir = len(defaults)

    def clipped(self, x: np.ndarray) -> np.ndarray:
        """Gate pre-activations clipped to [-clip, clip] when ``clip`` is set."""
        return x if self.clip is None else np.clip(x, -self.clip, self.clip)

    def run(
        self,
        x: np.ndarray,
        w: np.ndarray,
        r: np.ndarray,
        b: np.ndarray | None,
        lens: np.ndarray | None,
        init: Sequence[np.ndarray | None],
        make_step: Callable[[int, np.ndarray, np.ndarray, list[Activation]], Step],
        n_out: int,
    ) -> tuple[np.ndarray, ...]:
        """Run every direction; returns (Y, Y_h[, Y_c]) in the op's layout."""
        dtype = x.dtype
        work = np.float32 if dtype == np.float16 else dtype
        if self.layout:
            x = x.transpose(1, 0, 2)
            init = [None if s is None else s.transpose(1, 0, 2) for s in init]
        x = x.astype(work, copy=False)
        seq, batch = x.shape[:2]
        hidden = r.shape[-1]
        g = self.gates * hidden
        if b is None:
            b = np.zeros((self.num_dir, 2 * g), work)
        seq_lens = np.full(batch, seq, np.int64) if lens is None else lens.astype(np.int64)
        ys, finals = [], []
        for d in range(self.num_dir):
            wd, rd = w[d].astype(work), r[d].astype(work)
            bd = b[d].astype(work)
            xw = (x.reshape(seq * batch, -1) @ wd.T).reshape(seq, batch, g) + bd[:g]
            states = tuple(
                np.zeros((batch, hidden), work) if s is None else s[d].astype(work) for s in init
            )
            acts = self.acts[d * self.per_dir : (d + 1) * self.per_dir]
            step = make_step(d, rd, bd[g:], acts)
            reverse = self.direction == "reverse" or d == 1
            y, fin = _run_direction(xw, states, step, seq_lens, reverse)
            ys.append(y)
            finals.append(fin)
        y_all = np.stack(ys, axis=1)  # (seq, dir, batch, H)
        outs: list[Any] = [y_all]
        for k in range(len(finals[0])):
            outs.append(np.stack([f[k] for f in finals]))  # (dir, batch, H)
        if self.layout:
            outs = [outs[0].transpose(2, 0, 1, 3), *(o.transpose(1, 0, 2) for o in outs[1:])]
        return tuple(o.astype(dtype) for o in outs[:n_out])


_RNN_TYPES: dict[str | int, frozenset[ir.DataType]] = {"T": FLOATS, "T1": INDEX}


@per_schema_version("RNN", types=_RNN_TYPES)
def rnn(info: NodeInfo) -> Compute:
    """Simple RNN: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""
    layer = _Layer(info, 1, ("Tanh",))

    def make_step(d: int, rd: np.ndarray, rb: np.ndarray, acts: list[Activation]) -> Step:
        rt = rd.T

        def step(xw: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            return (acts[0](layer.clipped(xw + s[0] @ rt + rb)),)

        return step

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        r: np.ndarray,
        b: np.ndarray | None = None,
        lens: np.ndarray | None = None,
        h0: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        return layer.run(x, w, r, b, lens, [h0], make_step, info.num_outputs)

    return compute


@per_schema_version("GRU", types=_RNN_TYPES)
def gru(info: NodeInfo) -> Compute:
    """GRU, gates (z, r, h), with ``linear_before_reset``."""
    layer = _Layer(info, 3, ("Sigmoid", "Tanh"))
    before_reset = bool(info.attrs.get("linear_before_reset", 0))

    def make_step(d: int, rd: np.ndarray, rb: np.ndarray, acts: list[Activation]) -> Step:
        f, g = acts
        hidden = rd.shape[1]
        rzr_t = rd[: 2 * hidden].T
        rh_t = rd[2 * hidden :].T
        rb_zr, rb_h = rb[: 2 * hidden], rb[2 * hidden :]

        def step(xw: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            h = s[0]
            zr = f(layer.clipped(xw[:, : 2 * hidden] + h @ rzr_t + rb_zr))
            z, rg = zr[:, :hidden], zr[:, hidden:]
            if before_reset:
                pre = xw[:, 2 * hidden :] + rg * (h @ rh_t + rb_h)
            else:
                pre = xw[:, 2 * hidden :] + (rg * h) @ rh_t + rb_h
            ht = g(layer.clipped(pre))
            return ((1 - z) * ht + z * h,)

        return step

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        r: np.ndarray,
        b: np.ndarray | None = None,
        lens: np.ndarray | None = None,
        h0: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        return layer.run(x, w, r, b, lens, [h0], make_step, info.num_outputs)

    return compute


@per_schema_version("LSTM", types=_RNN_TYPES)
def lstm(info: NodeInfo) -> Compute:
    """LSTM, gates (i, o, f, c), with peepholes and ``input_forget``."""
    layer = _Layer(info, 4, ("Sigmoid", "Tanh", "Tanh"))
    couple = bool(info.attrs.get("input_forget", 0))

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        r: np.ndarray,
        b: np.ndarray | None = None,
        lens: np.ndarray | None = None,
        h0: np.ndarray | None = None,
        c0: np.ndarray | None = None,
        p: np.ndarray | None = None,
    ) -> tuple[np.ndarray, ...]:
        work = np.float32 if x.dtype == np.float16 else x.dtype

        def make_step(d: int, rd: np.ndarray, rb: np.ndarray, acts: list[Activation]) -> Step:
            f, g, hact = acts
            hidden = rd.shape[1]
            rt = rd.T
            pd = np.zeros(3 * hidden, work) if p is None else p[d].astype(work)
            pi, po, pf = pd[:hidden], pd[hidden : 2 * hidden], pd[2 * hidden :]

            def step(xw: np.ndarray, s: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
                h, c = s
                gates = xw + h @ rt + rb
                i = f(layer.clipped(gates[:, :hidden] + pi * c))
                if couple:
                    fg = 1 - i
                else:
                    fg = f(layer.clipped(gates[:, 2 * hidden : 3 * hidden] + pf * c))
                cand = g(layer.clipped(gates[:, 3 * hidden :]))
                c_new = fg * c + i * cand
                o = f(layer.clipped(gates[:, hidden : 2 * hidden] + po * c_new))
                return (o * hact(c_new), c_new)

            return step

        return layer.run(x, w, r, b, lens, [h0, c0], make_step, info.num_outputs)

    return compute
