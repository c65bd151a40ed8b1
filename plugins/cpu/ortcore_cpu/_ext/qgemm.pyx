"""8-bit integer GEMM: ``(A - za) @ (B - zb)`` exact in int32, finished as
int32, as float32 (scaled, plus a bias) or requantized to 8 bits.

Both operands are packed (:func:`pack_a`, :func:`pack_b`, or a 2-D
convolution's columns straight from its input, :func:`pack_im2col`); a
constant one (a weight) once, when its kernel is built. :func:`gemm` runs
the register tiles of ``_qgemm.h`` over them on OpenMP threads, with the
GIL released, and finishes each tile (zero points folded in from row and
column sums, then the output's epilogue) while it is in L1.
:func:`depthwise` is a depthwise convolution's direct loop.

This module is the portable (x86-64 baseline) build; ``qgemm_avx2``,
``qgemm_avxvnni`` and ``qgemm_avx512`` are the same source
(``_qgemm.pxi``) built with AVX2, AVX-VNNI and AVX-512 VNNI, where the
compiler accepts those flags (``setup.py``); ``ortcore_cpu.kernels._isa``
picks the build this CPU runs (:func:`cpu_features`).
"""

include "_qgemm.pxi"
