"""Signal processing: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
MelWeightMatrix.

Complex values travel as a trailing dim of 2 (real, imaginary); a trailing
dim of 1 holds a real signal. Transforms use ``numpy.fft`` (complex64 for
single and half precision, complex128 for double).
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size, to_numpy
from ep_sdk.registry import KernelBuilder
from onnx_ir import DataType

from . import registry
from ._common import normalize_axis, scalar
from ._versions import per_schema_version


def _to_complex(x: np.ndarray) -> np.ndarray:
    """Drop the trailing real/imaginary dim, giving a complex128 array."""
    # Single-precision inputs transform in complex64, as numpy's own fft does.
    ctype = np.complex128 if x.dtype == np.float64 else np.complex64
    if x.shape[-1] == 1:
        return x[..., 0].astype(ctype)
    if x.shape[-1] != 2:
        raise ValueError(f"last dim of a signal must be 1 or 2, got shape {x.shape}")
    out = x[..., 0].astype(ctype)
    out.imag = x[..., 1]
    return out


def _from_complex(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1).astype(dtype)


def dft(x: np.ndarray, length: int | None, axis: int, inverse: bool, onesided: bool) -> np.ndarray:
    """DFT of ``x`` (``[..., 1|2]``) along ``axis`` (of ``x``, not the last).

    ``onesided`` keeps ``length // 2 + 1`` bins of a forward transform; with
    ``inverse`` it reads a one-sided spectrum and returns a real signal.
    """
    axis = normalize_axis(axis, x.ndim)
    if axis == x.ndim - 1:
        raise ValueError("the DFT axis cannot be the last (real/imaginary) dim")
    if length is not None:
        shape = list(x.shape[:-1])
        shape[axis] = length
        check_tensor_size(shape, np.complex128, "DFT")
    signal = _to_complex(x)
    if inverse and onesided:
        n = length if length is not None else 2 * (x.shape[axis] - 1)
        return np.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    n = length if length is not None else x.shape[axis]
    if n == 0 and not onesided:  # a signal of no points: no bins (numpy's fft refuses it)
        shape = list(signal.shape)
        shape[axis] = 0
        return np.empty((*shape, 2), dtype=x.dtype)
    out = np.fft.ifft(signal, n=n, axis=axis) if inverse else np.fft.fft(signal, n=n, axis=axis)
    if onesided:
        out = np.take(out, np.arange(n // 2 + 1), axis=axis)
    return _from_complex(out, x.dtype)


def _length(value: np.ndarray | None) -> int | None:
    if value is None:
        return None
    n = int(scalar(value))
    if n < 1:
        raise ValueError(f"the DFT length must be >= 1, got {n}")
    return n


@per_schema_version("DFT")
def dft_kernel(info: NodeInfo) -> Compute:
    """DFT: ``axis`` an attribute (opset 17, default 1) or an input (20, default -2)."""
    inverse = bool(info.attrs.get("inverse", 0))
    onesided = bool(info.attrs.get("onesided", 0))
    if info.opset < 20:
        axis_attr = int(info.attrs.get("axis", 1))

        def compute17(x: np.ndarray, length: np.ndarray | None = None) -> tuple[np.ndarray]:
            return (dft(x, _length(length), axis_attr, inverse, onesided),)

        return compute17

    def compute20(
        x: np.ndarray, length: np.ndarray | None = None, axis: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        ax = -2 if axis is None else int(scalar(axis))
        return (dft(x, _length(length), ax, inverse, onesided),)

    return compute20


@registry.kernel("STFT", since=17)
def stft(info: NodeInfo) -> Compute:
    """Short-time Fourier transform of ``[batch, length, 1|2]`` into
    ``[batch, frames, bins, 2]``."""
    onesided = bool(info.attrs.get("onesided", 1))

    def compute(
        x: np.ndarray,
        frame_step: np.ndarray,
        window: np.ndarray | None = None,
        frame_length: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        step = int(scalar(frame_step))
        if frame_length is not None:
            flen = int(scalar(frame_length))
        elif window is not None:
            flen = window.shape[0]
        else:
            flen = x.shape[-2]
        if window is not None and window.shape[0] != flen:
            raise ValueError(f"window length {window.shape[0]} != frame_length {flen}")
        signal = _to_complex(x)  # [batch, length]
        n_frames = 1 + (signal.shape[1] - flen) // step
        # Frames overlap: a short signal asks for frames x frame_length values.
        check_tensor_size(
            (signal.shape[0], max(n_frames, 0), max(flen, 0)), np.complex128, info.describe()
        )
        frames = np.lib.stride_tricks.sliding_window_view(signal, flen, axis=1)
        frames = frames[:, : n_frames * step : step]
        if window is not None:
            frames = frames * window.astype(frames.real.dtype)
        out = np.fft.fft(frames, axis=-1)
        if onesided:
            out = out[..., : flen // 2 + 1]
        return (_from_complex(out, x.dtype),)

    return compute


def _window_kernel(terms: tuple[float, ...]) -> KernelBuilder:
    """Cosine-sum window sum_k (-1)^k a_k cos(2 pi k n / N)."""

    def build(info: NodeInfo) -> Compute:
        periodic = bool(info.attrs.get("periodic", 1))
        dtype = to_numpy(DataType(int(info.attrs.get("output_datatype", 1))))

        def compute(size: np.ndarray) -> tuple[np.ndarray]:
            n = int(scalar(size))
            check_tensor_size((n,), np.float64, info.describe())
            denom = n if periodic else n - 1
            k = np.arange(n, dtype=np.float64)
            phase = 2 * np.pi * k / denom if denom else np.zeros(n)
            w = np.zeros(n)
            for i, a in enumerate(terms):
                w = w + (-1) ** i * a * np.cos(i * phase)
            return (w.astype(dtype),)

        return compute

    return build


registry.kernel("HannWindow", since=17)(_window_kernel((0.5, 0.5)))
registry.kernel("HammingWindow", since=17)(_window_kernel((25 / 46, 21 / 46)))
registry.kernel("BlackmanWindow", since=17)(_window_kernel((0.42, 0.5, 0.08)))


@registry.kernel("MelWeightMatrix", since=17)
def mel_weight_matrix(info: NodeInfo) -> Compute:
    """Triangular mel filter bank, ``[dft_length // 2 + 1, num_mel_bins]``."""
    dtype = to_numpy(DataType(int(info.attrs.get("output_datatype", 1))))

    def compute(
        num_mel_bins: np.ndarray,
        dft_length: np.ndarray,
        sample_rate: np.ndarray,
        lower_edge_hertz: np.ndarray,
        upper_edge_hertz: np.ndarray,
    ) -> tuple[np.ndarray]:
        bins = int(scalar(num_mel_bins))
        length = int(scalar(dft_length))
        if bins < 1 or length < 1:
            raise ValueError(f"{info.describe()}: num_mel_bins and dft_length must be >= 1")
        check_tensor_size((length // 2 + 1, bins + 2), np.float64, info.describe())
        rate = scalar(sample_rate)
        lo_mel = 2595 * np.log1p(scalar(lower_edge_hertz) / 700) / np.log(10)
        hi_mel = 2595 * np.log1p(scalar(upper_edge_hertz) / 700) / np.log(10)
        step = (hi_mel - lo_mel) / (bins + 2)
        mel = np.arange(bins + 2) * step + lo_mel
        hz = 700 * np.expm1(mel / 2595 * np.log(10))
        edges = ((length + 1) * hz // rate).astype(np.int64)
        j = np.arange(length // 2 + 1)[:, None]
        left, center, right = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where(
                center == left,
                (j == center).astype(np.float64),
                (j - left) / np.maximum(center - left, 1),
            )
            fall = (right - j) / np.maximum(right - center, 1)
        up = (j >= left) & (j <= center)
        down = (j >= center) & (j < right) & (right > center)
        out = np.where(down, fall, np.where(up, rise, 0.0))
        return (out.astype(dtype),)

    return compute
