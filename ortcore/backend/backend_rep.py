"""The prepared model of ONNX's backend API: a session and its ``run``."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.backend.base import BackendRep

from ..options import RunOptions
from ..session import InferenceSession

__all__ = ["OnnxRuntimeBackendRep", "OrtcoreBackendRep"]

ALLOWED_RUN_OPTIONS = frozenset(
    {"log_severity_level", "log_verbosity_level", "logid", "only_execute_path_to_fetches"}
)
"""``RunOptions`` attributes ``run(inputs, **kwargs)`` sets (as onnxruntime's
backend: ``terminate`` is not one of them)."""


def apply_allowed(options: Any, settings: dict[str, Any], allowed: frozenset[str]) -> Any:
    """Set on ``options`` the ``settings`` the backend API permits, as onnxruntime's
    backend does: an allowed name is set, another attribute of ``options`` is
    refused, and a name ``options`` lacks is ignored.

    Raises:
        RuntimeError: naming the refused attribute and the allowed ones.
    """
    kind = type(options).__name__
    for key, value in settings.items():
        if key in allowed:
            setattr(options, key, value)
        elif hasattr(options, key):
            raise RuntimeError(
                f"{kind} attribute '{key}' is not permitted via the backend API. "
                f"Allowed attributes: {', '.join(sorted(allowed))}"
            )
    return options


class OrtcoreBackendRep(BackendRep):  # type: ignore[misc]
    """A model prepared by :func:`ortcore.backend.prepare`.

    Args:
        session: the :class:`~ortcore.InferenceSession` that runs it.
    """

    def __init__(self, session: InferenceSession) -> None:
        self._session = session

    @property
    def session(self) -> InferenceSession:
        """The session that runs the model."""
        return self._session

    def run(self, inputs: Any, **kwargs: Any) -> list[Any]:  # type: ignore[override]
        """Run the model.

        Args:
            inputs: one array per model input, in order (a list), or a
                single array when the model has one input.
            kwargs: ``RunOptions`` attributes among :data:`ALLOWED_RUN_OPTIONS`;
                other ``RunOptions`` attributes are refused, unknown names ignored.

        Returns:
            one output per model output, in order.

        Raises:
            RuntimeError: a refused run option, or one array given for a
                model with several inputs.
        """
        options = apply_allowed(RunOptions(), kwargs, ALLOWED_RUN_OPTIONS)
        names = [i.name for i in self._session.get_inputs()]
        if isinstance(inputs, list):
            feed = {n: _array(v) for n, v in zip(names, inputs)}
        else:
            if len(names) != 1:
                raise RuntimeError(f"Model expect {len(names)} inputs")
            feed = {names[0]: _array(inputs)}
        return self._session.run(None, feed, options)


OnnxRuntimeBackendRep = OrtcoreBackendRep  # onnxruntime's name


def _array(value: Any) -> Any:
    """A numpy scalar as a 0-d array (the session takes arrays)."""
    return np.asarray(value) if isinstance(value, np.generic) else value
