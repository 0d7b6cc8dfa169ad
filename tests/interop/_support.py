"""Shared pieces of the interoperability tests: peer commands, child processes, wire records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: A bound on each test's whole run, only so that a hang fails instead of blocking the suite.
HANG_GUARD = 60

#: ``trio-mcp demo``, run by this interpreter (the one with the package under test installed).
DEMO = [sys.executable, "-m", "trio_mcp", "demo"]

CLIENT_TO_SERVER = "client->server"
SERVER_TO_CLIENT = "server->client"


def recorded(log: Path, command: Sequence[str]) -> list[str]:
    """``command`` behind the recording proxy, which logs every frame to ``log``."""
    return [sys.executable, str(HERE / "recording_proxy.py"), str(log), "--", *command]


def node() -> str:
    """The node executable, with the project's npm packages installed; a failure, never a skip:
    tox installs both (``npm ci``), so a missing one is a broken environment."""
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not on PATH: the TypeScript interop tests need Node.js")
    if not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").exists():
        pytest.fail("the official TypeScript SDK is not installed: run `npm ci` at the repo root")
    return path


async def run_json(command: Sequence[str]) -> Any:
    """Run a driver script to completion and return the JSON object it printed last."""
    with trio.fail_after(HANG_GUARD):
        done = await trio.run_process(
            list(command),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
        )
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        pytest.fail(f"{command!r} exited with {done.returncode}\n{stdout}\n{stderr}")
    lines = stdout.strip().splitlines()
    if not lines:
        pytest.fail(f"{command!r} printed nothing\n{stderr}")
    return json.loads(lines[-1])


def read_records(log: Path) -> list[dict[str, Any]]:
    """The proxy's records; it must have seen the server exit, so the log is complete."""
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert records, "the proxy recorded nothing"
    assert records[-1] == {"direction": "proxy", "exit": 0}, records[-1]
    return records[:-1]


def frames(records: list[dict[str, Any]], direction: str) -> list[Any]:
    return [r["message"] for r in records if r["direction"] == direction]


def is_response_to(message: Any, request_id: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("id") == request_id
        and ("result" in message or "error" in message)
        and "method" not in message
    )


def is_progress_for(message: Any, token: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("method") == "notifications/progress"
        and message.get("params", {}).get("progressToken") == token
    )


def modern_on_the_wire(records: list[dict[str, Any]]) -> str:
    """The modern version a client reached without a handshake: its server/discover was
    answered, no initialize was sent, and every other request carried the envelope."""
    sent = [m for m in frames(records, CLIENT_TO_SERVER) if isinstance(m, dict)]
    assert not [m for m in sent if m.get("method") == "initialize"]
    (probe, *_) = [m for m in sent if m.get("method") == "server/discover"]
    (answer,) = [m for m in frames(records, SERVER_TO_CLIENT) if is_response_to(m, probe["id"])]
    assert "2026-07-28" in answer["result"]["supportedVersions"]
    version_key = "io.modelcontextprotocol/protocolVersion"
    for message in sent:
        if "id" in message and "method" in message:
            assert message["params"]["_meta"][version_key] == "2026-07-28", message
    return "2026-07-28"


def negotiated_version(records: list[dict[str, Any]]) -> str:
    """The protocol version the server answered ``initialize`` with."""
    requests = [
        m
        for m in frames(records, CLIENT_TO_SERVER)
        if isinstance(m, dict) and m.get("method") == "initialize"
    ]
    assert len(requests) == 1, requests
    (answer,) = [
        m for m in frames(records, SERVER_TO_CLIENT) if is_response_to(m, requests[0]["id"])
    ]
    version = answer["result"]["protocolVersion"]
    assert isinstance(version, str)
    return version


