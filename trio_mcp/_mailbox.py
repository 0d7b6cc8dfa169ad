"""``Mailbox``: what an unbounded Trio memory channel is for one sender and one receiver, as one
small object.

Made for every request an engine sends (its progress and its answer) and for every request
stream a connection listens to: a memory channel's pair of endpoints and their shared state
(1.8 KB, some 5 µs to make) cost more than the rest of either. :meth:`Mailbox.close` is a cut:
the receiver gets what was sent before it, then ``EndOfChannel``.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Items in order, for one receiving task at a time (:meth:`wait`, then
    :meth:`receive_nowait`; or :meth:`receive`)."""

    __slots__ = ("_closed", "_items", "_receiver")

    def __init__(self) -> None:
        # A list, not a deque: a deque starts with a block of 64 slots (some 700 bytes), and
        # a mailbox mostly holds one item, rarely more than a few (a stream's listener falls
        # behind by ``StreamLimits.pending_events`` at most, then it is cut).
        self._items: list[T] = []
        self._closed = False
        self._receiver: trio.lowlevel.Task | None = None

    def __len__(self) -> int:
        """How many of the items sent are not taken yet."""
        return len(self._items)

    def send_nowait(self, item: T) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the mailbox was closed")
        self._items.append(item)
        self._wake()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def receive_nowait(self) -> T:
        if self._items:
            return self._items.pop(0)
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def ready(self) -> bool:
        """Whether :meth:`receive_nowait` has something to hand over: an item, or the cut."""
        return bool(self._items) or self._closed

    async def wait(self) -> None:
        """Return once an item or the cut is there (one waiting task at a time); a checkpoint
        either way, as a channel's ``receive`` is."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._items and not self._closed:
            self._receiver = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def receive(self) -> T:
        """The next item, waiting for one; ``EndOfChannel`` once closed and empty."""
        await self.wait()
        return self.receive_nowait()

    def _wake(self) -> None:
        task = self._receiver
        if task is not None:
            self._receiver = None
            trio.lowlevel.reschedule(task)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._receiver = None
        return trio.lowlevel.Abort.SUCCEEDED
