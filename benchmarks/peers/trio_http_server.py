"""The benchmark server built on trio_mcp, as an ASGI app for ``hypercorn --worker-class trio``.

    BENCH_JSON_RESPONSE=1 BENCH_STAMPS=PATH \\
        hypercorn --worker-class trio --bind 127.0.0.1:PORT benchmarks/peers/trio_http_server.py:app

The server of ``trio_server.py`` (the same ``echo`` and ``sleep`` tools; a cancelled ``sleep``
appends a CLOCK_MONOTONIC timestamp in nanoseconds to the stamps file from its ``finally``)
behind ``Server.http_app``, with the default options but for ``json_response``. Options come
from the environment because hypercorn imports the module (in each worker it spawns):
``BENCH_JSON_RESPONSE`` (``1``: one JSON body per POST instead of an SSE stream) and
``BENCH_STAMPS``, and ``BENCH_MAX_SESSIONS_PER_CLIENT`` (the memory benchmark opens more
sessions from one address than the default 100 allow); for ``benchmarks/growth.py``,
``BENCH_MAX_SESSIONS`` (more than the default 10,000 sessions in all),
``BENCH_UNUSED_SESSION_TIMEOUT`` (seconds a session that carried no request lives: the
default minute is shorter than opening 10,000 of them takes) and ``BENCH_BLOB=1`` (a third tool,
``blob``, whose result is ``size`` characters); with ``BENCH_READY``, each worker appends
its pid to that file once it has built the app; with ``BENCH_TRACEMALLOC`` (a path), tracemalloc
runs and each SIGUSR1 takes a snapshot: the first is the baseline (it creates ``PATH.baseline``
once taken), the second and later write the growth since the first, by allocating line, to that
path as JSON (for ``benchmarks/profiles.py`` and ``benchmarks/growth.py``). Both eras are
served: the handshake era and the modern era (2026-07-28).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import tracemalloc
from functools import lru_cache
from types import FrameType

import attrs
from trio_server import build

from trio_mcp import Server
from trio_mcp.http import HttpOptions, Limits


def _stamps_fd() -> int | None:
    path = os.environ.get("BENCH_STAMPS")
    if not path:
        return None
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def _options() -> HttpOptions:
    json_response = os.environ.get("BENCH_JSON_RESPONSE") == "1"
    limits = Limits()
    if os.environ.get("BENCH_MAX_SESSIONS_PER_CLIENT"):
        per_client = int(os.environ["BENCH_MAX_SESSIONS_PER_CLIENT"])
        limits = attrs.evolve(limits, max_sessions_per_client=per_client)
    if os.environ.get("BENCH_MAX_SESSIONS"):
        limits = attrs.evolve(limits, max_sessions=int(os.environ["BENCH_MAX_SESSIONS"]))
    if os.environ.get("BENCH_UNUSED_SESSION_TIMEOUT"):
        unused = float(os.environ["BENCH_UNUSED_SESSION_TIMEOUT"])
        limits = attrs.evolve(limits, unused_session_timeout=unused)
    return HttpOptions(json_response=json_response, limits=limits)


@lru_cache(maxsize=8)
def _blob(size: int) -> str:
    return "x" * size


def _add_blob(server: Server) -> None:
    """``blob``: a result of ``size`` characters, made once per size (the figure is the
    server's cost of carrying it, not of making it)."""

    @server.tool()
    async def blob(size: int) -> str:
        """Return ``size`` characters."""
        return _blob(size)


def _trace_memory(path: str) -> None:
    """Snapshots on SIGUSR1: the first is the baseline, later ones write the growth to ``path``."""
    tracemalloc.start(1)
    baseline: list[tracemalloc.Snapshot] = []
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]

    def snapshot(_signum: int, _frame: FrameType | None) -> None:
        gc.collect()
        taken = tracemalloc.take_snapshot().filter_traces(ignore)
        if not baseline:
            baseline.append(taken)
            with open(f"{path}.baseline", "w"):  # taken (a second signal sent before this one
                pass  # was handled would be lost: the driver waits for this file)
            return
        stats = taken.compare_to(baseline[0], "lineno")
        top = [[str(s.traceback[0]), s.size_diff, s.count_diff] for s in stats[:20]]
        partial = f"{path}.partial"
        with open(partial, "w") as out:
            json.dump({"total_diff": sum(s.size_diff for s in stats), "top": top}, out)
        os.replace(partial, path)

    signal.signal(signal.SIGUSR1, snapshot)


if os.environ.get("BENCH_TRACEMALLOC"):
    _trace_memory(os.environ["BENCH_TRACEMALLOC"])
_server = build(_stamps_fd())
if os.environ.get("BENCH_BLOB") == "1":
    _add_blob(_server)
app = _server.http_app(_options())
if os.environ.get("BENCH_READY"):
    with open(os.environ["BENCH_READY"], "a") as ready:
        ready.write(f"{os.getpid()}\n")
