"""``server_card`` and ``server_json``: what a Server says of itself before anyone connects,
checked against the published schemas (vendored in tests/data/schemas)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from trio_mcp import Server, ServerCardError, server_card, server_json
from trio_mcp._demo import demo_server
from trio_mcp.server import CARD_META_KEY, CARD_SCHEMA, SERVER_JSON_SCHEMA

from .._card_schemas import card_errors, server_json_errors
from ..servers.card_server import EXTENSION, ISSUER, NAME, RESOURCE, card_server

PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"
DEMO_NAME = "io.github.example/trio-mcp-demo"
URL = "https://mcp.example.com/mcp"


def offer(document: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = document["_meta"][CARD_META_KEY]
    return found


def test_the_vendored_schemas_refuse_what_they_should() -> None:
    # The negative control: a validator that accepted anything would pass every test below.
    minimal = {"$schema": CARD_SCHEMA, "name": "a.b/c", "version": "1.0.0", "description": "d"}
    assert card_errors(minimal) == []
    assert card_errors({k: v for k, v in minimal.items() if k != "$schema"})
    assert card_errors({**minimal, "name": "no-slash"})
    assert card_errors({**minimal, "remotes": [{"type": "websocket", "url": URL}]})
    document = {"name": "a.b/c", "version": "1.0.0", "description": "d"}
    assert server_json_errors(document) == []
    assert server_json_errors({**document, "description": "x" * 101})
    assert server_json_errors({**document, "remotes": [{"type": "sse", "url": "ftp://x"}]})


def test_the_demo_servers_card_and_server_json_validate() -> None:
    card = server_card(demo_server(), name=DEMO_NAME, url=URL)
    assert card_errors(card) == []
    assert card["$schema"] == CARD_SCHEMA
    assert (card["name"], card["version"]) == (DEMO_NAME, "0.1.0")
    # No description of its own: the first line of its instructions.
    assert card["description"].startswith("A demo server")
    assert card["remotes"][0]["type"] == "streamable-http"
    assert "2026-07-28" in card["remotes"][0]["supportedProtocolVersions"]
    listed = offer(card)
    assert [t["name"] for t in listed["tools"]] == ["echo", "add", "sleep"]
    assert [p["name"] for p in listed["prompts"]] == ["greeting"]
    assert [r["uri"] for r in listed["resources"]] == ["demo://readme", "ui://trio-mcp-demo/adder"]
    assert [t["uriTemplate"] for t in listed["resourceTemplates"]] == ["demo://greeting/{name}"]
    assert "authorization" not in listed

    document = server_json(demo_server(), name=DEMO_NAME, url=URL)
    assert server_json_errors(document) == []
    assert document["$schema"] == SERVER_JSON_SCHEMA
    assert "supportedProtocolVersions" not in document["remotes"][0]
    kept = document["_meta"][PUBLISHER][CARD_META_KEY]
    assert [t["name"] for t in kept["tools"]] == ["echo", "add", "sleep"]
    assert all("description" not in t for t in kept["tools"])


def test_a_protected_server_with_an_extension_and_a_mount_is_described_whole() -> None:
    card = server_card(card_server())
    assert card_errors(card) == []
    # The remote defaults to the resource, and says the Authorization header it needs.
    (remote,) = card["remotes"]
    assert remote["url"] == RESOURCE
    (header,) = remote["headers"]
    assert header["name"] == "Authorization"
    assert header["isRequired"] and header["isSecret"]
    assert header["value"] == "Bearer {access_token}"
    listed = offer(card)
    assert listed["extensions"] == {EXTENSION: {"regions": ["eu", "us"]}}
    auth = listed["authorization"]
    assert auth["authorizationServers"] == [ISSUER]
    assert auth["requiredScopes"] == ["weather:read"]
    assert auth["scopesSupported"] == ["weather:admin", "weather:read"]
    assert auth["resourceMetadata"] == (
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    )
    # Its own tools first, then the mounted server's under its prefix; scopes per entry.
    tools = {t["name"]: t for t in listed["tools"]}
    assert list(tools) == ["forecast", "purge", "maps_locate"]
    assert tools["purge"]["scopes"] == ["weather:admin"]
    assert "scopes" not in tools["forecast"]

    document = server_json(
        card_server(),
        packages=[
            {"registryType": "pypi", "identifier": "weather-mcp", "transport": {"type": "stdio"}}
        ],
    )
    assert server_json_errors(document) == []
    assert document["name"] == NAME
    assert document["packages"][0]["identifier"] == "weather-mcp"
    assert document["remotes"][0]["headers"][0]["name"] == "Authorization"
    kept = document["_meta"][PUBLISHER][CARD_META_KEY]
    assert kept["authorization"]["resourceMetadata"].endswith("/oauth-protected-resource/mcp")


def test_an_explicit_url_and_sse_url_are_the_remotes() -> None:
    card = server_card(card_server(), url="https://a.example/mcp", sse_url="https://a.example/sse")
    assert card_errors(card) == []
    assert [(r["type"], r["url"]) for r in card["remotes"]] == [
        ("streamable-http", "https://a.example/mcp"),
        ("sse", "https://a.example/sse"),
    ]
    with pytest.raises(ServerCardError, match="http"):
        server_card(card_server(), url="ws://a.example/mcp")


def test_what_cannot_be_described_is_refused_with_the_fix() -> None:
    with pytest.raises(ServerCardError, match="--name"):
        server_card(Server("plain", description="d"))
    with pytest.raises(ServerCardError, match="description"):
        server_card(Server("a.b/c"))
    with pytest.raises(ServerCardError, match="100"):
        server_card(Server("a.b/c"), description="x" * 101)
    for version in ("^1.2.3", ">=1", "1.x", "latest"):
        with pytest.raises(ServerCardError, match="version"):
            server_card(Server("a.b/c", version, description="d"))


def test_a_long_description_is_shortened_to_fit() -> None:
    card = server_card(Server("a.b/c", description="word " * 40))
    assert len(card["description"]) <= 100
    assert card["description"].endswith("…")
    assert card_errors(card) == []


def test_server_json_keeps_what_the_registry_keeps() -> None:
    server = Server("a.b/big", description="many tools")
    for n in range(200):
        server.tool(name=f"tool_number_{n}", description="x")(lambda: "x")
    document = server_json(server)
    assert server_json_errors(document) == []
    kept = document["_meta"][PUBLISHER]
    assert len(orjson.dumps(kept)) <= 4096
    assert kept[CARD_META_KEY]["tools"] == 200  # past the limit: counts alone
