"""A proxy in front of the official TypeScript ``server-everything`` (a stdio child), served
over Streamable HTTP (a real hypercorn on loopback) to the official Python client: calls,
progress, and a cancel that crosses both hops (the Python client cancels; the upstream
server-everything reads ``notifications/cancelled`` for the call on its stdin, which the
recording wrapper between the proxy and it logs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import Command, proxy

from .._http import serving
from ._http_support import client_driver
from ._support import CLIENT_TO_SERVER, HANG_GUARD, ROOT, node, recorded, text_of

EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"
LONG = "trigger-long-running-operation"


def frames(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def upstream_call_id(log: Path, tool: str) -> Any:
    for entry in frames(log):
        message = entry.get("message")
        if (
            entry.get("direction") == CLIENT_TO_SERVER
            and isinstance(message, dict)
            and message.get("method") == "tools/call"
            and message["params"]["name"] == tool
        ):
            return message["id"]
    return None


def upstream_cancels(log: Path) -> list[Any]:
    return [
        entry["message"]["params"].get("requestId")
        for entry in frames(log)
        if entry.get("direction") == CLIENT_TO_SERVER
        and isinstance(entry.get("message"), dict)
        and entry["message"].get("method") == "notifications/cancelled"
    ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_cancels_through_a_proxy_of_server_everything(
    tmp_path: Path, mode: str
) -> None:
    node()
    log = tmp_path / "upstream.jsonl"
    front = proxy(Command(recorded(log, [str(EVERYTHING)]), stderr="discard"), name="front")
    with trio.fail_after(HANG_GUARD):
        async with serving(front, guard=HANG_GUARD) as served:
            command = [sys.executable, "-m", "tests.interop.py_proxy_client", mode, served.url]
            async with client_driver(command, tmp_path / "client.err") as out:
                assert {"echo", "get-sum", LONG} <= set(out["tools"])
                assert text_of(out["echo"]) == "Echo: through the proxy"
                # Progress crossed both hops, then the Python client's cancel did.
                assert out["progress_before_cancel"], out
                assert out["progress_before_cancel"][0][1] == 30
                assert out["cancelled"] is True
                assert text_of(out["echo_after_cancel"]) == "Echo: still here"
                call_id = upstream_call_id(log, LONG)
                assert call_id is not None
                # Written by another process: read until it is there (the hang guard bounds it).
                while call_id not in upstream_cancels(log):  # noqa: ASYNC110
                    await trio.sleep(0.05)
    if mode == "auto":
        # The Python client probed server/discover and spoke the modern era to the proxy,
        # which spoke the handshake era (all server-everything knows) upstream.
        assert out["protocol_version"] == "2026-07-28"
    else:
        assert out["protocol_version"] == "2025-11-25"
