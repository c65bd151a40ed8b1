"""Cython extension modules of the CPU provider (built by setup.py).

The kernels run OpenMP parallel regions between numpy's BLAS calls, whose
threads busy-wait after each call. With OpenMP's default (active) wait policy
both thread pools spin for the same cores and a small kernel can stall for a
scheduler time slice, so unless the user chose otherwise the OpenMP runtime
is told to sleep while idle. This must happen before the first extension
module loads the OpenMP runtime.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
