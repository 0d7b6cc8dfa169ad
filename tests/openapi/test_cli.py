"""``trio-mcp serve --openapi FILE --base-url URL``, driven over stdio by our client."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from trio_mcp import Command, TextContent, open_client

from ..test_cli import child_env
from ._api import DOCUMENT, serving_api

GUARD = 30


async def test_serve_openapi_lists_and_calls_the_apis_operations(tmp_path: Path) -> None:
    document = tmp_path / "items.json"
    document.write_text(json.dumps(DOCUMENT))
    async with serving_api() as api:
        line = [sys.executable, "-m", "trio_mcp", "serve", "--openapi", str(document)]
        command = Command([*line, "--base-url", api.url], env=child_env())
        with trio.fail_after(GUARD):
            async with open_client(command) as client:
                tools = {t.name for t in await client.list_tools()}
                result = await client.call_tool("getItem", {"item_id": 7})
                missing = await client.call_tool("getItem", {"item_id": 3})
    assert "getItem" in tools and "createItem" in tools
    assert result.structured_content == {"id": 7, "name": "seven"}
    assert missing.is_error
    block = missing.content[0]
    assert isinstance(block, TextContent) and "HTTP 404" in block.text
