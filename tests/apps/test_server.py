"""The server half of MCP Apps: the extension announced in both eras, UI resources served with
their MIME type and metadata, tools linked to them, app-only tools kept from hosts without apps,
and every misdeclaration refused with a clear error."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import trio

from trio_mcp import Server, TextResourceContents, open_client
from trio_mcp.apps import APP_MIME_TYPE, UI_EXTENSION, Apps, ClientApps, Csp
from trio_mcp.server import Context

from ..wire import wire_to
from ._servers import VIEW, VIEW_HTML, VIEW_META, weather_server

MODERN = "2026-07-28"
RENDERS_APPS = {"extensions": {UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}}


def modern(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps or {},
        }
    }


async def test_the_extension_is_announced_in_initialize_and_in_discover() -> None:
    async with wire_to(weather_server(), initialize=False) as peer:
        answer = await peer.initialize()
        assert answer["result"]["capabilities"]["extensions"] == {UI_EXTENSION: {}}
    async with wire_to(weather_server(), initialize=False) as peer:
        found = await peer.request(1, "server/discover", modern())
        assert found["result"]["capabilities"]["extensions"][UI_EXTENSION] == {}


async def test_a_ui_resource_is_listed_and_read_with_the_apps_mime_type_and_its_metadata() -> None:
    async with wire_to(weather_server()) as peer:
        listed = await peer.request(1, "resources/list")
        (entry,) = listed["result"]["resources"]
        assert entry == {
            "uri": VIEW,
            "name": "dashboard",
            "description": "The forecast, drawn",
            "mimeType": APP_MIME_TYPE,
            "_meta": {"ui": VIEW_META},
        }
        read = await peer.request(2, "resources/read", {"uri": VIEW})
        (item,) = read["result"]["contents"]
        # The content item carries the metadata too: a host reads the item's first.
        assert item == {
            "uri": VIEW,
            "mimeType": APP_MIME_TYPE,
            "text": VIEW_HTML,
            "_meta": {"ui": VIEW_META},
        }


async def test_a_linked_tool_names_its_ui_and_visibility_in_both_forms() -> None:
    async with wire_to(weather_server(), initialize=False) as peer:
        await peer.initialize(capabilities=RENDERS_APPS)
        listed = await peer.request(1, "tools/list")
        tools = {t["name"]: t for t in listed["result"]["tools"]}
        assert tools["forecast"]["_meta"] == {
            "ui": {"resourceUri": VIEW, "visibility": ["model", "app"]},
            "ui/resourceUri": VIEW,  # the older flat key, for hosts that read only that
        }
        assert tools["refresh"]["_meta"]["ui"]["visibility"] == ["app"]
        assert tools["summary"]["_meta"] == {"ui": {"visibility": ["model"]}}
        assert "_meta" not in tools["plain"]


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_an_app_only_tool_is_listed_only_to_a_host_that_renders_apps(era: str) -> None:
    everything = ["forecast", "plain", "refresh", "summary"]
    for caps, expected in (({}, ["forecast", "plain", "summary"]), (RENDERS_APPS, everything)):
        async with wire_to(weather_server(), initialize=False) as peer:
            if era == "handshake":
                await peer.initialize(capabilities=caps)
                listed = await peer.request(1, "tools/list")
            else:
                listed = await peer.request(1, "tools/list", modern(caps))
            assert sorted(t["name"] for t in listed["result"]["tools"]) == expected
    # A declaration without the Apps MIME type is not a host that renders apps.
    other = {"extensions": {UI_EXTENSION: {"mimeTypes": ["text/uri-list"]}}}
    async with wire_to(weather_server(), initialize=False) as peer:
        listed = await peer.request(1, "tools/list", modern(other))
        assert "refresh" not in [t["name"] for t in listed["result"]["tools"]]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_a_linked_tool_works_as_text_for_a_client_without_apps(mode: str) -> None:
    async with open_client(weather_server(), mode=mode) as client:
        result = await client.call_tool("forecast", {"city": "Oslo"})
        assert not result.is_error
        assert result.content[0].text == "Oslo: sunny, 21 C"  # type: ignore[union-attr]
    async with open_client(weather_server(), mode=mode, extensions=[ClientApps()]) as client:
        result = await client.call_tool("forecast", {"city": "Oslo"})
        assert result.content[0].text == "Oslo: sunny, 21 C (drawn by the app)"  # type: ignore[union-attr]
        # The app's own tool answers the app, with text beside the structured content.
        fresh = await client.call_tool("refresh", {"city": "Oslo"})
        assert fresh.structured_content == {"temperature": 21}
        assert fresh.content[0].text == '{"temperature":21}'  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ["handshake", "modern"])
async def test_an_unregistered_ui_uri_is_resource_not_found_naming_it(era: str) -> None:
    async with wire_to(weather_server(), initialize=era == "handshake") as peer:
        params = {"uri": "ui://weather/nothing"}
        if era == "modern":
            params |= modern()
        answer = await peer.request(1, "resources/read", params)
        assert answer["error"]["message"] == "Resource not found"
        assert answer["error"]["code"] == (-32602 if era == "modern" else -32002)
        assert answer["error"]["data"] == {"uri": "ui://weather/nothing"}


async def test_a_tool_linked_to_a_missing_ui_stops_the_server_before_it_serves() -> None:
    server = Server("broken")
    apps = Apps(server)

    @apps.tool(ui="ui://broken/missing")
    async def show() -> str:
        return "x"

    with pytest.raises(ValueError, match=r"'show' is linked to 'ui://broken/missing'"):
        apps.check()
    with pytest.raises(ValueError, match="not a UI resource of this server"), trio.fail_after(10):
        async with open_client(server):
            pass


async def test_a_hand_written_app_only_link_is_kept_from_hosts_without_apps_too() -> None:
    server = Server("by-hand")
    Apps(server)

    @server.tool(meta={"ui": {"visibility": ["app"]}})
    async def helper() -> str:
        return "h"

    async with wire_to(server) as peer:
        listed = await peer.request(1, "tools/list")
        assert listed["result"]["tools"] == []


async def test_a_removed_tools_link_is_not_checked() -> None:
    server = Server("removed")
    apps = Apps(server)

    @apps.tool(ui="ui://removed/missing")
    async def gone() -> str:
        return "x"

    server.remove_tool("gone")
    apps.check()


def test_misdeclarations_are_refused_when_registered() -> None:
    server = Server("x")
    apps = Apps(server)
    with pytest.raises(ValueError, match="not a UI resource URI"):
        apps.resource("https://x/app.html")
    with pytest.raises(ValueError, match="not a template"):
        apps.resource("ui://x/{id}")
    with pytest.raises(ValueError, match="not a UI resource URI"):
        apps.tool(ui="demo://x")
    with pytest.raises(ValueError, match="non-empty list"):
        apps.tool(ui="ui://x/v", visibility=[])
    with pytest.raises(ValueError, match="not in meta"):
        apps.tool(ui="ui://x/v", meta={"ui": {"resourceUri": "ui://x/v"}})
    with pytest.raises(ValueError, match="not in meta"):
        apps.html("ui://x/v", "<html></html>", name="v", meta={"ui/resourceUri": "ui://x/v"})
    with pytest.raises(ValueError, match="is not an origin"):
        apps.html("ui://x/v", "<html></html>", name="v", csp=Csp(connect_domains=["a b"]))
    with pytest.raises(ValueError, match="document is empty"):
        apps.html("ui://x/v", "  ", name="v")
    with pytest.raises(RuntimeError, match="add Apps to a server first"):
        Apps().tool(ui="ui://x/v")
    with pytest.raises(TypeError, match="added to a trio_mcp Server"):
        Apps().attach(object())  # type: ignore[arg-type]


async def test_apps_given_to_the_server_constructor_work_as_apps_of_server() -> None:
    apps = Apps()
    server = Server("given", extensions=[apps])
    apps.html("ui://given/v", "<!doctype html><p>hi", name="v")

    @apps.tool(ui="ui://given/v")
    def sync_tool() -> str:
        return "ok"

    async with open_client(server, extensions=[ClientApps()]) as client:
        assert [t.name for t in await client.list_tools()] == ["sync_tool"]
        read = await client.read_resource("ui://given/v")
        assert read.contents[0].mime_type == APP_MIME_TYPE


async def test_a_ui_resource_function_may_be_sync_take_a_context_or_return_bytes() -> None:
    server = Server("forms")
    apps = Apps(server)
    seen: list[str] = []

    @apps.resource("ui://forms/sync")
    def sync_view() -> str:
        return "<html>sync</html>"

    @apps.resource("ui://forms/ctx")
    async def ctx_view(ctx: Context) -> str:
        seen.append(ctx.request_id.__class__.__name__)
        return "<html>ctx</html>"

    @apps.resource("ui://forms/bytes")
    async def bytes_view() -> bytes:
        return "<html>bytes é</html>".encode()

    @apps.resource("ui://forms/given")
    async def given_view() -> TextResourceContents:
        return TextResourceContents(uri="ui://forms/given", text="<html>g</html>", meta={"x": 1})

    @apps.resource("ui://forms/wrong")
    async def wrong_view() -> TextResourceContents:
        return TextResourceContents(uri="ui://forms/wrong", text="x", mime_type="text/plain")

    async with wire_to(server) as peer:
        sync = await peer.request(1, "resources/read", {"uri": "ui://forms/sync"})
        assert sync["result"]["contents"][0]["text"] == "<html>sync</html>"
        ctx = await peer.request(2, "resources/read", {"uri": "ui://forms/ctx"})
        assert ctx["result"]["contents"][0]["text"] == "<html>ctx</html>" and seen
        raw = await peer.request(3, "resources/read", {"uri": "ui://forms/bytes"})
        (item,) = raw["result"]["contents"]
        assert item["mimeType"] == APP_MIME_TYPE
        assert base64.b64decode(item["blob"]).decode() == "<html>bytes é</html>"
        given = await peer.request(4, "resources/read", {"uri": "ui://forms/given"})
        assert given["result"]["contents"][0]["mimeType"] == APP_MIME_TYPE
        assert given["result"]["contents"][0]["_meta"] == {"ui": {}, "x": 1}
        wrong = await peer.request(5, "resources/read", {"uri": "ui://forms/wrong"})
        assert wrong["error"]["code"] == -32603  # the server's own mistake, logged
