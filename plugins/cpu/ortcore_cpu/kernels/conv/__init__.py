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

The package, one module a job, each importing only those above it in this
list (``__init__`` only re-exports):

- ``common``: the Cython build (``ext``), the bias, residual and clamp
  epilogue, each thread's scratch buffer;
- ``selection``: which path takes a Conv, and the tuning constants its
  rules read;
- ``winograd``, ``direct``, ``pointwise``: the Winograd, direct and
  channel-vector, and packed-GEMM 1x1 paths;
- ``im2col``: the depthwise kernel, im2col and BLAS, and the numpy path;
- ``kernel``: the Conv kernel and its fused forms (registers Conv);
- ``transpose`` and ``deform``: ConvTranspose and DeformConv (each registers
  its op).

Names stay importable from the package as they were from ``conv.py``. A
tuning constant, ``ext`` or a path function is read from its own module at
each call: set or patch it there (``conv.selection.CHANNEL_VECTOR``,
``conv.common.ext``, ``conv.direct._conv_direct``), not on the package.
"""

from __future__ import annotations

from .. import gemm
from .common import BIAS_PASS_WORK, Clamp, ext
from .common import _add_bias as _add_bias
from .deform import deform_conv
from .direct import _conv_direct as _conv_direct
from .direct import channel_vector_filter, direct_filter
from .im2col import _conv_f32 as _conv_f32
from .im2col import _conv_numpy as _conv_numpy
from .kernel import PoolStage, build_conv, concat_buffer, conv
from .pointwise import _conv_pointwise as _conv_pointwise
from .pointwise import shuffle_channels
from .selection import (
    CHANNEL_VECTOR,
    CHANNEL_VECTOR_MIN_DEPTH,
    CHANNEL_VECTOR_SHALLOW_DEPTH,
    CHANNEL_VECTOR_WIDE,
    CHANNEL_VECTOR_WIDE_POSITIONS,
    CHANNEL_VECTOR_WINOGRAD_CHANNELS,
    CHANNEL_VECTOR_WINOGRAD_POSITIONS,
    DIRECT_GROUPS,
    DIRECT_IMAGE_CHANNELS,
    DIRECT_IMAGE_MIN_TAPS,
    DIRECT_MAX_DEPTH,
    DIRECT_MIN_TAPS,
    DIRECT_NARROW_GROUP_CHANNELS,
    DIRECT_NARROW_SHALLOW_DEPTH,
    DIRECT_NARROW_SHALLOW_POSITIONS,
    DIRECT_NARROW_SMALL_POSITIONS,
    DIRECT_NARROW_WIDE_WINDOW_DEPTH,
    DIRECT_POINTWISE,
    DIRECT_WIDE_VECTOR,
    POINTWISE_ALIASED_PLANE,
    POINTWISE_GEMM,
    POINTWISE_GROUPS,
    POINTWISE_MAX_WEIGHTS,
    WINOGRAD_BATCHED_MAX_WORK,
    WINOGRAD_EPILOGUE,
    WINOGRAD_MAX_TILES_WIDENING,
    WINOGRAD_MIN_CHANNELS,
    WINOGRAD_MIN_TILES,
    WINOGRAD_MIN_TILES_UNCACHED,
    WINOGRAD_OVER_DIRECT_CHANNELS,
    WINOGRAD_OVER_DIRECT_POSITIONS,
)
from .selection import _flat as _flat
from .selection import _use_direct as _use_direct
from .selection import _use_winograd as _use_winograd
from .selection import _winograd_batched as _winograd_batched
from .transpose import conv_transpose
from .winograd import WinogradFilters, winograd_filter
from .winograd import _conv_winograd as _conv_winograd
from .winograd import _plane_size as _plane_size

__all__ = [
    "BIAS_PASS_WORK",
    "CHANNEL_VECTOR",
    "CHANNEL_VECTOR_MIN_DEPTH",
    "CHANNEL_VECTOR_SHALLOW_DEPTH",
    "CHANNEL_VECTOR_WIDE",
    "CHANNEL_VECTOR_WIDE_POSITIONS",
    "CHANNEL_VECTOR_WINOGRAD_CHANNELS",
    "CHANNEL_VECTOR_WINOGRAD_POSITIONS",
    "DIRECT_GROUPS",
    "DIRECT_IMAGE_CHANNELS",
    "DIRECT_IMAGE_MIN_TAPS",
    "DIRECT_MAX_DEPTH",
    "DIRECT_MIN_TAPS",
    "DIRECT_NARROW_GROUP_CHANNELS",
    "DIRECT_NARROW_SHALLOW_DEPTH",
    "DIRECT_NARROW_SHALLOW_POSITIONS",
    "DIRECT_NARROW_SMALL_POSITIONS",
    "DIRECT_NARROW_WIDE_WINDOW_DEPTH",
    "DIRECT_POINTWISE",
    "DIRECT_WIDE_VECTOR",
    "POINTWISE_ALIASED_PLANE",
    "POINTWISE_GEMM",
    "POINTWISE_GROUPS",
    "POINTWISE_MAX_WEIGHTS",
    "WINOGRAD_BATCHED_MAX_WORK",
    "WINOGRAD_EPILOGUE",
    "WINOGRAD_MAX_TILES_WIDENING",
    "WINOGRAD_MIN_CHANNELS",
    "WINOGRAD_MIN_TILES",
    "WINOGRAD_MIN_TILES_UNCACHED",
    "WINOGRAD_OVER_DIRECT_CHANNELS",
    "WINOGRAD_OVER_DIRECT_POSITIONS",
    "Clamp",
    "PoolStage",
    "WinogradFilters",
    "build_conv",
    "channel_vector_filter",
    "concat_buffer",
    "conv",
    "conv_transpose",
    "deform_conv",
    "direct_filter",
    "ext",
    "gemm",
    "shuffle_channels",
    "winograd_filter",
]
