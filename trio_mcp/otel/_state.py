"""Whether anything listens, decided without importing OpenTelemetry, and the off switch.

An application that installs an OpenTelemetry SDK has imported ``opentelemetry`` before it
serves or connects; one that has not cannot be listening. So the first test is a look into
``sys.modules``: with the API absent, or never imported, :func:`instrumentation` is None at the
cost of a dictionary lookup, and OpenTelemetry is never imported by this library. When it is
loaded, the global providers are asked once per connection whether they are real (an SDK's) or
the API's no-op ones; the instruments are made once per pair of providers and kept.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._instruments import Instrumentation
    from ._observer import EngineObserver

_enabled = True
_tracer_provider: Any = None
_meter_provider: Any = None


def configure(
    *,
    enabled: bool | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> None:
    """Switch the instrumentation off (``enabled=False``) or on again, or give it providers
    of its own instead of OpenTelemetry's global ones (tests, or an application that keeps
    several); with no arguments, back to the defaults (on, the global providers). Connections
    opened afterwards follow; open ones keep what they decided."""
    global _enabled, _tracer_provider, _meter_provider
    if enabled is None and tracer_provider is None and meter_provider is None:
        _enabled, _tracer_provider, _meter_provider = True, None, None  # back to the defaults
        return
    if enabled is not None:
        _enabled = enabled
    if tracer_provider is not None or meter_provider is not None:
        _tracer_provider, _meter_provider = tracer_provider, meter_provider


def instrumentation() -> Instrumentation | None:
    """The tracer and instruments of the providers that listen, or None when nothing does
    (OpenTelemetry absent or not loaded, only its no-op providers, ``OTEL_SDK_DISABLED=true``,
    or ``configure(enabled=False)``). Cheap enough to ask once per connection."""
    if not _enabled:
        return None
    if _tracer_provider is None and _meter_provider is None:
        modules = sys.modules
        if "opentelemetry.trace" not in modules and "opentelemetry.metrics" not in modules:
            return None
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
    from ._instruments import current

    return current(_tracer_provider, _meter_provider)


def tracing_on() -> bool:
    """Whether spans are being recorded: what a log formatter asks before it looks for a
    trace id (``opentelemetry.trace.get_current_span()`` then holds the request's span)."""
    found = instrumentation()
    return found is not None and found.tracing


def observe(
    role: str,
    transport: str,
    *,
    network: Mapping[str, str | int] | None = None,
    version: Callable[[], str | None] | None = None,
    session_id: Callable[[], str | None] | None = None,
) -> EngineObserver | None:
    """The observer of one connection (``Engine.observer``), or None when nothing listens.

    ``role`` is ``"server"`` or ``"client"``; ``transport`` our name of the wire (``stdio``,
    ``memory``, ``streamable-http``, ``sse``, ``websocket``); ``network`` the conventions'
    network, server and client attributes where known; ``version`` and ``session_id`` are read
    as each request starts (the handshake decides them after the connection opens)."""
    found = instrumentation()
    if found is None:
        return None
    from ._observer import EngineObserver

    return EngineObserver(found, role, transport, network or {}, version, session_id)


# -- the counters of this library's own events: one cheap call where each event happens ----------


def count_limit_hit(limit: str) -> None:
    """A bound was hit and something was refused: ``limit`` is ``sessions``,
    ``sessions_per_client``, ``requests_in_flight``, ``tasks``, ``listens``, ..."""
    found = instrumentation()
    if found is not None:
        found.limits_hit.add(1, {"trio_mcp.limit": limit})


def count_redis_error(operation: str) -> None:
    """A Redis call failed (the store or the bus named by ``operation`` saw it)."""
    found = instrumentation()
    if found is not None:
        found.redis_errors.add(1, {"trio_mcp.redis.operation": operation})


def current_link() -> Any:
    """What a span started later, elsewhere, links back to: the current span's context (a
    task's creating request), or None when nothing listens."""
    found = instrumentation()
    if found is None or not found.tracing:
        return None
    from opentelemetry import trace

    span_context = trace.get_current_span().get_span_context()
    return span_context if span_context.is_valid else None


def linked_span(name: str, link: Any, **attributes: str) -> AbstractContextManager[Any]:
    """Work that outlives the request that started it (a task's execution): a span of its
    own, a new trace linked to ``link`` (:func:`current_link`); nothing when ``link`` is None."""
    if link is None:
        return contextlib.nullcontext()
    found = instrumentation()
    if found is None:
        return contextlib.nullcontext()
    from opentelemetry import trace
    from opentelemetry.context import Context

    return found.tracer.start_as_current_span(
        name,
        context=Context(),  # a root: the work is not part of the request's own time
        kind=trace.SpanKind.INTERNAL,
        links=[trace.Link(link)],
        attributes=attributes,
    )
