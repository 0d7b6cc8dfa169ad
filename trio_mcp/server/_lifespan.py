"""The server's lifespan: ``Server(lifespan=fn)``, entered once before anything is served.

``fn(server)`` is an async context manager (an ``@asynccontextmanager`` function) whose value
is the lifespan state: a database pool, a client, a config. Handlers read it as
``ctx.lifespan``. Whatever serves the server holds the lifespan for as long as it serves: the
HTTP app's ASGI lifespan (startup to shutdown), ``serve_stdio`` (before the first line is read
until the end of input), ``serve_transport`` (one connection: the in-memory client). Holds that
overlap share one entry: the first starts it, the last one out ends it and waits (shielded)
until it has ended, so "closed" is true once the last connection's ``async with`` is over.

The entry runs in a task of its own, a Trio system task of the run, not in the task of the
connection that happened to come first: a lifespan that opens a nursery (a pool's keep-alive
task, say) must be exited in the task that entered it, and the first connection may well end
before the others. Connections come and go; the lifespan belongs to the run that serves them.

A startup that raises is reported as :class:`LifespanFailed`, naming the server and the error,
before anything is served; every hold waiting for that start fails the same way. An error at
shutdown is logged and raised from the last hold.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any

import attrs
import trio

logger = logging.getLogger("trio_mcp.server")

#: ``Server(lifespan=...)``: called with the server, gives the async context manager.
LifespanFunction = Callable[[Any], AbstractAsyncContextManager[Any]]


class LifespanFailed(Exception):
    """The server's lifespan raised while starting up, so the server serves nothing.

    Its message names the server and the error (``repr`` of neither the state nor the
    traceback); the original exception is its ``__cause__``.
    """


class NoLifespan(RuntimeError):
    """``ctx.lifespan`` was read while the server's lifespan is not running."""


@attrs.define(eq=False)
class _Entry:
    """One entry of the lifespan, from its start to its end."""

    started: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)
    ended: trio.Event = attrs.field(factory=trio.Event)
    state: Any = None
    running: bool = False
    failure: BaseException | None = None
    exit_error: BaseException | None = None


#: What a connection holds of a server without a lifespan: nothing, and it yields None.
_NO_LIFESPAN: AbstractAsyncContextManager[None] = nullcontext()


class Lifespan:
    """The one lifespan of a server: who holds it, and its state while it runs."""

    def __init__(self, fn: LifespanFunction | None, server: Any, name: str) -> None:
        self.fn = fn
        self._server = server
        self._name = name
        self._holders = 0
        self._entry: _Entry | None = None

    @property
    def running(self) -> bool:
        return self._entry is not None and self._entry.running

    @property
    def state(self) -> Any:
        """The state the lifespan yielded. None when the server has no lifespan."""
        if self.fn is None:
            return None
        if self._entry is None or not self._entry.running:
            raise NoLifespan(
                f"the lifespan of server {self._name!r} is not running: it runs while the "
                "server serves (stdio, the HTTP app's ASGI lifespan, serve_transport), or "
                "inside `async with server.running()`"
            )
        return self._entry.state

    def hold(self) -> AbstractAsyncContextManager[Any]:
        """Start the lifespan, or join the entry that runs; yields the state (None, at no
        cost, for a server without a lifespan: every connection holds it)."""
        return _NO_LIFESPAN if self.fn is None else self._hold()

    @asynccontextmanager
    async def _hold(self) -> AsyncIterator[Any]:
        while self._entry is not None and self._entry.release.is_set():
            await self._entry.ended.wait()  # the last one's shutdown, still under way
        entry = self._entry
        if entry is None:
            entry = self._entry = _Entry()
            trio.lowlevel.spawn_system_task(
                self._run,
                entry,
                name=f"lifespan of {self._name}",
                context=contextvars.copy_context(),
            )
        self._holders += 1
        try:
            await entry.started.wait()
            if entry.failure is not None:
                raise LifespanFailed(self._describe(entry.failure)) from entry.failure
            yield entry.state
        finally:
            self._holders -= 1
            if self._holders == 0 and self._entry is entry:
                entry.release.set()
                with trio.CancelScope(shield=True):
                    await entry.ended.wait()
                if self._entry is entry:
                    self._entry = None
                if entry.exit_error is not None:
                    raise entry.exit_error

    async def _run(self, entry: _Entry) -> None:
        """The entry's own task: enter, serve until released, exit. Never raises (a system
        task must not): what goes wrong is handed to the holds."""
        assert self.fn is not None
        try:
            async with self.fn(self._server) as state:
                entry.state, entry.running = state, True
                entry.started.set()
                await entry.release.wait()
        except BaseException as exc:
            if not entry.started.is_set():
                entry.failure = exc
            elif not isinstance(exc, trio.Cancelled):
                logger.error("the lifespan of server %r failed", self._name, exc_info=exc)
                entry.exit_error = exc
        finally:
            entry.running, entry.state = False, None
            entry.started.set()
            entry.ended.set()

    def _describe(self, exc: BaseException) -> str:
        detail = str(exc)
        what = type(exc).__name__ + (f": {detail}" if detail else "")
        return f"the lifespan of server {self._name!r} failed at startup: {what}"
