"""Trace and span ids in log records (``TraceContextFilter``): the current span's while spans
are recorded, else zeros."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from trio_mcp import Server, open_client
from trio_mcp.otel import TraceContextFilter

from .conftest import Telemetry


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(TraceContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def ids(record: logging.LogRecord) -> tuple[Any, Any, Any]:
    return record.otelTraceID, record.otelSpanID, record.otelTraceSampled  # type: ignore[attr-defined]


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    logger = logging.getLogger("test.traced")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)


async def test_a_handlers_log_lines_carry_its_requests_span(
    telemetry: Telemetry, kept: Kept
) -> None:
    server = Server("logging")

    @server.tool()
    def work() -> str:
        logging.getLogger("test.traced").info("working")
        return "done"

    async with open_client(server) as client:
        await client.call_tool("work", {})
    logging.getLogger("test.traced").info("outside")
    span = next(
        s for s in telemetry.spans() if s.name == "tools/call work" and s.kind.name == "SERVER"
    )
    inside, outside = (ids(record) for record in kept.records)
    context = span.get_span_context()
    assert context is not None
    assert inside == (format(context.trace_id, "032x"), format(context.span_id, "016x"), True)
    assert outside == ("0", "0", False)


def test_without_tracing_every_record_gets_zeros(kept: Kept) -> None:
    logging.getLogger("test.traced").info("plain")
    (record,) = kept.records
    assert ids(record) == ("0", "0", False)
