"""The client half of MCP Apps: the negotiated extension, a tool's UI found, fetched and checked
(with a typed error naming the reason), on every transport and in both eras."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from trio_mcp import BlobResourceContents, Command, HttpTarget, Server, open_client
from trio_mcp._demo import demo_server
from trio_mcp._demo_app import ADDER_HTML, ADDER_URI
from trio_mcp.apps import (
    APP_MIME_TYPE,
    AppMeta,
    AppNotFound,
    Apps,
    ClientApps,
    Csp,
    InvalidApp,
    Permissions,
    model_tools,
    read_app,
    server_apps,
    tool_ui,
)
from trio_mcp.protocol._types import Tool

from .._http import serving
from ._servers import VIEW, VIEW_HTML, weather_server

DEMO = [sys.executable, "-m", "trio_mcp", "demo"]
ADDER_META = AppMeta(csp=Csp(), permissions=Permissions(clipboard_write=True), prefers_border=True)


async def check_demo(where: Any, mode: str) -> None:
    """What a host does with the demo: the extension negotiated, ``add``'s UI found, fetched
    and checked, and ``add`` called for its text."""
    with trio.fail_after(60):
        async with open_client(where, mode=mode, extensions=[ClientApps()]) as client:
            assert client.modern is (mode == "modern")
            assert server_apps(client) == {}
            tools = {t.name: t for t in await client.list_tools()}
            ui = tool_ui(tools["add"])
            assert ui is not None and ui.resource_uri == ADDER_URI and ui.for_model
            view = await read_app(client, tools["add"])
            assert view.uri == ADDER_URI and view.html == ADDER_HTML
            assert view.meta == ADDER_META
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.content[0].text == "5"  # type: ignore[union-attr]
            assert result.structured_content == {"result": 5}


@pytest.mark.parametrize("mode", ["legacy", "modern"])
@pytest.mark.parametrize("transport", ["memory", "stdio", "http", "ws"])
async def test_the_demos_app_is_read_on_every_transport_in_both_eras(
    transport: str, mode: str
) -> None:
    if transport == "memory":
        await check_demo(demo_server(), mode)
    elif transport == "stdio":
        await check_demo(Command(DEMO, stderr="discard"), mode)
    else:
        async with serving(demo_server()) as served:
            ws = served.base.replace("http://", "ws://", 1) + "/ws"
            await check_demo(ws if transport == "ws" else served.url, mode)


async def test_the_demos_app_is_read_over_http_and_sse() -> None:
    async with serving(demo_server()) as served:
        await check_demo(HttpTarget(served.base + "/sse", transport="sse"), "legacy")


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_a_client_without_the_extension_still_gets_a_working_tool(mode: str) -> None:
    async with open_client(demo_server(), mode=mode) as client:
        tools = {t.name for t in await client.list_tools()}
        assert "add" in tools
        result = await client.call_tool("add", {"a": 0.5, "b": 0.25})
        assert not result.is_error
        assert result.content[0].text == "0.75"  # type: ignore[union-attr]


async def test_a_server_without_apps_declares_nothing_and_its_tools_have_no_ui() -> None:
    server = Server("plain")

    @server.tool()
    async def hello() -> str:
        return "hi"

    async with open_client(server, extensions=[ClientApps()]) as client:
        assert server_apps(client) is None
        (tool,) = await client.list_tools()
        assert tool_ui(tool) is None
        with pytest.raises(AppNotFound, match="'hello' links no UI resource") as caught:
            await read_app(client, tool)
        assert caught.value.uri is None


async def test_a_host_hands_its_model_only_the_tools_visible_to_it() -> None:
    async with open_client(weather_server(), extensions=[ClientApps()]) as client:
        tools = await client.list_tools()
        assert sorted(t.name for t in tools) == ["forecast", "plain", "refresh", "summary"]
        assert sorted(t.name for t in model_tools(tools)) == ["forecast", "plain", "summary"]
        view = await read_app(client, VIEW)
        assert view.html == VIEW_HTML and view.meta.domain == "weather.apps.example"


async def test_a_ui_uri_the_server_does_not_have_is_app_not_found_in_both_eras() -> None:
    for mode in ("legacy", "modern"):
        async with open_client(weather_server(), mode=mode) as client:
            with pytest.raises(AppNotFound, match="no UI resource 'ui://weather/gone'") as caught:
                await read_app(client, "ui://weather/gone")
            assert caught.value.uri == "ui://weather/gone"


def broken_server() -> Server:
    """A server that hand-writes UI resources, each breaking one rule."""
    server = Server("broken")

    @server.resource("ui://b/plain-html", mime_type="text/html")
    async def plain_html() -> str:
        return "<html></html>"

    @server.resource("ui://b/no-html", mime_type=APP_MIME_TYPE)
    async def no_html() -> str:
        return "just text"

    @server.resource("ui://b/bad-meta", mime_type=APP_MIME_TYPE, meta={"ui": {"csp": []}})
    async def bad_meta() -> str:
        return "<!DOCTYPE html><p>x"

    @server.resource("ui://b/bad-blob", mime_type=APP_MIME_TYPE)
    async def bad_blob() -> BlobResourceContents:
        return BlobResourceContents(uri="ui://b/bad-blob", blob="//4=", mime_type=APP_MIME_TYPE)

    @server.resource("ui://b/listed-meta", mime_type=APP_MIME_TYPE, meta={"ui": {"domain": "d"}})
    async def listed_meta() -> bytes:
        return b"<html><body>from the listing</body></html>"

    @server.resource("demo://not-ui", mime_type=APP_MIME_TYPE)
    async def not_ui() -> str:
        return "<html></html>"

    @server.tool(meta={"ui": {"resourceUri": 7}})
    async def bad_link() -> str:
        return "x"

    return server


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("ui://b/plain-html", "its content is 'text/html', not 'text/html;profile=mcp-app'"),
        ("ui://b/no-html", "not an HTML document"),
        ("ui://b/bad-meta", "_meta.ui.csp must be an object"),
        ("ui://b/bad-blob", "not base64 of a UTF-8 document"),
        ("demo://not-ui", "is not a UI resource URI"),
    ],
)
async def test_a_ui_resource_that_breaks_the_rules_is_refused_naming_why(
    uri: str, reason: str
) -> None:
    async with open_client(broken_server()) as client:
        with pytest.raises(InvalidApp) as caught:
            await read_app(client, uri)
        assert reason in caught.value.reason
        assert caught.value.uri == uri


async def test_metadata_missing_from_the_content_is_taken_from_the_listing() -> None:
    async with open_client(broken_server()) as client:
        view = await read_app(client, "ui://b/listed-meta")
        assert view.meta == AppMeta(domain="d")
        assert view.html == "<html><body>from the listing</body></html>"


async def test_a_malformed_link_on_a_tool_is_invalid_app() -> None:
    async with open_client(broken_server()) as client:
        tool = next(t for t in await client.list_tools() if t.name == "bad_link")
        with pytest.raises(InvalidApp, match="resourceUri must be a string"):
            tool_ui(tool)
        with pytest.raises(InvalidApp):
            model_tools([tool])


def test_client_apps_declares_the_apps_mime_type_everywhere() -> None:
    apps = ClientApps()
    assert apps.declares("initialize") and apps.declares("tools/list")
    assert apps.capability() == {"mimeTypes": [APP_MIME_TYPE]}
    assert ClientApps(["text/html;profile=mcp-app", "x/y"]).capability()["mimeTypes"][1] == "x/y"
    with pytest.raises(ValueError, match="at least one MIME type"):
        ClientApps([])


async def test_a_tool_and_its_ui_uri_give_the_same_view() -> None:
    server = Server("same")
    apps = Apps(server)
    apps.html("ui://same/v", "<html>v</html>", name="v")

    @apps.tool(ui="ui://same/v")
    async def show() -> str:
        return "shown"

    async with open_client(server) as client:
        (tool,) = await client.list_tools()
        assert isinstance(tool, Tool)
        assert await read_app(client, tool) == await read_app(client, "ui://same/v")
