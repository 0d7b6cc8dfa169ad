"""Newline framing over byte streams, chunk boundaries and limits included."""

from __future__ import annotations

import contextlib
import os
import select
from collections.abc import AsyncIterator

import orjson
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._jsonrpc import Invalid
from trio_mcp.transports import LineTransport


def pair(max_line_bytes: int = 64) -> tuple[trio.testing.MemorySendStream, LineTransport]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    return send, LineTransport(
        receive, trio.testing.MemorySendStream(), max_line_bytes=max_line_bytes
    )


async def test_lines_split_across_chunks_and_blank_lines() -> None:
    send, lines = pair()
    for chunk in [b'{"a"', b":1}\n\n", b"\r\n", b'{"b":2}\n{"c"', b":3}"]:
        await send.send_all(chunk)
    await send.aclose()
    assert await lines.receive() == b'{"a":1}'
    assert await lines.receive() == b'{"b":2}'
    assert await lines.receive() == b'{"c":3}'  # the last line needs no newline
    with pytest.raises(trio.EndOfChannel):
        await lines.receive()


@pytest.mark.invariant(11)
async def test_an_oversized_line_is_refused_once_and_skipped() -> None:
    send, lines = pair(max_line_bytes=16)
    await send.send_all(b"x" * 40)
    refused = await lines.receive()
    assert isinstance(refused, Invalid)
    assert refused.id is None and refused.error.code == -32600
    await send.send_all(b"y" * 40 + b'\n{"ok":1}\n')
    assert await lines.receive() == b'{"ok":1}'
    await send.send_all(b"z" * 17 + b"\n")
    assert isinstance(await lines.receive(), Invalid)


async def test_send_appends_one_newline() -> None:
    sink = trio.testing.MemorySendStream()
    lines = LineTransport(trio.testing.MemoryReceiveStream(), sink)
    await lines.send(b'{"a":1}')
    await lines.send(b'{"b":2}')
    assert sink.get_data_nowait() == b'{"a":1}\n{"b":2}\n'


@given(
    st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=20),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=10),
)
def test_any_chunking_gives_back_the_same_lines(messages: list[bytes], cuts: list[int]) -> None:
    """However the bytes are cut into reads, the lines come back whole and in order."""
    wire = b"".join(m + b"\n" for m in messages)
    chunks = []
    position, index = 0, 0
    while position < len(wire):
        size = cuts[index % len(cuts)]
        chunks.append(wire[position : position + size])
        position += size
        index += 1

    async def run() -> list[bytes]:
        send, lines = pair(max_line_bytes=1000)
        for chunk in chunks:
            await send.send_all(chunk)
        await send.aclose()
        got: list[bytes] = []
        while True:
            try:
                line = await lines.receive()
            except trio.EndOfChannel:
                return got
            assert isinstance(line, bytes)
            got.append(line)

    expected = [m for m in messages if m.strip()]
    assert trio.run(run) == expected


async def _reply_over_the_limit(reply: bytes) -> list[str]:
    """Two calls in flight over a line transport; the peer sends ``reply`` (too long), then
    answers both calls. What each call got."""
    to_us, our_input = trio.testing.memory_stream_one_way_pair()
    lines = LineTransport(our_input, trio.testing.MemorySendStream(), max_line_bytes=64)
    outcomes: list[str] = []
    with trio.fail_after(10):  # a hang guard
        await _run_calls(lines, to_us, reply, outcomes)
    return sorted(outcomes)


async def _run_calls(
    lines: LineTransport, to_us: trio.testing.MemorySendStream, reply: bytes, outcomes: list[str]
) -> None:
    from trio_mcp import ProtocolError
    from trio_mcp._engine import Engine

    class NoMethods:
        def route(self, request: object, session: object) -> object:
            raise AssertionError("no request expected")

        def on_notification(
            self, notification: object, session: object, principal: object = None
        ) -> None:
            pass

    async with trio.open_nursery() as nursery:
        session = Engine(lines, NoMethods())  # type: ignore[arg-type]
        await nursery.start(session.run)

        async def call(n: int) -> None:
            try:
                await session.request("tools/call", {"n": n}, request_id=n)
                outcomes.append(f"{n}: answered")
            except ProtocolError as exc:
                outcomes.append(f"{n}: {exc.message}")

        async with trio.open_nursery() as calls:
            calls.start_soon(call, 1)
            calls.start_soon(call, 2)
            await trio.testing.wait_all_tasks_blocked()
            await to_us.send_all(reply + b"\n")
            await trio.testing.wait_all_tasks_blocked()
            # Late answers for a call that already failed are ignored.
            await to_us.send_all(
                b'{"jsonrpc":"2.0","id":1,"result":{}}\n{"jsonrpc":"2.0","id":2,"result":{}}\n'
            )
        nursery.cancel_scope.cancel()


TOO_LARGE = "Message too large: the peer sent a message over the limit of 64 bytes; it was skipped"


async def test_a_reply_over_the_limit_fails_the_call_its_start_names() -> None:
    reply = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 100 + b'"}}'
    assert await _reply_over_the_limit(reply) == [f"1: {TOO_LARGE}", "2: answered"]


