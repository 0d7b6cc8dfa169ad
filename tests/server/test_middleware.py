"""Middleware around every request: order, rewriting, refusal, short-circuit, cancellation and
exceptions through the chain, and each built-in, over the in-memory client, the raw wire and a
real HTTP server, in the handshake and modern eras."""

from __future__ import annotations

import logging
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

from trio_mcp import Context, MiddlewareContext, ProtocolError, Server, ToolError, open_client
from trio_mcp.middleware import (
    RATE_LIMITED,
    CallNext,
    ErrorHandlingMiddleware,
    LoggingMiddleware,
    RateLimitMiddleware,
    ResponseCacheMiddleware,
    TimingMiddleware,
)
from trio_mcp.protocol import INTERNAL_ERROR, INVALID_PARAMS

from .._http import serving
from ..wire import wire_to

MODES = ["legacy", "modern"]
JSON = dict[str, Any]


def tool_server(*middleware: Any) -> Server:
    server = Server("mw", middleware=middleware)

    @server.tool()
    async def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello, {name}"

    return server


@attrs.frozen
class As:
    """A server served in memory for one principal (as stdio's environment token gives)."""

    server: Server
    principal: Any

    async def serve_transport(self, transport: Any, /) -> None:
        await self.server.serve_transport(transport, principal=self.principal)


async def read_text(client: Any, uri: str) -> str:
    result = await client.read_resource(uri)
    return str(result.contents[0].text)


def text(result: Any) -> str:
    return str(result.content[0].text)


