"""ep_sdk.files.write_atomically: a file appears whole or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest

from ep_sdk.files import write_atomically


def test_bytes_and_writer_functions_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    write_atomically(target, b"new content")
    assert target.read_bytes() == b"new content"
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    write_atomically(tmp_path / "a.npy", lambda f: np.save(f, array), suffix=".npy")
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), array)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.npy"]


def test_a_failing_writer_leaves_the_old_file_and_no_leftover(tmp_path: Path) -> None:
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")

    def half(f: BinaryIO) -> None:
        f.write(b"half of it")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, half, prefix=".x-")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]


def test_a_missing_folder_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "no" / "a.bin", b"x")
