"""External data a session holds safely: read in at load, or mapped and checked at every run.

onnx-ir's :class:`onnx_ir.ExternalTensor` maps its data file, by path, when an
array is first asked for, and kernels then read the mapped pages. A data file
truncated under a live session makes the next read of a page past its new
end a ``SIGBUS`` that kills the process (onnxruntime dies the same way); a
file rewritten in place silently changes the weights a session computes with.
A model's files belong to whoever can write its folder, so when the model
loads, :func:`pin_external_data` replaces every external tensor by a
:class:`PinnedTensor` whose bytes the session holds itself:

* **Read in**, up to the read-in limit (:func:`read_in_limit`: the session
  config entry ``session.external_data_read_in_bytes``, else
  ``$ORTCORE_EXTERNAL_DATA_READ_IN_BYTES``, else the smaller of 512 MiB and
  an eighth of physical memory; ``all`` has no limit): a model whose
  external tensors come to at most that is read in whole; a bigger one has
  its data files read in, smallest first, while the limit lasts (fewer files
  to check at every run). Each file read in is read once, with ``pread``,
  and closed: nothing done to it afterwards can reach the session.
* **Mapped**, the other files. Each is opened and mapped once; the session
  keeps the descriptor and records the file's size and modification time.
  :meth:`ExternalData.check` calls ``fstat`` on each descriptor (about a
  microsecond per file); the session calls it when it is created and before
  and after every run. A file that no longer has that size and modification
  time fails the run with :class:`~ortcore.errors.ExternalDataChanged`, and
  every later run of the session fails the same way (the session is broken
  for good: a file truncated and extended again holds zeros, not the
  weights). Because the descriptor is what is checked, a file replaced by a
  rename or deleted leaves the session running on the data it loaded, which
  the kernel keeps for it.

What is guaranteed for mapped data, and what is not: a change made while no
run is going on fails the next run cleanly; a run that returns outputs had
its files unchanged from before it started to after it ended (as far as size
and modification time tell: a write that restores both with ``os.utime`` is
not seen; the status change time is not used, so that a rename or delete of
the file does not break the session). A truncation *during* a run (or during
session creation, which reads the weights) can still kill the process if a
kernel then reads a page past the new end: the check narrows the window to
one run, it cannot close it. For that guarantee read the data in.
"""

from __future__ import annotations

import math
import mmap
import os
import stat
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NoReturn

import numpy as np
import onnx_ir as ir

from .errors import AllocationError, ExternalDataChanged, InvalidArgument, InvalidGraph

__all__ = [
    "DEFAULT_READ_IN_BYTES",
    "EXTERNAL_DATA_KEY",
    "READ_ALL",
    "READ_IN_CONFIG",
    "READ_IN_ENV",
    "ExternalData",
    "PinnedTensor",
    "parse_read_in_limit",
    "pin_external_data",
    "read_in_limit",
]

READ_IN_CONFIG = "session.external_data_read_in_bytes"
"""Session config entry: at most this many bytes of external data are read
into memory at load (whole data files, smallest first); the rest is
memory-mapped (``0``: all mapped; ``all``: all read in, nothing mapped)."""
READ_IN_ENV = "ORTCORE_EXTERNAL_DATA_READ_IN_BYTES"
"""Environment variable with the meaning of :data:`READ_IN_CONFIG`, for every session."""
DEFAULT_READ_IN_BYTES = 512 << 20
"""The default read-in limit (lowered to an eighth of physical memory on small machines)."""
READ_ALL = 1 << 62
"""The read-in limit ``all`` stands for: every model's data is read in."""
EXTERNAL_DATA_KEY = "ortcore.external_data"
"""``model.meta`` key: the model's :class:`ExternalData`."""

_O_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in must not hang open()
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = 64 << 20  # largest single read: read() returns at most ~2 GiB anyway


def parse_read_in_limit(text: str, where: str) -> int:
    """A read-in limit from ``text``: a byte count (``0`` and ``1e9`` forms
    accepted) or ``all`` (:data:`READ_ALL`).

    Raises:
        ValueError: naming ``where`` and the text.
    """
    word = text.strip().lower()
    if word == "all":
        return READ_ALL
    try:
        value = float(word)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"{where} must be a number of bytes (0 maps all external data) or 'all' "
            f"(reads all of it into memory, never maps), not {text!r}"
        )
    return int(value)


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 1 << 40