def check_cancelled_call(records: list[dict[str, Any]], tool: str) -> Any:
    """Check the wire story of the one cancelled call to ``tool`` and return its request id.

    The client sent ``tools/call`` with a progress token; progress came back for it; the client
    then sent ``notifications/cancelled`` for that id; the server never answered that id, and it
    sent no progress for it after answering the next request the client sent (that answer
    proves the server had read the cancel: one ordered stream each way). Progress sent between
    the cancel and that answer is allowed: the server may have written it before it read the
    cancel.
    """
    # Index every record, so "after" means later in the order the proxy saw the frames.
    indexed = list(enumerate(records))
    calls = [
        (i, r["message"])
        for i, r in indexed
        if r["direction"] == CLIENT_TO_SERVER
        and isinstance(r["message"], dict)
        and r["message"].get("method") == "tools/call"
        and r["message"].get("params", {}).get("name") == tool
    ]
    cancels = [
        (i, r["message"])
        for i, r in indexed
        if r["direction"] == CLIENT_TO_SERVER
        and isinstance(r["message"], dict)
        and r["message"].get("method") == "notifications/cancelled"
    ]
    assert len(cancels) == 1, cancels
    cancel_at, cancel = cancels[0]
    assert "id" not in cancel, cancel
    request_id = cancel["params"]["requestId"]
    matching = [(i, m) for i, m in calls if m.get("id") == request_id]
    assert len(matching) == 1, (request_id, calls)
    request_at, request = matching[0]
    token = request["params"]["_meta"]["progressToken"]
    assert request_at < cancel_at

    server_frames = [(i, r["message"]) for i, r in indexed if r["direction"] == SERVER_TO_CLIENT]
    progress_before = [
        i for i, m in server_frames if is_progress_for(m, token) and request_at < i < cancel_at
    ]
    assert progress_before, "no progress arrived for the call before it was cancelled"
    assert not [m for _, m in server_frames if is_response_to(m, request_id)], (
        "the server answered a cancelled request"
    )

    next_requests = [
        (i, r["message"])
        for i, r in indexed
        if i > cancel_at
        and r["direction"] == CLIENT_TO_SERVER
        and isinstance(r["message"], dict)
        and "method" in r["message"]
        and "id" in r["message"]
    ]
    assert next_requests, "the client sent no request after the cancel"
    barrier_id = next_requests[0][1]["id"]
    barrier_answers = [
        i for i, m in server_frames if i > cancel_at and is_response_to(m, barrier_id)
    ]
    assert len(barrier_answers) == 1, barrier_answers
    late = [m for i, m in server_frames if i > barrier_answers[0] and is_progress_for(m, token)]
    assert late == [], "progress kept coming after the server had read the cancel"
    return request_id


def progress_of_call(
    records: list[dict[str, Any]], tool: str, arguments: dict[str, Any]
) -> list[list[Any]]:
    """The progress the server sent for the one completed call of ``tool`` with ``arguments``,
    as ``[progress, total, message]`` lists; all of it came before the call's response."""
    (request,) = [
        m
        for m in frames(records, CLIENT_TO_SERVER)
        if isinstance(m, dict)
        and m.get("method") == "tools/call"
        and m.get("params", {}).get("name") == tool
        and m["params"].get("arguments") == arguments
    ]
    token = request["params"]["_meta"]["progressToken"]
    server_frames = frames(records, SERVER_TO_CLIENT)
    (answered_at,) = [i for i, m in enumerate(server_frames) if is_response_to(m, request["id"])]
    assert "result" in server_frames[answered_at], server_frames[answered_at]
    late = [m for m in server_frames[answered_at:] if is_progress_for(m, token)]
    assert late == [], "progress came after the response"
    return [
        [m["params"]["progress"], m["params"].get("total"), m["params"].get("message")]
        for m in server_frames[:answered_at]
        if is_progress_for(m, token)
    ]


#: What the demo's sleep(0.3) reports: progress, total and message, every 100 ms.
SLEEP_PROGRESS = [[0.1, 0.3, "slept 0.1s"], [0.2, 0.3, "slept 0.2s"], [0.3, 0.3, "slept 0.3s"]]


def text_of(result: dict[str, Any]) -> str:
    """The one text block of a wire-level tool result."""
    (block,) = result["content"]
    assert block["type"] == "text"
    text = block["text"]
    assert isinstance(text, str)
    return text


def prompt_text(result: dict[str, Any]) -> str:
    """The text of the one user message of a wire-level prompt result."""
    (message,) = result["messages"]
    assert message["role"] == "user"
    text = message["content"]["text"]
    assert isinstance(text, str)
    return text


def resource_text(result: dict[str, Any], uri: str) -> str:
    """The text of the one plain-text contents of a wire-level resource result."""
    (contents,) = result["contents"]
    assert contents["uri"] == uri
    assert contents["mimeType"] == "text/plain"
    text = contents["text"]
    assert isinstance(text, str)
    return text
