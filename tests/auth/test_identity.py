"""Principals whose pieces collide under a joined form stay two principals, through a real
hypercorn on loopback: static tokens map to ``sub "alice\\x1fapp"`` with client ``"web"`` and to
``sub "alice"`` with client ``"app\\x1fweb"`` (one string each under the old U+001F-joined
identity). Neither reads the other's task result, session or sealed requestState."""

from __future__ import annotations

from typing import Any

import orjson
import trio

from trio_mcp import Auth, Context, Principal, Server, StaticTokenVerifier
from trio_mcp.protocol._tasks import TASKS_EXTENSION

from .._http import GUARD, VERSION, Served, initialize_body, request_body, serving

ISSUER = "https://auth.example.com"
RESOURCE = "https://mcp.example.com/mcp"
MODERN = "2026-07-28"
FIRST = Principal("alice\x1fapp", "web", frozenset({"mcp"}), issuer=ISSUER)
SECOND = Principal("alice", "app\x1fweb", frozenset({"mcp"}), issuer=ISSUER)
FIRST_TOKEN = "first-token-0123456789abcdef"
SECOND_TOKEN = "second-token-0123456789abcdef"
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def colliding_server() -> Server:
    verifier = StaticTokenVerifier({FIRST_TOKEN: FIRST, SECOND_TOKEN: SECOND})
    server = Server("identities", "1.0", auth=Auth(verifier, RESOURCE))

    @server.tool(task=True)
    async def secret(ctx: Context) -> str:
        assert ctx.auth is not None
        return f"the secret of {ctx.auth.subject!r}"

    @server.tool()
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME_FORM)
        return f"Hello {(answer.content or {}).get('name')}"

    return server


def meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


async def modern(served: Served, token: str, method: str, name: str, params: dict[str, Any]) -> Any:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        "mcp-name": name,
    }
    response = await served.client.post(
        served.url, content=orjson.dumps(request_body(1, method, params)), headers=headers
    )
    return response.json()


async def test_colliding_principals_never_read_each_others_task_result() -> None:
    assert "\x1f".join((ISSUER, FIRST.subject or "", FIRST.client_id or "")) == "\x1f".join(
        (ISSUER, SECOND.subject or "", SECOND.client_id or "")
    )
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    with trio.fail_after(GUARD):
        async with serving(colliding_server()) as served:
            call = {"name": "secret", "arguments": {}, "_meta": meta(caps)}
            created = await modern(served, FIRST_TOKEN, "tools/call", "secret", call)
            task_id = created["result"]["taskId"]
            get = {"taskId": task_id, "_meta": meta(caps)}
            while True:
                mine = await modern(served, FIRST_TOKEN, "tasks/get", task_id, get)
                if mine["result"]["status"] == "completed":
                    break
                await trio.sleep(0.02)
            assert mine["result"]["result"]["content"][0]["text"] == "the secret of 'alice\\x1fapp'"
            for method in ("tasks/get", "tasks/cancel"):
                theirs = await modern(served, SECOND_TOKEN, method, task_id, get)
                assert theirs["error"]["code"] == -32602, method
                assert theirs["error"]["message"] == "Invalid params: unknown task"
                assert "result" not in theirs


async def test_colliding_principals_never_share_a_session() -> None:
    with trio.fail_after(GUARD):
        async with serving(colliding_server()) as served:

            def headers(token: str, session: str | None = None) -> dict[str, str]:
                return served.headers(session, authorization=f"Bearer {token}")

            opened = await served.post(
                initialize_body(VERSION),
                headers=served.headers(version=None, authorization=f"Bearer {FIRST_TOKEN}"),
            )
            assert opened.status_code == 200, opened.text
            session = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            ok = await served.post(note, headers=headers(FIRST_TOKEN, session))
            assert ok.status_code == 202
            replay = await served.post(
                request_body(2, "tools/list"), headers=headers(SECOND_TOKEN, session)
            )
            assert replay.status_code == 404
            assert replay.json()["error"] == {"code": -32600, "message": "Session not found"}
            get = await served.client.get(
                served.url,
                headers=headers(SECOND_TOKEN, session) | {"accept": "text/event-stream"},
            )
            assert get.status_code == 404
            mine = await served.post(
                request_body(3, "tools/list"), headers=headers(FIRST_TOKEN, session)
            )
            assert mine.status_code == 200


async def test_colliding_principals_never_open_each_others_request_state() -> None:
    caps: dict[str, Any] = {"elicitation": {}}
    with trio.fail_after(GUARD):
        async with serving(colliding_server()) as served:
            first = await modern(
                served, FIRST_TOKEN, "tools/call", "greet", {"name": "greet", "_meta": meta(caps)}
            )
            assert first["result"]["resultType"] == "input_required", first
            [key] = first["result"]["inputRequests"]
            retry = {
                "name": "greet",
                "_meta": meta(caps),
                "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
                "requestState": first["result"]["requestState"],
            }
            theirs = await modern(served, SECOND_TOKEN, "tools/call", "greet", retry)
            assert theirs["error"]["code"] == -32602, theirs
            assert "requestState is not valid" in theirs["error"]["message"]
            mine = await modern(served, FIRST_TOKEN, "tools/call", "greet", retry)
            assert mine["result"]["content"][0]["text"] == "Hello Ada", mine
