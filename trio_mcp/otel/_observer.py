"""One connection's observer: a SERVER span and a measurement for every request and
notification it receives, a CLIENT span for every one it sends, and its session's duration."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import trio
from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .._engine import InFlight, all_cancelled
from .._exception_groups import single_error
from ..protocol._envelope import PROTOCOL_VERSION_KEY
from ..protocol._errors import ProtocolError, RequestCancelled, RequestTimeout
from ..protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ErrorObject,
    JSONObject,
    Notification,
    Request,
)
from ._instruments import Instrumentation, describe, extract, inject, metric_attributes

#: The event on a cancelled request's span; ``trio_mcp.cancelled_by`` says who cancelled it.
CANCELLED_EVENT = "trio_mcp.request.cancelled"
#: Requests whose cancellation is their normal end.
_ENDED_BY_CANCEL = frozenset({"subscriptions/listen"})
#: Notifications received that get no span (the peer's log lines: many, and no outcome).
_UNTRACED = frozenset({"notifications/message"})
#: Network attributes per transport, by the conventions' table (the rest come from the socket).
_NETWORK: dict[str, dict[str, str]] = {
    "stdio": {"network.transport": "pipe"},
    "streamable-http": {"network.transport": "tcp", "network.protocol.name": "http"},
    "sse": {"network.transport": "tcp", "network.protocol.name": "http"},
    "websocket": {"network.transport": "tcp", "network.protocol.name": "websocket"},
}


def _classify(exc: BaseException) -> tuple[str, str | None, str | None]:
    """``error.type``, ``rpc.response.status_code`` and the status description of a failure."""
    only = single_error(exc)
    if isinstance(only, ProtocolError):
        return str(only.code), str(only.code), only.error.message
    if isinstance(only, RequestCancelled) or (only is None and all_cancelled(exc)):
        return "cancelled", None, "cancelled"
    if isinstance(only, trio.Cancelled):
        return "cancelled", None, "cancelled"
    if isinstance(only, RequestTimeout):
        return "timeout", None, "timed out"
    if isinstance(only, Exception):
        return type(only).__qualname__, None, None
    return type(exc).__qualname__, None, None


class EngineObserver:
    """What ``Engine.observer`` is while something listens: made once per connection by
    :func:`trio_mcp.otel.observe`."""

    def __init__(
        self,
        instrumentation: Instrumentation,
        role: str,
        transport: str,
        network: Mapping[str, str | int],
        version: Callable[[], str | None] | None,
        session_id: Callable[[], str | None] | None,
    ) -> None:
        self.instrumentation = instrumentation
        self.role = role
        self.transport = transport
        #: What every span and measurement of the connection carries.
        self.base: dict[str, str | int] = {
            **_NETWORK.get(transport, {}),
            **network,
            "trio_mcp.transport": transport,
        }
        self._version = version
        self._session_id = session_id
        self._transport_only = {"trio_mcp.transport": transport}
        self._opened: float | None = None

    # -- what a request carries of its connection ----------------------------------------------

    def _attributes(self, method: str, params: JSONObject) -> tuple[str, dict[str, Any]]:
        name, attributes = describe(method, params)
        attributes.update(self.base)
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):  # the modern era: each request carries its version
            attributes["mcp.protocol.version"] = version
        else:
            known = self._version() if self._version is not None else None
            if known:
                attributes["mcp.protocol.version"] = known
            # Handshake era only: the 2026-07-28 revision has no protocol sessions.
            session = self._session_id() if self._session_id is not None else None
            if session:
                attributes["mcp.session.id"] = session
        return name, attributes

    # -- received: the engine's seam -----------------------------------------------------------

    async def serve(
        self, handler: Callable[[InFlight], Awaitable[JSONObject]], record: InFlight
    ) -> JSONObject:
        """Run one received request's handler inside its SERVER span."""
        found = self.instrumentation
        method = record.method
        params = record.params
        name, attributes = self._attributes(method, params)
        attributes["jsonrpc.request.id"] = str(record.id)
        parent = extract(params)
        links = None
        if parent is not None:  # parented on the caller; linked to the transport's span
            ambient = trace.get_current_span().get_span_context()
            if ambient.is_valid:
                links = [trace.Link(ambient)]
        span = found.tracer.start_span(
            name, parent, SpanKind.SERVER, attributes=attributes, links=links
        )
        token = context.attach(trace.set_span_in_context(span, parent))
        answering = found.answering
        answering[self.transport] = answering.get(self.transport, 0) + 1
        start = time.perf_counter()
        error: tuple[str, str | None, str | None] | None = None
        try:
            result = await handler(record)
            if method == "tools/call" and result.get("isError") is True:
                error = ("tool_error", None, None)
            elif result.get("resultType") == "input_required":
                span.add_event("trio_mcp.input_required")
            return result
        except BaseException as exc:
            only = single_error(exc)
            if isinstance(only, Exception) and not isinstance(
                only, ProtocolError | RequestCancelled
            ):
                # Answered -32603 "Internal error": the class is recorded, never the text.
                span.add_event("exception", {"exception.type": type(only).__qualname__})
                error = (str(INTERNAL_ERROR), str(INTERNAL_ERROR), "Internal error")
            else:
                error = _classify(exc)
            raise
        finally:
            duration = time.perf_counter() - start
            if record.cancel_requested and method not in _ENDED_BY_CANCEL:
                by = record.cancelled_by or "local"
                event: dict[str, Any] = {"trio_mcp.cancelled_by": by}
                if record.cancel_reason:
                    event["trio_mcp.cancel_reason"] = record.cancel_reason
                span.add_event(CANCELLED_EVENT, event)
                found.cancellations.add(1, {"trio_mcp.cancelled_by": by, **self._transport_only})
                if record.cancel_error is not None:
                    code = str(record.cancel_error.code)
                    error = (code, code, record.cancel_error.message)
                else:
                    error = ("cancelled", None, f"cancelled by the {by}")
            elif error is not None and error[0] == "cancelled":
                span.add_event(CANCELLED_EVENT, {"trio_mcp.cancelled_by": "local"})
            self.finish(span, attributes, error, found.server_operation, duration)
            context.detach(token)
            answering[self.transport] -= 1

    def refused(self, request: Request, error: ErrorObject) -> None:
        """A request answered with an error before it ran (unknown method, id in flight, ...)."""
        found = self.instrumentation
        name, attributes = self._attributes(request.method, request.params or {})
        attributes["jsonrpc.request.id"] = str(request.id)
        parent = extract(request.params or {})
        span = found.tracer.start_span(name, parent, SpanKind.SERVER, attributes=attributes)
        code = str(error.code)
        self.finish(span, attributes, (code, code, error.message), found.server_operation, 0.0)

    def notified(self, notification: Notification) -> None:
        """A notification received: a SERVER span of its own, parented on its ``_meta``."""
        if notification.method in _UNTRACED:
            return
        found = self.instrumentation
        params = notification.params or {}
        name, attributes = self._attributes(notification.method, params)
        span = found.tracer.start_span(
            name, extract(params), SpanKind.SERVER, attributes=attributes
        )
        self.finish(span, attributes, None, found.server_operation, 0.0)

    # -- sent ----------------------------------------------------------------------------------

    def sending(self, method: str, params: JSONObject | None) -> Sending:
        """A request about to be sent: ``with observer.sending(m, p) as call:`` send
        ``call.params`` (they carry the span's context in ``_meta``)."""
        return Sending(self, method, params)

    def answering(self, method: str, params: JSONObject | None) -> Sending:
        """A question of the peer's answered outside the engine (a modern input request a
        client fulfils between rounds): ``with observer.answering(m, p):`` around the answer,
        a SERVER span, child of the call that brought the question."""
        return Sending(self, method, params, received=True)

    def notifying(self, method: str, params: JSONObject | None) -> JSONObject | None:
        """A notification about to be sent: its CLIENT span (ended at once: it has no ack), and
        its params with the span's context."""
        found = self.instrumentation
        name, attributes = self._attributes(method, params or {})
        span = found.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        token = context.attach(trace.set_span_in_context(span))
        try:
            carried = inject(params)
        finally:
            context.detach(token)
        self.finish(span, attributes, None, found.client_operation, 0.0)
        return carried

    # -- the session ---------------------------------------------------------------------------

    def session_started(self) -> None:
        self._opened = time.perf_counter()
        self.instrumentation.sessions_open.add(
            1, {**self._transport_only, "trio_mcp.role": self.role}
        )

    def session_ended(self, error_type: str | None = None) -> None:
        if self._opened is None:
            return
        found = self.instrumentation
        found.sessions_open.add(-1, {**self._transport_only, "trio_mcp.role": self.role})
        attributes: dict[str, Any] = {
            k: v for k, v in self.base.items() if k not in ("client.address", "client.port")
        }
        version = self._version() if self._version is not None else None
        if version:
            attributes["mcp.protocol.version"] = version
        if error_type is not None:
            attributes["error.type"] = error_type
        histogram = found.server_session if self.role == "server" else found.client_session
        histogram.record(time.perf_counter() - self._opened, attributes)
        self._opened = None

    # -- shared --------------------------------------------------------------------------------

    def finish(
        self,
        span: trace.Span,
        attributes: dict[str, Any],
        error: tuple[str, str | None, str | None] | None,
        histogram: Any,
        duration: float,
    ) -> None:
        measured = metric_attributes(attributes)
        if error is not None:
            error_type, code, description = error
            span.set_attribute("error.type", error_type)
            measured["error.type"] = error_type
            if code is not None:
                span.set_attribute("rpc.response.status_code", code)
                measured["rpc.response.status_code"] = code
            span.set_status(Status(StatusCode.ERROR, description))
            if self.role == "server" and code in (str(METHOD_NOT_FOUND), str(INVALID_PARAMS)):
                # An unknown method or tool is the peer's word: never a key of a metric.
                measured.pop("gen_ai.tool.name", None)
                measured.pop("gen_ai.prompt.name", None)
                if code == str(METHOD_NOT_FOUND):
                    measured["mcp.method.name"] = "_OTHER"
        span.end()
        histogram.record(duration, measured)


