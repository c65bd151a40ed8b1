"""Writing the optimized model where ``SessionOptions.optimized_model_filepath`` says.

onnxruntime's session config entries choose an external data file for the
initializers and the size from which an initializer goes there; a path that
cannot be written fails the session with a message that says why.
"""

from __future__ import annotations

import os

import onnx_ir as ir

from .errors import InvalidArgument
from .model import save_model
from .options import SessionOptions

__all__ = [
    "EXTERNAL_INITIALIZERS_FILE",
    "EXTERNAL_INITIALIZERS_MIN_SIZE",
    "save_optimized",
]

EXTERNAL_INITIALIZERS_FILE = "session.optimized_model_external_initializers_file_name"
"""Session config entry: the data file the optimized model's initializers go to."""
EXTERNAL_INITIALIZERS_MIN_SIZE = "session.optimized_model_external_initializers_min_size_in_bytes"
"""Session config entry: initializers smaller than this stay in the model file."""


def save_optimized(model: ir.Model, out: str, options: SessionOptions | None = None) -> None:
    """Write the optimized model to ``out`` (``SessionOptions.optimized_model_filepath``),
    its initializers to the data file the options name
    (``session.optimized_model_external_initializers_file_name`` and
    ``..._min_size_in_bytes``) if they name one.

    Raises:
        InvalidArgument: the path cannot be written, or the minimum size is
            not an integer; the message says why.
    """
    config = options.config_entries if options is not None else {}
    data_file = config.get(EXTERNAL_INITIALIZERS_FILE) or None
    min_text = config.get(EXTERNAL_INITIALIZERS_MIN_SIZE)
    try:
        min_size = int(min_text) if min_text is not None else None
    except ValueError:
        raise InvalidArgument(
            f"session config entry {EXTERNAL_INITIALIZERS_MIN_SIZE!r} must be an integer, "
            f"not {min_text!r}"
        ) from None
    try:
        save_model(model, out, data_file=data_file, min_size=min_size)
    except OSError as exc:
        # onnxruntime fails session creation here too; say what is wrong.
        raise InvalidArgument(
            f"SessionOptions.optimized_model_filepath {out!r}: {_why_unwritable(out, exc)}"
        ) from exc


def _why_unwritable(out: str, exc: OSError) -> str:
    """Why ``out`` could not be written, and what to do."""
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        return "is a folder; give a file path such as model.opt.onnx"
    if not os.path.isdir(parent):
        state = "is not a folder" if os.path.lexists(parent) else "does not exist"
        return f"its folder {parent} {state}; create it or choose another path"
    if isinstance(exc, PermissionError):
        return "cannot be written (permission denied)"
    return f"cannot be written ({exc.strerror or exc})"
