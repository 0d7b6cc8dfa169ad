"""A drained worker hands its handshake sessions over: three ``--any-worker`` backends on a real
Redis behind a real nginx (round robin); SIGTERM to the worker that holds open sessions, and
each session's next request, and its resume with ``Last-Event-ID``, are served by another.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from trio_mcp.http._sessions import CUT_BY_SHUTDOWN

from .._http import SseReader, call_body, parse_sse
from ._fleet import FLEET_SERVER, Fleet, fleet
from ._services import redis_server
from ._streams import open_session, progress_of, read_then_drop, resume, session_headers

#: Hang guard.
GUARD = 60
#: The victim's drain grace: the short call finishes within it, the long one is cut.
GRACE = 2
#: How long a resumed GET stream may take to carry a change (a hang guard).
LISTEN_GUARD = 20


@asynccontextmanager
async def draining_fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    (tmp_path / "fleet").mkdir()
    options = ["--any-worker", "--drain-grace", str(GRACE), "--shutdown-grace", "1"]
    async with (
        redis_server(tmp_path) as redis,
        fleet(
            tmp_path / "fleet",
            3,
            server=str(FLEET_SERVER),
            options=["--redis-url", redis.url, *options],
            routing="any",
        ) as running,
    ):
        yield running


def node_of(session: str) -> str:
    return session.partition(".")[0]


async def call(client: httpx.AsyncClient, url: str, session: str, rid: int, text: str) -> str:
    body = call_body(rid, "echo", {"text": text})
    response = await client.post(url, json=body, headers=session_headers(session))
    assert response.status_code == 200, (response.status_code, response.text)
    last = [e.json() for e in parse_sse(response.text) if e.data][-1]
    result: str = last["result"]["content"][0]["text"]
    return result


async def grow(client: httpx.AsyncClient, url: str, session: str, name: str) -> None:
    """A tools list change, made through ``url`` (every worker hears it over the bus)."""
    body = call_body(name, "grow", {"name": name})
    response = await client.post(url, json=body, headers=session_headers(session))
    assert response.status_code == 200, response.text


async def test_sigterm_hands_open_sessions_to_another_worker(tmp_path: Path) -> None:
    async with draining_fleet(tmp_path) as running, httpx.AsyncClient(timeout=GUARD) as client:
        with trio.fail_after(GUARD):
            # Sessions opened through nginx: round robin spreads them; the victim is the
            # worker that minted (and holds) the first.
            sessions = [await open_session(client, running.url) for _ in range(9)]
            victim = running.backend(node_of(sessions[0]))
            held = [s for s in sessions if node_of(s) == victim.node_id]
            assert len(held) >= 3, sessions
            direct = victim.base + "/mcp"
            # On each, a request running on the victim, whose client went away after a few
            # events: one outlasts the grace (cut by the drain), one ends within it.
            cut = await read_then_drop(
                client, direct, held[0], call_body("long", "sleep", {"seconds": 60}), 3
            )
            done = await read_then_drop(
                client, direct, held[1], call_body("short", "sleep", {"seconds": 0.5}), 2
            )
            assert progress_of(cut) == ["slept 0.1s", "slept 0.2s"]
            # One holds its GET stream on the victim, which has carried a list change.
            get_headers = session_headers(held[2], accept="text/event-stream")
            async with client.stream("GET", direct, headers=get_headers) as get:
                assert get.status_code == 200
                reader = SseReader(get)
                await grow(client, direct, held[2], "grown_before")
                heard = await reader.next()
                assert heard is not None and heard.id is not None
                assert heard.json()["method"] == "notifications/tools/list_changed"
                victim.terminate()
                assert await reader.rest() == []  # the victim ends its GET stream

            assert await victim.wait() == 0

            # The resumes, through nginx, on another worker: what the client missed, and the
            # end its request had on the victim (the drain's retryable error, or its result).
            last = cut[-1].id
            assert last is not None
            status, events = await resume(client, running.url, held[0], last)
            assert status == 200
            end = events[-1].json()
            assert end["id"] == "long"
            assert end["error"]["message"] == CUT_BY_SHUTDOWN
            assert end["error"]["data"] == {"retry": True}
            last = done[-1].id
            assert last is not None
            status, events = await resume(client, running.url, held[1], last)
            assert status == 200
            assert events[-1].json()["result"]["content"][0]["text"] == "slept 0.5s"

            # The GET stream, resumed through nginx: another worker takes it over, and it
            # carries what happens from then on.
            headers = {**get_headers, "last-event-id": heard.id}
            async with client.stream("GET", running.url, headers=headers) as get:
                assert get.status_code == 200
                await grow(client, running.url, held[2], "grown_after")
                with trio.fail_after(LISTEN_GUARD):
                    heard = await SseReader(get).next()
                assert heard is not None
                assert heard.json()["method"] == "notifications/tools/list_changed"

            # The next request of every session the victim held: answered, by the others.
            for rid, session in enumerate(held):
                for turn in range(2):
                    text = f"{rid}-{turn}"
                    assert await call(client, running.url, session, rid * 10 + turn, text) == text
