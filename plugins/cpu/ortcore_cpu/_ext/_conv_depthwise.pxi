# The direct depthwise 2-D convolution (one filter per channel): the stencil
# paths (flat, masked, strided, 3x3 stride 2, stride 1) and the column-phase
# path. Included by _conv.pxi.


cdef Py_ssize_t _strided_floats(Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh, Py_ssize_t kw,
                                Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                                Py_ssize_t dw) except -1:
    """Floats of ``st_depthwise_strided``'s buffer (the phases and the flat
    output), or 0 if the window does not take it: stride 1, an empty output,
    or more than ``_STRIDED_MAX`` floats (computed in Python integers: they
    can overflow Py_ssize_t): inputs up to about 228x228 with stride 2, whose
    buffer (256 KiB) stays in the L2 cache. 3x3 stride-2 depthwise
    convolutions took against the column-phase path (1 and 2 threads, Zen
    5): 0.5-0.85x the time to 7x7 - 27x27 outputs, 0.58x to 28x28
    (ShuffleNet's 112 and MobileNet's 64-144 channels on 56x56), 0.85x to
    56x56, 0.8-0.95x to 75x75, 0.9-1.0x to 112x112."""
    if oh <= 0 or ow <= 0 or (sh == 1 and sw == 1):
        return 0
    hq = <object>oh + (<object>kh - 1) * dh // sh
    wq = <object>ow + (<object>kw - 1) * dw // sw
    size = <object>sh * sw * hq * wq + (<object>oh - 1) * wq + ow
    return size if size <= _STRIDED_MAX else 0


