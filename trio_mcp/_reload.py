"""``trio-mcp serve FILE --reload``: a supervisor that restarts the server when its code changes.

The supervisor (this process) runs the server in a child process, the same ``trio-mcp`` command
line without ``--reload``, and watches the ``*.py`` files under the server's folder (and the
project file) with watchfiles, whose ``awatch`` runs on anyio and so under Trio. On a change it
sends the child SIGTERM, waits its grace, then SIGKILL, and starts a new one, on the same
listening socket, which the supervisor binds once and every child inherits; a child that exits
by itself (a syntax error) is started again at the next change. SIGINT and SIGTERM are passed
on to the child, and the supervisor exits with its status.
"""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

#: The extra that holds the watcher.
MISSING = "--reload needs watchfiles: pip install 'trio-mcp[reload]'"


def _say(line: str) -> None:
    sys.stderr.write(f"trio-mcp: {line}\n")
    sys.stderr.flush()


def _status(code: int) -> int:
    """A child's exit status as a shell reports it (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


def _shown(paths: Sequence[str]) -> str:
    shown = ", ".join(os.path.relpath(path) for path in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


async def _watch(
    paths: Sequence[Path], files: Sequence[Path], send: trio.MemorySendChannel[Any]
) -> None:
    from watchfiles import PythonFilter, awatch

    python = PythonFilter()
    exact = {str(path.resolve()) for path in files}

    def wanted(change: Any, path: str) -> bool:
        return path in exact or python(change, path)

    watched = [str(path) for path in (*paths, *files) if path.exists()]
    # rust_timeout: the watcher's thread returns at least this often (ms), so that a cancel
    # (the supervisor ending) is seen promptly.
    async for changes in awatch(*watched, watch_filter=wanted, rust_timeout=500):
        await send.send(("change", sorted(path for _, path in changes)))


def _forget_bytecode(paths: Sequence[str]) -> None:
    """Remove the bytecode cached for the changed files. Python takes a cached ``.pyc`` as
    current when the source's size and its modification time in whole seconds are the ones it
    recorded: an edit that keeps the size, saved within the second of the last compile (a digit
    changed), would otherwise leave the next server running the old code."""
    for path in paths:
        if not path.endswith(".py"):
            continue
        try:
            os.unlink(importlib.util.cache_from_source(path))
        except (OSError, ValueError, NotImplementedError):
            pass  # none was cached (or none can be)


async def _signals(send: trio.MemorySendChannel[Any]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        async for signum in received:
            await send.send(("signal", signum))


async def _stop(process: trio.Process, grace: float) -> None:
    """SIGTERM, ``grace`` seconds to end (the server drains), then SIGKILL."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(grace):
            await process.wait()
        if process.returncode is None:
            process.kill()
    await process.wait()


async def supervise(
    command: Sequence[str],
    folders: Sequence[Path],
    files: Sequence[Path],
    grace: float,
    keep_fds: Sequence[int] = (),
) -> int:
    """Run ``command`` until SIGINT or SIGTERM, restarting it on a change under ``folders`` (its
    ``*.py`` files) or to ``files``; the child's exit status. Every child inherits ``keep_fds``
    (the listening socket they all serve on)."""
    send, receive = trio.open_memory_channel[Any](math.inf)

    async def start(nursery: trio.Nursery) -> trio.Process:
        # A session of its own: a terminal's Ctrl-C reaches the supervisor only, which passes
        # it on once (a second SIGINT would cut the child's graceful shutdown short).
        process = await trio.lowlevel.open_process(
            list(command), start_new_session=True, pass_fds=tuple(keep_fds)
        )

        async def reap() -> None:
            await process.wait()
            await send.send(("exited", process))

        nursery.start_soon(reap)
        return process

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_signals, send)
        nursery.start_soon(_watch, folders, files, send)
        where = ", ".join(str(folder) for folder in folders)
        _say(f"reloading on changes to *.py under {where}" + "".join(f", {f}" for f in files))
        process = await start(nursery)
        try:
            async for kind, value in receive:
                if kind == "signal":
                    if process.returncode is None:
                        process.send_signal(value)
                        await process.wait()
                    assert process.returncode is not None
                    return _status(process.returncode)
                if kind == "change":
                    _say(f"{_shown(value)} changed: restarting the server")
                    await _stop(process, grace)
                    _forget_bytecode(value)
                    process = await start(nursery)
                elif kind == "exited" and value is process:
                    _say(
                        f"the server exited (status {_status(process.returncode or 0)}); "
                        "restarting at the next change"
                    )
        finally:
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await _stop(process, grace)
    return 1  # not reached: the channel never closes


def run(
    command: Sequence[str],
    folders: Sequence[Path],
    files: Sequence[Path],
    grace: float,
    keep_fds: Sequence[int] = (),
) -> int:
    """:func:`supervise` under Trio; SystemExit-free, for ``trio-mcp``'s main."""
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        _say(MISSING)
        return 2
    return trio.run(supervise, command, folders, files, grace, keep_fds)


def child_command(argv: Sequence[str]) -> list[str]:
    """The server's own command line: this ``trio-mcp`` with ``argv`` less ``--reload``."""
    return [sys.executable, "-m", "trio_mcp", *(word for word in argv if word != "--reload")]
