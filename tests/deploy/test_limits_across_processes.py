"""Fleet-wide limits and single-use requestState across real processes: two ``trio-mcp serve``
backends sharing one real redis-server (``--redis-url``) and the state keys, behind nginx, each
also reached directly so a test picks which worker gets which request.

- a single-use requestState used on one worker is refused on the other, and the tool's side
  effect ran once;
- ``--max-sessions-per-client`` holds across both workers (3 in all, not 3 each);
- ``--rate-limit`` holds across both workers (a bucket with a tiny refill rate: the counts are
  exact, nothing depends on timing).

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import trio

from .._http import VERSION, initialize_body
from ._fleet import ROOT, fleet
from ._services import redis_server
from ._streams import session_headers

LIMITS_SERVER = str(ROOT / "tests" / "servers" / "limits_server.py")
KEYS = {"TRIO_MCP_STATE_KEYS": (b"k" * 32).hex()}
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
YES = {"elicitation-1": {"action": "accept", "content": {"ok": True}}}
#: A hang guard for each test (redis, two backends and nginx started, a few requests).
GUARD = 90


async def call(
    client: httpx.AsyncClient, base: str, tool: str, rid: int, extra: dict[str, Any] | None = None
) -> httpx.Response:
    """A modern ``tools/call`` POST to ``base`` + ``/mcp``."""
    body = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": tool, "_meta": META, **(extra or {})},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    return await client.post(base + "/mcp", json=body, headers=headers)


async def test_a_single_use_state_used_on_one_worker_is_refused_on_the_other(
    tmp_path: Path,
) -> None:
    acts = tmp_path / "acts"
    acts.touch()
    with trio.fail_after(GUARD):
        async with (
            redis_server(tmp_path) as redis,
            fleet(
                tmp_path,
                2,
                server=LIMITS_SERVER,
                options=["--redis-url", redis.url],
                env={**KEYS, "LIMITS_ACTS_FILE": str(acts)},
                routing="any",
            ) as running,
            httpx.AsyncClient(timeout=10) as client,
        ):
            one, two = (backend.base for backend in running.backends)
            asked = (await call(client, one, "pay", 1)).json()
            state = asked["result"]["requestState"]
            retry = {"requestState": state, "inputResponses": YES}
            paid = await call(client, one, "pay", 2, retry)
            assert paid.status_code == 200 and paid.json()["result"]["content"][0]["text"] == "paid"
            # The same retry, replayed: on the other worker, on this one, through nginx.
            replays = [
                await call(client, two, "pay", 3, retry),
                await call(client, one, "pay", 4, retry),
                await call(client, running.base, "pay", 5, retry),
            ]
            tampered = dict(
                retry, requestState=state[:-4] + ("AAAA" if state[-4:] != "AAAA" else "BBBB")
            )
            forged = await call(client, two, "pay", 6, tampered)
    for replay in replays:
        assert replay.status_code == 400
        assert replay.json()["error"] == forged.json()["error"]
    assert forged.json()["error"]["code"] == -32602
    assert len(acts.read_text().splitlines()) == 1


async def test_the_session_budget_of_a_client_holds_across_two_workers(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with (
            redis_server(tmp_path) as redis,
            fleet(
                tmp_path,
                2,
                server=LIMITS_SERVER,
                options=["--redis-url", redis.url, "--max-sessions-per-client", "3"],
                env=KEYS,
            ) as running,
            httpx.AsyncClient(timeout=10) as client,
        ):
            statuses: list[int] = []
            opened_on: list[tuple[str, str]] = []
            for number in range(8):
                base = running.backends[number % 2].base
                opened = await client.post(
                    base + "/mcp", json=initialize_body(VERSION), headers=session_headers()
                )
                statuses.append(opened.status_code)
                if opened.status_code == 200:
                    opened_on.append((base, opened.headers["mcp-session-id"]))
                else:
                    assert "retry-after" in opened.headers
                    assert "mcp-session-id" not in opened.headers
            # Ending a session on one worker gives its place back to the client on the other.
            base, session = next(item for item in opened_on if item[0] == running.backends[0].base)
            ended = await client.delete(base + "/mcp", headers=session_headers(session))
            assert ended.status_code in (200, 204), ended.text
            elsewhere = running.backends[1].base + "/mcp"
            with trio.fail_after(10):  # the lease goes back in the background
                while True:
                    again = await client.post(
                        elsewhere, json=initialize_body(VERSION), headers=session_headers()
                    )
                    if again.status_code == 200:
                        break
                    assert again.status_code == 429
                    await trio.sleep(0.05)
            over = await client.post(
                elsewhere, json=initialize_body(VERSION), headers=session_headers()
            )
    assert statuses.count(200) == 3 and statuses.count(429) == 5, statuses
    assert over.status_code == 429


async def test_a_rate_limit_holds_across_two_workers(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with (
            redis_server(tmp_path) as redis,
            fleet(
                tmp_path,
                2,
                server=LIMITS_SERVER,
                # 4 at once, then one more every 1000 s: nothing comes back during the test.
                options=["--redis-url", redis.url, "--rate-limit", "0.001/4"],
                env=KEYS,
            ) as running,
            httpx.AsyncClient(timeout=10) as client,
        ):
            answers = [
                await call(client, running.backends[number % 2].base, "backend", number)
                for number in range(10)
            ]
            pids = {a.json()["result"]["structuredContent"]["pid"] for a in answers[:4]}
    assert [a.status_code for a in answers] == [200] * 4 + [429] * 6
    assert len(pids) == 2  # both workers served, from one bucket
    for refused in answers[4:]:
        assert int(refused.headers["retry-after"]) > 900
        error = refused.json()["error"]
        assert error["code"] == -32000 and error["data"]["retryAfterMs"] > 900_000
