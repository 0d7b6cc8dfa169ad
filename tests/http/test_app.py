"""Streamable HTTP through a real hypercorn trio worker: every status code, headers, CORS.

The server runs in this test's own Trio run, so tools can share ``trio.Event`` objects with the
test: a request is "in flight" exactly when the test says so, never after a sleep. The client is a
plain ``httpx.AsyncClient`` and SSE is parsed here, so the tests see the exact wire.
This module also holds the harness the other ``test_http_*`` modules use.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio

from trio_mcp import Server
from trio_mcp._demo import demo_server
from trio_mcp.http import HostRules, HttpOptions, Limits, McpHttpApp

from .._http import (
    GUARD,
    VERSION,
    Served,
    call_body,
    cancel_body,
    error_of,
    initialize_body,
    parse_sse,
    request_body,
    serving,
)

# -- 200 -------------------------------------------------------------------------------------------


async def test_initialize_answers_sse_with_a_session_id(demo_http: Served) -> None:
    response = await demo_http.post(initialize_body(), version=None)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    session = response.headers["mcp-session-id"]
    assert session and all(0x21 <= ord(c) <= 0x7E for c in session)
    (event,) = parse_sse(response.text)
    assert event.event == "message"
    message = event.json()
    assert message["id"] == "init"
    assert message["result"]["protocolVersion"] == VERSION
    assert list(demo_http.app.sessions) == [session]


async def test_json_mode_answers_application_json() -> None:
    """JSON mode: one JSON body per request, and a client may accept only application/json."""
    async with serving(demo_server(), HttpOptions(json_response=True)) as served:
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json()["result"]["protocolVersion"] == VERSION
        session = response.headers["mcp-session-id"]
        headers = served.headers(session, accept="application/json")
        response = await served.post(call_body(1, "echo", {"text": "hi"}), headers=headers)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "hi"}]},
        }


async def test_request_sse_stream_is_primed_then_answered() -> None:
    """2025-11-25: a priming event (id, retry, empty data) first, so the stream is resumable."""
    async with serving(demo_server(), HttpOptions(retry_ms=1234)) as served:
        session = await served.initialize()
        response = await served.post(call_body(7, "echo", {"text": "hi"}), session)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        prime, answer = parse_sse(response.text)
        assert prime.data == "" and prime.retry == 1234
        assert prime.id is not None and prime.id.startswith(session + ".")
        assert answer.json()["result"]["content"][0]["text"] == "hi"
        assert answer.id is not None and answer.id.startswith(session + ".")


async def test_notification_method_with_an_id_is_a_request_answered_method_not_found(
    demo_http: Served,
) -> None:
    session = await demo_http.initialize()
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "id": "123"}
    response = await demo_http.post(body, session)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    messages = [e.json() for e in parse_sse(response.text) if e.data]
    assert len(messages) == 1
    assert messages[0]["id"] == "123"
    assert messages[0]["error"]["code"] == -32601
    assert "result" not in messages[0]


# -- 202 -------------------------------------------------------------------------------------------


async def test_notifications_and_client_responses_get_202_with_no_body() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        stray = {"jsonrpc": "2.0", "id": 99, "result": {}}
        for body in (note, stray):
            response = await served.post(body, session)
            assert response.status_code == 202
            assert response.content == b""
            assert "content-type" not in response.headers


# -- 400 -------------------------------------------------------------------------------------------


BAD_REQUESTS: list[tuple[str, bytes, int, str]] = [
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, "single request object"),
    ("string", b'"hello"', -32600, "Invalid Request"),
    ("number", b"42", -32600, "Invalid Request"),
    ("parse error", b'{"jsonrpc": "2.0", "id": 1, "meth', -32700, "Parse error"),
    ("no jsonrpc", b'{"id": 1, "method": "ping"}', -32600, "Invalid Request"),
]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_malformed_bodies_get_400(body: bytes, code: int, message: str) -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        response = await served.post(body, session)
        assert response.status_code == 400
        error = error_of(response)
        assert error["code"] == code
        assert message in error["message"]


async def test_invalid_request_object_gets_400_with_its_id_and_the_detail() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        response = await served.post(b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}', session)
        assert response.status_code == 400
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {
                "code": -32600,
                "message": "Invalid Request",
                "data": 'the "jsonrpc" member must be "2.0"',
            },
        }


async def test_missing_session_id_gets_400(demo_http: Served) -> None:
    await demo_http.initialize()
    for body in (request_body(1, "ping"), cancel_body(1)):
        response = await demo_http.post(body)
        assert response.status_code == 400
        assert error_of(response) == {
            "code": -32600,
            "message": "Bad Request: Missing session ID",
        }


async def test_unsupported_protocol_version_header_gets_400() -> None:
    """Seed (e) 12: an unknown header version is answered by the modern path with -32022 and
    the versions it does speak; an empty one is a plain bad request (-32600)."""
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for value in ("1999-01-01", "not-a-version"):
            response = await served.post(request_body(1, "ping"), session, version=value)
            assert response.status_code == 400, value
            error = error_of(response)
            assert error == {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"], "requested": value},
            }
        response = await served.post(request_body(1, "ping"), session, version="")
        assert response.status_code == 400
        error = error_of(response)
        assert error["code"] == -32600
        assert error["message"].startswith("Bad Request: Unsupported protocol version: .")
        assert VERSION in error["message"]


async def test_second_initialize_on_a_session_gets_400_carrying_the_id() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        response = await served.post(initialize_body(rid="again"), session)
        assert response.status_code == 400
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": "again",
            "error": {"code": -32600, "message": "Invalid Request: Server already initialized"},
        }
        assert list(served.app.sessions) == [session]


# -- protocol version header -----------------------------------------------------------------------


async def test_protocol_version_header_missing_supported_or_modern_on_a_legacy_session() -> None:
    """No header: 2025-03-26 assumed. The session decides: a 2026-07-28 header is tolerated on a
    session that negotiated a handshake version, and the answer stays legacy."""
    async with serving(demo_server()) as served:
        session = await served.initialize("2026-07-28")
        for version in (None, "2025-03-26", "2025-06-18", VERSION, "2026-07-28"):
            response = await served.post(
                request_body("list", "tools/list"), session, version=version
            )
            assert response.status_code == 200, (version, response.text)
            message = [e.json() for e in parse_sse(response.text) if e.data][-1]
            assert message["result"]["tools"]
            assert "resultType" not in message["result"]


async def test_initialize_counter_offers_a_modern_version() -> None:
    async with serving(demo_server()) as served:
        headers = served.headers(version="2026-07-28")
        response = await served.post(initialize_body("2026-07-28"), headers=headers)
        assert response.status_code == 200
        assert "mcp-session-id" in response.headers
        assert parse_sse(response.text)[0].json()["result"]["protocolVersion"] == VERSION


# -- 403 -------------------------------------------------------------------------------------------


async def test_host_not_loopback_gets_403_naming_the_setting() -> None:
    async with serving(demo_server()) as served:
        headers = served.headers(version=None, host="evil.example")
        response = await served.post(initialize_body(), headers=headers)
        assert response.status_code == 403
        error = error_of(response)
        assert "evil.example" in error["message"]
        assert "allowed_hosts" in error["message"]
        assert not served.app.sessions
        # Loopback names pass, with or without a port.
        for host in ("localhost", "127.0.0.1:9", "[::1]:80"):
            headers = served.headers(version=None, host=host)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code == 200, host


async def test_allowed_hosts_replace_the_loopback_rule() -> None:
    async with serving(
        demo_server(), HttpOptions(hosts=HostRules(allowed_hosts=["mcp.example"]))
    ) as served:
        ok = await served.post(initialize_body(), headers=served.headers(host="mcp.example"))
        assert ok.status_code == 200
        refused = await served.post(initialize_body(), headers=served.headers())
        assert refused.status_code == 403
        assert "allowed_hosts" in error_of(refused)["message"]


async def test_a_remembered_pass_never_outlives_its_rules_and_a_refusal_is_never_kept() -> None:
    """Admission remembers the Host and Origin a request passed with, for the next request of
    the same client: never a refusal (refused twice, the same answer), and never across a change
    of the rules (an app whose host rules are replaced checks again)."""
    async with serving(demo_server()) as served:
        for _ in range(2):
            refused = await served.post(initialize_body(), headers=served.headers(host="evil.x"))
            assert refused.status_code == 403
        ok = await served.post(initialize_body(), headers=served.headers(host="localhost"))
        assert ok.status_code == 200
        served.app.options.hosts = HostRules(allowed_hosts=["mcp.example"])
        again = await served.post(initialize_body(), headers=served.headers(host="localhost"))
        assert again.status_code == 403
        assert "allowed_hosts" in error_of(again)["message"]


async def test_origin_not_allowed_gets_403_naming_the_setting() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        headers = served.headers(session, origin="http://evil.example")
        response = await served.post(request_body(1, "ping"), headers=headers)
        assert response.status_code == 403
        error = error_of(response)
        assert "http://evil.example" in error["message"]
        assert "allowed_origins" in error["message"]
        headers = served.headers(session, origin="http://localhost:5173")
        assert (await served.post(request_body(2, "ping"), headers=headers)).status_code == 200
    async with serving(
        demo_server(), HttpOptions(hosts=HostRules(allowed_origins=["https://app.example"]))
    ) as served:
        headers = served.headers(version=None, origin="https://app.example")
        assert (await served.post(initialize_body(), headers=headers)).status_code == 200
        headers = served.headers(version=None, origin="http://localhost")
        response = await served.post(initialize_body(), headers=headers)
        assert response.status_code == 403
        assert "allowed_origins" in error_of(response)["message"]


async def test_host_is_a_name_in_any_case_and_a_numeric_port() -> None:
    """Host names are case-insensitive; a port is digits; anything else is compared exactly."""
    async with serving(demo_server()) as served:
        for host in ("LOCALHOST", "LocalHost:8000", "127.0.0.1:65535", "[::1]", "[::1]:80"):
            headers = served.headers(version=None, host=host)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code == 200, host
        for host in ("localhost:evil", "localhost:", "localhost:80:80", "[::1]:x", "[::1"):
            headers = served.headers(version=None, host=host)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code == 400, host
            assert "not a host name" in error_of(response)["message"]
        for host in ("localhost.evil.example", "localhost.", "127.0.0.1.nip.io", "::1"):
            headers = served.headers(version=None, host=host)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code in (400, 403), host
        assert len(served.app.sessions) == 5
    options = HttpOptions(hosts=HostRules(allowed_hosts=["MCP.example", "other.example:8443"]))
    async with serving(demo_server(), options) as served:
        for host, status in (
            ("mcp.EXAMPLE", 200),
            ("mcp.example:1", 200),
            ("other.example:8443", 200),
            ("other.example", 403),
            ("other.example:443", 403),
            ("mcp.example:evil", 400),
            ("mcp.example.evil", 403),
        ):
            headers = served.headers(version=None, host=host)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code == status, host


async def test_origin_is_a_scheme_a_host_and_a_numeric_port() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for origin in ("http://LOCALHOST:5173", "HTTPS://127.0.0.1", "http://[::1]:3000"):
            headers = served.headers(session, origin=origin)
            response = await served.post(request_body(1, "ping"), headers=headers)
            assert response.status_code == 200, origin
        for origin in (
            "http://localhost:evil",
            "http://localhost.evil.example",
            "http://localhost@evil.example",
            "http://evil.example/http://localhost",
            "http://localhost/",
            "localhost",
            "ftp://localhost",
            "null",
        ):
            headers = served.headers(session, origin=origin)
            response = await served.post(request_body(2, "ping"), headers=headers)
            assert response.status_code == 403, origin
            assert "Origin" in error_of(response)["message"]
    options = HttpOptions(hosts=HostRules(allowed_origins=["https://App.example", "null"]))
    async with serving(demo_server(), options) as served:
        for origin, status in (
            ("https://app.EXAMPLE", 200),
            ("null", 200),
            ("http://app.example", 403),
            ("https://app.example:8443", 403),
            ("https://app.example.evil", 403),
        ):
            headers = served.headers(version=None, origin=origin)
            response = await served.post(initialize_body(), headers=headers)
            assert response.status_code == status, origin


# -- 404, 405, 406, 413, 415 ---------------------------------------------------------------------


async def test_unknown_session_and_wrong_path_get_404(demo_http: Served) -> None:
    response = await demo_http.post(request_body(1, "ping"), "no-such-session")
    assert response.status_code == 404
    assert error_of(response)["message"] == "Session not found"
    response = await demo_http.client.post(
        demo_http.base + "/other",
        content=orjson.dumps(initialize_body()),
        headers=demo_http.headers(),
    )
    assert response.status_code == 404
    assert "/mcp" in error_of(response)["message"]


async def test_trailing_slash_is_served_not_redirected() -> None:
    async with serving(demo_server()) as served:
        served.path = "/mcp/"
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 200
        assert "location" not in response.headers
        session = response.headers["mcp-session-id"]
        assert (await served.call(session, request_body(1, "ping")))["result"] == {}


async def test_other_methods_get_405() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for method in ("PUT", "PATCH", "OPTIONS"):
            response = await served.client.request(
                method, served.url, content=b"{}", headers=served.headers(session)
            )
            assert response.status_code == 405, method
            assert set(response.headers["allow"].replace(" ", "").split(",")) == {
                "GET",
                "POST",
                "DELETE",
            }


async def test_bad_accept_gets_406() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for accept in ("text/html", "application/json", "text/event-stream", ""):
            headers = served.headers(session, accept=accept)
            response = await served.post(request_body(1, "ping"), headers=headers)
            assert response.status_code == 406, accept
            assert "application/json and text/event-stream" in error_of(response)["message"]
        for accept in ("application/json", "text/html"):
            headers = served.headers(session, accept=accept)
            response = await served.client.get(served.url, headers=headers)
            assert response.status_code == 406, accept
            assert "text/event-stream" in error_of(response)["message"]
        # Parameters and other types alongside are fine.
        headers = served.headers(session, accept="text/event-stream;q=0.9, application/json")
        assert (await served.post(request_body(2, "ping"), headers=headers)).status_code == 200


async def test_accept_ranges_follow_http_semantics() -> None:
    """Wildcards admit their types, the most specific range decides, and ``q=0`` refuses."""
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for accept, status in (
            ("application/*, text/*", 200),
            ("*/*", 200),
            ("Application/JSON, Text/Event-Stream", 200),
            ("application/json, text/event-stream;q=0", 406),
            ("application/json;q=0, */*", 406),
            ("application/json, text/event-stream;q=bad", 406),
            ("application/json, text/event-stream; q=0.001", 200),
            ("application/jsonx, text/event-streams", 406),
        ):
            headers = served.headers(session, accept=accept)
            response = await served.post(request_body(1, "ping"), headers=headers)
            assert response.status_code == status, accept
        for accept, status in (
            ("*/*", 200),
            ("text/*", 200),
            ("text/event-stream;q=0, */*", 406),
            ("text/event-stream-x", 406),
        ):
            headers = served.headers(session, accept=accept)
            async with served.client.stream("GET", served.url, headers=headers) as response:
                assert response.status_code == status, accept


@pytest.mark.invariant(11)
async def test_body_over_the_limit_gets_413() -> None:
    async with serving(demo_server(), HttpOptions(limits=Limits(max_body_bytes=1024))) as served:
        session = await served.initialize()
        body = call_body(1, "echo", {"text": "x" * 4096})
        response = await served.post(body, session)
        assert response.status_code == 413
        assert "1024" in error_of(response)["message"]
        small = call_body(2, "echo", {"text": "x" * 100})
        assert (await served.call(session, small))["result"]["content"][0]["text"] == "x" * 100


async def test_wrong_content_type_gets_415() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for content_type in ("text/plain", "application/x-www-form-urlencoded", ""):
            headers = served.headers(session, content_type=content_type)
            response = await served.post(request_body(1, "ping"), headers=headers)
            assert response.status_code == 415, content_type
            assert "application/json" in error_of(response)["message"]
        headers = served.headers(session, content_type="application/json; charset=utf-8")
        assert (await served.post(request_body(2, "ping"), headers=headers)).status_code == 200


async def test_content_type_is_one_json_media_type() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for content_type in (
            "text/plain, application/json",
            "application/json, text/plain",
            "application/json;",
            "application/json; charset",
            "application/json+evil",
        ):
            headers = served.headers(session, content_type=content_type)
            response = await served.post(request_body(1, "ping"), headers=headers)
            assert response.status_code == 415, content_type
        # Sent twice, the header is two media types, not the first of them.
        headers = served.headers(session)
        del headers["content-type"]
        pairs = [*headers.items(), ("content-type", "application/json")]
        pairs.append(("content-type", "text/plain"))
        response = await served.client.post(
            served.url, content=orjson.dumps(request_body(2, "ping")), headers=pairs
        )
        assert response.status_code == 415
        for content_type in ("APPLICATION/JSON", 'application/json ; charset="utf-8"'):
            headers = served.headers(session, content_type=content_type)
            response = await served.post(request_body(3, "ping"), headers=headers)
            assert response.status_code == 200, content_type


async def test_a_protocol_version_header_sent_twice_is_not_one_version() -> None:
    async with serving(demo_server()) as served:
        session = await served.initialize()
        headers = served.headers(session, version=None)
        pairs = [*headers.items(), ("mcp-protocol-version", VERSION)]
        pairs.append(("mcp-protocol-version", "2025-03-26"))
        response = await served.client.post(
            served.url, content=orjson.dumps(request_body(1, "ping")), headers=pairs
        )
        assert response.status_code == 400
        assert "Unsupported protocol version" in error_of(response)["message"]


# -- 503 -------------------------------------------------------------------------------------------


@pytest.mark.invariant(11)
async def test_session_cap_gets_503_with_retry_after() -> None:
    async with serving(demo_server(), HttpOptions(limits=Limits(max_sessions=2))) as served:
        first = await served.initialize()
        await served.initialize()
        response = await served.post(initialize_body(), version=None)
        assert response.status_code == 503
        assert int(response.headers["retry-after"]) > 0
        assert error_of(response)["code"] == -32600
        assert len(served.app.sessions) == 2
        # Existing sessions still work; ending one makes room.
        assert (await served.call(first, request_body(1, "ping")))["result"] == {}
        response = await served.client.delete(served.url, headers=served.headers(first))
        assert response.status_code == 200
        await served.initialize()


async def test_503_while_the_app_shuts_down() -> None:
    """Between the start of the app's shutdown and its end, new requests are refused."""
    server = demo_server()
    entered, stuck, let_go = trio.Event(), trio.Event(), trio.Event()

    @server.tool()
    async def stubborn() -> str:
        try:
            entered.set()
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                stuck.set()
                await let_go.wait()
        return "unreachable"

    async with serving(server, HttpOptions(shutdown_grace=GUARD), lifespan=False) as served:
        stop, stopped = trio.Event(), trio.Event()

        async def run_app(*, task_status: trio.TaskStatus[None]) -> None:
            async with served.app.running():
                task_status.started()
                await stop.wait()
            stopped.set()

        async def call_stubborn(session: str) -> None:
            async with served.stream_post(call_body(1, "stubborn"), session) as reader:
                await reader.rest()

        async with trio.open_nursery() as nursery:
            await nursery.start(run_app)
            session = await served.initialize()
            nursery.start_soon(call_stubborn, session)
            await entered.wait()
            stop.set()
            await stuck.wait()
            for request in (
                served.post(initialize_body(), version=None),
                served.post(request_body(1, "ping"), session),
                served.client.get(served.url, headers=served.headers(session)),
            ):
                response = await request
                assert response.status_code == 503
                assert "shutting down" in error_of(response)["message"]
            assert not stopped.is_set()
            let_go.set()
            await stopped.wait()
        assert not served.app.sessions


