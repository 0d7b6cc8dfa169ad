"""Handshake sessions on any worker, for real: three ``--any-worker`` backends sharing a real
Redis, behind nginx with plain round robin (no ``map`` on the session id). Every request of a
session may land on any backend: the session records, the replicas and the relay make each
one served as by the backend that opened it. The last test puts them behind the shipped
``map`` instead: a session keeps to its node while it lives, and its backups take it over.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trio

from .._http import SseReader, call_body, cancel_body, initialize_body, parse_sse, request_body
from ._fleet import FLEET_SERVER, Fleet, fleet
from ._services import KINDS, Redis, redis_server, shared_redis
from .test_fleet import DRIVER_GUARD, run_driver

HANDSHAKE = "2025-06-18"
#: How long a worker may take to notice its Redis answers again (its circuit probes every
#: 0.5 s and lets a command retry after 1 s), with room for a loaded machine.
RECOVERY_GUARD = 20


def headers(session: str | None = None, **extra: str) -> dict[str, str]:
    out = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": HANDSHAKE,
    }
    if session is not None:
        out["mcp-session-id"] = session
    return {**out, **{k.replace("_", "-"): v for k, v in extra.items()}}


@asynccontextmanager
async def anywhere(
    tmp_path: Path, kind: str = "single", request: pytest.FixtureRequest | None = None
) -> AsyncIterator[Fleet]:
    """Three ``--any-worker`` backends on a Redis of ``kind`` (see :func:`shared_redis`)."""
    if kind == "single":
        async with anywhere_on_redis(tmp_path) as (running, _):
            yield running
        return
    assert request is not None
    (tmp_path / "fleet").mkdir()
    async with (
        shared_redis(kind, tmp_path, request) as url,
        fleet(
            tmp_path / "fleet",
            3,
            server=str(FLEET_SERVER),
            options=["--redis-url", url, "--any-worker"],
            routing="any",
        ) as running,
    ):
        yield running


@asynccontextmanager
async def anywhere_on_redis(
    tmp_path: Path, routing: str = "any"
) -> AsyncIterator[tuple[Fleet, Redis]]:
    (tmp_path / "fleet").mkdir()
    async with (
        redis_server(tmp_path) as redis,
        fleet(
            tmp_path / "fleet",
            3,
            server=str(FLEET_SERVER),
            options=["--redis-url", redis.url, "--any-worker"],
            routing=routing,
        ) as running,
    ):
        yield running, redis


async def open_session(
    client: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None
) -> str:
    body = initialize_body(HANDSHAKE, capabilities)
    opened = await client.post(url, json=body, headers=headers())
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await client.post(url, json=note, headers=headers(session))).status_code == 202
    return session


async def result_of(client: httpx.AsyncClient, url: str, session: str, body: Any) -> Any:
    response = await client.post(url, json=body, headers=headers(session))
    assert response.status_code == 200, response.text
    messages = [e.json() for e in parse_sse(response.text) if e.data]
    return messages


def logs_of(messages: list[Any]) -> list[Any]:
    return [m["params"]["data"] for m in messages if m.get("method") == "notifications/message"]


async def test_the_official_python_client_runs_sessions_behind_round_robin(
    tmp_path: Path,
) -> None:
    async with anywhere(tmp_path) as running:
        command = [sys.executable, "-m", "tests.deploy._py_fleet_client", running.url]
        report = await run_driver([*command, "30", "5", "6"])
        assert report["errors"] == []
        assert (report["sessions_ok"], report["calls_ok"]) == (30, 150)


async def test_the_typescript_client_runs_sessions_behind_round_robin(tmp_path: Path) -> None:
    async with anywhere(tmp_path) as running:
        driver = str(Path(__file__).with_name("ts_fleet_client.mjs"))
        report = await run_driver(["node", driver, running.url, "30", "5", "6"])
        assert report["errors"] == []
        assert (report["sessions_ok"], report["calls_ok"]) == (30, 150)


@pytest.mark.parametrize("kind", KINDS)
async def test_every_backend_serves_one_session(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    async with (
        anywhere(tmp_path, kind, request) as running,
        httpx.AsyncClient(timeout=60) as client,
    ):
        session = await open_session(client, running.url)
        nodes = set()
        for rid in range(9):
            messages = await result_of(client, running.url, session, call_body(rid, "backend"))
            nodes.add(orjson.loads(messages[-1]["result"]["content"][0]["text"])["node"])
        assert nodes == {"n1", "n2", "n3"}  # round robin: each took some of its calls


@pytest.mark.parametrize("kind", KINDS)
async def test_an_elicitation_answered_on_another_backend(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    async with (
        anywhere(tmp_path, kind, request) as running,
        httpx.AsyncClient(timeout=60) as client,
    ):
        session = await open_session(client, running.url, {"elicitation": {}})
        for rid in range(3):
            body = orjson.dumps(call_body(rid, "ask"))
            with trio.fail_after(DRIVER_GUARD):
                async with client.stream(
                    "POST", running.url, content=body, headers=headers(session)
                ) as stream:
                    reader = SseReader(stream)
                    asked = await reader.message()
                    assert asked["method"] == "elicitation/create"
                    asker = asked["id"].partition("/")[0]  # the id names the node that waits
                    other = next(b for b in running.backends if b.node_id != asker)
                    answer = {
                        "jsonrpc": "2.0",
                        "id": asked["id"],
                        "result": {"action": "accept", "content": {"name": f"Ada{rid}"}},
                    }
                    posted = await client.post(
                        other.base + "/mcp", json=answer, headers=headers(session)
                    )
                    assert posted.status_code == 202, posted.text
                    done = await reader.message()
            result = orjson.loads(done["result"]["content"][0]["text"])
            assert result["name"] == f"Ada{rid}"


async def test_a_cancel_that_lands_on_another_backend_stops_the_handler(tmp_path: Path) -> None:
    async with anywhere(tmp_path) as running, httpx.AsyncClient(timeout=60) as client:
        session = await open_session(client, running.url)
        first, second = running.backends[0], running.backends[1]
        body = orjson.dumps(call_body("long", "sleep", {"seconds": 600}))
        with trio.fail_after(DRIVER_GUARD):
            async with client.stream(
                "POST", first.base + "/mcp", content=body, headers=headers(session)
            ) as stream:
                reader = SseReader(stream)
                progress = await reader.message()
                assert progress["method"] == "notifications/progress"  # it runs on n1
                posted = await client.post(
                    second.base + "/mcp", json=cancel_body("long"), headers=headers(session)
                )
                assert posted.status_code == 202
                rest = await reader.rest()  # ends long before the 600 s: the handler stopped
        assert all("result" not in e.json() for e in rest if e.data)
        # The session goes on, everywhere.
        for backend in running.backends:
            url = backend.base + "/mcp"
            assert "result" in (await result_of(client, url, session, request_body(1, "ping")))[-1]


async def test_set_level_on_one_backend_applies_to_logs_another_sends(tmp_path: Path) -> None:
    async with anywhere(tmp_path) as running, httpx.AsyncClient(timeout=60) as client:
        session = await open_session(client, running.url)
        urls = {b.node_id: b.base + "/mcp" for b in running.backends}
        for url in urls.values():  # every backend holds a copy before the change
            messages = await result_of(client, url, session, call_body(1, "chatty"))
            assert logs_of(messages) == ["fine", "bad"]
        level = request_body(2, "logging/setLevel", {"level": "error"})
        assert (await result_of(client, urls["n1"], session, level))[-1]["result"] == {}
        for node in ("n2", "n3"):
            messages = await result_of(client, urls[node], session, call_body(3, "chatty"))
            logs = [
                m["params"]["data"] for m in messages if m.get("method", "").endswith("message")
            ]
            assert logs == ["bad"], (node, messages)
        # A DELETE on one ends it on all.
        deleted = await client.delete(urls["n3"], headers=headers(session))
        assert deleted.status_code == 200
        for url in urls.values():
            gone = await client.post(url, json=request_body(4, "ping"), headers=headers(session))
            assert gone.status_code == 404


async def test_with_redis_stopped_held_sessions_go_on_and_new_ones_fail_clearly(
    tmp_path: Path,
) -> None:
    async with (
        anywhere_on_redis(tmp_path) as (running, redis),
        httpx.AsyncClient(timeout=60) as client,
    ):
        session = await open_session(client, running.url)
        urls = [b.base + "/mcp" for b in running.backends]
        for url in urls:  # every backend holds a copy
            assert "result" in (await result_of(client, url, session, request_body(1, "ping")))[-1]
        await redis.stop()
        for url in urls:
            answer = await result_of(client, url, session, call_body(2, "echo", {"text": "on"}))
            assert answer[-1]["result"]["content"][0]["text"] == "on"
        refused = await client.post(urls[0], json=initialize_body(HANDSHAKE), headers=headers())
        assert refused.status_code == 503
        assert "could not be recorded" in refused.json()["error"]["message"]
        await redis.start()
        with trio.fail_after(DRIVER_GUARD):
            while True:
                opened = await client.post(
                    urls[0], json=initialize_body(HANDSHAKE), headers=headers()
                )
                if opened.status_code == 200:
                    break
                await trio.sleep(0.2)
        again = opened.headers["mcp-session-id"]
        # Every worker's circuit closes by itself, each within about its probe interval of
        # Redis answering again (not at once with the first's): the other worker is asked
        # until it has, as a client that honours Retry-After would.
        with trio.fail_after(RECOVERY_GUARD):
            while True:
                ping = request_body(3, "ping")
                answer = await client.post(urls[1], json=ping, headers=headers(again))
                if answer.status_code != 503:
                    break
                await trio.sleep(0.2)
        assert answer.status_code == 200, answer.text
        assert "result" in [e.json() for e in parse_sse(answer.text) if e.data][-1]


@pytest.mark.parametrize("kind", KINDS)
async def test_the_session_outlives_the_backend_that_opened_it(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    async with (
        anywhere(tmp_path, kind, request) as running,
        httpx.AsyncClient(timeout=60) as client,
    ):
        opener = running.backends[0]
        session = await open_session(client, opener.base + "/mcp")
        opener.kill()  # SIGKILL: nothing of it says goodbye
        await opener.wait()
        for rid in range(6):  # round robin over the two left (nginx skips the dead one)
            body = call_body(rid, "echo", {"text": f"after{rid}"})
            answer = await result_of(client, running.url, session, body)
            assert answer[-1]["result"]["content"][0]["text"] == f"after{rid}"


async def test_behind_the_shipped_map_a_session_keeps_to_its_node_and_outlives_it(
    tmp_path: Path,
) -> None:
    # deploy/nginx.conf as shipped, its map on the session id: every request of a session
    # reaches the node that opened it, so no other builds a copy (the tagged fleet's cost per
    # call); once that node is gone, its upstream's backups serve the session from its record.
    async with (
        anywhere_on_redis(tmp_path, routing="map") as (running, _),
        httpx.AsyncClient(timeout=60) as client,
    ):
        session = await open_session(client, running.url)
        opener = session.partition(".")[0]

        async def nodes_of(calls: range) -> set[str]:
            nodes = set()
            for rid in calls:
                messages = await result_of(client, running.url, session, call_body(rid, "backend"))
                nodes.add(orjson.loads(messages[-1]["result"]["content"][0]["text"])["node"])
            return nodes

        assert await nodes_of(range(6)) == {opener}
        victim = next(b for b in running.backends if b.node_id == opener)
        victim.kill()  # SIGKILL: nothing of it says goodbye
        await victim.wait()
        after = await nodes_of(range(6, 12))
        assert after and opener not in after
