"""The request log: one line per request, made from the same :class:`RequestRecord` the
``on_request`` hook gets, so there is one source of request events.

Off unless asked for (``Server(log_requests=True)``; ``trio-mcp serve --transport http`` asks).
A line names the request, never its content: the method and its target (the tool or prompt
name, the resource URI), the request id, the outcome, the duration, the transport, the session
and the principal's subject. No arguments, results, tokens or header values: the record holds
none of them.
"""

from __future__ import annotations

import logging

import orjson

from ._registry import RequestRecord

#: Where the lines go, at INFO.
REQUEST_LOGGER = "trio_mcp.requests"
logger = logging.getLogger(REQUEST_LOGGER)

#: A target longer than this is cut (a resource URI can be long).
_MAX_VALUE = 200


def _value(text: str) -> str:
    """``text`` as one word of the line: quoted (JSON) when it has a space, a quote or a
    control character, so a peer's name cannot forge a line or a field."""
    if len(text) > _MAX_VALUE:
        text = text[:_MAX_VALUE] + "..."
    if text and text.isprintable() and not any(c in text for c in ' "='):
        return text
    return orjson.dumps(text).decode()


def outcome(record: RequestRecord) -> str:
    """``ok``, ``error`` (a JSON-RPC error), ``tool_error`` (``isError: true``) or
    ``cancelled``."""
    if record.cancelled:
        return "cancelled"
    if record.error_code is not None:
        return "error"
    return "tool_error" if record.tool_error else "ok"


def request_line(record: RequestRecord) -> str:
    """The line of one request: ``key=value`` fields, the absent ones left out."""
    result = outcome(record)
    fields = [f"method={_value(record.method)}"]
    if record.name is not None:
        fields.append(f"target={_value(record.name)}")
    fields.append(f"id={_value(str(record.request_id))}")
    fields.append(f"outcome={result}")
    if record.error_code is not None and result == "error":
        fields.append(f"code={record.error_code}")
    if record.cancelled_by is not None:
        fields.append(f"cancelled_by={record.cancelled_by}")
    fields.append(f"duration_ms={record.duration * 1000:.2f}")
    if record.transport is not None:
        fields.append(f"transport={record.transport}")
    if record.session_id is not None:
        fields.append(f"session={_value(record.session_id)}")
    if record.subject is not None:
        fields.append(f"principal={_value(record.subject)}")
    return " ".join(fields)


def log_request(record: RequestRecord) -> None:
    """Log ``record`` on ``trio_mcp.requests`` at INFO; the record itself rides along as the
    log record's ``request_record`` attribute, for a structured (JSON) formatter."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(request_line(record), extra={"request_record": record})
