"""The scale family: how trio_mcp's cost grows with the work (10x the work should cost <= 10x).

    python benchmarks/growth.py '{"part": "events", "events": [1000, 10000], "replays": 200}'

One part per process, each printing one JSON object of figures (``run.py``'s ``growth`` section
runs them as jobs):

- ``sessions`` (``transport``: ``http``, ``sse`` or ``ws``): idle sessions held open against
  trio_mcp's server under a real ``hypercorn --worker-class trio`` on 127.0.0.1
  (``peers/trio_http_server.py``, its session limits raised through its environment). ``http``:
  Streamable HTTP, handshake era, ``initialize`` and ``notifications/initialized``, then no
  connection left open (the session lives in the server alone); ``sse``: the 2024-11-05
  HTTP+SSE transport, its ``GET`` stream open (the session's ``endpoint`` event read); ``ws``:
  a WebSocket open and initialized. After ``warmup`` sessions, the server's figures are taken
  (the baseline), then again at each size of ``sessions`` (1,000 and 10,000): its VmRSS, and in
  a second server of its own, tracemalloc's traced bytes (``BENCH_TRACEMALLOC``, a snapshot on
  SIGUSR1); each per session over the baseline. In the first server, at the baseline and at
  each size, the CPU it uses in ``idle_ms`` while the sessions sit idle, ``quiet_ms`` after the
  last opened (nothing should wake per Streamable HTTP session: the figure at 10,000 over the
  baseline's, per session, should be ~0; an HTTP+SSE stream writes a keep-alive comment every
  15 s).
- ``tools``: ``tools/list`` with 10, 1,000 and 10,000 tools registered, through trio_mcp's
  client over in-memory streams, both engines in this process (handshake era): one call (the
  first page, at the server's default ``page_size`` of 100), the whole list walked page by
  page, and one call of a server with no pages (``page_size=None``), again with the cyclic
  collector paused, counting the page faults it takes.
- ``calls``: ``tools/call`` of a ``blob`` tool whose result is 1 KB, 100 KB and 10 MB (one
  text block), calls one at a time on one keep-alive connection, handshake era, SSE responses,
  against the bare-hypercorn floor (``peers/floor_http_server.py``) answering the same sized
  body; the two servers take turns, round by round, and their ratio is the median over rounds.
- ``events``: :class:`~trio_mcp.http.MemoryEventStore`, the in-memory store that makes streams
  resumable: tracemalloc bytes per stored event at 1,000 and 10,000 events (of 150 bytes, a
  progress notification's size), kept in one stream and one per stream; the time per append,
  and a resume of a stream's last 10 events.

Every "growth" figure is the cost at the larger size over the cost at the smaller; the work
grew by the ratio of the sizes (``work``). Growth at most the work is linear or better.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import trio
import wsproto
import wsproto.events as ws_events

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)
sys.path.insert(0, str(HERE / "peers"))

from tests._ports import free_port  # noqa: E402
from trio_mcp import Server, open_client  # noqa: E402
from trio_mcp.http import MemoryEventStore, StreamMeta  # noqa: E402

PEERS = Path("benchmarks") / "peers"  # relative to ROOT, the servers' working directory
VERSION = "2025-06-18"
HOST = "127.0.0.1"
#: Connections (or sockets being opened) at once while sessions are opened.
OPENERS = 32
#: How long a server may take to accept connections.
START_TIMEOUT = 30.0


# -- the process ------------------------------------------------------------------------------


def raise_nofile() -> int:
    """As many file descriptors as this process may have (its children inherit the limit):
    10,000 sockets need 10,000 in the driver and as many in the server."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")  # pragma: no cover - Linux always has it


