"""Shared harness of the HTTP tests: a real hypercorn trio worker on loopback, exact-wire helpers.

``serving(server)`` runs ``server.http_app()`` in the test's own Trio run, so tools can share
``trio.Event`` objects with the test; ``serving_app(app)`` serves any ASGI app (a recording or
fault-injecting wrapper around ours). SSE is parsed here, independently of the library's parser,
so the tests see the exact wire.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import httpx
import orjson
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from trio_mcp import Server, TextContent
from trio_mcp.http import HttpOptions
from trio_mcp.server import Context
from trio_mcp.testing import HttpServer, http_server

#: A hang guard, never a performance assertion.
GUARD = 30
VERSION = "2025-11-25"
BOTH = "application/json, text/event-stream"

# -- SSE -------------------------------------------------------------------------------------------


@attrs.frozen
class SseEvent:
    id: str | None
    event: str | None
    data: str
    retry: int | None

    def json(self) -> Any:
        return orjson.loads(self.data)


@attrs.frozen
class SseComment:
    text: str


class SseParser:
    """Line-by-line SSE parsing (the subset servers emit: id, event, data, retry, comments)."""

    def __init__(self) -> None:
        self._fields: dict[str, str] = {}
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | SseComment | None:
        if line.startswith(":"):
            return SseComment(line[1:].strip())
        if line == "":
            if not self._fields and not self._data:
                return None
            retry = self._fields.get("retry")
            event = SseEvent(
                id=self._fields.get("id"),
                event=self._fields.get("event"),
                data="\n".join(self._data),
                retry=int(retry) if retry is not None else None,
            )
            self._fields, self._data = {}, []
            return event
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        else:
            self._fields[name] = value
        return None


def parse_sse(text: str) -> list[SseEvent]:
    parser = SseParser()
    items = [parser.feed(line) for line in text.splitlines()]
    items.append(parser.feed(""))
    return [item for item in items if isinstance(item, SseEvent)]


class SseReader:
    """Reads a streaming httpx response as SSE, one item at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()
        self._parser = SseParser()
        self.comments: list[str] = []

    async def item(self) -> SseEvent | SseComment | None:
        """The next event or comment; None when the stream has ended."""
        while True:
            try:
                line = await anext(self._lines)
            except StopAsyncIteration:
                return None
            item = self._parser.feed(line)
            if item is not None:
                return item

    async def next(self) -> SseEvent | None:
        """The next event (comments are collected in ``comments``); None at the end."""
        while True:
            item = await self.item()
            if isinstance(item, SseComment):
                self.comments.append(item.text)
                continue
            return item

    async def message(self) -> Any:
        """The next JSON-RPC message (events with empty data, such as priming, are skipped)."""
        while True:
            event = await self.next()
            assert event is not None, "the stream ended"
            if event.data:
                return event.json()

    async def rest(self) -> list[SseEvent]:
        """Every remaining event, until the server ends the stream."""
        events = []
        while (event := await self.next()) is not None:
            events.append(event)
        return events


# -- messages --------------------------------------------------------------------------------------


def initialize_body(
    version: str = VERSION, capabilities: dict[str, Any] | None = None, rid: Any = "init"
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw-http", "version": "0"},
        },
    }


def call_body(rid: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``tools/call`` that asks for progress (the token is the request id)."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments or {}, "_meta": {"progressToken": rid}},
    }


