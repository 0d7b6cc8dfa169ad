"""Spans on every wire: stdio (a real child process), Streamable HTTP in both eras, HTTP+SSE
and WebSocket on a real hypercorn on 127.0.0.1. The client's CLIENT span is always the parent
of the server's SERVER span, and each carries its wire's network attributes."""

from __future__ import annotations

import gc
import json
import sys
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import trio_mcp.otel
from trio_mcp import Command, HttpTarget, Server, open_client
from trio_mcp.http import (
    HttpOptions,
    LegacySse,
    Limits,
    MemoryEventStore,
    StreamMeta,
    WebSocketOptions,
)

from .._http import serving
from .conftest import Telemetry, attributes_of, parent_of

SERVER, CLIENT = SpanKind.SERVER, SpanKind.CLIENT


def adder() -> Server:
    server = Server("adder", "1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    return server


CHILD = textwrap.dedent(
    """
    import json, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    import trio_mcp.otel
    from trio_mcp import Server

    class ToFile(SpanExporter):
        def export(self, spans):
            with open(sys.argv[1], "a") as out:
                for s in spans:
                    out.write(json.dumps({
                        "name": s.name, "kind": s.kind.name,
                        "trace": s.context.trace_id,
                        "parent": s.parent.span_id if s.parent else None,
                        "attributes": dict(s.attributes),
                    }) + "\\n")
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ToFile()))
    trio_mcp.otel.configure(tracer_provider=provider)
    server = Server("child")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    server.run()
    """
)


async def test_stdio_child_spans_continue_the_clients_trace(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    script, spans = tmp_path / "child.py", tmp_path / "spans.jsonl"
    script.write_text(CHILD)
    async with open_client(Command([sys.executable, str(script), str(spans)])) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
    sent = telemetry.span("tools/call add", CLIENT)
    assert attributes_of(sent)["network.transport"] == "pipe"
    received = [json.loads(line) for line in spans.read_text().splitlines()]
    [served] = [s for s in received if s["name"] == "tools/call add"]
    assert served["kind"] == "SERVER"
    assert served["trace"] == sent.context.trace_id
    assert served["parent"] == sent.context.span_id
    assert served["attributes"]["network.transport"] == "pipe"
    assert served["attributes"]["trio_mcp.transport"] == "stdio"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_streamable_http_spans_in_both_eras(telemetry: Telemetry, version: str) -> None:
    async with (
        serving(adder()) as served,
        open_client(served.url, protocol_version=version) as client,
    ):
        await client.call_tool("add", {"a": 1, "b": 2})
    sent = telemetry.span("tools/call add", CLIENT)
    received = telemetry.span("tools/call add", SERVER)
    assert parent_of(received, sent)
    for span in (sent, received):
        attributes = attributes_of(span)
        assert attributes["network.transport"] == "tcp"
        assert attributes["network.protocol.name"] == "http"
        assert attributes["trio_mcp.transport"] == "streamable-http"
        assert attributes["mcp.protocol.version"] == version
    assert attributes_of(sent)["server.address"] == "127.0.0.1"
    assert isinstance(attributes_of(sent)["server.port"], int)
    assert attributes_of(received)["client.address"] == "127.0.0.1"
    assert attributes_of(received)["network.protocol.version"] in ("1.1", "2")
    session = attributes_of(received).get("mcp.session.id")
    if version == "2026-07-28":
        assert session is None  # the modern era has no protocol sessions
    else:
        assert isinstance(session, str) and session == attributes_of(sent)["mcp.session.id"]


async def test_http_sse_spans(telemetry: Telemetry) -> None:
    async with serving(adder(), HttpOptions(legacy_sse=LegacySse())) as served:
        target = HttpTarget(served.base + "/sse", transport="sse")
        async with open_client(target, protocol_version="2024-11-05") as client:
            await client.call_tool("add", {"a": 1, "b": 2})
    sent = telemetry.span("tools/call add", CLIENT)
    received = telemetry.span("tools/call add", SERVER)
    assert parent_of(received, sent)
    assert attributes_of(received)["trio_mcp.transport"] == "sse"
    assert attributes_of(sent)["trio_mcp.transport"] == "sse"
    assert attributes_of(received)["mcp.protocol.version"] == "2024-11-05"
    assert isinstance(attributes_of(received)["mcp.session.id"], str)


async def test_websocket_spans(telemetry: Telemetry) -> None:
    options = HttpOptions(websocket=WebSocketOptions(path="/ws"))
    async with serving(adder(), options) as served:
        url = served.base.replace("http://", "ws://", 1) + "/ws"
        async with open_client(url) as client:
            await client.call_tool("add", {"a": 1, "b": 2})
    sent = telemetry.span("tools/call add", CLIENT)
    received = telemetry.span("tools/call add", SERVER)
    assert parent_of(received, sent)
    for span in (sent, received):
        assert attributes_of(span)["network.protocol.name"] == "websocket"
        assert attributes_of(span)["trio_mcp.transport"] == "websocket"
    sessions = telemetry.points("trio_mcp.sessions.open")
    assert {p.attributes["trio_mcp.transport"] for p in sessions} >= {"websocket"}
    assert all(p.value == 0 for p in sessions)  # every one opened was closed


def held_by_memory_stores(telemetry: Telemetry) -> int:
    found = telemetry.points("trio_mcp.event_store.bytes")
    return sum(p.value for p in found if p.attributes["trio_mcp.event_store"] == "memory")


async def test_the_event_store_bytes_follow_what_it_holds(telemetry: Telemetry) -> None:
    gc.collect()  # stores of earlier tests, let go, have given back theirs
    assert trio_mcp.otel.instrumentation() is not None  # what a connection asks as it opens
    before = held_by_memory_stores(telemetry)
    store = MemoryEventStore()
    store.open_now("s1", StreamMeta(session_id="a"))
    store.append_now("s1", 1, b"x" * 100)
    assert held_by_memory_stores(telemetry) - before == store.held_bytes > 0
    store.forget_now("s1")
    assert held_by_memory_stores(telemetry) == before
    store.open_now("s2", StreamMeta(session_id="a"))
    del store
    gc.collect()
    assert held_by_memory_stores(telemetry) == before  # a store let go gives back what it held


async def test_the_event_store_bytes_include_what_was_stored_before_anything_listened() -> None:
    # No provider of its own yet: the bytes are counted all the same, and a reader set up
    # afterwards reports them (an up-down counter would start from nothing, and go negative).
    store = MemoryEventStore()
    store.open_now("s1", StreamMeta(session_id="a"))
    store.append_now("s1", 1, b"y" * 200)
    reader = InMemoryMetricReader()
    trio_mcp.otel.configure(meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        assert trio_mcp.otel.instrumentation() is not None  # what a connection asks as it opens
        telemetry = Telemetry(InMemorySpanExporter(), reader, TracerProvider())
        gc.collect()
        assert held_by_memory_stores(telemetry) >= store.held_bytes > 200
    finally:
        trio_mcp.otel.configure()


async def test_a_session_cap_hit_is_counted(telemetry: Telemetry) -> None:
    options = HttpOptions(limits=Limits(max_sessions=1))
    async with (
        serving(adder(), options) as served,
        open_client(served.url, protocol_version="2025-11-25"),
    ):
        with pytest.raises(Exception):  # noqa: B017 - refused: 503, whatever the wrapper
            async with open_client(served.url, protocol_version="2025-11-25"):
                pass
    [hit] = telemetry.points("trio_mcp.limits.hit")
    assert hit.value == 1 and hit.attributes["trio_mcp.limit"] == "sessions"
