# Shared index helpers for sliding-window kernels (included, not imported).

from libc.stdint cimport uint16_t

cdef inline Py_ssize_t _first_valid(Py_ssize_t off, Py_ssize_t step) noexcept nogil:
    """Smallest o >= 0 with o * step + off >= 0."""
    if off >= 0:
        return 0
    return (-off + step - 1) // step


cdef inline Py_ssize_t _end_valid(Py_ssize_t off, Py_ssize_t step, Py_ssize_t size,
                                  Py_ssize_t count) noexcept nogil:
    """One past the largest o < count with o * step + off < size."""
    cdef Py_ssize_t r
    if size - off <= 0:
        return 0
    r = (size - off - 1) // step + 1
    return r if r < count else count


cdef inline void _padded_plane(float* pad, const float* plane, Py_ssize_t H, Py_ssize_t W,
                               Py_ssize_t Hp, Py_ssize_t Wp, Py_ssize_t ph, Py_ssize_t pw,
                               float fill) noexcept nogil:
    """Copy the (H, W) row-major ``plane`` into ``pad`` (Hp, Wp) at offset
    (ph, pw), clipped to ``pad``, with ``fill`` everywhere else. The callers
    pass the pads before the data (>= 0); rows and columns past Hp, Wp are
    never read, so they are not copied."""
    cdef Py_ssize_t j, y
    cdef Py_ssize_t r0 = ph if ph < Hp else Hp
    cdef Py_ssize_t r1 = ph + H if ph + H < Hp else Hp
    cdef Py_ssize_t c0 = pw if pw < Wp else Wp
    cdef Py_ssize_t c1 = pw + W if pw + W < Wp else Wp
    for j in range(Hp * Wp):
        pad[j] = fill
    if c1 <= c0:
        return
    for y in range(r0, r1):
        memcpy(pad + y * Wp + c0, plane + (y - ph) * W + (c0 - pw), (c1 - c0) * sizeof(float))



cdef enum:
    # Largest kernel size, stride, pad or dilation the loops take (int32's
    # limit: no real window comes near it). With it, and _check_reach, no
    # index they compute in Py_ssize_t can overflow.
    _MAX_WINDOW_VALUE = 2147483647
    # Largest padded plane (floats) of the stride-1 plane paths; a bigger one
    # (huge pads or dilations) takes the general loops, which need no copy.
    _MAX_PLANE = 1 << 26
    # Largest output plane (floats) of the flat stride-1 stencils (_flat_fits)
    _FLAT_MAX = 512
    # Largest buffer (floats, 256 KiB) of the strided depthwise stencil (_strided_floats)
    _STRIDED_MAX = 1 << 16


cdef int _check_window(str where, Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
                       Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
                       Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
                       Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw) except -1:
    """Refuse window geometry the loops are not written for.

    Every entry point that takes a window checks this first: bounds checks are
    off, so kernels < 1, strides or dilations < 1 (division by zero, endless
    ranges), negative pads (the padded-plane copies write before their
    buffer) or values past ``_MAX_WINDOW_VALUE`` (index arithmetic that
    overflows) would corrupt memory instead of failing. The Python callers
    validate the node's attributes with a clearer message; this is the last
    line of defence for any other caller.
    """
    if kd < 1 or kh < 1 or kw < 1:
        raise ValueError(f"{where}: kernel sizes must be >= 1, got {(kd, kh, kw)}")
    if sd < 1 or sh < 1 or sw < 1:
        raise ValueError(f"{where}: strides must be >= 1, got {(sd, sh, sw)}")
    if dd < 1 or dh < 1 or dw < 1:
        raise ValueError(f"{where}: dilations must be >= 1, got {(dd, dh, dw)}")
    if pd < 0 or ph < 0 or pw < 0:
        raise ValueError(f"{where}: pads must be >= 0, got {(pd, ph, pw)}")
    if (kd > _MAX_WINDOW_VALUE or kh > _MAX_WINDOW_VALUE or kw > _MAX_WINDOW_VALUE
            or sd > _MAX_WINDOW_VALUE or sh > _MAX_WINDOW_VALUE or sw > _MAX_WINDOW_VALUE
            or pd > _MAX_WINDOW_VALUE or ph > _MAX_WINDOW_VALUE or pw > _MAX_WINDOW_VALUE
            or dd > _MAX_WINDOW_VALUE or dh > _MAX_WINDOW_VALUE or dw > _MAX_WINDOW_VALUE):
        raise ValueError(
            f"{where}: kernel sizes, strides, pads and dilations must be <= {_MAX_WINDOW_VALUE}, "
            f"got {(kd, kh, kw)}, {(sd, sh, sw)}, {(pd, ph, pw)}, {(dd, dh, dw)}"
        )
    return 0