class Sending:
    """One request sent: its CLIENT span, current while it waits for the answer."""

    def __init__(
        self,
        observer: EngineObserver,
        method: str,
        params: JSONObject | None,
        *,
        received: bool = False,
    ):
        self._observer = observer
        self._method = method
        self.params = params
        self._received = received
        self._error: tuple[str, str | None, str | None] | None = None

    def __enter__(self) -> Sending:
        observer = self._observer
        found = observer.instrumentation
        name, self._attributes = observer._attributes(self._method, self.params or {})
        kind = SpanKind.SERVER if self._received else SpanKind.CLIENT
        self._span = found.tracer.start_span(name, kind=kind, attributes=self._attributes)
        self._token = context.attach(trace.set_span_in_context(self._span))
        if not self._received:
            self.params = inject(self.params)
        self._start = time.perf_counter()
        return self

    def sent(self, request_id: str | int) -> None:
        self._span.set_attribute("jsonrpc.request.id", str(request_id))

    def answered(self, result: JSONObject) -> None:
        """The answer arrived: a tool's ``isError`` is the span's error."""
        if self._method == "tools/call" and result.get("isError") is True:
            self._error = ("tool_error", None, None)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        observer = self._observer
        error = _classify(exc) if exc is not None else self._error
        if error is not None and error[0] == "cancelled":
            self._span.add_event(CANCELLED_EVENT, {"trio_mcp.cancelled_by": "local"})
        duration = time.perf_counter() - self._start
        found = observer.instrumentation
        histogram = found.server_operation if self._received else found.client_operation
        observer.finish(self._span, self._attributes, error, histogram, duration)
        context.detach(self._token)
