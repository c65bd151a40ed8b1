# The direct convolution over phase-split, padded input copies (rows and flat
# modes), and the Conv fused with a following max pool. Included by
# _conv.pxi.


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
