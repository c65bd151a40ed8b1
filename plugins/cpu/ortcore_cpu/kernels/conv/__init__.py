"""Convolutions: Conv, ConvTranspose and DeformConv.

Float32 (and float16, computed in float32) with 1-3 spatial dims use Cython
im2col / col2im plus a BLAS matmul, a straight matmul for pointwise (1x1)
convolutions (with a constant weight, the provider's packed GEMM reading the
input in place and adding the bias, residual and clamp as it writes:
``POINTWISE_GEMM``), and a direct Cython kernel for depthwise 2-D ones. 1-D
and 2-D convolutions with large kernels on few input channels (at least
``DIRECT_MIN_TAPS`` taps, at most ``DIRECT_MAX_DEPTH`` = C * KH * KW, as in
the 7x7 first layer of most CNNs), and strided ones with a 3x3 window or
more on an image's few channels (``DIRECT_IMAGE_CHANNELS``), use a direct
kernel vectorized along the output width (``_direct_conv.h``) that adds the
bias, the residual and the clamp as it writes the output: there im2col
writes the input many times over for a matmul too thin for BLAS to run
well. The AVX-512 build's direct
kernel, with twice the vector width and registers, also takes every other
Conv of one group with more than one tap, strided ones on row and column
phases of the input (see ``DIRECT_WIDE_VECTOR``), the 1x1 ones
(``DIRECT_POINTWISE``) and the grouped ones (``DIRECT_GROUPS``; the AVX2
build those with 16 channels a group or more, on two threads or more:
``DIRECT_NARROW_GROUP_CHANNELS``). A second direct kernel puts the output
channels in the vector lanes (``_cvec_conv.h``, ``CHANNEL_VECTOR``): the
AVX2 build's 3x3-and-larger windows where Winograd and BLAS lose, the
AVX-512 build's unstrided ones on planes up to 55x55
(``CHANNEL_VECTOR_WIDE``). Large
enough 2-D 3x3 convolutions with stride 1, dilation 1 and one group use
Winograd F(2x2, 3x3) instead (Lavin & Gray 2015): Cython input and output
transforms around 16 BLAS matmuls, which do 16 multiplies per 2x2 output
tile and channel pair where im2col's matmul does 36. The filter transform of
a constant weight is computed once per kernel (see :class:`WinogradFilters`).
Other dtypes and ranks take a numpy path that loops over kernel offsets, not
elements.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import numpy as np
from ep_sdk import Compute, NodeInfo

from ..._ext import winograd as wino
from .. import gemm, registry, shape_ops
from .._common import (
    FLOATS,
    FilterCache,
    constant_input,
    f32_contiguous,
    remember,
    thread_count,
    threads_for,
    threads_for_memory_bound,
)
from .._isa import best_build
from .._window import (
    PoolWindow,
    Window,
    check_window_attrs,
    fill_empty_windows,
    kernel_offsets,
    split_same_pads,
    strided_slice,
    window,
)

ext = best_build("conv")
"""The build of the Cython convolution helpers this CPU runs fastest (``_isa.py``)."""

_NO_BIAS = np.empty(0, np.float32)
_NO_CLAMP = (-np.inf, np.inf)

Clamp = tuple[float, float]
"""Bounds ``(lo, hi)`` a Conv's output is clamped to: its fused Relu or Clip."""


BIAS_PASS_WORK = 4
"""Elements of :func:`threads_for_memory_bound`'s work that one output value
of a Conv's separate bias pass (after a BLAS product: bias, residual and
clamp) weighs. Counted as half, ResNet-50's passes over 256 x 56 x 56
values ran on one thread inside the model (200 us each, three a run).
Counted as four (2-core Zen 3 VM, the same session's runs alternating):
ResNet-50 0.97x the time, SqueezeNet 0.99x, Inception v2 and ShuffleNet
0.995x, DenseNet and Inception v1 unchanged (two and sixteen did no better)."""


def _add_bias(
    y: np.ndarray,
    b: np.ndarray | None,
    threads: int,
    clamp: Clamp | None = None,
    z: np.ndarray | None = None,
) -> None:
    """Add the bias ``b`` (one value per output channel) and the residual ``z``
    (``y``'s shape) to ``y`` (N, M, ...) in place, then clamp ``y`` to
    ``clamp`` if given; one Cython pass for float32.

    Raises:
        ValueError: ``b`` is not of shape (M,), or ``z`` not of ``y``'s shape.
    """
    if b is not None and b.shape != y.shape[1:2]:
        raise ValueError(f"bias of shape {list(b.shape)} for {y.shape[1]} output channels")
    if z is not None and z.shape != y.shape:
        raise ValueError(f"residual Z of shape {list(z.shape)} for an output of {list(y.shape)}")
    if (b is None and clamp is None and z is None) or y.size == 0:
        return
    n, m = y.shape[:2]
    rows = y.reshape(n * m, -1)
    if y.dtype == np.float32 and y.flags.c_contiguous:
        lo, hi = clamp if clamp is not None else _NO_CLAMP
        bias = _NO_BIAS if b is None else f32_contiguous(b)
        share = threads_for_memory_bound(y.size * BIAS_PASS_WORK, threads)
        if z is None:
            ext.bias_clamp(rows, bias, lo, hi, share)
        else:
            ext.bias_add_clamp(rows, bias, f32_contiguous(z).reshape(n * m, -1), lo, hi, share)
        return
    if b is not None:
        rows += np.tile(b.astype(y.dtype), n)[:, None]
    if z is not None:
        y += z.astype(y.dtype, copy=False)
    if clamp is not None:
        np.clip(y, *clamp, out=y)


# Winograd F(2x2, 3x3): Y = A^T [(G g G^T) * (B^T d B)] A per 2x2 output tile.
_WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
_WINOGRAD_GG = np.kron(_WINOGRAD_G, _WINOGRAD_G)
"""(16, 9): row 4*i + j maps a row-major 3x3 filter to element (i, j) of G g G^T."""

WINOGRAD_MIN_CHANNELS = 16
"""Input and output channels the Winograd path needs: with fewer its 16
matmuls are too thin to beat im2col's one."""
WINOGRAD_MIN_TILES = 16
"""2x2 output tiles (all images together) the Winograd path needs. With
fewer, the matmuls are bound by reading the filter transform, which is 16/9
the size of the weight."""
WINOGRAD_MIN_TILES_UNCACHED = 64
"""The same, for a weight that is not a constant (its transform is computed
at every call)."""
WINOGRAD_MAX_TILES_WIDENING = 256
"""Most tiles (all images together) for which a Conv with 2-4x more output
than input channels takes the Winograd path. On 56x56 (784 tiles) 32 -> 128
channels took twice im2col's time on 2 threads; 27x27 (196 tiles) and
smaller were faster with Winograd."""
_WINOGRAD_BLOCK_BYTES = 8 << 20
"""Bytes of transformed input and output (V and M) per step: bigger images
go through in bands of tile rows, smaller ones several at a time."""


class _Scratch(threading.local):
    """Per-thread float32 buffer for Winograd's V and M and for small im2col
    buffers, kept between calls: fresh memory from the OS page-faults on
    first touch, which costs as much as the transforms themselves. Holds
    about ``_WINOGRAD_BLOCK_BYTES`` or ``_COL_SCRATCH_MAX`` floats, whichever
    a thread needed most (more only for images so wide that one Winograd tile
    row needs more)."""

    buf: np.ndarray | None = None

    def get(self, size: int) -> np.ndarray:
        """The first ``size`` elements of this thread's buffer (grown if needed)."""
        if self.buf is None or self.buf.size < size:
            self.buf = None
            self.buf = np.empty(size, np.float32)
        return self.buf[:size]


_scratch = _Scratch()

_COL_SCRATCH_MAX = 4 << 20
"""Floats (16 MiB) up to which im2col's buffer is the thread's scratch."""


def winograd_filter(w: np.ndarray) -> np.ndarray:
    """Winograd filter transform ``U = G g G^T`` of 3x3 filters.

    Args:
        w: (M, C, 3, 3) filters, any float dtype.

    Returns:
        float32 (16, M, C): ``U[4*i + j, m, c]`` is element (i, j) of the 4x4
        transform of ``w[m, c]``.
    """
    m, c = w.shape[:2]
    g = f32_contiguous(w).reshape(m * c, 9)
    return np.matmul(_WINOGRAD_GG, g.T).reshape(16, m, c)


class WinogradFilters(FilterCache):
    """The Winograd filter transform (:func:`winograd_filter`) of a Conv
    node's last weight, kept (see :class:`FilterCache`)."""

    def __init__(self) -> None:
        super().__init__(lambda w: winograd_filter(w))
        self.packed = FilterCache(lambda u: gemm.ext.pack_a_batch(u))
        """The transform packed for the packed GEMM (see
        :data:`WINOGRAD_BATCHED_MAX_WORK`), kept for the last transform."""


DIRECT_MAX_DEPTH = 256
"""Most input values per output (C * KH * KW) for which a 1-D or 2-D Conv of
one group with at least ``DIRECT_MIN_TAPS`` filter taps is computed directly
(:func:`direct_filter`): 3 -> 96 channels 11x11 stride 4 (depth 363) ran as
fast with im2col and BLAS, 96 -> 256 5x5 (2400) 1.4x faster, so deeper ones
stay with BLAS."""

DIRECT_MIN_TAPS = 25
"""Fewest filter taps (KH * KW) for the direct path. A first layer's 7x7
stride-2 Conv of 3 -> 64 channels on 224x224 took 0.60-0.73x im2col's time
on 1 and 2 threads, with BLAS's pool spinning or not. Small kernels won only
on 2 threads and only while no BLAS call ran between them (3x3 3 -> 64
stride 2: 0.75x alone, 1.39x when interleaved with GEMMs, whose pool keeps
spinning on the second core; 1.33x on 1 thread), so they keep im2col,
except on an image's few channels with a stride (see
:data:`DIRECT_IMAGE_CHANNELS`)."""

