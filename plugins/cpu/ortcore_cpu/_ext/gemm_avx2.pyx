"""The GEMM of :mod:`ortcore_cpu._ext.gemm`, built for CPUs with
AVX2 and FMA (compiler flags in setup.py). Import it only where
``activation.cpu_level()`` says the CPU runs it: its module code uses
those instructions too.
"""

include "_gemm.pxi"
