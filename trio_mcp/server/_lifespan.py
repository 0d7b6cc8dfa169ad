"""The server's lifespan: ``Server(lifespan=fn)``, entered once before anything is served.

``fn(server)`` is an async context manager (an ``@asynccontextmanager`` function) whose value
is the lifespan state: a database pool, a client, a config. Handlers read it as
``ctx.lifespan``. Whatever serves the server holds the lifespan for as long as it serves: the
HTTP app's ASGI lifespan (startup to shutdown), ``serve_stdio`` (before the first line is read
until the end of input), ``serve_transport`` (one connection: the in-memory client). Holds that
overlap share one entry: the first one enters ``fn``, later ones join it, and the one that
entered waits, at its end, until the others ended before it exits ``fn``, in the task that
entered it (a nursery the lifespan opens stays in its own task, as Trio requires).

A startup that raises is reported as :class:`LifespanFailed`, naming the server and the error,
before anything is served; holds that joined it fail the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

#: ``Server(lifespan=...)``: called with the server, gives the async context manager.
LifespanFunction = Callable[[Any], AbstractAsyncContextManager[Any]]


class LifespanFailed(Exception):
    """The server's lifespan raised while starting up, so the server serves nothing.

    Its message names the server and the error (``repr`` of neither the state nor the
    traceback); the original exception is its ``__cause__``.
    """


class NoLifespan(RuntimeError):
    """``ctx.lifespan`` was read while the server's lifespan is not running."""


class Lifespan:
    """The one lifespan of a server: who holds it, and its state while it runs."""

    def __init__(self, fn: LifespanFunction | None, server: Any, name: str) -> None:
        self.fn = fn
        self._server = server
        self._name = name
        self._holders = 0
        self._running = False
        self._state: Any = None
        self._started = trio.Event()
        self._released = trio.Event()
        self._failure: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._running

    @property
    def state(self) -> Any:
        """The state the lifespan yielded. None when the server has no lifespan."""
        if self.fn is None:
            return None
        if not self._running:
            raise NoLifespan(
                f"the lifespan of server {self._name!r} is not running: it runs while the "
                "server serves (stdio, the HTTP app's ASGI lifespan, serve_transport), or "
                "inside `async with server.running()`"
            )
        return self._state

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[Any]:
        """Enter the lifespan, or join the entry that holds it; yields the state."""
        if self.fn is None:
            yield None
            return
        if self._holders:
            async with self._join() as state:
                yield state
            return
        self._holders = 1
        self._started = trio.Event()
        self._released = trio.Event()
        self._failure = None
        entered = False
        try:
            async with self.fn(self._server) as state:
                entered = True
                self._state, self._running = state, True
                self._started.set()
                try:
                    yield state
                finally:
                    self._holders -= 1
                    if self._holders:
                        # Others still serve under this entry: exit after them, here.
                        await self._released.wait()
                    self._running, self._state = False, None
        except Exception as exc:
            if entered:
                raise
            self._holders -= 1
            self._failure = exc
            self._started.set()
            raise LifespanFailed(self._describe(exc)) from exc

    @asynccontextmanager
    async def _join(self) -> AsyncIterator[Any]:
        self._holders += 1
        try:
            await self._started.wait()
            if self._failure is not None:
                raise LifespanFailed(self._describe(self._failure)) from self._failure
            yield self._state
        finally:
            self._holders -= 1
            if self._holders == 0:  # the entry's owner already ended, and waits for this
                self._released.set()

    def _describe(self, exc: BaseException) -> str:
        detail = str(exc)
        what = type(exc).__name__ + (f": {detail}" if detail else "")
        return f"the lifespan of server {self._name!r} failed at startup: {what}"
