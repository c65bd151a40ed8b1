# The convolution helpers, included by conv.pyx (the portable build) and by
# conv_avx2.pyx / conv_avx512.pyx (the same source built for newer
# CPUs, see setup.py). Documented in conv.pyx.

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

include "_index.pxi"
include "_steal.pxi"

# floats before and after each thread's buffer: a 64-byte cache line, so that
# buffers malloc'd side by side by two threads never share one (they did, and
# two threads ran slower than one)
cdef enum:
    _GUARD = 16


def im2col(const float[:, :, :, ::1] x, float[:, ::1] col,
           Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
           Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
           Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
           Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
           Py_ssize_t od, Py_ssize_t oh, Py_ssize_t ow, int nthreads):
    """Unfold ``x`` (C, D, H, W) into ``col`` (C*kd*kh*kw, od*oh*ow); pads read as 0."""
    cdef Py_ssize_t C = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t rows = C * kd * kh * kw, ksize = kd * kh * kw
    cdef Py_ssize_t r, c, k, kz, ky, kx, z, y, iz, iy, x_off, lo, hi, i
    cdef float* dst
    cdef const float* src
    _check_window("im2col", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    # in Python integers: the products of the arguments can overflow
    if col.shape[0] != C * <object>kd * kh * kw or col.shape[1] != <object>od * oh * ow:
        raise ValueError("im2col: col has the wrong shape")
    _check_reach("im2col", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (0, 0, 0), (dd, dh, dw))
    with nogil:
        for r in prange(rows, num_threads=nthreads, schedule="static"):
            c = r // ksize
            k = r - c * ksize
            kz = k // (kh * kw)
            ky = (k // kw) % kh
            kx = k % kw
            x_off = kx * dw - pw
            lo = _first_valid(x_off, sw)
            hi = _end_valid(x_off, sw, W, ow)
            if lo > ow:
                lo = ow
            if hi < lo:
                hi = lo
            for z in range(od):
                iz = z * sd - pd + kz * dd
                for y in range(oh):
                    dst = &col[r, (z * oh + y) * ow]
                    iy = y * sh - ph + ky * dh
                    if iz < 0 or iz >= D or iy < 0 or iy >= H:
                        memset(dst, 0, ow * sizeof(float))
                        continue
                    if lo > 0:
                        memset(dst, 0, lo * sizeof(float))
                    if hi < ow:
                        memset(dst + hi, 0, (ow - hi) * sizeof(float))
                    src = &x[c, iz, iy, 0]
                    if sw == 1:
                        if hi > lo:
                            memcpy(dst + lo, src + lo + x_off, (hi - lo) * sizeof(float))
                    else:
                        for i in range(lo, hi):
                            dst[i] = src[i * sw + x_off]


def col2im(const float[:, ::1] col, float[:, :, :, ::1] x,
           Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
           Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
           Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
           Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
           Py_ssize_t od, Py_ssize_t oh, Py_ssize_t ow, int nthreads):
    """Fold ``col`` (C*kd*kh*kw, od*oh*ow) back, adding into ``x`` (C, D, H, W).

    The adjoint of :func:`im2col`, used by ConvTranspose; ``x`` must start zeroed.
    """
    cdef Py_ssize_t C = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t ksize = kd * kh * kw
    cdef Py_ssize_t r, c, k, kz, ky, kx, z, y, iz, iy, x_off, lo, hi, i
    cdef const float* src
    cdef float* dst
    _check_window("col2im", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    # in Python integers: the products of the arguments can overflow
    if col.shape[0] != C * <object>kd * kh * kw or col.shape[1] != <object>od * oh * ow:
        raise ValueError("col2im: col has the wrong shape")
    _check_reach("col2im", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (0, 0, 0), (dd, dh, dw))
    with nogil:
        for c in prange(C, num_threads=nthreads, schedule="static"):
            for k in range(ksize):
                r = c * ksize + k
                kz = k // (kh * kw)
                ky = (k // kw) % kh
                kx = k % kw
                x_off = kx * dw - pw
                lo = _first_valid(x_off, sw)
                hi = _end_valid(x_off, sw, W, ow)
                for z in range(od):
                    iz = z * sd - pd + kz * dd
                    if iz < 0 or iz >= D:
                        continue
                    for y in range(oh):
                        iy = y * sh - ph + ky * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = &col[r, (z * oh + y) * ow]
                        dst = &x[c, iz, iy, 0]
                        for i in range(lo, hi):
                            dst[i * sw + x_off] += src[i]


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


def bias_clamp(float[:, ::1] y, const float[::1] b, float lo, float hi, int nthreads):
    """Add ``b[r % M]`` (M = ``len(b)``, one value per output channel) to row r
    of ``y`` (N*M, spatial) and clamp it to [lo, hi], in place: a Conv's bias
    and its fused Relu or Clip in one pass. NaN stays NaN; ``b`` may be empty
    (no bias). Rows split over ``nthreads``."""
    cdef Py_ssize_t R = y.shape[0], L = y.shape[1], M = b.shape[0]
    cdef Py_ssize_t r, j
    cdef float bv, v
    cdef float* row
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    if M and R % M:
        raise ValueError(f"bias_clamp: {R} rows are not a multiple of {M} channels")
    if R == 0 or L == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            bv = b[r % M] if M else 0.0
            row = &y[r, 0]
            if clamp:
                for j in range(L):
                    v = row[j] + bv
                    v = lo if v < lo else v
                    row[j] = hi if v > hi else v
            else:
                for j in range(L):
                    row[j] = row[j] + bv


def bias_add_clamp(float[:, ::1] y, const float[::1] b, const float[:, ::1] z,
                   float lo, float hi, int nthreads):
    """Add ``b[r % M]`` and row r of ``z`` to row r of ``y`` (N*M, spatial) and
    clamp it to [lo, hi], in place: a Conv's bias, a residual of its output's
    shape and its fused Relu or Clip in one pass (FusedConvAdd). NaN stays NaN;
    ``b`` may be empty (no bias). Rows split over ``nthreads``."""
    cdef Py_ssize_t R = y.shape[0], L = y.shape[1], M = b.shape[0]
    cdef Py_ssize_t r, j
    cdef float bv, v
    cdef float* row
    cdef const float* zrow
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    if M and R % M:
        raise ValueError(f"bias_add_clamp: {R} rows are not a multiple of {M} channels")
    if z.shape[0] != R or z.shape[1] != L:
        raise ValueError(f"bias_add_clamp: z is {z.shape[0]}x{z.shape[1]}, y {R}x{L}")
    if R == 0 or L == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            bv = b[r % M] if M else 0.0
            row = &y[r, 0]
            zrow = &z[r, 0]
            if clamp:
                for j in range(L):
                    v = row[j] + bv + zrow[j]
                    v = lo if v < lo else v
                    row[j] = hi if v > hi else v
            else:
                for j in range(L):
                    row[j] = row[j] + bv + zrow[j]


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


cdef extern from "_direct_conv.h" nogil:
    void dc_pack_phase(const float* x, Py_ssize_t H, Py_ssize_t W, float* out,
                       Py_ssize_t C, Py_ssize_t SH, Py_ssize_t S, Py_ssize_t HP,
                       Py_ssize_t WQ, Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t c,
                       Py_ssize_t q)
    void dc_pack_rows(const float* x, Py_ssize_t H, Py_ssize_t W, float* out,
                      Py_ssize_t C, Py_ssize_t SH, Py_ssize_t S, Py_ssize_t HP,
                      Py_ssize_t WQ, Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t c,
                      Py_ssize_t q, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t base)
    void dc_rows(const float* xph, Py_ssize_t C, Py_ssize_t HP, Py_ssize_t WQ,
                 const float* wp, Py_ssize_t KH, Py_ssize_t KW, const Py_ssize_t* kyoff,
                 const Py_ssize_t* koff, Py_ssize_t sh, float* y, const float* z,
                 const float* bias, Py_ssize_t M, Py_ssize_t OH, Py_ssize_t OW, float lo,
                 float hi, int clamp, Py_ssize_t ocb, Py_ssize_t oy)
    void dc_flat(const float* xph, Py_ssize_t C, Py_ssize_t HQ, Py_ssize_t WQ,
                 const float* xlast, const float* wp, Py_ssize_t KH, Py_ssize_t KW,
                 const Py_ssize_t* kyoff,
                 const Py_ssize_t* koff, float* y, Py_ssize_t ycs, const float* z,
                 const float* bias,
                 Py_ssize_t M, Py_ssize_t OH, Py_ssize_t OW, float lo, float hi, int clamp,
                 Py_ssize_t ocb, Py_ssize_t j0, Py_ssize_t nv, int pf_out)
    int DC_OCB
    int DC_VL
    int DC_VMAX


DIRECT_BLOCK = DC_OCB
"""Output channels the direct convolution computes together (its weights'
last axis, see :func:`direct_conv2d`)."""

DIRECT_VECTOR = DC_VL
"""Floats per vector of the direct convolution in this build (16 with
AVX-512, 8 otherwise)."""

# input floats past which flat mode's items go run by run (a quarter of a
# 2 MiB cache: the planes and the block's weights stay in L2 or L3)
cdef Py_ssize_t _DC_CACHE_FLOATS = 128 * 1024


def direct_conv2d_scratch(Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW,
                          Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t sh, Py_ssize_t sw,
                          Py_ssize_t dh, Py_ssize_t dw, bint flat=False):
    """Floats of the padded, phase-split input copy :func:`direct_conv2d`
    needs for C input channels and an OH x OW output (``flat``: in flat mode)."""
    _check_window("direct_conv2d", 1, KH, KW, 1, sh, sw, 0, 0, 0, 1, dh, dw)
    if C < 0 or OH < 0 or OW < 0:
        raise ValueError(f"direct_conv2d: negative size {(C, OH, OW)}")
    return _dc_scratch(C, OH, OW, KH, KW, sh, sw, dh, dw, flat)


cdef object _dc_scratch(Py_ssize_t C, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t KH,
                        Py_ssize_t KW, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t dh,
                        Py_ssize_t dw, bint flat):
    """:func:`direct_conv2d_scratch` of a checked window (in Python integers)."""
    if flat:
        return (sh * sw * C * _dc_flat_size(OH, KH, sh, dh) * _dc_flat_size(OW, KW, sw, dw)
                + DC_VL * DC_VMAX)
    return sw * C * _dc_rows_needed(OH, KH, sh, dh) * _dc_cols_needed(OW, KW, sw, dw)


cdef inline Py_ssize_t _dc_rows_needed(Py_ssize_t OH, Py_ssize_t KH, Py_ssize_t sh,
                                       Py_ssize_t dh) noexcept:
    return (OH - 1) * sh + (KH - 1) * dh + 1 if OH > 0 else 0


cdef inline Py_ssize_t _dc_cols_needed(Py_ssize_t OW, Py_ssize_t KW, Py_ssize_t sw,
                                       Py_ssize_t dw) noexcept:
    # vectors of DC_VL columns are read up to OW rounded up to DC_VL, from
    # the farthest filter column's offset in its phase
    return ((OW + DC_VL - 1) // DC_VL) * DC_VL + ((KW - 1) * dw) // sw


cdef inline Py_ssize_t _dc_flat_size(Py_ssize_t O, Py_ssize_t K, Py_ssize_t s,
                                     Py_ssize_t d) noexcept:
    # flat mode's phase planes along one axis: the outputs and the filter's
    # reach in its phase
    return O + ((K - 1) * d) // s if O > 0 else 0


cdef Py_ssize_t* _dc_tap_offsets(Py_ssize_t KH, Py_ssize_t KW, Py_ssize_t C, Py_ssize_t HP,
                                 Py_ssize_t WQ, Py_ssize_t SH, Py_ssize_t sw, Py_ssize_t dh,
                                 Py_ssize_t dw) noexcept:
    """Each filter tap's offset in the phase planes (SH row phases, sw column
    phases, C planes of HP x WQ each): KW column offsets (its column phase's
    plane and its column there), then KH row offsets (its row phase's planes
    and its row there), in one malloc'd block the caller frees; NULL when
    out of memory."""
    cdef Py_ssize_t kx, ky
    cdef Py_ssize_t* off = <Py_ssize_t*>malloc((KW + KH) * sizeof(Py_ssize_t))
    if off == NULL:
        return NULL
    for kx in range(KW):
        off[kx] = ((kx * dw) % sw) * C * HP * WQ + (kx * dw) // sw
    for ky in range(KH):
        off[KW + ky] = ((ky * dh) % SH) * sw * C * HP * WQ + ((ky * dh) // SH) * WQ
    return off


def direct_conv2d(const float[:, :, ::1] x, const float[:, :, :, :, ::1] wp,
                  float[:, :, ::1] y, const float[::1] b, const float[:, :, ::1] z,
                  float[::1] scratch, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw,
                  Py_ssize_t dh, Py_ssize_t dw, float lo, float hi, int nthreads,
                  bint flat=False, Py_ssize_t group=1, bint interleave=False):
    """Direct 2-D convolution of one image ``x`` (C, H, W) into ``y`` (M, OH, OW),
    with the bias ``b`` ((M,) or empty), the residual ``z`` (``y``'s shape,
    or ``None``) and the clamp to [lo, hi] applied as ``y`` is written.

    ``wp`` holds the weights (M, C, KH, KW) packed as (ceil(M / B), C, KH, KW,
    B) with B = :data:`DIRECT_BLOCK` output channels side by side (zeros past
    M). ``scratch`` receives the padded, phase-split input copy; it needs
    :func:`direct_conv2d_scratch` floats (with the same ``flat``). Begin
    pads are ``ph``, ``pw``; every input position a window reaches past the
    input reads 0. Output rows (B channels each) split over ``nthreads``, in
    one share of consecutive items a thread; a thread done with its share
    takes the back half of what is left of another's (``_steal.h``).

    ``flat`` computes runs of vectors along the padded planes read as one
    long row each, rather than along each output row: small output planes
    (7x7, 14x14) then fill whole vectors; the work items are runs of flat
    positions of B channels. With strides the planes are split into row and
    column phases, so every filter tap still reads one run. A 1x1 window
    with stride 1 and no pads reads the input planes where they are (no
    copy); only the last one is copied into ``scratch``, which the last
    vectors read past.

    With ``group`` > 1 (flat mode only) the C input and M output channels
    split into that many groups; ``wp`` then holds each group's weights (M /
    group, C / group, KH, KW) packed as above, one group after the other
    (group * ceil(M / group / B) blocks), and the work items of all groups
    share one parallel region. With ``interleave`` (groups, no residual) the
    groups' output channels come out interleaved: channel j of group g is
    ``y``'s channel ``j * group + g`` (ShuffleNet's channel shuffle after
    the Conv, written so at no cost)."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t MB = wp.shape[0], KH = wp.shape[2], KW = wp.shape[3]
    cdef Py_ssize_t M = y.shape[0], OH = y.shape[1], OW = y.shape[2]
    cdef Py_ssize_t HP, WQ, item, c, chunk, chunks, nv, SH, phases
    cdef Py_ssize_t cg, mg, MBg, g, blk, it, ycs, ystep
    cdef int n, tid
    cdef void* raw
    cdef ws_share* shares
    cdef const float* zg
    cdef const float* bg
    cdef const float* xin
    cdef const float* xl
    cdef bint in_place
    cdef bint by_chunk
    cdef Py_ssize_t* koff
    cdef Py_ssize_t* kyoff
    cdef const float* zp = NULL
    cdef const float* bp = NULL
    cdef float* xph
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    _check_window("direct_conv2d", 1, KH, KW, 1, sh, sw, 0, ph, pw, 1, dh, dw)
    if group < 1 or C % group or M % group:
        raise ValueError(f"direct_conv2d: {C} input and {M} output channels in {group} groups")
    if group > 1 and not flat:
        raise ValueError("direct_conv2d: groups need flat mode")
    if interleave and (group == 1 or z is not None):
        raise ValueError("direct_conv2d: interleaved output needs groups and no residual")
    cg = C // group
    mg = M // group
    MBg = (mg + DC_OCB - 1) // DC_OCB
    if wp.shape[1] != cg or wp.shape[4] != DC_OCB or MB != group * MBg:
        raise ValueError(
            f"direct_conv2d: packed weights {tuple(wp.shape)[:5]} for {C} input and "
            f"{M} output channels in {group} groups (blocks of {DC_OCB})"
        )
    if b.shape[0] not in (0, M):
        raise ValueError(f"direct_conv2d: bias of {b.shape[0]} values for {M} channels")
    if z is not None:
        if tuple(z.shape)[:3] != tuple(y.shape)[:3]:
            raise ValueError("direct_conv2d: the residual's shape differs from the output's")
        zp = &z[0, 0, 0] if z.shape[0] * z.shape[1] * z.shape[2] else NULL
    if M == 0 or OH == 0 or OW == 0:
        return
    if C == 0:
        raise ValueError("direct_conv2d: no input channels")
    need = _dc_scratch(C, OH, OW, KH, KW, sh, sw, dh, dw, flat)
    if scratch.shape[0] < need:
        raise ValueError(f"direct_conv2d: scratch of {scratch.shape[0]} floats, {need} needed")
    # a 1x1 window on the input as it is: its planes are the padded planes
    in_place = (flat and KH == 1 and KW == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0
                and OH == H and OW == W)
    if flat:  # phase planes of rows and columns
        SH = sh
        HP = _dc_flat_size(OH, KH, sh, dh)
        WQ = _dc_flat_size(OW, KW, sw, dw)
    else:  # column phases of whole padded rows
        SH = 1
        HP = _dc_rows_needed(OH, KH, sh, dh)
        WQ = _dc_cols_needed(OW, KW, sw, dw)
    phases = SH * sw
    # flat mode: the plane's vectors in equal runs of at most DC_VMAX
    nv = ((OH - 1) * WQ + OW + DC_VL - 1) // DC_VL
    chunks = (nv + DC_VMAX - 1) // DC_VMAX
    nv = (nv + chunks - 1) // chunks
    chunk = nv * DC_VL
    # Each work item reads its channel block's weights and its positions of
    # every input plane. Items go block by block (the input planes read once
    # per block) while the planes fit in the cache; past that, run by run
    # (a run of every plane read once per block while it is in the cache,
    # the weights once per run).
    by_chunk = flat and phases * C * HP * WQ > _DC_CACHE_FLOATS
    if b.shape[0]:
        bp = &b[0]
    # where group g's output channels start, and the step between them
    ystep = 1 if interleave else mg
    ycs = (group if interleave else 1) * OH * OW
    xph = &scratch[0]
    xin = xph
    if in_place:
        # the planes are x's; the last one's copy (with the scratch's slack
        # after it) is what the last vectors read
        xin = &x[0, 0, 0]
        memcpy(xph, xin + (C - 1) * H * W, H * W * sizeof(float))
    # the work items' shares, one a thread
    n = nthreads if nthreads > 1 else 1
    raw = _shares(n, MB * chunks if flat else MB * OH)
    shares = ws_align(raw)
    koff = _dc_tap_offsets(KH, KW, C, HP, WQ, SH, sw, dh, dw)
    if koff == NULL:
        free(raw)
        raise MemoryError()
    kyoff = koff + KW
    try:
        # one parallel region: every thread copies its share of the (channel,
        # row phase) planes, waits for the others (ws_barrier: a prange in a
        # parallel block ends without a barrier), then computes the items of
        # its share and, its share done, those it takes from the others'
        # (see _steal.h)
        with nogil, parallel(num_threads=n):
            for c in prange(0 if in_place else C * SH, schedule="static"):
                dc_pack_phase(&x[0, 0, 0], H, W, xph, C, SH, sw, HP, WQ, ph, pw, c // SH,
                              c % SH)
            ws_barrier()  # every plane copied before any is read
            tid = threadid()
            item = ws_next(shares, n, tid)
            while item >= 0:
                if flat:
                    # item -> (block, chunk); block -> (group, its block)
                    if by_chunk:
                        blk = item % MB
                        it = item // MB
                    else:
                        blk = item // chunks
                        it = item % chunks
                    g = blk // MBg
                    zg = zp
                    if zp != NULL:
                        zg = zp + g * mg * OH * OW
                    bg = bp
                    if bp != NULL:
                        bg = bp + g * mg
                    xl = xin + (g * cg + cg - 1) * HP * WQ
                    if in_place and g == group - 1:
                        xl = xph
                    dc_flat(xin + g * cg * HP * WQ, cg, HP, WQ, xl,
                            &wp[g * MBg, 0, 0, 0, 0], KH, KW, kyoff, koff,
                            &y[g * ystep, 0, 0], ycs, zg, bg, mg, OH, OW, lo, hi, clamp,
                            blk - g * MBg, it * chunk, nv, 1)
                else:
                    dc_rows(xph, C, HP, WQ, &wp[0, 0, 0, 0, 0], KH, KW, kyoff, koff, sh,
                            &y[0, 0, 0], zp, bp, M, OH, OW, lo, hi, clamp,
                            item // OH, item % OH)
                item = ws_next(shares, n, tid)
    finally:
        free(koff)
        free(raw)


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


cdef extern from "_pool.h" nogil:
    enum:
        PL_SLACK
    void pl_plane(const float* x, Py_ssize_t H, Py_ssize_t W, float* y, Py_ssize_t OH,
                  Py_ssize_t OW, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw,
                  Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw, int take_max,
                  const float* inv_y, const float* inv_x, float* row, Py_ssize_t Wr)
    Py_ssize_t pl_block_rows(Py_ssize_t rs, Py_ssize_t OH)


# Floats of a band of the fused Conv and max pool: DC_OCB channels of the
# Conv's rows that a band of pooled rows reads (128 KiB: in L2 while they
# are pooled)
cdef Py_ssize_t _CP_BAND_FLOATS = 32 * 1024


def direct_conv2d_maxpool(const float[:, :, ::1] x, const float[:, :, :, :, ::1] wp,
                          float[:, :, ::1] y, const float[::1] b, float[::1] scratch,
                          Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t sh, Py_ssize_t sw,
                          Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                          float lo, float hi, Py_ssize_t pkh, Py_ssize_t pkw, Py_ssize_t psh,
                          Py_ssize_t psw, Py_ssize_t pph, Py_ssize_t ppw, Py_ssize_t pdh,
                          Py_ssize_t pdw, int nthreads):
    """:func:`direct_conv2d` (flat mode, one group, no residual) of one image
    ``x`` (C, H, W) to an OH x OW output, then a 2-D max pool of that output
    into ``y`` (M, PH, PW): window ``pkh`` x ``pkw``, strides ``psh``,
    ``psw``, begin pads ``pph``, ``ppw``, dilations ``pdh``, ``pdw`` (pads
    and windows past the Conv's output read -inf: a window with no input
    gives -inf, as MaxPool does). The Conv's output is never written whole:
    each work item (B output channels, a band of pooled rows) computes the
    Conv rows its band reads into a buffer of its thread's, which stays in
    the cache, and pools them from there; rows two bands read are computed
    twice. ``wp``, ``b``, ``scratch``, the Conv's window and the clamp are
    as for :func:`direct_conv2d` with ``flat``."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t MB = wp.shape[0], KH = wp.shape[2], KW = wp.shape[3]
    cdef Py_ssize_t M = y.shape[0], PH = y.shape[1], PW = y.shape[2]
    cdef Py_ssize_t HP, WQ, item, c, bands, BP, rows_max, bcs, Wr, rs, size, j, jend
    cdef Py_ssize_t blk, band, p0, p1, r0, r1, r, m0
    cdef int n, tid
    cdef void* raw
    cdef ws_share* shares
    cdef Py_ssize_t* koff
    cdef Py_ssize_t* kyoff
    cdef const float* bp = NULL
    cdef float* xph
    cdef float* mem
    cdef float* band_buf
    cdef float* row_buf
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    _check_window("direct_conv2d_maxpool", 1, KH, KW, 1, sh, sw, 0, ph, pw, 1, dh, dw)
    _check_window("direct_conv2d_maxpool", 1, pkh, pkw, 1, psh, psw, 0, pph, ppw, 1, pdh, pdw)
    if wp.shape[1] != C or wp.shape[4] != DC_OCB or MB != (M + DC_OCB - 1) // DC_OCB:
        raise ValueError(
            f"direct_conv2d_maxpool: packed weights {tuple(wp.shape)[:5]} for {C} input and "
            f"{M} output channels (blocks of {DC_OCB})"
        )
    if b.shape[0] not in (0, M):
        raise ValueError(f"direct_conv2d_maxpool: bias of {b.shape[0]} values for {M} channels")
    if OH < 0 or OW < 0:
        raise ValueError(f"direct_conv2d_maxpool: negative Conv output {(OH, OW)}")
    if M == 0 or PH == 0 or PW == 0:
        return
    if C == 0:
        raise ValueError("direct_conv2d_maxpool: no input channels")
    need = _dc_scratch(C, OH, OW, KH, KW, sh, sw, dh, dw, True)
    if scratch.shape[0] < need:
        raise ValueError(
            f"direct_conv2d_maxpool: scratch of {scratch.shape[0]} floats, {need} needed")
    # the pooled rows' bands: about _CP_BAND_FLOATS of Conv rows each
    BP = max(1, min(PH, _CP_BAND_FLOATS // max(1, DC_OCB * psh * OW)))
    bands = (PH + BP - 1) // BP
    BP = (PH + bands - 1) // bands
    rows_max = min(OH, (BP - 1) * psh + (pkh - 1) * pdh + 1)
    bcs = rows_max * OW
    Wr = max(ppw + OW, (PW - 1) * psw + (pkw - 1) * pdw + 1)
    rs = Wr + PL_SLACK
    size = DC_OCB * bcs + pl_block_rows(rs, BP) * rs
    HP = _dc_flat_size(OH, KH, sh, dh)
    WQ = _dc_flat_size(OW, KW, sw, dw)
    if b.shape[0]:
        bp = &b[0]
    xph = &scratch[0]
    n = nthreads if nthreads > 1 else 1
    raw = _shares(n, MB * bands)
    shares = ws_align(raw)
    koff = _dc_tap_offsets(KH, KW, C, HP, WQ, sh, sw, dh, dw)
    if koff == NULL:
        free(raw)
        raise MemoryError()
    kyoff = koff + KW
    try:
        with nogil, parallel(num_threads=n):
            for c in prange(C * sh, schedule="static"):
                dc_pack_phase(&x[0, 0, 0], H, W, xph, C, sh, sw, HP, WQ, ph, pw, c // sh,
                              c % sh)
            ws_barrier()  # every plane copied before any is read
            # each thread's band of Conv rows and its pooling row buffer
            # (-inf outside the data: the pads); a thread without one takes
            # no items (the others take its share)
            mem = <float*>malloc((size + 2 * _GUARD) * sizeof(float))
            if mem != NULL:
                band_buf = mem + _GUARD
                row_buf = band_buf + DC_OCB * bcs
                for j in range(size - DC_OCB * bcs):
                    row_buf[j] = -INFINITY
                tid = threadid()
                item = ws_next(shares, n, tid)
                while item >= 0:
                    blk = item // bands
                    band = item % bands
                    p0 = band * BP
                    p1 = min(PH, p0 + BP)
                    # the Conv rows the band's windows reach
                    r0 = min(OH, max(0, p0 * psh - pph))
                    r1 = max(r0, min(OH, (p1 - 1) * psh - pph + (pkh - 1) * pdh + 1))
                    m0 = blk * DC_OCB
                    if r1 > r0:
                        # flat positions r0 * WQ .. of the band's rows, into
                        # band_buf (channel m0 + i at i * bcs, row r0 first)
                        j = r0 * WQ
                        jend = (r1 - 1) * WQ + OW
                        while j < jend:
                            dc_flat(xph, C, HP, WQ, xph + (C - 1) * HP * WQ,
                                    &wp[0, 0, 0, 0, 0], KH, KW, kyoff, koff,
                                    band_buf - m0 * bcs - r0 * OW, bcs, NULL, bp, M, r1, OW,
                                    lo, hi, clamp, blk, j, DC_VMAX, 0)
                            j = j + DC_VMAX * DC_VL
                    for r in range(min(DC_OCB, M - m0)):
                        pl_plane(band_buf + r * bcs, r1 - r0, OW, &y[m0 + r, p0, 0], p1 - p0,
                                 PW, pkh, pkw, psh, psw, pph + r0 - p0 * psh, ppw, pdh, pdw, 1,
                                 NULL, NULL, row_buf, Wr)
                    item = ws_next(shares, n, tid)
                free(mem)
        if ws_left(shares, n):
            raise MemoryError()
    finally:
        free(koff)
        free(raw)
