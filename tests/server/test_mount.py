"""Composition: ``parent.mount(child, prefix=...)``, through real clients of the parent.

Every test connects a client to the parent (in memory, or over HTTP where it says so) and
checks what it sees of the child: names, calls, live list changes, notifications, the child's
own ``Context``, cancellation, subscriptions, completions, scopes, unmounting.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import (
    Auth,
    Completion,
    Context,
    ElicitResult,
    Principal,
    PromptReference,
    ProtocolError,
    RequestCancelled,
    ResourceTemplateReference,
    Server,
    StaticTokenVerifier,
    open_client,
    proxy,
)

from .._http import serving
from ..auth.test_scopes import ServedAs


def weather() -> Server:
    child = Server("weather")

    @child.tool()
    async def forecast(city: str) -> str:
        return f"sunny in {city}"

    @child.prompt()
    def ask(city: str) -> str:
        return f"What is the weather in {city}?"

    @child.resource("data://cities")
    def cities() -> str:
        return "Paris, Lima"

    @child.resource("data://city/{name}")
    def city(name: str) -> str:
        return f"the city {name}"

    @child.completion()
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        return [c for c in ("Paris", "Lima", "Perth") if c.startswith(argument.value)]

    return child


def parent_of(child: Server, prefix: str | None = "weather") -> Server:
    parent = Server("parent")

    @parent.tool()
    def hello() -> str:
        return "hello from the parent"

    parent.mount(child, prefix=prefix)
    return parent


class Heard:
    """The notifications a client received, and a way to wait for one."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self._changed = trio.Event()

    async def __call__(self, method: str, params: dict[str, Any]) -> None:
        await trio.lowlevel.checkpoint()
        self.notes.append((method, params))
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, method: str) -> dict[str, Any]:
        with trio.fail_after(5):
            while True:
                for got, params in self.notes:
                    if got == method:
                        return params
                await self._changed.wait()


async def test_the_childs_entries_are_the_parents_under_the_prefix() -> None:
    parent = parent_of(weather())
    async with open_client(parent) as client:
        assert [t.name for t in await client.list_tools()] == ["hello", "weather_forecast"]
        assert [p.name for p in await client.list_prompts()] == ["weather_ask"]
        assert [r.uri for r in await client.list_resources()] == ["data://weather/cities"]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["data://weather/city/{name}"]
        caps = client.server_capabilities
        assert caps.tools is not None and caps.prompts is not None and caps.resources is not None
        assert caps.completions is not None

        result = await client.call_tool("weather_forecast", {"city": "Lima"})
        assert result.content[0].text == "sunny in Lima"  # type: ignore[union-attr]
        assert (await client.call_tool("hello")).content[0].text == "hello from the parent"  # type: ignore[union-attr]
        prompt = await client.get_prompt("weather_ask", {"city": "Paris"})
        assert prompt.messages[0].content.text == "What is the weather in Paris?"  # type: ignore[union-attr]
        read = await client.read_resource("data://weather/cities")
        assert read.contents[0].uri == "data://weather/cities"
        assert read.contents[0].text == "Paris, Lima"  # type: ignore[union-attr]
        templated = await client.read_resource("data://weather/city/Lima")
        assert templated.contents[0].text == "the city Lima"  # type: ignore[union-attr]


async def test_unknown_names_are_refused_as_the_parents_own_would_be() -> None:
    parent = parent_of(weather())
    async with open_client(parent) as client:
        with pytest.raises(ProtocolError) as unknown:
            await client.call_tool("weather_nothing")
        assert unknown.value.code == -32602 and "Unknown tool" in unknown.value.message
        with pytest.raises(ProtocolError) as no_prefix:
            await client.call_tool("forecast", {"city": "x"})
        assert no_prefix.value.code == -32602
        with pytest.raises(ProtocolError) as missing:
            await client.read_resource("data://elsewhere/cities")
        assert missing.value.code == -32002


async def test_a_mounted_servers_list_change_reaches_a_client_of_the_parent() -> None:
    child = weather()
    parent = parent_of(child)
    heard = Heard()
    async with open_client(parent, on_notification=heard) as client:
        assert [t.name for t in await client.list_tools()] == ["hello", "weather_forecast"]

        @child.tool()
        def alerts() -> str:
            return "none"

        await heard.wait_for("notifications/tools/list_changed")
        names = [t.name for t in await client.list_tools()]
        assert names == ["hello", "weather_forecast", "weather_alerts"]
        assert (await client.call_tool("weather_alerts")).content[0].text == "none"  # type: ignore[union-attr]

        # Removed from the child: gone from the parent's list too.
        del child.tools["forecast"]
        child.notify_list_changed("tools")
        assert [t.name for t in await client.list_tools()] == ["hello", "weather_alerts"]


async def test_a_mounted_servers_list_change_reaches_an_http_client_of_the_parent() -> None:
    child = weather()
    parent = parent_of(child)
    heard = Heard()
    async with serving(parent) as served, open_client(served.url, on_notification=heard) as client:
        await client.list_tools()

        @child.prompt()
        def later() -> str:
            return "later"

        await heard.wait_for("notifications/prompts/list_changed")
        assert [p.name for p in await client.list_prompts()] == ["weather_ask", "weather_later"]


