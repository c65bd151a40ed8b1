"""Single-precision GEMM with a packed right operand: ``C = A @ B (+ bias)``.

A constant B (a weight) is packed once (:func:`pack_b`) into panels of
``PANEL`` columns; each call packs A into panels of ``ROWS`` rows and runs
a register-tiled kernel (``_sgemm.h``) over the tiles, split over OpenMP
threads with the GIL released. With the weight packed ahead, a call does
none of the per-call packing of B that a BLAS does: for the 128-row
GEMMs of a transformer that is most of what sets them apart.
:func:`pointwise` runs 1x1 convolutions on the same tiles: the weight
packed once as A, the input planes read in place as B, a bias per row, a
residual and a clamp applied as the tiles are finished.

This module is the portable (x86-64 baseline) build; ``gemm_avx2`` and
``gemm_avx512`` are the same source (``_gemm.pxi``) built with AVX2 and
FMA, and with AVX-512, where the compiler accepts those flags (``setup.py``);
``ortcore_cpu.kernels._isa`` picks the build this CPU runs.
"""

include "_gemm.pxi"
