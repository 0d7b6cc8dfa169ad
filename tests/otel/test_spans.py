"""Spans and metrics by the MCP semantic conventions, both sides, in memory: names, kinds,
attributes, parent and child, errors, cancellation, nested requests, proxies and mounts."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from opentelemetry.trace import SpanKind, StatusCode

import trio_mcp.otel
from trio_mcp import (
    ElicitRequestFormParams,
    ElicitResult,
    ProtocolError,
    RequestRecord,
    Server,
    ToolError,
    open_client,
    proxy,
)
from trio_mcp.otel import instrumentation, tracing_on
from trio_mcp.server import Context

from .conftest import Telemetry, attributes_of, parent_of

SERVER, CLIENT = SpanKind.SERVER, SpanKind.CLIENT
MODERN = "2026-07-28"
BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


def calculator() -> Server:
    server = Server("calc", "1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    def refuse() -> int:
        raise ToolError("refused")

    @server.tool()
    def crash() -> int:
        raise RuntimeError("the secret internals")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {}})
        return answer.action

    return server


async def accept(params: ElicitRequestFormParams) -> ElicitResult:
    await trio.lowlevel.checkpoint()
    return ElicitResult(action="accept", content={})


async def test_nothing_is_built_when_nobody_listens() -> None:
    """Without an SDK (only the API's no-op providers) or when switched off: no observer, so
    a connection pays one branch per request and nothing more."""
    assert instrumentation() is None and not tracing_on()
    async with open_client(calculator()) as client:
        assert client.session.observer is None
        await client.call_tool("add", {"a": 1, "b": 2})


async def test_switched_off_nothing_is_emitted(telemetry: Telemetry) -> None:
    trio_mcp.otel.configure(enabled=False)
    async with open_client(calculator()) as client:
        assert client.session.observer is None
        await client.call_tool("add", {"a": 1, "b": 2})
    assert telemetry.spans() == []
    trio_mcp.otel.configure(enabled=True)
    assert tracing_on()


@pytest.mark.parametrize("version", ["2025-11-25", MODERN])
async def test_a_tool_call_is_a_client_span_parent_of_a_server_span(
    telemetry: Telemetry, version: str
) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    async with open_client(calculator(), protocol_version=version) as client:
        with tracer.start_as_current_span("agent") as agent:
            await client.call_tool("add", {"a": 1, "b": 2})
    client_span = telemetry.span("tools/call add", CLIENT)
    server_span = telemetry.span("tools/call add", SERVER)
    assert parent_of(client_span, telemetry.span("agent", SpanKind.INTERNAL))
    assert parent_of(server_span, client_span)
    assert client_span.context.trace_id == agent.get_span_context().trace_id
    for span in (client_span, server_span):
        attributes = dict(span.attributes or {})
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.tool.name"] == "add"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.protocol.version"] == version
        assert attributes["trio_mcp.transport"] == "memory"
        assert "error.type" not in attributes
        assert span.status.status_code is StatusCode.UNSET
    assert (
        attributes_of(client_span)["jsonrpc.request.id"]
        == attributes_of(server_span)["jsonrpc.request.id"]
    )
    # In memory there is no protocol session to name.
    assert "mcp.session.id" not in attributes_of(server_span)
    first = "initialize" if version != MODERN else "server/discover"
    assert parent_of(telemetry.span(first, SERVER), telemetry.span(first, CLIENT))


async def test_notifications_are_spans_of_their_own_with_the_senders_parent(
    telemetry: Telemetry,
) -> None:
    async with open_client(calculator()):
        pass
    sent = telemetry.span("notifications/initialized", CLIENT)
    received = telemetry.span("notifications/initialized", SERVER)
    assert parent_of(received, sent)
    assert "jsonrpc.request.id" not in (received.attributes or {})


async def test_a_failing_tool_is_a_tool_error_on_both_sides(telemetry: Telemetry) -> None:
    async with open_client(calculator()) as client:
        assert (await client.call_tool("refuse")).is_error
    for kind in (CLIENT, SERVER):
        span = telemetry.span("tools/call refuse", kind)
        assert attributes_of(span)["error.type"] == "tool_error"
        assert span.status.status_code is StatusCode.ERROR
    point = telemetry.histogram("mcp.server.operation.duration", gen_ai__tool__name="refuse")
    assert point.attributes["error.type"] == "tool_error"


async def test_an_unknown_tool_is_a_protocol_error_kept_off_the_metrics_keys(
    telemetry: Telemetry,
) -> None:
    async with open_client(calculator()) as client:
        with pytest.raises(ProtocolError):
            await client.call_tool("no-such-tool")
    for kind in (CLIENT, SERVER):
        span = telemetry.span("tools/call no-such-tool", kind)
        assert attributes_of(span)["error.type"] == "-32602"
        assert attributes_of(span)["rpc.response.status_code"] == "-32602"
        assert span.status.status_code is StatusCode.ERROR
    # The peer's word never becomes a key of a server metric (cardinality).
    point = telemetry.histogram("mcp.server.operation.duration", error__type="-32602")
    assert "gen_ai.tool.name" not in point.attributes


async def test_an_unknown_method_is_refused_in_a_span(telemetry: Telemetry) -> None:
    async with open_client(calculator()) as client:
        with pytest.raises(ProtocolError):
            await client.request("no/such-method")
    refused = telemetry.span("no/such-method", SERVER)
    assert attributes_of(refused)["error.type"] == "-32601"
    assert parent_of(refused, telemetry.span("no/such-method", CLIENT))
    point = telemetry.histogram("mcp.server.operation.duration", error__type="-32601")
    assert point.attributes["mcp.method.name"] == "_OTHER"


async def test_an_internal_error_records_its_class_never_its_text(telemetry: Telemetry) -> None:
    async with open_client(calculator()) as client:
        with pytest.raises(ProtocolError):
            await client.request("prompts/get", {"name": "missing"})
        result = await client.call_tool("crash")  # a tool's exception is its isError result
    assert result.is_error
    span = telemetry.span("prompts/get missing", SERVER)
    assert span.status.status_code is StatusCode.ERROR
    crashed = telemetry.span("tools/call crash", SERVER)
    assert attributes_of(crashed)["error.type"] == "tool_error"
    assert "the secret internals" not in repr(telemetry.spans()[-1].to_json())


async def test_a_cancelled_request_records_the_cancellation_and_who(telemetry: Telemetry) -> None:
    server = Server("slow")
    started = trio.Event()

    @server.tool()
    async def park() -> str:
        started.set()
        await trio.sleep_forever()
        return "never"

    async with open_client(server) as client:
        with trio.CancelScope() as scope:

            async def cancel_when_started() -> None:
                await started.wait()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_started)
                await client.call_tool("park")
        # The server span ends once the cancel arrived; a ping after it proves it has.
        await client.ping()
    served = telemetry.span("tools/call park", SERVER)
    assert attributes_of(served)["error.type"] == "cancelled"
    assert served.status.status_code is StatusCode.ERROR
    [event] = [e for e in served.events if e.name == "trio_mcp.request.cancelled"]
    assert dict(event.attributes or {})["trio_mcp.cancelled_by"] == "peer"
    sent = telemetry.span("tools/call park", CLIENT)
    assert attributes_of(sent)["error.type"] == "cancelled"
    [local] = [e for e in sent.events if e.name == "trio_mcp.request.cancelled"]
    assert dict(local.attributes or {})["trio_mcp.cancelled_by"] == "local"
    [count] = telemetry.points("trio_mcp.server.cancellations")
    assert count.value == 1 and count.attributes["trio_mcp.cancelled_by"] == "peer"
    # The cancel notification is recorded too, as a span of its own.
    assert telemetry.span("notifications/cancelled", SERVER)
    [in_flight] = telemetry.points("trio_mcp.server.requests.in_flight")
    assert in_flight.value == 0


async def test_requests_in_flight_are_read_when_the_reader_collects(
    telemetry: Telemetry,
) -> None:
    """The in-flight gauge is observed at collection (no measurement per request): the
    requests being answered at that moment, per transport."""
    server = Server("slow")
    started = trio.Event()
    release = trio.Event()

    @server.tool()
    async def park() -> str:
        started.set()
        await release.wait()
        return "done"

    async with open_client(server) as client, trio.open_nursery() as nursery:
        for _ in range(2):
            started = trio.Event()
            nursery.start_soon(client.call_tool, "park")
            await started.wait()
        [during] = telemetry.points("trio_mcp.server.requests.in_flight")
        assert during.value == 2
        assert during.attributes == {"trio_mcp.transport": "memory"}
        release.set()
    [after] = telemetry.points("trio_mcp.server.requests.in_flight")
    assert after.value == 0


async def test_a_nested_request_is_a_child_of_the_request_that_asked(
    telemetry: Telemetry,
) -> None:
    async with open_client(calculator(), on_elicit=accept) as client:
        await client.call_tool("ask")
    tool = telemetry.span("tools/call ask", SERVER)
    asked = telemetry.span("elicitation/create", CLIENT)  # the server's request
    answered = telemetry.span("elicitation/create", SERVER)  # the client answering it
    assert parent_of(asked, tool)
    assert parent_of(answered, asked)


async def test_modern_rounds_are_children_of_one_client_call(telemetry: Telemetry) -> None:
    async with open_client(calculator(), on_elicit=accept, protocol_version=MODERN) as client:
        await client.call_tool("ask")
    call = telemetry.span("tools/call ask", CLIENT)
    rounds = [s for s in telemetry.spans() if s.name == "tools/call ask" and s.kind is SERVER]
    assert len(rounds) == 2 and all(parent_of(r, call) for r in rounds)
    assert any(e.name == "trio_mcp.input_required" for e in rounds[0].events)
    assert parent_of(telemetry.span("elicitation/create", SERVER), call)


async def test_a_proxy_keeps_one_trace(telemetry: Telemetry) -> None:
    async with open_client(proxy(calculator(), name="front")) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
    spans = [s for s in telemetry.spans() if s.name == "tools/call add"]
    # downstream client -> proxy (server) -> proxy's upstream client -> upstream server
    assert [s.kind for s in spans].count(CLIENT) == 2 and len(spans) == 4
    assert len({s.context.trace_id for s in spans}) == 1
    by_id = {s.context.span_id: s for s in spans}
    roots = [s for s in spans if s.parent is None or s.parent.span_id not in by_id]
    [root] = roots
    chain = [root]
    while len(chain) < 4:
        [child] = [s for s in spans if parent_of(s, chain[-1])]
        chain.append(child)
    assert [s.kind for s in chain] == [CLIENT, SERVER, CLIENT, SERVER]


async def test_a_mount_keeps_one_trace_and_one_server_span(telemetry: Telemetry) -> None:
    parent = Server("parent")
    parent.mount(calculator(), prefix="calc")
    async with open_client(parent) as client:
        await client.call_tool("calc_add", {"a": 1, "b": 2})
    served = telemetry.span("tools/call calc_add", SERVER)
    assert parent_of(served, telemetry.span("tools/call calc_add", CLIENT))


async def test_the_histograms_have_the_conventions_unit_buckets_and_attributes(
    telemetry: Telemetry,
) -> None:
    async with open_client(calculator()) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
    data = telemetry.reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    for name in (
        "mcp.client.operation.duration",
        "mcp.server.operation.duration",
        "mcp.client.session.duration",
        "mcp.server.session.duration",
    ):
        assert metrics[name].unit == "s"
        for point in metrics[name].data.data_points:
            assert tuple(getattr(point, "explicit_bounds", ())) == BUCKETS
    point = telemetry.histogram("mcp.server.operation.duration", gen_ai__tool__name="add")
    assert point.count == 1
    assert point.attributes["mcp.method.name"] == "tools/call"
    assert point.attributes["mcp.protocol.version"] == "2025-11-25"
    for high_cardinality in ("jsonrpc.request.id", "mcp.session.id", "mcp.resource.uri"):
        assert high_cardinality not in point.attributes
    session = telemetry.histogram("mcp.server.session.duration")
    assert session.count == 1 and session.attributes["trio_mcp.transport"] == "memory"
    assert telemetry.histogram("mcp.client.session.duration").count == 1


async def test_no_attribute_carries_arguments_results_or_tokens(telemetry: Telemetry) -> None:
    secret = "s3cr3t-value"
    server = Server("echo")

    @server.tool()
    def echo(text: str) -> str:
        return text + secret

    @server.prompt()
    def greet(name: str) -> str:
        return f"hello {name}"

    async with open_client(server) as client:
        await client.call_tool("echo", {"text": secret})
        await client.get_prompt("greet", {"name": secret})
        await client.request(
            "tools/call",
            {"name": "echo", "arguments": {"text": "x"}},
            meta={"token": secret, "authorization": f"Bearer {secret}"},
        )
    everything = [span.to_json() for span in telemetry.spans()]
    data = telemetry.reader.get_metrics_data()
    everything.append(data.to_json() if data is not None else "")
    assert secret not in "".join(everything)
    assert (
        attributes_of(telemetry.span("prompts/get greet", SERVER))["gen_ai.prompt.name"] == "greet"
    )


async def test_resource_reads_carry_their_uri_on_spans_only(telemetry: Telemetry) -> None:
    server = Server("files")

    @server.resource("data://one")
    def one() -> str:
        return "1"

    async with open_client(server) as client:
        await client.read_resource("data://one")
    span = telemetry.span("resources/read", SERVER)
    assert attributes_of(span)["mcp.resource.uri"] == "data://one"
    point = telemetry.histogram("mcp.server.operation.duration", mcp__method__name="resources/read")
    assert "mcp.resource.uri" not in point.attributes


def test_baggage_and_trace_state_travel_in_meta(telemetry: Telemetry) -> None:
    from opentelemetry import baggage, context

    from trio_mcp.otel._instruments import extract, inject

    tracer = telemetry.tracer_provider.get_tracer("app")
    token = context.attach(baggage.set_baggage("user", "alice"))
    try:
        with tracer.start_as_current_span("outer"):
            carried = inject({"name": "x", "_meta": {"progressToken": 1}})
    finally:
        context.detach(token)
    assert carried is not None
    meta: dict[str, Any] = carried["_meta"]
    assert set(meta) >= {"traceparent", "baggage", "progressToken"}
    found = extract(carried)
    assert found is not None and baggage.get_baggage("user", found) == "alice"
    # Whatever else a peer puts there is ignored, never an error.
    assert extract({"_meta": {"traceparent": 7}}) is None
    assert extract({"_meta": {"traceparent": "garbage"}}) is None


async def test_the_on_request_hook_sees_the_same_events_without_opentelemetry() -> None:
    """For users who want no OpenTelemetry: ``Server(on_request=...)`` gets each request's
    method, target, outcome, duration, who cancelled it, its version, connection and wire."""
    records: list[RequestRecord] = []
    server = calculator()
    server.on_request = records.append
    started = trio.Event()

    @server.tool()
    async def park() -> str:
        started.set()
        await trio.sleep_forever()
        return "never"

    async with open_client(server) as client:
        await client.call_tool("refuse")
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "park")
                await started.wait()
                scope.cancel()
        await client.ping()
    assert instrumentation() is None
    refused = next(r for r in records if r.name == "refuse")
    assert refused.tool_error and refused.transport == "memory"
    assert refused.protocol_version == "2025-11-25" and refused.session_id
    parked = next(r for r in records if r.name == "park")
    assert parked.cancelled and parked.cancelled_by == "peer"


async def test_a_tasks_execution_is_linked_to_the_request_that_created_it(
    telemetry: Telemetry,
) -> None:
    server = Server("tasks")

    @server.tool(task="required")
    async def slow() -> str:
        await trio.lowlevel.checkpoint()
        return "done"

    async with open_client(server, protocol_version=MODERN) as client:
        await client.call_tool("slow")
    created = telemetry.span("tools/call slow", CLIENT)
    [served] = [s for s in telemetry.spans() if s.name == "tools/call slow" and s.kind is SERVER]
    run = telemetry.span("tasks/run", SpanKind.INTERNAL)
    assert run.parent is None  # its own trace: not part of the request's time
    assert [link.context.span_id for link in run.links] == [served.context.span_id]
    assert parent_of(served, created)
