"""onnxruntime's native session object, ``InferenceSession._sess``.

onnxruntime's Python ``InferenceSession`` wraps a session of its C extension
(``onnxruntime.capi._pybind_state.InferenceSession``) and keeps it in
``_sess``; code that wants that layer's calls uses it directly:
``sess._sess.run_with_ort_values(feeds, names, run_options)`` returns an
``OrtValueVector``, ``SessionIOBinding(sess._sess)`` binds to it, and the
metadata is read as properties (``inputs_meta``, ``model_meta``).

ortcore has one session class, so :class:`NativeSession` is a view of it
with the native layer's signatures: every call runs the ortcore session it
belongs to. ortcore's OrtValue is also its own native value
(``OrtValue._get_c_value()`` is the value itself), so the values these
calls take and return are ordinary :class:`~ortcore.OrtValue` objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .ortvalue import OrtValue, OrtValueVector

if TYPE_CHECKING:
    from .iobinding import IOBinding
    from .options import RunOptions, SessionOptions
    from .session import InferenceSession, ModelMetadata, NodeArg

__all__ = ["NativeSession"]


class NativeSession:
    """``InferenceSession._sess``: the session with the call signatures of
    onnxruntime's C extension (see the module docs)."""

    __slots__ = ("session",)

    def __init__(self, session: InferenceSession) -> None:
        self.session = session
        """The ortcore session every call runs."""

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: RunOptions | None = None,
    ) -> list[Any]:
        """:meth:`InferenceSession.run` (the same arguments)."""
        return self.session.run(output_names, input_feed, run_options)

    def run_with_ort_values(
        self,
        input_feed: Mapping[str, OrtValue],
        output_names: Sequence[str] | None,
        run_options: RunOptions | None = None,
    ) -> OrtValueVector:
        """Run with OrtValue feeds; the outputs as an :class:`OrtValueVector`.
        The feeds come first here, as in onnxruntime's native call (its Python
        ``run_with_ort_values`` takes the output names first)."""
        return OrtValueVector(
            self.session.run_with_ort_values(output_names, input_feed, run_options)
        )

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None) -> None:
        """:meth:`InferenceSession.run_with_iobinding`."""
        self.session.run_with_iobinding(iobinding, run_options)

    def run_async(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        callback: Callable[[list[Any], Any, str], Any],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """:meth:`InferenceSession.run_async`."""
        self.session.run_async(output_names, input_feed, callback, user_data, run_options)

    @property
    def inputs_meta(self) -> list[NodeArg]:
        """The model's inputs."""
        return self.session.get_inputs()

    @property
    def outputs_meta(self) -> list[NodeArg]:
        """The model's outputs."""
        return self.session.get_outputs()

    @property
    def overridable_initializers(self) -> list[NodeArg]:
        """Initializers a feed may replace."""
        return self.session.get_overridable_initializers()

    @property
    def model_meta(self) -> ModelMetadata:
        """The model's metadata."""
        return self.session.get_modelmeta()

    @property
    def session_options(self) -> SessionOptions:
        """The options the session was created with."""
        return self.session.get_session_options()

    def get_providers(self) -> list[str]:
        """The session's providers, in priority order."""
        return self.session.get_providers()

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """Each provider's effective options."""
        return self.session.get_provider_options()

    def end_profiling(self) -> str:
        """:meth:`InferenceSession.end_profiling`."""
        return self.session.end_profiling()

    @property
    def get_profiling_start_time_ns(self) -> int:
        """When profiling started (a property in onnxruntime's native layer)."""
        return self.session.get_profiling_start_time_ns()

    def __repr__(self) -> str:
        return f"<NativeSession of {self.session!r}>"
