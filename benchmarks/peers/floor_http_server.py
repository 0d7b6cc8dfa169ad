"""The HTTP floor: a bare ASGI app, no MCP, for ``hypercorn --worker-class trio``.

    BENCH_SSE=1 hypercorn --worker-class trio --bind 127.0.0.1:PORT \\
        benchmarks/peers/floor_http_server.py:app

What any JSON-RPC-over-HTTP server must do at the least, under the same hypercorn trio worker as
trio_mcp's server: read the request body, decode it with orjson, and answer a request with
``{"jsonrpc", "id", "result"}`` whose result has the shape an MCP server gives
``tools/call echo`` (``params.arguments.text`` in one text content block), encoded with orjson.
A message without an id (a notification) gets 202 and no body. No header is checked, no session
kept. With ``BENCH_SSE=1`` the answer is one SSE event (``event: message``, ``data: ...``) on a
``text/event-stream`` response, as a Streamable HTTP server streams it; otherwise a JSON body.

With ``BENCH_READY``, each worker appends its pid to that file when it has imported this module.

Concessions so that the MCP drivers run unchanged: ``initialize`` gets a canned result and an
``Mcp-Session-Id`` header (always the same), and the headers of either era are accepted.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

SSE = os.environ.get("BENCH_SSE") == "1"
SESSION = b"floor-session"
INITIALIZE_RESULT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bare-hypercorn-floor", "version": "0.0.0"},
}
JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
if os.environ.get("BENCH_READY"):
    with open(os.environ["BENCH_READY"], "a") as ready:
        ready.write(f"{os.getpid()}\n")


def result_for(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params") or {}
    if message.get("method") == "initialize":
        version = params.get("protocolVersion") or INITIALIZE_RESULT["protocolVersion"]
        return {**INITIALIZE_RESULT, "protocolVersion": version}
    text = (params.get("arguments") or {}).get("text", "")
    return {"content": [{"type": "text", "text": text}]}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            if event["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif event["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = orjson.loads(body) if body else None
    if not isinstance(message, dict) or message.get("id") is None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)})
    headers = list(SSE_HEADERS if SSE else JSON_HEADERS)
    if message.get("method") == "initialize":
        headers.append((b"mcp-session-id", SESSION))
    if SSE:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send(
            {"type": "http.response.body", "body": b"event: message\ndata: " + reply + b"\n\n"}
        )
        return
    headers.append((b"content-length", str(len(reply)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})
