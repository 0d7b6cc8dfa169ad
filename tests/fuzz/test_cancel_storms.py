"""Cancel storms: many requests, and cancels racing them at random points, against the demo
server on a real stdio child and behind a real hypercorn (Streamable HTTP, WebSocket, HTTP+SSE).

Checked: 0 wrong and 0 lost responses (every request not cancelled gets its own answer exactly
once; a cancelled one gets at most one, and one that cannot finish by itself gets none), and no
in-flight record left afterwards (over stdio, a WebSocket or an HTTP+SSE session every id is free
for reuse; over Streamable HTTP the session's engine is idle and holds no stream).
``TRIO_MCP_STORM_REQUESTS`` (default 600 on each message transport, a third of it on
Streamable HTTP) and ``TRIO_MCP_FUZZ_SEED`` choose the storm.
"""

from __future__ import annotations

import functools
import logging
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

from trio_mcp._demo import demo_server

from .._http import Served, cancel_body, serving
from .._raw_stdio import raw_child
from ._drive import (
    Channel,
    check_records,
    http_messages,
    ping_http,
    sse_session,
    stdio_channel,
    websocket_session,
)
from ._frames import SEED, STORM_REQUESTS, call, check_log, check_reply, dumps, request

#: A hang guard for a whole storm, never a performance assertion: a long run (a large
#: ``TRIO_MCP_STORM_REQUESTS``) gets longer (over HTTP+SSE a request is a POST of its own).
GUARD = 120 + STORM_REQUESTS / 50


@attrs.frozen
class Planned:
    rid: int
    arguments: dict[str, Any]
    #: The text of its answer, or None for a request that cannot finish by itself.
    text: str | None
    cancelled: bool

    @property
    def name(self) -> str:
        return "echo" if "text" in self.arguments else "sleep"


def plan(count: int, rng: random.Random) -> list[Planned]:
    """Instant echoes, short sleeps that a cancel can catch at any point, and sleeps that only
    a cancel ends (always cancelled)."""
    planned = []
    for rid in range(count):
        kind = rng.random()
        if kind < 0.4:
            text = f"echo {rid}"
            planned.append(Planned(rid, {"text": text}, text, rng.random() < 0.5))
        elif kind < 0.8:
            seconds = rng.choice([0, 0.001, 0.005, 0.02])
            planned.append(
                Planned(rid, {"seconds": seconds}, f"slept {seconds:g}s", rng.random() < 0.5)
            )
        else:
            planned.append(Planned(rid, {"seconds": 3600}, None, True))
    return planned


def check_storm(planned: list[Planned], answers: dict[Any, list[dict[str, Any]]], how: str) -> None:
    wrong: list[str] = []
    for p in planned:
        got = answers.pop(p.rid, [])
        texts = []
        for answer in got:
            result = answer.get("result")
            if result is None or result.get("isError"):
                wrong.append(f"{how} {p}: not a result: {answer}")
                continue
            texts.append(result["content"][0]["text"])
        if p.text is None and got:
            wrong.append(f"{how} {p}: answered although only its cancel could end it: {got}")
        elif not p.cancelled and len(got) != 1:
            wrong.append(f"{how} {p}: {len(got)} answers (lost or doubled): {got}")
        elif len(got) > 1:
            wrong.append(f"{how} {p}: answered {len(got)} times: {got}")
        elif any(text != p.text for text in texts):
            wrong.append(f"{how} {p}: a wrong answer: {texts}")
    for rid, got in answers.items():
        wrong.append(f"{how}: answers for an id never sent: {rid!r}: {got}")
    assert not wrong, f"seed {SEED}:\n" + "\n".join(wrong[:20])


# -- message channels: stdio, WebSocket, HTTP+SSE ----------------------------------------------


def wire_order(planned: list[Planned], rng: random.Random) -> list[bytes]:
    """Each request, and its cancel 0 to 8 frames after it."""
    slots: list[tuple[float, bytes]] = []
    for n, p in enumerate(planned):
        slots.append((n, dumps(call(p.rid, p.name, p.arguments))))
        if p.cancelled:
            slots.append((n + rng.randint(0, 8) + 0.5, dumps(cancel_body(p.rid, "storm"))))
    return [frame for _, frame in sorted(slots, key=lambda slot: slot[0])]


