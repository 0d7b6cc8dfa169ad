"""The HTTP app mounted in a host application, and served behind names other than loopback's.

A real Starlette app under a real hypercorn: ``Mount("/api", app=server.http_app())`` must answer
at ``/api/mcp``, whichever form of ``path`` the ASGI server hands it (with or without the
``root_path``). The Host check is tested through the CLI as a user runs it, bound to 0.0.0.0.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from trio_mcp import Server, open_client
from trio_mcp.http import McpHttpApp

from .._http import GUARD, initialize_body

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def a_server() -> Server:
    server = Server("mounted")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


async def _serve(
    app: Any,
    config: Config,
    shutdown: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(app, config, shutdown_trigger=shutdown.wait, task_status=task_status)


@asynccontextmanager
async def hypercorn(app: Any, *, root_path: str = "") -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) with hypercorn's trio worker; yield its base URL."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    config.root_path = root_path
    shutdown = trio.Event()
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(functools.partial(_serve, app, config, shutdown))
            try:
                yield binds[0]
            finally:
                shutdown.set()


def starlette_with(mcp: McpHttpApp) -> Starlette:
    """The documented way: mount the app, and let the host's lifespan run the app's sessions
    (Starlette does not run the lifespan of what it mounts)."""

    def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running():
            yield

    return Starlette(routes=[Route("/health", health), Mount("/api", app=mcp)], lifespan=lifespan)


async def test_mounted_under_api_in_starlette() -> None:
    async with hypercorn(starlette_with(a_server().http_app())) as base:
        async with httpx.AsyncClient() as http:
            assert (await http.get(base + "/health")).text == "ok"
        for mode in ("legacy", "modern"):
            async with open_client(base + "/api/mcp", mode=mode) as client:
                assert client.server_info.name == "mounted"
                added = await client.call_tool("add", {"a": 40, "b": 2})
                assert added.structured_content == {"result": 42}
        async with httpx.AsyncClient() as http:
            # Outside the mount's endpoint, the 404 names where the endpoint is.
            missing = await http.post(base + "/api/other", json=initialize_body())
            assert missing.status_code == 404
            assert "/api/mcp" in missing.json()["error"]["message"]


async def test_root_path_with_the_path_in_either_form() -> None:
    """hypercorn's ``root_path`` setting (the app behind a proxy that strips nothing): ``path``
    includes the root path; an older server strips it. Both reach the endpoint."""
    mcp = a_server().http_app()
    async with hypercorn(mcp, root_path="/svc") as base, open_client(base + "/svc/mcp") as client:
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}

    async def stripped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            root = scope["root_path"]
            scope = dict(scope, path=scope["path"].removeprefix(root))
            assert scope["path"] == "/mcp"
        await mcp(scope, receive, send)

    async with hypercorn(stripped, root_path="/svc") as base, open_client(base + "/svc/mcp") as c:
        assert (await c.call_tool("add", {"a": 2, "b": 2})).structured_content == {"result": 4}


# -- Host, bound to 0.0.0.0 through the CLI -------------------------------------------------------


@asynccontextmanager
async def cli_http(*options: str) -> AsyncIterator[int]:
    """``trio-mcp demo --transport http --host 0.0.0.0 --port 0 OPTIONS``; yield the port."""
    command = [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http"]
    process = await trio.lowlevel.open_process(
        [*command, "--host", "0.0.0.0", "--port", "0", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        with trio.fail_after(GUARD):
            assert process.stderr is not None
            seen = b""
            while b"/mcp\n" not in seen:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"the server ended early: {seen.decode(errors='replace')}"
                seen += chunk
            line = next(x for x in seen.decode().splitlines() if "serving MCP at" in x)
            yield int(line.rsplit(":", 1)[1].split("/")[0])
            os.kill(process.pid, signal.SIGINT)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_proxied_name_on_a_wildcard_bind_is_refused_with_a_true_message() -> None:
    """Bound to 0.0.0.0, a proxy on this host forwards ``Host: mcp.example.com`` through
    loopback: refused (a rebinding browser looks the same), and the message says what happened
    and both ways to allow it, without claiming a loopback bind."""
    async with cli_http() as port, httpx.AsyncClient() as http:
        refused = await http.post(
            f"http://127.0.0.1:{port}/mcp",
            json=initialize_body(),
            headers={"host": "mcp.example.com", "accept": "application/json"},
        )
    assert refused.status_code == 403
    message = refused.json()["error"]["message"]
    assert "'mcp.example.com'" in message
    assert "bound to" not in message
    assert "arrived on the loopback address 127.0.0.1" in message
    assert "HttpOptions(allowed_hosts=['mcp.example.com'])" in message
    assert "--allowed-host mcp.example.com" in message


async def test_allowed_host_and_origin_options_of_the_cli() -> None:
    headers = {"accept": "application/json, text/event-stream"}
    async with cli_http(
        "--allowed-host", "mcp.example.com", "--allowed-origin", "https://app.example.com"
    ) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient() as http:
            named = {**headers, "host": "mcp.example.com"}
            ok = await http.post(url, json=initialize_body(), headers=named)
            assert ok.status_code == 200, ok.text
            origin = {**named, "origin": "https://app.example.com"}
            assert (await http.post(url, json=initialize_body(), headers=origin)).status_code == 200
            # Configured names replace the loopback default: other names are refused.
            other = await http.post(url, json=initialize_body(), headers=headers)
            assert other.status_code == 403
            assert "--allowed-host" in other.json()["error"]["message"]
            evil = {**named, "origin": "https://evil.example"}
            refused = await http.post(url, json=initialize_body(), headers=evil)
            assert refused.status_code == 403
            assert "--allowed-origin" in refused.json()["error"]["message"]
