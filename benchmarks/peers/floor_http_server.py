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
``text/event-stream`` response with its ``Content-Length`` (the answer is known whole, as a
Streamable HTTP server that has its answer when it starts the response sends it, trio_mcp's
among them); otherwise a JSON body.

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

With ``BENCH_TASKS=1`` (the floor the handshake era's goals are held to, as the stdio floor's
``--tasks``): each request (``initialize`` aside) is answered by a task of its own, started in a
nursery that outlives the POST (the app's, open for its lifespan, as a session's is), under a
cancel scope of its own kept in a table by request id while it runs; the POST waits for it and
answers. What any server that runs each request of a session in a task of the session's, so
that a cancel or the session's end can reach it, does beyond the floor.

The floors of the two other transports trio_mcp's app serves, each with that transport's framing
and nothing more (the echo answered as above, ``initialize`` canned):

- HTTP+SSE (2024-11-05): ``GET /sse`` opens a stream whose first event (``endpoint``) names
  ``/messages/?session_id=...``; each POST there gets 202 and its answer, if it is a request,
  goes down that stream as an ``event: message``. An unknown session is 404.
- WebSocket: any websocket is accepted with the subprotocol ``mcp``; one JSON-RPC message per
  text frame, a request's answer in a text frame of its own. With ``BENCH_TASKS=1`` each request
  (``initialize`` aside) is answered by a task of its own in a nursery of the socket's, under
  a cancel scope of its own kept in the table while it runs, which sends its answer; the socket
  reads on meanwhile, as trio_mcp's engine does.
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import time
from typing import Any

import orjson
import trio

SSE = os.environ.get("BENCH_SSE") == "1"
TASKS = os.environ.get("BENCH_TASKS") == "1"
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
#: ``BENCH_TASKS``: the nursery of the requests' tasks (open for the app's lifespan), and the
#: cancel scopes of those running, by (client address, request id).
REQUESTS: list[trio.Nursery] = []
RUNNING: dict[tuple[Any, Any], trio.CancelScope] = {}
#: The HTTP+SSE floor's open streams, by session id: where a POST's answer goes.
STREAMS: dict[bytes, trio.MemorySendChannel[bytes]] = {}
LEGACY_SSE_PATH = "/sse"
LEGACY_MESSAGES_PATH = "/messages/"
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
        async with trio.open_nursery() as nursery:
            REQUESTS.append(nursery)
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    nursery.cancel_scope.cancel()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
    if scope["type"] == "websocket":
        await websocket(receive, send)
        return
    if scope["type"] != "http":
        return
    if scope["path"] == LEGACY_SSE_PATH:
        await legacy_stream(receive, send)
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    message = orjson.loads(body) if body else None
    if scope["path"] == LEGACY_MESSAGES_PATH:
        await legacy_message(scope, message, send)
        return
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
    if TASKS and REQUESTS and message.get("method") != "initialize":
        reply = await answered_in_a_task((scope.get("client"), message["id"]), message)
    else:
        reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)})
    headers = list(SSE_HEADERS if SSE else JSON_HEADERS)
    if message.get("method") == "initialize":
        headers.append((b"mcp-session-id", SESSION))
    if SSE:
        reply = b"event: message\ndata: " + reply + b"\n\n"
    headers.append((b"content-length", str(len(reply)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


async def answered_in_a_task(key: tuple[Any, Any], message: dict[str, Any]) -> bytes:
    """``BENCH_TASKS``: the request answered by a task of its own in the requests' nursery,
    under a cancel scope of its own kept in ``RUNNING`` while it runs; this POST waits."""
    answered = trio.Event()
    reply: list[bytes] = []
    scope = RUNNING[key] = trio.CancelScope()

    async def run() -> None:
        try:
            # What a cancel would reach; the echo, like the MCP servers' echo tool, takes no
            # checkpoint inside it.
            with scope:
                result = result_for(message)
            reply.append(orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        finally:
            if RUNNING.get(key) is scope:
                del RUNNING[key]
            answered.set()

    REQUESTS[0].start_soon(run)
    await answered.wait()
    return reply[0]


def reply_to(message: Any) -> bytes | None:
    """The encoded answer to a request; None for anything else (a notification)."""
    if not isinstance(message, dict) or message.get("id") is None:
        return None
    return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result_for(message)})


async def legacy_stream(receive: Any, send: Any) -> None:
    """``GET /sse``: a session's stream, its ``endpoint`` event first, then its answers."""
    session = secrets.token_hex(16).encode()
    outgoing, incoming = trio.open_memory_channel[bytes](math.inf)
    STREAMS[session] = outgoing
    try:
        await send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})
        endpoint = LEGACY_MESSAGES_PATH.encode() + b"?session_id=" + session
        event = b"event: endpoint\ndata: " + endpoint + b"\n\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            async for event in incoming:
                await send({"type": "http.response.body", "body": event, "more_body": True})
    except OSError:
        pass  # the client went away: so does its session
    finally:
        del STREAMS[session]


async def legacy_message(scope: dict[str, Any], message: Any, send: Any) -> None:
    """``POST /messages/?session_id=...``: 202, and a request's answer down the session's
    stream."""
    query: bytes = scope["query_string"]
    session = query.partition(b"session_id=")[2].partition(b"&")[0]
    stream = STREAMS.get(session)
    status = 404 if stream is None else 202
    reply = reply_to(message)
    if stream is not None and reply is not None:
        stream.send_nowait(b"event: message\ndata: " + reply + b"\n\n")
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def websocket(receive: Any, send: Any) -> None:
    """One socket: accepted with the subprotocol ``mcp``; every request in a text frame is
    answered in one (``BENCH_TASKS``: by a task of its own)."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept", "subprotocol": "mcp"})
    if TASKS:
        async with trio.open_nursery() as nursery:
            await websocket_tasks(receive, send, nursery)
        return
    while True:
        event = await receive()
        if event["type"] != "websocket.receive":
            return  # websocket.disconnect
        reply = reply_to(orjson.loads(event.get("text") or event.get("bytes") or b"null"))
        if reply is not None:
            await send({"type": "websocket.send", "text": reply.decode()})


async def websocket_tasks(receive: Any, send: Any, nursery: trio.Nursery) -> None:
    """``BENCH_TASKS``: each request answered by a task of its own in the socket's nursery,
    under a cancel scope of its own kept in ``RUNNING`` while it runs."""
    socket = object()  # the table's keys of this socket's requests

    async def run(message: dict[str, Any]) -> None:
        key = (socket, message["id"])
        scope = RUNNING[key] = trio.CancelScope()
        try:
            with scope:
                result = result_for(message)
            reply = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            await send({"type": "websocket.send", "text": reply.decode()})
        finally:
            if RUNNING.get(key) is scope:
                del RUNNING[key]

    while True:
        event = await receive()
        if event["type"] != "websocket.receive":
            return  # websocket.disconnect
        message = orjson.loads(event.get("text") or event.get("bytes") or b"null")
        if not isinstance(message, dict) or message.get("id") is None:
            continue
        if message.get("method") == "initialize":
            reply = reply_to(message)
            assert reply is not None
            await send({"type": "websocket.send", "text": reply.decode()})
        else:
            nursery.start_soon(run, message)


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
