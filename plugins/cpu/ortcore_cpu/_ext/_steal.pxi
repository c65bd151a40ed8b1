# Static shares of a parallel loop's items, with stealing (_steal.h),
# included by _conv.pxi, _gemm.pxi and _pool.pxi.

cdef extern from "_steal.h" nogil:
    ctypedef struct ws_share:
        pass
    ws_share* ws_align(void* raw)
    int ws_init(ws_share* s, int n, Py_ssize_t items)
    Py_ssize_t ws_next(ws_share* s, int n, int t)
    void ws_barrier()
    Py_ssize_t ws_left(ws_share* s, int n)
    int ws_owner(Py_ssize_t items, int n, Py_ssize_t i)
    int ws_prepare(ws_share* s, int v)
    void ws_prepared(ws_share* s, int v)


cdef void* _shares(int n, Py_ssize_t items) except NULL:
    """Memory for ``n`` shares of ``items`` work items (``ws_align`` finds
    them in it), cut as the static schedule cuts them (``ws_init``); free
    it after the loop."""
    cdef void* raw = malloc((n + 1) * sizeof(ws_share))
    if raw == NULL:
        raise MemoryError()
    if not ws_init(ws_align(raw), n, items):
        free(raw)
        raise ValueError(f"{items} work items, too many to share out")
    return raw