async def test_the_childs_handler_has_its_own_context_talking_to_the_parents_client() -> None:
    child = Server("child")
    seen: dict[str, Any] = {}

    @child.tool()
    async def survey(ctx: Context) -> str:
        seen["server"] = ctx.connection.server.info.name  # type: ignore[attr-defined]
        await ctx.report_progress(1, 2, "asking")
        await ctx.info("from the child")
        answer = await ctx.elicit(
            "Your name?", {"type": "object", "properties": {"n": {"type": "string"}}}
        )
        sampled = await ctx.sample("say hi", max_tokens=5)
        roots = await ctx.list_roots()
        return f"{answer.content} {sampled.content.text} {[r.uri for r in roots]}"  # type: ignore[union-attr]

    parent = parent_of(child, prefix="c")
    logs: list[Any] = []
    progress: list[Any] = []

    def on_sample(params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    async with open_client(
        parent,
        on_log=logs.append,
        on_elicit=lambda p: ElicitResult(action="accept", content={"n": "Ada"}),
        on_sample=on_sample,
        roots=[{"uri": "file:///work", "name": "w"}],  # type: ignore[list-item]
    ) as client:
        result = await client.call_tool(
            "c_survey", on_progress=lambda p, t, m: progress.append((p, t, m))
        )
    assert result.content[0].text == "{'n': 'Ada'} hi ['file:///work']"  # type: ignore[union-attr]
    assert seen["server"] == "child"
    assert progress == [(1, 2, "asking")]
    assert [m.data for m in logs] == ["from the child"]


async def test_a_cancel_from_the_parents_client_cancels_the_childs_handler() -> None:
    child = Server("child")
    started, cancelled = trio.Event(), trio.Event()

    @child.tool()
    async def wait() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        return "never"  # pragma: no cover

    parent = parent_of(child, prefix="c")
    async with open_client(parent) as client, trio.open_nursery() as nursery:
        request_id = client.new_request_id()

        async def call() -> None:
            with pytest.raises(RequestCancelled):
                await client.call_tool("c_wait", request_id=request_id)

        nursery.start_soon(call)
        with trio.fail_after(5):
            await started.wait()
            client.cancel(request_id, "changed my mind")
            await cancelled.wait()
        # The connection goes on.
        assert (await client.call_tool("hello")).content[0].text == "hello from the parent"  # type: ignore[union-attr]


async def test_resource_updates_of_the_child_reach_subscribers_of_the_parent() -> None:
    child = weather()
    parent = parent_of(child)
    heard = Heard()
    async with open_client(parent, on_notification=heard) as client:
        await client.subscribe_resource("data://weather/cities")
        child.notify_resource_updated("data://cities")
        child.notify_resource_updated("data://city/Lima")  # nobody subscribed
        params = await heard.wait_for("notifications/resources/updated")
        assert params == {"uri": "data://weather/cities"}
        await client.unsubscribe_resource("data://weather/cities")
        child.notify_resource_updated("data://cities")
        await client.list_tools()  # a barrier: the update, had it been sent, came before
        updates = [n for n in heard.notes if n[0] == "notifications/resources/updated"]
        assert len(updates) == 1


async def test_completions_are_forwarded_with_the_reference_renamed() -> None:
    parent = parent_of(weather())
    async with open_client(parent) as client:
        prompt = await client.complete(PromptReference(name="weather_ask"), "city", "P")
        assert prompt == Completion(values=["Paris", "Perth"], total=2, has_more=False)
        template = await client.complete(
            ResourceTemplateReference(uri="data://weather/city/{name}"), "name", "L"
        )
        assert template.values == ["Lima"]


async def test_lists_page_as_one_list_with_the_parents_page_size() -> None:
    child = Server("child", page_size=2)
    for n in range(5):
        child.tool(name=f"t{n}")(lambda: "x")
    parent = Server("parent", page_size=3)
    parent.tool(name="own")(lambda: "x")
    parent.mount(child, prefix="c")
    async with open_client(parent) as client:
        first = await client.list_tools_page()
        assert [t.name for t in first.tools] == ["own", "c_t0", "c_t1"]
        second = await client.list_tools_page(first.next_cursor)
        assert [t.name for t in second.tools] == ["c_t2", "c_t3", "c_t4"]
        assert second.next_cursor is None


async def test_mounts_nest_and_the_latest_mount_wins_a_conflict() -> None:
    inner = Server("inner")
    inner.tool(name="deep")(lambda: "deep")
    middle = Server("middle")
    middle.mount(inner, prefix="in")
    top = Server("top")
    top.mount(middle, prefix="mid")

    first, second = Server("first"), Server("second")
    first.tool(name="same")(lambda: "first")
    second.tool(name="same")(lambda: "second")
    top.mount(first)
    top.mount(second)
    async with open_client(top) as client:
        assert [t.name for t in await client.list_tools()] == ["mid_in_deep", "same", "same"]
        assert (await client.call_tool("mid_in_deep")).content[0].text == "deep"  # type: ignore[union-attr]
        assert (await client.call_tool("same")).content[0].text == "second"  # type: ignore[union-attr]


async def test_unmounting_removes_the_entries_and_tells_the_clients() -> None:
    child = weather()
    parent = parent_of(child)
    heard = Heard()
    async with open_client(parent, on_notification=heard) as client:
        parent.unmount("weather")
        await heard.wait_for("notifications/tools/list_changed")
        assert [t.name for t in await client.list_tools()] == ["hello"]
        with pytest.raises(ProtocolError):
            await client.call_tool("weather_forecast", {"city": "x"})
        # The child no longer relays to the parent; it may be mounted again.
        child.notify_list_changed("prompts")
        mount = parent.mount(child, namespace="w")
        assert [t.name for t in await client.list_tools()] == ["hello", "w_forecast"]
        parent.unmount(mount)
    with pytest.raises(ValueError, match="nothing is mounted"):
        parent.unmount("weather")


def test_a_server_cannot_be_mounted_in_itself_nor_under_a_bad_prefix() -> None:
    parent, child = Server("parent"), Server("child")
    with pytest.raises(ValueError, match="itself"):
        parent.mount(parent)
    child.mount(parent, prefix="p")
    with pytest.raises(ValueError, match="itself"):
        parent.mount(child)
    with pytest.raises(ValueError, match="prefix"):
        Server("x").mount(Server("y"), prefix="a/b")
    with pytest.raises(TypeError):
        Server("x").mount(Server("y"), prefix="a", namespace="b")


async def test_the_childs_scopes_are_checked_for_the_parents_principal() -> None:
    verifier = StaticTokenVerifier(
        {
            "reader": Principal(subject="r", client_id="r", scopes=frozenset({"read"})),
            "writer": Principal(subject="w", client_id="w", scopes=frozenset({"read", "write"})),
        }
    )
    child = Server("child", auth=Auth(verifier, resource="https://mcp.example/mcp"))

    @child.tool(scopes="write")
    def erase() -> str:
        return "erased"

    @child.tool()
    def look() -> str:
        return "looked"

    @child.resource("data://secret", scopes="write")
    def secret() -> str:
        return "secret"

    parent = Server("parent", auth=Auth(verifier, resource="https://mcp.example/mcp"))
    parent.mount(child, prefix="c")
    for token, expected in (("reader", ["c_look"]), ("writer", ["c_erase", "c_look"])):
        principal = await verifier.verify(token)
        async with open_client(ServedAs(parent, principal)) as client:
            assert sorted(t.name for t in await client.list_tools()) == expected
            if token == "reader":
                with pytest.raises(ProtocolError) as refused:
                    await client.call_tool("c_erase")
                assert "Forbidden" in refused.value.message
                # Nor may it hear of what it may not read.
                with pytest.raises(ProtocolError) as unsubscribable:
                    await client.subscribe_resource("data://c/secret")
                assert "Forbidden" in unsubscribable.value.message
            else:
                assert (await client.call_tool("c_erase")).content[0].text == "erased"  # type: ignore[union-attr]


async def test_a_modern_client_of_the_parent_reaches_the_child() -> None:
    child = Server("child")

    @child.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit(
            "ok?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        )
        return f"ok={answer.content}"

    parent = parent_of(child, prefix="c")
    async with open_client(
        parent,
        mode="modern",
        on_elicit=lambda p: ElicitResult(action="accept", content={"ok": True}),
    ) as client:
        assert [t.name for t in await client.list_tools()] == ["hello", "c_ask"]
        assert (await client.call_tool("c_ask")).content[0].text == "ok={'ok': True}"  # type: ignore[union-attr]


async def test_a_proxy_mounts_under_a_prefix_like_a_server() -> None:
    remote = weather()
    parent = Server("parent")
    parent.mount(proxy(remote), prefix="remote")
    async with open_client(parent) as client:
        assert [t.name for t in await client.list_tools()] == ["remote_forecast"]
        result = await client.call_tool("remote_forecast", {"city": "Perth"})
        assert result.content[0].text == "sunny in Perth"  # type: ignore[union-attr]
        read = await client.read_resource("data://remote/city/Perth")
        assert read.contents[0].text == "the city Perth"  # type: ignore[union-attr]


async def test_a_mounted_proxys_updates_and_list_changes_come_renamed() -> None:
    remote = weather()
    parent = Server("parent")
    parent.mount(proxy(remote), prefix="remote")
    heard = Heard()
    async with open_client(parent, on_notification=heard) as client:
        await client.subscribe_resource("data://remote/cities")
        remote.notify_resource_updated("data://cities")
        params = await heard.wait_for("notifications/resources/updated")
        assert params == {"uri": "data://remote/cities"}

        @remote.tool()
        def added() -> str:
            return "added"

        await heard.wait_for("notifications/tools/list_changed")
        assert [t.name for t in await client.list_tools()] == ["remote_forecast", "remote_added"]
