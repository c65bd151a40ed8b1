# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The executor's step loop, compiled: ``ortcore.executor._run_steps_py`` in Cython.

Same contract and same behaviour as the Python loop (which stays the
reference, and the fallback where this module is not built): walk the steps
laid out by ``ortcore.executor._loop_step`` over the value slots, check
``RunOptions.terminate`` before each step, check that each kernel returned
one value per output, drop released slots, and turn a kernel's exception into
the ortcore error naming the step. Compiled, the loop's own cost per step is
a few tens of nanoseconds instead of about a tenth of a microsecond.
"""

from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from ep_sdk import RunTerminated

from ortcore.errors import OrtcoreError

cdef Py_ssize_t WANTS_CTX = -1  # ortcore.executor._WANTS_CTX


def run_steps(tuple loop, list slots, object ctx):
    """Walk the steps of ``loop`` over ``slots`` (see ``ortcore.executor._run_steps_py``).

    Raises:
        RunTerminated: ``ctx.run_options.terminate`` was set.
        OrtcoreError: a kernel raised or returned something other than one
            value per output; the message names the step.
    """
    cdef object ro = ctx.run_options
    cdef object info = None
    cdef tuple step
    cdef object fn, res
    cdef Py_ssize_t k, n_steps = PyTuple_GET_SIZE(loop)
    cdef Py_ssize_t arity, n_out, j
    cdef tuple release
    cdef bint check = ro is not None
    try:
        for k in range(n_steps):
            step = <tuple>PyTuple_GET_ITEM(loop, k)
            info = <object>PyTuple_GET_ITEM(step, 9)
            if check and ro.terminate:
                from ortcore.executor import TERMINATED
                raise RunTerminated(TERMINATED)
            fn = <object>PyTuple_GET_ITEM(step, 0)
            arity = <Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 1))
            if arity == 2:
                res = fn(slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 2))],
                         slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 3))])
            elif arity == 1:
                res = fn(slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 2))])
            elif arity == WANTS_CTX:
                res = fn(ctx, *[slots[i] for i in <tuple>PyTuple_GET_ITEM(step, 4)])
            else:
                res = fn(*[slots[i] for i in <tuple>PyTuple_GET_ITEM(step, 4)])
            n_out = <Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 6))
            if type(res) is tuple and PyTuple_GET_SIZE(res) == n_out:
                if n_out == 1:
                    slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(step, 5))] = <object>PyTuple_GET_ITEM(res, 0)
                else:
                    _store_all(slots, <tuple>PyTuple_GET_ITEM(step, 7), res)
            elif isinstance(res, (tuple, list)) and len(res) == n_out:
                _store_all(slots, <tuple>PyTuple_GET_ITEM(step, 7), tuple(res))
            else:
                from ortcore.executor import _bad_result
                raise _bad_result(res, n_out)
            res = None
            release = <tuple>PyTuple_GET_ITEM(step, 8)
            for j in range(PyTuple_GET_SIZE(release)):
                slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(release, j))] = None
    except (OrtcoreError, RunTerminated):
        raise
    except Exception as exc:
        from ortcore.executor import step_error
        raise step_error(exc, info) from exc


cdef inline void _store_all(list slots, tuple outs, tuple res):
    """``slots[o] = r`` for each output slot ``o`` and result ``r``."""
    cdef Py_ssize_t j
    for j in range(PyTuple_GET_SIZE(outs)):
        slots[<Py_ssize_t>(<object>PyTuple_GET_ITEM(outs, j))] = <object>PyTuple_GET_ITEM(res, j)
