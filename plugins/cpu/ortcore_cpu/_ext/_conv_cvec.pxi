# The channel-vector convolution: output channels in vectors, positions in
# tiles (_cvec_conv.h). Included by _conv.pxi, after _conv_direct.pxi, whose
# scratch sizing it shares.


cdef extern from "_cvec_conv.h" nogil:
    void cv_run(const float* xph, Py_ssize_t C, Py_ssize_t CS, Py_ssize_t WQ, const float* wp,
                Py_ssize_t T, const Py_ssize_t* toff, Py_ssize_t sh, Py_ssize_t r0, float* y,
                const float* z, const float* bias, Py_ssize_t M, Py_ssize_t OH, Py_ssize_t OW,
                float lo, float hi, int clamp, Py_ssize_t ocb, Py_ssize_t j0, Py_ssize_t j1)
    int CV_OCB
    int CV_NP
    int CV_NATIVE
    int CV_RUN_TILES


CHANNEL_VECTOR_BLOCK = CV_OCB
"""Output channels :func:`channel_vector_conv2d` computes together (its
weights' last axis)."""

CHANNEL_VECTOR_NATIVE = bool(CV_NATIVE)
"""Whether this build runs :func:`channel_vector_conv2d` as designed (with
AVX: its 12 vectors of sums in registers); in the x86-64 baseline build it
gives the same results, slowly."""


