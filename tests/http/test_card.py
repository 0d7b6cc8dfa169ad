"""The Server Card over HTTP: ``GET /mcp/server-card`` on a real hypercorn, admitted like every
other request (Host, Origin, authorization), as ``application/mcp-server-card+json``."""

from __future__ import annotations

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp.http import HostRules, HttpOptions
from trio_mcp.server import CARD_MEDIA_TYPE, CARD_META_KEY, server_card

from .._card_schemas import card_errors
from .._http import serving
from ..servers.card_server import EXTENSION, RESOURCE, card_server

CARD = "/mcp/server-card"


def open_server() -> Server:
    server = Server("com.example/open", "1.2.0", description="An open server.")

    @server.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    return server


async def test_the_card_is_served_beside_the_endpoint_with_its_media_type() -> None:
    async with serving(open_server()) as served:
        response = await served.client.get(served.base + CARD)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == CARD_MEDIA_TYPE
        card = response.json()
        assert card_errors(card) == []
        assert card["name"] == "com.example/open"
        # The remotes are where this request reached the app.
        remotes = {r["type"]: r["url"] for r in card["remotes"]}
        assert remotes == {"streamable-http": served.url, "sse": served.base + "/sse"}
        listed = card["_meta"][CARD_META_KEY]
        assert listed["websocket"]["url"] == served.base.replace("http", "ws", 1) + "/ws"
        assert [t["name"] for t in listed["tools"]] == ["ping"]
        # The same document the library builds for those URLs.
        assert card == server_card(
            served.app.server,  # type: ignore[arg-type]
            url=served.url,
            sse_url=served.base + "/sse",
            websocket_url=listed["websocket"]["url"],
        )


async def test_the_card_revalidates_with_its_etag() -> None:
    async with serving(open_server()) as served:
        first = await served.client.get(served.base + CARD)
        assert first.headers["cache-control"] == "public, max-age=3600"
        etag = first.headers["etag"]
        again = await served.client.get(served.base + CARD, headers={"if-none-match": etag})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        head = await served.client.head(served.base + CARD)
        assert head.status_code == 200
        assert head.headers["content-type"] == CARD_MEDIA_TYPE
        refused = await served.client.post(served.base + CARD, content=b"{}")
        assert refused.status_code == 405


async def test_a_foreign_host_or_origin_is_refused_as_everywhere() -> None:
    async with serving(open_server()) as served:
        host = await served.client.get(served.base + CARD, headers={"host": "evil.example"})
        assert host.status_code == 403
        assert "Host 'evil.example' refused" in host.json()["error"]["message"]
        origin = await served.client.get(
            served.base + CARD, headers={"origin": "http://evil.example"}
        )
        assert origin.status_code == 403
        assert "Origin 'http://evil.example' refused" in origin.json()["error"]["message"]
        local = await served.client.get(
            served.base + CARD, headers={"origin": "http://localhost:5173"}
        )
        assert local.status_code == 200
    options = HttpOptions(hosts=HostRules(allowed_hosts=["mcp.example.com"]))
    async with serving(open_server(), options) as served:
        named = await served.client.get(served.base + CARD, headers={"host": "mcp.example.com"})
        assert named.status_code == 200
        assert named.json()["remotes"][0]["url"] == "http://mcp.example.com/mcp"
        other = await served.client.get(served.base + CARD)  # 127.0.0.1 is not listed
        assert other.status_code == 403


async def test_a_protected_servers_card_needs_a_token_with_the_base_scopes() -> None:
    async with serving(card_server()) as served:
        anonymous = await served.client.get(served.base + CARD)
        assert anonymous.status_code == 401
        challenge = anonymous.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert "resource_metadata=" in challenge
        unknown = await served.client.get(
            served.base + CARD, headers={"authorization": "Bearer not-a-token"}
        )
        assert unknown.status_code == 401
        lacking = await served.client.get(
            served.base + CARD, headers={"authorization": "Bearer nobody-token-5678"}
        )
        assert lacking.status_code == 403
        assert 'error="insufficient_scope"' in lacking.headers["www-authenticate"]
        reader = await served.client.get(
            served.base + CARD, headers={"authorization": "Bearer reader-token-1234"}
        )
        assert reader.status_code == 200, reader.text
        assert reader.headers["content-type"] == CARD_MEDIA_TYPE
        assert reader.headers["cache-control"] == "private, max-age=3600"
        card = reader.json()
        assert card_errors(card) == []
        # The public URL is the resource's, whatever address the request reached.
        assert card["remotes"][0]["url"] == RESOURCE
        assert card["remotes"][0]["headers"][0]["name"] == "Authorization"
        listed = card["_meta"][CARD_META_KEY]
        assert EXTENSION in listed["extensions"]
        assert listed["authorization"]["requiredScopes"] == ["weather:read"]


async def test_a_server_without_a_registry_name_has_no_card() -> None:
    async with serving(demo_server()) as served:
        response = await served.client.get(served.base + CARD)
        assert response.status_code == 404
        assert "is not a registry name" in response.json()["error"]["message"]
        # The MCP endpoint itself is untouched.
        assert (await served.client.get(served.base + "/mcp/other")).status_code == 404
