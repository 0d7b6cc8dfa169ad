"""Newline framing over byte streams, chunk boundaries and limits included."""

from __future__ import annotations

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
