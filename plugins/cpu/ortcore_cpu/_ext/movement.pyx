"""Data-movement kernels for fixed-size element types: Transpose (tiled),
Concat and Gather (parallel contiguous block copies).

Arrays are passed as C-contiguous uint8 views of their bytes plus an element
size, so one kernel serves every dtype. Loops release the GIL and split their
outer dimension over ``nthreads`` OpenMP threads.
"""

from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

ctypedef fused index_t:
    int32_t
    int64_t

DEF TILE = 32
DEF MAXR = 8
DEF PIECE = 65536


cdef inline void _tile(char* dst, const char* src, Py_ssize_t rows, Py_ssize_t cols,
                       Py_ssize_t dst_row, Py_ssize_t src_col, Py_ssize_t isz) noexcept nogil:
    """dst[i * dst_row + j] = src[i + j * src_col] for a rows x cols tile
    (strides in elements of ``isz`` bytes)."""
    cdef Py_ssize_t i, j
    if isz == 4:
        for i in range(rows):
            for j in range(cols):
                (<uint32_t*>dst)[i * dst_row + j] = (<const uint32_t*>src)[i + j * src_col]
    elif isz == 8:
        for i in range(rows):
            for j in range(cols):
                (<uint64_t*>dst)[i * dst_row + j] = (<const uint64_t*>src)[i + j * src_col]
    elif isz == 2:
        for i in range(rows):
            for j in range(cols):
                (<uint16_t*>dst)[i * dst_row + j] = (<const uint16_t*>src)[i + j * src_col]
    elif isz == 1:
        for i in range(rows):
            for j in range(cols):
                (<uint8_t*>dst)[i * dst_row + j] = (<const uint8_t*>src)[i + j * src_col]
    else:
        for i in range(rows):
            for j in range(cols):
                memcpy(dst + (i * dst_row + j) * isz, src + (i + j * src_col) * isz, isz)


cdef inline Py_ssize_t _offset(Py_ssize_t flat, const Py_ssize_t* dims,
                               const Py_ssize_t* strides, int n) noexcept nogil:
    """Offset of the row-major multi-index ``flat`` of ``dims`` under ``strides``."""
    cdef Py_ssize_t off = 0, q
    cdef int k
    for k in range(n - 1, -1, -1):
        q = flat // dims[k]
        off += (flat - q * dims[k]) * strides[k]
        flat = q
    return off