async def test_a_reply_over_the_limit_whose_start_names_no_id_fails_every_call() -> None:
    reply = b'{"result":{"text":"' + b"x" * 100 + b'"},"jsonrpc":"2.0","id":1}'
    assert await _reply_over_the_limit(reply) == [f"1: {TOO_LARGE}", f"2: {TOO_LARGE}"]


async def test_a_request_over_the_limit_fails_no_call_of_ours() -> None:
    request = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"text":"' + b"x" * 100 + b'"}}'
    assert await _reply_over_the_limit(request) == ["1: answered", "2: answered"]


# -- writing to a pipe -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def pipe_transport() -> AsyncIterator[tuple[trio.lowlevel.FdStream, LineTransport]]:
    """A line transport writing to a real pipe, and the pipe's reading end."""
    read_fd, write_fd = os.pipe()
    async with trio.lowlevel.FdStream(read_fd) as reader, trio.lowlevel.FdStream(write_fd) as sink:
        yield reader, LineTransport(trio.testing.MemoryReceiveStream(), sink)


async def test_a_message_is_on_the_pipe_before_the_write_yields() -> None:
    """The bytes are written first and the checkpoint comes after: when the writing task first
    yields, the line is already on the pipe, not a run-loop pass later."""

    class FirstYield(trio.abc.Instrument):
        def __init__(self, task: trio.lowlevel.Task, fd: int) -> None:
            self.task, self.fd = task, fd
            self.on_the_pipe: bool | None = None

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if task is self.task and self.on_the_pipe is None:
                self.on_the_pipe = bool(select.select([self.fd], [], [], 0)[0])

    async with pipe_transport() as (reader, lines):
        probe = FirstYield(trio.lowlevel.current_task(), reader.fileno())
        trio.lowlevel.add_instrument(probe)
        try:
            await lines.send(b'{"a":1}')
        finally:
            trio.lowlevel.remove_instrument(probe)
        assert probe.on_the_pipe is True
        assert await reader.receive_some(1024) == b'{"a":1}\n'


async def test_a_write_larger_than_the_pipe_waits_and_arrives_whole() -> None:
    big = b'{"pad":"' + b"x" * 1_000_000 + b'"}'
    async with pipe_transport() as (reader, lines):
        got = bytearray()

        async def drain() -> None:
            while len(got) < len(big) + 1:
                got.extend(await reader.receive_some(65536))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            with trio.fail_after(10):
                await lines.send(big)
        assert bytes(got) == big + b"\n"


async def test_a_write_already_cancelled_writes_nothing() -> None:
    async with pipe_transport() as (reader, lines):
        with trio.CancelScope() as scope:
            scope.cancel()
            await lines.send(b'{"a":1}')
        assert scope.cancelled_caught
        with trio.move_on_after(0.05) as waited:
            await reader.receive_some(1024)
        assert waited.cancelled_caught  # nothing was written


async def test_a_read_of_the_pipe_comes_after_the_request_just_started_has_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Having started a request's task, the engine reads its input again only once that task
    has taken its step: a quick request is answered before the pipe is found empty, never after
    (trio runs a round's tasks in either order: 20 calls would catch a read that came first)."""
    from trio_mcp import Server

    server = Server("order", "1.0")
    ran = 0

    @server.tool()
    async def quick() -> str:
        nonlocal ran
        ran += 1
        return "ok"

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.set_blocking(in_write, True)
    sent = 0
    empty_reads: list[bool] = []  # for each read that found the pipe empty: had all run?
    real_read = os.read

    def spying_read(fd: int, size: int) -> bytes:
        try:
            return real_read(fd, size)
        except BlockingIOError:
            if fd == in_read:
                empty_reads.append(ran == sent)
            raise

    monkeypatch.setattr(os, "read", spying_read)

    def line(message: dict[str, object]) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", **message}) + b"\n"

    async with (
        trio.lowlevel.FdStream(in_read) as stdin,
        trio.lowlevel.FdStream(out_write) as stdout,
        trio.lowlevel.FdStream(out_read) as answers,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(server.serve_transport, LineTransport(stdin, stdout))
        received = bytearray()

        async def answer() -> dict[str, object]:
            while b"\n" not in received:
                received.extend(await answers.receive_some(65536))
            head, _, rest = bytes(received).partition(b"\n")
            received[:] = rest
            message: dict[str, object] = orjson.loads(head)
            return message

        init = {"protocolVersion": "2025-06-18", "capabilities": {}}
        init["clientInfo"] = {"name": "t", "version": "0"}
        os.write(in_write, line({"id": 0, "method": "initialize", "params": init}))
        await answer()
        os.write(in_write, line({"method": "notifications/initialized"}))
        for rid in range(1, 21):
            sent += 1
            params = {"name": "quick", "arguments": {}}
            os.write(in_write, line({"id": rid, "method": "tools/call", "params": params}))
            assert (await answer())["id"] == rid
        assert ran == sent == 20
        # An empty read after the answer went out is fine (the next request not sent yet).
        assert empty_reads and all(empty_reads), empty_reads
        os.close(in_write)  # the end of the input ends the server
