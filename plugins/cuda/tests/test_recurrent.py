"""The recurrent and signal ops (:mod:`ortcore_cuda.kernels.recurrent`,
:mod:`ortcore_cuda.ops_recurrent`): the kernels' own sources under the CPU
emulation against numpy, then the ops end to end on the emulated provider
against numpy references written from the ONNX spec."""

from __future__ import annotations

from typing import Any

import numpy as np
import ortcore
import pytest
from onnx import TensorProto, helper

from ortcore_cuda.emulator import Emulator, compiler
from ortcore_cuda.kernels import recurrent

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64}
TOL: dict[str, dict[str, Any]] = {
    "f32": dict(rtol=1e-5, atol=1e-5),
    "f16": dict(rtol=3e-3, atol=3e-3),
    "f64": dict(rtol=1e-10, atol=1e-10),
}


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Emulator:
    if compiler() is None:
        pytest.skip("no C++ compiler for the emulation")
    return Emulator(recurrent.all_kernels(), tmp_path_factory.mktemp("emu_recurrent"))


# -- numpy references ----------------------------------------------------------------------


def _act(name: str, x: np.ndarray, a: float = 0.0, b: float = 0.0) -> np.ndarray:
    n = name.lower()
    if n == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if n == "tanh":
        return np.tanh(x)
    if n == "relu":
        return np.maximum(x, 0)
    if n == "leakyrelu":
        return np.where(x < 0, a * x, x)
    if n == "hardsigmoid":
        return np.clip(a * x + b, 0, 1)
    if n == "affine":
        return a * x + b
    if n == "softsign":
        return x / (1 + np.abs(x))
    raise AssertionError(name)


