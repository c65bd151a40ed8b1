"""The convolution helpers of :mod:`ortcore_cpu._ext.conv`, built for CPUs with
AVX-512 (compiler flags in setup.py). Import it only where
``activation.cpu_level()`` says the CPU runs it: its module code uses
those instructions too.
"""

include "_conv.pxi"
