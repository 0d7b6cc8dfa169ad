"""The official SDKs' clients drive ``trio-mcp demo`` over stdio, each in a child process.

Each client runs as a driver script (``py_client.py`` with this interpreter, ``ts_client.mjs``
with node) that prints what it saw as JSON; the server runs behind ``recording_proxy.py``, so
the tests can also assert on the frames that crossed the wire, in order.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trio_mcp._demo import README_TEXT

from ._support import (
    DEMO,
    HERE,
    SLEEP_PROGRESS,
    check_cancelled_call,
    modern_on_the_wire,
    negotiated_version,
    node,
    progress_of_call,
    prompt_text,
    read_records,
    recorded,
    resource_text,
    run_json,
    text_of,
)

TOOLS = ["add", "echo", "sleep"]
#: The demo's resources: its readme and its app (MCP Apps), which any client may list.
DEMO_RESOURCES = [("readme", "demo://readme"), ("adder", "ui://trio-mcp-demo/adder")]
PROMPTS = [
    {
        "name": "greeting",
        "description": "A friendly greeting for someone",
        "arguments": [{"name": "name", "required": True}, {"name": "style", "required": False}],
    }
]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_python_client_drives_the_demo(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "wire.jsonl"
    out = await run_json(
        [sys.executable, "-m", "tests.interop.py_client", mode, "--", *recorded(log, DEMO)]
    )

    # In its default (auto) mode the official client probes server/discover and reaches our
    # server in the modern era; in legacy mode it speaks the handshake.
    expected_version = "2026-07-28" if mode == "auto" else "2025-11-25"
    assert out["protocol_version"] == expected_version
    assert out["server_name"] == "trio-mcp-demo"
    assert out["tools"] == TOOLS
    assert text_of(out["echo"]) == "hello from mcp"
    assert out["echo"]["isError"] is False
    # add returns an int when the sum is integral, and the structured result carries it.
    assert text_of(out["add"]) == "5"
    assert out["add"]["structuredContent"] == {"result": 5}
    assert text_of(out["add_fraction"]) == "0.75"
    assert out["prompts"] == PROMPTS
    assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
    assert prompt_text(out["prompt_styled"]) == "Write a formal greeting for Ada."
    assert [(r["name"], r["uri"]) for r in out["resources"]] == DEMO_RESOURCES
    assert [t["uriTemplate"] for t in out["templates"]] == ["demo://greeting/{name}"]
    assert resource_text(out["readme"], "demo://readme") == README_TEXT
    assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
    assert text_of(out["sleep"]) == "slept 0.3s"
    assert out["sleep_progress"] == SLEEP_PROGRESS
    # The cancelled call: the SDK raised the cancellation to the scope that cancelled it, the
    # callback saw one progress before and none after, and the session goes on.
    assert out["cancel_outcome"] == "cancelled"
    assert out["progress_before_cancel"] == [[0.1, 60.0, "slept 0.1s"]]
    assert out["progress_after_cancel"] == []
    assert out["barrier_tools"] == TOOLS
    assert text_of(out["echo_after_cancel"]) == "still here"

    records = read_records(log)
    if mode == "auto":
        assert modern_on_the_wire(records) == expected_version
    else:
        assert negotiated_version(records) == expected_version
    assert progress_of_call(records, "sleep", {"seconds": 0.3}) == SLEEP_PROGRESS
    check_cancelled_call(records, "sleep")


async def test_the_official_typescript_client_drives_the_demo(tmp_path: Path) -> None:
    log = tmp_path / "wire.jsonl"
    out = await run_json([node(), str(HERE / "ts_client.mjs"), *recorded(log, DEMO)])

    assert out["serverVersion"] == {
        "name": "trio-mcp-demo",
        "title": "trio-mcp demo",
        "version": "0.1.0",
    }
    assert out["tools"] == TOOLS
    assert text_of(out["echo"]) == "hello from ts"
    assert text_of(out["add"]) == "5"
    assert out["add"]["structuredContent"] == {"result": 5}
    assert text_of(out["addFraction"]) == "0.75"
    assert out["prompts"] == PROMPTS
    assert prompt_text(out["prompt"]) == "Write a warm greeting for Ada."
    assert prompt_text(out["promptStyled"]) == "Write a formal greeting for Ada."
    assert [(r["name"], r["uri"]) for r in out["resources"]] == DEMO_RESOURCES
    assert [t["uriTemplate"] for t in out["templates"]] == ["demo://greeting/{name}"]
    assert resource_text(out["readme"], "demo://readme") == README_TEXT
    assert resource_text(out["templated"], "demo://greeting/Ada") == "Hello, Ada!"
    assert text_of(out["sleep"]) == "slept 0.3s"
    # The SDK (1.32.2) dispatches a progress notification a microtask later, but settles a
    # response at once and drops the call's progress handler then: a progress frame read in the
    # same chunk as the response is never delivered. So the callback sees a prefix of what the
    # server sent; the wire (below) shows all of it, in order, before the response.
    observed = [[p["progress"], p["total"], p["message"]] for p in out["sleepProgress"]]
    assert observed == SLEEP_PROGRESS[: len(observed)]
    # The aborted call: the SDK rejected it with the abort reason, the callback saw one
    # progress before and none after, and the session goes on.
    assert out["cancelOutcome"] == "rejected"
    assert "interop cancel" in out["cancelError"]
    assert out["progressBeforeCancel"] == [{"progress": 0.1, "total": 60, "message": "slept 0.1s"}]
    assert out["progressAfterCancel"] == []
    assert out["ping"] == {}
    assert text_of(out["echoAfterCancel"]) == "still here"

    records = read_records(log)
    assert negotiated_version(records) == "2025-11-25"
    assert progress_of_call(records, "sleep", {"seconds": 0.3}) == SLEEP_PROGRESS
    check_cancelled_call(records, "sleep")
