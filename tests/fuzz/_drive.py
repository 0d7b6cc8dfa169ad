"""Driving the fuzzers' frames through a real stdio child and a real hypercorn (Streamable
HTTP, WebSocket, HTTP+SSE), and judging what comes back against an :class:`Answer`."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import orjson
import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from .._http import GUARD, VERSION, Served, SseReader, initialize_body, parse_sse
from .._raw_stdio import RawChild
from ._frames import Answer, check_log, check_reply, dumps, request


def answer_key(frame: bytes) -> Any:
    """What the answer to ``frame`` will be recognised by: its id if it is a request with a
    readable one, ``"batch"`` for a non-empty array, else None (answered at once, if at all)."""
    try:
        value = orjson.loads(frame)  # what the server reads: one it cannot is answered at once
    except ValueError:
        return None
    try:
        value = json.loads(frame.decode("utf-8"))  # with exact integers
    except RecursionError:
        pass  # deeper than the standard library reads; its id is no wide integer
    if isinstance(value, list) and value:
        return "batch"
    if isinstance(value, dict) and "method" in value:
        rid = value.get("id")
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
            return rid
    return None


def judge(answers: list[Any], answer: Answer, context: str) -> None:
    """The replies to one frame (notifications left out) against its expected class."""
    if answer.silent:
        assert answers == [], f"{context}: expected no answer, got {answers}"
        return
    assert len(answers) == 1, f"{context}: expected one answer, got {answers}"
    (reply,) = answers
    if answer.count is not None:
        assert isinstance(reply, list) and len(reply) == answer.count, (context, reply)
        members = reply
    else:
        assert isinstance(reply, dict), (context, reply)
        members = [reply]
    for member in members:
        if "result" in member:
            assert answer.result, f"{context}: expected {answer.describe()}, got {member}"
        else:
            code = member["error"]["code"]
            assert code in answer.codes, f"{context}: expected {answer.describe()}, got {member}"


@attrs.frozen
class Channel:
    """A message transport to the server, as the fuzzers drive it: ``send`` one frame (what
    answered it at once, if anything: HTTP+SSE refuses some POSTs in their response), and
    ``reply``, the next reply frame the server sends (None once it closed its side). A read
    that takes too long raises ``trio.TooSlowError``."""

    name: str
    send: Callable[[bytes], Awaitable[list[Any]]]
    reply: Callable[[], Awaitable[bytes | str | None]]


async def exchange(
    channel: Channel, frame: bytes, sentinel: str, *, answered: bool = True
) -> list[Any]:
    """Send ``frame``, then a ping with id ``sentinel``; the replies to ``frame`` are what
    answered it at once, what arrives before that ping's answer, plus (if it is ``answered``)
    its own keyed answer if that comes later."""
    context = f"{channel.name} {frame[:200]!r}"
    answers = [m for m in await channel.send(frame) if "method" not in m]
    await channel.send(dumps(request(sentinel, "ping")))
    key = answer_key(frame) if answered and not answers else None
    pinged = False
    while not pinged or (key is not None and not _keyed(answers, key)):
        try:
            raw = await channel.reply()
        except trio.TooSlowError:
            raise AssertionError(f"{context}: no answer (so far {answers})") from None
        assert raw is not None, f"{context}: the server closed its side"
        for message in check_reply(raw, context):
            if message.get("id") == sentinel and "result" in message:
                pinged = True
        value = json.loads(raw)
        if isinstance(value, dict) and (value.get("id") == sentinel or "method" in value):
            continue
        answers.append(value)
    return answers


def stdio_channel(child: RawChild) -> Channel:
    """A stdio child: a frame is a line (one holding a newline is several frames)."""

    async def send(frame: bytes) -> list[Any]:
        await child.send_raw(frame + b"\n")
        return []

    return Channel("stdio", send, child.line)


def websocket_channel(ws: WebSocketConnection) -> Channel:
    """A WebSocket: a frame is one text message (the caller sends only UTF-8 frames: a binary
    message closes the socket, as ``tests/http/test_websocket.py`` checks)."""

    async def send(frame: bytes) -> list[Any]:
        await ws.send_message(frame.decode("utf-8"))
        return []

    async def reply() -> str | None:
        with trio.fail_after(GUARD):
            try:
                message = await ws.get_message()
            except ConnectionClosed as closed:
                raise AssertionError(f"websocket: the server closed: {closed.reason}") from None
        assert isinstance(message, str), f"websocket: a binary message: {message[:200]!r}"
        return message

    return Channel("websocket", send, reply)


def sse_channel(served: Served, reader: SseReader, endpoint: str) -> Channel:
    """An HTTP+SSE session: a frame is one POST to its endpoint, answered 202 with its answers
    down the GET stream, or refused in the POST's response (400 for what is not a JSON-RPC
    message, 413 for a body over the limit)."""

    async def send(frame: bytes) -> list[Any]:
        response = await served.client.post(
            served.base + endpoint,
            content=frame,
            headers={"content-type": "application/json"},
        )
        context = f"http+sse {frame[:200]!r} (HTTP {response.status_code})"
        if response.status_code == 202:
            return []
        assert response.status_code in (400, 413), context
        if not response.headers.get("content-type", "").startswith("application/json"):
            check_log(response.text, context)
            return []
        return check_reply(response.content, context)

    async def reply() -> str | None:
        with trio.fail_after(GUARD):
            while True:
                event = await reader.next()
                if event is None:
                    return None
                if event.data:
                    return event.data

    return Channel("http+sse", send, reply)


@asynccontextmanager
async def websocket_session(served: Served) -> AsyncIterator[Channel]:
    """An initialized session on the app's WebSocket endpoint (``/ws``, subprotocol ``mcp``)."""
    url = served.base.replace("http://", "ws://", 1) + "/ws"
    async with open_websocket_url(url, subprotocols=["mcp"]) as ws:
        channel = websocket_channel(ws)
        await _initialize(channel)
        yield channel


