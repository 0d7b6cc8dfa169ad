"""A handshake-era session on raw HTTP, for the tests that cut its streams and resume them on
another process: open it, read the first events of a request and drop the connection, resume
with ``Last-Event-ID``."""

from __future__ import annotations

from typing import Any

import httpx

from .._http import VERSION, SseEvent, SseReader, initialize_body


def session_headers(session: str | None = None, **extra: str) -> dict[str, str]:
    """The headers of a POST (``extra`` names with ``_`` for ``-``: ``last_event_id=``)."""
    out = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": VERSION,
    }
    if session is not None:
        out["mcp-session-id"] = session
    return {**out, **{k.replace("_", "-"): v for k, v in extra.items()}}


async def open_session(client: httpx.AsyncClient, url: str) -> str:
    """A session, initialized; behind nginx its id's tag names the node that holds it."""
    opened = await client.post(url, json=initialize_body(VERSION), headers=session_headers())
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=note, headers=session_headers(session))).status_code == 202
    return session


async def read_then_drop(
    client: httpx.AsyncClient, url: str, session: str, body: Any, count: int
) -> list[SseEvent]:
    """POST a request and read its stream's first ``count`` events (priming included), then
    drop the connection."""
    got: list[SseEvent] = []
    async with client.stream("POST", url, json=body, headers=session_headers(session)) as reply:
        assert reply.status_code == 200
        reader = SseReader(reply)
        while len(got) < count:
            event = await reader.next()
            assert event is not None
            got.append(event)
    return got


async def resume(
    client: httpx.AsyncClient, url: str, session: str, last_event_id: str
) -> tuple[int, list[SseEvent]]:
    """GET with ``Last-Event-ID``: the status, and every event up to the stream's end."""
    headers = session_headers(session, last_event_id=last_event_id, accept="text/event-stream")
    async with client.stream("GET", url, headers=headers) as reply:
        if reply.status_code != 200:
            await reply.aread()
            return reply.status_code, []
        return 200, await SseReader(reply).rest()


def progress_of(events: list[SseEvent]) -> list[str]:
    """The messages of the progress notifications among ``events``."""
    return [
        e.json()["params"]["message"]
        for e in events
        if e.data and e.json().get("method") == "notifications/progress"
    ]
