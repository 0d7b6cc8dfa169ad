"""The tasks extension through a mount and through a proxy: a task created by a
task-augmented ``tools/call`` on the front server runs on the server that holds the tool, and
can be polled (``tasks/get``), answered (``tasks/update``), cancelled (``tasks/cancel``) and its
result fetched through the front, for the principal that created it only: another principal's
requests for it are "unknown task" (-32602), as on the server itself. Over a real hypercorn,
with bearer tokens, through our client in the modern era."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_mcp import (
    Auth,
    Context,
    HttpTarget,
    Principal,
    ProtocolError,
    RequestCancelled,
    Server,
    StaticTokenVerifier,
    TextContent,
    open_client,
    proxy,
)
from trio_mcp.testing import http_server

from .._ports import free_port
from ..test_cli import child_env

#: A hang guard, never a performance assertion.
GUARD = 30
ALICE = Principal("alice", "client-1", frozenset())
BOB = Principal("bob", "client-1", frozenset())
TOKENS = {"alice-token": ALICE, "bob-token": BOB}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Jobs:
    """The server that holds the task-capable tools, and what their handlers saw."""

    def __init__(self, **options: Any) -> None:
        self.server = server = Server("jobs", **options)
        self.started = trio.Event()
        self.stopped_by_cancel = trio.Event()
        self.owners: list[str | None] = []

        @server.tool(task=True)
        async def slow(seconds: float, ctx: Context) -> str:
            self.owners.append(ctx.auth.subject if ctx.auth is not None else None)
            self.started.set()
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                self.stopped_by_cancel.set()
                raise
            return f"slept {seconds}"

        @server.tool(task=True)
        async def greet(ctx: Context) -> str:
            answer = await ctx.elicit("Your name?", NAME)
            return f"Hello, {(answer.content or {}).get('name')}! ({ctx.in_task})"


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent), result
    return block.text


@asynccontextmanager
async def clients(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Alice's and Bob's clients of the front server, each with its own bearer token."""

    async def named(answer: Any) -> Any:
        return {"action": "accept", "content": {"name": "Ada"}}

    alice_target = HttpTarget(url, headers={"Authorization": "Bearer alice-token"})
    bob_target = HttpTarget(url, headers={"Authorization": "Bearer bob-token"})
    async with (
        open_client(alice_target, mode="modern", on_elicit=named) as alice,
        open_client(bob_target, mode="modern") as bob,
    ):
        yield alice, bob


async def exercise(url: str, jobs: Jobs, tool: str) -> None:
    async with clients(url) as (alice, bob):
        # Created, and polled: it runs on the jobs server, for Alice.
        task = await alice.call_tool_task(f"{tool}slow", {"seconds": 3600})
        assert task.task_id is not None and task.status == "working"
        with trio.fail_after(GUARD):
            await jobs.started.wait()
        assert await task.refresh() == "working"
        # Bob cannot read, cancel or answer it: to him the id is unknown.
        checks: list[tuple[str, dict[str, Any]]] = [
            ("tasks/get", {}),
            ("tasks/cancel", {}),
            ("tasks/update", {"inputResponses": {}}),
        ]
        for method, extra in checks:
            with pytest.raises(ProtocolError) as refused:
                await bob.request(method, {"taskId": task.task_id, **extra})
            assert refused.value.code == -32602, method
        assert await task.refresh() == "working"
        # Alice cancels it: the handler is cancelled, the task settles cancelled.
        await task.cancel()
        with trio.fail_after(GUARD):
            await jobs.stopped_by_cancel.wait()
        with pytest.raises(RequestCancelled), trio.fail_after(GUARD):
            await task.result()
        assert task.status == "cancelled"
        # A task that asks a question: answered through tasks/update, its result fetched.
        asking = await alice.call_tool_task(f"{tool}greet")
        assert asking.task_id is not None
        with trio.fail_after(GUARD):
            assert text(await asking.result()) == "Hello, Ada! (True)"
        # And call_tool follows a task to its end transparently.
        with trio.fail_after(GUARD):
            assert text(await alice.call_tool(f"{tool}slow", {"seconds": 0})) == "slept 0.0"


def front(**options: Any) -> Server:
    verifier = StaticTokenVerifier(TOKENS)
    return Server("front", auth=Auth(verifier, "http://127.0.0.1/mcp"), **options)


async def test_a_task_through_a_mount_is_polled_cancelled_and_fetched_by_its_owner_only() -> None:
    jobs = Jobs()
    parent = front()
    parent.mount(jobs.server, prefix="jobs")
    with trio.fail_after(GUARD * 2):
        async with http_server(parent) as served:
            await exercise(served.url, jobs, "jobs_")
    # The child saw the parent's principal: the task was Alice's there too.
    assert jobs.owners and set(jobs.owners) == {"alice"}


def guarded(server: Server) -> Server:
    server.auth = Auth(StaticTokenVerifier(TOKENS), "http://127.0.0.1/mcp")
    return server


async def test_a_task_through_a_proxy_is_polled_cancelled_and_fetched_by_its_owner_only() -> None:
    jobs = Jobs()
    with trio.fail_after(GUARD * 2):
        async with (
            http_server(jobs.server) as upstream,
            http_server(guarded(proxy(upstream.url, name="front", mode="modern"))) as served,
        ):
            await exercise(served.url, jobs, "")
    # The upstream sees the proxy's own (anonymous) credentials, whoever asked downstream.
    assert jobs.owners and set(jobs.owners) == {None}


FRONT = """
import os

from trio_mcp import Auth, Principal, StaticTokenVerifier, proxy

tokens = {
    "alice-token": Principal("alice", "client-1", frozenset()),
    "bob-token": Principal("bob", "client-1", frozenset()),
}
front = proxy(os.environ["UPSTREAM_URL"], name="front", mode="modern")
front.auth = Auth(StaticTokenVerifier(tokens), "http://127.0.0.1/mcp")
"""


async def test_a_task_through_a_proxy_process_is_polled_cancelled_and_fetched(
    tmp_path: Path,
) -> None:
    """``trio-mcp serve front.py`` (a proxy of an HTTP upstream, with two principals) as its
    own process, the upstream served in this test's run."""
    (tmp_path / "front.py").write_text(FRONT)
    jobs = Jobs()
    port = free_port()
    with trio.fail_after(GUARD * 2):
        async with http_server(jobs.server) as upstream:
            env = {**child_env(), "UPSTREAM_URL": upstream.url}
            command = [sys.executable, "-m", "trio_mcp", "serve", "front.py:front"]
            command += ["--transport", "http", "--port", str(port)]
            process = await trio.lowlevel.open_process(
                command,
                cwd=tmp_path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                base = f"http://127.0.0.1:{port}"
                async with httpx.AsyncClient() as http:
                    while True:
                        try:
                            if (await http.get(base + "/ready")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await trio.sleep(0.05)
                await exercise(base + "/mcp", jobs, "")
            finally:
                process.terminate()
                with trio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
