"""Pooling kernels for float32 data laid out as (N*C, D, H, W).

1-D and 2-D pooling use leading spatial extents of 1. The outer loop runs
over the N*C planes on ``nthreads`` OpenMP threads, with the GIL released.

This module is the portable (x86-64 baseline) build; ``pool_avx2`` and
``pool_avx512`` are the same source (``_pool.pxi``) built with AVX2 and
FMA, and with AVX-512, where the compiler accepts those flags (``setup.py``);
``ortcore_cpu.kernels._isa`` picks the build this CPU runs.
"""

include "_pool.pxi"
