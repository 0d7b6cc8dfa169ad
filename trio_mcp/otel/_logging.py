"""Trace and span ids in log records, so a log line can be found from its trace and back."""

from __future__ import annotations

import logging

from ._state import tracing_on

#: What a record carries outside any span (or while nothing traces): OpenTelemetry's own
#: logging instrumentation writes the same, so one format string serves both.
_NO_TRACE = "0"


class TraceContextFilter(logging.Filter):
    """Adds ``otelTraceID`` (32 hex digits), ``otelSpanID`` (16) and ``otelTraceSampled`` to
    every record it sees: those of the current span while spans are recorded (a request's
    handler runs inside its span, so its log lines and the request log carry its ids), else
    ``"0"``, ``"0"`` and False. The names are those of OpenTelemetry's logging
    instrumentation. Put it on a handler, whose filters see the records of every logger::

        handler.addFilter(trio_mcp.otel.TraceContextFilter())
        handler.setFormatter(logging.Formatter(
            "%(levelname)s %(name)s [trace_id=%(otelTraceID)s span_id=%(otelSpanID)s] %(message)s"
        ))

    It never drops a record. Without OpenTelemetry loaded it costs a dictionary lookup.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        trace_id = span_id = _NO_TRACE
        sampled = False
        if tracing_on():
            from opentelemetry import trace

            found = trace.get_current_span().get_span_context()
            if found.is_valid:
                trace_id = format(found.trace_id, "032x")
                span_id = format(found.span_id, "016x")
                sampled = found.trace_flags.sampled
        record.otelTraceID = trace_id
        record.otelSpanID = span_id
        record.otelTraceSampled = sampled
        return True
