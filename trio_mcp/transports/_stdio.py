"""stdio: newline-delimited JSON-RPC over byte streams, for a server on its own stdin/stdout and
for a client talking to a server it spawned as a child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO, Any

import trio

from ..protocol._errors import ConnectionClosed
from ..protocol._framing import (
    DEFAULT_MAX_LINE_BYTES,
    END,
    TOO_LONG,
    CuttingLineSplitter,
    LineFramer,
    Oversized,
)
from ..protocol._jsonrpc import Invalid, RequestId
from ._transport import BaseTransport, OutgoingMessage

_CHUNK = 65536


class LineTransport(BaseTransport):
    """Newline-delimited JSON-RPC over a pair of trio byte streams.

    One message per line. A line longer than ``max_line_bytes`` is skipped up to its newline and
    given to the engine as :class:`Oversized` (answered with -32600, and failing the request of
    ours it may have answered), so one oversized message costs nothing else on the connection.
    The end of the input is a half-close: the output still works, so what was received is
    finished and answered.
    """

    half_close = True

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self.max_line_bytes = max_line_bytes
        self._framer = LineFramer(max_line_bytes)

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        await self._write(data + b"\n")

    async def send_many(self, messages: Iterable[OutgoingMessage]) -> None:
        """Several messages in one write (the engine's writer batches what is queued)."""
        lines = [message.data for message in messages]
        if lines:
            await self._write(b"\n".join(lines) + b"\n")

    async def _write(self, data: bytes) -> None:
        try:
            if isinstance(self._send_stream, trio.lowlevel.FdStream):
                await _write_fd(self._send_stream.fileno(), data)
            else:
                await self._send_stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise ConnectionClosed(f"cannot write to the peer: {exc}") from None

    async def receive(self) -> bytes | Invalid:
        while True:
            line = self._framer.next_line()
            if isinstance(line, bytes):
                return line
            if line is TOO_LONG:
                return self._too_long()
            if line is END:
                raise trio.EndOfChannel
            self._framer.feed(await self._read_chunk())  # an empty read is the end

    async def _read_chunk(self) -> bytes:
        try:
            if isinstance(self._receive_stream, trio.lowlevel.FdStream):
                return await _read_fd(self._receive_stream.fileno())
            return bytes(await self._receive_stream.receive_some(_CHUNK))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return b""

    def _too_long(self) -> Oversized:
        return Oversized.from_head(self.max_line_bytes, self._framer.refused_head)


async def _read_fd(fd: int) -> bytes:
    """Read what a non-blocking pipe (an ``FdStream``'s) holds, once every task that was
    runnable has taken a step; ``b""`` at its end.

    The engine reads again right after it has started the task of the request it just read.
    ``FdStream.receive_some`` yields once, then reads, and trio runs the tasks of a scheduling
    round in either order: half the time the read came first, found the pipe empty (the peer
    is waiting for that very answer), and registered with epoll, all before the request ran,
    on a sequential call's critical path. Two yields (the second cannot be cancelled) put the
    read after the request's first step, in which a quick request has written its answer.
    Only the engine's read loop reads the pipe.
    """
    await trio.lowlevel.checkpoint()
    await trio.lowlevel.cancel_shielded_checkpoint()
    while True:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)


