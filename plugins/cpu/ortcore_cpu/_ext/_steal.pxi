# Static shares of a parallel loop's items, with stealing (_steal.h),
# included by _conv.pxi and _gemm.pxi.

cdef extern from "_steal.h" nogil:
    ctypedef struct ws_share:
        pass
    ws_share* ws_align(void* raw)
    int ws_init(ws_share* s, int n, Py_ssize_t items)
    Py_ssize_t ws_next(ws_share* s, int n, int t)
    void ws_barrier()
    int ws_owner(Py_ssize_t items, int n, Py_ssize_t i)
    int ws_prepare(ws_share* s, int v)
    void ws_prepared(ws_share* s, int v)