def depthwise2d(const float[:, :, ::1] x, const float[:, :, ::1] w, float[:, :, ::1] out,
                Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw,
                Py_ssize_t dh, Py_ssize_t dw, int nthreads, const float[::1] b=None):
    """Depthwise 2-D convolution of one image: channel c of ``x`` (C, H, W) with
    filter ``w[c]`` (C, kh, kw) into ``out`` (C, oh, ow), plus the bias ``b``
    (C,) when given; without ``b``, ``out`` must start zeroed (or hold the
    bias) and the convolution is added to it.

    The valid output range of each filter column is the same for every
    channel and row, so it is computed once (no division in the loops)."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t c, y, ky, kx, iy, x_off, lo, hi, i
    cdef float wv
    cdef float* dst
    cdef const float* src
    cdef Py_ssize_t* bounds
    cdef const float* bp = NULL  # the bias, if given
    cdef bint flat, plane, s2_3x3
    if w.shape[0] != C or out.shape[0] != C:
        raise ValueError("depthwise2d: channel counts differ")
    if b is not None and b.shape[0] != C:
        raise ValueError(f"depthwise2d: bias of {b.shape[0]} values for {C} channels")
    _check_window("depthwise2d", 1, kh, kw, 1, sh, sw, 0, ph, pw, 1, dh, dw)
    _check_reach("depthwise2d", (H, W), (oh, ow), (kh, kw), (sh, sw), (ph, pw), (0, 0), (dh, dw))
    if C == 0 or oh == 0 or ow == 0:
        return
    if b is not None:
        bp = &b[0]
    if (ST_DW16 and sh == 1 and sw == 1 and ow == W
            and <object>st_dw_vectors16(oh * W) * kh * kw <= _DW_MASKS_MAX):
        _depthwise2d_masked(x, w, out, sh, sw, ph, pw, dh, dw, nthreads, bp, True)
        return
    # the stride-1 plane paths and 3x3 stride 2 come before the masked rows
    flat = sh == 1 and sw == 1 and _flat_fits(H, W, oh, ow, kh, kw, dh, dw)
    plane = sh == 1 and sw == 1 and not flat and _plane_fits(oh, ow, kh, kw, dh, dw)
    s2_3x3 = (kh == 3 and kw == 3 and sh == 2 and sw == 2 and dh == 1 and dw == 1
              and <object>st_dw_s2_rows(H, oh, ph) * st_dw_s2_cols(W, ow, pw) <= _STRIDED_MAX)
    if (ST_DW16 and sw <= 2 and not (flat or plane or s2_3x3)
            and <object>st_dw_vectors16(ow) * kw * 2 <= _DW_MASKS_MAX):
        _depthwise2d_masked(x, w, out, sh, sw, ph, pw, dh, dw, nthreads, bp, False)
        return
    if b is not None:
        # the paths below add to out: start it from the bias
        with nogil:
            for c in prange(C, num_threads=nthreads, schedule="static"):
                dst = &out[c, 0, 0]
                wv = b[c]
                for i in range(oh * ow):
                    dst[i] = wv
    if flat:
        _depthwise2d_flat(x, w, out, ph, pw, dh, dw, nthreads)
        return
    if plane:
        _depthwise2d_s1(x, w, out, ph, pw, dh, dw, nthreads)
        return
    if s2_3x3:
        _depthwise2d_3x3s2(x, w, out, ph, pw, nthreads)
        return
    if _strided_floats(oh, ow, kh, kw, sh, sw, dh, dw):
        _depthwise2d_strided(x, w, out, sh, sw, ph, pw, dh, dw, nthreads)
        return
    if sw > 1 and _phases_fit(oh, ow, kh, kw, sh, sw, dh, dw):
        _depthwise2d_phases(x, w, out, sh, sw, ph, pw, dh, dw, nthreads)
        return
    bounds = <Py_ssize_t*>malloc(3 * kw * sizeof(Py_ssize_t))
    if bounds == NULL:
        raise MemoryError()
    for kx in range(kw):
        x_off = kx * dw - pw
        lo = _first_valid(x_off, sw)
        hi = _end_valid(x_off, sw, W, ow)
        if lo > ow:
            lo = ow
        if hi < lo:
            hi = lo
        bounds[3 * kx] = lo
        bounds[3 * kx + 1] = hi
        bounds[3 * kx + 2] = x_off
    try:
        with nogil:
            for c in prange(C, num_threads=nthreads, schedule="static"):
                for y in range(oh):
                    dst = &out[c, y, 0]
                    for ky in range(kh):
                        iy = y * sh - ph + ky * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = &x[c, iy, 0]
                        for kx in range(kw):
                            wv = w[c, ky, kx]
                            lo = bounds[3 * kx]
                            hi = bounds[3 * kx + 1]
                            x_off = bounds[3 * kx + 2]
                            if sw == 1:
                                for i in range(lo, hi):
                                    dst[i] = dst[i] + wv * src[i + x_off]
                            else:
                                for i in range(lo, hi):
                                    dst[i] = dst[i] + wv * src[i * sw + x_off]
    finally:
        free(bounds)


cdef inline void _taps3x3(float* tmp, const float* pad, const float* k,
                          Py_ssize_t row, Py_ssize_t col, Py_ssize_t n) noexcept nogil:
    """``tmp[j] = sum of k[3a+b] * pad[j + a*row + b*col]`` for j < n (a 3x3 stencil)."""
    cdef Py_ssize_t j
    cdef float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4]
    cdef float k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8]
    cdef const float* a = pad
    cdef const float* b = pad + row
    cdef const float* d = pad + 2 * row
    for j in range(n):
        tmp[j] = (k0 * a[j] + k1 * a[j + col] + k2 * a[j + 2 * col]
                  + k3 * b[j] + k4 * b[j + col] + k5 * b[j + 2 * col]
                  + k6 * d[j] + k7 * d[j + col] + k8 * d[j + 2 * col])


cdef void _depthwise2d_flat(const float[:, :, ::1] x, const float[:, :, ::1] w,
                            float[:, :, ::1] out, Py_ssize_t ph, Py_ssize_t pw,
                            Py_ssize_t dh, Py_ssize_t dw, int nthreads) except *:
    """Stride-1 depthwise convolution whose output is as wide as its input,
    each plane read as one flat row (``st_depthwise`` of ``_stencil.h``, on
    a copy of the plane with a margin of zeros): no row-by-row padded copy,
    and loops as long as the plane, which matters on small planes."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1]
    cdef Py_ssize_t c
    cdef unsigned char* masks = <unsigned char*>malloc(kw * oh * W)
    cdef float* mem = NULL
    cdef Py_ssize_t before, after
    cdef int failed = 0  # a reduction: any thread without its buffer counts
    if masks == NULL:
        raise MemoryError()
    st_masks(masks, oh * W, W, kw, dw, pw)
    st_margins(H, W, oh, kh, kw, dh, dw, ph, pw, &before, &after)
    try:
        with nogil, parallel(num_threads=nthreads):
            # one buffer per thread, guarded (see _depthwise2d_s1)
            mem = <float*>malloc((before + H * W + after + 2 * _GUARD) * sizeof(float))
            for c in prange(C, schedule="static"):
                if mem == NULL:
                    failed += 1
                    continue
                st_depthwise(&x[c, 0, 0], &w[c, 0, 0], &out[c, 0, 0], mem + _GUARD, masks,
                             H, W, oh, kh, kw, dh, dw, ph, pw)
            free(mem)
    finally:
        free(masks)
    if failed:
        raise MemoryError()


