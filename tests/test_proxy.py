"""Proxies: ``trio_mcp.proxy(target)`` in front of in-memory, stdio and HTTP upstreams, driven
by real clients. Each forwarded feature is checked end to end; the official SDKs in front of a
proxy of server-everything are in ``tests/interop/test_proxy_interop.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import (
    Command,
    Completion,
    Context,
    ElicitResult,
    PromptReference,
    ProtocolError,
    RequestCancelled,
    RequestRecord,
    ResourceTemplateReference,
    Server,
    open_client,
    proxy,
)
from trio_mcp.http import HttpOptions, Limits

from ._http import serving
from .server.test_mount import Heard, weather

MORTAL = [sys.executable, str(Path(__file__).resolve().parent / "servers" / "mortal_server.py")]
FORM = {"type": "object", "properties": {"n": {"type": "string"}}}


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block.text, str)
    return block.text


async def test_lists_are_forwarded_page_after_page_and_stay_live() -> None:
    upstream = Server("up", page_size=2)
    for n in range(5):
        upstream.tool(name=f"t{n}")(lambda: "x")
    heard = Heard()
    async with open_client(proxy(upstream), on_notification=heard) as client:
        assert [t.name for t in await client.list_tools()] == [f"t{n}" for n in range(5)]
        assert client.server_info.name == "proxy of up"

        @upstream.tool()
        def added() -> str:
            return "added"

        await heard.wait_for("notifications/tools/list_changed")
        assert [t.name for t in await client.list_tools()][-1] == "added"
        assert text(await client.call_tool("added")) == "added"


async def test_calls_prompts_resources_templates_and_completions_are_forwarded() -> None:
    front = proxy(weather(), name="front")
    async with open_client(front) as client:
        assert client.server_info.name == "front"
        caps = client.server_capabilities
        assert caps.tools is not None and caps.prompts is not None and caps.completions is not None
        assert text(await client.call_tool("forecast", {"city": "Lima"})) == "sunny in Lima"
        prompt = await client.get_prompt("ask", {"city": "Paris"})
        assert prompt.messages[0].content.text == "What is the weather in Paris?"  # type: ignore[union-attr]
        assert [r.uri for r in await client.list_resources()] == ["data://cities"]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["data://city/{name}"]
        read = await client.read_resource("data://city/Lima")
        assert read.contents[0].text == "the city Lima"  # type: ignore[union-attr]
        completion = await client.complete(PromptReference(name="ask"), "city", "P")
        assert completion == Completion(values=["Paris", "Perth"], total=2, has_more=False)
        template = await client.complete(
            ResourceTemplateReference(uri="data://city/{name}"), "name", "L"
        )
        assert template.values == ["Lima"]
        # The upstream's errors reach the client as they are.
        with pytest.raises(ProtocolError) as unknown:
            await client.call_tool("nothing")
        assert unknown.value.code == -32602 and "Unknown tool" in unknown.value.message


async def test_subscriptions_are_forwarded_and_updates_come_back() -> None:
    upstream = weather()
    heard = Heard()
    async with open_client(proxy(upstream), on_notification=heard) as client:
        await client.subscribe_resource("data://cities")
        upstream.notify_resource_updated("data://cities")
        assert await heard.wait_for("notifications/resources/updated") == {"uri": "data://cities"}


async def test_progress_and_logging_come_back_and_set_level_goes_up() -> None:
    upstream = Server("up")

    @upstream.tool()
    async def work(ctx: Context) -> str:
        await ctx.report_progress(1, 3, "one")
        await ctx.report_progress(2, 3, "two")
        await ctx.info("an info")
        await ctx.warning("a warning")
        return "done"

    logs: list[Any] = []
    progress: list[Any] = []
    async with open_client(proxy(upstream), on_log=logs.append) as client:
        result = await client.call_tool(
            "work", on_progress=lambda p, t, m: progress.append((p, t, m))
        )
        assert text(result) == "done"
        assert progress == [(1, 3, "one"), (2, 3, "two")]
        assert [m.data for m in logs] == ["an info", "a warning"]
        await client.set_logging_level("warning")
        await client.call_tool("work")
        assert [m.data for m in logs] == ["an info", "a warning", "a warning"]


async def test_elicitation_sampling_and_roots_go_down_and_their_answers_up() -> None:
    upstream = Server("up")

    @upstream.tool()
    async def survey(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", FORM)
        sampled = await ctx.sample("say hi", max_tokens=5)
        roots = await ctx.list_roots()
        return f"{answer.content} {sampled.content.text} {[r.uri for r in roots]}"  # type: ignore[union-attr]

    asked: list[Any] = []

    def on_elicit(params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"n": "Ada"})

    def on_sample(params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    async with open_client(
        proxy(upstream),
        on_elicit=on_elicit,
        on_sample=on_sample,
        roots=[{"uri": "file:///work", "name": "w"}],  # type: ignore[list-item]
    ) as client:
        assert text(await client.call_tool("survey")) == "{'n': 'Ada'} hi ['file:///work']"
    assert asked == ["Your name?"]


async def test_a_client_without_elicitation_is_not_asked() -> None:
    upstream = Server("up")

    @upstream.tool()
    async def survey(ctx: Context) -> str:
        await ctx.elicit("Your name?", FORM)
        return "asked"  # pragma: no cover

    async with open_client(proxy(upstream)) as client:
        result = await client.call_tool("survey")
    assert result.is_error and "elicitation" in text(result)


async def test_a_downstream_cancel_cancels_the_upstream_call_on_the_wire() -> None:
    upstream = Server("up")
    records: list[RequestRecord] = []
    upstream.on_request = records.append
    started, ended = trio.Event(), trio.Event()

    @upstream.tool()
    async def wait() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.set()
        return "never"  # pragma: no cover

    async with open_client(proxy(upstream)) as client, trio.open_nursery() as nursery:
        request_id = client.new_request_id()

        async def call() -> None:
            with pytest.raises(RequestCancelled):
                await client.call_tool("wait", request_id=request_id)

        nursery.start_soon(call)
        with trio.fail_after(5):
            await started.wait()
            client.cancel(request_id, "no longer needed")
            await ended.wait()
        assert [t.name for t in await client.list_tools()] == ["wait"]  # it goes on
    (call_record,) = [r for r in records if r.method == "tools/call"]
    # The upstream was told by notifications/cancelled: it records a cancel, not an error.
    assert call_record.cancelled and call_record.error_code is None


async def test_an_upstream_that_dies_is_a_clear_error_and_the_next_call_reconnects() -> None:
    async with open_client(proxy(Command(MORTAL, stderr="discard"))) as client:
        first = text(await client.call_tool("echo", {"text": "a"}))
        with pytest.raises(ProtocolError) as died:
            await client.call_tool("die")
        assert died.value.code == -32603
        assert died.value.message.startswith("Upstream server unavailable")
        again = text(await client.call_tool("echo", {"text": "b"}))
        assert again.startswith("b (pid") and again.split("pid")[1] != first.split("pid")[1]


async def test_an_upstream_that_cannot_start_refuses_the_handshake_clearly() -> None:
    front = proxy(Command(["/nonexistent/mcp-server"], stderr="discard"), name="front")
    with pytest.raises(ProtocolError) as refused:
        async with open_client(front):
            pass  # pragma: no cover
    assert refused.value.code == -32603
    assert refused.value.message == (
        "Upstream server unavailable: front could not connect to it (FileNotFoundError)"
    )


async def test_a_modern_client_in_front_of_a_handshake_era_upstream() -> None:
    upstream = Server("up")
    eras: list[tuple[bool, str]] = []

    @upstream.tool()
    async def ask(ctx: Context) -> str:
        eras.append((ctx.modern, ctx.protocol_version))
        answer = await ctx.elicit("ok?", FORM)
        return f"answer {answer.content}"

    async with open_client(
        proxy(upstream, protocol_version="2025-06-18"),  # the upstream side speaks 2025-06-18
        mode="modern",
        on_elicit=lambda p: ElicitResult(action="accept", content={"n": "yes"}),
    ) as client:
        assert client.modern
        assert text(await client.call_tool("ask")) == "answer {'n': 'yes'}"
    # Asked upstream twice: once to learn the question, once more with the answer (the
    # modern client's retry), both over one handshake-era upstream session.
    assert eras == [(False, "2025-06-18"), (False, "2025-06-18")]


async def test_an_http_upstream_behind_a_proxy_served_in_memory() -> None:
    upstream = weather()
    async with serving(upstream) as served, open_client(proxy(served.url)) as client:
        assert text(await client.call_tool("forecast", {"city": "Oslo"})) == "sunny in Oslo"
        heard_before = len(await client.list_prompts())
        assert heard_before == 1


def test_the_proxy_sets_the_callbacks_itself() -> None:
    with pytest.raises(TypeError, match="on_elicit"):
        proxy(Server("up"), on_elicit=lambda p: None)


async def test_trio_mcp_proxy_serves_a_proxy_of_a_command() -> None:
    """``trio-mcp proxy TARGET`` (stdio here): a host spawns it like any server."""
    upstream = " ".join(MORTAL)
    command = [sys.executable, "-m", "trio_mcp", "proxy", upstream]
    async with open_client(Command(command, stderr="discard")) as client:
        assert client.server_info.name == f"proxy of {upstream}"
        assert [t.name for t in await client.list_tools()] == ["echo", "die"]
        assert text(await client.call_tool("echo", {"text": "hop"})).startswith("hop (pid")


async def test_the_upstream_withdrawing_its_question_cancels_it_downstream() -> None:
    upstream = Server("up")

    @upstream.tool()
    async def impatient(ctx: Context) -> str:
        with trio.move_on_after(0.2):
            await ctx.elicit("Quick?", FORM)
            return "answered"  # pragma: no cover
        return "gave up"

    withdrawn = trio.Event()

    async def on_elicit(params: Any) -> ElicitResult:
        try:
            await trio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("unreachable")  # pragma: no cover

    async with open_client(proxy(upstream), on_elicit=on_elicit) as client:
        with trio.fail_after(5):
            assert text(await client.call_tool("impatient")) == "gave up"
            await withdrawn.wait()


async def test_a_modern_listener_over_http_hears_the_upstreams_changes() -> None:
    """Over modern HTTP every request is a connection of its own: the listen's own upstream
    carries the upstream's list changes and the updates of the URIs it asked for."""
    upstream = weather()
    async with (
        serving(proxy(upstream)) as served,
        open_client(served.url, mode="modern") as client,
        client.listen(tools=True, resource_uris=["data://cities"]) as subscription,
    ):
        await subscription.wait_acknowledged()

        @upstream.tool()
        def added() -> str:
            return "added"

        upstream.notify_resource_updated("data://cities")
        heard = set()
        with trio.fail_after(5):
            async for note in subscription:
                heard.add(note.method)
                if heard >= {"notifications/tools/list_changed", "notifications/resources/updated"}:
                    break


