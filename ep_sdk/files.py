"""Writing a file whole or not at all: what every cache of ours (and a provider's) needs.

A reader never sees a half-written file: the content goes to a temporary file
beside the target (``mkstemp`` in the same folder, so on the same file
system), which is renamed over the target only once it is complete. On any
failure, an interrupt included, the temporary file is removed and the target
is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["write_atomically"]


def write_atomically(
    path: str | os.PathLike[str],
    content: bytes | bytearray | memoryview | Callable[[BinaryIO], object],
    *,
    prefix: str = ".tmp-",
    suffix: str = "",
) -> None:
    """Write ``content`` to ``path`` through a temporary file renamed into place.

    Args:
        path: the file to write; its folder must exist.
        content: the bytes, or a function that writes them to the binary file
            it is given (``lambda f: np.save(f, array)``).
        prefix: the temporary file's name starts with this (a cleaner that
            recognises leftovers of an interrupted process looks for it);
            ``mkstemp`` adds 8 random characters, then ``suffix``.
        suffix: the temporary file's name ends with this.

    Raises:
        OSError: the folder cannot be written, the disk is full, ... (the
            target is unchanged and no temporary file is left).
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