# most masks (vectors x taps) of _depthwise2d_masked: 2 MiB of them
cdef Py_ssize_t _DW_MASKS_MAX = 1 << 20


cdef void _depthwise2d_masked(const float[:, :, ::1] x, const float[:, :, ::1] w,
                              float[:, :, ::1] out, Py_ssize_t sh, Py_ssize_t sw,
                              Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                              int nthreads, const float* bias, bint flat) except *:
    """Depthwise convolution in the AVX-512 build with masked loads of each
    plane where it is (``_stencil.h``; the masks made once for all
    channels), from ``bias`` (one value a channel) or, where that is NULL,
    added to ``out``. ``flat`` (stride 1, the output as wide as the input):
    the plane read as one flat row of vectors, every tap a load of the
    lanes whose input is inside the plane (``st_dw_flat16``); else row by
    row, a column stride ``sw`` of 1 or 2 (``st_dw_rows16``). The channels
    are shared out with stealing (``_steal.h``)."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t T = kh * kw, L = oh * W
    cdef Py_ssize_t c
    cdef int n = nthreads if nthreads > 1 else 1
    cdef int tid
    cdef ws_share* shares
    cdef void* raw
    cdef Py_ssize_t count = (st_dw_vectors16(L) * T if flat
                             else st_dw_vectors16(ow) * kw * 2)
    cdef uint16_t* masks = <uint16_t*>malloc(count * sizeof(uint16_t))
    cdef Py_ssize_t* off = <Py_ssize_t*>malloc(T * sizeof(Py_ssize_t))
    if masks == NULL or off == NULL:
        free(masks)
        free(off)
        raise MemoryError()
    try:
        if flat:
            st_dw_masks16(masks, off, H, W, oh, kh, kw, dh, dw, ph, pw)
        else:
            st_dw_row_masks16(masks, W, ow, kw, sw, dw, pw)
        raw = _shares(n, C)
        shares = ws_align(raw)
        with nogil, parallel(num_threads=n):
            tid = threadid()
            c = ws_next(shares, n, tid)
            while c >= 0:
                if flat:
                    st_dw_flat16(&x[c, 0, 0], &w[c, 0, 0], NULL if bias == NULL else bias + c,
                                 &out[c, 0, 0], masks, off, L, T)
                else:
                    st_dw_rows16(&x[c, 0, 0], &w[c, 0, 0], NULL if bias == NULL else bias + c,
                                 &out[c, 0, 0], masks, H, W, oh, ow, kh, kw, sh, sw, dh, dw,
                                 ph, pw)
                c = ws_next(shares, n, tid)
        free(raw)
    finally:
        free(masks)
        free(off)


cdef void _depthwise2d_strided(const float[:, :, ::1] x, const float[:, :, ::1] w,
                               float[:, :, ::1] out, Py_ssize_t sh, Py_ssize_t sw,
                               Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                               int nthreads) except *:
    """Strided depthwise convolution of small planes on their phases, each
    filter one loop over the output plane (``st_depthwise_strided`` of
    ``_stencil.h``), added to ``out``."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t size = _strided_floats(oh, ow, kh, kw, sh, sw, dh, dw)
    cdef Py_ssize_t c
    cdef float* mem = NULL
    cdef int failed = 0  # a reduction: any thread without its buffer counts
    with nogil, parallel(num_threads=nthreads):
        # one buffer per thread, guarded (see _depthwise2d_s1)
        mem = <float*>malloc((size + 2 * _GUARD) * sizeof(float))
        for c in prange(C, schedule="static"):
            if mem == NULL:
                failed += 1
                continue
            st_depthwise_strided(&x[c, 0, 0], &w[c, 0, 0], &out[c, 0, 0], mem + _GUARD, H, W,
                                 oh, ow, kh, kw, sh, sw, dh, dw, ph, pw)
        free(mem)
    if failed:
        raise MemoryError()