@asynccontextmanager
async def sse_session(served: Served) -> AsyncIterator[Channel]:
    """An initialized HTTP+SSE session: its GET stream open on ``/sse``, its POSTs to the
    endpoint the stream's first event names."""
    async with served.client.stream("GET", served.base + "/sse") as response:
        assert response.status_code == 200, response.status_code
        reader = SseReader(response)
        with trio.fail_after(GUARD):
            first = await reader.next()
        assert first is not None and first.event == "endpoint", first
        channel = sse_channel(served, reader, first.data)
        await _initialize(channel)
        yield channel


async def _initialize(channel: Channel) -> None:
    """The handshake, at the version the stdio child is initialized with (so that every
    transport is held to the same answers)."""
    assert await channel.send(dumps(initialize_body(VERSION))) == []
    raw = await channel.reply()
    assert raw is not None and "result" in json.loads(raw), raw
    await channel.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


def _keyed(answers: list[Any], key: Any) -> bool:
    if key == "batch":
        return any(isinstance(a, list) for a in answers) or any(
            isinstance(a, dict) and a.get("id") is None for a in answers
        )
    return any(isinstance(a, dict) and a.get("id") == key for a in answers)


def http_messages(response: Any, context: str) -> list[Any]:
    """The JSON-RPC messages of one POST's answer, each checked."""
    assert response.status_code != 500, f"{context}: HTTP 500"
    leak_context = f"{context} (HTTP {response.status_code})"
    if not response.content:
        return []
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        found: list[Any] = []
        for event in parse_sse(response.text):
            if event.data:
                found += check_reply(event.data, leak_context)
        return found
    if content_type.startswith("application/json"):
        return check_reply(response.content, leak_context)
    check_log(response.text, leak_context)
    return []


async def post_hostile(served: Served, session: str, frame: bytes, context: str) -> Any:
    response = await served.post(frame, session)
    messages = [m for m in http_messages(response, context) if "method" not in m]
    return response.status_code, messages


async def ping_http(served: Served, session: str, rid: str) -> None:
    response = await served.post(dumps(request(rid, "ping")), session)
    messages = http_messages(response, f"ping {rid}")
    assert response.status_code == 200 and messages[-1] == {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {},
    }, (response.status_code, messages)


def check_records(caplog: pytest.LogCaptureFixture, context: str) -> None:
    """The in-process server's log: no traceback, no error, nothing internal."""
    for record in caplog.records:
        if not record.name.startswith(("trio_mcp", "hypercorn")):
            continue
        assert record.exc_info is None, f"{context}: a traceback in the log: {record.getMessage()}"
        assert record.levelno < logging.ERROR, f"{context}: {record.getMessage()}"
        check_log(record.getMessage(), context)