async def test_a_handshake_era_client_in_front_of_a_modern_upstream() -> None:
    upstream = Server("up")
    eras: list[bool] = []

    @upstream.tool()
    async def ask(ctx: Context) -> str:
        eras.append(ctx.modern)
        answer = await ctx.elicit("ok?", FORM)
        return f"answer {answer.content}"

    async with open_client(
        proxy(upstream, mode="modern"),
        on_elicit=lambda p: ElicitResult(action="accept", content={"n": "yes"}),
    ) as client:
        assert not client.modern
        assert text(await client.call_tool("ask")) == "answer {'n': 'yes'}"
    # The modern upstream asked by ending the request (an InputRequiredResult); the proxy's
    # client put the question to the handshake-era client as a real request, then retried.
    assert eras == [True, True]


async def test_a_modern_post_to_a_proxy_ends_with_its_answer() -> None:
    """The proxy hears each modern POST's connection until it ends (a task in the POST's
    nursery): that task must not hold the POST, and its client's count of requests running,
    once the answer is written. With a cap of one request at a time, call after call passes."""
    options = HttpOptions(limits=Limits(max_requests_per_client=1))
    async with (
        serving(proxy(weather()), options) as served,
        open_client(served.url, mode="modern") as client,
    ):
        for _ in range(5):
            assert (await client.call_tool("forecast", {"city": "Paris"})).is_error is False


async def test_an_upstream_session_closes_once_idle_for_idle_timeout_and_not_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Calls beginning and ending, and a downstream connection attached, keep the session;
    idle (no call, nobody attached) for ``idle_timeout`` it closes, and not a moment sooner."""
    upstream = weather()
    front = proxy(upstream, idle_timeout=10)
    async with open_client(front) as client:
        for _ in range(3):
            await client.call_tool("forecast", {"city": "Paris"})
            await trio.sleep(6)  # attached all along: never idle
        assert len(upstream.connections) == 1
    await trio.sleep(9)
    assert len(upstream.connections) == 1
    await trio.sleep(2)
    assert len(upstream.connections) == 0
