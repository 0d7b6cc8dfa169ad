"""Newline framing without an event loop: lines from any chunking, the bound on a line's length,
blank lines, and the end of the stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._framing import END, NEED_DATA, TOO_LONG, Framing, LineFramer


def drain(framer: LineFramer) -> list[bytes | Framing]:
    """Every line the framer can give now, then what it waits for."""
    out: list[bytes | Framing] = []
    while True:
        item = framer.next_line()
        out.append(item)
        if item is NEED_DATA or item is END:
            return out


def test_lines_across_reads_blank_lines_and_a_last_line_without_newline() -> None:
    framer = LineFramer()
    assert drain(framer) == [NEED_DATA]
    framer.feed(b'{"a"')
    assert drain(framer) == [NEED_DATA]
    framer.feed(b':1}\n\n \r\n{"b":2}\r\n{"c"')
    assert drain(framer) == [b'{"a":1}', b'{"b":2}\r', NEED_DATA]
    framer.feed(b":3}")
    framer.feed(b"")  # the end of the stream
    assert drain(framer) == [b'{"c":3}', END]
    assert drain(framer) == [END]


def test_an_oversized_line_is_refused_once_as_soon_as_it_is_one() -> None:
    framer = LineFramer(max_line_bytes=16)
    framer.feed(b"x" * 17)
    assert drain(framer) == [TOO_LONG, NEED_DATA]  # before its newline ever comes
    framer.feed(b"x" * 40)
    assert drain(framer) == [NEED_DATA]  # the rest of it is skipped, not buffered
    framer.feed(b'x\n{"ok":1}\n' + b"y" * 17 + b'\n{"ok":2}')
    assert drain(framer) == [b'{"ok":1}', TOO_LONG, NEED_DATA]
    framer.feed(b"")
    assert drain(framer) == [b'{"ok":2}', END]


def test_a_line_of_exactly_the_bound_is_a_line() -> None:
    framer = LineFramer(max_line_bytes=4)
    framer.feed(b"abcd")
    assert drain(framer) == [NEED_DATA]
    framer.feed(b"\nabcde\n")
    assert drain(framer) == [b"abcd", TOO_LONG, NEED_DATA]


def test_an_oversized_last_line_is_refused_at_the_end() -> None:
    framer = LineFramer(max_line_bytes=4)
    framer.feed(b"ok\nabcde")
    framer.feed(b"")
    assert drain(framer) == [b"ok", TOO_LONG, END]


LIMIT = 8


@given(
    st.lists(st.binary(max_size=2 * LIMIT).map(lambda b: b.replace(b"\n", b"x")), max_size=12),
    st.booleans(),
    st.lists(st.integers(min_value=1, max_value=3 * LIMIT), min_size=1, max_size=8),
)
def test_any_chunking_gives_each_line_once_or_one_refusal(
    lines: list[bytes], final_newline: bool, cuts: list[int]
) -> None:
    wire = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    framer = LineFramer(max_line_bytes=LIMIT)
    got: list[bytes | Framing] = []
    position = index = 0
    while position < len(wire):
        size = cuts[index % len(cuts)]
        framer.feed(wire[position : position + size])
        got.extend(i for i in drain(framer) if i is not NEED_DATA)
        position, index = position + size, index + 1
    framer.feed(b"")
    got.extend(drain(framer))
    expected: list[bytes | Framing] = []
    for line in lines:
        if len(line) > LIMIT:
            expected.append(TOO_LONG)
        elif line.strip():
            expected.append(line)
    assert got == [*expected, END]
