"""The bad-input catalogue (``_frames.CATALOGUE``): every hostile frame against the demo server
on a real stdio child and behind a real hypercorn (Streamable HTTP, WebSocket, HTTP+SSE), each
with the answer class it must get.

Checked for every frame: the answer class (JSON-RPC error code, HTTP status), no crash, no hang
(every read is bounded), no HTTP 500, no internal text (traceback, exception class name, source
path) in any reply or in the server's stderr or log, and the connection still answers a ping.
"""

from __future__ import annotations

import logging

import pytest

from trio_mcp._demo import demo_server

from .._http import serving
from .._raw_stdio import raw_child
from ._drive import (
    Channel,
    check_records,
    exchange,
    judge,
    ping_http,
    post_hostile,
    sse_session,
    stdio_channel,
    websocket_session,
)
from ._frames import CATALOGUE, Hostile, check_log


async def run_catalogue(channel: Channel, frames: list[Hostile]) -> None:
    """Every frame through one session, each judged; every wrong answer named at the end."""
    wrong: list[str] = []
    for n, hostile in enumerate(frames):
        answered = not hostile.answer.silent
        answers = await exchange(channel, hostile.frame, f"after-{n}", answered=answered)
        try:
            judge(answers, hostile.answer, f"{channel.name} {hostile.name}")
        except AssertionError as exc:
            wrong.append(str(exc))
    assert not wrong, "\n".join(wrong)


def utf8(frame: bytes) -> bool:
    """Whether a frame can go as a WebSocket text message."""
    try:
        frame.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


async def test_the_catalogue_over_stdio() -> None:
    async with raw_child() as child:
        await child.initialize()
        await run_catalogue(stdio_channel(child), CATALOGUE)
        await child.close_input()
        assert await child.line() is None
    assert child.process.returncode == 0
    check_log(child.stderr.decode(errors="replace"), "stdio stderr")


async def test_the_catalogue_over_http(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=120) as served:
        session = await served.initialize()
        wrong: list[str] = []
        for n, hostile in enumerate(CATALOGUE):
            if hostile.stdio_only:
                continue
            context = f"http {hostile.name}"
            status, answers = await post_hostile(served, session, hostile.frame, context)
            try:
                assert status in hostile.answer.statuses, f"{context}: HTTP {status}, {answers}"
                if status == 200:
                    judge(answers, hostile.answer, context)
            except AssertionError as exc:
                wrong.append(str(exc))
            if n % 10 == 0:
                await ping_http(served, session, f"after-{n}")
        await ping_http(served, session, "last")
        assert not wrong, "\n".join(wrong)
    check_records(caplog, "http log")


async def test_the_catalogue_over_websocket(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=120) as served, websocket_session(served) as ws:
        await run_catalogue(ws, [hostile for hostile in CATALOGUE if utf8(hostile.frame)])
    check_records(caplog, "websocket log")


async def test_the_catalogue_over_http_sse(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=120) as served, sse_session(served) as sse:
        await run_catalogue(sse, CATALOGUE)
    check_records(caplog, "http+sse log")