cdef void _depthwise2d_3x3s2(const float[:, :, ::1] x, const float[:, :, ::1] w,
                             float[:, :, ::1] out, Py_ssize_t ph, Py_ssize_t pw,
                             int nthreads) except *:
    """3x3 stride-2 depthwise convolution, one output row at a time in
    vectors on a zero-padded copy of each plane (``st_dw3x3_s2`` of
    ``_stencil.h``), added to ``out``. Each thread's buffer is zeroed once:
    the pads stay zero, every channel writes only its plane's place."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t WP = st_dw_s2_cols(W, ow, pw)
    cdef Py_ssize_t size = st_dw_s2_rows(H, oh, ph) * WP + ST_S2_SLACK
    cdef Py_ssize_t c
    cdef float* mem = NULL
    cdef int failed = 0  # a reduction: any thread without its buffer counts
    with nogil, parallel(num_threads=nthreads):
        # one buffer per thread, guarded (see _depthwise2d_s1)
        mem = <float*>calloc(size + 2 * _GUARD, sizeof(float))
        for c in prange(C, schedule="static"):
            if mem == NULL:
                failed += 1
                continue
            st_dw3x3_s2(&x[c, 0, 0], &w[c, 0, 0], &out[c, 0, 0], mem + _GUARD, H, W, oh, ow,
                        ph, pw, WP)
        free(mem)
    if failed:
        raise MemoryError()


cdef void _depthwise2d_s1(const float[:, :, ::1] x, const float[:, :, ::1] w,
                          float[:, :, ::1] out, Py_ssize_t ph, Py_ssize_t pw,
                          Py_ssize_t dh, Py_ssize_t dw, int nthreads) except *:
    """Stride-1 depthwise convolution on a zero-padded copy of each channel.

    With the plane padded to width ``Wp``, every filter tap is one
    ``tmp[j] += w * pad[j + offset]`` over ``(oh - 1) * Wp + ow`` contiguous
    elements (columns past ``ow`` are computed and dropped), so the inner
    loop is long and vectorizes, instead of one short loop per output row.
    """
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    # rows/columns of the padded plane that any output reads
    cdef Py_ssize_t Hp = oh + (kh - 1) * dh, Wp = ow + (kw - 1) * dw
    cdef Py_ssize_t L = (oh - 1) * Wp + ow
    cdef Py_ssize_t c, y, ky, kx, j, off
    cdef float wv
    cdef float* mem = NULL
    cdef float* pad
    cdef float* tmp
    cdef float* dst
    cdef const float* src
    cdef int failed = 0  # a reduction: any thread without its buffer counts
    with nogil, parallel(num_threads=nthreads):
        # one buffer per thread (not per channel), guarded by a cache line
        # on both sides: two threads' buffers never share a line
        mem = <float*>malloc((Hp * Wp + oh * Wp + 2 * _GUARD) * sizeof(float))
        for c in prange(C, schedule="static"):
            if mem == NULL:
                failed += 1
                continue
            pad = mem + _GUARD
            tmp = pad + Hp * Wp
            _padded_plane(pad, &x[c, 0, 0], H, W, Hp, Wp, ph, pw, 0.0)
            if kh == 3 and kw == 3:
                # all nine taps in one pass: each tmp element written once
                _taps3x3(tmp, pad, &w[c, 0, 0], dh * Wp, dw, L)
            else:
                memset(tmp, 0, oh * Wp * sizeof(float))
                for ky in range(kh):
                    for kx in range(kw):
                        wv = w[c, ky, kx]
                        off = ky * dh * Wp + kx * dw
                        src = pad + off
                        for j in range(L):
                            tmp[j] = tmp[j] + wv * src[j]
            for y in range(oh):
                dst = &out[c, y, 0]
                for j in range(ow):
                    dst[j] = dst[j] + tmp[y * Wp + j]
        free(mem)
    if failed:
        raise MemoryError()


cdef bint _phases_fit(Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh, Py_ssize_t kw,
                      Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh, Py_ssize_t dw):
    """Whether :func:`_depthwise2d_phases`'s buffer, about Hp * (Wp + sw)
    floats, is at most ``_MAX_PLANE`` (in Python integers: it can overflow)."""
    rows = (<object>oh - 1) * sh + (<object>kh - 1) * dh + 1
    cols = (<object>ow - 1) * sw + (<object>kw - 1) * dw + 1 + sw
    return rows * cols <= _MAX_PLANE


cdef void _depthwise2d_phases(const float[:, :, ::1] x, const float[:, :, ::1] w,
                              float[:, :, ::1] out, Py_ssize_t sh, Py_ssize_t sw,
                              Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                              int nthreads) except *:
    """Depthwise convolution with a column stride ``sw`` > 1 on a zero-padded
    copy of each channel split into ``sw`` column phases (phase k holds the
    padded columns k, k + sw, ...). An output row then reads each filter tap
    as ``ow`` contiguous values of one phase row, so the inner loops
    vectorize, instead of one strided loop per tap and row."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t Hp = (oh - 1) * sh + (kh - 1) * dh + 1
    cdef Py_ssize_t Wp = (ow - 1) * sw + (kw - 1) * dw + 1
    cdef Py_ssize_t Wq = (Wp + sw - 1) // sw  # columns of a phase
    cdef Py_ssize_t c, r, q, k, iy, col, qlo, qhi, y, ky, kx, j, t
    cdef float wv, w0, w1, w2, w3, w4, w5, w6, w7, w8
    cdef float* mem = NULL
    cdef float* buf
    cdef float* dst
    cdef float* phase
    cdef const float* src
    cdef const float* row
    cdef const float* p0
    cdef const float* p1
    cdef const float* p2
    cdef const float* p3
    cdef const float* p4
    cdef const float* p5
    cdef const float* p6
    cdef const float* p7
    cdef const float* p8
    cdef const float* wc
    cdef Py_ssize_t* tap = <Py_ssize_t*>malloc(kh * kw * sizeof(Py_ssize_t))
    cdef int failed = 0  # a reduction: any thread without its buffer counts
    if tap == NULL:
        raise MemoryError()
    # offset of each tap (ky, kx) in the phase buffer, less the output row's
    for ky in range(kh):
        for kx in range(kw):
            t = kx * dw
            tap[ky * kw + kx] = ((t % sw) * Hp + ky * dh) * Wq + t // sw
    try:
        with nogil, parallel(num_threads=nthreads):
            # one buffer per thread, guarded (see _depthwise2d_s1)
            mem = <float*>malloc((sw * Hp * Wq + 2 * _GUARD) * sizeof(float))
            for c in prange(C, schedule="static"):
                if mem == NULL:
                    failed += 1
                    continue
                buf = mem + _GUARD
                for r in range(Hp):
                    iy = r - ph
                    for k in range(sw):
                        phase = buf + (k * Hp + r) * Wq
                        if iy < 0 or iy >= H:
                            for q in range(Wq):
                                phase[q] = 0.0
                            continue
                        # the phase's columns inside the data: [qlo, qhi)
                        col = k - pw
                        qlo = _first_valid(col, sw)
                        if qlo > Wq:
                            qlo = Wq
                        qhi = _end_valid(col, sw, W, Wq)
                        if qhi < qlo:
                            qhi = qlo
                        for q in range(qlo):
                            phase[q] = 0.0
                        for q in range(qhi, Wq):
                            phase[q] = 0.0
                        row = &x[c, iy, 0] + col
                        if sw == 2:
                            for q in range(qlo, qhi):
                                phase[q] = row[2 * q]
                        else:
                            for q in range(qlo, qhi):
                                phase[q] = row[q * sw]
                wc = &w[c, 0, 0]
                for y in range(oh):
                    dst = &out[c, y, 0]
                    src = buf + y * sh * Wq
                    if kh == 3 and kw == 3:
                        w0, w1, w2 = wc[0], wc[1], wc[2]
                        w3, w4, w5 = wc[3], wc[4], wc[5]
                        w6, w7, w8 = wc[6], wc[7], wc[8]
                        p0 = src + tap[0]
                        p1 = src + tap[1]
                        p2 = src + tap[2]
                        p3 = src + tap[3]
                        p4 = src + tap[4]
                        p5 = src + tap[5]
                        p6 = src + tap[6]
                        p7 = src + tap[7]
                        p8 = src + tap[8]
                        for j in range(ow):
                            dst[j] = dst[j] + (w0 * p0[j] + w1 * p1[j] + w2 * p2[j]
                                               + w3 * p3[j] + w4 * p4[j] + w5 * p5[j]
                                               + w6 * p6[j] + w7 * p7[j] + w8 * p8[j])
                    else:
                        for t in range(kh * kw):
                            wv = wc[t]
                            p0 = src + tap[t]
                            for j in range(ow):
                                dst[j] = dst[j] + wv * p0[j]
            free(mem)
    finally:
        free(tap)
    if failed:
        raise MemoryError()
