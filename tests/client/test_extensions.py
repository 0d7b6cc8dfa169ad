"""The client's extension seam (``trio_mcp.client.ClientExtension``): an extension given to
``open_client`` is declared in ``initialize`` and on the modern requests it names."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp import Server, open_client
from trio_mcp.client import ClientExtension
from trio_mcp.protocol import to_wire
from trio_mcp.protocol._jsonrpc import JSONObject
from trio_mcp.server import Context


class Flag(ClientExtension):
    name = "example.com/flag"

    def declares(self, method: str) -> bool:
        return method in ("initialize", "tools/call")

    def capability(self) -> JSONObject:
        return {"on": True}


def seeing_server() -> Server:
    server = Server("seeing")

    @server.tool()
    async def declared(ctx: Context) -> dict[str, Any]:
        return to_wire(ctx.client_capabilities).get("extensions") or {}

    return server


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_an_extension_given_to_open_client_is_declared_in_both_eras(mode: str) -> None:
    async with open_client(seeing_server(), mode=mode, extensions=[Flag()]) as client:
        result = await client.call_tool("declared")
        assert result.structured_content is not None
        assert result.structured_content["example.com/flag"] == {"on": True}
    async with open_client(seeing_server(), mode=mode) as client:
        result = await client.call_tool("declared")
        assert "example.com/flag" not in (result.structured_content or {})


async def test_an_extension_is_given_once_and_with_a_name() -> None:
    with pytest.raises(ValueError, match="already added"):
        async with open_client(seeing_server(), extensions=[Flag(), Flag()]):
            pass
    with pytest.raises(ValueError, match="needs a name"):
        async with open_client(seeing_server(), extensions=[ClientExtension()]):
            pass
