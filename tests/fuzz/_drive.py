"""Driving the fuzzers' frames through a real stdio child and a real hypercorn, and judging
what comes back against an :class:`Answer`."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
import pytest
import trio

from .._http import Served, parse_sse
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


async def exchange_stdio(
    child: RawChild, frame: bytes, sentinel: str, *, answered: bool = True
) -> list[Any]:
    """Send ``frame``, then a ping with id ``sentinel``; the replies to ``frame`` are what
    arrives before that ping's answer, plus (if it is ``answered``) its own keyed answer if
    that comes later."""
    await child.send_raw(frame + b"\n")
    await child.send_raw(dumps(request(sentinel, "ping")) + b"\n")
    key = answer_key(frame) if answered else None
    answers: list[Any] = []
    pinged = False
    while not pinged or (key is not None and not _keyed(answers, key)):
        try:
            line = await child.line()
        except trio.TooSlowError:
            raise AssertionError(f"{frame[:200]!r}: no answer (so far {answers})") from None
        assert line is not None, f"{frame[:200]!r}: the server closed its output"
        for message in check_reply(line, repr(frame[:200])):
            if message.get("id") == sentinel and "result" in message:
                pinged = True
        value = json.loads(line)
        if isinstance(value, dict) and (value.get("id") == sentinel or "method" in value):
            continue
        answers.append(value)
    return answers


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
