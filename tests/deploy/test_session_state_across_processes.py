"""Session state across real processes: three ``trio-mcp serve --redis-url --any-worker``
backends on a real redis-server, behind nginx with plain round robin. What one backend stored
for a handshake session, every other reads; modern requests with the same state handle share
it whichever backend they reach. Times are hang guards, never performance assertions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson

from .._http import call_body
from .test_sessions_anywhere import anywhere_on_redis, open_session, result_of

MODERN = "2026-07-28"


def answer_of(messages: list[Any]) -> dict[str, Any]:
    result = messages[-1]["result"]
    assert not result.get("isError"), result
    parsed: dict[str, Any] = orjson.loads(result["content"][0]["text"])
    return parsed


async def modern_call(
    client: httpx.AsyncClient, url: str, tool: str, handle: str, **arguments: str
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "trio-mcp/state": handle,
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    response = await client.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return answer_of([response.json()])


async def test_a_handshake_session_state_is_read_by_every_backend(tmp_path: Path) -> None:
    async with (
        anywhere_on_redis(tmp_path) as (running, _),
        httpx.AsyncClient(timeout=60) as client,
    ):
        session = await open_session(client, running.url)
        other = await open_session(client, running.url)
        keep = call_body(1, "keep", {"name": "cart", "value": "tea"})
        await result_of(client, running.url, session, keep)
        nodes = set()
        for rid in range(2, 8):
            body = call_body(rid, "kept", {"name": "cart"})
            answer = answer_of(await result_of(client, running.url, session, body))
            assert answer["value"] == "tea"
            nodes.add(answer["node"])
        assert len(nodes) > 1  # round robin: more than one backend read it
        body = call_body(9, "kept", {"name": "cart"})
        assert answer_of(await result_of(client, running.url, other, body))["value"] is None


async def test_modern_requests_with_one_handle_share_state_on_two_backends(
    tmp_path: Path,
) -> None:
    async with anywhere_on_redis(tmp_path) as (running, _), httpx.AsyncClient(timeout=60) as client:
        first, second = (b.base + "/mcp" for b in running.backends[:2])
        stored = await modern_call(client, first, "keep", "h-42", name="k", value="v")
        assert stored["node"] == running.backends[0].node_id
        read = await modern_call(client, second, "kept", "h-42", name="k")
        assert (read["node"], read["value"]) == (running.backends[1].node_id, "v")
        other = await modern_call(client, second, "kept", "h-43", name="k")
        assert other["value"] is None
