"""ortcore-cpu: the CPU execution provider of ortcore.

Importing this package is cheap; kernels and extension modules load on first use.
"""

__version__ = "0.1.0"
