"""The mutation fuzzer: valid MCP requests (``_frames.VALID``) mutated at random, as bytes (bit
flips, hostile bytes, runs deleted, duplicated or cut, hostile values spliced in) and as
structure (fields replaced with every JSON type, made huge, nested, dropped, batched), sent to
the demo server on a real stdio child and behind a real hypercorn (Streamable HTTP, WebSocket,
HTTP+SSE).

Seeded: the same ``TRIO_MCP_FUZZ_SEED`` sends the same frames, and a failure names the frame.
``TRIO_MCP_FUZZ_EXAMPLES`` (default 400 per transport, a few seconds) sets how many; raise it
for a long run. Checked for every frame: a well-formed answer or none, never -32603, never
internal text in a reply or in the server's stderr or log, never an HTTP 500, and the
connection still answers a ping (bounded: a hang fails).
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
    ping_http,
    post_hostile,
    sse_session,
    stdio_channel,
    websocket_session,
)
from ._frames import FUZZ_EXAMPLES, SEED, check_log, mutations
from .test_catalogue import utf8


async def send_mutations(channel: Channel, *, text_only: bool = False) -> None:
    """The seed's mutated frames through one session, each followed by a ping that must be
    answered; ``text_only``: those that are UTF-8 (a WebSocket's text messages)."""
    for n, frame in enumerate(mutations(FUZZ_EXAMPLES, SEED)):
        if text_only and not utf8(frame):
            continue
        await exchange(channel, frame, f"ping-{n}", answered=False)


async def test_mutated_requests_over_stdio() -> None:
    async with raw_child() as child:
        await child.initialize()
        # A frame holding a newline is several frames: each is judged by the same checks.
        await send_mutations(stdio_channel(child))
        await child.close_input()
        assert await child.line() is None
    assert child.process.returncode == 0
    check_log(child.stderr.decode(errors="replace"), f"stdio stderr (seed {SEED})")


async def test_mutated_requests_over_http(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def quick(message: dict[str, object]) -> bool:
        # Over HTTP a request holds its POST until it ends: no sleeping tool.
        params = message.get("params")
        return not (isinstance(params, dict) and params.get("name") == "sleep")

    async with serving(demo_server(), guard=120) as served:
        session = await served.initialize()
        for n, frame in enumerate(mutations(FUZZ_EXAMPLES, SEED, keep=quick)):
            context = f"http frame {n} (seed {SEED}) {frame[:200]!r}"
            status, _ = await post_hostile(served, session, frame, context)
            assert status in (200, 202, 400, 404, 409, 413, 415), (context, status)
            if n % 10 == 0:
                await ping_http(served, session, f"ping-{n}")
        await ping_http(served, session, "last")
    check_records(caplog, f"http log (seed {SEED})")


async def test_mutated_requests_over_websocket(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=120) as served, websocket_session(served) as ws:
        await send_mutations(ws, text_only=True)
    check_records(caplog, f"websocket log (seed {SEED})")


async def test_mutated_requests_over_http_sse(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=120) as served, sse_session(served) as sse:
        await send_mutations(sse)
    check_records(caplog, f"http+sse log (seed {SEED})")