def request_body(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return body


def cancel_body(rid: Any, reason: str = "test") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": reason},
    }


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error body of an HTTP refusal (checking it is one)."""
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    return error


# -- the server ------------------------------------------------------------------------------------


@attrs.define
class Served(HttpServer):
    """A running app, its URL and an httpx client (:class:`trio_mcp.testing.HttpServer`), with
    helpers that speak exact HTTP."""

    @classmethod
    def of(cls, running: HttpServer) -> Served:
        return cls(**{f.name: getattr(running, f.name) for f in attrs.fields(HttpServer)})

    @property
    def client(self) -> httpx.AsyncClient:
        return self.http_client

    def headers(
        self,
        session: str | None = None,
        *,
        version: str | None = VERSION,
        accept: str = BOTH,
        **extra: str,
    ) -> dict[str, str]:
        headers = {"accept": accept, "content-type": "application/json"}
        if session is not None:
            headers["mcp-session-id"] = session
        if version is not None:
            headers["mcp-protocol-version"] = version
        headers.update({k.replace("_", "-"): v for k, v in extra.items()})
        return headers

    async def post(
        self,
        body: Any,
        session: str | None = None,
        *,
        version: str | None = VERSION,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        return await self.client.post(
            self.url,
            content=body if isinstance(body, bytes) else orjson.dumps(body),
            headers=headers if headers is not None else self.headers(session, version=version),
        )

    async def initialize(
        self, version: str = VERSION, capabilities: dict[str, Any] | None = None
    ) -> str:
        """A new session, fully initialized; returns its id."""
        response = await self.post(initialize_body(version, capabilities), version=None)
        assert response.status_code == 200, response.text
        session = response.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(note, session, version=version)).status_code == 202
        return session

    async def call(self, session: str, body: Any, *, version: str = VERSION) -> Any:
        """POST a request and return its JSON-RPC response, from SSE or JSON."""
        response = await self.post(body, session, version=version)
        assert response.status_code == 200, response.text
        if response.headers["content-type"] == "application/json":
            return response.json()
        messages = [e.json() for e in parse_sse(response.text) if e.data]
        return messages[-1]

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        body: Any = None,
        *,
        headers: dict[str, str],
    ) -> AsyncIterator[SseReader]:
        content = orjson.dumps(body) if body is not None else None
        async with self.client.stream(method, self.url, content=content, headers=headers) as r:
            yield SseReader(r)

    def stream_post(
        self, body: Any, session: str | None = None, *, version: str = VERSION
    ) -> AbstractAsyncContextManager[SseReader]:
        return self.stream("POST", body, headers=self.headers(session, version=version))

    def stream_get(
        self, session: str, *, last_event_id: str | None = None, version: str = VERSION
    ) -> AbstractAsyncContextManager[SseReader]:
        headers = self.headers(session, version=version, accept="text/event-stream")
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return self.stream("GET", headers=headers)


@asynccontextmanager
async def serving(
    server: Server,
    options: HttpOptions | None = None,
    *,
    guard: float = GUARD,
    graceful_timeout: float = 2.0,
    lifespan: bool = True,
) -> AsyncIterator[Served]:
    """Serve ``server.http_app(options)`` on 127.0.0.1 (port 0) with hypercorn's trio worker
    (the plugin's :func:`trio_mcp.testing.http_server`), bounded by ``guard``."""
    async with http_server(
        server, options, timeout=guard, graceful_timeout=graceful_timeout, lifespan=lifespan
    ) as running:
        yield Served.of(running)


async def eventually(predicate: Callable[[], bool], interval: float = 0.02) -> None:
    """Poll until ``predicate`` holds; the caller's hang guard bounds it."""
    while not predicate():  # noqa: ASYNC110 - the state polled has no event to wait on
        await trio.sleep(interval)


class Park:
    """A tool that reports progress, then waits for the test: a request in flight on demand."""

    def __init__(self, server: Server, name: str = "park") -> None:
        self.entered = trio.Event()
        self.release = trio.Event()
        self.finished = trio.Event()
        self.cancelled = False

        async def park(ctx: Context) -> str:
            try:
                await ctx.report_progress(1, message="first-frame")
                self.entered.set()
                await self.release.wait()
                await ctx.report_progress(2, message="second-frame")
                return "done"
            except trio.Cancelled:
                self.cancelled = True
                raise
            finally:
                self.finished.set()

        server.tool(name=name)(park)


def progress_messages(events: list[SseEvent]) -> list[str]:
    return [
        e.json()["params"]["message"]
        for e in events
        if e.data and e.json().get("method") == "notifications/progress"
    ]


# -- recording and fault-injecting wrappers ----------------------------------------------------

# The shapes the app itself takes, so that a wrapper can wrap it.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@attrs.define
class Seen:
    """One HTTP request as the server received it."""

    method: str
    headers: dict[str, str]
    body: bytes = b""
    status: int | None = None

    @property
    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    @property
    def rpc_method(self) -> str | None:
        body = self.json
        return body.get("method") if isinstance(body, dict) else None


class Recorder:
    """ASGI middleware: records every request, then lets :meth:`handle` serve it."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.seen: list[Seen] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {bytes(k).decode().lower(): bytes(v).decode() for k, v in scope["headers"]}
        seen = Seen(scope["method"], headers)
        self.seen.append(seen)
        # Read the body up front so handle() can look at it.
        chunks = []
        while scope["method"] == "POST":
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        seen.body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if scope["method"] == "POST" and not replayed:
                replayed = True
                return {"type": "http.request", "body": seen.body, "more_body": False}
            return await receive()

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen.status = message["status"]
            await send(message)

        await self.handle(seen, scope, replay, record)

    async def handle(self, seen: Seen, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def posts(self, rpc_method: str) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST" and s.rpc_method == rpc_method]


@asynccontextmanager
async def serving_app(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with hypercorn on 127.0.0.1, a free port; yield the MCP endpoint URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            functools.partial(serve, app, config, shutdown_trigger=stop.wait)
        )
        try:
            yield binds[0] + "/mcp"
        finally:
            stop.set()


def only(mapping: dict[str, Any]) -> str:
    assert len(mapping) == 1, list(mapping)
    return next(iter(mapping))


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


# -- one exchange with no server between ----------------------------------------------------------


@attrs.frozen
class Exchange:
    status: int
    headers: dict[str, str]
    #: The body of each ``http.response.body`` the app sent, in order: one per write.
    chunks: list[bytes]

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


async def asgi_exchange(
    app: Any,
    method: str,
    headers: dict[str, str],
    body: Any = None,
    *,
    reports_the_end: bool = False,
    watch: Callable[[dict[str, Any]], None] | None = None,
) -> Exchange:
    """One HTTP request served by ``app`` in this task, with no server between: the request
    body is handed over without a checkpoint, so the app's checks run at the moment the test
    chooses. With ``reports_the_end``, the end of a complete response is reported as a
    disconnect, as hypercorn and the ASGI specification do; without it no disconnect comes.
    ``watch`` sees each message the app sends, as it sends it."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "path": "/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in {"host": "localhost", **headers}.items()],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }
    given = False
    ended = trio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            data = orjson.dumps(body) if body is not None else b""
            return {"type": "http.request", "body": data, "more_body": False}
        if not reports_the_end:
            await trio.sleep_forever()
        await ended.wait()
        return {"type": "http.disconnect"}

    status, reply, chunks = 0, {}, []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, reply
        if watch is not None:
            watch(message)
        if message["type"] == "http.response.start":
            status = message["status"]
            reply = {bytes(k).decode(): bytes(v).decode() for k, v in message["headers"]}
        else:
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                ended.set()

    await app(scope, receive, send)
    return Exchange(status, reply, chunks)


async def asgi_session(app: Any) -> dict[str, str]:
    """A handshake-era session opened on ``app`` in process (``initialize``, then
    ``notifications/initialized``): the headers its POSTs carry."""
    base = {"accept": BOTH, "content-type": "application/json"}
    opened = await asgi_exchange(app, "POST", base, initialize_body())
    headers = {
        **base,
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": VERSION,
    }
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await asgi_exchange(app, "POST", headers, note)).status == 202
    return headers