async def storm_over(
    channel: Channel, send_chunk: Callable[[list[bytes]], Awaitable[None]], seed: int
) -> None:
    """A storm through one session of a message channel, its frames handed over in chunks of 1
    to 16 (``send_chunk``: one write on a byte stream), so that reads and writes interleave;
    then every id is reused."""
    rng = random.Random(seed)
    planned = plan(STORM_REQUESTS, rng)
    frames = wire_order(planned, rng)
    answers: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    expected = {p.rid for p in planned if not p.cancelled}
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                while True:
                    raw = await channel.reply()
                    assert raw is not None, f"{channel.name}: the server closed its side"
                    for message in check_reply(raw, f"{channel.name} storm"):
                        if message.get("id") == "after":
                            return
                        if "method" not in message:
                            answers[message.get("id")].append(message)

            nursery.start_soon(read)
            at = 0
            while at < len(frames):
                step = rng.randint(1, 16)
                await send_chunk(frames[at : at + step])
                at += step
                await trio.lowlevel.checkpoint()
            # Bounded, so that a lost answer is reported below rather than hanging here.
            with trio.move_on_after(10):
                while not expected <= answers.keys():  # noqa: ASYNC110 - no event to wait on
                    await trio.sleep(0.01)
            # Whatever a lost cancel would still let through is decided before this ping.
            await channel.send(dumps(request("after", "ping")))
        check_storm(planned, answers, channel.name)
        await reuse_every_id(channel, [p.rid for p in planned])


#: How many reuses go out before their answers are read: an HTTP+SSE client that stops reading
#: its stream for long has its session ended (the server's memory is bounded), and a long storm
#: has thousands of ids.
REUSE_WINDOW = 200


async def reuse_every_id(channel: Channel, ids: list[int]) -> None:
    """Each id once more, pipelined: a request still registered under one refuses it for as long
    as it stays, so a leaked record fails here (bounded); one still settling frees it."""
    pending = set(ids)
    for _ in range(40):
        order = sorted(pending)
        for at in range(0, len(order), REUSE_WINDOW):
            window = order[at : at + REUSE_WINDOW]
            for rid in window:
                again = dumps(call(rid, "echo", {"text": f"again {rid}"}))
                assert await channel.send(again) == []
            for _ in window:
                (message,) = check_reply(await channel.reply() or b"null", "reuse")
                if "result" in message:
                    assert message["result"]["content"][0]["text"] == f"again {message['id']}"
                    pending.discard(message["id"])
                else:
                    assert "already in flight" in message["error"]["data"], message
        if not pending:
            return
        await trio.sleep(0.05)
    raise AssertionError(
        f"seed {SEED}: {channel.name}: ids still in flight after the storm: {sorted(pending)}"
    )


async def one_by_one(channel: Channel, frames: list[bytes]) -> None:
    """A chunk on a message transport: each frame its own message (or POST), in order."""
    for frame in frames:
        assert await channel.send(frame) == []


async def test_a_cancel_storm_over_stdio() -> None:
    async with raw_child() as child:
        await child.initialize()

        async def write(frames: list[bytes]) -> None:
            await child.send_raw(b"".join(frame + b"\n" for frame in frames))

        await storm_over(stdio_channel(child), write, SEED)
        await child.close_input()
        assert await child.line() is None
    check_log(child.stderr.decode(errors="replace"), "stdio stderr")


async def test_a_cancel_storm_over_websocket(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=GUARD) as served, websocket_session(served) as ws:
        await storm_over(ws, functools.partial(one_by_one, ws), SEED)
    check_records(caplog, "websocket log")


async def test_a_cancel_storm_over_http_sse(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(demo_server(), guard=GUARD) as served, sse_session(served) as sse:
        await storm_over(sse, functools.partial(one_by_one, sse), SEED)
    check_records(caplog, "http+sse log")


# -- Streamable HTTP ---------------------------------------------------------------------------


async def storm_one(
    served: Served,
    session: str,
    p: Planned,
    rng: random.Random,
    answers: dict[Any, list[dict[str, Any]]],
) -> None:
    body = call(p.rid, p.name, p.arguments)
    async with served.stream_post(body, session) as reader:
        assert reader.response.status_code == 200, reader.response.status_code
        if p.cancelled:
            # At a random point: at once, after a yield, or some milliseconds into the call.
            delay = rng.choice([None, 0.0, 0.001, 0.003, 0.01])
            if delay is not None:
                await trio.sleep(delay)
            response = await served.post(cancel_body(p.rid, "storm"), session)
            assert response.status_code == 202, response.status_code
        for event in await reader.rest():
            if event.data:
                for message in check_reply(event.data, f"http storm {p}"):
                    if "method" not in message:
                        answers[message.get("id")].append(message)


async def test_a_cancel_storm_over_http(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rng = random.Random(SEED)
    planned = plan(max(1, STORM_REQUESTS // 3), rng)
    answers: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    async with serving(demo_server(), guard=GUARD) as served:
        session = await served.initialize()
        queue = list(planned)

        async def worker(seed: int) -> None:
            mine = random.Random(seed)
            while queue:
                await storm_one(served, session, queue.pop(), mine, answers)

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(worker, SEED * 100 + n)
        await ping_http(served, session, "after")
        http = served.app.sessions[session]
        assert http.engine.idle, "an in-flight record was left behind"
        assert http.request_streams == {}, http.request_streams
        response = await served.post(dumps(request("last", "tools/list")), session)
        assert http_messages(response, "after the storm")[-1]["id"] == "last"
    check_storm(planned, answers, "http")
    check_records(caplog, "http log")
