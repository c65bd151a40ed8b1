"""The float32 activation kernel of :mod:`ortcore_cpu._ext.activation`, built
for CPUs with AVX2 and FMA (compiler flags in setup.py). Import it only where
``activation.cpu_level()`` says the CPU runs it: its module code uses those
instructions too.
"""

include "_activation.pxi"
