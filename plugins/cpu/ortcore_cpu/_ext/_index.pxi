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
