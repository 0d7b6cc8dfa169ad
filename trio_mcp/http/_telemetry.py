"""What the HTTP transports tell the instrumentation about their wire (``trio_mcp.otel``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..otel import instrumentation, observe

if TYPE_CHECKING:
    from ..otel._observer import EngineObserver


def network_of(scope: Any) -> dict[str, str | int]:
    """The conventions' network and client attributes of an ASGI connection."""
    found: dict[str, str | int] = {}
    version = scope.get("http_version") if scope is not None else None
    if isinstance(version, str):
        found["network.protocol.version"] = version
    client = scope.get("client") if scope is not None else None
    if client and isinstance(client[0], str):
        found["client.address"] = client[0]
        if isinstance(client[1], int):
            found["client.port"] = client[1]
    return found


def observe_http(
    scope: Any,
    transport: str,
    *,
    version: Callable[[], str | None] | None = None,
    session_id: Callable[[], str | None] | None = None,
) -> EngineObserver | None:
    """The observer of one HTTP connection, or None (at once) when nothing listens."""
    if instrumentation() is None:
        return None
    return observe(
        "server", transport, network=network_of(scope), version=version, session_id=session_id
    )
