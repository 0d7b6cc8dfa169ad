"""Session records through the HTTP app: written when ``initialize`` succeeds and when the client
changes its log level or subscriptions (before it is answered), deleted on DELETE; a session
store lost mid-run is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_mcp._demo import demo_server
from trio_mcp.http import HttpOptions, Limits, ScaleOut
from trio_mcp.http._session_store import MemorySessionStore, SessionRecord
from trio_mcp.redis._session_store import RedisSessionStore

from .._http import VERSION, error_of, initialize_body, request_body, serving
from .._ports import free_port
from ..deploy._services import redis_server


async def test_initialize_writes_the_record_and_changes_rewrite_it() -> None:
    store = MemorySessionStore()
    server = demo_server()
    async with serving(
        server, HttpOptions(scale_out=ScaleOut(session_store=store, node_id="n1"))
    ) as served:
        session = await served.initialize(capabilities={"elicitation": {}})
        record = await store.get(session)
        assert record == SessionRecord(
            "",
            VERSION,
            {"name": "raw-http", "version": "0"},
            {"elicitation": {}},
            served.app.sessions[session].connection.state.announced,
            None,
            frozenset(),
        )
        assert record.announced  # what the client was told of, kept whole
        level = await served.call(session, request_body(1, "logging/setLevel", {"level": "error"}))
        assert level["result"] == {}
        sub = {"uri": "demo://a"}
        await served.call(session, request_body(2, "resources/subscribe", sub))
        await served.call(session, request_body(3, "resources/subscribe", {"uri": "demo://b"}))
        await served.call(session, request_body(4, "resources/unsubscribe", sub))
        record = await store.get(session)
        assert record is not None
        assert (record.log_level, record.subscriptions) == ("error", frozenset({"demo://b"}))
        response = await served.client.delete(served.url, headers=served.headers(session))
        assert response.status_code == 200
        assert await store.get(session) is None


async def test_a_refused_initialize_writes_nothing() -> None:
    store = MemorySessionStore()
    async with serving(
        demo_server(), HttpOptions(scale_out=ScaleOut(session_store=store, node_id="n1"))
    ) as served:
        body = initialize_body()
        del body["params"]["clientInfo"]
        response = await served.post(body, version=None)
        assert "mcp-session-id" not in response.headers
        assert store._records == {}


async def test_a_record_expires_with_the_idle_timeout_and_use_refreshes_it() -> None:
    store = MemorySessionStore()
    options = HttpOptions(
        limits=Limits(session_idle_timeout=60),
        scale_out=ScaleOut(session_store=store, node_id="n1"),
    )
    async with serving(demo_server(), options) as served:
        session = await served.initialize()
        before = store._records[session][1]
        await served.call(session, request_body(1, "ping"))
        assert store._records[session][1] > before
        # Past its expiry, it is gone (and the session with it, as for a DELETE elsewhere).
        store._records[session] = (store._records[session][0], 0.0)
        response = await served.post(request_body(2, "ping"), session)
        assert response.status_code == 404
        assert session not in served.app.sessions


async def test_the_session_store_lost_mid_run_is_a_clear_error(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        store = RedisSessionStore(redis.url, timeout=1)
        async with serving(
            demo_server(), HttpOptions(scale_out=ScaleOut(session_store=store, node_id="n1"))
        ) as served:
            session = await served.initialize()
            await redis.stop()
            # The session itself goes on on this worker...
            assert "result" in await served.call(session, request_body(1, "ping"))
            # ...what needs the store fails, saying so.
            level = await served.call(
                session, request_body(2, "logging/setLevel", {"level": "info"})
            )
            assert "session store failed" in level["error"]["message"]
            assert redis.url.split("@")[-1].split("/")[2] in level["error"]["message"]
            response = await served.post(initialize_body(), version=None)
            assert response.status_code == 503
            assert "could not be recorded" in error_of(response)["message"]
            await redis.start()
            fresh = await served.initialize()
            assert await store.get(fresh) is not None


async def test_a_session_store_down_at_start_fails_the_start_naming_it() -> None:
    url = f"redis://probe:hunter2@127.0.0.1:{free_port()}/0"
    options = HttpOptions(
        scale_out=ScaleOut(session_store=RedisSessionStore(url, timeout=1), node_id="n1")
    )
    app = demo_server().http_app(options)
    with pytest.raises(Exception, match="cannot be reached") as raised:
        async with app.running():
            pass
    assert "hunter2" not in str(raised.value)


def test_a_session_store_needs_a_node_id() -> None:
    with pytest.raises(ValueError, match="needs a node_id"):
        demo_server().http_app(HttpOptions(scale_out=ScaleOut(session_store=MemorySessionStore())))
