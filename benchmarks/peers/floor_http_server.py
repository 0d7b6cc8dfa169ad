"""The HTTP floor: a bare ASGI app, no MCP, for ``hypercorn --worker-class trio``.

    BENCH_SSE=1 hypercorn --worker-class trio --bind 127.0.0.1:PORT \\
        benchmarks/peers/floor_http_server.py:app

What any JSON-RPC-over-HTTP server must do at the least, under the same hypercorn trio worker as
trio_mcp's server: read the request body, decode it with orjson, and answer a request with
``{"jsonrpc", "id", "result"}`` whose result has the shape an MCP server gives
``tools/call echo`` (``params.arguments.text`` in one text content block), encoded with orjson;
a call whose arguments have a ``size`` gets that many characters instead (``blob``, for
``benchmarks/growth.py``).
A message without an id (a notification) gets 202 and no body. No header is checked, no session
kept. With ``BENCH_SSE=1`` the answer is one SSE event (``event: message``, ``data: ...``) on a
``text/event-stream`` response, as a Streamable HTTP server streams it; otherwise a JSON body.

With ``BENCH_READY``, each worker appends its pid to that file when it has imported this module.

Concessions so that the MCP drivers run unchanged: ``initialize`` gets a canned result and an
``Mcp-Session-Id`` header (always the same), and the headers of either era are accepted.

The floor of the HTTP cancel benchmark, with ``BENCH_STAMPS=PATH``: a ``tools/call`` whose
``params.name`` is ``sleep`` is answered on an SSE stream with one progress event 100 ms after
the call, when the MCP servers' ``sleep`` tools send their first (by then, as theirs, a process
woken by its timer), then held open. A POSTed ``notifications/cancelled`` naming it (the
handshake era's cancel), or the client closing that stream (the modern era's), appends a
CLOCK_MONOTONIC timestamp (ns) to ``PATH`` at once, as the MCP servers' ``sleep`` tools do in
their ``finally``: the earliest a server under this hypercorn can observe a cancel. The cancel
POST gets 202; the stream ends.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

import orjson
import trio

SSE = os.environ.get("BENCH_SSE") == "1"
#: When a ``sleep`` call's progress event goes out: the MCP servers' tools report every 100 ms.
PROGRESS_AFTER = 0.1
SESSION = b"floor-session"
INITIALIZE_RESULT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "bare-hypercorn-floor", "version": "0.0.0"},
}
JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
STAMPS_FD = (
    os.open(os.environ["BENCH_STAMPS"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if os.environ.get("BENCH_STAMPS")
    else None
)
#: The ``sleep`` calls being held open, by request id: set when a cancel names them.
SLEEPING: dict[Any, trio.Event] = {}
if os.environ.get("BENCH_READY"):
    with open(os.environ["BENCH_READY"], "a") as ready:
        ready.write(f"{os.getpid()}\n")


def result_for(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params") or {}
    if message.get("method") == "initialize":
        version = params.get("protocolVersion") or INITIALIZE_RESULT["protocolVersion"]
        return {**INITIALIZE_RESULT, "protocolVersion": version}
    arguments = params.get("arguments") or {}
    if "size" in arguments:  # the growth benchmark's ``blob`` call: a result of that size
        return {"content": [{"type": "text", "text": blob(int(arguments["size"]))}]}
    return {"content": [{"type": "text", "text": arguments.get("text", "")}]}


@functools.lru_cache(maxsize=8)
def blob(size: int) -> str:
    """``size`` characters, made once per size, as trio_mcp's benchmark ``blob`` tool does."""
    return "x" * size


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
    if isinstance(message, dict) and (message.get("params") or {}).get("name") == "sleep":
        await sleep(message, receive, send)
        return
    if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
        held = SLEEPING.pop((message.get("params") or {}).get("requestId"), None)
        if held is not None:
            stamp()
            held.set()
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


def stamp() -> None:
    if STAMPS_FD is not None:
        os.write(STAMPS_FD, f"{time.clock_gettime_ns(time.CLOCK_MONOTONIC)}\n".encode())


async def sleep(message: dict[str, Any], receive: Any, send: Any) -> None:
    """One progress event on an SSE stream, then held open until a cancel POST names the call
    or the client closes the stream; either is stamped at once."""
    rid = message.get("id")
    token = ((message.get("params") or {}).get("_meta") or {}).get("progressToken")
    note = {"progressToken": token, "progress": 0, "total": 1}
    event = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
    cancelled = SLEEPING[rid] = trio.Event()
    await send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})
    await trio.sleep(PROGRESS_AFTER)
    await send(
        {
            "type": "http.response.body",
            "body": b"event: message\ndata: " + event + b"\n\n",
            "more_body": True,
        }
    )
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if SLEEPING.pop(rid, None) is not None:  # closed before any cancel POST
                stamp()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await cancelled.wait()
        nursery.cancel_scope.cancel()
    SLEEPING.pop(rid, None)
    try:
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        pass  # the client closed the stream: that was the cancel
