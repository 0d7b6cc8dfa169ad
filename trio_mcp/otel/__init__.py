"""Traces and metrics by the OpenTelemetry semantic conventions for MCP, in a room of its own.

Importing this room imports nothing of OpenTelemetry. :func:`instrumentation` says, once per
connection, whether anything listens: it is None (and the connection pays one branch per
request) unless the application installed an OpenTelemetry SDK (or passed providers to
:func:`configure`). The engine plugs it in through its observer seam (``Engine.observer``);
see ``docs/observability.md`` for what is emitted.
"""

from ._held import event_store_bytes
from ._logging import TraceContextFilter
from ._state import (
    configure,
    count_limit_hit,
    count_redis_error,
    current_link,
    instrumentation,
    linked_span,
    observe,
    tracing_on,
)

__all__ = [
    "TraceContextFilter",
    "configure",
    "count_limit_hit",
    "count_redis_error",
    "current_link",
    "event_store_bytes",
    "instrumentation",
    "linked_span",
    "observe",
    "tracing_on",
]