def _recurrent_ref(
    op: str,
    x: np.ndarray,
    w: np.ndarray,
    r: np.ndarray,
    b: np.ndarray | None = None,
    lens: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    c0: np.ndarray | None = None,
    p: np.ndarray | None = None,
    *,
    direction: str = "forward",
    layout: int = 0,
    acts: list[tuple[str, float, float]] | None = None,
    clip: float | None = None,
    lbr: int = 0,
    forget: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y, Y_h, Y_c of the ONNX spec, in float64 (Y zero past an item's length)."""
    x, w, r = (v.astype(np.float64) for v in (x, w, r))
    if layout:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    seq, batch, _ = x.shape
    ndir, hidden = w.shape[0], r.shape[-1]
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    if acts is None:
        acts = [(n, 0.0, 0.0) for n in {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"]}.get(
            op, ["Sigmoid", "Tanh", "Tanh"])] * ndir  # fmt: skip
    bb = np.zeros((ndir, 2 * g * hidden)) if b is None else b.astype(np.float64)
    lens_ = np.full(batch, seq) if lens is None else lens
    y = np.zeros((seq, ndir, batch, hidden))
    yh = np.zeros((ndir, batch, hidden))
    yc = np.zeros((ndir, batch, hidden))

    def cl(v: np.ndarray) -> np.ndarray:
        return v if clip is None else np.clip(v, -clip, clip)

    for d in range(ndir):
        fs: list[Any] = [
            (lambda v, a=a: _act(a[0], v, a[1], a[2])) for a in acts[d * per : (d + 1) * per]
        ]
        f, gg, hh = fs + [None] * (3 - per)
        rev = d == 1 or direction == "reverse"
        wb, rb = bb[d, : g * hidden], bb[d, g * hidden :]
        for n in range(batch):
            h = np.zeros(hidden) if h0 is None else h0[d, n].astype(np.float64)
            c = np.zeros(hidden) if c0 is None else c0[d, n].astype(np.float64)
            steps = range(lens_[n] - 1, -1, -1) if rev else range(lens_[n])
            for t in steps:
                xw = w[d] @ x[t, n] + wb
                hr = r[d] @ h + rb
                if op == "RNN":
                    h = f(cl(xw + hr))
                elif op == "GRU":
                    z = f(cl(xw[:hidden] + hr[:hidden]))
                    rr = f(cl(xw[hidden : 2 * hidden] + hr[hidden : 2 * hidden]))
                    if lbr:
                        ht = gg(cl(xw[2 * hidden :] + rr * hr[2 * hidden :]))
                    else:
                        rh = r[d][2 * hidden :] @ (rr * h) + rb[2 * hidden :]
                        ht = gg(cl(xw[2 * hidden :] + rh))
                    h = (1 - z) * ht + z * h
                else:
                    pp = np.zeros(3 * hidden) if p is None else p[d].astype(np.float64)
                    s = xw + hr
                    i = f(cl(s[:hidden] + pp[:hidden] * c))
                    fg = (
                        1 - i
                        if forget
                        else f(cl(s[2 * hidden : 3 * hidden] + pp[2 * hidden :] * c))
                    )
                    c = fg * c + i * gg(cl(s[3 * hidden :]))
                    o = f(cl(s[hidden : 2 * hidden] + pp[hidden : 2 * hidden] * c))
                    h = o * hh(c)
                y[t, d, n] = h
            yh[d, n], yc[d, n] = h, c
    if layout:
        return y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    return y, yh, yc


def _dft_ref(x: np.ndarray, axis: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    if inverse and onesided:
        return np.fft.irfft(sig, n=length, axis=axis)[..., None]
    out = np.fft.ifft(sig, n=length, axis=axis) if inverse else np.fft.fft(sig, n=length, axis=axis)
    if onesided:
        out = np.take(out, np.arange(length // 2 + 1), axis=axis)
    return np.stack([out.real, out.imag], -1)


# -- kernels ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
@pytest.mark.parametrize(
    ("shape", "axis", "length", "inverse", "onesided"),
    [
        ((2, 7, 3, 1), 1, 7, False, False),
        ((2, 7, 3, 2), 1, 9, False, True),
        ((3, 5, 2), 1, 4, True, False),
        ((1, 6, 3, 2), 1, 10, True, True),
        ((1, 4, 5, 2), 2, 7, True, True),
        ((11, 1), 0, 11, False, True),
    ],
    ids=str,
)
def test_dft_kernel(
    emu: Emulator,
    dtype: str,
    shape: tuple[int, ...],
    axis: int,
    length: int,
    inverse: bool,
    onesided: bool,
) -> None:
    rng = np.random.default_rng(len(shape) + length)
    x = rng.standard_normal(shape).astype(NP[dtype])
    want = _dft_ref(x, axis, length, inverse, onesided)
    y = np.empty(want.shape, NP[dtype])
    n_out = want.shape[axis]
    inner = int(np.prod(shape[axis + 1 : -1]))
    n = y.size // int(want.shape[-1])
    irfft = int(inverse and onesided)
    for threads in (32, 64):
        y[...] = np.nan
        emu.launch(f"dft_{dtype}", 2, threads, x, y, n, shape[axis], inner, shape[-1], length,
                   n_out, int(inverse), irfft)  # fmt: skip
        np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("windowed", [False, True])
def test_stft_kernel(emu: Emulator, dtype: str, complex_in: bool, windowed: bool) -> None:
    rng = np.random.default_rng(5)
    batch, siglen, flen, step = 2, 29, 8, 3
    x = rng.standard_normal((batch, siglen, 2 if complex_in else 1)).astype(NP[dtype])
    win = rng.uniform(0.1, 1.0, flen).astype(NP[dtype])
    frames, bins = 1 + (siglen - flen) // step, flen // 2 + 1
    sig = x[..., 0].astype(np.float64) + (1j * x[..., 1] if complex_in else 0)
    framed = np.stack([sig[:, f * step : f * step + flen] for f in range(frames)], 1)
    if windowed:
        framed = framed * win.astype(np.float64)
    spec = np.fft.fft(framed, axis=-1)[..., :bins]
    want = np.stack([spec.real, spec.imag], -1)
    y = np.empty(want.shape, NP[dtype])
    n = batch * frames * bins
    emu.launch(f"stft_{dtype}", 2, 32, x, win if windowed else 0, y, n, siglen, x.shape[-1],
               frames, bins, flen, step)  # fmt: skip
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16", "f64"])
def test_window_kernel(emu: Emulator, dtype: str) -> None:
    n = 13
    y = np.empty(n, NP[dtype])
    emu.launch(f"window_{dtype}", 1, 32, y, n, float(n - 1), 0.42, 0.5, 0.08)
    np.testing.assert_allclose(y, np.blackman(n).astype(NP[dtype]), rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_mel_kernel(emu: Emulator, dtype: str) -> None:
    nmel, length, rate, low, high = 8, 16, 8192, 0.0, 8192.0 / 2
    y = np.empty((length // 2 + 1, nmel), NP[dtype])
    emu.launch(f"mel_{dtype}", 2, 32, y, y.size, nmel, length, rate, low, high)
    low_mel, high_mel = (2595 * np.log10(1 + v / 700) for v in (low, high))
    mel = low_mel + np.arange(nmel + 2) * (high_mel - low_mel) / (nmel + 2)
    edges = np.floor((length + 1) * 700 * (10 ** (mel / 2595) - 1) / rate).astype(int)
    want = np.zeros(y.shape)
    for m in range(nmel):
        lo, ce, hi = edges[m : m + 3]
        for j in range(y.shape[0]):
            if ce == lo:
                want[j, m] = float(j == ce)
            elif lo <= j <= ce:
                want[j, m] = (j - lo) / (ce - lo)
            if ce < hi and ce <= j < hi:
                want[j, m] = (hi - j) / (hi - ce)
    np.testing.assert_allclose(y, want, atol=1e-6)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_rnn_step_kernel_with_lengths(emu: Emulator, dtype: str) -> None:
    """A bidirectional Elman step from host-made projections: the reverse
    direction starts at each item's last step; past its length Y is 0."""
    rng = np.random.default_rng(2)
    seq, batch, hidden, ndir = 4, 3, 5, 2
    xw = rng.standard_normal((ndir, seq * batch, hidden)).astype(NP[dtype])
    h0 = rng.standard_normal((ndir, batch, hidden)).astype(NP[dtype])
    lens = np.array([4, 2, 0], np.int32)
    acts = recurrent.RNN_ACTS.pack()
    acts["kind"][:] = recurrent.ACTIVATIONS["tanh"]
    h = np.empty_like(h0)
    y = np.full((seq, ndir, batch, hidden), np.nan, NP[dtype])
    yh = np.empty_like(h0)
    n = h.size
    emu.launch(f"rnn_init_{dtype}", 1, 32, h0, 0, h, 0, yh, 0, n, batch, hidden, ndir, 0)
    np.testing.assert_array_equal(yh, h0)
    for step in range(seq):
        hr = np.zeros((ndir, batch, hidden), NP[dtype])  # R = 0: H_t = tanh(xw)
        emu.launch(f"rnn_step_rnn_{dtype}", 2, 32, xw, hr, 0, h, 0, 0, lens, y, yh, 0, 0, n,
                   batch, hidden, seq, step, 0, 0, ndir, 0, -1.0, acts)  # fmt: skip
    want = np.tanh(xw.astype(np.float64)).reshape(ndir, seq, batch, hidden).transpose(1, 0, 2, 3)
    for bi, length in enumerate(lens):
        want[length:, :, bi] = 0
    np.testing.assert_allclose(y, want.astype(NP[dtype]), **TOL[dtype])
    np.testing.assert_allclose(yh[0, 0], want[3, 0, 0].astype(NP[dtype]), **TOL[dtype])
    np.testing.assert_allclose(yh[1, 1], want[0, 1, 1].astype(NP[dtype]), **TOL[dtype])
    np.testing.assert_array_equal(yh[:, 2], h0[:, 2])  # length 0 keeps initial_h


# -- the provider on the emulation -----------------------------------------------------------


F, H = TensorProto.FLOAT, TensorProto.FLOAT16


def _run(
    manager: Any,
    node: Any,
    feeds: dict[str, np.ndarray],
    outputs: list[Any],
    opset: int,
    providers: tuple[str, ...] = ("cuda", "cpu"),
) -> list[np.ndarray]:
    ins = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
        for k, v in feeds.items()
    ]
    graph = helper.make_graph([node], "g", ins, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    sess = ortcore.InferenceSession(
        model.SerializeToString(), providers=list(providers), plugin_manager=manager
    )
    part = sess.get_partition()
    assert [r.provider for r in part.nodes] == ["CUDAExecutionProvider"], [
        (r.op_type, r.declined) for r in part.nodes
    ]
    return list(sess.run(None, feeds))


def _out(name: str, elem: int) -> Any:
    return helper.make_tensor_value_info(name, elem, None)


CASES: list[tuple[str, dict[str, Any]]] = [
    ("RNN", dict(direction="bidirectional", layout=1)),
    ("RNN", dict(direction="reverse", acts=[("LeakyRelu", 0.1, 0.0)], clip=1.5)),
    ("GRU", dict(direction="bidirectional")),
    ("GRU", dict(direction="reverse", lbr=1, layout=1)),
    ("GRU", dict(acts=[("HardSigmoid", 0.3, 0.4), ("Softsign", 0.0, 0.0)], clip=2.0)),
    ("LSTM", dict(direction="bidirectional", layout=1)),
    ("LSTM", dict(direction="reverse", forget=1)),
    ("LSTM", dict(acts=[("Sigmoid", 0, 0), ("Affine", 0.5, 0.1), ("Relu", 0, 0)])),
]


@pytest.mark.parametrize("elem", [F, H])
@pytest.mark.parametrize(("op", "kw"), CASES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(CASES)])
def test_recurrent_ops(emulated: Any, elem: int, op: str, kw: dict[str, Any]) -> None:
    np_t = np.float16 if elem == H else np.float32
    rng = np.random.default_rng(len(kw) * 7 + len(op))
    seq, batch, isize, hidden = 4, 3, 5, 6
    ndir = 2 if kw.get("direction") == "bidirectional" else 1
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    layout = kw.get("layout", 0)
    xs = (batch, seq, isize) if layout else (seq, batch, isize)
    st = (batch, ndir, hidden) if layout else (ndir, batch, hidden)
    feeds: dict[str, np.ndarray] = {
        "X": rng.standard_normal(xs).astype(np_t),
        "W": (rng.standard_normal((ndir, g * hidden, isize)) * 0.5).astype(np_t),
        "R": (rng.standard_normal((ndir, g * hidden, hidden)) * 0.5).astype(np_t),
        "B": (rng.standard_normal((ndir, 2 * g * hidden)) * 0.3).astype(np_t),
        "L": np.array([4, 1, 3], np.int32),
        "H0": rng.standard_normal(st).astype(np_t),
    }
    names = ["X", "W", "R", "B", "L", "H0"]
    if op == "LSTM":
        feeds["C0"] = rng.standard_normal(st).astype(np_t)
        feeds["P"] = (rng.standard_normal((ndir, 3 * hidden)) * 0.3).astype(np_t)
        names += ["C0", "P"]
    attrs: dict[str, Any] = dict(hidden_size=hidden, direction=kw.get("direction", "forward"))
    if layout:
        attrs["layout"] = 1
    if "acts" in kw:
        attrs["activations"] = [a[0] for a in kw["acts"]]
        alphas = [a[1] for a in kw["acts"] if a[0] in ("LeakyRelu", "HardSigmoid", "Affine")]
        betas = [a[2] for a in kw["acts"] if a[0] in ("HardSigmoid", "Affine")]
        if alphas:
            attrs["activation_alpha"] = alphas
        if betas:
            attrs["activation_beta"] = betas
    if "clip" in kw:
        attrs["clip"] = kw["clip"]
    if kw.get("lbr"):
        attrs["linear_before_reset"] = 1
    if kw.get("forget"):
        attrs["input_forget"] = 1
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, **attrs)
    got = _run(emulated, node, feeds, [_out(o, elem) for o in outs], 14)
    want = _recurrent_ref(
        op,
        *[feeds[n] for n in names],
        direction=attrs["direction"],
        layout=layout,
        acts=kw.get("acts"),
        clip=kw.get("clip"),
        lbr=kw.get("lbr", 0),
        forget=kw.get("forget", 0),
    )
    rtol, atol = (1e-4, 1e-5) if elem == F else (2e-2, 2e-2)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=rtol, atol=atol)


def test_gru_with_only_y_h(emulated: Any) -> None:
    rng = np.random.default_rng(9)
    feeds = {
        "X": rng.standard_normal((3, 2, 4)).astype(np.float32),
        "W": rng.standard_normal((1, 9, 4)).astype(np.float32),
        "R": rng.standard_normal((1, 9, 3)).astype(np.float32),
    }
    node = helper.make_node("GRU", ["X", "W", "R"], ["", "Y_h"], hidden_size=3)
    (yh,) = _run(emulated, node, feeds, [_out("Y_h", F)], 14)
    np.testing.assert_allclose(yh, _recurrent_ref("GRU", *feeds.values())[1], rtol=1e-4, atol=1e-5)


def test_an_unknown_activation_is_declined(emulated: Any) -> None:
    feeds = {
        "X": np.zeros((2, 1, 3), np.float32),
        "W": np.zeros((1, 4, 3), np.float32),
        "R": np.zeros((1, 4, 4), np.float32),
    }
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=4, activations=["Foo"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(k, F, list(v.shape)) for k, v in feeds.items()],
        [_out("Y", F)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    import onnx_ir as ir

    from ortcore_cuda.ops_recurrent import decline

    ir_model = ir.serde.deserialize_model(model)
    assert decline(next(iter(ir_model.graph)), None) == "CUDA: RNN with activation 'Foo'"  # type: ignore[arg-type]


@pytest.mark.parametrize("elem", [F, H])
def test_dft_on_the_provider(emulated: Any, elem: int) -> None:
    np_t = np.float16 if elem == H else np.float32
    x = np.random.default_rng(4).standard_normal((2, 6, 3, 2)).astype(np_t)
    node = helper.make_node("DFT", ["x", "n", "a"], ["y"], inverse=1, onesided=1)
    feeds = {"x": x, "n": np.array(9, np.int64), "a": np.array(-3, np.int64)}
    (y,) = _run(emulated, node, feeds, [_out("y", elem)], 20)
    np.testing.assert_allclose(
        y, _dft_ref(x, 1, 9, True, True), **TOL["f16" if elem == H else "f32"]
    )


def test_stft_and_windows_on_the_provider(emulated: Any) -> None:
    x = np.random.default_rng(6).standard_normal((1, 40, 2)).astype(np.float64)
    node = helper.make_node("STFT", ["x", "s", "", "l"], ["y"], onesided=0)
    feeds = {"x": x, "s": np.array(5, np.int64), "l": np.array(12, np.int64)}
    (y,) = _run(emulated, node, feeds, [_out("y", TensorProto.DOUBLE)], 17)
    sig = x[..., 0] + 1j * x[..., 1]
    spec = np.fft.fft(np.stack([sig[:, f * 5 : f * 5 + 12] for f in range(6)], 1), axis=-1)
    np.testing.assert_allclose(y, np.stack([spec.real, spec.imag], -1), rtol=1e-10, atol=1e-10)
    node = helper.make_node("HannWindow", ["n"], ["w"], periodic=0, output_datatype=10)
    # alone: with the CPU provider after it, a rank-0 integer input is left to that one
    from ortcore.plugins import PluginManager

    import ortcore_cuda.plugin

    alone = PluginManager(autoload=False)
    alone.register_plugin(ortcore_cuda.plugin, name="ortcore_cuda")
    (w,) = _run(alone, node, {"n": np.array(7, np.int32)}, [_out("w", H)], 17, ("cuda",))
    assert w.dtype == np.float16
    np.testing.assert_allclose(w, np.hanning(7), atol=1e-3)
