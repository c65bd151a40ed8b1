# Shared index helpers for sliding-window kernels (included, not imported).

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



cdef int _check_window(str where, Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
                       Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
                       Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
                       Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw) except -1:
    """Refuse window geometry the loops are not written for.

    Every entry point that takes a window checks this first: bounds checks are
    off, so kernels < 1, strides or dilations < 1 (division by zero, endless
    ranges) or negative pads (the padded-plane copies write before their
    buffer) would corrupt memory instead of failing. The Python callers
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
    return 0
