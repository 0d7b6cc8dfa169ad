"""fastmcp (4.2) as a peer, every peer a real child process.

- fastmcp's client (``fm_client.py``) drives our demo with the tools that ask
  (``peer_server.py``) over stdio and Streamable HTTP, in its three modes: ``legacy`` (the
  handshake), ``auto`` (its default: a ``server/discover`` probe) and ``2026-07-28``.
- Our client drives a fastmcp server (``fm_server.py``) over stdio and HTTP, in the handshake
  era and in 2026-07-28 (reached by our probe), with the scenario of the v2 server tests.
- ``trio-mcp proxy`` stands in front of a fastmcp server (upstream over stdio, and over HTTP)
  and our client drives the proxy.
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
import pytest
import trio

from trio_mcp import HttpTarget, open_client
from trio_mcp._demo import README_TEXT
from trio_mcp.testing import stdio_client

from ._http_support import ServerProcess, start_server
from ._support import HANG_GUARD, SLEEP_PROGRESS, run_json
from .test_http_interop import WireLog
from .test_v2_servers import CANCELLED, Asked, Markers, Peer, check_era, new_marker, scenario

pytestmark = pytest.mark.filterwarnings(
    "ignore:roots and sampling are deprecated:DeprecationWarning"
)

MODERN = "2026-07-28"
FM_CLIENT = [sys.executable, "-m", "tests.interop.fm_client"]
PEER_STDIO = [sys.executable, "-m", "tests.interop.peer_server", "stdio"]
PEER_HTTP = [sys.executable, "-m", "tests.interop.peer_server", "http"]
FM_MODES = ["legacy", "auto", MODERN]
FM = Peer("fm", "fm-interop-server", "served by fastmcp")
#: (mode, the handshake version offered) of each of our connections.
OUR_ERAS = [("legacy", "2025-11-25"), ("legacy", "2025-06-18"), ("auto", None)]
TOOLS = ["add", "book", "cancelled", "echo", "plan", "sleep", "slow", "summarize"]
ASKED = [
    ["sampling", "Summarize: a long text"],
    ["elicitation", "Which dates?"],
    ["elicitation", "Which dates?"],
    ["sampling", "An idea for Porto"],
    ["elicitation", "Plan Porto?"],
    ["elicitation", "Write about trio?"],
]


def fm_server(transport: str) -> list[str]:
    return [sys.executable, "-m", "tests.interop.fm_server", transport]


def check_fastmcp_report(mode: str, out: dict[str, Any]) -> None:
    assert "failed" not in out, out.get("failed")
    assert out["protocol_version"] == ("2025-11-25" if mode == "legacy" else MODERN)
    assert out["tools"] == TOOLS
    assert out["echo"] == ["hello from fastmcp", False]
    # fastmcp reads the structured result back into the value.
    assert out["add"] == ["5", {"result": 5}, 5]
    assert out["prompts"] == ["confirm", "greeting"]
    assert out["prompt"] == "Write a warm greeting for Ada."
    assert out["resources"] == ["demo://readme", "ui://trio-mcp-demo/adder"]
    assert out["templates"] == ["demo://greeting/{name}"]
    assert out["readme"]["text"] == README_TEXT
    assert out["templated"]["text"] == "Hello, Ada!"
    assert out["sleep"] == "slept 0.3s"
    assert out["sleep_progress"] == SLEEP_PROGRESS
    assert out["summarize"] == "summary: model says: Summarize: a long text"
    assert out["book"] == "Lisbon, 1-3 May"
    assert out["plan"] == "Porto, 1-3 May: model says: An idea for Porto"
    assert out["confirm"] == "Write about trio."
    assert sorted(map(tuple, out["asked"])) == sorted(map(tuple, ASKED))
    assert out["cancel_outcome"] == "cancelled"
    assert out["progress_before_cancel"] == [1]
    assert len(out["cancelled_ids"]) == 1
    assert out["progress_after_cancel"] == []
    assert out["echo_after_cancel"] == "still here"


# -- fastmcp's client drives our server ------------------------------------------------------


async def test_the_fastmcp_client_drives_our_server_over_stdio() -> None:
    with trio.fail_after(HANG_GUARD * 2):
        report = await run_json([*FM_CLIENT, ",".join(FM_MODES), "stdio", *PEER_STDIO])
    assert list(report) == FM_MODES
    for mode in FM_MODES:
        check_fastmcp_report(mode, report[mode])


async def test_the_fastmcp_client_drives_our_server_over_http(nursery: trio.Nursery) -> None:
    with trio.fail_after(HANG_GUARD * 2):
        server = await start_server(nursery, PEER_HTTP)
        report = await run_json([*FM_CLIENT, ",".join(FM_MODES), "http", server.url])
        assert await server.stop() == 0, "\n".join(server.lines)
    assert list(report) == FM_MODES
    for mode in FM_MODES:
        check_fastmcp_report(mode, report[mode])
    cancelled = [line for line in server.lines if line.startswith(CANCELLED)]
    assert len(cancelled) == len(FM_MODES)


# -- our client drives a fastmcp server ------------------------------------------------------


def asking_rounds(wire: WireLog) -> list[tuple[str, list[str]]]:
    return [
        (p["params"]["name"], sorted(p["params"].get("inputResponses") or []))
        for p in wire.posts("tools/call")
        if p["params"]["name"] in ("book", "summarize")
    ]


async def test_our_client_drives_a_fastmcp_server_over_stdio_in_both_eras() -> None:
    for mode, version in OUR_ERAS:
        markers = Markers()
        asked = Asked()
        with trio.fail_after(HANG_GUARD):
            async with stdio_client(
                fm_server("stdio"),
                on_stderr=markers.on_stderr,
                mode=mode,
                protocol_version=version,
                on_elicit=asked.elicit,
                on_sample=asked.sample,
            ) as client:
                check_era(client, mode, version)
                request_id = await scenario(client, asked, markers.cancelled, FM)
        assert markers.lines == [f"{CANCELLED}{request_id}"]


async def test_our_client_drives_a_fastmcp_server_over_http_in_both_eras(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(HANG_GUARD * 2):
        server = await start_server(nursery, fm_server("http"))
        for mode, version in OUR_ERAS:
            wire = WireLog()
            asked = Asked()
            seen = list(server.lines)
            async with (
                wire.client() as http,
                open_client(
                    HttpTarget(server.url, http_client=http),
                    mode=mode,
                    protocol_version=version,
                    on_elicit=asked.elicit,
                    on_sample=asked.sample,
                ) as client,
            ):
                check_era(client, mode, version)

                async def cancelled(marker: str, seen: list[str] = seen) -> None:
                    await new_marker(server, seen, marker)

                await scenario(client, asked, cancelled, FM)
            if mode == "auto":
                assert wire.posts()[0]["rpc"] == "server/discover"
                assert wire.posts("initialize") == []
                # fastmcp's guard pattern, a multi round-trip: asked, then retried.
                assert asking_rounds(wire) == [
                    ("book", []),
                    ("book", ["dates"]),
                    ("summarize", []),
                    ("summarize", ["summary"]),
                ]
                assert wire.posts("notifications/cancelled") == []
            else:
                assert wire.posts()[0]["rpc"] == "initialize"
                assert asking_rounds(wire) == [("book", []), ("summarize", [])]
                assert len(wire.posts("notifications/cancelled")) == 1
        await server.stop()


# -- trio-mcp proxy in front of a fastmcp server ---------------------------------------------


def proxy_command(upstream: str) -> list[str]:
    return [sys.executable, "-m", "trio_mcp", "proxy", upstream]


async def drive_the_proxy(upstream: str, server: ServerProcess | None = None) -> None:
    """Our client, over stdio, in both eras, through ``trio-mcp proxy``; the cancel must reach
    the fastmcp handler (its marker: on the proxy's stderr for a stdio upstream, which
    inherits it, or on the HTTP upstream's own)."""
    behind = attrs.evolve(FM, name=None)
    for mode in ("legacy", "auto"):
        markers = Markers()
        asked = Asked()
        seen = list(server.lines) if server is not None else []

        async def cancelled(
            _marker: str, seen: list[str] = seen, markers: Markers = markers
        ) -> None:
            # The upstream's id of the cancelled call is the proxy's own, not ours.
            if server is None:
                await markers.arrived()
            else:
                await server.wait_for(lambda _line: marker_count(server.lines) > marker_count(seen))

        with trio.fail_after(HANG_GUARD):
            async with stdio_client(
                proxy_command(upstream),
                on_stderr=markers.on_stderr,
                mode=mode,
                on_elicit=asked.elicit,
                on_sample=asked.sample,
            ) as client:
                assert client.protocol_version == (MODERN if mode == "auto" else "2025-11-25")
                await scenario(client, asked, cancelled, behind)
        if server is None:
            assert len(markers.lines) == 1, markers.lines


def marker_count(lines: list[str]) -> int:
    return len([line for line in lines if line.startswith(CANCELLED)])


async def test_the_proxy_fronts_a_fastmcp_server_over_stdio() -> None:
    await drive_the_proxy(" ".join(fm_server("stdio")))


async def test_the_proxy_fronts_a_fastmcp_server_over_http(nursery: trio.Nursery) -> None:
    with trio.fail_after(HANG_GUARD):
        server = await start_server(nursery, fm_server("http"))
    await drive_the_proxy(server.url, server)
    await server.stop()
