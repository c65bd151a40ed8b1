"""What a kernel hands back, checked against what its node declares.

A custom operator's kernel (:mod:`ortcore.custom_ops`) is the user's code,
and what it returns goes straight into the graph: into the next kernels, which
were chosen and built for the element types and shapes that type inference
promised, and out to the caller. :func:`checked_compute` wraps such a compute
function once, when its kernel is built, so that each call checks every
output against its declaration:

* a host output is a ``numpy.ndarray`` (a numpy scalar of the exact type is
  taken as the 0-d array it stands for; any other ndarray subclass is handed
  on as a plain ndarray view of the same memory, except a masked array,
  whose mask would be lost), of exactly the declared numpy dtype (native
  byte order; object arrays of ``str`` only for ``tensor(string)``, where a
  unicode array is converted), of the declared rank and fixed dims where
  they are known;
* the declared element type is the output's inferred static type, else the
  run-time type of the first input that shares its type parameter, else one
  of the types its constraint allows;
* a device output (a provider whose device is not the host) is not a host
  value, and its ``dtype`` and ``shape`` (ep_sdk's ``DeviceTensor``) are
  checked the same way where it has them;
* an output the node omits (an empty name) may be ``None``; values for
  optional outputs past the node's last one are dropped.

Anything else is a ``TypeError`` naming the op, the node, the output and
what was declared and returned; the executor turns it into onnxruntime's
``RuntimeException`` for a failed kernel. The common case costs an
``is ndarray`` check, a dtype identity check and a rank comparison.

The kernel receives its array inputs as read-only views: an input may be the
caller's feed, a weight of the model, or a value other kernels read too, and
a kernel that wrote into one would change them silently. A kernel that does
write into an input (numpy refuses: "read-only") is called again with
writable copies of its inputs, and gets copies from then on, as onnxruntime's
Python operators always do: it works, and what it writes is its own. A
kernel that returns an input unchanged (an Identity) hands on the original
array: no kernel of any provider writes into its inputs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ep_sdk import Compute, NodeInfo
from ep_sdk.dtypes import from_numpy, from_type_string, to_numpy, type_string

__all__ = ["OutputSpec", "checked_compute", "output_specs"]

_ndarray = np.ndarray
_asarray = np.asarray
_OBJECT = np.dtype(object)
# What numpy, memoryview, ctypes and Cython say when a read-only array is written.
_READ_ONLY = re.compile(r"read-?only|not writ[e]?able")


class OutputSpec:
    """What one output of a node must be.

    Attributes:
        index: the output's position.
        name: the output value's name (``""``: the node omits it).
        dtype: the declared numpy dtype (``None``: resolved at run time).
        like: positions of the inputs that share the output's type
            parameter; the first present one gives the dtype when ``dtype``
            is ``None``.
        allowed: the dtypes the type constraint allows (``None``: any
            tensor type).
        rank: the declared rank (``-1``: unknown).
        fixed: ``(axis, dim)`` for each dim known statically.
        host: the value lives on the host (a numpy array), not on a device.
        tensor: the output is a tensor (``False``: a sequence, map or
            optional, which is not checked).
    """

    __slots__ = ("index", "name", "dtype", "like", "allowed", "rank", "fixed", "host", "tensor")

    def __init__(
        self,
        index: int,
        name: str,
        *,
        dtype: np.dtype | None = None,
        like: tuple[int, ...] = (),
        allowed: frozenset[np.dtype] | None = None,
        shape: Sequence[int | None] | None = None,
        host: bool = True,
        tensor: bool = True,
    ) -> None:
        self.index = index
        self.name = name
        self.dtype = dtype
        self.like = like
        self.allowed = allowed
        self.rank = -1 if shape is None else len(shape)
        self.fixed = tuple(
            (axis, d) for axis, d in enumerate(shape or ()) if isinstance(d, int) and d >= 0
        )
        self.host = host
        self.tensor = tensor

    def declared(self, dtype: np.dtype | None = None) -> str:
        """The declaration as an error message states it."""
        dtype = dtype if dtype is not None else self.dtype
        if dtype is not None:
            text = _type_text(dtype)
        elif self.allowed is not None:
            text = " or ".join(sorted(_type_text(d) for d in self.allowed))
        else:
            text = "a tensor"
        if self.rank >= 0:
            dims = dict(self.fixed)
            text += f" of shape [{', '.join(str(dims.get(i, '?')) for i in range(self.rank))}]"
        return text


def output_specs(
    info: NodeInfo,
    *,
    output_params: Sequence[str],
    input_params: Sequence[str],
    constraints: Mapping[str, Sequence[str]],
    host_outputs: Sequence[bool] | None = None,
) -> tuple[OutputSpec, ...]:
    """The :class:`OutputSpec` of each of the node's outputs.

    Args:
        info: the node's build-time information (static types and shapes).
        output_params: the type parameter of each formal output (the last
            one covers any further outputs: a variadic one).
        input_params: the same for the formal inputs.
        constraints: type parameter -> allowed type strings
            (``tensor(float)``); a parameter not listed is a type string
            itself (``tensor(int64)``) or allows anything.
        host_outputs: whether each output lives on the host (default: all).
    """
    specs = []
    for i, value in enumerate(info.node.outputs):
        param = _param_at(i, output_params)
        allowed_strs = constraints.get(param) if param is not None else None
        if allowed_strs is None and param is not None and param.startswith("tensor("):
            allowed_strs = [param]
        tensor = not (
            (value.type is not None and not isinstance(value.type, ir.TensorType))
            or (allowed_strs is not None and any(not s.startswith("tensor(") for s in allowed_strs))
        )
        allowed = _numpy_types(allowed_strs) if allowed_strs is not None else None
        static = info.output_types[i]
        dtype = None
        if static is not None:
            try:
                dtype = to_numpy(static)
            except TypeError:  # no numpy dtype: nothing to compare with
                tensor = False
        like = tuple(
            j
            for j in range(len(info.input_types))
            if param is not None and _param_at(j, input_params) == param
        )
        specs.append(
            OutputSpec(
                i,
                value.name or "",
                dtype=dtype,
                like=like,
                allowed=allowed,
                shape=info.output_shapes[i],
                host=True if host_outputs is None else host_outputs[i],
                tensor=tensor,
            )
        )
    return tuple(specs)


def checked_compute(
    fn: Callable[..., Any],
    specs: Sequence[OutputSpec],
    who: str,
    *,
    context: bool = False,
    host_inputs: bool = True,
    max_outputs: int | None = None,
) -> Compute:
    """``fn`` with its outputs checked against ``specs`` on every call.

    Args:
        fn: the compute function a kernel builder returned.
        specs: one :class:`OutputSpec` per node output (:func:`output_specs`).
        who: names the kernel in errors, e.g. ``custom operator my.ops::Scale
            (node 'n')``.
        context: ``fn`` takes the run context first.
        host_inputs: the inputs are on the host: array inputs are passed as
            read-only views, or copies to a kernel that writes into them (see
            the module's docstring).
        max_outputs: the most values ``fn`` may return: those past
            ``len(specs)`` (optional outputs the node omits) are dropped.

    Raises:
        TypeError: (from the returned function) a result that is not one
            value per output, or an output that is not what its spec says.
    """
    specs = tuple(specs)
    n = len(specs)
    most = n if max_outputs is None else max(n, max_outputs)
    skip = 1 if context else 0
    quick = tuple(_quick(s) for s in specs)
    q0 = quick[0] if quick else None

    def take(v: Any, k: int, call: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        """Output ``k``'s value ``v`` as the graph takes it, or raise."""
        q = quick[k]
        # The common case first: an exact ndarray of the dtype fixed at
        # build time (an identity check), of the declared rank or shape.
        if not (
            type(v) is _ndarray
            and q is not None
            and v.dtype is q[0]
            and (v.shape == q[2] if q[2] is not None else q[1] < 0 or v.ndim == q[1])
        ):
            if q is not None and type(v) is q[3] and q[1] <= 0:
                v = _asarray(v)  # a numpy scalar (numpy's ufuncs make them of 0-d arrays)
            else:
                v = _check(v, specs[k], call, skip, who)
        if call is not args:
            for c, a in zip(call, args):
                if v is c:  # an input returned unchanged: hand on the original
                    return a
        return v

    # Set once the kernel has written into an input: from then on it gets
    # writable copies of its inputs (as onnxruntime's Python operators always do).
    copies = [False]

    def compute(*args: Any) -> tuple[Any, ...]:
        if not host_inputs:
            call = args
        elif copies[0]:
            call = (*args[:skip], *map(_copy, args[skip:]))
            args = call  # the kernel's own copies: a copy returned is its result
        elif skip:
            call = (args[0], *map(_guard, args[1:]))
        else:
            call = tuple(map(_guard, args))
        try:
            res = fn(*call)
        except (ValueError, TypeError, BufferError) as exc:
            if call is args or not _READ_ONLY.search(str(exc)):
                raise
            # It wrote into an input (the caller's feed, a weight, a value
            # other nodes read): call it again on copies, and from now on.
            call = args = (*args[:skip], *map(_copy, args[skip:]))
            res = fn(*call)
            copies[0] = True
        if (type(res) is not tuple and type(res) is not list) or len(res) != n:
            res = _count(res, n, most, who)
        if n != 1:
            return tuple([take(v, k, call, args) for k, v in enumerate(res)])
        v = res[0]
        if (
            type(v) is _ndarray
            and q0 is not None
            and v.dtype is q0[0]
            and (v.shape == q0[2] if q0[2] is not None else q0[1] < 0 or v.ndim == q0[1])
            and (call is args or v.base is None)
        ):
            return res if type(res) is tuple else (v,)
        return (take(v, 0, call, args),)

    compute.__wrapped__ = fn  # type: ignore[attr-defined]
    return compute


def _quick(spec: OutputSpec) -> tuple[np.dtype, int, tuple[int, ...] | None, type] | None:
    """``(dtype, rank, shape, scalar type)`` for an output the inline check
    covers (a host tensor of a dtype known at build time; ``shape`` when
    every dim is known, ``rank`` ``-1`` when unknown), ``None`` for the others."""
    if not (spec.host and spec.tensor and spec.dtype is not None) or spec.dtype == _OBJECT:
        return None  # strings: their elements are checked too
    if len(spec.fixed) == spec.rank >= 0:
        return (spec.dtype, spec.rank, tuple(d for _, d in spec.fixed), spec.dtype.type)
    if spec.fixed:
        return None
    return (spec.dtype, spec.rank, None, spec.dtype.type)


def _guard(a: Any) -> Any:
    """A read-only view of ``a`` if it is an ndarray, else ``a``."""
    if type(a) is _ndarray or issubclass(type(a), _ndarray):
        view = _ndarray.view(a)
        view.setflags(write=False)
        return view
    return a


def _copy(a: Any) -> Any:
    """A writable copy of ``a`` if it is an ndarray, else ``a``."""
    if type(a) is _ndarray or issubclass(type(a), _ndarray):
        return _ndarray.copy(a)
    return a


def _count(res: Any, n: int, most: int, who: str) -> Any:
    """``res`` as ``n`` values, or the error for a result that cannot be."""
    if isinstance(res, (tuple, list)) and n <= len(res) <= most:
        return tuple(res)[:n]  # a named tuple; values for outputs the node omits
    if res is None:
        got = "None"
    elif isinstance(res, (tuple, list)):
        got = f"a {type(res).__name__} of {len(res)} value(s)"
    else:
        got = f"{_describe(res)}, not a tuple or list,"
    raise TypeError(
        f"{who}: the kernel returned {got} for {n} output(s); a compute function "
        "returns a tuple or list with one value per output of the node"
    )


def _check(v: Any, spec: OutputSpec, call: tuple[Any, ...], skip: int, who: str) -> Any:
    """``v`` as the graph takes it (maybe converted), or raise: the slow path."""
    if v is None:
        if spec.name == "":
            return None  # an output the node omits
        raise _mismatch(spec, None, v, who, "a kernel must compute every output the node uses")
    if not spec.tensor:
        return v
    if not spec.host:
        return _check_device(v, spec, call, skip, who)
    expected = _expected(spec, call, skip)
    returned, cls = v, type(v)
    if cls is not _ndarray:
        if issubclass(cls, np.generic):
            v = np.asarray(v)  # a numpy scalar: the 0-d array it stands for
        elif issubclass(cls, np.ma.MaskedArray):
            raise _mismatch(
                spec,
                expected,
                v,
                who,
                "a masked array's mask would be lost: return np.ma.filled(value, fill) "
                "or a plain array",
            )
        elif issubclass(cls, _ndarray):
            v = _ndarray.view(v, _ndarray)  # its memory as a plain ndarray
        else:
            raise _mismatch(spec, expected, v, who, _hint(expected, spec.allowed))
    dtype = v.dtype
    if dtype.kind == "U" and (
        expected == _OBJECT or (expected is None and spec.allowed and _OBJECT in spec.allowed)
    ):
        v = v.astype(object)  # tensor(string) is held as an object array of str
        dtype = v.dtype
    if expected is not None:
        if dtype != expected or not dtype.isnative:
            raise _mismatch(spec, expected, returned, who, _hint(expected, spec.allowed))
        if dtype is not expected:
            v = v.view(expected)  # the same type spelt another way ('q' for int64)
    elif not _valid_tensor_dtype(dtype, spec.allowed):
        raise _mismatch(spec, expected, returned, who, _hint(expected, spec.allowed))
    if dtype == _OBJECT:
        bad = next((type(e) for e in v.flat if not issubclass(type(e), str)), None)
        if bad is not None:
            raise _mismatch(
                spec,
                expected,
                returned,
                who,
                f"a tensor(string) holds str elements, this one holds a {bad.__name__}",
            )
    _check_shape(tuple(v.shape), spec, expected, returned, who)
    return v


def _check_device(v: Any, spec: OutputSpec, call: tuple[Any, ...], skip: int, who: str) -> Any:
    """A value for an output on a device: the provider's tensor type, which
    the core knows only by its ``dtype`` and ``shape``, where it has them."""
    expected = _expected(spec, call, skip)
    if isinstance(v, (np.ndarray, np.generic)) or type(v).__module__ == "builtins":
        raise _mismatch(
            spec,
            expected,
            v,
            who,
            "this output lives on the provider's device: return the provider's device tensor",
        )
    try:
        dtype, shape = np.dtype(v.dtype), tuple(int(d) for d in v.shape)
    except Exception:
        return v  # a device tensor that does not say: the provider's business
    if expected is not None and dtype != expected:
        raise _mismatch(spec, expected, v, who, _hint(expected, spec.allowed))
    _check_shape(shape, spec, expected, v, who)
    return v


def _expected(spec: OutputSpec, call: tuple[Any, ...], skip: int) -> np.dtype | None:
    """The dtype the output must have: declared, or that of the first
    present input sharing its type parameter."""
    if spec.dtype is not None:
        return spec.dtype
    for j in spec.like:
        if skip + j < len(call):
            dtype = getattr(call[skip + j], "dtype", None)
            if isinstance(dtype, np.dtype) and _valid_tensor_dtype(dtype, spec.allowed):
                return dtype
    return None


def _check_shape(shape: tuple[int, ...], spec: OutputSpec, expected: Any, v: Any, who: str) -> None:
    if spec.rank >= 0 and len(shape) != spec.rank:
        raise _mismatch(spec, expected, v, who, f"the rank must be {spec.rank}")
    bad = [(axis, d) for axis, d in spec.fixed if shape[axis] != d]
    if bad:
        dims = ", ".join(f"dim {axis} must be {d}" for axis, d in bad)
        raise _mismatch(spec, expected, v, who, dims)


def _valid_tensor_dtype(dtype: np.dtype, allowed: frozenset[np.dtype] | None) -> bool:
    """Whether arrays of ``dtype`` hold an ONNX tensor of an allowed type."""
    if allowed is not None:
        return dtype in allowed and dtype.isnative
    if not dtype.isnative or dtype.fields is not None or dtype.kind in "USV":
        return False
    try:
        from_numpy(dtype)
    except TypeError:
        return False
    return True


def _mismatch(spec: OutputSpec, expected: Any, v: Any, who: str, hint: str) -> TypeError:
    out = f"output {spec.index}" + (f" ({spec.name!r})" if spec.name else "")
    return TypeError(
        f"{who}: {out} is declared {spec.declared(expected)}, but the kernel returned "
        f"{_describe(v)}; {hint}"
    )


def _hint(expected: np.dtype | None, allowed: frozenset[np.dtype] | None = None) -> str:
    if expected is None and allowed:
        names = " or ".join(sorted(d.name if d != _OBJECT else "object (str)" for d in allowed))
        return f"return a numpy array of dtype {names}"
    if expected is None:
        return "return a numpy array of a tensor type"
    if expected == _OBJECT:
        return "return a numpy array of str objects (np.array(values, dtype=object))"
    return (
        f"return a numpy array of dtype {expected.name} "
        f"(np.asarray(value, dtype=np.{expected.name}))"
    )


def _describe(v: Any) -> str:
    """What a kernel returned, by type, dtype and shape: never its repr,
    which may be huge or raise."""
    cls = type(v)
    if v is None:
        return "None"
    if issubclass(cls, (np.ndarray, np.generic)):
        what = "numpy scalar" if issubclass(cls, np.generic) else "numpy.ndarray"
        if cls is not np.ndarray and not issubclass(cls, np.generic):
            what = f"{cls.__module__}.{cls.__qualname__} (an ndarray subclass)"
        arr = _ndarray.view(v, _ndarray) if issubclass(cls, np.ndarray) else np.asarray(v)
        return f"a {what} of {_type_text(arr.dtype, returned=True)} and shape {list(arr.shape)}"
    try:  # a device tensor's, if it says
        dtype, shape = getattr(v, "dtype", None), getattr(v, "shape", None)
    except Exception:
        dtype = shape = None
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    if isinstance(dtype, np.dtype) and isinstance(shape, tuple):
        return f"a {name} of {_type_text(dtype, returned=True)} and shape {list(shape)}"
    return f"a Python {name}" if cls.__module__ == "builtins" else f"a {name}"


def _type_text(dtype: np.dtype, *, returned: bool = False) -> str:
    """``tensor(float)`` for a dtype ONNX has, the numpy spelling (byte order
    and fields included) for the others. An object array is a
    ``tensor(string)`` only if it holds ``str``: ``returned`` says ``object``."""
    if dtype.kind == "O":
        return "numpy dtype object" if returned else "tensor(string)"
    if dtype.fields is not None:
        return f"structured numpy dtype {dtype.descr}"
    if dtype.kind in "USV":
        return f"numpy dtype {dtype.str}"
    try:
        text = type_string(from_numpy(dtype.newbyteorder("=")))
    except TypeError:
        return f"numpy dtype {dtype.str}"
    if dtype.isnative:
        return f"{text} ({dtype.name})" if returned and dtype.name not in text else text
    order = "big" if dtype.byteorder == ">" else "little"
    return f"{text} in {order}-endian byte order ({dtype.str}, not the machine's)"


def _numpy_types(type_strs: Sequence[str]) -> frozenset[np.dtype]:
    out = set()
    for s in type_strs:
        elem = from_type_string(s)
        if elem is not None:
            try:
                out.add(to_numpy(elem))
            except TypeError:
                pass
    return frozenset(out)


def _param_at(index: int, params: Sequence[str]) -> str | None:
    if not params:
        return None
    return params[index] if index < len(params) else params[-1]
