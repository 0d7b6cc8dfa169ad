"""``LazyEvent``: an event whose ``trio.Event`` is made only when a task waits for it.

A session holds several events (its end, its engine's end, its streams' ends) that nothing
waits for in its whole idle life; a ``trio.Event`` carries a set of waiters, about 260 bytes
each, for every idle session of the app. This one is two slots until a task waits.
"""

from __future__ import annotations

import trio


class LazyEvent:
    """``set``, ``is_set`` and ``wait`` as ``trio.Event`` has them."""

    __slots__ = ("_event", "_flag")

    def __init__(self) -> None:
        self._flag = False
        self._event: trio.Event | None = None

    def set(self) -> None:
        self._flag = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._flag

    async def wait(self) -> None:
        """Return once it is set (a checkpoint if it already is, as ``trio.Event.wait``)."""
        if self._flag:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()
