"""The relay: the few messages of a session that must reach another worker.

With a session store every worker may hold a copy of a session, and three kinds of message
that one worker receives belong to another: the client's response to a request that another
worker's copy sent (its id names that node), a ``notifications/cancelled`` for a request that
runs elsewhere, and the end of the session (DELETE on any worker ends every copy); and one
kind that a copy sends: a message for the session's GET stream, held by another worker. A relay
carries them as bytes, to one node or to all; :class:`MemoryRelay` between the apps of one
process, ``RedisRelay`` over Redis pub/sub (a channel per node, and one for all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

#: What a relay hands each message it receives to (called in the relay's task, never blocking).
Deliver = Callable[[bytes], None]


class RelayUnavailable(Exception):
    """The relay cannot carry a message now: the message says where, never with a password."""


class Relay(Protocol):
    """Carries messages between the workers of one fleet; implement it to carry them elsewhere.

    ``send`` to a node id, or to every node (None: the sender too, which ignores what it
    cannot use). Delivery is at most once and may be lost while a worker is not subscribed:
    what it carries can live with that (a response lost is a server request that times out, a
    cancel lost is a request that runs to its end, an end lost is a copy that expires idle;
    a change lost is waited out, see ``ScaleOut.record_cache``)."""

    async def send(self, node: str | None, message: bytes) -> int | None:
        """How many subscribers the message reached (each worker's subscriber counts once),
        or None if the relay cannot tell. May raise :class:`RelayUnavailable`."""
        ...

    def hearing(self) -> int | None:
        """Whether this worker hears what is sent to every node now: a number that stays the
        same for as long as nothing sent could have been missed (a subscriber that lost its
        connection and made it again has a new one), None while something could be. A worker
        serves a session on a record it read only while this has not changed since."""
        ...

    async def subscribe(
        self,
        node: str,
        deliver: Deliver,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand every message sent to ``node`` or to all to ``deliver``, until cancelled;
        started once subscribed (a relay that cannot be reached raises
        :class:`RelayUnavailable` before that)."""
        ...


class MemoryRelay:
    """A :class:`Relay` between the apps of this process that share the object."""

    def __init__(self) -> None:
        self._nodes: dict[str, list[Deliver]] = {}

    def hearing(self) -> int | None:
        return 0  # in one process nothing is lost

    async def send(self, node: str | None, message: bytes) -> int:
        await trio.lowlevel.checkpoint()
        targets = (
            [d for ds in self._nodes.values() for d in ds]
            if node is None
            else list(self._nodes.get(node, ()))
        )
        for deliver in targets:
            deliver(message)
        return len(targets)

    async def subscribe(
        self,
        node: str,
        deliver: Deliver,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        delivers = self._nodes.setdefault(node, [])
        delivers.append(deliver)
        try:
            task_status.started()
            await trio.sleep_forever()
        finally:
            delivers.remove(deliver)
            if not delivers:
                del self._nodes[node]