async def _write_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a non-blocking pipe (an ``FdStream``'s), then yield.

    ``FdStream.send_all`` takes its checkpoint before it writes: a whole pass of the run loop
    between a response being ready and its first byte leaving. Written first, as trio's socket
    streams do: a cancel already delivered still stops it before anything is written, and the
    checkpoint after it cannot be cancelled. Only a full pipe makes it wait (cancellably, as
    ``send_all`` does). Only one task writes at a time (the engine's writer). An ``OSError``
    (the peer gone) is the caller's to translate.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    waited = False
    with memoryview(data) as view:
        sent = 0
        while sent < len(view):
            try:
                sent += os.write(fd, view[sent:])
            except BlockingIOError:
                waited = True
                await trio.lowlevel.wait_writable(fd)
    if not waited:
        await trio.lowlevel.cancel_shielded_checkpoint()


# -- the server side ----------------------------------------------------------------------------


class _StdioFiles:
    """Private copies of fd 0 and 1 for the protocol, with the originals pointed elsewhere.

    fd 1 is pointed at stderr, so a stray ``print()`` or a child process that inherits stdout
    cannot corrupt the stream; fd 0 reads from the null device, so nothing else can steal input.
    Everything is put back on exit.
    """

    def __enter__(self) -> tuple[int, int]:
        sys.stdout.flush()
        self._saved = (os.dup(0), os.dup(1))
        protocol_in, protocol_out = os.dup(0), os.dup(1)
        os.dup2(2, 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        return protocol_in, protocol_out

    def __exit__(self, *exc: object) -> None:
        sys.stdout.flush()
        saved_in, saved_out = self._saved
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def _stderr_is_a_terminal() -> bool:
    try:
        return os.isatty(2)
    except OSError:
        return False


async def serve_stdio_transport(
    serve: Callable[[LineTransport], Any],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    banner: str | None = None,
) -> None:
    """Run ``serve(transport)`` on this process's stdin and stdout until stdin ends.

    ``banner`` is written to stderr, only when stderr is a terminal (a person is watching; an
    MCP host's log gets nothing), once SIGINT is heard: whoever reads "Ctrl-C" in it may press
    it at once. In the main thread SIGINT stops serving the way the end of input does, then
    ``KeyboardInterrupt`` is raised on its own, never inside an exception group, so an entry
    point can exit quietly.
    """
    interrupted = False
    with _StdioFiles() as (protocol_in, protocol_out), _sigint_receiver() as signals:
        if banner is not None and _stderr_is_a_terminal():
            sys.stderr.write(banner.rstrip("\n") + "\n")
            sys.stderr.flush()
        async with (
            trio.lowlevel.FdStream(protocol_in) as receive,
            trio.lowlevel.FdStream(protocol_out) as send,
            trio.open_nursery() as nursery,
        ):

            async def stop_on_sigint() -> None:
                nonlocal interrupted
                if signals is None:
                    return
                async for _ in signals:
                    interrupted = True
                    nursery.cancel_scope.cancel()
                    return

            async def run() -> None:
                await serve(LineTransport(receive, send, max_line_bytes=max_line_bytes))
                nursery.cancel_scope.cancel()

            nursery.start_soon(stop_on_sigint)
            nursery.start_soon(run)
    if interrupted:
        raise KeyboardInterrupt


@contextmanager
def _sigint_receiver() -> Iterator[AsyncIterator[int] | None]:
    """SIGINT as a stream in the main thread (where signals arrive), else None."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        yield signals


# -- the client side ----------------------------------------------------------------------------

StderrTarget = None | str | int | Path | IO[Any] | Callable[[str], Any]


class ProcessTransport(LineTransport):
    """A line transport to a child process; its end says how the child ended."""

    #: The child closing its stdout is the child going away: nothing to finish for it.
    half_close = False

    def __init__(self, process: trio.Process, *, max_line_bytes: int) -> None:
        assert process.stdout is not None and process.stdin is not None
        super().__init__(process.stdout, process.stdin, max_line_bytes=max_line_bytes)
        self.process = process

    async def receive(self) -> bytes | Invalid:
        try:
            return await super().receive()
        except trio.EndOfChannel:
            with trio.move_on_after(0.5):
                await self.process.wait()
            code = self.process.returncode
            if code is None:
                raise ConnectionClosed("the server process closed its stdout") from None
            if code < 0:
                raise ConnectionClosed(f"the server process was killed by signal {-code}") from None
            raise ConnectionClosed(f"the server process exited with status {code}") from None


def _stderr_argument(stderr: StderrTarget) -> tuple[Any, IO[Any] | None]:
    """What to pass to the child as stderr, and a file we opened (to close afterwards)."""
    if stderr is None or stderr == "inherit":
        return None, None
    if stderr == "discard":
        return subprocess.DEVNULL, None
    if isinstance(stderr, str | Path):
        opened = open(stderr, "ab")  # noqa: SIM115 - closed when the process is stopped
        return opened, opened
    if isinstance(stderr, int) or hasattr(stderr, "fileno"):
        return stderr, None
    if callable(stderr):
        return subprocess.PIPE, None
    raise TypeError(f"unsupported stderr target: {stderr!r}")


#: The longest stderr line given to a callback; the rest of a longer one is dropped.
MAX_STDERR_LINE_BYTES = 64 * 1024


async def _forward_lines(
    stream: trio.abc.ReceiveStream,
    callback: Callable[[str], Any],
    done: trio.Event | None = None,
    *,
    max_line_bytes: int = MAX_STDERR_LINE_BYTES,
) -> None:
    """Give each line of ``stream`` to ``callback``, cut at ``max_line_bytes`` (linear in the
    bytes read; never more than that held). ``done`` is set at the end of the stream."""
    lines = CuttingLineSplitter(max_line_bytes)
    try:
        while True:
            try:
                chunk = await stream.receive_some(_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            for line in lines.feed(chunk) if chunk else lines.end():
                try:
                    callback(line)
                except Exception:  # a logging callback must not take the connection down
                    pass
            if not chunk:
                return
    finally:
        if done is not None:
            done.set()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# -- descendants (Linux: /proc) ------------------------------------------------------------------
#
# A process that calls setsid() leaves the child's process group, so signalling the group misses
# it. On Linux the parent links in /proc find it, as long as its parent is still alive when we
# look: so the tree is read before the child is stopped, and again (from what was found) after.

_Identity = tuple[int, int]  # (pid, start time in clock ticks): a pid that was reused differs


def _process_table() -> dict[int, tuple[int, int]]:
    """Every visible process: pid -> (parent pid, start time). Empty without /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # After the name: state, ppid, ... starttime is the 22nd field of the whole line.
        table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def _descendants(roots: Iterable[int]) -> set[_Identity]:
    """The processes below ``roots`` (pids), as identities."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: set[_Identity] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            identity = (child, table[child][1])
            if identity not in found:
                found.add(identity)
                todo.append(child)
    return found


def _still_running(identities: Iterable[_Identity]) -> set[_Identity]:
    table = _process_table()
    return {(pid, start) for pid, start in identities if table.get(pid, (0, -1))[1] == start}


def _signal_all(identities: Iterable[_Identity], signum: int) -> None:
    for pid, _ in _still_running(identities):
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


async def stop_process(
    process: trio.Process,
    *,
    close_timeout: float,
    terminate_timeout: float,
    kill_timeout: float,
) -> None:
    """Close stdin and wait; then SIGTERM the process group and wait; then SIGKILL it.

    Whatever the server left in its process group is killed at the end. On Linux, so is every
    process found below the child before it was stopped, and below those afterwards, in its
    group or not (``setsid()``). Each step is bounded; the caller shields this from
    cancellation.
    """
    pgid = process.pid  # the child leads its own session and process group
    below = _descendants([process.pid])
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.move_on_after(close_timeout):
        await process.wait()
    if process.returncode is None:
        below |= _descendants([process.pid])
        _signal_group(pgid, signal.SIGTERM)
        _signal_all(below, signal.SIGTERM)
        with trio.move_on_after(terminate_timeout):
            await process.wait()
    if process.returncode is None:
        below |= _descendants([process.pid])
        _signal_group(pgid, signal.SIGKILL)
        with trio.move_on_after(kill_timeout):
            await process.wait()
    _signal_group(pgid, signal.SIGKILL)
    # What left the group: the processes found before, and what those started since.
    below |= _descendants(pid for pid, _ in _still_running(below))
    _signal_all(below, signal.SIGKILL)


@asynccontextmanager
async def open_process_transport(
    command: Sequence[str],
    nursery: trio.Nursery,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stderr: StderrTarget = "inherit",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    close_timeout: float = 2.0,
    terminate_timeout: float = 2.0,
    kill_timeout: float = 2.0,
) -> AsyncIterator[ProcessTransport]:
    """Spawn ``command`` in its own process group and talk to it over its stdin/stdout.

    ``env`` adds to (and overrides) this process's environment. ``stderr`` is ``"inherit"``,
    ``"discard"``, a path or file to append to, or a callable given each line.
    """
    if not command:
        raise ValueError("the command to spawn is empty")
    child_stderr, opened = _stderr_argument(stderr)
    environment = {**os.environ, **env} if env is not None else None
    try:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=child_stderr,
            env=environment,
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    forwarded: trio.Event | None = None
    try:
        if process.stderr is not None and callable(stderr):
            forwarded = trio.Event()
            nursery.start_soon(_forward_lines, process.stderr, stderr, forwarded)
        yield ProcessTransport(process, max_line_bytes=max_line_bytes)
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(
                process,
                close_timeout=close_timeout,
                terminate_timeout=terminate_timeout,
                kill_timeout=kill_timeout,
            )
            if forwarded is not None:
                # The last lines the child wrote, up to the end of its stderr (bounded).
                with trio.move_on_after(kill_timeout):
                    await forwarded.wait()
            # Every pipe is closed now, not when the process object is collected.
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    await pipe.aclose()
        if opened is not None:
            opened.close()
