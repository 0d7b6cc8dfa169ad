"""Tags and visibility, tool transforms, and prompts and resources as tools (docs/components.md)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio

from trio_mcp import (
    ArgTransform,
    Auth,
    Context,
    Principal,
    ProtocolError,
    RequestCancelled,
    Server,
    StaticTokenVerifier,
    open_client,
)

from .._http import serving
from ..auth.test_scopes import ServedAs
from .test_mount import Heard


def tagged() -> Server:
    server = Server("tagged")

    @server.tool(tags={"admin"})
    def wipe() -> str:
        return "wiped"

    @server.tool(tags={"public"})
    def hello() -> str:
        return "hello"

    @server.tool()
    def toggle_admin(on: bool, ctx: Context) -> str:
        if on:
            ctx.enable_components(tags={"admin"})
        else:
            ctx.disable_components(tags={"admin"})
        return "ok"

    @server.prompt(tags={"admin"})
    def secret() -> str:
        return "psst"

    @server.resource("data://admin", tags={"admin"})
    def admin_data() -> str:
        return "admin only"

    @server.resource("data://user/{name}", tags={"admin"})
    def user(name: str) -> str:
        return name

    return server


def names(tools: list[Any]) -> list[str]:
    return [t.name for t in tools]


def text(result: Any) -> str:
    return str(result.content[0].text)


# -- tags and visibility ---------------------------------------------------------------------------


async def test_a_globally_disabled_tool_is_unlisted_refused_and_announced() -> None:
    server = tagged()
    heard = Heard()
    async with open_client(server, on_notification=heard) as client:
        assert "wipe" in names(await client.list_tools())
        server.disable(tags={"admin"})
        await heard.wait_for("notifications/tools/list_changed")
        assert names(await client.list_tools()) == ["hello", "toggle_admin"]
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("wipe")
        with pytest.raises(ProtocolError) as unknown:
            await client.call_tool("nothing")
        # The same error as for a tool that does not exist, save the name.
        assert refused.value.code == unknown.value.code == -32602
        assert refused.value.message == "Unknown tool: wipe"
        # Prompts, resources and templates by the same tag.
        assert await client.list_prompts() == []
        assert await client.list_resources() == []
        assert await client.list_resource_templates() == []
        with pytest.raises(ProtocolError, match="Unknown prompt"):
            await client.get_prompt("secret")
        for uri in ("data://admin", "data://user/ann"):
            with pytest.raises(ProtocolError, match="Resource not found"):
                await client.read_resource(uri)
        # Enabled again by name: listed and callable, and the client is told.
        heard.notes.clear()
        server.enable(names={"wipe"})
        await heard.wait_for("notifications/tools/list_changed")
        assert text(await client.call_tool("wipe")) == "wiped"
        assert await client.list_prompts() == []  # still disabled by its tag


async def test_enable_only_keeps_just_the_selected_components() -> None:
    server = tagged()
    server.enable(tags={"public"}, components={"tool"}, only=True)
    async with open_client(server) as client:
        assert names(await client.list_tools()) == ["hello"]
        assert [p.name for p in await client.list_prompts()] == ["secret"]  # other kinds stay
    server.enable()  # everything again
    async with open_client(server) as client:
        assert len(await client.list_tools()) == 3


async def test_a_session_disables_a_tool_for_itself_alone_and_hears_of_it() -> None:
    server = tagged()
    heard = Heard()
    async with (
        open_client(server, on_notification=heard) as mine,
        open_client(server) as other,
    ):
        await mine.call_tool("toggle_admin", {"on": False})
        await heard.wait_for("notifications/tools/list_changed")
        assert names(await mine.list_tools()) == ["hello", "toggle_admin"]
        with pytest.raises(ProtocolError, match="Unknown tool: wipe"):
            await mine.call_tool("wipe")
        # Another session is untouched.
        assert "wipe" in names(await other.list_tools())
        assert text(await other.call_tool("wipe")) == "wiped"
        # A session's rule comes after the server's: it may enable what the server hides.
        server.disable(names={"hello"})
        await mine.call_tool("toggle_admin", {"on": True})
        assert names(await mine.list_tools()) == ["wipe", "toggle_admin"]
        assert names(await other.list_tools()) == ["wipe", "toggle_admin"]


async def test_a_session_filtered_list_is_never_cached_as_public() -> None:
    server = tagged()
    server.cache_hints = type(server.cache_hints).configure(60_000, "public")
    async with open_client(server) as client:
        listed = await client.request("tools/list", {})
        assert listed["cacheScope"] == "public"
        await client.call_tool("toggle_admin", {"on": False})
        listed = await client.request("tools/list", {})
        assert listed["cacheScope"] == "private"
        assert listed["ttlMs"] == 60_000


async def test_a_modern_request_cannot_change_a_session_it_does_not_have() -> None:
    server = tagged()
    async with open_client(server, mode="modern") as client:
        result = await client.call_tool("toggle_admin", {"on": False})
        assert result.is_error
        assert "wipe" in names(await client.list_tools())


async def test_a_modern_listener_over_http_hears_a_global_disable() -> None:
    server = tagged()
    async with serving(server) as served, open_client(served.url, mode="modern") as client:
        assert "wipe" in names(await client.list_tools())
        async with client.listen(tools=True, prompts=True) as subscription:
            with trio.fail_after(10):
                await subscription.wait_acknowledged()
            server.disable(names={"wipe"}, components={"tool"})
            with trio.fail_after(10):
                note = await subscription.__anext__()
            assert note.method == "notifications/tools/list_changed"
        assert "wipe" not in names(await client.list_tools())
        with pytest.raises(ProtocolError, match="Unknown tool: wipe"):
            await client.call_tool("wipe")


def test_tags_and_rules_are_checked_when_given() -> None:
    server = Server("s")
    with pytest.raises(TypeError, match="not one string"):
        server.tool(tags="admin")
    with pytest.raises(ValueError, match="components="):
        server.disable(components={"tools"})
    with pytest.raises(ValueError, match="only=True"):
        server.visibility.change(False, only=True)


def test_visibility_rules_are_bounded() -> None:
    server = Server("s")
    for _ in range(1000):  # the same selector replaces its earlier rule
        server.disable(names={"a"})
        server.enable(names={"a"})
    with pytest.raises(ValueError, match="at most"):
        for i in range(1000):
            server.disable(names={f"t{i}"})


# -- tool transforms -------------------------------------------------------------------------------


def searching(started: trio.Event | None = None, cancelled: trio.Event | None = None) -> Server:
    server = Server("search", auth=None)

    @server.tool(scopes="search")
    async def search(query: str, limit: int, api_key: str, ctx: Context) -> list[str]:
        """Search the index."""
        if api_key != "k-123":
            raise ValueError("bad key")
        if query == "wait":
            assert started is not None and cancelled is not None
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()
        await ctx.info(f"searching {query}")
        return [f"{query}-{i}" for i in range(limit)]

    return server


def derive(server: Server, **more: Any) -> None:
    server.transform_tool(
        "search",
        name="find",
        description="Find documents.",
        arguments={
            "query": ArgTransform(name="q", description="What to look for"),
            "limit": ArgTransform(default=2),
            "api_key": ArgTransform(hide=True, default="k-123"),
        },
        replace=True,
        **more,
    )


async def test_a_transformed_tool_is_listed_with_its_derived_schema() -> None:
    server = searching()
    derive(server)
    async with open_client(server) as client:
        (tool,) = await client.list_tools()
        assert tool.name == "find"
        assert tool.description == "Find documents."
        props = tool.input_schema["properties"]
        assert list(props) == ["q", "limit"]  # the hidden argument is not shown
        assert props["q"]["description"] == "What to look for"
        assert props["limit"]["default"] == 2
        assert tool.input_schema["required"] == ["q"]
        assert tool.output_schema == server.tools["find"].tool.output_schema
        assert tool.output_schema is not None and "result" in tool.output_schema["properties"]
        result = await client.call_tool("find", {"q": "x"})
        assert result.structured_content == {"result": ["x-0", "x-1"]}


async def test_a_transformed_tool_refuses_bad_arguments_with_its_own_names() -> None:
    server = searching()
    derive(server)
    async with open_client(server) as client:
        wrong = await client.call_tool("find", {"q": "x", "limit": "many"})
        assert wrong.is_error
        assert text(wrong) == (
            "Invalid arguments for tool find: argument 'limit': expected an integer, got a "
            "string ('many')"
        )
        missing = await client.call_tool("find", {})
        assert text(missing) == "Invalid arguments for tool find: missing required argument 'q'"
        # Neither the hidden argument nor the parent's name for a renamed one gets through.
        for sneaky in ({"q": "x", "api_key": "stolen"}, {"q": "x", "query": "y"}):
            refused = await client.call_tool("find", sneaky)
            assert refused.is_error
            assert "unexpected argument" in text(refused)
        # The parent, replaced, is no longer reachable by its own name.
        with pytest.raises(ProtocolError, match="Unknown tool: search"):
            await client.call_tool("search", {"query": "x", "limit": 1, "api_key": "k-123"})


async def test_a_transformed_tools_call_is_cancelled_with_its_request() -> None:
    started, cancelled = trio.Event(), trio.Event()
    server = searching(started, cancelled)
    derive(server)
    async with open_client(server) as client, trio.open_nursery() as nursery:
        request_id = client.new_request_id()

        async def call() -> None:
            with pytest.raises(RequestCancelled):
                await client.call_tool("find", {"q": "wait"}, request_id=request_id)

        nursery.start_soon(call)
        with trio.fail_after(5):
            await started.wait()
            client.cancel(request_id, "enough")
            await cancelled.wait()
        assert (await client.call_tool("find", {"q": "y", "limit": 1})).structured_content == {
            "result": ["y-0"]
        }


async def test_a_wrapper_runs_around_the_parent() -> None:
    server = searching()
    seen: list[str] = []

    async def wrap(call_parent: Any, ctx: Context, **kwargs: Any) -> Any:
        seen.append(f"before {kwargs['q']} {ctx.method}")
        found = await call_parent(**{**kwargs, "q": kwargs["q"].upper()})
        seen.append("after")
        return found[:1]

    derive(server, wrap=wrap)
    async with open_client(server) as client:
        result = await client.call_tool("find", {"q": "x", "limit": 3})
        assert result.structured_content == {"result": ["X-0"]}
        assert seen == ["before x tools/call", "after"]


async def test_a_transformed_tool_keeps_the_parents_scopes_and_adds_its_own() -> None:
    server = searching()
    server.auth = Auth(StaticTokenVerifier({}), resource="https://mcp.example")
    derive(server, scopes="extra")
    entry = server.tools["find"]
    assert entry.scopes == {"search", "extra"}
    principal = Principal(subject="u", client_id="c", scopes=frozenset({"search"}))
    async with open_client(ServedAs(server, principal)) as client:
        assert await client.list_tools() == []
        with pytest.raises(ProtocolError, match="Forbidden"):
            await client.call_tool("find", {"q": "x"})


def test_transforms_are_checked_when_made() -> None:
    server = searching()
    with pytest.raises(ValueError, match="is required"):
        server.transform_tool("search", name="s2", arguments={"api_key": ArgTransform(hide=True)})
    with pytest.raises(ValueError, match="no argument"):
        server.transform_tool("search", name="s3", arguments={"nope": ArgTransform(name="x")})
    with pytest.raises(ValueError, match="already registered"):
        server.transform_tool("search")


# -- prompts and resources as tools ----------------------------------------------------------------


async def test_prompts_and_resources_are_reachable_as_tools() -> None:
    server = tagged()
    server.disable(names={"wipe", "hello", "toggle_admin"})
    server.prompts_as_tools()
    server.resources_as_tools()

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    async with open_client(server) as client:
        tools = names(await client.list_tools())
        assert tools == ["list_prompts", "get_prompt", "list_resources", "read_resource"]
        listed = await client.call_tool("list_prompts")
        assert [p["name"] for p in orjson.loads(text(listed))] == ["secret", "greet"]
        got = await client.call_tool("get_prompt", {"name": "greet", "arguments": {"name": "Ann"}})
        assert orjson.loads(text(got))["messages"][0]["content"]["text"] == "Hello, Ann!"
        read = await client.call_tool("read_resource", {"uri": "data://user/bob"})
        assert text(read) == "bob"
        listing = orjson.loads(text(await client.call_tool("list_resources")))
        assert [r["uri"] for r in listing["resources"]] == ["data://admin"]
        assert [t["uriTemplate"] for t in listing["resourceTemplates"]] == ["data://user/{name}"]
        # What the methods refuse, the tools refuse as a tool error the model reads; hidden
        # components stay hidden.
        server.disable(tags={"admin"})
        missing = await client.call_tool("read_resource", {"uri": "data://admin"})
        assert missing.is_error and text(missing) == "Resource not found"
        unknown = await client.call_tool("get_prompt", {"name": "secret"})
        assert unknown.is_error and text(unknown) == "Unknown prompt: secret"
        assert [p["name"] for p in orjson.loads(text(await client.call_tool("list_prompts")))] == [
            "greet"
        ]
