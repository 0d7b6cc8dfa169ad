"""stdio for real: child processes, the server on its own fds, the trio-mcp command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from trio_mcp import Command, ConnectionClosed, open_client
from trio_mcp._engine import INPUT_ENDED_MESSAGE

from .._raw_stdio import DEMO, ROOT, SERVERS, raw_child

#: A hang guard for anything that spawns a process, never a performance assertion.
GUARD = 60


async def test_our_client_drives_the_demo_over_stdio() -> None:
    with trio.fail_after(GUARD):
        async with open_client(Command(DEMO, stderr="discard")) as client:
            assert client.server_info.name == "trio-mcp-demo"
            assert {t.name for t in await client.list_tools()} == {"echo", "add", "sleep"}
            echoed = await client.call_tool("echo", {"text": "héllo\nworld"})
            assert echoed.content[0].text == "héllo\nworld"  # type: ignore[union-attr]
            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42}
            prompt = await client.get_prompt("greeting", {"name": "Ada"})
            assert "Ada" in prompt.messages[0].content.text  # type: ignore[union-attr]
            readme = await client.read_resource("demo://readme")
            assert "demo server" in readme.contents[0].text  # type: ignore[union-attr]
            templated = await client.read_resource("demo://greeting/Bob")
            assert templated.contents[0].text == "Hello, Bob!"  # type: ignore[union-attr]

            progress: list[float] = []
            slept = await client.call_tool(
                "sleep", {"seconds": 0.3}, on_progress=lambda p, t, m: progress.append(p)
            )
            assert slept.content[0].text == "slept 0.3s"  # type: ignore[union-attr]
            assert progress == sorted(progress) and progress[-1] == pytest.approx(0.3)

            # Cancel a long sleep once it has reported progress; the connection goes on.
            with trio.CancelScope() as scope:

                def first_progress(p: float, t: float | None, m: str | None) -> None:
                    scope.cancel()

                await client.call_tool("sleep", {"seconds": 600}, on_progress=first_progress)
            assert scope.cancelled_caught
            again = await client.call_tool("echo", {"text": "still here"})
            assert again.content[0].text == "still here"  # type: ignore[union-attr]


async def test_print_inside_a_tool_does_not_reach_the_protocol_stream() -> None:
    lines: list[str] = []
    with trio.fail_after(GUARD):
        async with open_client(
            Command([sys.executable, str(SERVERS / "noisy_server.py")], stderr=lines.append)
        ) as client:
            result = await client.call_tool("noisy", {})
            assert result.content[0].text == "quiet result"  # type: ignore[union-attr]
            assert not result.is_error
            # A second call proves the stream is still in sync.
            assert (await client.call_tool("noisy", {})).content[0].text == "quiet result"  # type: ignore[union-attr]
    assert lines.count("print() from a tool") == 2
    assert lines.count("output of a child process") == 2


async def test_stderr_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with trio.fail_after(GUARD):
        async with open_client(
            Command([sys.executable, str(SERVERS / "noisy_server.py")], stderr=log)
        ) as client:
            await client.call_tool("noisy", {})
    assert "print() from a tool" in log.read_text()


async def test_a_killed_child_fails_the_pending_call_with_its_exit_status() -> None:
    errors: list[ConnectionClosed] = []
    with trio.fail_after(GUARD):
        async with open_client(Command(DEMO, stderr="discard")) as client:
            transport: Any = client.session.transport
            started, failed = trio.Event(), trio.Event()

            async def call() -> None:
                try:
                    await client.call_tool(
                        "sleep", {"seconds": 600}, on_progress=lambda *a: started.set()
                    )
                except ConnectionClosed as exc:
                    errors.append(exc)
                    failed.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await started.wait()
                transport.process.kill()
                # The pending call fails promptly; the bound only stops a hang.
                with trio.fail_after(5):
                    await failed.wait()
            assert "killed by signal 9" in str(errors[0])
            with pytest.raises(ConnectionClosed):
                await client.ping()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


async def test_closing_leaves_no_process_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    with trio.fail_after(GUARD):
        async with open_client(
            Command(
                [sys.executable, str(SERVERS / "stubborn_server.py")],
                env={"STUBBORN_PIDFILE": str(pidfile), "PYTHONPATH": str(ROOT)},
                stderr="discard",
                close_timeout=0.5,
                terminate_timeout=0.5,
            )
        ) as client:
            assert (await client.call_tool("hello", {})).content[0].text == "hi"  # type: ignore[union-attr]
            child, grandchild = (int(p) for p in pidfile.read_text().split())
            assert not _gone(child) and not _gone(grandchild)
        # SIGKILL is immediate, but reaping an orphan by init may take a moment.
        while not (_gone(child) and _gone(grandchild)):  # noqa: ASYNC110 - /proc has no event
            await trio.sleep(0.05)


@pytest.mark.invariant(11)
async def test_oversized_lines_and_bad_json_lose_nothing() -> None:
    with trio.fail_after(GUARD):
        async with raw_child([sys.executable, str(SERVERS / "limited_server.py")]) as raw:
            await raw.initialize()
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 0.5}},
                }
            )
            await raw.send_raw(
                b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"' + b"y" * 5000 + b'"}}\n'
            )
            too_long = await raw.recv()
            # Its id comes before the bulk, so the refusal names it and the caller does not wait.
            assert too_long["id"] == 2 and too_long["error"]["code"] == -32600
            assert "1024 bytes" in too_long["error"]["data"]
            await raw.send_raw(b"this is not json\n")
            assert (await raw.recv())["error"]["code"] == -32700
            await raw.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
            assert await raw.recv() == {"jsonrpc": "2.0", "id": 3, "result": {}}
            done = await raw.recv()
            assert done["id"] == 1 and done["result"]["content"][0]["text"] == "slept 0.5s"


async def test_end_of_input_answers_what_outlives_the_drain_timeout_and_exits_zero() -> None:
    with trio.fail_after(GUARD):
        async with raw_child(DEMO) as raw:
            await raw.initialize()
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 600}},
                }
            )
            await raw.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert (await raw.recv())["id"] == 2  # the sleep is running
            await raw.close_input()
            # The sleep outlives the drain timeout: it is cancelled and answered, not dropped.
            cut = await raw.recv()
            assert cut["id"] == 1 and cut["error"]["code"] == -32603
            assert cut["error"]["message"] == INPUT_ENDED_MESSAGE
            assert await raw.process.wait() == 0
            assert await raw.line() is None


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_mcp", *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
        check=False,
    )


DEMO_LINE = f"{sys.executable} -m trio_mcp demo"


def test_cli_lists_tools() -> None:
    done = run_cli("tools", DEMO_LINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "echo(text: string)  Return the text unchanged."
    assert [line.split("(")[0] for line in done.stdout.splitlines()] == ["echo", "add", "sleep"]
    as_json = run_cli("tools", DEMO_LINE, "--json")
    assert [t["name"] for t in orjson.loads(as_json.stdout)] == ["echo", "add", "sleep"]


def test_cli_calls_a_tool() -> None:
    done = run_cli("call", DEMO_LINE, "add", '{"a": 2, "b": 3}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "5\n"
    as_json = run_cli("call", DEMO_LINE, "echo", '{"text": "x"}', "--json")
    assert orjson.loads(as_json.stdout) == {"content": [{"type": "text", "text": "x"}]}
    bad = run_cli("call", DEMO_LINE, "add", '{"a": "two"}')
    assert bad.returncode == 1
    assert "expected a number" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_cli_serves_a_server_object() -> None:
    done = run_cli(
        "call", f"{sys.executable} -m trio_mcp serve tests.servers.noisy_server:server", "noisy"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "quiet result\n"


async def test_ctrl_c_cancels_the_call_and_exits() -> None:
    with trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "trio_mcp", "call", DEMO_LINE, "sleep", '{"seconds": 600}'],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert process.stderr is not None
        seen = b""
        while b"progress" not in seen:
            chunk = await process.stderr.receive_some(4096)
            assert chunk, "the CLI ended before reporting progress"
            seen += chunk
        os.kill(process.pid, signal.SIGINT)
        while chunk := await process.stderr.receive_some(4096):
            seen += chunk
        assert await process.wait() == 130
        assert b"cancelled" in seen
        assert b"Traceback" not in seen


def test_the_console_script_works_from_the_environment() -> None:
    script = Path(sys.executable).parent / "trio-mcp"
    assert script.exists(), "the trio-mcp console script is not installed"
    done = subprocess.run(
        [str(script), "call", f"{script} demo", "echo", '{"text": "from the script"}'],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "from the script\n"


# -- limits and lifecycles -------------------------------------------------------------------

UNRULY = [sys.executable, str(SERVERS / "unruly_server.py")]


def _status_kib(pid: int, field: str) -> int:
    """A memory figure of a process, from /proc/PID/status (VmRSS now, VmHWM its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


@pytest.mark.invariant(11)
async def test_a_long_stderr_line_is_forwarded_cut_with_bounded_memory() -> None:
    import tracemalloc

    from trio_mcp.transports._stdio import MAX_STDERR_LINE_BYTES

    flood = 32 * 1024 * 1024
    lines: list[str] = []
    tracemalloc.start()
    try:
        with trio.fail_after(GUARD):
            async with open_client(
                Command(
                    UNRULY,
                    env={"UNRULY_STDERR_FLOOD": str(flood), "PYTHONPATH": str(ROOT)},
                    stderr=lines.append,
                )
            ) as client:
                assert (await client.call_tool("hello", {})).content[0].text == "hi"  # type: ignore[union-attr]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Never the whole line in memory: the cap, a read, and the session itself.
    assert peak < 8 * 1024 * 1024, peak
    cut = f"... ({flood - MAX_STDERR_LINE_BYTES} bytes cut)"
    assert lines[0] == "x" * MAX_STDERR_LINE_BYTES + cut
    assert lines[1] == "after the flood"


@pytest.mark.invariant(11)
async def test_a_reply_over_the_line_limit_fails_its_call_and_the_session_goes_on() -> None:
    from trio_mcp import ProtocolError

    with trio.fail_after(GUARD):
        async with open_client(
            Command(UNRULY, env={"PYTHONPATH": str(ROOT)}, stderr="discard")
        ) as client:
            with pytest.raises(ProtocolError) as failed:
                await client.call_tool("big", {"size": 5 * 1024 * 1024})
            assert failed.value.code == -32600
            assert "over the limit of 4194304 bytes" in failed.value.message
            assert (await client.call_tool("hello", {})).content[0].text == "hi"  # type: ignore[union-attr]


@pytest.mark.invariant(11)
async def test_a_client_that_does_not_read_makes_the_server_stop_reading() -> None:
    text = "x" * 65536
    count = 1500  # about 96 MiB of answers, six times the write queue's bound
    with trio.fail_after(GUARD):
        # Blocks of 64 KiB and more come from (and go back to) the system directly, so the
        # child's RSS follows what it holds, not what its allocator keeps around.
        async with raw_child(DEMO, env={"MALLOC_MMAP_THRESHOLD_": "65536"}) as raw:
            await raw.initialize()
            pid = raw.process.pid
            idle = _status_kib(pid, "VmRSS")
            written = trio.Event()

            async def write_all() -> None:
                for i in range(count):
                    await raw.send(
                        {
                            "jsonrpc": "2.0",
                            "id": i,
                            "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"text": text}},
                        }
                    )
                written.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_all)
                # Not reading for a while: the server stops reading once its queue is full,
                # so our writes block (an unbounded server takes them all meanwhile).
                with trio.move_on_after(1.5):
                    await written.wait()
                answered = set()
                for _ in range(count):
                    reply = await raw.recv()
                    assert reply["result"]["content"][0]["text"] == text
                    answered.add(reply["id"])
            assert answered == set(range(count))
            grown_mib = (_status_kib(pid, "VmHWM") - idle) / 1024
            # The write queue's bound (16 MiB) and what is being handled; never the 96 MiB.
            assert grown_mib < 32, grown_mib