DIRECT_IMAGE_CHANNELS = 4
"""Most input channels for which a strided 2-D Conv of one group with at
least ``DIRECT_IMAGE_MIN_TAPS`` taps takes the narrow build's direct kernel
(row mode): a network's first layer on the RGB image, where im2col writes
9 copies of a large input for a matmul of K = 27. Measured on a Zen 3 (AVX2,
OpenBLAS's Haswell kernels, whose threads share the kernels' OpenMP team):
ShuffleNet's 3 -> 24 3x3 stride 2 and SqueezeNet's 3 -> 64 took 0.46-0.68x
im2col's time on 2 threads and 0.8-0.93x on 1. Unstrided ones (VGG's 3 ->
64 3x3) won on 2 threads but lost on 1 (1.28x), so they keep im2col."""

DIRECT_IMAGE_MIN_TAPS = 9
"""Fewest taps for :data:`DIRECT_IMAGE_CHANNELS`: a 3x3 window."""


def direct_filter(w: np.ndarray, group: int = 1) -> np.ndarray:
    """Weights (M, C, KH, KW), or (M, C, KW) of a 1-D Conv, packed for
    ``direct_conv2d``: float32 (ceil(M / B), C, KH, KW, B), B output channels
    side by side (zeros past M). With ``group`` > 1 each group's M / group
    filters are packed so, one group after the other."""
    if group > 1:
        mg = w.shape[0] // group
        return np.concatenate([direct_filter(w[g * mg : (g + 1) * mg]) for g in range(group)])
    block = int(ext.DIRECT_BLOCK)
    w = w.reshape(*w.shape[:2], *((1,) * (4 - w.ndim)), *w.shape[2:])
    m = w.shape[0]
    blocks = -(-m // block)
    packed = np.zeros((blocks * block, *w.shape[1:]), np.float32)
    packed[:m] = w
    packed = packed.reshape(blocks, block, *w.shape[1:])
    return np.ascontiguousarray(packed.transpose(0, 2, 3, 4, 1))


def channel_vector_filter(w: np.ndarray) -> np.ndarray:
    """2-D weights (M, C, KH, KW) packed for ``channel_vector_conv2d``:
    float32 (ceil(M / B), C, KH * KW, B), B output channels side by side
    (zeros past M)."""
    block = int(ext.CHANNEL_VECTOR_BLOCK)
    m, c = w.shape[:2]
    blocks = -(-m // block)
    packed = np.zeros((blocks * block, c, math.prod(w.shape[2:])), np.float32)
    packed[:m] = w.reshape(m, c, -1)
    packed = packed.reshape(blocks, block, *packed.shape[1:])
    return np.ascontiguousarray(packed.transpose(0, 2, 3, 1))


CHANNEL_VECTOR = True
"""Whether the channel-vector kernel runs at all (in the AVX-512 build by
:data:`CHANNEL_VECTOR_WIDE`'s rule); the narrow (AVX2) build computes 2-D
Convs of one group with a 3x3 window or larger on it (``channel_vector_conv2d``:
16 output channels in two vectors, a tile of 6 output positions, 12 sums in
registers; the input read as broadcast values, so no lane is lost at a
row's end) where :func:`_use_channel_vector` says so. Measured on a Zen 3
(AVX2, OpenBLAS's Haswell kernels), one Conv and Relu a session, sessions
alternating run by run, 2 threads, against the path each took before:
im2col and BLAS 0.35-0.72x the time (5x5 windows of 32 channels, 3x3
stride 2 from 96-256 channels to 14x14-28x28, AlexNet's 11x11 stride 4,
ZFNet's 96 -> 256 5x5 stride 2); the direct kernel's row mode on 7x7
stride 2 first layers 0.92-0.96x, on SqueezeNet's 16 -> 64 on 55x55
0.95x; its flat mode, stride 1, 0.72-0.89x (5x5 windows, 6x6 planes);
Winograd on SqueezeNet's 32 -> 128 on 27x27 and 48 -> 192 on 13x13
0.91-0.92x and on DenseNet's 128 -> 32 on 7x7 and 14x14 0.63-0.95x. Alone
it lost to Winograd with 64 channels or more in and out (1.07-1.74x: 2.25x
fewer multiplies; inside the models see
:data:`CHANNEL_VECTOR_WINOGRAD_CHANNELS`). The sums run at 80-89 GFLOP/s on one thread (3x3,
16-256 channels); each work item's sums go through a staging buffer in
L1, so that the output gets one run of stores per channel (0.81-0.92x the
time of writing each tile's 16 channels x 8 positions out directly)."""

CHANNEL_VECTOR_MIN_DEPTH = 27
"""Fewest input values per output (C * KH * KW) for :data:`CHANNEL_VECTOR`:
the RGB image's 3x3 windows. Below :data:`CHANNEL_VECTOR_SHALLOW_DEPTH`
the output channels must fill the blocks of 16."""

CHANNEL_VECTOR_SHALLOW_DEPTH = 64
"""Input values per output below which :data:`CHANNEL_VECTOR` takes a Conv
only if its output channels are a multiple of 16: each tile's sums are
few, and a block's unused channels cost as much as the rest. One Conv and
Relu a session, sessions alternating: SqueezeNet's 3 -> 64 3x3 stride 2
0.84x the direct kernel's row mode's time on 1 and 2 threads; VGG's 3 ->
64 3x3 stride 1 0.65x im2col's on 1 thread, 1.025x the row mode's on 2;
ShuffleNet's 3 -> 24 (a block and a half) lost, 1.01-1.08x."""

CHANNEL_VECTOR_WINOGRAD_CHANNELS = 64
"""Input channels below which :data:`CHANNEL_VECTOR` takes a Conv that
Winograd would; with at most this many input or output channels it takes
those on planes of up to :data:`CHANNEL_VECTOR_WINOGRAD_POSITIONS`. Alone
(one Conv a session) Winograd won with 64 channels (1.06-1.23x the time
with this kernel), but inside the models it lost: with 64 channels taken
here too (sessions alternating, 2 threads) SqueezeNet 0.95x the time
(0.97x on 1 thread), DenseNet 0.97x (128 -> 32 on 28x28; 1.0x on 1),
Inception v2 0.99-0.995x. Why is not pinned down: inside SqueezeNet this
kernel took 1.2-1.3x the time it takes when the same call is repeated
at once, so both paths run on colder caches there than alone. 64 -> 64
on ResNet's 56x56 planes lost (1.13-1.35x per node): large planes keep
Winograd."""

CHANNEL_VECTOR_WINOGRAD_POSITIONS = 28 * 28
"""See :data:`CHANNEL_VECTOR_WINOGRAD_CHANNELS`."""

CHANNEL_VECTOR_WIDE = True
"""Whether the AVX-512 build computes unstrided 2-D Convs of one group with a
3x3 window or larger, at least :data:`CHANNEL_VECTOR_SHALLOW_DEPTH` deep,
on the channel-vector kernel (there 32 output channels in two vectors of
16, tiles of 12 positions) rather than its direct kernel's flat mode, on
planes of up to :data:`CHANNEL_VECTOR_WIDE_POSITIONS` and with at least two
work items (``channel_vector_items``: one block of channels on 49
positions would leave a thread idle). Measured on an Intel Xeon (Emerald
Rapids, 2 vCPUs), the kernels alone on 2 threads: 0.76-0.91x the direct
kernel's time on SqueezeNet's expands (16 -> 64 on 55x55 0.78x, 64 -> 256
on 13x13 0.83x), Inception's 160 -> 320 and 192 -> 384 on 7x7, DenseNet's
128 -> 32 on 14x14 and 96 -> 128 on 28x28; 0.92-1.04x on 28x28 and deep
14x14 and 7x7 ones (256 -> 256, 512 -> 512); 1.01-1.15x on 56x56 (64 ->
64, 64 -> 192, 128 -> 32), 1.25x for 128 -> 32 on 7x7 (one item). Whole
models, sessions alternating: SqueezeNet 0.96-0.98x, ResNet-50, Inception
v1 and v2 and DenseNet within 1-3% either way (noise). Strided Convs stay
with the direct kernel (3 -> 64 stride 2 on 224x224 1.24x); so do 1x1
Convs (1.06-2.3x: a 1x1 step's few sums do not pay for the transposes)."""

CHANNEL_VECTOR_WIDE_POSITIONS = 55 * 55
"""See :data:`CHANNEL_VECTOR_WIDE`."""


DIRECT_WIDE_VECTOR = 16
"""Floats per vector from which a build's direct kernel takes every Conv of
one group with more than one filter tap, 1-D or 2-D, in flat mode (see
``direct_conv2d``; strided ones on row and column phases of the input): the
AVX-512 build, whose 32 registers hold 8 output channels x 48 positions of
sums. Against im2col or Winograd with OpenBLAS's SkylakeX kernels (2
threads, Zen 5) alone: 3x3 stride 1, 7x7 to 224x224 planes and 3 to 512
channels, 0.5-0.9x their time (300-415 GFLOP/s), 5x5 0.25-0.5x; 3x3 stride
2 from 64-512 channels to 7x7-28x28 outputs 0.45-0.8x im2col's time
(240-345 GFLOP/s) and the 3 -> 64 / 96 first layers (3x3 and 7x7 stride 2,
11x11 stride 4) 0.8-1.0x row mode's; inside ResNet-50, 3x3 stride 1
0.85-0.92x. 1x1 Convs: see :data:`DIRECT_POINTWISE`. The AVX2 build's
4 x 24 sums (16 registers) ran 1.3-1.7x slower than BLAS and Winograd
there, so it keeps the narrow rule above, in row mode."""

DIRECT_POINTWISE = True
"""Whether the AVX-512 build computes 1x1 Convs of one group directly too
(strided ones on the positions they read, taken from the input first).
Off until the kernel ran one-tap windows as a plain loop over the channels
(2026-12-03): 1x1 Convs then took 0.52-0.9x the time they took before on
the direct kernel, 274-400 GFLOP/s on 2 threads, and whole models against
BLAS and a bias pass (sessions alternating in one process, 2-3 rounds):
SqueezeNet 0.93x, Inception v1 0.95-0.97x, Inception v2 0.95-0.96x,
DenseNet 0.93-0.94x, ResNet-50 0.98-1.02x; inside ResNet-50 0.76-0.95x per
node on 14x14 to 56x56 planes, 1.0-1.1x on 7x7 and 14x14 with 1024-2048
channels (this kernel does not block the long channel sums for the cache
as BLAS does), and 1.15-1.4x for the strided ones until they read a
subsampled copy of the input instead of every phase of it."""

DIRECT_GROUPS = True
"""Whether the AVX-512 build computes grouped Convs (not depthwise: that has
its own kernel) directly, all groups in one parallel region. 3x3 Convs of
32 groups (ResNeXt's, 4 and 8 channels a group) took 0.2-0.5x the time of
im2col and one BLAS matmul per group, though 4 filters a group fill half of
a block of 8. Grouped 1x1 Convs (ShuffleNet's, 6-136 channels a group, the
input read in place) kept BLAS until the kernel wrote its sums from the
registers (2026-12-03): then whole ShuffleNet runs took 0.88-0.99x the time
of BLAS per group and a bias pass (5 rounds in one process, sessions
alternating). The narrow build: see :data:`DIRECT_NARROW_GROUP_CHANNELS`."""

DIRECT_NARROW_GROUP_CHANNELS = 16
"""Fewest input channels a group from which the narrow (AVX2) build
computes a grouped Conv (not depthwise) directly, in flat mode, when its
node runs on two threads or more. Measured on a Zen 3 (OpenBLAS's Haswell
kernels) against a BLAS matmul per group and a bias pass, 2 threads:
AlexNet's 3x3 Convs of 2 groups (192 channels a group, 12x12) 0.38-0.59x
the time, ShuffleNet's 1x1 Convs of 4 groups (28-136 channels a group)
0.78-0.98x; 6 channels a group (ShuffleNet's first) lost (1.25x), and on
one thread the 3x3 ones lost too (1.15-1.35x: BLAS on one thread is not
slowed by the threads' hand-offs that it pays on two). Grouped 1x1 Convs
with a constant weight take the packed GEMM first (:data:`POINTWISE_GROUPS`)."""


DIRECT_NARROW_SHALLOW_DEPTH = 144
"""Most input values per output (C * KH * KW) for which the narrow (AVX2)
build computes a 2-D Conv of one group with at least a 3x3 window directly
(row mode) when its node runs on two threads or more and its output has
:data:`DIRECT_NARROW_SHALLOW_POSITIONS` positions or more: the few channels
of a network's first layers on large planes, where im2col copies the input
9 times for a short matmul. Measured on a Zen 3 (AVX2, OpenBLAS's Haswell
kernels on the kernels' OpenMP team), one Conv and Relu a session, runs
paired: SqueezeNet's 16 -> 64 on 55x55 0.87-0.95x the time of im2col and
BLAS, VGG's 3 -> 64 on 224x224 0.92x, 16 -> 32 on 112x112 0.74x (of
Winograd), 8 -> 32 on 56x56 0.71x; 24 channels broke even, 32 lost
(1.29x), and so did 16 channels on 28x28 (1.09x). On one thread they won
less (0.88-1.01x)."""

DIRECT_NARROW_SHALLOW_POSITIONS = 3000
"""Fewest output positions for :data:`DIRECT_NARROW_SHALLOW_DEPTH` (55 x 55
is 3025)."""

DIRECT_NARROW_SMALL_POSITIONS = 64
"""Most output positions for which the narrow (AVX2) build computes a 2-D
Conv of one group with at least a 3x3 window directly, in flat mode (runs
of vectors across the output's rows; with a stride on row and column
phases of the input), at any depth, unless Winograd takes it: the planes
of 7x7 and less at the end of a network, where im2col's matmul has a few
dozen columns and BLAS runs at 40-50 GFLOP/s. Measured on a Zen 3 (AVX2,
OpenBLAS's Haswell kernels), one Conv and Relu a session, sessions
alternating run by run, against im2col and BLAS on 2 threads: stride 2,
128 -> 192, 256 -> 256, 256 -> 384 and 512 -> 512 to 6x6 or 7x7
0.8-0.9x the time (0.9-0.97x on 1 thread), 1024 -> 512 to 4x4 0.71x;
stride 1, 64 -> 64 up to 512 -> 512 and 1024 -> 256 on 2x2 to 6x6
0.59-0.76x (0.64-0.8x on 1); 5x5 windows to 7x7 or 8x8 0.53-0.92x (of
row mode or im2col). Strided to 10x10 it broke even (1.04x), to
14x14 it lost (1.1-1.2x); against Winograd on 7x7 (16 tiles) it lost with
192-512 channels (1.13-1.21x), so Winograd keeps those. Row mode lost on
all of them (1.1-1.9x: a row of 7 fills one vector of 8)."""

DIRECT_NARROW_WIDE_WINDOW_DEPTH = 784
"""Most input values per output (C * KH * KW) for which the narrow (AVX2)
build computes an unstrided 2-D Conv of one group with a 5x5 window or
larger (:data:`DIRECT_MIN_TAPS` taps) directly in flat mode, past
:data:`DIRECT_MAX_DEPTH` (below it they take row mode): 16 channels 5x5 or
7x7, 24 channels 5x5, where im2col copies the input 25 or 49 times for a
short matmul. Measured on a Zen 3 (AVX2, OpenBLAS's Haswell kernels), one
Conv and Relu a session, sessions alternating run by run, against im2col and
BLAS: Inception v1's 16 -> 32 5x5 on 27x27 0.53x the time on 2 threads,
0.77x on 1; 16 -> 48 on 13x13 0.79x / 0.78x; 24 -> 64 on 13x13 0.87x /
0.89x; 16 -> 32 on 56x56 0.54x / 0.8x; 16 -> 32 7x7 on 28x28 0.42x /
0.72x. 32 channels 5x5 (depth 800) went either way (0.64-1.11x), so they
keep im2col."""

WINOGRAD_OVER_DIRECT_CHANNELS = 128
"""Fewest input and output channels, with :data:`WINOGRAD_OVER_DIRECT_POSITIONS`,
from which a 3x3 Conv that Winograd takes (:func:`_use_winograd`) goes there
rather than to the AVX-512 direct kernel: the direct kernel's channel sums
(C x 9 deep) are not blocked for the cache, and on planes of 28x28 and more
with 128-512 channels Winograd's 16 products ran faster (inside VGG-19,
sessions alternating in one process: 0.81x the whole model's time; ResNet-50's
three 128 -> 128 on 28x28 1.00x; smaller planes, 14x14 with 512 channels,
lost)."""

WINOGRAD_OVER_DIRECT_POSITIONS = 28 * 28
"""Fewest output positions for :data:`WINOGRAD_OVER_DIRECT_CHANNELS`."""


POINTWISE_GEMM = True
"""Whether the narrow (AVX2) build computes a 1x1 Conv (of one group, or
of several: :data:`POINTWISE_GROUPS`) with a constant weight on the
provider's packed GEMM (``gemm.pointwise``): the weight packed once, the
input planes read in place, the bias, residual and clamp added to the
output's tiles while they are in L1, the output written where the node
wants it (its channels of a FusedConvConcat's tensor too), rather than a
BLAS matmul, a pass for the bias and a copy. Measured on a Zen 3 (AVX2,
OpenBLAS's Haswell kernels on the kernels' OpenMP team), sessions
alternating run by run in one process:
SqueezeNet's 1x1 Convs 0.5-0.7x their time on 2 threads (16 -> 64 on 55x55:
80 us, from 152), the whole model 0.92-0.97x (0.98-1.02x on 1 thread);
Inception v1 0.97-0.98x, Inception v2 0.99x, DenseNet-121 0.985-1.0x,
ResNet-50 0.99-1.02x. The tiles' sums run at 65-77 GFLOP/s on one thread
(the packed GEMM without the epilogue at 73-87): the epilogue runs on each
row block's panel once its sums are whole, outside the tile loop (inside
it, its values pushed the sums onto the stack: 37-41 GFLOP/s)."""


POINTWISE_MAX_WEIGHTS = 1 << 16
"""Most weights (output x input channels) of a 1x1 Conv for
:data:`POINTWISE_GEMM`: every panel of the input is multiplied by all of
them, which must stay in L2. One Conv a session, 2 threads: 512 -> 256 on
13x13, 1024 -> 128 and 2048 -> 512 on 7x7, 512 -> 1000 on 13x13 (128K-1M
weights) took 1.06-1.23x BLAS's time; up to 64K weights 0.85-1.0x."""


POINTWISE_ALIASED_PLANE = 64
"""Planes of a multiple of this many positions keep BLAS: rows a multiple
of 256 bytes apart fall into 16 sets of a 4 KiB-way L1 cache, so the panel
the GEMM reads in place (a row per input channel) and the tiles it writes
evict themselves. Inside ResNet-50 its 1x1 Convs on 56x56 (rows 12544
bytes apart) took 1.1-1.2x BLAS's time on 2 threads, 1.2-1.45x on 1,
where those on 28x28 gained."""


POINTWISE_GROUPS = True
"""Whether :data:`POINTWISE_GEMM` takes grouped 1x1 Convs too (not
depthwise ones), each group's product its own, the groups' shares in one
parallel region (before the narrow build's direct kernel, see
:data:`DIRECT_NARROW_GROUP_CHANNELS`). ShuffleNet's, 4 groups, one Conv
and Relu a session against the direct kernel on 2 threads: 272 channels
on 14x14 0.91x the time, 136 and 112 on 28x28 0.8-0.84x; against BLAS per
group on 1 thread 0.93-1.0x; the whole model 0.97x on 2 threads."""


def _use_pointwise(x: np.ndarray, w: np.ndarray, win: Window, group: int, cached: bool) -> bool:
    """Whether a float32 Conv takes the packed GEMM's pointwise path (see
    :data:`POINTWISE_GEMM`)."""
    return (
        POINTWISE_GEMM
        and cached
        and (group == 1 or (POINTWISE_GROUPS and w.shape[0] > group))
        and gemm.ext.VECTOR >= 8
        and ext.DIRECT_VECTOR < DIRECT_WIDE_VECTOR
        and all(k == 1 for k in win.kernel)
        and w.shape[2:] == tuple(win.kernel)
        and not any(win.pads_begin)
        and not any(win.pads_end)
        and 0 < w.size <= POINTWISE_MAX_WEIGHTS * group
        and math.prod(win.out) % POINTWISE_ALIASED_PLANE != 0
        and x.size > 0
    )


_Epilogue = tuple[np.ndarray, "np.ndarray | None", float, float]
"""What a kernel that writes a Conv's output adds as it writes (checked by
:func:`_epilogue`): the bias (float32 (M,), or empty: none), the residual
(contiguous float32 of the output's shape, or None) and the clamp's bounds."""

_F32 = np.dtype(np.float32)


def _epilogue(
    b: np.ndarray | None, z: np.ndarray | None, shape: tuple[int, ...], clamp: Clamp | None
) -> _Epilogue:
    """The bias, residual and clamp bounds of a Conv whose output has
    ``shape`` (N, M, ...), checked against it (a plain tuple: this runs for
    every Conv of every run).

    Raises:
        ValueError: ``b`` is not of shape (M,), or ``z`` not of ``shape``.
    """
    if b is None:
        bias = _NO_BIAS
    elif b.shape != (shape[1],):
        raise ValueError(f"bias of shape {list(b.shape)} for {shape[1]} output channels")
    elif b.dtype == _F32 and b.flags.c_contiguous:
        bias = b
    else:
        bias = f32_contiguous(b)
    if z is not None:
        if z.shape != tuple(shape):
            raise ValueError(
                f"residual Z of shape {list(z.shape)} for an output of {list(shape)}"
            )
        z = f32_contiguous(z)
    lo, hi = clamp if clamp is not None else _NO_CLAMP
    return bias, z, lo, hi


class _PointwiseCall(NamedTuple):
    """The packed GEMM's call for a 1x1 Conv of one input and weight shape
    (see :func:`_pointwise_call`): worked out once, so that a run does only
    what the arrays need."""

    m: int
    """Output channels."""
    c: int
    """Input channels."""
    p: int
    """Output positions of an image."""
    y: tuple[int, ...]
    """The output's shape."""
    work: int
    """The call's work for :func:`threads_for`."""
    sub: tuple[slice, ...] | None
    """The slices of a strided window's positions, else ``None``."""


def _pointwise_call(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], win: Window, group: int
) -> _PointwiseCall:
    """:class:`_PointwiseCall` of an input and weight of these shapes."""
    m, c, p = w_shape[0], x_shape[1], math.prod(win.out)
    sub = None
    if any(st != 1 for st in win.strides):
        sub = (slice(None), slice(None), *(slice(None, None, st) for st in win.strides))
    return _PointwiseCall(m, c, p, (x_shape[0], m, *win.out), m * p * (c // group) // 8, sub)


def _conv_pointwise(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    z: np.ndarray | None,
    call: _PointwiseCall,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache,
    out: np.ndarray | None = None,
    group: int = 1,
    interleave: bool = False,
) -> np.ndarray:
    """A 1x1 Conv (see :data:`POINTWISE_GEMM`) of float32 ``x`` (N, C, *S)
    in ``group`` groups with its bias, residual ``z`` and clamp; ``call``:
    :func:`_pointwise_call` of these shapes; ``packs`` keeps the weight
    packed (:func:`_pack_pointwise`). Strided windows read the positions
    they take, copied from the input first. The result goes to ``out`` if
    given (the output's shape, each image's channels C-contiguous). With
    ``interleave`` its channels come out shuffled in ``group`` groups
    (:func:`shuffle_channels`), written so by the GEMM."""
    if call.sub is not None:
        x = x[call.sub]
    x = f32_contiguous(x)
    y = np.empty(call.y, np.float32) if out is None else out
    bias, z, lo, hi = _epilogue(b, z, y.shape, clamp)
    ap = packs.transform(w)
    share = threads_for(call.work, threads)
    m, c, p = call.m, call.c, call.p
    if len(y) == 1 and y.flags.c_contiguous:  # one image: its planes as they are
        gemm.ext.pointwise(
            ap, m, x.reshape(c, p), y.reshape(m, p), bias,
            None if z is None else z.reshape(m, p), lo, hi, share, group, interleave,
        )  # fmt: skip
        return y
    for i in range(len(y)):
        yi = y[i]
        if not yi.flags.c_contiguous:
            raise ValueError("the output's channels of one image are not contiguous")
        gemm.ext.pointwise(
            ap, m, x[i].reshape(c, p), yi.reshape(m, p), bias,
            None if z is None else z[i].reshape(m, p), lo, hi, share, group, interleave,
        )  # fmt: skip
    return y


def shuffle_channels(y: np.ndarray, groups: int, threads: int) -> np.ndarray:
    """ShuffleNet's channel shuffle of ``y`` (N, C, ...): the Reshape to
    (N, groups, C / groups, ...), Transpose of axes 1 and 2 and Reshape
    back, as one copy; channel ``j * groups + i`` of the result is channel
    ``i * C / groups + j`` of ``y``.

    Raises:
        ValueError: C is not a multiple of ``groups``.
    """
    n, c = y.shape[:2]
    if groups < 1 or c % groups:
        raise ValueError(f"shuffle of {c} channels in {groups} groups")
    if groups == 1 or c == groups:
        return y
    split = y.reshape(n, groups, c // groups, -1)
    return shape_ops.transpose_copy(split, [0, 2, 1, 3], threads).reshape(y.shape)


def _pack_pointwise(w: np.ndarray, group: int = 1) -> np.ndarray:
    """A 1x1 Conv's weight (M, C / group, 1, ...) packed for
    ``gemm.pointwise``: each group's (M / group, C / group) a row."""
    return gemm.ext.pack_a_batch(f32_contiguous(w).reshape(group, w.shape[0] // group, -1))


def _use_direct(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, cached: bool, threads: int = 2
) -> bool:
    """Whether a float32 Conv takes the direct path (see
    :data:`DIRECT_MAX_DEPTH`, :data:`DIRECT_IMAGE_CHANNELS`,
    :data:`DIRECT_NARROW_SHALLOW_DEPTH`, :data:`DIRECT_NARROW_GROUP_CHANNELS`,
    :data:`DIRECT_NARROW_SMALL_POSITIONS` and :data:`DIRECT_WIDE_VECTOR`);
    ``cached``: its weight is constant (Winograd's transform would be
    cached); ``threads``: the node's threads."""
    if not (
        len(win.out) in (1, 2)
        and w.shape[2:] == tuple(win.kernel)
        and min(win.pads_begin) >= 0
        and min(win.pads_end) >= 0
        and x.size
        and w.size
    ):
        return False
    taps = math.prod(win.kernel)
    if ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR:
        if (
            min(x.shape[1], w.shape[0]) >= WINOGRAD_OVER_DIRECT_CHANNELS
            and math.prod(win.out) >= WINOGRAD_OVER_DIRECT_POSITIONS
            and _use_winograd(x, w, win, group, cached)
        ):
            return False
        if group > 1:
            depthwise = group == x.shape[1] and w.shape[0] == group
            return DIRECT_GROUPS and not depthwise
        return taps > 1 or DIRECT_POINTWISE
    if group > 1:
        depthwise = group == x.shape[1] and w.shape[0] == group
        return (
            DIRECT_GROUPS
            and not depthwise
            and threads >= 2
            and x.shape[1] // group >= DIRECT_NARROW_GROUP_CHANNELS
        )
    if _narrow_small(win):
        return not _use_winograd(x, w, win, group, cached)
    if _narrow_wide_window(win, x.shape[1]):
        return True
    image = (
        x.shape[1] <= DIRECT_IMAGE_CHANNELS
        and taps >= DIRECT_IMAGE_MIN_TAPS
        and len(win.out) == 2
        and max(win.strides) > 1
    )
    shallow = (
        threads >= 2
        and taps >= DIRECT_IMAGE_MIN_TAPS
        and len(win.out) == 2
        and x.shape[1] * taps <= DIRECT_NARROW_SHALLOW_DEPTH
        and math.prod(win.out) >= DIRECT_NARROW_SHALLOW_POSITIONS
    )
    return (
        group == 1
        and (taps >= DIRECT_MIN_TAPS or image or shallow)
        and x.shape[1] * taps <= DIRECT_MAX_DEPTH
        and (shallow or not _use_winograd(x, w, win, group, cached))
    )


def _use_channel_vector(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, cached: bool
) -> bool:
    """Whether a float32 Conv takes the channel-vector kernel (see
    :data:`CHANNEL_VECTOR`; the wide build's rule: :data:`CHANNEL_VECTOR_WIDE`):
    the narrow build's 2-D Convs of one group with a window of 3x3 or more,
    at least :data:`CHANNEL_VECTOR_MIN_DEPTH` deep
    (and :data:`CHANNEL_VECTOR_SHALLOW_DEPTH`), except those Winograd keeps
    (:data:`CHANNEL_VECTOR_WINOGRAD_CHANNELS`) and strided ones to small
    planes (:func:`_narrow_small`, where the direct kernel's flat mode broke
    even or won); ``cached``: the weight is constant."""
    if not (
        CHANNEL_VECTOR
        and ext.CHANNEL_VECTOR_NATIVE
        and group == 1
        and len(win.out) == 2
        and w.shape[2:] == tuple(win.kernel)
        and min(win.kernel) >= 3
        and min(win.pads_begin) >= 0
        and min(win.pads_end) >= 0
        and x.size
        and w.size
    ):
        return False
    depth = x.shape[1] * math.prod(win.kernel)
    if ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR:
        positions = math.prod(win.out)
        return (
            CHANNEL_VECTOR_WIDE
            and all(st == 1 for st in win.strides)
            and depth >= CHANNEL_VECTOR_SHALLOW_DEPTH
            and positions <= CHANNEL_VECTOR_WIDE_POSITIONS
            and int(ext.channel_vector_items(w.shape[0], positions)) >= 2
        )
    if depth < CHANNEL_VECTOR_MIN_DEPTH or (
        depth < CHANNEL_VECTOR_SHALLOW_DEPTH and w.shape[0] % int(ext.CHANNEL_VECTOR_BLOCK)
    ):
        return False
    if _use_winograd(x, w, win, group, cached):
        return x.shape[1] < CHANNEL_VECTOR_WINOGRAD_CHANNELS or (
            min(x.shape[1], w.shape[0]) <= CHANNEL_VECTOR_WINOGRAD_CHANNELS
            and math.prod(win.out) <= CHANNEL_VECTOR_WINOGRAD_POSITIONS
        )
    return not (max(win.strides) > 1 and _narrow_small(win))


def _narrow_small(win: Window) -> bool:
    """Whether a Conv with this window has the small 2-D output that the
    narrow build computes directly in flat mode when Winograd does not
    take it (see :data:`DIRECT_NARROW_SMALL_POSITIONS`)."""
    return (
        len(win.out) == 2
        and math.prod(win.kernel) >= DIRECT_IMAGE_MIN_TAPS
        and math.prod(win.out) <= DIRECT_NARROW_SMALL_POSITIONS
    )


def _narrow_wide_window(win: Window, channels: int) -> bool:
    """Whether an unstrided 2-D Conv of one group with this window over
    ``channels`` input channels is one the narrow build computes directly in
    flat mode for its wide window (see :data:`DIRECT_NARROW_WIDE_WINDOW_DEPTH`)."""
    depth = channels * math.prod(win.kernel)
    return (
        len(win.out) == 2
        and math.prod(win.kernel) >= DIRECT_MIN_TAPS
        and all(s == 1 for s in win.strides)
        and all(d == 1 for d in win.dilations)
        and DIRECT_MAX_DEPTH < depth <= DIRECT_NARROW_WIDE_WINDOW_DEPTH
    )


def _flat(win: Window, group: int = 1, channels: int = 0) -> bool:
    """Whether the direct kernel runs in flat mode (see ``direct_conv2d``):
    in the build with wide vectors, for grouped Convs (only flat mode takes
    groups), for Convs with small outputs (:func:`_narrow_small`) and for
    wide windows over a few dozen ``channels`` (:func:`_narrow_wide_window`)."""
    return bool(
        ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR
        or group > 1
        or _narrow_small(win)
        or (group == 1 and _narrow_wide_window(win, channels))
    )


def _conv_direct(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    z: np.ndarray | None,
    win: Window,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache | None,
    group: int = 1,
    call: _DirectCall | None = None,
    out: np.ndarray | None = None,
    interleave: bool = False,
) -> np.ndarray:
    """The direct convolution of float32 ``x`` (N, C, *S), 1 or 2 spatial
    dims, in ``group`` groups, with its bias, residual ``z`` and clamp, in
    one pass over the output. ``packs`` keeps ``direct_filter(w, group)``;
    ``call`` is :func:`_direct_call` of these shapes (computed if ``None``).
    The result goes to ``out`` if given: the output's shape, each image's
    channels C-contiguous (a slice of channels of a larger tensor). With
    ``interleave`` (flat mode, groups, no residual) the groups' channels
    come out shuffled (:func:`shuffle_channels`)."""
    if call is None:
        call = _direct_call(x.shape, w.shape, win, group)
    if packs is not None:
        wp = packs.transform(w)
    else:
        wp = channel_vector_filter(w) if call.vector else direct_filter(w, group)
    if call.sub is not None:  # a strided 1x1 window reads only these positions
        x = x[(slice(None), slice(None), *(slice(None, None, st) for st in call.sub))]
    x4 = f32_contiguous(x).reshape(call.x4)
    y = np.empty(call.y, np.float32) if out is None else out
    y4 = y.reshape(call.y4)
    bias, z, lo, hi = _epilogue(b, z, y.shape, clamp)
    z4 = None if z is None else z.reshape(call.y4)
    share = threads_for(call.work, threads)
    size = call.size
    scratch = _scratch.get(size) if size <= _COL_SCRATCH_MAX else np.empty(size, np.float32)
    if call.vector:
        for i in range(len(y4)):
            ext.channel_vector_conv2d(
                x4[i], wp, y4[i], bias, None if z4 is None else z4[i], scratch, *call.window,
                lo, hi, share,
            )  # fmt: skip
        return y
    for i in range(len(y4)):
        ext.direct_conv2d(
            x4[i], wp, y4[i], bias, None if z4 is None else z4[i], scratch,
            *call.args, lo, hi, share, call.flat, group, interleave,
        )  # fmt: skip
    return y


class _DirectCall(NamedTuple):
    """The shapes and arguments of the direct kernel's call for one input,
    weight and window (see :func:`_direct_call`)."""

    x4: tuple[int, ...]
    """The input as (N, C, H, W) (1-D: H = 1)."""
    y: tuple[int, ...]
    """The output's shape."""
    y4: tuple[int, ...]
    """The output as (N, M, OH, OW)."""
    args: tuple[int, int, int, int, int, int]
    """Strides, begin pads and dilations (rows, then columns)."""
    size: int
    """Floats of the kernel's scratch (the channel-vector kernel's: on as
    many threads as the node may use, each thread's copy of its rows)."""
    work: int
    """The call's work for :func:`threads_for` (its threads are picked at
    each call: the run's share of the cores changes)."""
    flat: bool
    """Whether it runs in flat mode."""
    sub: tuple[int, ...] | None = None
    """The strides of an unpadded 1x1 window, whose positions are taken from
    the input first (the kernel then runs it with stride 1, reading them in
    place, rather than copying every phase of the input); else ``None``."""
    vector: bool = False
    """Whether the channel-vector kernel runs it (``channel_vector_conv2d``,
    see :data:`CHANNEL_VECTOR`) rather than ``direct_conv2d``."""
    window: tuple[int, ...] = ()
    """The channel-vector kernel's window arguments: the window's size,
    then :attr:`args`."""


def _direct_call(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    win: Window,
    group: int,
    vector: bool = False,
    threads: int = 1,
) -> _DirectCall:
    """The direct kernel's call for an input and weight of these shapes
    (``vector``: the channel-vector kernel's on up to ``threads`` threads)."""
    n, c = x_shape[:2]
    m = w_shape[0]
    k3, s3, pb3, _, d3, o3 = win.padded3()
    oh, ow = o3[1], o3[2]
    flat = not vector and _flat(win, group, c)
    spatial = tuple(x_shape[2:])
    sub = None
    pointwise = all(k == 1 for k in win.kernel) and not any(win.pads_begin + win.pads_end)
    if pointwise and any(st > 1 for st in win.strides):
        sub, spatial = tuple(win.strides), tuple(win.out)
        s3, d3 = (1, 1, 1), (1, 1, 1)
    if not vector:
        size = ext.direct_conv2d_scratch(c, oh, ow, k3[1], k3[2], s3[1], s3[2], d3[1], d3[2], flat)
    else:  # the most any share of the threads needs
        size = max(
            ext.channel_vector_conv2d_scratch(
                c, oh, ow, m, k3[1], k3[2], s3[1], s3[2], d3[1], d3[2], t
            )
            for t in range(1, max(threads, 1) + 1)
        )
    return _DirectCall(
        x4=(n, c, *((1,) * (2 - len(win.out))), *spatial),
        y=(n, m, *win.out),
        y4=(n, m, oh, ow),
        args=(s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2]),
        size=int(size),
        work=m * oh * ow * (c // group) * k3[1] * k3[2] // 8,
        flat=flat,
        sub=sub,
        vector=vector,
        window=(k3[1], k3[2], s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2]),
    )


def _use_winograd(x: np.ndarray, w: np.ndarray, win: Window, group: int, cached: bool) -> bool:
    """Whether ``_conv_f32`` takes the Winograd F(2x2, 3x3) path.

    Only 2-D 3x3 convolutions with stride 1, dilation 1 and one group, with at
    least ``WINOGRAD_MIN_CHANNELS`` input and output channels and enough
    tiles. The thresholds come from timing both paths (2 threads, OpenBLAS):
    Winograd loses when there are many more output than input channels (the
    output transform, per output channel, is then large next to the matmul
    work it saves) unless the image is large, and when the matmuls are
    narrow (few tiles), where they read more weight bytes than im2col's.
    Up to 4x more output than input channels it still wins on small images
    (up to ``WINOGRAD_MAX_TILES_WIDENING`` tiles; SqueezeNet's 32 -> 128 and
    48 -> 192 expand layers on 27x27 and 13x13: 1.4-1.6x faster, 1 or 2
    threads), where its transformed input and output stay in cache.
    """
    if not (
        group == 1
        and len(win.out) == 2
        and win.kernel == (3, 3)
        and w.shape[2:] == (3, 3)
        and win.strides == (1, 1)
        and win.dilations == (1, 1)
        and min(win.pads_begin) >= 0
        and min(win.pads_end) >= 0
    ):
        return False
    c, m = x.shape[1], w.shape[0]
    tiles = x.shape[0] * ((win.out[0] + 1) // 2) * ((win.out[1] + 1) // 2)
    if min(c, m) < WINOGRAD_MIN_CHANNELS:
        return False
    if tiles < (WINOGRAD_MIN_TILES if cached else WINOGRAD_MIN_TILES_UNCACHED):
        return False
    return (
        m <= 2 * c
        or (m <= 4 * c and tiles <= WINOGRAD_MAX_TILES_WIDENING)
        or (c >= 64 and tiles >= 49)
    )


def _plane_size(n: int) -> int:
    """``n`` rounded up to a multiple of 16 floats that is an odd number of
    64-byte lines: the 16 planes of V and M then fall in 16 different cache
    sets (planes 4 KiB apart would evict each other in the transforms)."""
    size = -(-n // 16) * 16
    return size if (size // 16) % 2 else size + 16


WINOGRAD_BATCHED_MAX_WORK = 1 << 22
"""Most multiply-adds a product (output channels x input channels x tiles)
for which the narrow (AVX2) build's Winograd path, on two threads or more,
runs its 16 products one per thread at a time on the provider's packed
GEMM, with the filter transform packed once per weight
(``pack_a_batch``), rather than one after the other through numpy's BLAS,
each split over the threads. Measured on a Zen 3 (OpenBLAS's Haswell
kernels on the kernels' OpenMP team, 2 threads), the products alone: 16
-> 128 channels to 512 -> 512, 16 to 784 tiles, up to 4.2 million each,
0.58-1.0x the time; larger ones (128 -> 128 on 504 tiles, 256 -> 512 on
252) 1.09-1.21x. Whole models against BLAS for every product, sessions
alternating in one process (2 rounds): SqueezeNet 0.92-0.93x, Inception v1
0.94-0.97x, Inception v2 0.9-0.93x, ResNet-50 0.95-0.96x, DenseNet 0.96x,
VGG-19 0.98x. Packing the transform at every product instead lost on
products of 64 channels or more with 49 tiles or fewer (1.05-1.2x)."""


WINOGRAD_EPILOGUE = True
"""Whether a Winograd Conv without a residual adds its bias and clamp (a
fused Relu or Clip) in the output transform, writing where the node wants
its output (its channels of a FusedConvConcat's tensor too), rather than in
a pass of its own and a copy. Whole models against that, sessions
alternating run by run in one process (Zen 3, 2 threads): SqueezeNet
0.945x, Inception v1 0.976x, Inception v2 0.981x, VGG-19 0.989x, ResNet-50
0.99x, DenseNet-121 0.994x; on 1 thread 0.993-1.0x."""


def _winograd_batched(tiles: int, m: int, c: int, threads: int) -> bool:
    """Whether a step of ``tiles`` Winograd tiles of ``c`` -> ``m`` channels on
    ``threads`` threads runs its products on the packed GEMM (see
    :data:`WINOGRAD_BATCHED_MAX_WORK`)."""
    return (
        ext.DIRECT_VECTOR < DIRECT_WIDE_VECTOR
        and gemm.ext.VECTOR >= 8
        and threads >= 2
        and m * c * tiles <= WINOGRAD_BATCHED_MAX_WORK
    )


def _conv_winograd(
    x: np.ndarray,
    u: np.ndarray,
    win: Window,
    threads: int,
    packed: FilterCache | None = None,
    bias: np.ndarray | None = None,
    clamp: Clamp | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Winograd F(2x2, 3x3) convolution of contiguous float32 ``x`` (N, C,
    H, W) with filter transform ``u`` (16, M, C); stride 1. ``packed``
    keeps ``u`` packed for the packed GEMM (packed at each call that needs
    it without). The output transform adds ``bias`` (M values, or None) and
    clamps to ``clamp`` as it writes the output: into ``out`` if given (the
    output's shape, rows contiguous: a FusedConvConcat's channels too)."""
    n, c = x.shape[:2]
    m = u.shape[1]
    oh, ow = win.out
    ph, pw = win.pads_begin
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    y = np.empty((n, m, oh, ow), np.float32) if out is None else out
    checked, _, lo, hi = _epilogue(bias, None, y.shape, clamp)
    bias = None if bias is None else checked
    # images per step and tile rows per step, within the V + M byte budget
    row_bytes = 64 * (c + m) * tw
    if row_bytes * th <= _WINOGRAD_BLOCK_BYTES:
        images, band = max(1, _WINOGRAD_BLOCK_BYTES // (row_bytes * th)), th
    else:
        images, band = 1, max(1, _WINOGRAD_BLOCK_BYTES // row_bytes)
    images = min(images, n)
    tiles = images * min(band, th) * tw
    v_size, m_size = 16 * _plane_size(c * tiles), 16 * _plane_size(m * tiles)
    buf = _scratch.get(v_size + m_size)
    v_buf = buf[:v_size].reshape(16, -1)
    m_buf = buf[v_size:].reshape(16, -1)
    for i in range(0, n, images):
        xi, yi = x[i : i + images], y[i : i + images]
        for ty0 in range(0, th, band):
            ty1 = min(th, ty0 + band)
            t = len(xi) * (ty1 - ty0) * tw
            work = 16 * t * max(c, m)
            wino.input_transform(xi, v_buf, ph, pw, ty0, ty1, tw, threads_for(work, threads))
            vv = v_buf[:, : c * t].reshape(16, c, t)
            mm = m_buf[:, : m * t].reshape(16, m, t)
            if _winograd_batched(t, m, c, threads):
                ap = packed.transform(u) if packed is not None else gemm.ext.pack_a_batch(u)
                nt = threads_for(16 * m * c * t, threads)
                gemm.ext.batched_sgemm_packed_a(ap, m, vv, mm, nt)
            else:
                np.matmul(u, vv, out=mm)
            share = threads_for(work, threads)
            wino.output_transform(m_buf, yi, ty0, ty1, tw, share, bias, lo, hi)
    return y


def _winograd_operands(
    w: np.ndarray, filters: WinogradFilters | None
) -> tuple[np.ndarray, FilterCache | None]:
    """The Winograd filter transform of ``w`` and the cache of its packed
    form: kept by ``filters`` for a constant weight; without, computed (and
    packed where needed) at each call."""
    if filters is None:
        return winograd_filter(w), None
    return filters.transform(w), filters.packed


def _conv_f32(
    x: np.ndarray,
    w: np.ndarray,
    win: Window,
    group: int,
    threads: int,
    filters: WinogradFilters | None = None,
    bias: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, bool]:
    """Convolution of float32 ``x`` (N, C, *S), 1-3 spatial dims, and whether
    it added ``bias`` (one value per output channel) too: the depthwise
    kernel starts from it instead of zeros, the other paths leave it to the
    caller. The result goes to ``out`` if given: a C-contiguous float32
    array of the output's shape (a FusedConvConcat's channels of one image).

    ``filters`` caches the Winograd filter transform of a constant ``w``;
    without it the transform is computed at each call that needs it.
    """
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    out_sp = win.out
    p = math.prod(out_sp)
    if n * m * p == 0:
        return np.empty((n, m, *out_sp), np.float32), False
    if _use_winograd(x, w, win, group, filters is not None):
        u, packed = _winograd_operands(w, filters)
        return _conv_winograd(f32_contiguous(x), u, win, threads, packed, out=out), False
    if out is not None and not (out.flags.c_contiguous and out.dtype == np.float32):
        raise ValueError("a Conv's output buffer must be C-contiguous float32")
    y = np.empty((n, m, *out_sp), np.float32) if out is None else out
    ksize = math.prod(win.kernel)
    x = f32_contiguous(x)
    w = f32_contiguous(w)
    k3, s3, pb3, _, d3, o3 = win.padded3()
    threads = threads_for_memory_bound(c * ksize * p, threads)
    if group == c and mg == 1 and len(out_sp) <= 2:
        # the kernel starts each channel from its bias (or from zero)
        if bias is not None and bias.shape != (m,):
            raise ValueError(f"bias of shape {list(bias.shape)} for {m} output channels")
        b = np.zeros(m, np.float32) if bias is None else f32_contiguous(bias)
        shape3 = (c, *((1,) * (2 - len(out_sp))), *x.shape[2:])
        for i in range(n):
            ext.depthwise2d(
                x[i].reshape(shape3),
                w.reshape(c, k3[1], k3[2]),
                y[i].reshape(c, o3[1], o3[2]),
                s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2], threads, b,
            )  # fmt: skip
        return y, bias is not None
    w2 = w.reshape(group, mg, cg * ksize)
    if ksize == 1 and not any(win.pads_begin) and not any(win.pads_end):
        if any(s != 1 for s in win.strides):
            sub = (slice(None), slice(None), *(slice(None, None, s) for s in win.strides))
            x = np.ascontiguousarray(x[sub])
        cols = x.reshape(n, group, cg, p)
        for i in range(n):
            if group == 1:
                np.matmul(w2[0], cols[i, 0], out=y[i].reshape(m, p))
            else:
                np.matmul(w2, cols[i], out=y[i].reshape(group, mg, p))
        return y, False
    rows = c * ksize
    # im2col's buffer lives only for this call: small ones come from the
    # thread's scratch (fresh memory page-faults on first touch, which costs
    # as much as a small convolution); huge ones are allocated and freed.
    if rows * p <= _COL_SCRATCH_MAX:
        col = _scratch.get(rows * p).reshape(rows, p)
    else:
        col = np.empty((rows, p), np.float32)
    x5 = x.reshape(n, c, *((1,) * (3 - len(out_sp))), *x.shape[2:])
    for i in range(n):
        ext.im2col(x5[i], col, *k3, *s3, *pb3, *d3, *o3, threads)
        if group == 1:
            np.matmul(w2[0], col, out=y[i].reshape(m, p))
        else:
            np.matmul(w2, col.reshape(group, cg * ksize, p), out=y[i].reshape(group, mg, p))
    return y, False


def _conv_numpy(x: np.ndarray, w: np.ndarray, win: Window, group: int) -> np.ndarray:
    """Convolution without bias for any dtype and spatial rank."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    ksize = math.prod(win.kernel)
    pad = [(0, 0), (0, 0), *zip(win.pads_begin, win.pads_end, strict=True)]
    xp = np.pad(x, pad)
    col = np.empty((n, c, ksize, *win.out), x.dtype)
    for k, off in enumerate(kernel_offsets(win.kernel)):
        start = [int(o) * d for o, d in zip(off, win.dilations, strict=True)]
        col[:, :, k] = xp[strided_slice(start, win.strides, win.out)]
    col = col.reshape(n, group, cg * ksize, math.prod(win.out))
    y = np.matmul(w.reshape(group, mg, cg * ksize), col)
    return y.reshape(n, m, *win.out).astype(x.dtype, copy=False)


def _conv_attrs(info: NodeInfo) -> dict[str, Any]:
    a = info.attrs
    return {
        "auto_pad": a.get("auto_pad", "NOTSET"),
        "pads": a.get("pads"),
        "strides": a.get("strides"),
        "dilations": a.get("dilations"),
    }


@registry.kernel("Conv", since=1, until=10, types={"T": FLOATS})
@registry.kernel("Conv", since=11, until=21, types={"T": FLOATS})
@registry.kernel("Conv", since=22, types={"T": FLOATS})
def conv(info: NodeInfo) -> Compute:
    """Conv with groups, dilations, strides, explicit or automatic pads."""
    return build_conv(info)


class _Plan(NamedTuple):
    """How a Conv node runs an input and weight of given shapes and dtype."""

    win: Window
    fast: bool
    """Whether the float Cython paths take it."""
    call: _DirectCall | None
    """The direct or channel-vector kernel's call, if one of them runs it."""
    pointwise: _PointwiseCall | None
    """The packed GEMM's call, if it runs it as a 1x1 Conv."""


class PoolStage(NamedTuple):
    """The max pool a FusedConvPool applies to its Conv's output (see
    :func:`build_conv`)."""

    window_for: Callable[[tuple[int, ...]], PoolWindow]
    """The pool's window for the Conv output's spatial size."""
    pool: Compute
    """The MaxPool kernel, for the Convs the fused kernel does not take."""


def _fused_pool(call: _DirectCall | None, win: Window, pool_win: Window, x: np.ndarray) -> bool:
    """Whether ``direct_conv2d_maxpool`` takes a Conv of this call and
    window, and its pool: the direct kernel's flat mode on one group and 2-D
    windows, float32."""
    return (
        call is not None
        and call.flat
        and not call.vector
        and call.sub is None
        and len(win.out) == 2
        and len(pool_win.out) == 2
        and x.dtype == _F32
    )


def _conv_direct_pool(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    pool_win: PoolWindow,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache | None,
    call: _DirectCall,
) -> np.ndarray:
    """The direct convolution of float32 ``x`` (N, C, H, W), one group, with
    its bias and clamp, max-pooled by ``pool_win`` in the same pass
    (``direct_conv2d_maxpool``: the Conv's output is pooled a band at a
    time, in the cache, and never written whole)."""
    wp = packs.transform(w) if packs is not None else direct_filter(w)
    x4 = f32_contiguous(x).reshape(call.x4)
    y = np.empty((x.shape[0], w.shape[0], *pool_win.out), np.float32)
    bias, _, lo, hi = _epilogue(b, None, call.y, clamp)
    k3, s3, pb3, _, d3, _ = pool_win.padded3()
    size = call.size
    scratch = _scratch.get(size) if size <= _COL_SCRATCH_MAX else np.empty(size, np.float32)
    share = threads_for(call.work, threads)
    for i in range(len(y)):
        ext.direct_conv2d_maxpool(
            x4[i], wp, y[i], bias, scratch, *call.y4[2:], *call.args, lo, hi,
            k3[1], k3[2], s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2], share,
        )  # fmt: skip
    fill_empty_windows(y, pool_win)  # windows of pads only, as MaxPool's
    return y


def build_conv(
    info: NodeInfo,
    *,
    clamp: Clamp | None = None,
    residual: bool = False,
    concat: tuple[int, int] | None = None,
    shuffle: int = 1,
    pool: PoolStage | None = None,
) -> Compute:
    """The Conv kernel of ``info``; with ``clamp`` its output is clamped to
    ``(lo, hi)`` in the bias's pass (FusedConv's Relu and Clip). With
    ``residual`` it takes ``(x, w, z, b=None)`` and adds ``z`` (of the
    output's shape) in that pass too (FusedConvAdd). With ``concat``
    ``(channels, offset)`` it takes ``(x, w, b=None, into=None)`` and writes
    its output as the channels from ``offset`` of a tensor of ``channels``
    channels (FusedConvConcat, see :func:`concat_buffer`), which it returns.
    With ``shuffle`` > 1 (no residual or concat) its output's channels come
    out shuffled in that many groups (FusedConvShuffle, see
    :func:`shuffle_channels`): written so by the packed GEMM when the Conv
    is 1x1 in as many groups, else shuffled after. With ``pool`` (no
    residual, concat or shuffle) its output is max-pooled (FusedConvPool):
    in the direct kernel's pass where it takes the Conv (see
    :func:`_fused_pool`), else by ``pool.pool`` after."""
    if shuffle > 1 and (residual or concat is not None):
        raise ValueError(f"{info.describe()}: a channel shuffle with a residual or concat")
    if pool is not None and (residual or concat is not None or shuffle > 1):
        raise ValueError(f"{info.describe()}: a pool with a residual, concat or shuffle")
    check_window_attrs(info.attrs)
    group = int(info.attrs.get("group", 1))
    kernel_shape = info.attrs.get("kernel_shape")
    geometry = _conv_attrs(info)
    threads = thread_count(info)
    constant_weight = constant_input(info, 1)
    filters = WinogradFilters() if constant_weight else None
    packs = FilterCache(lambda w: direct_filter(w, group)) if constant_weight else None
    vector_packs = FilterCache(channel_vector_filter) if constant_weight else None
    pointwise_packs = FilterCache(lambda w: _pack_pointwise(w, group)) if constant_weight else None
    # per input and weight shape and dtype seen (a few per node): the window,
    # whether the Cython paths take it, the direct kernel's call and the
    # packed GEMM's where it takes it as a 1x1 Conv
    plans: dict[Hashable, _Plan] = {}

    def plan(x: np.ndarray, w: np.ndarray) -> _Plan:
        if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
            raise ValueError(
                f"{info.describe()}: input channels {x.shape[1]} / weight {w.shape} "
                f"do not match group={group}"
            )
        win = window(x.shape[2:], kernel_shape or w.shape[2:], partial=False, **geometry)
        fast = x.dtype in (np.float32, np.float16) and 1 <= len(win.out) <= 3
        call = None
        pointwise = None
        if fast and _use_pointwise(x, w, win, group, pointwise_packs is not None):
            pointwise = _pointwise_call(x.shape, w.shape, win, group)
        elif fast and _use_channel_vector(x, w, win, group, filters is not None):
            call = _direct_call(x.shape, w.shape, win, group, vector=True, threads=threads)
        elif fast and _use_direct(x, w, win, group, filters is not None, threads):
            call = _direct_call(x.shape, w.shape, win, group)
        return _Plan(win, fast, call, pointwise)

    def lookup(x: np.ndarray, w: np.ndarray) -> _Plan:
        key = (x.shape, w.shape, x.dtype)
        return plans.get(key) or remember(plans, key, plan(x, w))

    def run(
        x: np.ndarray,
        w: np.ndarray,
        b: np.ndarray | None,
        z: np.ndarray | None,
        out: np.ndarray | None = None,
        how: _Plan | None = None,
    ) -> np.ndarray:
        win, fast, call, pointwise = how or lookup(x, w)
        if fast:
            f32 = x.dtype == _F32
            into = out if f32 else None
            if call is not None:
                cache = vector_packs if call.vector else packs
                y = _conv_direct(x, w, b, z, win, threads, clamp, cache, group, call, into)
                return y if f32 else y.astype(x.dtype)
            if pointwise is not None and pointwise_packs is not None and POINTWISE_GEMM:
                y = _conv_pointwise(
                    x, w, b, z, pointwise, threads, clamp, pointwise_packs, into, group
                )
                return y if f32 else y.astype(x.dtype)
            if (
                WINOGRAD_EPILOGUE
                and z is None
                and _use_winograd(x, w, win, group, filters is not None)
            ):
                # the output transform adds the bias and clamps
                u, packed = _winograd_operands(w, filters)
                xc = f32_contiguous(x)
                y = _conv_winograd(xc, u, win, threads, packed, b, clamp, into)
                return y.astype(x.dtype, copy=False)
            alone = clamp is None and z is None  # the bias is all the epilogue
            # into the node's buffer where every reshape of it is a view
            target = into if into is not None and into.flags.c_contiguous else None
            y, added = _conv_f32(x, w, win, group, threads, filters, b if alone else None, target)
            if not added:
                _add_bias(y, b, threads, clamp, z)
            return y.astype(x.dtype, copy=False)
        y = _conv_numpy(x, w, win, group)
        _add_bias(y, b, threads, clamp, z)
        return y

    if concat is not None:
        channels, offset = concat

        def compute_into(
            x: np.ndarray,
            w: np.ndarray,
            b: np.ndarray | None = None,
            into: np.ndarray | None = None,
        ) -> tuple[np.ndarray]:
            how = lookup(x, w)
            joined, part = concat_buffer(info, into, (x.shape[0], channels, *how.win.out),
                                         x.dtype, offset, w.shape[0])  # fmt: skip
            y = run(x, w, b, None, part, how)
            if y is not part:
                part[...] = y
            return (joined,)

        return compute_into

    if shuffle > 1:

        def compute_shuffled(
            x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray]:
            how = lookup(x, w)
            pointwise, call = how.pointwise, how.call
            gemm_packs = pointwise_packs
            if (
                pointwise is not None
                and group == shuffle
                and gemm_packs is not None
                and POINTWISE_GEMM
            ):
                # the GEMM writes each group's rows where the shuffle puts them
                y = _conv_pointwise(x, w, b, None, pointwise, threads, clamp, gemm_packs, None,
                                    group, interleave=True)  # fmt: skip
                return (y.astype(x.dtype, copy=False),)
            if (
                call is not None
                and call.flat
                and not call.vector
                and group == shuffle
                and x.dtype == _F32
            ):
                # so does the direct kernel (flat mode, all groups at once)
                y = _conv_direct(x, w, b, None, how.win, threads, clamp, packs, group, call,
                                 interleave=True)  # fmt: skip
                return (y,)
            return (shuffle_channels(run(x, w, b, None, how=how), shuffle, threads),)

        return compute_shuffled

    if pool is not None:
        stage = pool

        def compute_pooled(
            x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray, ...]:
            how = lookup(x, w)
            if how.call is not None and group == 1:
                pool_win = stage.window_for(how.win.out)
                if _fused_pool(how.call, how.win, pool_win, x):
                    return (_conv_direct_pool(x, w, b, pool_win, threads, clamp, packs,
                                              how.call),)  # fmt: skip
            return tuple(stage.pool(run(x, w, b, None, how=how)))

        return compute_pooled

    if residual:

        def compute_residual(
            x: np.ndarray, w: np.ndarray, z: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray]:
            return (run(x, w, b, z),)

        return compute_residual

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        return (run(x, w, b, None),)

    return compute


class _ConcatBuffer(np.ndarray):
    """A tensor a FusedConvConcat kernel made (see :func:`concat_buffer`):
    the only kind of input a kernel writes into."""


def concat_buffer(
    info: NodeInfo,
    into: np.ndarray | None,
    shape: tuple[int, ...],
    dtype: np.dtype,
    offset: int,
    count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The joined tensor of a FusedConvConcat chain, as the node returns it,
    and the channels ``[offset, offset + count)`` of it that ``info``'s Conv
    writes. The last node of the chain (its channels end the tensor's)
    returns a plain ndarray view; the others the buffer itself, for the next
    node to write into.

    ``into`` is the last node's output: written in place when a
    FusedConvConcat kernel made it, since nothing else reads it. Anything
    else (a model could feed a graph input or a constant there) is copied
    into a new tensor first, so that no kernel ever writes into a feed or a
    constant.

    Raises:
        ValueError: ``into`` is not of ``shape`` and ``dtype``, or the
            channels are not within ``shape``'s.
    """
    if offset < 0 or offset + count > shape[1]:
        raise ValueError(
            f"{info.describe()}: channels {offset}..{offset + count} of a tensor of {shape[1]}"
        )
    if into is not None and (into.shape != shape or into.dtype != dtype):
        raise ValueError(
            f"{info.describe()}: Into is {into.dtype}{list(into.shape)}, "
            f"the joined tensor {np.dtype(dtype)}{list(shape)}"
        )
    if type(into) is _ConcatBuffer:
        full = into
    else:
        full = np.empty(shape, dtype).view(_ConcatBuffer)
        if into is not None:
            full[...] = into
    part = full[:, offset : offset + count]
    return (full if offset + count < shape[1] else full.view(np.ndarray)), part


_SAME = ("SAME_UPPER", "SAME_LOWER")


def _transpose_window(info: NodeInfo, spatial: tuple[int, ...], kernel: tuple[int, ...]) -> Window:
    """Pads and output size of ConvTranspose (ONNX spec formulas)."""
    a = info.attrs
    nsp = len(spatial)
    strides = tuple(a.get("strides") or (1,) * nsp)
    dil = tuple(a.get("dilations") or (1,) * nsp)
    out_pad = tuple(a.get("output_padding") or (0,) * nsp)
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    full = [
        s * (i - 1) + op + k for s, i, op, k in zip(strides, spatial, out_pad, span, strict=True)
    ]
    out_shape = list(a.get("output_shape") or [])
    if len(out_shape) > nsp:
        out_shape = out_shape[-nsp:]
    if out_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = out_shape or [i * s for i, s in zip(spatial, strides, strict=True)]
        total = [f - t for f, t in zip(full, target, strict=True)]
        begin, end = split_same_pads(total, auto_pad)
        if out_shape:  # past the full output: zeros at the end, as onnxruntime
            if any(t <= -s for t, s in zip(total, strides, strict=True)):
                raise ValueError(
                    f"{info.describe()}: output_shape {out_shape} is a stride or more past "
                    f"the full output {full}"
                )
            begin = [b if t >= 0 else 0 for b, t in zip(begin, total, strict=True)]
            end = [e if t >= 0 else t for e, t in zip(end, total, strict=True)]
    elif auto_pad == "VALID":
        begin = end = [0] * nsp
    else:
        pads = list(a.get("pads") or [0] * (2 * nsp))
        begin, end = pads[:nsp], pads[nsp:]
    out = tuple(f - b - e for f, b, e in zip(full, begin, end, strict=True))
    return Window(kernel, strides, dil, tuple(begin), tuple(end), out)


def _conv_transpose(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, threads: int
) -> np.ndarray:
    n, c = x.shape[:2]
    mg = w.shape[1]
    cg, m = c // group, mg * group
    ksize = math.prod(win.kernel)
    sp_in = x.shape[2:]
    p_in = math.prod(sp_in)
    dtype = np.float32 if x.dtype == np.float16 else x.dtype
    # col[n, g] = W_g^T @ x_g: (Mg * ksize, P_in) per group.
    wt = w.astype(dtype, copy=False).reshape(group, cg, mg * ksize).transpose(0, 2, 1)
    col = np.matmul(wt, x.astype(dtype, copy=False).reshape(n, group, cg, p_in))
    if dtype == np.float32 and len(sp_in) <= 3 and min(win.out, default=1) > 0:
        y = np.zeros((n, m, *win.out), np.float32)
        k3, s3, pb3, _, d3, o3 = Window(
            win.kernel, win.strides, win.dilations, win.pads_begin, win.pads_end, tuple(sp_in)
        ).padded3()
        lead = (1,) * (3 - len(sp_in))
        for i in range(n):
            y5 = y[i].reshape(m, *lead, *win.out)
            for g in range(group):
                ext.col2im(
                    np.ascontiguousarray(col[i, g]), y5[g * mg : (g + 1) * mg],
                    *k3, *s3, *pb3, *d3, *o3, threads_for(col[i, g].size, threads),
                )  # fmt: skip
        return y
    # numpy path: scatter-add every kernel offset into a buffer covering the
    # full (unpadded) output, then crop the pads.
    col = col.reshape(n, m, ksize, *sp_in)
    full = [
        max(s * (i - 1) + (k - 1) * d + 1, b + o)
        for s, i, k, d, b, o in zip(
            win.strides, sp_in, win.kernel, win.dilations, win.pads_begin, win.out, strict=True
        )
    ]
    buf = np.zeros((n, m, *full), dtype)
    for k, off in enumerate(kernel_offsets(win.kernel)):
        start = [int(o) * d for o, d in zip(off, win.dilations, strict=True)]
        buf[strided_slice(start, win.strides, sp_in)] += col[:, :, k]
    crop: tuple[Any, ...] = (
        Ellipsis,
        *(slice(b, b + o) for b, o in zip(win.pads_begin, win.out, strict=True)),
    )
    return np.ascontiguousarray(buf[crop])


@registry.kernel("ConvTranspose", since=1, until=10, types={"T": FLOATS})
@registry.kernel("ConvTranspose", since=11, until=21, types={"T": FLOATS})
@registry.kernel("ConvTranspose", since=22, types={"T": FLOATS})
def conv_transpose(info: NodeInfo) -> Compute:
    """ConvTranspose with groups, dilations, output_padding and output_shape."""
    check_window_attrs(info.attrs)
    out_pad = info.attrs.get("output_padding")
    if out_pad is not None and any(int(p) < 0 for p in out_pad):
        raise ValueError(f"attribute output_padding must not be negative, got {list(out_pad)}")
    group = int(info.attrs.get("group", 1))
    kernel_shape = info.attrs.get("kernel_shape")
    auto_pad = info.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    threads = thread_count(info)

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        kernel = tuple(int(k) for k in (kernel_shape or w.shape[2:]))
        win = _transpose_window(info, tuple(x.shape[2:]), kernel)
        if min(win.out, default=0) < 0:
            raise ValueError(
                f"{info.describe()}: calculated output size {list(win.out)} is negative; "
                "check pads, strides, dilations, output_padding and output_shape"
            )
        # A negative end pad (output_shape past the full output) is zero-filled.
        # SAME pads are negative where the kernel is narrower than the stride
        # (the output, input * stride, is wider than the full result): a
        # negative begin pad there is as many leading zeros, as onnx.reference.
        lead = tuple(max(-p, 0) for p in win.pads_begin)
        if any(lead) and (info.attrs.get("output_shape") or auto_pad not in _SAME):
            raise ValueError(f"{info.describe()}: output_shape needs negative pads")
        if any(lead):
            begin = tuple(p + s for p, s in zip(win.pads_begin, lead, strict=True))
            inner = tuple(o - s for o, s in zip(win.out, lead, strict=True))
            win = Window(win.kernel, win.strides, win.dilations, begin, win.pads_end, inner)
        y = _conv_transpose(x, w, win, group, threads)
        if any(lead):
            y = np.pad(y, [(0, 0), (0, 0), *((s, 0) for s in lead)])
        _add_bias(y, b, threads)
        return (y.astype(x.dtype, copy=False),)

    return compute


def _bilinear_gather(
    planes: np.ndarray, y: np.ndarray, x: np.ndarray, h: int, w: int
) -> np.ndarray:
    """Bilinear samples of ``planes`` (N, G, Cg, H*W) at pixel coordinates y, x
    (N, G, P); taps outside the image read zero."""
    y0, x0 = np.floor(y), np.floor(x)
    out = np.zeros((*planes.shape[:3], y.shape[-1]), planes.dtype)
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yy, xx = y0 + dy, x0 + dx
        wt = (1 - np.abs(y - yy)) * (1 - np.abs(x - xx))
        ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        idx = (np.clip(yy, 0, h - 1) * w + np.clip(xx, 0, w - 1)).astype(np.int64)
        vals = np.take_along_axis(planes, idx[:, :, None, :], axis=3)
        out += vals * np.where(ok, wt, 0).astype(planes.dtype)[:, :, None, :]
    return out


@registry.kernel("DeformConv", since=19, until=21, types={"T": FLOATS})
@registry.kernel("DeformConv", since=22, types={"T": FLOATS})
def deform_conv(info: NodeInfo) -> Compute:
    """2-D deformable convolution: every kernel tap samples the input
    bilinearly at its offset position (times the optional mask)."""
    check_window_attrs(info.attrs)
    a = info.attrs
    group = int(a.get("group", 1))
    offset_group = int(a.get("offset_group", 1))

    def compute(
        x: np.ndarray,
        w: np.ndarray,
        offset: np.ndarray,
        b: np.ndarray | None = None,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        if x.ndim != 4:
            raise ValueError(f"{info.describe()}: only 2-D DeformConv is supported")
        n, c, h, wd = x.shape
        m = w.shape[0]
        kh, kw = (int(k) for k in (a.get("kernel_shape") or w.shape[2:]))
        sh, sw = a.get("strides") or (1, 1)
        dh, dw = a.get("dilations") or (1, 1)
        pads = a.get("pads") or (0, 0, 0, 0)
        oh, ow = offset.shape[2:]
        k = kh * kw
        work = np.float64 if x.dtype == np.float64 else np.float32
        planes = x.astype(work).reshape(n, offset_group, c // offset_group, h * wd)
        off = offset.astype(work).reshape(n, offset_group, k, 2, oh * ow)
        msk = None if mask is None else mask.astype(work).reshape(n, offset_group, k, -1)
        base_y = (np.arange(oh) * sh - pads[0])[:, None].repeat(ow, 1).reshape(-1)
        base_x = (np.arange(ow) * sw - pads[1])[None, :].repeat(oh, 0).reshape(-1)
        col = np.empty((n, offset_group, c // offset_group, k, oh * ow), work)
        for t in range(k):
            i, j = divmod(t, kw)
            y = base_y + i * dh + off[:, :, t, 0]
            xx = base_x + j * dw + off[:, :, t, 1]
            s = _bilinear_gather(planes, y, xx, h, wd)
            col[:, :, :, t] = s if msk is None else s * msk[:, :, t, None, :]
        col = col.reshape(n, group, (c // group) * k, oh * ow)
        y_out = np.matmul(w.astype(work).reshape(group, m // group, -1), col)
        y_out = y_out.reshape(n, m, oh, ow)
        if b is not None:
            y_out += b.astype(work).reshape(1, m, 1, 1)
        return (y_out.astype(x.dtype),)

    return compute