# -- the chain ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_first_registered_is_the_outermost(mode: str) -> None:
    trail: list[str] = []

    def named(tag: str) -> Any:
        async def mw(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
            trail.append(f"{tag} in")
            result = await call_next(ctx)
            trail.append(f"{tag} out")
            return result

        return mw

    server = tool_server(named("a"), named("b"))
    server.middleware(named("c"))
    async with open_client(server, mode=mode) as client:
        trail.clear()
        assert text(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
    assert trail == ["a in", "b in", "c in", "c out", "b out", "a out"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_context_describes_the_request(mode: str) -> None:
    seen: list[MiddlewareContext] = []
    server = tool_server()

    @server.middleware
    async def record(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        seen.append(ctx)
        return await call_next(ctx)

    async with open_client(server, mode=mode) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        await client.list_tools()
    call = next(ctx for ctx in seen if ctx.method == "tools/call")
    assert call.tool_name == "add" and call.arguments == {"a": 1, "b": 2}
    assert call.name == "add" and call.auth is None
    assert isinstance(call.context, Context) and call.context.request_id == call.request_id
    assert call.modern is (mode == "modern") and call.era == (
        "modern" if call.modern else "handshake"
    )
    assert call.context.modern is call.modern
    assert call.protocol_version == ("2026-07-28" if mode == "modern" else "2025-11-25")
    listing = next(ctx for ctx in seen if ctx.method == "tools/list")
    assert listing.tool_name is None and listing.arguments is None
    # One connection, one id.
    assert call.session_id and listing.session_id == call.session_id


@pytest.mark.parametrize("mode", MODES)
async def test_params_changed_before_and_the_result_after(mode: str) -> None:
    async def double_a(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.tool_name == "add":
            arguments = {**(ctx.arguments or {}), "a": 2 * ctx.params["arguments"]["a"]}
            ctx = attrs.evolve(ctx, params={**ctx.params, "arguments": arguments})
        result = await call_next(ctx)
        if ctx.method == "tools/call":
            result = {**result, "content": [*result["content"], {"type": "text", "text": "!"}]}
        return result

    async with open_client(tool_server(double_a), mode=mode) as client:
        result = await client.call_tool("add", {"a": 5, "b": 1})
    assert [block.text for block in result.content] == ["11", "!"]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_a_middleware_answers_without_calling_next(mode: str) -> None:
    ran: list[str] = []
    server = tool_server()

    @server.tool()
    async def costly() -> str:
        ran.append("costly")
        return "computed"

    @server.middleware
    async def canned(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.tool_name == "costly":
            return {"content": [{"type": "text", "text": "canned"}]}
        return await call_next(ctx)

    async with open_client(server, mode=mode) as client:
        assert text(await client.call_tool("costly")) == "canned"
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
async def test_refusals_reach_the_client(mode: str) -> None:
    async def gate(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.tool_name == "echo" and ctx.arguments == {"text": "secret"}:
            raise ToolError("echo refuses secrets")
        if ctx.method == "prompts/get":
            raise ToolError("no prompts today")
        if ctx.tool_name == "add":
            raise ProtocolError(-32001, "Closed for maintenance", {"until": "noon"})
        return await call_next(ctx)

    async with open_client(tool_server(gate), mode=mode) as client:
        refused = await client.call_tool("echo", {"text": "secret"})
        assert refused.is_error and text(refused) == "echo refuses secrets"
        assert text(await client.call_tool("echo", {"text": "hi"})) == "hi"
        with pytest.raises(ProtocolError) as prompt:
            await client.get_prompt("greet", {"name": "x"})
        assert (prompt.value.code, prompt.value.message) == (INVALID_PARAMS, "no prompts today")
        with pytest.raises(ProtocolError) as closed:
            await client.call_tool("add", {"a": 1, "b": 1})
        assert closed.value.code == -32001 and closed.value.data == {"until": "noon"}


async def test_a_handlers_own_tool_error_keeps_its_meaning_under_middleware() -> None:
    """A custom method raising ToolError answers -32602 with its message without middleware; a
    pass-through middleware changes nothing of that."""

    async def passing(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        return await call_next(ctx)

    for middleware in ((), (passing,)):
        server = Server("custom", middleware=middleware)

        @server.method("custom/fail")
        async def fail(params: JSON) -> JSON:
            raise ToolError("the vault is locked")

        async with wire_to(server) as peer:
            reply = await peer.request(7, "custom/fail", {})
        assert reply["error"] == {"code": INVALID_PARAMS, "message": "the vault is locked"}


async def test_an_exception_inside_a_middleware_is_a_generic_internal_error() -> None:
    async def broken(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.method == "tools/call":
            raise KeyError("database password is hunter2")
        return await call_next(ctx)

    async with wire_to(tool_server(broken)) as peer:
        reply = await peer.request(3, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert reply == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
        }
        # The connection still serves.
        assert (await peer.request(4, "ping"))["result"] == {}


async def test_a_cancel_crosses_the_chain_and_suppresses_the_response(autojump_clock: Any) -> None:
    started = trio.Event()
    unwound: list[str] = []

    async def outer(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        try:
            return await call_next(ctx)
        except trio.Cancelled:
            unwound.append("outer saw the cancel")
            raise

    async def inner(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        try:
            return await call_next(ctx)
        finally:
            if ctx.tool_name == "wait":
                unwound.append(f"inner ended, cancelled={ctx.context.cancelled}")

    server = tool_server(outer, inner)

    @server.tool()
    async def wait() -> str:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with wire_to(server) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "wait"}}
        )
        await started.wait()
        await peer.cancel(9, "user aborted")
        assert await peer.recv_within(10) is None
        assert (await peer.request(10, "ping"))["result"] == {}
    assert unwound == ["inner ended, cancelled=True", "outer saw the cancel"]


@pytest.mark.parametrize("mode", ["legacy", "auto", "modern"])
async def test_the_chain_over_a_real_http_server(mode: str) -> None:
    seen: list[tuple[str, str, bool]] = []

    async def record(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        seen.append((ctx.method, ctx.session_id, ctx.modern))
        result = await call_next(ctx)
        if ctx.tool_name == "echo":
            result = {**result, "content": [{"type": "text", "text": "via middleware"}]}
        return result

    async with serving(tool_server(record)) as served, open_client(served.url, mode=mode) as client:
        assert text(await client.call_tool("echo", {"text": "hi"})) == "via middleware"
        assert text(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
        open_sessions = set(served.app.sessions)
    calls = [entry for entry in seen if entry[0] == "tools/call"]
    assert len(calls) == 2
    modern = mode != "legacy"  # auto: our server speaks the modern era
    assert all(entry[2] is modern for entry in calls)
    if modern:
        # Stateless: each POST is a connection of its own.
        assert calls[0][1] != calls[1][1]
    else:
        # The handshake era's HTTP session: its Mcp-Session-Id, the same for both calls.
        assert open_sessions == {calls[0][1]} == {calls[1][1]}


# -- built-ins ---------------------------------------------------------------------------------


async def test_logging_writes_one_line_per_request_without_params(
    caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    server = tool_server(LoggingMiddleware())

    @server.tool()
    async def slow() -> str:
        await trio.sleep(0.25)
        return "done"

    caplog.set_level(logging.INFO, logger="trio_mcp.middleware")
    async with open_client(server, mode="legacy") as client:
        caplog.clear()
        await client.call_tool("slow")
        await client.call_tool("add", {"a": 1, "b": "x"})  # arguments refused: a tool error
        with pytest.raises(ProtocolError):
            await client.call_tool("nope")
    lines = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.middleware"]
    assert lines == [
        "tools/call slow 250.0ms ok",
        "tools/call add 0.0ms tool error",
        "tools/call nope 0.0ms error -32602",
    ]


async def test_logging_shows_params_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="trio_mcp.middleware")
    async with open_client(
        tool_server(LoggingMiddleware(include_params=True)), mode="modern"
    ) as client:
        caplog.clear()
        await client.call_tool("echo", {"text": "hi"})
    (line,) = [r.getMessage() for r in caplog.records if r.name == "trio_mcp.middleware"]
    assert line.startswith("tools/call echo ") and line.endswith(
        ' ok {"name":"echo","arguments":{"text":"hi"}}'
    )
    assert "_meta" not in line


async def test_timing_records_durations(autojump_clock: Any) -> None:
    timing = TimingMiddleware()
    server = tool_server(timing)

    @server.tool()
    async def slow(seconds: float) -> str:
        await trio.sleep(seconds)
        return "done"

    async with open_client(server) as client:
        await client.call_tool("slow", {"seconds": 1.0})
        await client.call_tool("slow", {"seconds": 3.0})
        await client.list_tools()
    stats = timing.snapshot()["tools/call slow"]
    assert (stats.count, stats.total, stats.min, stats.max, stats.mean) == (2, 4.0, 1.0, 3.0, 2.0)
    assert timing.stats["tools/list"].count == 1


async def test_timing_is_bounded() -> None:
    timing = TimingMiddleware(max_keys=1)
    async with open_client(tool_server(timing)) as client:
        await client.call_tool("echo", {"text": "a"})
        await client.call_tool("add", {"a": 1, "b": 1})
    assert set(timing.stats) == {"initialize", "tools/call"}  # the second key falls back


def faulty_server(*middleware: Any) -> Server:
    server = Server("faulty", middleware=middleware)

    @server.resource("db://{key}")
    def row(key: str) -> str:
        raise KeyError(key)

    @server.prompt()
    def broken(topic: str) -> str:
        raise ValueError("the template engine exploded")

    return server


async def test_error_handling_maps_exceptions_with_codes_and_a_hook() -> None:
    def hook(error: Exception, ctx: MiddlewareContext) -> Exception | JSON | None:
        if isinstance(error, ValueError) and ctx.method == "prompts/get":
            return ToolError("that prompt is unavailable")
        return None

    handling = ErrorHandlingMiddleware(hook, error_codes={KeyError: INVALID_PARAMS})
    async with open_client(faulty_server(handling)) as client:
        with pytest.raises(ProtocolError) as missing:
            await client.read_resource("db://42")
        assert (missing.value.code, missing.value.message) == (INVALID_PARAMS, "'42'")
        with pytest.raises(ProtocolError) as prompt:
            await client.get_prompt("broken", {"topic": "x"})
        assert (prompt.value.code, prompt.value.message) == (
            INVALID_PARAMS,
            "that prompt is unavailable",
        )
    assert handling.counts == {"KeyError": 1, "ValueError": 1}


async def test_error_handling_keeps_the_generic_error_by_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handling = ErrorHandlingMiddleware()
    async with open_client(faulty_server(handling)) as client:
        with pytest.raises(ProtocolError) as failed:
            await client.get_prompt("broken", {"topic": "x"})
    assert (failed.value.code, failed.value.message) == (INTERNAL_ERROR, "Internal error")
    assert any("the template engine exploded" in r.exc_text for r in caplog.records if r.exc_text)


async def test_an_error_it_maps_is_logged_in_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def hook(error: Exception, ctx: MiddlewareContext) -> Exception | JSON | None:
        return ToolError("that prompt is unavailable") if isinstance(error, ValueError) else None

    handling = ErrorHandlingMiddleware(hook, error_codes={KeyError: INVALID_PARAMS})
    caplog.set_level(logging.DEBUG)
    async with open_client(faulty_server(handling)) as client:
        with pytest.raises(ProtocolError):
            await client.read_resource("db://42")
        with pytest.raises(ProtocolError):
            await client.get_prompt("broken", {"topic": "x"})
    mapped = [r for r in caplog.records if "failed" in r.getMessage()]
    assert [(r.levelno, r.exc_info, r.exc_text) for r in mapped] == [(logging.INFO, None, None)] * 2
    assert "KeyError: '42'" in mapped[0].getMessage()
    assert "-32602" in mapped[0].getMessage()
    assert "ValueError: the template engine exploded" in mapped[1].getMessage()
    assert not any(r.exc_info for r in caplog.records)


async def test_a_hook_may_answer_with_a_result() -> None:
    def fallback(error: Exception, ctx: MiddlewareContext) -> JSON:
        return {"contents": [{"uri": ctx.params["uri"], "text": "(unavailable)"}]}

    async with open_client(faulty_server(ErrorHandlingMiddleware(fallback))) as client:
        assert await read_text(client, "db://1") == "(unavailable)"


@pytest.mark.parametrize("mode", MODES)
async def test_rate_limiting_refuses_with_a_clear_error_then_refills(
    mode: str, autojump_clock: Any
) -> None:
    limit = RateLimitMiddleware(rate=2, burst=2)
    async with open_client(tool_server(limit), mode=mode) as client:
        await client.call_tool("echo", {"text": "1"})
        await client.call_tool("echo", {"text": "2"})
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("echo", {"text": "3"})
        assert refused.value.code == RATE_LIMITED == -32000
        assert refused.value.message.startswith("Rate limit exceeded")
        assert refused.value.data == {"retryAfterMs": 500}
        await client.ping()  # exempt
        await trio.sleep(0.5)
        assert text(await client.call_tool("echo", {"text": "4"})) == "4"
        with pytest.raises(ProtocolError):
            await client.list_tools()


async def test_rate_limits_are_per_session_without_a_principal(autojump_clock: Any) -> None:
    server = tool_server(RateLimitMiddleware(rate=1, burst=1))
    async with open_client(server) as first, open_client(server) as second:
        await first.call_tool("echo", {"text": "a"})
        await second.call_tool("echo", {"text": "b"})
        with pytest.raises(ProtocolError):
            await first.call_tool("echo", {"text": "c"})


async def test_rate_limit_buckets_are_bounded() -> None:
    limit = RateLimitMiddleware(rate=1, burst=5, max_callers=2)
    server = tool_server(limit)
    for _ in range(4):
        async with open_client(server) as client:
            await client.call_tool("echo", {"text": "a"})
        assert limit.callers <= 2
    assert limit.callers == 2


def test_a_rate_limit_needs_sense() -> None:
    with pytest.raises(ValueError):
        RateLimitMiddleware(rate=0, burst=1)
    with pytest.raises(ValueError):
        RateLimitMiddleware(rate=1, burst=1, per="ip")  # type: ignore[arg-type]


def cached_server(cache: ResponseCacheMiddleware, reads: list[str]) -> Server:
    server = Server("cached", middleware=[cache])

    @server.resource("note://{name}")
    def note(name: str) -> str:
        reads.append(name)
        return f"note {name} v{reads.count(name)}"

    @server.tool()
    def first() -> str:
        return "1"

    return server


@pytest.mark.parametrize("mode", MODES)
async def test_the_cache_serves_reads_until_the_resource_is_updated(
    mode: str, autojump_clock: Any
) -> None:
    cache = ResponseCacheMiddleware(ttl=30)
    reads: list[str] = []
    server = cached_server(cache, reads)
    async with open_client(server, mode=mode) as client:
        first = await read_text(client, "note://a")
        again = await read_text(client, "note://a")
        await client.read_resource("note://b")
        assert first == again == "note a v1"
        assert reads == ["a", "b"]
        server.notify_resource_updated("note://a")
        await trio.lowlevel.checkpoint()
        assert await read_text(client, "note://a") == "note a v2"
        await client.read_resource("note://b")
        assert reads == ["a", "b", "a"]
        await trio.sleep(31)  # the ttl
        await client.read_resource("note://b")
        assert reads == ["a", "b", "a", "b"]


async def test_the_cache_is_bounded() -> None:
    cache = ResponseCacheMiddleware(max_entries=2)
    reads: list[str] = []
    async with open_client(cached_server(cache, reads)) as client:
        for name in "abc":
            await read_text(client, f"note://{name}")
        assert cache.size == 2
        await read_text(client, "note://a")  # the oldest went first
    assert reads == ["a", "b", "c", "a"]


async def test_the_cache_drops_a_list_when_the_list_changes() -> None:
    cache = ResponseCacheMiddleware()
    server = cached_server(cache, [])
    async with open_client(server) as client:
        assert [t.name for t in await client.list_tools()] == ["first"]
        assert [t.name for t in await client.list_tools()] == ["first"]
        assert cache.hits == 1

        @server.tool()
        def second() -> str:
            return "2"

        assert [t.name for t in await client.list_tools()] == ["first", "second"]
        # Tool calls are never cached.
        assert text(await client.call_tool("second")) == "2"
    assert cache.hits == 1


async def test_the_cache_keeps_principals_apart() -> None:
    from trio_mcp import Auth, Principal, StaticTokenVerifier

    cache = ResponseCacheMiddleware()
    verifier = StaticTokenVerifier({})
    server = Server(
        "private", middleware=[cache], auth=Auth(verifier, resource="https://mcp.example/mcp")
    )

    @server.resource("me://name")
    def me(ctx: Context) -> str:
        assert ctx.auth is not None
        return str(ctx.auth.subject)

    async with (
        open_client(As(server, Principal(subject="alice"))) as alice,
        open_client(As(server, Principal(subject="bob"))) as bob,
    ):
        assert await read_text(alice, "me://name") == "alice"
        assert await read_text(bob, "me://name") == "bob"
        assert await read_text(alice, "me://name") == "alice"
    assert cache.hits == 1


# -- with authorization ------------------------------------------------------------------------


async def test_a_request_its_principal_may_not_make_never_reaches_the_chain() -> None:
    from ..servers.scoped_server import ALICE, NOBODY, scoped_server

    seen: list[str | None] = []

    async def record(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.method == "tools/call":
            seen.append(ctx.tool_name)
        return await call_next(ctx)

    calls: list[str] = []
    server = scoped_server(calls=calls, middleware=[record])
    async with open_client(As(server, NOBODY)) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("whoami")
        assert refused.value.code == -32600
    async with open_client(As(server, ALICE)) as client:
        assert text(await client.call_tool("whoami")) == "alice mcp:tools"
    assert seen == ["whoami"] and calls == ["whoami"]


async def test_params_a_middleware_changes_are_authorized_again() -> None:
    from ..servers.scoped_server import ADMIN, ALICE, scoped_server

    async def escalate(ctx: MiddlewareContext, call_next: CallNext) -> JSON:
        if ctx.tool_name == "whoami":
            ctx = attrs.evolve(ctx, params={**ctx.params, "name": "deploy"})
        return await call_next(ctx)

    calls: list[str] = []
    server = scoped_server(calls=calls, middleware=[escalate])
    async with open_client(As(server, ALICE)) as client:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("whoami")
        assert refused.value.code == -32600
        assert refused.value.message.startswith("Forbidden: tools/call needs the scope mcp:admin")
    assert calls == []
    async with open_client(As(server, ADMIN)) as client:
        assert text(await client.call_tool("whoami")) == "deployed"
    assert calls == ["deploy"]


async def test_the_cache_never_keeps_an_input_request() -> None:
    """A modern read that asks the user first ends with an input request, then completes on
    the retry: only what completed is cached, under the retry's own params."""
    from trio_mcp import ElicitResult

    cache = ResponseCacheMiddleware()
    server = Server("asking", middleware=[cache])
    started: list[str] = []

    @server.resource("secret://door")
    async def door(ctx: Context) -> str:
        started.append("door")
        answer = await ctx.elicit("Password?", {"type": "object", "properties": {}})
        return f"opened ({answer.action})"

    asked: list[str] = []

    async def on_elicit(params: Any) -> ElicitResult:
        asked.append("asked")
        return ElicitResult(action="accept", content={})

    async with open_client(server, mode="modern", on_elicit=on_elicit) as client:
        assert await read_text(client, "secret://door") == "opened (accept)"
        assert await read_text(client, "secret://door") == "opened (accept)"
    # Each read asked again: the input request of the first round was never served from cache.
    assert asked == ["asked", "asked"]
    assert cache.hits == 0
