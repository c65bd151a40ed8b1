"""The 8-bit integer GEMM of :mod:`ortcore_cpu._ext.qgemm`, built for CPUs
with AVX-VNNI (compiler flags in setup.py). Import it only where
``qgemm.cpu_features()`` says the CPU runs it: its module code uses those
instructions too.
"""

include "_qgemm.pxi"