def cpu_seconds(pid: int) -> float:
    """The CPU time of a process's threads, to the nanosecond (``schedstat``: the clock ticks
    of ``stat`` are 10 ms, too coarse for an idle server)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue  # a thread that just ended
    return total / 1e9


class Hypercorn:
    """One benchmark server under ``hypercorn --worker-class trio`` (one worker process), in a
    process group of its own; ``pid`` is its worker's."""

    def __init__(self, module: str, env: dict[str, str], scratch: Path) -> None:
        self.port = free_port()
        self.ready = scratch / f"ready-{time.monotonic_ns()}"
        self.ready.write_text("")
        command = [sys.executable, "-m", "hypercorn", "--worker-class", "trio", "--workers", "1"]
        command += ["--bind", f"{HOST}:{self.port}", "--backlog", "4096"]
        command.append(f"{PEERS / module}:app")
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, **env, "BENCH_READY": str(self.ready)},
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            start_new_session=True,
        )
        self.pid = 0

    async def wait_ready(self) -> None:
        with trio.fail_after(START_TIMEOUT):
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the server exited with {self.process.returncode}")
                pids = self.ready.read_text().split()
                if pids:
                    try:
                        stream = await trio.open_tcp_stream(HOST, self.port)
                    except OSError:
                        pass
                    else:
                        await stream.aclose()
                        self.pid = int(pids[0])
                        return
                await trio.sleep(0.05)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        self.process.wait()


