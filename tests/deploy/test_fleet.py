"""The deployment of docs/deploy.md, for real: three trio_mcp processes behind nginx (run from
``deploy/nginx.conf``) on 127.0.0.1, driven by the official clients and by trio_mcp's own.

What is counted and bounded: every session and every call must be answered; the requests per
backend show round robin; times are hang guards, never performance assertions.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from trio_mcp import ElicitRequestFormParams, ElicitResult, MCPError, open_client
from trio_mcp.http._sessions import CUT_BY_SHUTDOWN

from .._http import SseEvent, SseReader, call_body
from .._ports import free_port
from . import system_packages
from ._fleet import FLEET_SERVER, NGINX_CONF, ROOT, Fleet, fleet, render_nginx_conf
from ._services import KINDS, redis_server, shared_redis
from ._streams import open_session, progress_of, read_then_drop, resume, session_headers

#: Hang guards.
DRIVER_GUARD = 300
MODERN = "2026-07-28"


def modern_call(rid: Any, name: str, arguments: dict[str, Any] | None = None) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": arguments or {}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def modern_headers(name: str) -> dict[str, str]:
    return {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }


async def run_driver(command: list[str]) -> dict[str, Any]:
    with trio.fail_after(DRIVER_GUARD):
        done = await trio.run_process(
            command, cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return report


def assert_spread(counts: dict[int, int], running: Fleet, total: int) -> None:
    """Every backend took a fair share (round robin gives each a third)."""
    assert set(counts) == {b.pid for b in running.backends}, counts
    assert sum(counts.values()) == total
    assert min(counts.values()) >= total // 6, counts


@pytest.mark.parametrize("routing", ["map", "any", "connection"])
@pytest.mark.parametrize("count", [1, 2, 3])
async def test_the_config_renders_and_nginx_accepts_it(
    tmp_path: Path, count: int, routing: str
) -> None:
    await trio.to_thread.run_sync(system_packages.ensure)
    ports = {f"n{k}": free_port() for k in range(1, count + 1)}
    template = NGINX_CONF.read_text()
    text = render_nginx_conf(template, listen=free_port(), ports=ports, routing=routing)
    by_connection = "\n        hash $remote_addr$remote_port consistent;\n"
    assert (by_connection in text) == (routing == "connection")
    for node, port in ports.items():
        assert f"127.0.0.1:{port}" in text and f"mcp_{node};" in text
    for gone in range(count + 1, 4):
        assert f"mcp_n{gone}" not in text and ":800" not in text
    (tmp_path / "nginx.conf").write_text(text)
    nginx = system_packages.find("nginx")
    assert nginx is not None
    command = [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")]
    done = await trio.run_process(
        [*command, "-e", str(tmp_path / "error.log")], capture_stderr=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


async def test_handshake_era_100_sessions_with_the_official_python_client(tmp_path: Path) -> None:
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER)) as running:
        command = [sys.executable, "-m", "tests.deploy._py_fleet_client", running.url]
        report = await run_driver([*command, "100", "5", "8"])
        assert report["errors"] == []
        assert (report["sessions_ok"], report["calls_ok"]) == (100, 500)
        assert_spread({int(p): n for p, n in report["pids"].items()}, running, 100)


async def test_handshake_era_100_sessions_with_the_typescript_client(tmp_path: Path) -> None:
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER)) as running:
        driver = str(Path(__file__).with_name("ts_fleet_client.mjs"))
        report = await run_driver(["node", driver, running.url, "100", "5", "8"])
        assert report["errors"] == []
        assert (report["sessions_ok"], report["calls_ok"]) == (100, 500)
        assert_spread({int(p): n for p, n in report["pids"].items()}, running, 100)
        # Each session was held by the node its id names (the tag nginx routed on).
        assert set(report["tags"]) == {"n1", "n2", "n3"}


async def test_modern_era_1000_tool_calls_round_robin(tmp_path: Path) -> None:
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER)) as running:
        pids: Counter[int] = Counter()
        async with open_client(running.url, mode="modern") as client:

            async def calls(worker: int) -> None:
                for _ in range(125):
                    result = await client.call_tool("backend", {})
                    assert not result.is_error
                    assert result.structured_content is not None
                    pids[result.structured_content["pid"]] += 1

            with trio.fail_after(DRIVER_GUARD):
                async with trio.open_nursery() as nursery:
                    for worker in range(8):
                        nursery.start_soon(calls, worker)
        assert_spread(dict(pids), running, 1000)


async def test_by_connection_each_client_connection_keeps_to_one_backend(
    tmp_path: Path,
) -> None:
    # deploy/nginx.conf with its commented `hash` line in use: the requests without a session
    # go by client connection, so every call on one connection reaches one backend, and
    # twelve connections reach more than one (all on one: a chance of 3 in 3^12).
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER), routing="connection") as running:
        reached: list[set[int]] = []
        for _ in range(12):
            async with httpx.AsyncClient(timeout=60) as client:  # one keep-alive connection
                pids = set()
                for rid in range(4):
                    answer = await client.post(
                        running.url,
                        json=modern_call(rid, "backend"),
                        headers=modern_headers("backend"),
                    )
                    assert answer.status_code == 200, answer.text
                    pids.add(answer.json()["result"]["structuredContent"]["pid"])
                reached.append(pids)
        assert all(len(pids) == 1 for pids in reached), reached
        assert len(set().union(*reached)) > 1, reached


async def test_a_forged_or_foreign_tag_is_an_unknown_session(tmp_path: Path) -> None:
    async with fleet(tmp_path, 3) as running, httpx.AsyncClient(timeout=30) as client:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        opened = await client.post(running.url, json=initialize, headers=headers)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        tag, _, random = session.partition(".")
        assert tag in ("n1", "n2", "n3")
        versioned = {**headers, "mcp-protocol-version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        ok = await client.post(
            running.url, json=note, headers={**versioned, "mcp-session-id": session}
        )
        assert ok.status_code == 202
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        # The real id: every request reaches its node (round robin would miss 2 in 3).
        for _ in range(9):
            answered = await client.post(
                running.url, json=ping, headers={**versioned, "mcp-session-id": session}
            )
            assert answered.status_code == 200, answered.text
        others = [n for n in ("n1", "n2", "n3") if n != tag]
        for forged in [f"{others[0]}.{random}", f"{others[1]}.{random}", f"n9.{random}", random]:
            refused = await client.post(
                running.url, json=ping, headers={**versioned, "mcp-session-id": forged}
            )
            assert refused.status_code == 404, (forged, refused.text)
            assert refused.json()["error"]["message"] == "Session not found"


async def multi_round_trips(url: str, count: int) -> tuple[int, int, list[str]]:
    """``count`` calls of ``ask``, one after another (so strict round robin sends each retry
    to another backend than its question): how many were answered, how many of those by another
    process than the one that asked, and the errors of the others."""
    answered = elsewhere = 0
    errors: list[str] = []

    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(url, mode="modern", on_elicit=on_elicit) as client:
        for _ in range(count):
            try:
                result = await client.call_tool("ask", {})
            except MCPError as error:
                errors.append(str(error))
                continue
            assert result.structured_content is not None and not result.is_error
            content = result.structured_content
            assert content["name"] == "Ada"
            answered += 1
            elsewhere += content["asked_by"] != content["answered_by"]
    return answered, elsewhere, errors


async def test_multi_round_trip_retries_land_elsewhere_with_shared_keys(tmp_path: Path) -> None:
    keys = {"TRIO_MCP_STATE_KEYS": (b"k" * 32).hex()}
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER), env=keys) as running:
        with trio.fail_after(DRIVER_GUARD):
            answered, elsewhere, errors = await multi_round_trips(running.url, 100)
    assert errors == [] and answered == 100
    assert elsewhere >= 90, elsewhere  # round robin: the retry is the next backend's request
    # The control: with a random key per process, a retry that lands elsewhere is refused.
    control = tmp_path / "control"
    control.mkdir()
    async with fleet(control, 3, server=str(FLEET_SERVER)) as running:
        with trio.fail_after(DRIVER_GUARD):
            answered, elsewhere, errors = await multi_round_trips(running.url, 10)
    assert elsewhere == 0 and len(errors) >= 8, (answered, errors)
    assert all("requestState" in error for error in errors), errors


# -- across backends, on a shared Redis ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_listen_streams_hear_a_change_made_through_another_backend(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """Three modern listen streams (round robin puts one on each backend) and a handshake GET
    stream on the node its session id names all hear each ``grow``, wherever it ran."""
    (tmp_path / "fleet").mkdir()
    async with (
        shared_redis(kind, tmp_path, request) as redis_url,
        fleet(
            tmp_path / "fleet", 3, server=str(FLEET_SERVER), options=["--redis-url", redis_url]
        ) as running,
        httpx.AsyncClient(timeout=60) as http,
        open_client(running.url, mode="modern") as client,
    ):
        session = await open_session(http, running.url)
        holder = running.backend(session.partition(".")[0]).pid
        get_headers = session_headers(session, accept="text/event-stream")
        with trio.fail_after(DRIVER_GUARD):
            async with (
                http.stream("GET", running.url, headers=get_headers) as get,
                client.listen(tools=True) as first,
                client.listen(tools=True) as second,
                client.listen(tools=True) as third,
            ):
                assert get.status_code == 200
                stream = SseReader(get)
                listens = [first, second, third]
                for listen in listens:
                    await listen.wait_acknowledged()
                grown_on = []
                for number in range(3):
                    grown = await client.call_tool("grow", {"name": f"grown{number}"})
                    assert grown.structured_content is not None
                    grown_on.append(grown.structured_content["pid"])
                    for listen in listens:
                        note = await listen.__anext__()
                        assert note.method == "notifications/tools/list_changed"
                    message = await stream.message()
                    assert message["method"] == "notifications/tools/list_changed"
        # Round robin spread the changes: some ran on another backend than the GET stream's.
        assert any(pid != holder for pid in grown_on), grown_on
        assert len(set(grown_on)) >= 2, grown_on


async def test_with_redis_stopped_the_backends_serve_what_does_not_need_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "fleet").mkdir()
    async with (
        redis_server(tmp_path) as redis,
        fleet(
            tmp_path / "fleet", 3, server=str(FLEET_SERVER), options=["--redis-url", redis.url]
        ) as running,
        httpx.AsyncClient(timeout=60) as http,
    ):
        await redis.stop()
        with trio.fail_after(DRIVER_GUARD):
            pids: Counter[int] = Counter()
            async with open_client(running.url, mode="modern") as client:
                for _ in range(30):
                    result = await client.call_tool("backend", {})
                    assert result.structured_content is not None
                    pids[result.structured_content["pid"]] += 1
            assert_spread(dict(pids), running, 30)
            # A handshake session opens and answers (its streams are not resumable meanwhile).
            session = await open_session(http, running.url)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            answered = await http.post(running.url, json=ping, headers=session_headers(session))
            assert answered.status_code == 200, answered.text
        assert all(b.process.poll() is None for b in running.backends)


@pytest.mark.parametrize("kind", KINDS)
async def test_sigkill_mid_stream_then_the_resume_is_served_by_another_backend(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """The node holding a session dies with SIGKILL while a request of it streams; the client's
    resume goes through nginx (the map, then the dead node's backups) to another backend, which
    replays what was missed from the shared store: a finished request's result, and for the
    request cut mid-stream every event it stored, then an error response, never a hang."""
    (tmp_path / "fleet").mkdir()
    async with (
        shared_redis(kind, tmp_path, request) as redis_url,
        fleet(
            tmp_path / "fleet", 3, server=str(FLEET_SERVER), options=["--redis-url", redis_url]
        ) as running,
        httpx.AsyncClient(timeout=60) as client,
    ):
        with trio.fail_after(DRIVER_GUARD):
            session = await open_session(client, running.url)
            victim = running.backend(session.partition(".")[0])
            # Finished while its client was away: 10 progress events and a result, stored.
            body = call_body("done", "sleep", {"seconds": 1})
            finished = await read_then_drop(client, running.url, session, body, 3)
            assert progress_of(finished) == ["slept 0.1s", "slept 0.2s"]
            await trio.sleep(1.5)
            # Cut by the kill, mid-stream.
            body = call_body("cut", "sleep", {"seconds": 60})
            headers = session_headers(session)
            seen: list[SseEvent] = []
            async with client.stream("POST", running.url, json=body, headers=headers) as reply:
                reader = SseReader(reply)
                while len(seen) < 4:
                    event = await reader.next()
                    assert event is not None
                    seen.append(event)
                victim.kill()
                await victim.wait()
                try:
                    while await reader.next() is not None:
                        pass
                except httpx.HTTPError:
                    pass  # cut: what a client of a dead backend sees
            # The result nobody read, from another backend.
            status, events = await resume(client, running.url, session, finished[-1].id or "")
            assert status == 200
            ticks = [f"slept {tenth / 10:.1f}s" for tenth in range(3, 11)]
            assert progress_of(events) == ticks
            assert events[-1].json()["id"] == "done"
            assert events[-1].json()["result"]["content"][0]["text"] == "slept 1s"
            # The cut request: every event it stored after the last one seen, then its end.
            status, events = await resume(client, running.url, session, seen[-1].id or "")
            assert status == 200
            resumed = progress_of(events)
            # Contiguous with what was seen: nothing lost in between.
            assert resumed == [f"slept {t / 10:.1f}s" for t in range(4, 4 + len(resumed))]
            end = events[-1].json()
            assert end["id"] == "cut" and "error" in end, end
    assert victim.process.returncode is not None


# -- drain -------------------------------------------------------------------------------------


@attrs.define
class Load:
    """Fresh modern calls in a loop while a backend drains: when each started, who answered."""

    answers: list[tuple[float, int]] = attrs.Factory(list)
    failures: list[str] = attrs.Factory(list)

    async def run(self, client: httpx.AsyncClient, url: str, stop: trio.Event) -> None:
        rid = 0
        while not stop.is_set():
            rid += 1
            started = trio.current_time()
            response = await client.post(
                url, json=modern_call(rid, "backend"), headers=modern_headers("backend")
            )
            body = response.json() if response.status_code == 200 else None
            if body is None or "result" not in body:
                self.failures.append(f"{response.status_code}: {response.text[:300]}")
                continue
            self.answers.append((started, body["result"]["structuredContent"]["pid"]))


async def sleep_call(
    client: httpx.AsyncClient, url: str, rid: int, seconds: float, streaming: trio.Event
) -> dict[str, Any]:
    """A ``sleep`` with progress (an SSE response): the last message, once the stream ends."""
    body = modern_call(rid, "sleep", {"seconds": seconds})
    body["params"]["_meta"]["progressToken"] = rid
    last: dict[str, Any] = {}
    async with client.stream("POST", url, json=body, headers=modern_headers("sleep")) as reply:
        assert reply.status_code == 200
        async for line in reply.aiter_lines():
            if line.startswith("data: "):
                last = json.loads(line[len("data: ") :])
                streaming.set()
    return last


async def drain_one(
    tmp_path: Path, *, grace: float, seconds: float
) -> tuple[list[dict[str, Any]], Load, float, Fleet, int]:
    """Six ``sleep`` calls streaming across the three backends, fresh calls in a loop, then
    SIGTERM to n2: what the sleeps ended with, the load, when n2's readiness said 503, and the
    fleet with n2's exit status."""
    options = ["--drain-grace", str(grace)]
    async with fleet(tmp_path, 3, server=str(FLEET_SERVER), options=options) as running:
        victim = running.backend("n2")
        async with httpx.AsyncClient(timeout=60) as client:
            ends: dict[int, dict[str, Any]] = {}
            load = Load()
            stop = trio.Event()
            with trio.fail_after(DRIVER_GUARD):
                async with trio.open_nursery() as nursery:

                    async def sleeper(rid: int, streaming: trio.Event) -> None:
                        ends[rid] = await sleep_call(client, running.url, rid, seconds, streaming)

                    for rid in range(6):
                        streaming = trio.Event()
                        nursery.start_soon(sleeper, rid, streaming)
                        await streaming.wait()
                    for _ in range(4):
                        nursery.start_soon(load.run, client, running.url, stop)
                    await trio.sleep(0.3)
                    victim.terminate()
                    with trio.fail_after(1):  # "at once": hang guard of the flip
                        ready = victim.base + "/ready"
                        while (await client.get(ready)).status_code != 503:  # noqa: ASYNC110
                            await trio.sleep(0.01)
                    flipped = trio.current_time()
                    await trio.sleep(seconds + 0.5)
                    stop.set()
                status = await victim.wait()
        return [ends[rid] for rid in sorted(ends)], load, flipped, running, status


async def test_drain_with_the_grace_to_finish_loses_nothing(tmp_path: Path) -> None:
    sleeps, load, flipped, running, status = await drain_one(tmp_path, grace=5, seconds=1.5)
    assert status == 0
    # Every call in flight, on the drained backend too, finished normally.
    assert [end.get("result", end)["content"][0]["text"] for end in sleeps] == ["slept 1.5s"] * 6
    # No client-visible failure: what reached n2 while draining was sent on by nginx (503).
    assert load.failures == []
    victim = running.backend("n2").pid
    after = [pid for started, pid in load.answers if started > flipped]
    assert after and victim not in after
    assert {pid for _, pid in load.answers} <= {b.pid for b in running.backends}


async def test_drain_past_the_grace_ends_calls_with_a_retry_error(tmp_path: Path) -> None:
    sleeps, load, _, _, status = await drain_one(tmp_path, grace=0.5, seconds=3)
    assert status == 0
    finished = [s for s in sleeps if "result" in s]
    cut = [s for s in sleeps if "error" in s]
    assert len(finished) + len(cut) == 6, sleeps
    # The drained backend's calls end with the error that says to retry, never a silent end.
    assert 1 <= len(cut) <= 3, sleeps
    for end in cut:
        assert end["error"] == {"code": -32603, "message": CUT_BY_SHUTDOWN, "data": {"retry": True}}
    assert all(s["result"]["content"][0]["text"] == "slept 3s" for s in finished)
    assert load.failures == []


def test_the_deploy_page_shows_the_config_the_tests_run() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    assert "```nginx\n" + NGINX_CONF.read_text() + "```\n" in page
