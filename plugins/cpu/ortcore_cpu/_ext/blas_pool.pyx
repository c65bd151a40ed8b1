"""OpenBLAS's parallel work on the kernels' OpenMP threads: one pool.

OpenBLAS (numpy's BLAS in the PyPI wheels) runs its threaded calls on a pool
of its own, whose workers busy-wait for about a tenth of a second after each
call. Inside a model the GEMMs come every few milliseconds, so those workers
spin all the time, on the same cores as the Cython kernels' OpenMP threads:
an OpenMP kernel right after a GEMM ran up to twice as long as alone.

OpenBLAS 0.3.27 and later take a threading callback
(``openblas_set_threads_callback_function``): each threaded call hands it
``numjobs`` jobs that must all run at once (they wait on each other), and
:func:`install` makes it run them as one OpenMP team, the kernels' pool.
OpenBLAS's own workers then sleep. ``ortcore_cpu.threads`` finds the setter
in the loaded OpenBLAS and installs it (``ORTCORE_CPU_BLAS_POOL=0`` leaves
OpenBLAS's pool alone).
"""

from cython.parallel cimport prange

cimport openmp

ctypedef void (*dojob_t)(int, void*, int) noexcept nogil
ctypedef void (*callback_t)(int, dojob_t, int, size_t, void*, int) noexcept nogil
ctypedef void (*setter_t)(callback_t) noexcept nogil


cdef void _run_jobs(int sync, dojob_t dojob, int numjobs, size_t elsize, void* jobdata,
                    int data) noexcept nogil:
    """Run OpenBLAS's ``numjobs`` jobs, one per thread of one OpenMP team.

    The jobs of a threaded level-3 call wait on each other, so they must
    all run at once: dynamic team sizes are turned off for this region, and
    a call from inside a parallel region gets a nested team (one more
    active level allowed) instead of a team of one."""
    cdef int i
    if numjobs <= 1:
        if numjobs == 1:
            dojob(0, jobdata, data)
        return
    openmp.omp_set_dynamic(0)
    if openmp.omp_in_parallel():
        if openmp.omp_get_max_active_levels() <= openmp.omp_get_active_level():
            openmp.omp_set_max_active_levels(openmp.omp_get_active_level() + 1)
    for i in prange(numjobs, num_threads=numjobs, schedule="static", chunksize=1):
        dojob(i, <char*>jobdata + i * elsize, data)


def install(size_t setter):
    """Hand :func:`_run_jobs` to the OpenBLAS setter at address ``setter``
    (``openblas_set_threads_callback_function``, under the library's
    symbol prefix and suffix)."""
    if setter == 0:
        raise ValueError("install: no setter")
    (<setter_t>setter)(_run_jobs)


def uninstall(size_t setter):
    """Give OpenBLAS its own pool back (the setter with no callback)."""
    if setter == 0:
        raise ValueError("uninstall: no setter")
    (<setter_t>setter)(NULL)


def serial_regions():
    """Make every later OpenMP parallel region run on one thread (no active
    levels). For a forked child: GNU OpenMP's threads do not survive a fork,
    and a child's first region of more than one thread waits for them forever."""
    openmp.omp_set_max_active_levels(0)