# -- a small HTTP/1.1 client on trio sockets ------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection, the least a driver can be: a request written in one
    piece, a response read by its Content-Length or its chunks. The same for every server."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.closing = False

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(await trio.open_tcp_stream(HOST, port))

    async def _fill(self) -> None:
        data = await self.stream.receive_some(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    async def _line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            await self._fill()
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    async def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    async def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        head = f"{method} {path} HTTP/1.1\r\nhost: {HOST}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if body or method == "POST":
            head += f"content-length: {len(body)}\r\n"
        await self.stream.send_all(head.encode() + b"\r\n" + body)

    async def head(self) -> tuple[int, dict[str, str]]:
        status = int((await self._line()).split()[1])
        headers: dict[str, str] = {}
        while line := await self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("connection", "").lower() == "close":
            self.closing = True
        return status, headers

    async def chunk(self) -> bytes:
        """The next chunk of a chunked body (b"" for the last)."""
        size = int((await self._line()).split(b";")[0], 16)
        data = await self._exactly(size) if size else b""
        await self._line()
        return data

    async def body(self, headers: dict[str, str]) -> bytes:
        if "content-length" in headers:
            return await self._exactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() != "chunked":
            raise RuntimeError(f"a response with no length: {headers}")
        parts = []
        while part := await self.chunk():
            parts.append(part)
        return b"".join(parts)

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        await self.send(method, path, headers, body)
        status, got = await self.head()
        return status, got, await self.body(got)

    async def aclose(self) -> None:
        await self.stream.aclose()


def rpc(rid: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return orjson.dumps(message)


INITIALIZE_PARAMS = {
    "protocolVersion": VERSION,
    "capabilities": {},
    "clientInfo": {"name": "growth", "version": "0"},
}
POST_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def sse_data(body: bytes) -> bytes:
    """The data of the (one) message event of an SSE body, or the body itself (JSON)."""
    start = body.find(b"data: ")
    if start < 0:
        return body
    start += 6
    end = body.find(b"\n", start)
    return body[start : end if end >= 0 else len(body)]


class Caller:
    """A handshake-era Streamable HTTP session on one keep-alive connection (reopened when the
    server ends it, as hypercorn does after ``keep_alive_max_requests``)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection: Connection | None = None
        self.session: str | None = None
        self.next_id = 0

    async def post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self.connection is None:
            self.connection = await Connection.open(self.port)
        headers = dict(POST_HEADERS)
        if self.session is not None:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = VERSION
        answer = await self.connection.request("POST", "/mcp", headers, body)
        if self.connection.closing:
            await self.connection.aclose()
            self.connection = None
        return answer

    async def handshake(self) -> str:
        """A new session on this connection: its id."""
        self.session = None
        self.next_id += 1
        status, headers, body = await self.post(rpc(self.next_id, "initialize", INITIALIZE_PARAMS))
        if status != 200 or b'"result"' not in body:
            raise RuntimeError(f"initialize: HTTP {status} {body[:300]!r}")
        self.session = headers.get("mcp-session-id")
        status, _, body = await self.post(rpc(None, "notifications/initialized"))
        if status not in (200, 202):
            raise RuntimeError(f"notifications/initialized: HTTP {status} {body[:300]!r}")
        return self.session or ""

    async def call(self, name: str, arguments: dict[str, Any]) -> bytes:
        """One ``tools/call``; the raw JSON-RPC response."""
        self.next_id += 1
        params = {"name": name, "arguments": arguments}
        status, _, body = await self.post(rpc(self.next_id, "tools/call", params))
        if status != 200:
            raise RuntimeError(f"tools/call: HTTP {status} {body[:300]!r}")
        return sse_data(body)

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
            self.connection = None


# -- idle sessions ----------------------------------------------------------------------------


class Opener:
    """Opens sessions of one transport and holds what keeps them open."""

    def __init__(self, transport: str, port: int) -> None:
        self.transport = transport
        self.port = port
        self.held: list[Any] = []  # the open SSE connections and WebSockets
        self.callers = [Caller(port) for _ in range(OPENERS)]

    async def open(self, count: int) -> None:
        """``count`` more sessions, ``OPENERS`` at a time (on new connections: hypercorn ends
        a keep-alive connection idle for 5 s, as the sessions' quiet time leaves them)."""
        for caller in self.callers:
            await caller.aclose()
        work = iter(range(count))

        async def opener(index: int) -> None:
            for _ in work:
                await self.one(index)

        async with trio.open_nursery() as nursery:
            for index in range(OPENERS):
                nursery.start_soon(opener, index)

    async def one(self, index: int) -> None:
        if self.transport == "http":
            await self.callers[index].handshake()
        elif self.transport == "sse":
            self.held.append(await open_sse(self.port))
        else:
            self.held.append(await open_websocket(self.port))

    async def aclose(self) -> None:
        for caller in self.callers:
            await caller.aclose()
        for held in self.held:
            with trio.move_on_after(1):
                await held.aclose()


async def open_sse(port: int) -> Connection:
    """``GET /sse``: an HTTP+SSE session, held open once its ``endpoint`` event came."""
    connection = await Connection.open(port)
    await connection.send("GET", "/sse", {"accept": "text/event-stream"}, b"")
    status, headers = await connection.head()
    if status != 200:
        raise RuntimeError(f"GET /sse: HTTP {status}")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        first = await connection.chunk()
    else:
        while b"\n\n" not in connection.buffer:
            await connection._fill()
        first = bytes(connection.buffer)
    if b"event: endpoint" not in first:
        raise RuntimeError(f"GET /sse: no endpoint event: {first[:200]!r}")
    return connection


class WebSocket:
    """A client WebSocket (wsproto on a trio socket): text frames in and out."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        self.texts: list[str] = []

    async def _events(self) -> list[Any]:
        data = await self.stream.receive_some(65536)
        if not data:
            raise ConnectionError("the server closed the WebSocket")
        self.ws.receive_data(data)
        return list(self.ws.events())

    async def handshake(self) -> None:
        request = ws_events.Request(host=HOST, target="/ws", subprotocols=["mcp"])
        await self.stream.send_all(self.ws.send(request))
        while True:
            for event in await self._events():
                if isinstance(event, ws_events.AcceptConnection):
                    return
                if isinstance(event, ws_events.RejectConnection):
                    raise RuntimeError(f"WebSocket refused: HTTP {event.status_code}")

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(self.ws.send(ws_events.TextMessage(data=data.decode())))

    async def receive(self) -> str:
        parts: list[str] = []
        while True:
            for event in await self._events():
                if isinstance(event, ws_events.TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        return "".join(parts)
                elif isinstance(event, ws_events.CloseConnection):
                    raise ConnectionError(f"WebSocket closed: {event.code} {event.reason}")

    async def aclose(self) -> None:
        await self.stream.aclose()


async def open_websocket(port: int) -> WebSocket:
    """A WebSocket, open and initialized (``initialize``, then ``notifications/initialized``)."""
    socket = WebSocket(await trio.open_tcp_stream(HOST, port))
    await socket.handshake()
    await socket.send(rpc(1, "initialize", INITIALIZE_PARAMS))
    answer = await socket.receive()
    if '"result"' not in answer:
        raise RuntimeError(f"initialize over WebSocket: {answer[:300]}")
    await socket.send(rpc(None, "notifications/initialized"))
    return socket


class Tracer:
    """The server's tracemalloc snapshots (``peers/trio_http_server.py``, ``BENCH_TRACEMALLOC``):
    the first SIGUSR1 takes the baseline, each later one writes the growth since then."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid = pid
        self.path = path

    async def take(self) -> dict[str, Any]:
        await self._signal(self.path)
        result: dict[str, Any] = json.loads(await trio.Path(self.path).read_text())
        return result

    async def baseline(self) -> None:
        await self._signal(Path(f"{self.path}.baseline"))

    async def _signal(self, written: Path) -> None:
        """SIGUSR1, then wait until the server wrote ``written`` (two signals sent before the
        first is handled would be one)."""
        path = trio.Path(written)
        await path.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        with trio.fail_after(120):
            while True:  # written by another process: there is nothing to wait on but time
                if await path.exists():
                    return
                await trio.sleep(0.05)


async def idle_sessions(spec: dict[str, Any], scratch: Path) -> dict[str, float]:
    transport: str = spec["transport"]
    sizes: list[int] = spec["sessions"]
    most = sizes[-1] + spec["warmup"] + OPENERS
    env = {
        "BENCH_MAX_SESSIONS": str(2 * most),
        "BENCH_MAX_SESSIONS_PER_CLIENT": str(2 * most),
        "BENCH_UNUSED_SESSION_TIMEOUT": "3600",
    }
    settle = spec["settle_ms"] / 1000
    idle = spec["idle_ms"] / 1000
    quiet = spec.get("quiet_ms", 0) / 1000
    out: dict[str, float] = {"work": sizes[-1] / sizes[0]}

    async def idle_cpu(pid: int) -> float:
        """The worker's CPU in ms a second over ``idle``, once ``quiet`` passed: the tail of
        the opening is over then (each POST's disconnect grace, 5 s, is a deadline trio's
        heap drops only when it comes)."""
        await trio.sleep(quiet)
        before = cpu_seconds(pid)
        await trio.sleep(idle)
        return (cpu_seconds(pid) - before) * 1000 / idle

    for traced in (False, True):
        extra = {"BENCH_TRACEMALLOC": str(scratch / "traced.json")} if traced else {}
        server = Hypercorn("trio_http_server.py", {**env, **extra}, scratch)
        opener: Opener | None = None
        try:
            await server.wait_ready()
            opener = Opener(transport, server.port)
            await opener.open(spec["warmup"])
            await trio.sleep(settle)
            tracer = Tracer(server.pid, scratch / "traced.json") if traced else None
            if tracer is not None:
                await tracer.baseline()
            else:
                # What the worker costs with (almost) no session: hypercorn's worker looks
                # for its shutdown every 0.1 s, whatever it serves.
                out["idle_cpu_base_ms_per_s"] = await idle_cpu(server.pid)
            base = rss_bytes(server.pid)
            opened = 0
            for index, size in enumerate(sizes):
                await opener.open(size - opened)
                opened = size
                await trio.sleep(settle)
                name = ("small", "large")[index] if len(sizes) == 2 else str(index)
                if tracer is not None:
                    taken = await tracer.take()
                    out[f"traced_{name}_bytes_per_session"] = taken["total_diff"] / size
                    top = ", ".join(f"{at} {diff // size}" for at, diff, _ in taken["top"][:6])
                    print(f"growth {transport} {size}: traced per session: {top}", file=sys.stderr)
                else:
                    out[f"rss_{name}_bytes_per_session"] = (rss_bytes(server.pid) - base) / size
                    out[f"idle_cpu_{name}_ms_per_s"] = await idle_cpu(server.pid)
        finally:
            if opener is not None:
                await opener.aclose()
            server.stop()
    out["sessions_small"], out["sessions_large"] = sizes[0], sizes[-1]
    for kind in ("rss", "traced"):
        small = out[f"{kind}_small_bytes_per_session"] * sizes[0]
        large = out[f"{kind}_large_bytes_per_session"] * sizes[-1]
        if small > 0:  # else no growth to speak of (a few sessions fit in what was there)
            out[f"{kind}_growth"] = large / small
    # CPU per idle session, over the worker's own: microseconds a second (a per-session timer
    # would show here: an HTTP+SSE stream's keep-alive comment does).
    added = out["idle_cpu_large_ms_per_s"] - out["idle_cpu_base_ms_per_s"]
    out["idle_cpu_large_us_per_session_s"] = added * 1000 / sizes[-1]
    return out


# -- tools/list ---------------------------------------------------------------------------


def tool_server(count: int, page_size: int | None) -> Server:
    """A server with ``count`` tools of one string argument each, as a real tool has."""
    server = Server("growth-tools", page_size=page_size)

    async def tool(text: str) -> str:
        """Return the text."""
        return text

    for index in range(count):
        server.tool(name=f"tool_{index:05d}", description=f"Tool number {index}.")(tool)
    return server


#: How many runs :func:`timed` makes.
TIMED_RUNS = 3


async def timed(calls: int, call: Callable[[], Awaitable[Any]]) -> float:
    """Microseconds per ``call``: the best of three runs of ``calls`` (a shared machine)."""
    best = float("inf")
    for _ in range(TIMED_RUNS):
        start = time.perf_counter()
        for _ in range(calls):
            await call()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


async def tools_list(spec: dict[str, Any]) -> dict[str, float]:
    counts: list[int] = spec["tools"]
    out: dict[str, float] = {}
    for index, count in enumerate(counts):
        out[f"tools_{index}"] = count
        paged, whole = tool_server(count, 100), tool_server(count, None)
        # The same total of tools listed at every size, at least 3 calls.
        calls = max(3, spec["tools_listed"] // count)
        async with open_client(paged, mode="legacy") as client:
            one_page = functools.partial(client.request, "tools/list")
            out[f"page_us_{index}"] = await timed(spec["page_calls"], one_page)

            async def walk(c: Any = client) -> None:
                cursor = None
                while True:
                    page = await c.request(
                        "tools/list", {"cursor": cursor} if cursor is not None else None
                    )
                    cursor = page.get("nextCursor")
                    if cursor is None:
                        return

            out[f"walk_us_{index}"] = await timed(calls, walk)
        async with open_client(whole, mode="legacy") as client:
            whole_list = functools.partial(client.request, "tools/list")
            out[f"whole_us_{index}"] = await timed(calls, whole_list)
            # Again with the cyclic collector paused: what the call's own work costs. An answer
            # of 10,000 tools, and the client's parse of it, sets off full collections that
            # walk the whole heap, which the collector-on figure counts too. And the page faults
            # it takes: the memory CPython gave back after the last call, taken again.
            gc.collect()
            gc.disable()
            try:
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                out[f"whole_paused_us_{index}"] = await timed(calls, whole_list)
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            finally:
                gc.enable()
            out[f"whole_paused_faults_{index}"] = faults / (TIMED_RUNS * calls)
        out[f"walk_us_per_tool_{index}"] = out[f"walk_us_{index}"] / count
        out[f"whole_us_per_tool_{index}"] = out[f"whole_us_{index}"] / count
        if index:
            out[f"work_{index}"] = count / counts[index - 1]
            for kind in ("page", "walk", "whole", "whole_paused"):
                out[f"{kind}_growth_{index}"] = (
                    out[f"{kind}_us_{index}"] / out[f"{kind}_us_{index - 1}"]
                )
    return out


# -- tools/call with large results ------------------------------------------------------------


async def call_sizes(spec: dict[str, Any], scratch: Path) -> dict[str, float]:
    sizes: list[int] = spec["sizes"]
    servers = {
        "trio": Hypercorn("trio_http_server.py", {"BENCH_BLOB": "1"}, scratch),
        "floor": Hypercorn("floor_http_server.py", {"BENCH_SSE": "1"}, scratch),
    }
    out: dict[str, float] = {}
    callers: dict[str, Caller] = {}
    try:
        for server in servers.values():
            await server.wait_ready()
        for name, server in servers.items():
            callers[name] = Caller(server.port)
            await callers[name].handshake()
        for index, size in enumerate(sizes):
            calls = max(spec["min_calls"], min(spec["calls"], spec["call_bytes"] // size))
            per_call: dict[str, list[float]] = {name: [] for name in servers}
            ratios: list[float] = []
            for caller in callers.values():  # one warm-up call each, checked
                await check_blob(caller, size)
            for round_ in range(spec["rounds"]):
                order = list(callers) if round_ % 2 == 0 else list(reversed(callers))
                took: dict[str, float] = {}
                for name in order:
                    caller = callers[name]
                    start = time.perf_counter()
                    for _ in range(calls):
                        await caller.call("blob", {"size": size})
                    took[name] = (time.perf_counter() - start) / calls * 1e6
                    per_call[name].append(took[name])
                ratios.append(took["floor"] / took["trio"])  # ours/floor in calls/s
            out[f"bytes_{index}"] = size
            for name in servers:
                out[f"{name}_us_{index}"] = statistics.median(per_call[name])
                out[f"{name}_mb_per_s_{index}"] = size / out[f"{name}_us_{index}"]
            out[f"vs_floor_{index}"] = statistics.median(ratios)
            if index:
                out[f"work_{index}"] = size / sizes[index - 1]
                for name in servers:
                    out[f"{name}_growth_{index}"] = (
                        out[f"{name}_us_{index}"] / out[f"{name}_us_{index - 1}"]
                    )
    finally:
        for caller in callers.values():
            await caller.aclose()
        for server in servers.values():
            server.stop()
    return out


async def check_blob(caller: Caller, size: int) -> None:
    answer = orjson.loads(await caller.call("blob", {"size": size}))
    text = answer["result"]["content"][0]["text"]
    if len(text) != size:
        raise RuntimeError(f"blob of {size} came back with {len(text)} characters")


# -- the event store ----------------------------------------------------------------------


#: An event as a stream stores it: a progress notification, about 150 bytes.
EVENT = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "tok-1", "progress": 41, "total": 100, "message": "x" * 40},
    }
)


def fill(store: MemoryEventStore, ids: list[str], events: list[bytes], one_stream: bool) -> None:
    meta = StreamMeta("session")
    for stream in dict.fromkeys(ids):  # what a stream costs is counted in its events
        store.open_now(stream, meta)
    for seq, (stream, data) in enumerate(zip(ids, events, strict=True), 1):
        store.append_now(stream, seq if one_stream else 1, data)


def event_store(spec: dict[str, Any]) -> dict[str, float]:
    sizes: list[int] = spec["events"]
    out: dict[str, float] = {"event_bytes": len(EVENT), "work": sizes[-1] / sizes[0]}
    for index, count in enumerate(sizes):
        name = ("small", "large")[index]
        out[f"events_{name}"] = count
        for layout in ("one_stream", "streams"):
            one = layout == "one_stream"
            ids = ["s-0"] * count if one else [f"s-{i}" for i in range(count)]

            def new_store(count: int = count) -> MemoryEventStore:
                return MemoryEventStore(
                    max_events_per_stream=count + 1, max_stream_bytes=1 << 40, max_bytes=1 << 40
                )

            # Memory: each event its own bytes, as each arrives from its own encoding.
            store = new_store()
            events = [bytes(EVENT) for _ in range(count)]
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            fill(store, ids, events, one)
            del events
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            out[f"{layout}_{name}_bytes_per_event"] = kept / count
            # Time, without tracemalloc: the best of three fills of a new store.
            best = float("inf")
            for _ in range(3):
                store = new_store()
                events = [bytes(EVENT) for _ in range(count)]
                start = time.perf_counter()
                fill(store, ids, events, one)
                best = min(best, time.perf_counter() - start)
            out[f"{layout}_{name}_append_us"] = best / count * 1e6
            if one:
                out[f"replay_tail_{name}_us"] = trio.run(replay_tail, store, count, spec["replays"])
    for key in ("one_stream", "streams"):
        small = out[f"{key}_small_bytes_per_event"] * sizes[0]
        large = out[f"{key}_large_bytes_per_event"] * sizes[-1]
        out[f"{key}_growth"] = large / small
        out[f"{key}_append_growth"] = (
            out[f"{key}_large_append_us"] * sizes[-1] / (out[f"{key}_small_append_us"] * sizes[0])
        )
    out["replay_tail_growth"] = out["replay_tail_large_us"] / out["replay_tail_small_us"]
    return out


async def replay_tail(store: MemoryEventStore, count: int, replays: int) -> float:
    """Microseconds per resume of the stream's last 10 events (the same work at every size)."""
    tail = max(0, count - 10)
    start = time.perf_counter()
    for _ in range(replays):
        replay = await store.replay("s-0", tail)
    elapsed = time.perf_counter() - start
    assert replay is not None and len(replay.events) == count - tail
    return elapsed / replays * 1e6


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    part = spec["part"]
    if part == "events":
        print(json.dumps(event_store(spec)))
        return
    if part == "tools":
        print(json.dumps(trio.run(tools_list, spec)))
        return
    raise_nofile()
    with tempfile.TemporaryDirectory(prefix="trio-mcp-growth-") as scratch:
        if part == "sessions":
            out = trio.run(idle_sessions, spec, Path(scratch))
        elif part == "calls":
            out = trio.run(call_sizes, spec, Path(scratch))
        else:
            raise SystemExit(f"growth.py: unknown part {part!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
