"""Convolution helpers: im2col / col2im for 3-D spatial data, direct depthwise 2-D.

All functions work on one image at a time, release the GIL and split their
outer loop over ``nthreads`` OpenMP threads. 1-D and 2-D convolutions use the
3-D functions with leading spatial extents of 1.

This module is the portable (x86-64 baseline) build; ``conv_avx2`` and
``conv_avx512`` are the same source (``_conv.pxi`` and the per-algorithm
``_conv_*.pxi`` files it includes) built with AVX2 and FMA, and with AVX-512,
where the compiler accepts those flags (``setup.py``);
``ortcore_cpu.kernels._isa`` picks the build this CPU runs.
"""

include "_conv.pxi"
