"""Cython extension modules of the CPU provider (built by setup.py).

The kernels run OpenMP parallel regions, and so do numpy's OpenBLAS calls
once ``ortcore_cpu.threads.share_blas_pool`` has handed OpenBLAS the
kernels' pool (``blas_pool.pyx``). Unless the user chose otherwise, the
OpenMP runtime is told to spin briefly after a region (``GOMP_SPINCOUNT``
20000: tens of microseconds, where waking a sleeping thread took 50-80 us
on a 2-core VM) and then sleep (``OMP_WAIT_POLICY=PASSIVE``), so that idle
threads never hold a core for long. With ``ORTCORE_CPU_BLAS_POOL=0``
OpenBLAS keeps its own pool, whose workers busy-wait after each call, and
the OpenMP threads do not spin at all. This must happen before the first
extension module loads the OpenMP runtime.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if os.environ.get("ORTCORE_CPU_BLAS_POOL", "1").strip().lower() not in ("0", "false", "no"):
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")