def transpose(const uint8_t[::1] src, uint8_t[::1] dst, shape, perm, Py_ssize_t isz,
              int nthreads):
    """Write the C-order bytes of ``src`` (an array of ``shape``) permuted by
    ``perm`` into ``dst``. Unit dims should be dropped and dims that stay
    adjacent merged first (rank <= 8). A kept last axis is copied row by row;
    otherwise the two axes that swap into / out of the last place are copied
    in TILE x TILE tiles."""
    cdef int r = len(shape), k, b = -1, m = 0
    cdef Py_ssize_t ins[MAXR]
    cdef Py_ssize_t odims[MAXR]
    cdef Py_ssize_t ost[MAXR]
    cdef Py_ssize_t sst[MAXR]
    cdef Py_ssize_t mdims[MAXR]
    cdef Py_ssize_t msrc[MAXR]
    cdef Py_ssize_t mdst[MAXR]
    cdef Py_ssize_t total = 1, outer, t, nb, nj, bi, i0, rows, j0, cols, so, do, inner
    if r < 1 or r > MAXR or len(perm) != r:
        raise ValueError("transpose: rank out of range")
    if sorted(perm) != list(range(r)):
        raise ValueError(f"transpose: perm {list(perm)} is not a permutation of the {r} axes")
    for k in range(r):
        if shape[k] < 0:
            raise ValueError(f"transpose: negative dimension in shape {list(shape)}")
    for k in range(r):
        odims[k] = shape[perm[k]]
        total *= odims[k]
    if src.shape[0] != total * isz or dst.shape[0] != total * isz:
        raise ValueError("transpose: sizes differ")
    if total == 0:
        return
    ins[r - 1] = 1
    for k in range(r - 2, -1, -1):
        ins[k] = ins[k + 1] * shape[k + 1]
    ost[r - 1] = 1
    for k in range(r - 2, -1, -1):
        ost[k] = ost[k + 1] * odims[k + 1]
    for k in range(r):
        sst[k] = ins[perm[k]]
    if sst[r - 1] == 1:
        inner = odims[r - 1] * isz
        outer = total // odims[r - 1]
        with nogil:
            for t in prange(outer, num_threads=nthreads, schedule="static"):
                so = _offset(t, odims, sst, r - 1)
                memcpy(&dst[t * inner], &src[so * isz], inner)
        return
    for k in range(r - 1):
        if sst[k] == 1:
            b = k
        else:
            mdims[m] = odims[k]
            msrc[m] = sst[k]
            mdst[m] = ost[k]
            m += 1
    outer = total // (odims[b] * odims[r - 1])
    nb = (odims[b] + TILE - 1) // TILE
    nj = (odims[r - 1] + TILE - 1) // TILE
    with nogil:
        for t in prange(outer * nb, num_threads=nthreads, schedule="static"):
            bi = t % nb
            so = _offset(t // nb, mdims, msrc, m)
            do = _offset(t // nb, mdims, mdst, m)
            i0 = bi * TILE
            rows = odims[b] - i0
            if rows > TILE:
                rows = TILE
            for j0 in range(0, odims[r - 1], TILE):
                cols = odims[r - 1] - j0
                if cols > TILE:
                    cols = TILE
                _tile(<char*>&dst[0] + (do + i0 * ost[b] + j0) * isz,
                      <const char*>&src[0] + (so + i0 + j0 * sst[r - 1]) * isz,
                      rows, cols, ost[b], sst[r - 1], isz)


def concat(list parts, uint8_t[::1] dst, Py_ssize_t outer, int nthreads):
    """Concatenate byte arrays of shape (outer, block_k) along axis 1 into
    ``dst`` (outer, sum of block_k). With few outer rows each block is cut
    into pieces of about ``PIECE`` bytes, so that the threads' shares (runs
    of pieces) are about equal whatever the blocks' sizes. Cutting every
    block into as many pieces as the largest one needed (until 2026-12-03)
    left the thread that took the small blocks idle: DenseNet's Concats of
    128-992 + 32 channels, in cache, took 0.85-0.97x their one-thread time
    on two threads, now 0.57-0.70x (Zen 3); inside DenseNet, whose
    Concats read memory, the model's time did not move (0.97-1.0x)."""
    cdef Py_ssize_t K = len(parts), k, row = 0, t, i, s, lo, hi, blk, r, per_row = 0, n
    cdef const uint8_t[::1] view
    cdef const uint8_t** ptr
    cdef Py_ssize_t* size
    cdef Py_ssize_t* off
    cdef Py_ssize_t* pieces  # pieces of block k
    cdef Py_ssize_t* first  # the first piece of block k within a row
    if K == 0 or outer == 0:
        return
    ptr = <const uint8_t**>malloc(K * sizeof(void*))
    size = <Py_ssize_t*>malloc(K * sizeof(Py_ssize_t))
    off = <Py_ssize_t*>malloc(K * sizeof(Py_ssize_t))
    pieces = <Py_ssize_t*>malloc(K * sizeof(Py_ssize_t))
    first = <Py_ssize_t*>malloc(K * sizeof(Py_ssize_t))
    if ptr == NULL or size == NULL or off == NULL or pieces == NULL or first == NULL:
        free(ptr); free(size); free(off); free(pieces); free(first)
        raise MemoryError()
    try:
        for k in range(K):
            view = parts[k]
            size[k] = view.shape[0] // outer
            if size[k] * outer != view.shape[0]:
                raise ValueError("concat: part size is not a multiple of outer")
            ptr[k] = &view[0] if view.shape[0] else NULL
            off[k] = row
            row += size[k]
            pieces[k] = 1
            if outer < 4 * nthreads:
                pieces[k] = (size[k] + PIECE - 1) // PIECE
                if pieces[k] < 1:
                    pieces[k] = 1
            first[k] = per_row
            per_row += pieces[k]
        if dst.shape[0] != row * outer:
            raise ValueError("concat: output size differs")
        n = outer * per_row
        with nogil:
            for t in prange(n, num_threads=nthreads, schedule="static"):
                i = t // per_row
                r = t - i * per_row
                k = K - 1
                while first[k] > r:
                    k = k - 1
                s = r - first[k]
                blk = size[k]
                lo = blk * s // pieces[k]
                hi = blk * (s + 1) // pieces[k]
                if hi > lo:
                    memcpy(&dst[i * row + off[k] + lo], ptr[k] + i * blk + lo, hi - lo)
    finally:
        free(ptr); free(size); free(off); free(pieces); free(first)


def gather(const uint8_t[::1] src, const index_t[::1] indices, uint8_t[::1] dst,
           Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int nthreads):
    """``dst[o, j] = src[o, indices[j]]`` for ``src`` viewed as (outer, n, inner
    bytes) and ``dst`` as (outer, len(indices), inner bytes); negative indices
    count from the end. Returns False (writing nothing) if an index is out of
    range."""
    cdef Py_ssize_t m = indices.shape[0], j, t, o, v
    cdef int64_t* idx
    cdef bint ok = True
    if src.shape[0] != outer * n * inner or dst.shape[0] != outer * m * inner:
        raise ValueError("gather: sizes differ")
    if m == 0 or outer == 0 or inner == 0:
        for j in range(m):
            if indices[j] < -n or indices[j] >= n:
                return False
        return True
    idx = <int64_t*>malloc(m * sizeof(int64_t))
    if idx == NULL:
        raise MemoryError()
    with nogil:
        for j in range(m):
            v = indices[j]
            if v < -n or v >= n:
                ok = False
                break
            idx[j] = v + n if v < 0 else v
        if ok:
            for t in prange(outer * m, num_threads=nthreads, schedule="static"):
                o = t // m
                memcpy(&dst[t * inner], &src[(o * n + idx[t - o * m]) * inner], inner)
    free(idx)
    return ok


def parallel_region(int nthreads):
    """Open one OpenMP region of ``nthreads`` threads that does next to
    nothing: its time is what waking the threads costs (measured once by
    :func:`ortcore_cpu.kernels._common.grain`)."""
    cdef Py_ssize_t i
    cdef int sink[64]
    if nthreads < 1 or nthreads > 64:
        raise ValueError(f"parallel_region: nthreads must be 1 to 64, got {nthreads}")
    with nogil:
        for i in prange(nthreads, num_threads=nthreads, schedule="static"):
            sink[i] = <int>i
