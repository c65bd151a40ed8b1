"""What the host lends a provider beyond its options (new in SDK 1.1).

``SessionConfig.host`` is the host's :class:`Host`: the services a provider
would otherwise reach by importing the core or another plugin, which a
provider versioned against the SDK alone must not do. It is ``None`` when no
host made the config (a provider built by hand, in a unit test, or by a host
of SDK 1.0): a provider then runs without what the host lends, or refuses an
option that needs it with a message saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .artifacts import ArtifactStore
    from .device import Device, DevicePeer

__all__ = ["Host"]


@runtime_checkable
class Host(Protocol):
    """The services of the host that created the session (see the module docs)."""

    def open_artifact_store(self, folder: str = "") -> ArtifactStore:
        """A compiled-artifact store (:class:`~ep_sdk.artifacts.ArtifactStore`)
        in ``folder``, created when first written; ``""``: the host's default
        folder (ortcore: ``$ORTCORE_CACHE_DIR``, else
        ``~/.cache/ortcore/compiled``). The session's own store, when it has
        one, is ``SessionConfig.artifact_store``."""
        ...

    def device_peer(self, device: Device) -> DevicePeer:
        """A new instance of the installed provider that keeps its tensors on
        devices of type ``device.type``, on ``device`` (a provider with option
        ``device_id`` gets ``device.id``); the borrower closes it.

        When several are installed, the one named after the device type
        (name or alias ``cuda``) is chosen if it is available, else the
        available one with the highest priority.

        Raises:
            NoDevicePeer: none is installed, or none can run here (its
                ``unavailable_reason()``), or it failed to start.
        """
        ...