def test_every_request_received_before_the_end_of_input_is_answered() -> None:
    script = Path(sys.executable).parent / "trio-mcp"

    def frame(message: dict[str, Any]) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", **message}) + b"\n"

    lines = [
        frame(
            {
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "0"},
                },
            }
        ),
        frame({"method": "notifications/initialized"}),
        *(frame({"id": i, "method": "tools/list"}) for i in range(6)),
        frame(
            {
                "id": "slept",
                "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"seconds": 0.2}},
            }
        ),
    ]
    done = subprocess.run(
        [str(script), "demo"],
        input=b"".join(lines),  # then the end of input, at once
        capture_output=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    replies = {r["id"]: r for r in map(orjson.loads, done.stdout.splitlines())}
    assert set(replies) == {"init", 0, 1, 2, 3, 4, 5, "slept"}
    assert all("tools" in replies[i]["result"] for i in range(6))
    assert replies["slept"]["result"]["content"][0]["text"] == "slept 0.2s"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_closed_clients_leave_no_pipe_open() -> None:
    import gc

    from trio_mcp.transports._stdio import open_process_transport

    child = [
        sys.executable,
        "-c",
        "import sys; sys.stderr.write('up\\n'); sys.stdout.write(sys.stdin.readline())",
    ]
    lines: list[str] = []
    gc.collect()
    gc.disable()  # a pipe closed only by the collector counts as left open
    try:
        before = _open_fds()
        with trio.fail_after(GUARD):
            for _ in range(40):
                async with (
                    trio.open_nursery() as nursery,
                    open_process_transport(child, nursery, stderr=lines.append) as transport,
                ):
                    await transport.send(b'{"n":1}')
                    assert await transport.receive() == b'{"n":1}'
        after = _open_fds()
    finally:
        gc.enable()
    assert lines == ["up"] * 40
    assert after == before


async def test_closing_kills_a_grandchild_that_left_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    grandchild = None
    try:
        with trio.fail_after(GUARD):
            async with open_client(
                Command(
                    UNRULY,
                    env={"UNRULY_PIDFILE": str(pidfile), "PYTHONPATH": str(ROOT)},
                    stderr="discard",
                )
            ) as client:
                assert (await client.call_tool("hello", {})).content[0].text == "hi"  # type: ignore[union-attr]
                grandchild = int(pidfile.read_text())
                assert os.getpgid(grandchild) != client.session.transport.process.pid  # type: ignore[attr-defined]
            # SIGKILL is immediate, but reaping an orphan by init may take a moment.
            while not _gone(grandchild):  # noqa: ASYNC110 - /proc has no event
                await trio.sleep(0.05)
    finally:
        if grandchild is not None and not _gone(grandchild):
            os.kill(grandchild, signal.SIGKILL)


class _PipeFiles:
    """In place of the process's own stdin and stdout (which a test worker may be talking on):
    a pipe already at its end for input, another for output."""

    def __enter__(self) -> tuple[int, int]:
        read_in, write_in = os.pipe()
        os.close(write_in)  # the input has ended: serving stops at once
        self._out = os.pipe()
        return read_in, self._out[1]

    def __exit__(self, *exc: object) -> None:
        os.close(self._out[0])


async def test_the_banner_is_written_once_ctrl_c_is_heard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever reads "Press Ctrl-C" may press it at once: by then SIGINT goes to the receiver
    that stops serving. Written before it, a Ctrl-C sent as soon as the banner was read could
    land in between (seen as a hung process under load)."""
    from trio_mcp.transports import _stdio

    handlers: list[Any] = []

    class Terminal:
        def write(self, text: str) -> int:
            handlers.append(signal.getsignal(signal.SIGINT))
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(_stdio, "_StdioFiles", _PipeFiles)
    monkeypatch.setattr(_stdio, "_stderr_is_a_terminal", lambda: True)
    monkeypatch.setattr(sys, "stderr", Terminal())

    async def serve(transport: Any) -> None:
        with pytest.raises(trio.EndOfChannel):
            await transport.receive()

    with trio.fail_after(10):
        await _stdio.serve_stdio_transport(serve, banner="x: Press Ctrl-C to stop.")
    assert len(handlers) == 1
    # trio's receiver of signals (trio._signals), not its KeyboardInterrupt handler.
    assert getattr(handlers[0], "__module__", None) == "trio._signals", handlers[0]
