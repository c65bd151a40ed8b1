"""The safe file layer of the cache: folders walked without following symlinks,
and entries memory-mapped privately.

Where the OS allows, folders are held open and their children named relative
to them (``dir_fd``), so that a folder swapped for a symlink between a check
and a delete is never followed; a FIFO swapped in never hangs an ``open``.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["SafeDir", "is_link", "map_file", "oserror"]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in must not hang open()
_O_BINARY = getattr(os, "O_BINARY", 0)
# Where the OS allows, folders are walked through file descriptors, so a folder
# swapped for a symlink between a check and a delete is never followed.
_USE_DIR_FD = (
    {os.open, os.stat, os.unlink, os.rmdir} <= os.supports_dir_fd
    and os.scandir in os.supports_fd
    and bool(_O_DIRECTORY and _O_NOFOLLOW)
)


def map_file(path: Path, size: Any) -> memoryview | None:
    """A private memory map of the regular file ``path`` if it holds ``size``
    (> 0) bytes, else ``None`` (the caller reads it instead)."""
    if not isinstance(size, int) or size <= 0:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_BINARY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_COPY))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


class SafeDir:
    """A folder whose children are named relative to it, never through a symlink.

    With ``dir_fd`` support the folder is held open (``fd``) and every call
    resolves names against it; elsewhere names are joined to ``path``.
    """

    __slots__ = ("fd", "path")

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open_root(cls, path: Path) -> SafeDir:
        """Open the cache folder itself; a symlink is followed (the user chose it)."""
        if not _USE_DIR_FD:
            if not path.is_dir():
                raise NotADirectoryError(f"not a folder: {path}")
            return cls(path, None)
        return cls(path, os.open(path, os.O_RDONLY | _O_DIRECTORY))

    def _at(self, name: str) -> tuple[str, int | None]:
        return (name, self.fd) if self.fd is not None else (str(self.path / name), None)

    def child(self, name: str) -> SafeDir:
        """Open the sub-folder ``name``; fails if it is (now) a symlink."""
        if self.fd is None:
            st = os.stat(self.path / name, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(f"not a folder: {self.path / name}")
            return SafeDir(self.path / name, None)
        fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW, dir_fd=self.fd)
        return SafeDir(self.path / name, fd)

    def scandir(self) -> list[os.DirEntry[str]]:
        """The folder's entries, sorted by name."""
        with os.scandir(self.fd if self.fd is not None else self.path) as it:
            return sorted(it, key=lambda e: e.name)

    def lstat(self, name: str) -> os.stat_result:
        """``lstat`` of a child."""
        target, dir_fd = self._at(name)
        return os.stat(target, dir_fd=dir_fd, follow_symlinks=False)

    def read(self, name: str, limit: int) -> bytes:
        """A regular file's bytes; refuses a symlink, anything else, or more than ``limit``."""
        target, dir_fd = self._at(name)
        flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY
        with os.fdopen(os.open(target, flags, dir_fd=dir_fd), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ValueError("not a regular file")
            if st.st_size > limit:
                raise ValueError(f"larger than {limit} bytes")
            return f.read(limit + 1)

    def unlink(self, name: str) -> None:
        """Remove a child file (a symlink itself, never its target)."""
        target, dir_fd = self._at(name)
        os.unlink(target, dir_fd=dir_fd)

    def rmdir(self, name: str) -> None:
        """Remove an empty child folder."""
        target, dir_fd = self._at(name)
        os.rmdir(target, dir_fd=dir_fd)

    def close(self) -> None:
        """Release the folder's descriptor, if any."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_link(entry: os.DirEntry[str]) -> bool:
    # A Windows junction is a link too (DirEntry.is_junction: Python 3.12+).
    return entry.is_symlink() or bool(getattr(entry, "is_junction", lambda: False)())


def oserror(exc: OSError) -> str:
    return exc.strerror or str(exc)
