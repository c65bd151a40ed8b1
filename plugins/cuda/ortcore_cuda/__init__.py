"""ortcore-cuda: the CUDA execution provider's kernels (work in progress).

Importing this package is cheap: pycuda is imported only when the provider
is asked whether it can run.
"""

__version__ = "0.1.0"
