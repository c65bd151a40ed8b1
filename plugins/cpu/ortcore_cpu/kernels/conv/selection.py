"""Which path computes a float32 Conv, and the tuning constants its rules
read, each with the measurements it was set from.

The Conv kernel (``kernel.py``) plans each input and weight shape once,
asking in this order: the packed GEMM for 1x1 Convs (:func:`_use_pointwise`),
the channel-vector kernel (:func:`_use_channel_vector`), the direct kernel
(:func:`_use_direct`), Winograd (:func:`_use_winograd`), else im2col and
BLAS. The paths read the constants from this module at each plan, so a test
or benchmark switches a rule by setting it here
(``conv.selection.CHANNEL_VECTOR = False``), not on the package.
"""

from __future__ import annotations

import math

import numpy as np

from .. import gemm
from .._window import Window
from . import common

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


def _use_pointwise(x: np.ndarray, w: np.ndarray, win: Window, group: int, cached: bool) -> bool:
    """Whether a float32 Conv takes the packed GEMM's pointwise path (see
    :data:`POINTWISE_GEMM`)."""
    return (
        POINTWISE_GEMM
        and cached
        and (group == 1 or (POINTWISE_GROUPS and w.shape[0] > group))
        and gemm.ext.VECTOR >= 8
        and common.ext.DIRECT_VECTOR < DIRECT_WIDE_VECTOR
        and all(k == 1 for k in win.kernel)
        and w.shape[2:] == tuple(win.kernel)
        and not any(win.pads_begin)
        and not any(win.pads_end)
        and 0 < w.size <= POINTWISE_MAX_WEIGHTS * group
        and math.prod(win.out) % POINTWISE_ALIASED_PLANE != 0
        and x.size > 0
    )


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
    if common.ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR:
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
        and common.ext.CHANNEL_VECTOR_NATIVE
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
    if common.ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR:
        positions = math.prod(win.out)
        return (
            CHANNEL_VECTOR_WIDE
            and all(st == 1 for st in win.strides)
            and depth >= CHANNEL_VECTOR_SHALLOW_DEPTH
            and positions <= CHANNEL_VECTOR_WIDE_POSITIONS
            and int(common.ext.channel_vector_items(w.shape[0], positions)) >= 2
        )
    if depth < CHANNEL_VECTOR_MIN_DEPTH or (
        depth < CHANNEL_VECTOR_SHALLOW_DEPTH and w.shape[0] % int(common.ext.CHANNEL_VECTOR_BLOCK)
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
        common.ext.DIRECT_VECTOR >= DIRECT_WIDE_VECTOR
        or group > 1
        or _narrow_small(win)
        or (group == 1 and _narrow_wide_window(win, channels))
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


def _winograd_batched(tiles: int, m: int, c: int, threads: int) -> bool:
    """Whether a step of ``tiles`` Winograd tiles of ``c`` -> ``m`` channels on
    ``threads`` threads runs its products on the packed GEMM (see
    :data:`WINOGRAD_BATCHED_MAX_WORK`)."""
    return (
        common.ext.DIRECT_VECTOR < DIRECT_WIDE_VECTOR
        and gemm.ext.VECTOR >= 8
        and threads >= 2
        and m * c * tiles <= WINOGRAD_BATCHED_MAX_WORK
    )