cdef inline Py_ssize_t _cv_runs(Py_ssize_t P) noexcept:
    """Runs of positions of :func:`channel_vector_conv2d` for P output positions
    (tiles of CV_NP positions, at most CV_RUN_TILES tiles a run)."""
    return ((P + CV_NP - 1) // CV_NP + CV_RUN_TILES - 1) // CV_RUN_TILES


cdef inline Py_ssize_t _cv_shares(Py_ssize_t nthreads, Py_ssize_t items) noexcept:
    """Shares of :func:`channel_vector_conv2d`'s items: one a thread, none empty."""
    return max(1, min(nthreads, items))


cdef Py_ssize_t _cv_share_rows(Py_ssize_t* rows, Py_ssize_t n, Py_ssize_t MB, Py_ssize_t runs,
                               Py_ssize_t P, Py_ssize_t OW, Py_ssize_t KH, Py_ssize_t sh,
                               Py_ssize_t dh) noexcept nogil:
    """The padded input rows [rows[2v], rows[2v + 1]) share v of n reads (its
    items: v * items // n to (v + 1) * items // n of MB * runs, run by run);
    returns the most rows a share reads."""
    cdef Py_ssize_t v, i0, i1, j0, j1, most = 0
    cdef Py_ssize_t items = MB * runs
    for v in range(n):
        i0 = items * v // n
        i1 = items * (v + 1) // n
        j0 = (i0 // MB) * P // runs
        j1 = ((i1 - 1) // MB + 1) * P // runs
        rows[2 * v] = (j0 // OW) * sh
        rows[2 * v + 1] = ((j1 - 1) // OW) * sh + (KH - 1) * dh + 1
        most = max(most, rows[2 * v + 1] - rows[2 * v])
    return most


cdef inline Py_ssize_t _cv_items(Py_ssize_t M, Py_ssize_t P) noexcept:
    """Work items of :func:`channel_vector_conv2d` for M output channels on P
    output positions: blocks of channels times runs of positions."""
    return (M + CV_OCB - 1) // CV_OCB * _cv_runs(P)


def channel_vector_items(Py_ssize_t M, Py_ssize_t P):
    """Work items :func:`channel_vector_conv2d` splits M output channels on P
    output positions into (blocks of channels times runs of positions): the
    most threads it can keep busy."""
    if M < 0 or P < 0:
        raise ValueError(f"channel_vector_items: negative size {(M, P)}")
    return _cv_items(M, P)


def channel_vector_conv2d_scratch(Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t M,
                                  Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t sh, Py_ssize_t sw,
                                  Py_ssize_t dh, Py_ssize_t dw, int nthreads):
    """Floats of scratch :func:`channel_vector_conv2d` needs for C input and M
    output channels, an OH x OW output and ``nthreads`` threads: each
    thread's padded, column-phase-split copy of the input rows it reads."""
    _check_window("channel_vector_conv2d", 1, KH, KW, 1, sh, sw, 0, 0, 0, 1, dh, dw)
    if min(C, OH, OW, M) < 0:
        raise ValueError(f"channel_vector_conv2d: negative size {(C, OH, OW, M)}")
    if min(C, OH, OW, M) == 0:
        return 0
    cdef Py_ssize_t runs = _cv_runs(OH * OW)
    cdef Py_ssize_t n = _cv_shares(nthreads, _cv_items(M, OH * OW))
    cdef Py_ssize_t* rows = <Py_ssize_t*>malloc(2 * n * sizeof(Py_ssize_t))
    if rows == NULL:
        raise MemoryError()
    try:
        return (n * _cv_share_rows(rows, n, (M + CV_OCB - 1) // CV_OCB, runs, OH * OW, OW, KH,
                                   sh, dh)
                * sw * C * _dc_cols_needed(OW, KW, sw, dw))
    finally:
        free(rows)


cdef inline void _cv_copy_rows(const float* x, float* scratch, const Py_ssize_t* rows,
                               Py_ssize_t v, Py_ssize_t slot, Py_ssize_t C, Py_ssize_t H,
                               Py_ssize_t W, Py_ssize_t sw, Py_ssize_t WQ, Py_ssize_t ph,
                               Py_ssize_t pw) noexcept nogil:
    """Copy the padded rows share v of :func:`channel_vector_conv2d` reads
    into its planes (at scratch + v * slot)."""
    cdef Py_ssize_t c, r0 = rows[2 * v], r1 = rows[2 * v + 1]
    for c in range(C):
        dc_pack_rows(x, H, W, scratch + v * slot, C, 1, sw, r1 - r0, WQ, ph, pw, c, 0, r0, r1,
                     r0)


def channel_vector_conv2d(const float[:, :, ::1] x, const float[:, :, :, ::1] wp,
                          float[:, :, ::1] y, const float[::1] b, const float[:, :, ::1] z,
                          float[::1] scratch, Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t sh,
                          Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh,
                          Py_ssize_t dw, float lo, float hi, int nthreads):
    """Direct 2-D convolution of one image ``x`` (C, H, W) into ``y`` (M, OH, OW)
    with the output channels in the vector lanes: the bias ``b`` ((M,) or
    empty), the residual ``z`` (``y``'s shape, or ``None``) and the clamp to
    [lo, hi] applied as ``y`` is written.

    ``wp`` holds the weights (M, C, KH, KW) packed as (ceil(M / B), C, KH *
    KW, B) with B = :data:`CHANNEL_VECTOR_BLOCK` output channels side by side
    (zeros past M). ``scratch`` receives each thread's padded,
    column-phase-split copy of the input rows its items read
    (:func:`channel_vector_conv2d_scratch` floats; a 1x1 window with stride
    1 and no pads reads ``x`` in place). Begin pads are ``ph``, ``pw``;
    every input position a window reaches past the input reads 0. Each work
    item is one block of B output channels over a run of the flattened
    output plane's positions, in tiles of up to 6 positions (across row
    ends); the items go run by run (every block of a run, then the next
    run), in one share of consecutive items a thread (``nthreads``); a
    thread done with its share takes the back half of what is left of
    another's (``_steal.h``), with that share's rows."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t MB = wp.shape[0], T = KH * KW
    cdef Py_ssize_t M = y.shape[0], OH = y.shape[1], OW = y.shape[2]
    cdef Py_ssize_t HP, WQ, P, runs, items, item, n, v, t, r0, nr, slot
    cdef int tid
    cdef void* raw
    cdef ws_share* shares
    cdef bint in_place
    cdef const float* zp = NULL
    cdef const float* bp = NULL
    cdef const float* xv
    cdef Py_ssize_t* toff
    cdef Py_ssize_t* rows
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    _check_window("channel_vector_conv2d", 1, KH, KW, 1, sh, sw, 0, ph, pw, 1, dh, dw)
    if (wp.shape[1] != C or wp.shape[2] != T or wp.shape[3] != CV_OCB
            or MB != (M + CV_OCB - 1) // CV_OCB):
        raise ValueError(
            f"channel_vector_conv2d: packed weights {tuple(wp.shape)[:4]} for {C} input and "
            f"{M} output channels, a {KH}x{KW} window (blocks of {CV_OCB})"
        )
    if b.shape[0] not in (0, M):
        raise ValueError(f"channel_vector_conv2d: bias of {b.shape[0]} values for {M} channels")
    if z is not None:
        if tuple(z.shape)[:3] != tuple(y.shape)[:3]:
            raise ValueError("channel_vector_conv2d: the residual's shape differs from the output's")
        zp = &z[0, 0, 0] if z.shape[0] * z.shape[1] * z.shape[2] else NULL
    if M == 0 or OH == 0 or OW == 0:
        return
    if C == 0:
        raise ValueError("channel_vector_conv2d: no input channels")
    # a 1x1 window on the input as it is: its planes are the padded planes
    in_place = (KH == 1 and KW == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
                and OH == H and OW == W)
    if in_place:
        HP, WQ = H, W
    else:
        HP = _dc_rows_needed(OH, KH, sh, dh)
        WQ = _dc_cols_needed(OW, KW, sw, dw)
    P = OH * OW
    runs = _cv_runs(P)
    items = MB * runs
    n = _cv_shares(nthreads, items)
    raw = _shares(<int>n, items)
    shares = ws_align(raw)
    rows = <Py_ssize_t*>malloc(2 * n * sizeof(Py_ssize_t))
    toff = <Py_ssize_t*>malloc(n * T * sizeof(Py_ssize_t))
    if rows == NULL or toff == NULL:
        free(rows)
        free(toff)
        free(raw)
        raise MemoryError()
    try:
        slot = _cv_share_rows(rows, n, MB, runs, P, OW, KH, sh, dh) * sw * C * WQ
        if not in_place and scratch.shape[0] < n * slot:
            raise ValueError(
                f"channel_vector_conv2d: scratch of {scratch.shape[0]} floats, {n * slot} "
                f"needed")
        if b.shape[0]:
            bp = &b[0]
        for v in range(n):
            # each share's planes hold its rows only (all of them in place)
            nr = HP if in_place else rows[2 * v + 1] - rows[2 * v]
            for t in range(T):
                # tap (ky, kx): row ky * dh, column kx * dw in phase (kx * dw) % sw
                toff[v * T + t] = ((t // KW) * dh * WQ + (((t % KW) * dw) % sw) * C * nr * WQ
                                   + ((t % KW) * dw) // sw)
        with nogil, parallel(num_threads=n):
            # Each share of the work items copies the padded rows its
            # positions read into planes of its own, then computes: no
            # thread waits for another's copy, and none writes lines that
            # another core read last (one copy the threads split, then a
            # barrier, took 12-22 us of a 170-400 us convolution on two
            # threads, for 1-6 us of copying). A thread done with its share
            # takes items from the others' (_steal.h), with their rows:
            # whichever thread first needs a share's rows copies them.
            tid = threadid()
            # run by run (the block varying fastest): a share reads only
            # the rows of its positions. Against block by block (each
            # thread reading every row), on 2 threads: SqueezeNet 0.97x
            # the time, DenseNet 0.99x, Inception 1.0x
            item = ws_next(shares, n, tid)
            while item >= 0:
                v = ws_owner(items, n, item)
                if in_place:
                    xv = &x[0, 0, 0]
                    r0 = 0
                    nr = HP
                else:
                    if ws_prepare(shares, v):
                        _cv_copy_rows(&x[0, 0, 0], &scratch[0], rows, v, slot, C, H, W, sw,
                                      WQ, ph, pw)
                        ws_prepared(shares, v)
                    xv = &scratch[0] + v * slot
                    r0 = rows[2 * v]
                    nr = rows[2 * v + 1] - r0
                cv_run(xv, C, nr * WQ, WQ, &wp[0, 0, 0, 0], T, &toff[v * T], sh, r0,
                       &y[0, 0, 0], zp, bp, M, OH, OW, lo, hi, clamp, item % MB,
                       (item // MB) * P // runs, (item // MB + 1) * P // runs)
                item = ws_next(shares, n, tid)
    finally:
        free(rows)
        free(toff)
        free(raw)