cdef int _check_reach(str where, tuple size, tuple out, tuple kernel, tuple strides,
                      tuple pads, tuple ends, tuple dilations) except -1:
    """Refuse a window whose index arithmetic could overflow Py_ssize_t.

    Per axis the loops compute ``o * stride - pad + j * dilation`` (o < out,
    j < kernel) and ``size + end``; with every value within
    ``_MAX_WINDOW_VALUE`` (see :func:`_check_window`) and their sum checked
    here in Python integers, none of those (nor their sums in
    ``_first_valid`` and ``_end_valid``) can wrap around.
    """
    cdef int i
    for i in range(len(size)):
        reach = ((out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i]
                 + pads[i] + ends[i] + size[i])
        if reach >= (1 << 62):
            raise ValueError(
                f"{where}: window geometry out of range on axis {i}: size {size[i]}, output "
                f"{out[i]}, kernel {kernel[i]}, stride {strides[i]}, pads {pads[i]}+{ends[i]}, "
                f"dilation {dilations[i]}"
            )
    return 0


cdef bint _plane_fits(Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh, Py_ssize_t kw,
                      Py_ssize_t dh, Py_ssize_t dw):
    """Whether the stride-1 plane paths' buffer, (Hp + oh) * Wp floats with
    Hp = oh + (kh - 1) * dh and Wp = ow + (kw - 1) * dw, is at most
    ``_MAX_PLANE`` (computed in Python integers: it can overflow Py_ssize_t)."""
    rows = 2 * <object>oh + (<object>kh - 1) * dh
    cols = <object>ow + (<object>kw - 1) * dw
    return rows * cols <= _MAX_PLANE


cdef extern from "_stencil.h" nogil:
    enum:
        ST_S2_SLACK
        ST_DW16
    Py_ssize_t st_dw_vectors16(Py_ssize_t L)
    void st_dw_masks16(uint16_t* m, Py_ssize_t* off, Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH,
                       Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t ph,
                       Py_ssize_t pw)
    void st_dw_flat16(const float* x, const float* w, const float* bias, float* out,
                      const uint16_t* m, const Py_ssize_t* off, Py_ssize_t L, Py_ssize_t T)
    void st_dw_row_masks16(uint16_t* m, Py_ssize_t W, Py_ssize_t OW, Py_ssize_t kw,
                           Py_ssize_t S, Py_ssize_t dw, Py_ssize_t pw)
    void st_dw_rows16(const float* x, const float* w, const float* bias, float* out,
                      const uint16_t* m, Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH,
                      Py_ssize_t OW, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t S,
                      Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t ph, Py_ssize_t pw)
    void st_pool_flat16(const float* x, float* out, const uint16_t* m, const Py_ssize_t* off,
                        Py_ssize_t L, Py_ssize_t T, int take_max, const float* inv)
    Py_ssize_t st_dw_s2_rows(Py_ssize_t H, Py_ssize_t OH, Py_ssize_t ph)
    Py_ssize_t st_dw_s2_cols(Py_ssize_t W, Py_ssize_t OW, Py_ssize_t pw)
    void st_dw3x3_s2(const float* x, const float* w, float* out, float* buf, Py_ssize_t H,
                     Py_ssize_t W, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t ph, Py_ssize_t pw,
                     Py_ssize_t WP)
    void st_masks(unsigned char* m, Py_ssize_t L, Py_ssize_t W, Py_ssize_t kw, Py_ssize_t dw,
                  Py_ssize_t pw)
    void st_margins(Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH, Py_ssize_t kh, Py_ssize_t kw,
                    Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t ph, Py_ssize_t pw,
                    Py_ssize_t* before, Py_ssize_t* after)
    void st_pool(const float* x, float* out, float* buf, const unsigned char* m, Py_ssize_t H,
                 Py_ssize_t W, Py_ssize_t OH, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh,
                 Py_ssize_t dw, Py_ssize_t ph, Py_ssize_t pw, int take_max, const float* inv)
    void st_depthwise_strided(const float* x, const float* w, float* out, float* buf,
                              Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH, Py_ssize_t OW,
                              Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw,
                              Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t ph, Py_ssize_t pw)
    void st_depthwise(const float* x, const float* w, float* out, float* buf,
                      const unsigned char* m, Py_ssize_t H, Py_ssize_t W, Py_ssize_t OH,
                      Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw, Py_ssize_t ph,
                      Py_ssize_t pw)


cdef bint _flat_fits(Py_ssize_t H, Py_ssize_t W, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t kh,
                     Py_ssize_t kw, Py_ssize_t dh, Py_ssize_t dw):
    """Whether a stride-1 window (output (oh, ow) of a plane (H, W)) takes the
    flat stencils of ``_stencil.h``: the output as wide as the input and at
    most ``_FLAT_MAX`` floats (3x3 windows, 2 threads, Zen 5: 7x7 and 14x14
    planes 0.45-0.55x the padded-plane path's time, 28x28 0.9-1.2x, 56x56
    and 112x112 1.4-2.3x, their masks and copies no longer in L1), and
    their column masks (``kw`` bytes per output position), the padded
    plane's extent and the plane's flat copy with its margins within
    ``_MAX_PLANE`` (in Python integers: they can overflow Py_ssize_t)."""
    if ow != W or H <= 0 or W <= 0 or oh <= 0 or <object>oh * W > _FLAT_MAX:
        return False
    copy = (<object>H + 2 * oh + (<object>kh - 1) * dh) * W + 2 * ((<object>kw - 1) * dw + 1)
    return (<object>oh * W * kw <= _MAX_PLANE and copy <= _MAX_PLANE
            and _plane_fits(oh, ow, kh, kw, dh, dw))

