"""The pooling kernels of :mod:`ortcore_cpu._ext.pool`, built for CPUs with
AVX2 and FMA (compiler flags in setup.py). Import it only where
``activation.cpu_level()`` says the CPU runs it: its module code uses
those instructions too.
"""

include "_pool.pxi"
