"""``SessionOptions.optimized_model_filepath`` that cannot be written: one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx_ir as ir
import pytest

import ortcore
from ortcore.errors import InvalidArgument

from .conftest import chain_model, no_fallback

OPS = ["Add", "Relu"]


def _create(path: Path) -> Any:
    so = no_fallback()
    so.optimized_model_filepath = str(path)
    return ortcore.InferenceSession(chain_model(OPS), so, providers=["mini"])


def test_missing_folder(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "opt.onnx"
    with pytest.raises(InvalidArgument) as info:
        _create(out)
    assert str(out) in str(info.value)
    assert f"its folder {out.parent} does not exist" in str(info.value)
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "opt.onnx"
    with pytest.raises(InvalidArgument, match="afile is not a folder"):
        _create(out)


def test_path_is_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="is a folder; give a file path"):
        _create(tmp_path)


def test_not_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may run as root, where chmod does not stop a write: fake the refusal.
    def refuse(model: Any, path: Any, **kw: Any) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(ir, "save", refuse)
    out = tmp_path / "opt.onnx"
    with pytest.raises(
        InvalidArgument, match=r"opt\.onnx'?: cannot be written \(permission denied\)"
    ):
        _create(out)


def test_writable_path_still_saves(tmp_path: Path) -> None:
    out = tmp_path / "opt.onnx"
    _create(out)
    assert out.is_file() and out.stat().st_size > 0
