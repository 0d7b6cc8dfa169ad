"""Handshake-era calls/s through nginx in front of three trio_mcp processes, routed both ways.

    python benchmarks/sessions_anywhere.py '{"rounds": 3, "sessions": 12, "calls": 100}'

- ``map``: session ids tagged with their node (``--node-id``), and nginx's ``map`` sends each
  session's requests to that node (``deploy/nginx.conf`` as it is);
- ``any``: ``--any-worker`` backends sharing a real Redis (session records, replicas, the
  relay), and nginx plain round robin: every request may land on any backend.

For each round, both ways one after the other (so that their ratio is measured on the same
machine state): ``sessions`` handshake sessions each make ``calls`` ``tools/call echo`` in a
loop, all sessions at once, over keep-alive connections; every answer is checked. Prints one
JSON object: calls/s per way and round, and the ratio any/map of each round.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for the harness

from tests.deploy._fleet import FLEET_SERVER, fleet  # noqa: E402 - the checkout's own harness
from tests.deploy._services import redis_server  # noqa: E402

VERSION = "2025-06-18"
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": VERSION,
}


async def one_session(client: httpx.AsyncClient, url: str, calls: int, number: int) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    opened = await client.post(url, content=orjson.dumps(init), headers=HEADERS)
    opened.raise_for_status()
    headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    (await client.post(url, content=orjson.dumps(note), headers=headers)).raise_for_status()
    for call in range(1, calls + 1):
        text = f"s{number}c{call}"
        body = {
            "jsonrpc": "2.0",
            "id": call,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        }
        response = await client.post(url, content=orjson.dumps(body), headers=headers)
        if response.status_code != 200 or f'"text":"{text}"' not in response.text:
            raise RuntimeError(f"call {text} failed: {response.status_code} {response.text[:200]}")
    # Ended as a client that is done ends it: the sessions of every round share one Redis,
    # whose fleet-wide count of a client's sessions would otherwise reach its cap (429).
    (await client.delete(url, headers=headers)).raise_for_status()


async def load(url: str, sessions: int, calls: int) -> float:
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=sessions)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for number in range(sessions):
                nursery.start_soon(one_session, client, url, calls, number)
        elapsed = time.perf_counter() - start
    return sessions * calls / elapsed


async def measure(spec: dict[str, Any]) -> dict[str, Any]:
    rounds, sessions, calls = int(spec["rounds"]), int(spec["sessions"]), int(spec["calls"])
    out: dict[str, Any] = {"map": [], "any": [], "ratio": []}
    with tempfile.TemporaryDirectory(prefix="trio-mcp-anywhere-") as scratch:
        base = Path(scratch)
        async with redis_server(base) as redis:
            for number in range(rounds):
                figures = {}
                for way in ("map", "any"):
                    directory = base / f"{way}{number}"
                    directory.mkdir()
                    options = ["--redis-url", redis.url, "--any-worker"] if way == "any" else []
                    async with fleet(
                        directory, 3, server=str(FLEET_SERVER), options=options, routing=way
                    ) as running:
                        await load(running.url, sessions, 5)  # warm up
                        figures[way] = await load(running.url, sessions, calls)
                    out[way].append(round(figures[way], 1))
                out["ratio"].append(round(figures["any"] / figures["map"], 3))
    return out


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0]) if argv else {"rounds": 3, "sessions": 12, "calls": 100}
    sys.stdout.write(json.dumps(trio.run(measure, spec)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
