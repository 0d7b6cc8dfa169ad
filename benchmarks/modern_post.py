"""The modern era's POST in process: a fixed number of requests, counted rather than timed.

    python benchmarks/modern_post.py [--posts N] [--sse] [--floor] [--profile] [--plain]

Drives trio_mcp's Streamable HTTP app directly (no ASGI server, no socket) with N modern
(2026-07-28) ``tools/call echo`` POSTs carrying the headers ``peers/http_load.mjs`` sends, each
handed over as hypercorn's trio worker does: the body at once, a checkpoint per ``send``, the end
of a complete response reported as a disconnect. The app answers JSON (``json_response=True``,
the benchmark's "modern JSON") unless ``--sse``; ``--floor`` drives the bare ASGI floor of
``peers/floor_http_server.py`` instead. Prints, per POST: the CPU time (process time: noisy on
a loaded machine), the task steps trio ran (each a pass through its scheduler) and the Python
function calls (cProfile's count; not with ``--plain``). ``--profile`` adds the top functions
by own time.

For an instruction count per POST (deterministic, and what CPU time follows), run it under
callgrind with two N and divide the difference of the two totals by the difference of N::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/modern_post.py --plain --posts 1200   # then --posts 200
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from inprocess import http_post
from trio_server import build

from trio_mcp.http import HttpOptions

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: The headers of ``peers/http_load.mjs``'s POSTs, as Node's fetch sends them.
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
    (b"accept-language", b"*"),
    (b"sec-fetch-mode", b"cors"),
    (b"user-agent", b"node"),
    (b"accept-encoding", b"gzip, deflate"),
]


def scope_of(body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.1"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
    }


def bodies(n: int) -> list[bytes]:
    return [
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {
                    "name": "echo",
                    "arguments": {"text": f"hello {i}"},
                    "_meta": MODERN_META,
                },
            }
        )
        for i in range(n)
    ]


class Driver:
    """Hands POSTs to an ASGI app as hypercorn's trio worker would, counting the checkpoints
    the server side takes (its own ``send`` included, which checkpoints in hypercorn too)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.responses = 0
        self.last: list[dict[str, Any]] = []

    async def post(self, body: bytes) -> None:
        self.last = await http_post(self.app, scope_of(body), body)
        self.responses += 1


async def drive(app: Any, posts: list[bytes], profiler: cProfile.Profile | None) -> dict[str, Any]:
    driver = Driver(app)
    await driver.post(posts[0])  # warm: caches, first-use imports
    assert b"hello 0" in b"".join(m.get("body", b"") for m in driver.last), driver.last
    before = trio.lowlevel.current_statistics().tasks_living
    steps = Steps()
    trio.lowlevel.add_instrument(steps)
    start = time.process_time()
    steps.on = True
    if profiler is not None:
        profiler.enable()
    for body in posts[1:]:
        await driver.post(body)
    if profiler is not None:
        profiler.disable()
    steps.on = False
    cpu = time.process_time() - start
    trio.lowlevel.remove_instrument(steps)
    assert trio.lowlevel.current_statistics().tasks_living == before
    n = len(posts) - 1
    return {"cpu_us": cpu * 1e6 / n, "steps": steps.steps / n}


async def run_ours(sse: bool, posts: list[bytes], profiler: cProfile.Profile | None) -> Any:
    app = build(None).http_app(HttpOptions(json_response=not sse))
    async with app.running():
        return await drive(app, posts, profiler)


async def run_floor(posts: list[bytes], profiler: cProfile.Profile | None) -> Any:
    from floor_http_server import app

    return await drive(app, posts, profiler)


class Steps(trio.abc.Instrument):
    """Counts the task steps trio runs (each a scheduler round-trip) while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.on:
            self.steps += 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=5000)
    parser.add_argument("--sse", action="store_true", help="the app answers with SSE when asked")
    parser.add_argument("--floor", action="store_true", help="the bare ASGI floor instead")
    parser.add_argument("--profile", action="store_true", help="print the top functions")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--plain", action="store_true", help="no profiled run (for callgrind)")
    args = parser.parse_args(argv)
    posts = bodies(args.posts)

    async def run(posts: list[bytes], profiler: cProfile.Profile | None) -> Any:
        if args.floor:
            return await run_floor(posts, profiler)
        return await run_ours(args.sse, posts, profiler)

    timed = trio.run(run, posts, None)
    out = {
        "what": "floor" if args.floor else "modern " + ("sse" if args.sse else "json"),
        "posts": args.posts - 1,
        "cpu_us_per_post": round(timed["cpu_us"], 2),
        "task_steps_per_post": round(timed["steps"], 2),
    }
    if args.plain:
        sys.stdout.write(json.dumps(out) + "\n")
        return 0
    profiler = cProfile.Profile()
    trio.run(run, posts, profiler)
    stats = pstats.Stats(profiler)
    out["calls_per_post"] = round(stats.total_calls / (args.posts - 1), 2)  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(out) + "\n")
    if args.profile:
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
