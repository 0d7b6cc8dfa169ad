"""The TypeScript SDK's second generation (``@modelcontextprotocol/client`` 2.4.0) drives
trio_mcp's demo with the tools that ask (``peer_server.py``), over stdio and Streamable HTTP,
in every era both speak.

One node process (``ts2_client.mjs``) runs the whole scenario once per era: the handshake era
at each version the v2 client can offer (it offers exactly the one we give it), the modern era
pinned, and the SDK's ``auto`` negotiation (a ``server/discover`` probe). Over stdio each
connection runs behind ``recording_proxy.py`` with a log of its own; over HTTP the driver logs
every POST it makes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

from trio_mcp._demo import README_TEXT

from ._http_support import start_server
from ._support import (
    CLIENT_TO_SERVER,
    HANG_GUARD,
    HERE,
    SLEEP_PROGRESS,
    check_cancelled_call,
    frames,
    modern_on_the_wire,
    negotiated_version,
    node,
    progress_of_call,
    read_records,
    recorded,
    run_json,
    text_of,
)

MODERN = "2026-07-28"
PEER_STDIO = [sys.executable, "-m", "tests.interop.peer_server", "stdio"]
PEER_HTTP = [sys.executable, "-m", "tests.interop.peer_server", "http"]
TOOLS = ["add", "book", "cancelled", "echo", "plan", "sleep", "slow", "summarize"]
#: What the client's handlers were asked, in order, for summarize, book, plan and confirm.
ASKED = [
    ["sampling", "Summarize: a long text"],
    ["elicitation", "Which dates?"],
    ["elicitation", "Which dates?"],
    ["sampling", "An idea for Porto"],
    ["elicitation", "Plan Porto?"],
    ["elicitation", "Write about trio?"],
]
STDIO_ERAS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "pin", "auto"]
#: 2024-11-05 over HTTP is the HTTP+SSE transport, which the v2 client speaks separately.
HTTP_ERAS = ["2025-03-26", "2025-06-18", "2025-11-25", "pin", "auto"]


def version_of(era: str) -> str:
    return MODERN if era in ("pin", "auto") else era


def check_report(era: str, out: dict[str, Any]) -> None:
    """What every connection saw, whatever its transport."""
    assert "failed" not in out, out.get("failed")
    version = version_of(era)
    assert out["protocolVersion"] == version
    assert out["era"] == ("modern" if version == MODERN else "legacy")
    assert out["serverVersion"]["name"] == "trio-mcp-demo"
    assert out["tools"] == TOOLS
    assert text_of(out["echo"]) == "hello from ts2"
    assert text_of(out["add"]) == "5"
    assert out["add"]["structuredContent"] == {"result": 5}
    assert out["prompts"] == ["confirm", "greeting"]
    assert out["prompt"] == "Write a warm greeting for Ada."
    assert out["resources"] == ["demo://readme", "ui://trio-mcp-demo/adder"]
    assert out["templates"] == ["demo://greeting/{name}"]
    ((readme,), (templated,)) = out["readme"], out["templated"]
    assert readme["text"] == README_TEXT
    assert templated["uri"] == "demo://greeting/Ada"
    assert templated["text"] == "Hello, Ada!"
    assert out["sleep"] == "slept 0.3s"
    # Like the 1.x SDK, v2 can drop a progress read in the same chunk as the response (it
    # settles the call first); what it saw is a prefix of what was sent (on the wire: all).
    assert out["sleepProgress"] == SLEEP_PROGRESS[: len(out["sleepProgress"])]
    assert out["summarize"] == "summary: model says: Summarize: a long text"
    if version >= "2025-06-18":
        assert out["book"] == "Lisbon, 1-3 May"
        assert out["plan"] == "Porto, 1-3 May: model says: An idea for Porto"
        assert out["confirm"] == "Write about trio."
        # plan asks its first two questions together: in the handshake era they go out at
        # once, so the client may answer them in either order.
        assert sorted(map(tuple, out["asked"])) == sorted(map(tuple, ASKED))
        assert out["asked"][:2] == ASKED[:2] and out["asked"][4:] == ASKED[4:]
    else:
        # Elicitation came in 2025-06-18: nothing of it before.
        assert out["asked"] == ASKED[:1]
    # The AbortSignal: the call rejected with its reason, and while the client was still
    # connected our handler had been cancelled; no progress came after, and the client goes on.
    assert out["cancelOutcome"] == "rejected"
    assert "interop cancel" in out["cancelError"]
    assert out["progressBeforeCancel"] == [1]
    assert len(out["cancelledIds"]) == 1
    assert out["progressAfterCancel"] == []
    assert out["echoAfterCancel"] == "still here"


def mrtr_rounds(calls: list[dict[str, Any]]) -> list[tuple[str, list[str], bool]]:
    """(name, the keys of inputResponses, whether a requestState came) of each tools/call or
    prompts/get that asks, in order."""
    asking = {"summarize", "book", "plan", "confirm"}
    return [
        (c["name"], sorted(c.get("inputResponses") or []), bool(c.get("requestState")))
        for c in calls
        if c["name"] in asking
    ]


#: The modern era's multi round-trips: each asking call first ends input_required, then is
#: retried with the answers and the sealed requestState; plan takes two rounds (its first two
#: questions together, then the third).
MODERN_ROUNDS = [
    ("summarize", [], False),
    ("summarize", ["sampling-1"], True),
    ("book", [], False),
    ("book", ["elicitation-1"], True),
    ("plan", [], False),
    ("plan", ["dates", "idea"], True),
    ("plan", ["ok"], True),
    ("confirm", [], False),
    ("confirm", ["elicitation-1"], True),
]
HANDSHAKE_ROUNDS: list[tuple[str, list[str], bool]] = [
    ("summarize", [], False),
    ("book", [], False),
    ("plan", [], False),
    ("confirm", [], False),
]


def wire_calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**m["params"], "id": m["id"]}
        for m in frames(records, CLIENT_TO_SERVER)
        if isinstance(m, dict) and m.get("method") in ("tools/call", "prompts/get")
    ]


async def test_the_v2_typescript_client_drives_our_server_over_stdio_in_every_era(
    tmp_path: Path,
) -> None:
    command = recorded(tmp_path / "{era}.jsonl", PEER_STDIO)
    with trio.fail_after(HANG_GUARD * 2):
        report = await run_json(
            [node(), str(HERE / "ts2_client.mjs"), ",".join(STDIO_ERAS), "stdio", *command]
        )
    assert list(report) == STDIO_ERAS
    for era in STDIO_ERAS:
        out = report[era]
        check_report(era, out)
        records = read_records(tmp_path / f"{era}.jsonl")
        if era == "auto":
            # The SDK's probe (its sibling process ends unrecorded) came first.
            assert frames(records, CLIENT_TO_SERVER)[0]["method"] == "server/discover"
        if version_of(era) == MODERN:
            assert modern_on_the_wire(records) == MODERN
            assert mrtr_rounds(wire_calls(records)) == MODERN_ROUNDS
        else:
            assert negotiated_version(records) == era
            expected = HANDSHAKE_ROUNDS if era >= "2025-06-18" else HANDSHAKE_ROUNDS[:1]
            assert mrtr_rounds(wire_calls(records)) == expected
        assert progress_of_call(records, "sleep", {"seconds": 0.3}) == SLEEP_PROGRESS
        # On stdio both eras cancel with notifications/cancelled (2026-07-28: the client
        # "MUST send" it on stdio), and the server's handler stopped for that very id.
        request_id = check_cancelled_call(records, "slow")
        assert out["cancelledIds"] == [str(request_id)]


async def test_the_v2_typescript_client_drives_our_server_over_http_in_every_era(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(HANG_GUARD * 2):
        server = await start_server(nursery, PEER_HTTP)
        report = await run_json(
            [node(), str(HERE / "ts2_client.mjs"), ",".join(HTTP_ERAS), "http", server.url]
        )
        assert await server.stop() == 0, "\n".join(server.lines)
    assert list(report) == HTTP_ERAS
    for era in HTTP_ERAS:
        out = report[era]
        check_report(era, out)
        posts = out["posts"]
        (slow,) = [p for p in posts if p["name"] == "slow"]
        assert out["cancelledIds"] == [str(slow["id"])]
        cancels = [p for p in posts if p["method"] == "notifications/cancelled"]
        if version_of(era) == MODERN:
            # No session and no handshake: a probe, then every POST with the modern header.
            assert posts[0]["method"] == "server/discover"
            assert [p for p in posts if p["method"] == "initialize"] == []
            for post in posts:
                assert post["version"] == MODERN and not post["session"], post
                assert post["status"] == 200, post
            assert mrtr_rounds(posts) == MODERN_ROUNDS
            # 2026-07-28 over Streamable HTTP: closing the response stream is the cancel;
            # the client posts no notification.
            assert cancels == []
        else:
            assert posts[0]["method"] == "initialize"
            for post in posts[1:]:
                assert post["version"] == era and post["session"], post
            expected = HANDSHAKE_ROUNDS if era >= "2025-06-18" else HANDSHAKE_ROUNDS[:1]
            assert mrtr_rounds(posts) == expected
            assert len(cancels) == 1
    # Every cancelled slow wrote its marker, and nothing else was cancelled.
    assert len([line for line in server.lines if line.startswith("CANCELLED slow ")]) == len(
        HTTP_ERAS
    )
