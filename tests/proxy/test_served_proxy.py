"""``trio-mcp proxy`` as users run it: a real proxy process served over Streamable HTTP on
127.0.0.1, in front of a real stdio child (the demo server, or the official Python SDK's server
for a handshake-era upstream). The proxy's child processes and sockets are read from /proc."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from trio_mcp import ElicitResult, open_client

from .._http import GUARD
from .._ports import free_port
from ..http.test_modern import modern_body, modern_headers

HERE = Path(__file__).resolve().parent
DEMO = [sys.executable, "-m", "trio_mcp", "demo"]
RECORDING = HERE.parent / "interop" / "recording_proxy.py"
#: TCP states in /proc/net/tcp: the listening socket is the only one allowed to stay.
LISTEN = "0A"
CLOSE_WAIT = "08"

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")


@attrs.define
class Proxy:
    process: trio.Process
    url: str
    base: str

    @property
    def pid(self) -> int:
        return self.process.pid


@asynccontextmanager
async def served_proxy(upstream: list[str], *options: str) -> AsyncIterator[Proxy]:
    """``trio-mcp proxy UPSTREAM --transport http`` on a free port, ready; killed if it lives on."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "trio_mcp", "proxy", shlex.join(upstream)]
    command += ["--transport", "http", "--port", str(port), "--drain-grace", "0.5", *options]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with trio.fail_after(GUARD):
                while True:
                    try:
                        if (await client.get(base + "/ready")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await trio.sleep(0.05)
        yield Proxy(process, base + "/mcp", base)
    finally:
        if process.returncode is None:
            for child in children(process.pid):
                kill(child)
            process.kill()
            await process.wait()


def children(pid: int) -> set[int]:
    """The process's children (every thread's), from /proc."""
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found.update(int(n) for n in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def tcp_states(pid: int) -> list[str]:
    """The states of the TCP sockets the process holds open (its fds matched to /proc/net)."""
    inodes: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    states: list[str] = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                states.append(fields[3])
    return states


async def eventually(check: Any, what: str) -> None:
    """Polls ``check()`` until true; a hang guard, never a timing assertion."""
    with trio.move_on_after(GUARD):
        while not check():  # noqa: ASYNC110 - polling /proc, which sends no event
            await trio.sleep(0.05)
        return
    raise AssertionError(f"never: {what}")


async def test_twenty_concurrent_modern_calls_share_one_upstream_process() -> None:
    async with served_proxy(DEMO) as proxy:
        most = 0
        progressed = [trio.Event() for _ in range(20)]

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, len(children(proxy.pid)))
                await trio.sleep(0.01)

        async def call(n: int) -> None:
            async with open_client(proxy.url, mode="modern") as client:
                assert client.modern

                async def on_progress(*_: Any) -> None:
                    progressed[n].set()

                await client.call_tool("sleep", {"seconds": 60}, on_progress=on_progress)

        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                for n in range(20):
                    nursery.start_soon(call, n)
                for event in progressed:
                    await event.wait()
                # All twenty are in flight now, over one upstream session.
                assert len(children(proxy.pid)) == 1
                nursery.cancel_scope.cancel()
        assert most == 1


async def cancel_five_calls(proxy: Proxy) -> None:
    """Five modern calls, each cancelled (its connection closed) within its first 200 ms."""

    async def cancelled_call(n: int) -> None:
        body = modern_body(n, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        async with httpx.AsyncClient(timeout=GUARD) as client:
            with trio.move_on_after(0.1 + n * 0.02):
                headers = modern_headers("tools/call", "echo")
                await client.post(proxy.url, json=body, headers=headers)
                raise AssertionError("answered before its cancel")  # pragma: no cover

    async with trio.open_nursery() as nursery:
        for n in range(5):
            nursery.start_soon(cancelled_call, n)


async def test_modern_calls_cancelled_while_the_upstream_starts_leave_no_connection() -> None:
    async with served_proxy(DEMO) as proxy:
        assert children(proxy.pid) == set()  # nothing started yet: the calls start it
        await cancel_five_calls(proxy)
        # They asked for the upstream, which goes on starting in the proxy's pool: once.
        await eventually(lambda: children(proxy.pid), "the upstream child started")
        await eventually(
            lambda: not [s for s in tcp_states(proxy.pid) if s != LISTEN],
            f"every cancelled connection closed (states: {tcp_states(proxy.pid)})",
        )
        assert CLOSE_WAIT not in tcp_states(proxy.pid)
        # The upstream they started serves the next call.
        async with open_client(proxy.url, mode="modern") as client:
            assert (await client.call_tool("echo", {"text": "after"})).content[0].text == "after"  # type: ignore[union-attr]
        assert len(children(proxy.pid)) == 1


@pytest.mark.parametrize(
    "state", ["idle", "upstream starting", "calls cancelled as it starts", "call in flight"]
)
async def test_sigterm_ends_the_proxy_and_its_upstream_in_every_state(state: str) -> None:
    async with served_proxy(DEMO) as proxy, trio.open_nursery() as nursery:
        if state == "idle":
            async with open_client(proxy.url, mode="modern") as client:
                await client.call_tool("echo", {"text": "hi"})
        elif state == "upstream starting":

            async def first_call() -> None:
                body = modern_body(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
                async with httpx.AsyncClient(timeout=GUARD) as client:
                    try:
                        headers = modern_headers("tools/call", "echo")
                        await client.post(proxy.url, json=body, headers=headers)
                    except httpx.TransportError:
                        pass  # ended by the shutdown, one way or another

            nursery.start_soon(first_call)
            await eventually(lambda: children(proxy.pid), "the upstream child started")
        elif state == "calls cancelled as it starts":
            await cancel_five_calls(proxy)
            await eventually(lambda: children(proxy.pid), "the upstream child started")
        else:
            progressed = trio.Event()

            async def sleeping() -> None:
                async with open_client(proxy.url, mode="modern") as client:

                    async def on_progress(*_: Any) -> None:
                        progressed.set()

                    with pytest.raises(Exception):  # noqa: B017 - the drain's retryable error
                        await client.call_tool("sleep", {"seconds": 60}, on_progress=on_progress)

            nursery.start_soon(sleeping)
            with trio.fail_after(GUARD):
                await progressed.wait()
        upstream = children(proxy.pid)
        proxy.process.send_signal(signal.SIGTERM)
        with trio.fail_after(GUARD):
            assert await proxy.process.wait() == 0
        await eventually(
            lambda: not any(alive(child) for child in upstream),
            "the upstream child ended with the proxy",
        )


async def test_a_handshake_era_upstream_gets_no_modern_field_and_its_question_is_answered(
    tmp_path: Path,
) -> None:
    log = tmp_path / "frames.jsonl"
    upstream = [sys.executable, str(RECORDING), str(log), "--"]
    upstream += [sys.executable, str(HERE / "py_asking_server.py")]
    asked: list[str] = []

    def on_elicit(params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with (
        served_proxy(upstream) as proxy,
        open_client(proxy.url, mode="modern", on_elicit=on_elicit) as client,
    ):
        assert client.modern
        with trio.fail_after(GUARD):
            result = await client.call_tool("book", {"table": 4})
        assert not result.is_error
        assert result.content[0].text == "table 4 booked for Ada"  # type: ignore[union-attr]
    assert asked == ["Whose table?"]
    frames = [json.loads(line) for line in log.read_text().splitlines()]
    sent = [f["message"] for f in frames if f.get("direction") == "client->server"]
    heard = [f["message"] for f in frames if f.get("direction") == "server->client"]
    # The upstream negotiated the handshake era ...
    (initialized,) = [m for m in heard if m.get("id") == sent[0].get("id") and "result" in m]
    assert sent[0]["method"] == "initialize"
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    # ... and never saw a field of the modern era's multi round-trip requests.
    for message in sent:
        params = message.get("params")
        if isinstance(params, dict):
            assert not {"requestState", "inputResponses"} & params.keys(), message
    # Its question was a real request to the proxy's client, answered with the downstream's
    # answer (on the modern client's retry, which called the tool once more).
    question = [m for m in heard if m.get("method") == "elicitation/create"][-1]
    (answer,) = [m for m in sent if m.get("id") == question["id"] and "method" not in m]
    assert answer["result"] == {"action": "accept", "content": {"name": "Ada"}}
