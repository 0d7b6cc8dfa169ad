"""MCP Apps against the official package (``@modelcontextprotocol/ext-apps``): its host-side
helpers, schemas and AppBridge consume what our demo declares and render its app; our client
reads an app from a server built with its server helpers."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from trio_mcp import Command, open_client
from trio_mcp._demo import demo_server
from trio_mcp._demo_app import ADDER_URI
from trio_mcp.apps import AppMeta, ClientApps, Csp, Permissions, model_tools, read_app, tool_ui

from .._http import serving
from ._support import DEMO, HANG_GUARD, HERE, node, run_json

HOST = HERE / "ext_apps_host.mjs"
SERVER = HERE / "ext_apps_server.mjs"


def check_host_run(out: dict[str, Any]) -> None:
    assert out["serverUi"] == {}  # the extension, as ext-apps' getUiCapability reads it
    tools = {t["name"]: t for t in out["tools"]}
    assert tools["add"] == {
        "name": "add",
        "resourceUri": ADDER_URI,
        "appOnly": False,
        "modelOnly": False,
        "metaIssues": [],  # McpUiToolMetaSchema accepts our tool metadata
    }
    assert tools["echo"]["resourceUri"] is None
    assert out["listed"] == {"mimeType": "text/html;profile=mcp-app", "metaIssues": []}
    read = out["read"]
    assert read["count"] == 1 and read["isAppMimeType"] and read["isHtml"]
    assert read["metaIssues"] == []  # McpUiResourceMetaSchema accepts our resource metadata
    assert read["meta"] == {"csp": {}, "permissions": {"clipboardWrite": {}}, "prefersBorder": True}
    assert read["allow"] == "clipboard-write"  # buildAllowAttribute of our permissions
    # The app itself, run behind AppBridge: it initialized, took the host's theme, showed the
    # result the host sent, and its own tools/call reached our server through the bridge.
    assert out["app"]["info"] == {"name": "trio-mcp-demo-adder", "version": "0.1.0"}
    assert out["themed"] == {"colorScheme": "dark", "font": "serif"}
    assert out["callText"] == "5" and out["shown"] == "5"
    assert out["shownAfterAppCall"] == "42"
    assert out["sizes"] and out["teardown"] == {}


async def test_the_ext_apps_host_renders_the_demos_app_over_stdio() -> None:
    out = await run_json([node(), str(HOST), *DEMO])
    assert out["protocolVersion"] == "2025-11-25"
    check_host_run(out)


async def test_the_ext_apps_host_renders_the_demos_app_over_streamable_http() -> None:
    async with serving(demo_server()) as served:
        out = await run_json([node(), str(HOST), "--url", served.url])
    check_host_run(out)


async def test_our_client_reads_an_app_from_a_server_built_with_ext_apps() -> None:
    with trio.fail_after(HANG_GUARD):
        async with open_client(
            Command([node(), str(SERVER)], stderr="discard"), extensions=[ClientApps()]
        ) as client:
            tools = {t.name: t for t in await client.list_tools()}
            time_ui, tick_ui = tool_ui(tools["time"]), tool_ui(tools["tick"])
            assert time_ui is not None and tick_ui is not None
            assert time_ui.resource_uri == tick_ui.resource_uri == "ui://ext-apps-interop/clock"
            assert time_ui.for_model and not tick_ui.for_model and tick_ui.for_app
            assert [t.name for t in model_tools(tools.values())] == ["time"]
            view = await read_app(client, tools["time"])
            assert view.html.startswith("<!doctype html>")
            assert view.meta == AppMeta(
                csp=Csp(
                    connect_domains=["https://time.example"],
                    resource_domains=["https://*.cdn.example"],
                ),
                permissions=Permissions(geolocation=True),
                domain="clock.apps.example",
                prefers_border=False,
            )


@pytest.mark.parametrize("apps", [False, True])
async def test_a_tool_of_an_ext_apps_server_works_for_our_client_with_or_without_apps(
    apps: bool,
) -> None:
    with trio.fail_after(HANG_GUARD):
        async with open_client(
            Command([node(), str(SERVER)], stderr="discard"),
            extensions=[ClientApps()] if apps else [],
        ) as client:
            result = await client.call_tool("time", {"zone": "UTC"})
            assert result.content[0].text == "12:00 in UTC"  # type: ignore[union-attr]
