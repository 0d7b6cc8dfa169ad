"""The era matrix: our client in each mode against our server in each configuration, over
each transport; the same calls (a tool, a question to the user, a cancel) work in every cell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import Command, ElicitResult, open_client

from ._http import serving
from .servers.era_server import era_server

SERVERS = Path(__file__).resolve().parent / "servers"

MODES = ["legacy", "auto", "modern"]
CONFIGS = ["default", "pinned"]
TRANSPORTS = ["memory", "stdio", "http", "ws"]


def target(transport: str, config: str) -> Any:
    pinned = config == "pinned"
    if transport == "memory":
        return era_server(pinned)
    argv = [sys.executable, str(SERVERS / "era_server.py"), *(["pinned"] if pinned else [])]
    return Command(argv, stderr="discard")


async def answer(params: Any) -> ElicitResult:
    return ElicitResult(action="accept", content={"answer": "42"})


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("mode", MODES)
async def test_every_cell(mode: str, config: str, transport: str) -> None:
    if transport in ("http", "ws"):
        async with serving(era_server(config == "pinned")) as served:
            ws = served.base.replace("http://", "ws://", 1) + "/ws"
            await check_cell(ws if transport == "ws" else served.url, mode, config)
    else:
        await check_cell(target(transport, config), mode, config)


async def check_cell(where: Any, mode: str, config: str) -> None:
    modern = mode in ("auto", "modern")
    with trio.fail_after(60):
        async with open_client(where, mode=mode, on_elicit=answer) as client:
            assert client.modern is modern
            # The client offers 2025-11-25, which a pinned server echoes (a pin only answers
            # offers the server does not speak); the modern era has no negotiation at all.
            expected = "2026-07-28" if modern else "2025-11-25"
            assert client.protocol_version == expected
            echoed = await client.call_tool("echo", {"text": "hi"})
            assert echoed.content[0].text == f"hi ({'modern' if modern else 'handshake'})"  # type: ignore[union-attr]
            asked = await client.call_tool("ask")
            assert asked.content[0].text == "answer: 42"  # type: ignore[union-attr]
            with trio.CancelScope() as scope:
                await client.call_tool("slow", on_progress=lambda *_: scope.cancel())
            assert scope.cancelled_caught
            again = await client.call_tool("echo", {"text": "after"})
            assert again.content[0].text.startswith("after")  # type: ignore[union-attr]