def read_in_limit(config: Mapping[str, str]) -> int:
    """The read-in limit of a session with config entries ``config``: its
    :data:`READ_IN_CONFIG` entry, else ``$ORTCORE_EXTERNAL_DATA_READ_IN_BYTES``,
    else the smaller of :data:`DEFAULT_READ_IN_BYTES` and an eighth of
    physical memory.

    Raises:
        InvalidArgument: the entry or the variable is not a limit.
    """
    for text, where in (
        (config.get(READ_IN_CONFIG), f"session config entry {READ_IN_CONFIG!r}"),
        (os.environ.get(READ_IN_ENV, "").strip() or None, f"${READ_IN_ENV}"),
    ):
        if text is not None:
            try:
                return parse_read_in_limit(text, where)
            except ValueError as exc:
                raise InvalidArgument(str(exc)) from None
    return min(DEFAULT_READ_IN_BYTES, _physical_memory() // 8)


class _DataFile:
    """One data file a model reads external tensors from, opened once."""

    __slots__ = ("path", "fd", "size", "mtime_ns", "end", "last", "mapping", "close", "__weakref__")

    def __init__(self, path: Path, fd: int, st: os.stat_result) -> None:
        self.path = path
        self.fd = fd
        self.size = st.st_size
        self.mtime_ns = st.st_mtime_ns
        self.end = 0  # the end of the last byte a tensor reads
        self.last = ""  # the tensor that ends there
        self.mapping: mmap.mmap | None = None
        # The descriptor lives as long as anything reads through it (the
        # model's ExternalData, a PinnedTensor); close() closes it at most once.
        self.close = weakref.finalize(self, _close_quietly, fd)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes of the file from its descriptor: never a fault, whatever
        happened to the file (a short read is an error)."""
        parts = []
        done = 0
        while done < length:
            part = os.pread(self.fd, min(_CHUNK, length - done), offset + done)
            if not part:
                raise ExternalDataChanged(
                    f"external data file {str(self.path)!r} ends at byte {offset + done}, "
                    f"short of the {offset + length} a tensor needs: it was truncated "
                    "after the model was loaded. Create the session again"
                )
            parts.append(part)
            done += len(part)
        return b"".join(parts)

    def read_into(self, buf: np.ndarray, offset: int) -> None:
        """Fill the uint8 array ``buf`` from ``offset`` (see :meth:`read`)."""
        view = buf.data.cast("B")
        done = 0
        while done < len(view):
            if hasattr(os, "preadv"):
                n = os.preadv(self.fd, [view[done : done + _CHUNK]], offset + done)
            else:  # pragma: no cover - not on Linux
                part = os.pread(self.fd, min(_CHUNK, len(view) - done), offset + done)
                view[done : done + len(part)] = part
                n = len(part)
            if n == 0:
                raise InvalidArgument(
                    f"external data file {str(self.path)!r} ends at byte {offset + done} "
                    f"while the model loads, short of the {offset + len(view)} a tensor "
                    "needs (the file changed since it was checked)"
                )
            done += n


class ExternalData:
    """The external data of one loaded model: how much was read in, which
    files stay mapped, and the check a session runs around every run.

    Attributes:
        model_path: the model's path, for messages.
        read_in_bytes: bytes of external tensors read into memory at load.
        mapped_bytes: bytes of external tensors left mapped.
        limit: the read-in limit the model was loaded under.
    """

    def __init__(self, model_path: str, limit: int) -> None:
        self.model_path = model_path
        self.limit = limit
        self.read_in_bytes = 0
        self.mapped_bytes = 0
        self._files: list[_DataFile] = []
        self._watch: tuple[tuple[int, int, int], ...] = ()
        self._broken: str | None = None

    @property
    def mapped(self) -> bool:
        """Whether any file stays mapped (and :meth:`check` has work to do)."""
        return bool(self._watch)

    @property
    def mapped_files(self) -> list[Path]:
        """The data files that stay mapped, resolved."""
        return [f.path for f in self._files]

    @property
    def broken(self) -> str | None:
        """Why the data can no longer be used (the error :meth:`check` raises), or ``None``."""
        return self._broken

    def _keep(self, f: _DataFile) -> None:
        self._files.append(f)
        self._watch = (*self._watch, (f.fd, f.size, f.mtime_ns))

    def check(self) -> None:
        """Raise unless every mapped file has the size and modification time
        it had at load (one ``fstat`` per file). Once it has raised, it
        always raises: the mapped weights are gone or changed for good.

        Raises:
            ExternalDataChanged: naming the file, the model, what changed and
                what to do.
        """
        if self._broken is not None:
            raise ExternalDataChanged(self._broken)
        for fd, size, mtime_ns in self._watch:
            try:
                st = os.fstat(fd)
            except OSError:
                st = None
            if st is None or st.st_size != size or st.st_mtime_ns != mtime_ns:
                self._fail(fd, st)

    def _fail(self, fd: int, st: os.stat_result | None) -> NoReturn:
        f = next(f for f in self._files if f.fd == fd)
        since = "after this session loaded it"
        if st is None:
            what = "can no longer be checked (its descriptor was closed)"
        elif st.st_size < f.end:
            what = (
                f"was truncated to {st.st_size:,} bytes {since} (tensor {f.last!r} "
                f"needs bytes up to {f.end:,})"
            )
        elif st.st_size != f.size:
            verb = "grew" if st.st_size > f.size else "shrank"
            what = f"{verb} from {f.size:,} to {st.st_size:,} bytes {since}"
        else:
            what = f"was written to {since} (its modification time changed)"
        self._broken = (
            f"external data file {str(f.path)!r} of model {self.model_path!r} {what}. "
            "The session memory-maps the file, so it refuses to run rather than read "
            "missing or changed weights: create the session again. To make sessions "
            "immune to changes of their data files, set the session config entry "
            f"{READ_IN_CONFIG!r} (or ${READ_IN_ENV}) to 'all': external data is then "
            "read into memory at load"
        )
        raise ExternalDataChanged(self._broken)


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class PinnedTensor(ir.ExternalTensor):
    """An external tensor whose bytes the session holds: read into memory at
    load, or a view of the session's own map of its file.

    It is an :class:`onnx_ir.ExternalTensor` (it keeps its ``location``,
    ``offset`` and ``length``, and saving the model writes it as external
    data), but it never opens its file by path again: :meth:`tobytes` and
    :meth:`tofile` read the descriptor opened at load (never a fault, even
    if the file was truncated since), :meth:`numpy` returns the array pinned
    at load.
    """

    __slots__ = ("_pinned", "_packed", "_source")

    def __init__(
        self,
        tensor: ir.ExternalTensor,
        array: np.ndarray,
        packed: np.ndarray,
        source: _DataFile | None,
    ) -> None:
        super().__init__(
            tensor.location,
            tensor.offset,
            tensor.length,
            tensor.dtype,
            shape=tensor.shape,
            name=tensor.name or "",
            doc_string=tensor.doc_string,
            metadata_props=dict(tensor.metadata_props),
            base_dir=tensor.base_dir,
        )
        self._pinned = array
        self._packed = packed  # the bytes as stored (packed for sub-byte types)
        self._source = source

    @property
    def mapped(self) -> bool:
        """Whether the array is a view of the mapped file (else it was read in)."""
        return self._source is not None

    def numpy(self) -> np.ndarray:
        """The tensor as a read-only array (see the class docstring)."""
        return self._pinned

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is None and not copy:
            return self._pinned
        return np.array(self._pinned, dtype=dtype, copy=True)

    def tobytes(self) -> bytes:
        """The tensor's bytes as stored in the file."""
        if self._source is None:
            return self._packed.tobytes()
        return self._source.read(self.offset or 0, self._packed.nbytes)

    def tofile(self, file: IO[bytes]) -> None:
        """Write the tensor's bytes as stored in the file to ``file``."""
        if self._source is None:
            file.write(self._packed.data)
            return
        start, left = self.offset or 0, self._packed.nbytes
        while left:
            n = min(_CHUNK, left)
            file.write(self._source.read(start, n))
            start, left = start + n, left - n

    def release(self) -> None:
        """Nothing to release: the session's :class:`ExternalData` owns the map."""


def _tensor_slots(model: ir.Model) -> Iterator[tuple[ir.TensorProtocol, Callable[[Any], None]]]:
    """Every tensor of an initializer or a tensor attribute, in every graph
    and function of ``model``, with what puts another tensor in its place."""
    graphs: list[ir.Graph | ir.Function] = [*model.graphs()]
    for f in model.functions.values():
        graphs.append(f)
        graphs.extend(f.subgraphs())
    for g in graphs:
        if isinstance(g, ir.Graph):
            for value in g.initializers.values():
                if value.const_value is not None:
                    yield value.const_value, _setter(value, "const_value")
        for node in g:
            if not node.attributes:
                continue
            for name, attr in list(node.attributes.items()):
                if attr.is_ref() or attr.value is None:
                    continue
                if attr.type == ir.AttributeType.TENSOR:
                    yield attr.value, _attr_setter(node, name, attr, None)
                elif attr.type == ir.AttributeType.TENSORS:
                    for i, t in enumerate(attr.value):
                        yield t, _attr_setter(node, name, attr, i)


def _setter(obj: Any, field: str) -> Callable[[Any], None]:
    return lambda t: setattr(obj, field, t)


def _attr_setter(
    node: ir.Node, name: str, attr: ir.Attr, index: int | None
) -> Callable[[Any], None]:
    def put(t: Any) -> None:
        current = node.attributes[name]
        if index is None:
            node.attributes[name] = ir.AttrTensor(name, t, doc_string=attr.doc_string)
        else:
            tensors = list(current.value)
            tensors[index] = t
            node.attributes[name] = ir.AttrTensors(name, tensors, doc_string=attr.doc_string)

    return put


def _array_of(packed: np.ndarray, tensor: ir.ExternalTensor) -> np.ndarray:
    """The array of ``tensor`` from its bytes as stored (a view where it can be)."""
    dtype = tensor.dtype
    shape = tensor.shape.numpy()
    if dtype.bitwidth % 8:
        # Sub-byte types unpack into a copy (as onnx-ir's own ExternalTensor does).
        unpacked = np.asarray(ir.PackedTensor(packed, dtype, shape=shape).numpy())
        unpacked.flags.writeable = False
        return unpacked
    return packed.view(np.dtype(dtype.numpy()).newbyteorder("<")).reshape(shape)


def _nbytes(tensor: ir.ExternalTensor, where: Path) -> int:
    try:
        return int(tensor.nbytes)
    except (TypeError, ValueError) as exc:
        raise InvalidGraph(
            f"This is an invalid model. Tensor {tensor.name!r} of type {tensor.dtype.name} "
            f"keeps its data in external file {str(where)!r}; that type has no fixed "
            "size and cannot be stored externally"
        ) from exc


def _open(path: Path, identity: tuple[int, int] | None) -> tuple[int, os.stat_result]:
    """Open a data file checked at load, refusing one that is no longer that file."""
    try:
        fd = os.open(path, _O_FLAGS)
    except OSError as exc:
        raise InvalidArgument(
            f"external data file {str(path)!r} cannot be opened: {exc.strerror or exc} "
            "(it changed since it was checked)"
        ) from exc
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is no longer a regular file"
    elif identity is not None and (st.st_dev, st.st_ino) != identity:
        problem = "was replaced by another file while the model loaded"
    elif st.st_nlink > 1:
        problem = f"has {st.st_nlink} hard links; copy it to a file of its own"
    if problem is not None:
        os.close(fd)
        raise InvalidArgument(f"external data file {str(path)!r} {problem}")
    return fd, st


def pin_external_data(
    model: ir.Model,
    base: Path | None,
    *,
    identities: Mapping[Path, tuple[int, int]] | None = None,
    read_in_bytes: int | None = None,
    model_path: str = "<bytes>",
    has_external: bool = True,
) -> ExternalData:
    """Replace every external tensor of ``model`` (initializers and tensor
    attributes of every graph, subgraph and function) by a :class:`PinnedTensor`:
    read into memory, a data file at a time, smallest first, while they come
    to at most ``read_in_bytes`` in all (default: :func:`read_in_limit` of no
    config entries; every file when the model's data fits); each other file
    mapped once.
    Runs after :func:`ortcore.tensor_data.check_external_data`, which vouched
    for every reference.

    Args:
        model: the loaded model, changed in place.
        base: the folder ``location`` fields are relative to.
        identities: resolved path -> ``(st_dev, st_ino)`` of each file as
            checked; a file opened now that is another one is refused.
        read_in_bytes: the read-in limit (see the module docstring).
        model_path: the model's path, for messages.
        has_external: ``False`` where the caller knows the model has no
            external tensor (its file referenced no data file): nothing to
            look for, the model is not walked.

    Returns:
        the model's :class:`ExternalData` (the session keeps it and checks it).

    Raises:
        InvalidArgument: a data file changed since it was checked (another
            file, shorter than its tensors need, no longer a regular file).
        InvalidGraph: an external tensor of a type without a fixed size.
        AllocationError: the data to read in does not fit in memory.
    """
    limit = read_in_limit({}) if read_in_bytes is None else read_in_bytes
    data = ExternalData(model_path, limit)
    if not has_external:
        return data
    slots = [(t, put) for t, put in _tensor_slots(model) if isinstance(t, ir.ExternalTensor)]
    slots = [(t, put) for t, put in slots if not isinstance(t, PinnedTensor)]
    if not slots:
        return data
    folder = base if base is not None else Path(str(slots[0][0].base_dir or "."))
    by_file: dict[Path, list[tuple[ir.ExternalTensor, Callable[[Any], None]]]] = {}
    for t, put in slots:
        path = (folder / os.fspath(t.location)).resolve()
        _nbytes(t, path)  # refuses types without a fixed size
        by_file.setdefault(path, []).append((t, put))
    # The limit is a budget: files are read in smallest first while it lasts
    # (all of them when the model's data fits), so that the fewest files
    # stay mapped and checked at every run.
    sizes = {path: sum(t.nbytes for t, _ in tensors) for path, tensors in by_file.items()}
    budget = limit
    read_files = set()
    for path in sorted(sizes, key=lambda p: (sizes[p], str(p))):
        if sizes[path] > budget:
            break
        budget -= sizes[path]
        read_files.add(path)
    for path, tensors in by_file.items():
        read_in = path in read_files
        fd, st = _open(path, None if identities is None else identities.get(path, (-1, -1)))
        f = _DataFile(path, fd, st)
        try:
            for t, _ in tensors:
                end = (t.offset or 0) + t.nbytes
                if end > f.end:
                    f.end, f.last = end, t.name or ""
            if st.st_size < f.end:
                raise InvalidArgument(
                    f"external data of tensor {f.last!r} runs past the end of "
                    f"{str(path)!r}: it needs {f.end} bytes, but the file holds "
                    f"{st.st_size} (it changed since it was checked)"
                )
            if read_in:
                _read_in(f, tensors, folder)
                data.read_in_bytes += sum(t.nbytes for t, _ in tensors)
            else:
                _map(f, tensors, folder)
                data.mapped_bytes += sum(t.nbytes for t, _ in tensors)
        except BaseException:
            f.close()
            raise
        if read_in:
            f.close()
        else:
            data._keep(f)
    return data


def _read_in(
    f: _DataFile, tensors: list[tuple[ir.ExternalTensor, Callable[[Any], None]]], folder: Path
) -> None:
    for t, put in tensors:
        try:
            packed = np.empty(t.nbytes, np.uint8)
        except MemoryError as exc:
            raise AllocationError(
                f"reading external tensor {t.name!r} ({t.nbytes:,} bytes of "
                f"{str(f.path)!r}) into memory failed: not enough memory. Lower the "
                f"session config entry {READ_IN_CONFIG!r} so that it is mapped instead"
            ) from exc
        f.read_into(packed, t.offset or 0)
        packed.flags.writeable = False
        put(_pinned(t, packed, None, folder))


def _map(
    f: _DataFile, tensors: list[tuple[ir.ExternalTensor, Callable[[Any], None]]], folder: Path
) -> None:
    if f.end:
        f.mapping = mmap.mmap(f.fd, f.end, access=mmap.ACCESS_READ)
    for t, put in tensors:
        if t.nbytes and f.mapping is not None:
            packed = np.frombuffer(f.mapping, np.uint8, count=t.nbytes, offset=t.offset or 0)
        else:
            packed = np.empty(0, np.uint8)
            packed.flags.writeable = False
        put(_pinned(t, packed, f, folder))


def _pinned(
    t: ir.ExternalTensor, packed: np.ndarray, source: _DataFile | None, folder: Path
) -> PinnedTensor:
    try:
        array = _array_of(packed, t)
    except (TypeError, ValueError) as exc:  # onnx-ir refuses bad padding of sub-byte types
        raise InvalidGraph(
            f"This is an invalid model. Tensor {t.name!r} ({t.dtype.name}{list(t.shape)}) "
            f"in external data file {t.location!r}: {exc}"
        ) from exc
    pinned = PinnedTensor(t, array, packed, source)
    pinned.base_dir = str(folder)
    return pinned
