"""The handshake era's lifecycle: seed-behaviors (e) 1-6 and 13-15, on the wire."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp import Icon, Server, open_client

from ..wire import wire_to


def rich_server(**options: Any) -> Server:
    server = Server(
        "rich",
        "2.0.0",
        title="Rich",
        description="A server with every field",
        website_url="https://example.invalid",
        icons=[Icon(src="data:image/png;base64,AA==")],
        instructions="Use the tools.",
        **options,
    )

    @server.tool()
    async def hello() -> str:
        return "hi"

    return server


def init_params(version: Any) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }


async def test_a_modern_version_is_counter_offered_and_results_stay_legacy() -> None:
    async with wire_to(rich_server(), initialize=False) as peer:
        response = await peer.request(1, "initialize", init_params("2026-07-28"))
        assert response["result"]["protocolVersion"] == "2025-11-25"
        await peer.notify("notifications/initialized")
        tools = await peer.request(2, "tools/list")
        assert "resultType" not in tools["result"]
        assert "ttlMs" not in tools["result"]
        call = await peer.request(3, "tools/call", {"name": "hello"})
        assert "resultType" not in call["result"]


@pytest.mark.parametrize("asked", ["1999-01-01", "2026-07-28", "not-a-version"])
async def test_unknown_versions_get_the_pin_or_the_latest(asked: str) -> None:
    async with wire_to(rich_server(), initialize=False) as peer:
        assert (await peer.request(1, "initialize", init_params(asked)))["result"][
            "protocolVersion"
        ] == "2025-11-25"
    async with wire_to(rich_server(protocol_version="2025-06-18"), initialize=False) as peer:
        assert (await peer.request(1, "initialize", init_params(asked)))["result"][
            "protocolVersion"
        ] == "2025-06-18"


async def test_a_handshake_version_is_echoed_and_fields_follow_it() -> None:
    expected = {
        "2025-11-25": (
            {"name", "version", "title", "websiteUrl", "description", "icons"},
            True,
        ),
        "2025-06-18": ({"name", "version", "title", "websiteUrl"}, True),
        "2025-03-26": ({"name", "version"}, True),
        "2024-11-05": ({"name", "version"}, False),
    }
    for version, (info_keys, has_instructions) in expected.items():
        async with wire_to(rich_server(), initialize=False) as peer:
            result = (await peer.request(1, "initialize", init_params(version)))["result"]
            assert result["protocolVersion"] == version
            assert set(result["serverInfo"]) == info_keys, version
            assert ("instructions" in result) is has_instructions, version
            assert result["capabilities"] == {"logging": {}, "tools": {"listChanged": True}}


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        (None, "protocolVersion"),
        ({"capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}, "protocolVersion"),
        ({"protocolVersion": "2025-11-25", "clientInfo": {"name": "c", "version": "1"}}, "capab"),
        ({"protocolVersion": "2025-11-25", "capabilities": {}}, "clientInfo"),
        (
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}},
            "clientInfo",
        ),
    ],
)
async def test_bad_initialize_params_are_invalid_params(
    params: dict[str, Any] | None, fragment: str
) -> None:
    async with wire_to(rich_server(), initialize=False) as peer:
        response = await peer.request(1, "initialize", params)
        assert response["error"]["code"] == -32602
        assert fragment in response["error"]["message"]
        # The failed attempt did not initialize the session.
        assert "result" in await peer.request(2, "initialize", init_params("2025-11-25"))


async def test_a_second_initialize_is_an_invalid_request() -> None:
    async with wire_to(rich_server()) as peer:
        response = await peer.request(9, "initialize", init_params("2025-11-25"))
        assert response["id"] == 9
        assert response["error"]["code"] == -32600
        assert response["error"]["message"] == "Invalid Request: Server already initialized"


def test_pinning_rules() -> None:
    assert Server("s").protocol_version == "2025-11-25"
    assert Server("s", protocol_version="2024-11-05").protocol_version == "2024-11-05"
    with pytest.raises(ValueError, match="is a modern protocol version and cannot be pinned"):
        Server("s", protocol_version="2026-07-28")
    with pytest.raises(ValueError, match="2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"):
        Server("s", protocol_version="2025-01-01")


async def test_the_client_sees_the_negotiated_version_and_filtered_info() -> None:
    async with open_client(rich_server(), protocol_version="2024-11-05") as client:
        assert client.protocol_version == "2024-11-05"
        assert client.instructions is None
        assert client.server_info.title is None
        assert client.server_info.name == "rich"
    async with open_client(rich_server()) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.instructions == "Use the tools."
        assert client.server_info.title == "Rich"
        assert client.server_info.website_url == "https://example.invalid"