# -- CORS ------------------------------------------------------------------------------------------


async def test_cors_preflight_and_exposed_headers() -> None:
    async with serving(
        demo_server(), HttpOptions(hosts=HostRules(cors_origins=["http://app.example"]))
    ) as served:
        preflight = await served.client.options(
            served.url,
            headers={
                "origin": "http://app.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, mcp-session-id",
            },
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "http://app.example"
        methods = preflight.headers["access-control-allow-methods"]
        assert {"GET", "POST", "DELETE"} <= {m.strip() for m in methods.split(",")}
        allowed = {h.strip() for h in preflight.headers["access-control-allow-headers"].split(",")}
        assert {"content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"} <= (
            allowed
        )
        headers = served.headers(version=None, origin="http://app.example")
        response = await served.post(initialize_body(), headers=headers)
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "http://app.example"
        exposed = response.headers["access-control-expose-headers"]
        assert "mcp-session-id" in {h.strip() for h in exposed.split(",")}
        # Errors carry the CORS headers too, so a browser can read them.
        headers = served.headers("nope", origin="http://app.example")
        response = await served.post(request_body(1, "ping"), headers=headers)
        assert response.status_code == 404
        assert response.headers["access-control-allow-origin"] == "http://app.example"
        # Another origin gets no CORS headers (and, on loopback, no service).
        headers = served.headers(version=None, origin="http://other.example")
        response = await served.post(initialize_body(), headers=headers)
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


# -- no internals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("json_response", [False, True])
@pytest.mark.invariant(8)
async def test_no_internal_exception_text_reaches_the_client(json_response: bool) -> None:
    server = demo_server()

    @server.tool()
    async def boom() -> str:
        raise RuntimeError("secret")

    @server.method("custom/boom")
    async def custom_boom(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("secret")

    async with serving(server, HttpOptions(json_response=json_response)) as served:
        session = await served.initialize()
        response = await served.post(call_body(1, "boom"), session)
        assert response.status_code == 200
        assert "secret" not in response.text
        result = (await served.call(session, call_body(2, "boom")))["result"]
        assert result["isError"] is True
        response = await served.post(request_body(3, "custom/boom"), session)
        assert response.status_code == 200
        assert "secret" not in response.text
        error = (await served.call(session, request_body(4, "custom/boom")))["error"]
        assert error["code"] == -32603


def bad_requests(session: str) -> list[tuple[str, dict[str, str], bytes]]:
    """A catalogue of client input that is wrong in every header and body the endpoint reads:
    (method, headers to set over the good ones, body)."""
    ping = orjson.dumps(request_body(1, "ping"))
    modern = {"mcp-protocol-version": "2026-07-28"}
    bodies = [
        b"",
        b"null",
        b"[]",
        b"[" * 100_000,
        b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":7}',
        b"\xff\xfe{}",
        b'{"jsonrpc":"2.0","id":{"a":1},"result":{}}',
    ]
    headers: list[dict[str, str]] = [
        {"mcp-session-id": value} for value in ("", "\u00e9", "x" * 5000, session + ", " + session)
    ]
    headers += [{"mcp-protocol-version": value} for value in ("", "\u00b2", "2025-11-25 x")]
    headers += [{"accept": value} for value in (";", "/", "*/*;q=", "*/*;q=1e9", ",,,")]
    headers += [{"content-type": value} for value in (";", "/", 'application/json;a="', "\u00e9")]
    headers += [{"origin": value} for value in ("://", "http://[", "http://[::1", "\u00e9")]
    headers += [{"host": value} for value in (":", "[]", "[", ":80", "\u00e9")]
    headers += [
        {**modern, "mcp-method": "tools/call", "mcp-name": value}
        for value in ("=?base64?!!!?=", "=?base64??=", "=?base64?\u00e9?=", "x" * 5000)
    ]
    requests: list[tuple[str, dict[str, str], bytes]] = [("POST", {}, body) for body in bodies]
    requests += [("POST", {**modern}, body) for body in bodies]
    requests += [("POST", extra, ping) for extra in headers]
    events = (f"{session}.0.\u00b2", f"{session}.0.{'9' * 5000}", f"{session}..", "..", ".")
    requests += [("GET", {"last-event-id": value}, b"") for value in events]
    requests += [("GET", extra, b"") for extra in headers[:8]]
    requests += [("DELETE", extra, b"") for extra in headers[:4]]
    return requests


async def test_no_client_input_gets_a_500() -> None:
    """Every request of the catalogue is refused with a 4xx or answered; none makes the app
    raise (the harness records what escapes it) or answer 500."""
    async with serving(demo_server()) as served:
        session = await served.initialize()
        for method, extra, body in bad_requests(session):
            headers = served.headers(session)
            headers.update(extra)
            encoded = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
            response = await served.client.request(
                method, served.url, content=body, headers=encoded
            )
            assert response.status_code < 500, (method, extra, body[:40], response.text)
            if response.status_code >= 400 and response.content:
                assert "Traceback" not in response.text
        assert (await served.call(session, request_body(2, "ping")))["result"] == {}
        assert not served.errors


async def test_a_websocket_upgrade_is_refused_not_a_500() -> None:
    async with serving(demo_server()) as served:
        host, port = served.base.removeprefix("http://").rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(
                b"GET /mcp HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            )
            reply = b""
            while b"\r\n" not in reply:
                chunk = await stream.receive_some()
                assert chunk, reply
                reply += chunk
        # The WebSocket endpoint is elsewhere (``HttpOptions.ws_path``): this path says so.
        assert reply.split(b"\r\n", 1)[0] == b"HTTP/1.1 404 "
        assert not served.errors


def test_http_app_takes_its_options_as_one_typed_value() -> None:
    server = Server("typed")
    options = HttpOptions(path="/other", json_response=True)
    app = server.http_app(options)
    assert isinstance(app, McpHttpApp)
    assert app.options is options and app.server is server
    assert server.http_app().options == HttpOptions()
    # A misspelt option fails type checking (mypy's strict run flags an unneeded ignore) and
    # at run time.
    with pytest.raises(TypeError):
        HttpOptions(json_respons=True)  # type: ignore[call-arg]
