"""Single-use requestState: the claims that make a sealed state open once.

A sealed ``requestState`` opens for its request until it expires, so by default the same retry
sent again (a client retrying on a timeout, a proxy re-sending a POST, a copied request) runs the
handler again, with the same answers. A tool whose side effect must not repeat opts in
(``@server.tool(single_use_state=True)``, or ``Server(single_use_state=True)`` for every
request that takes input): the retry that opens a state first *claims* it, an atomic
insert-if-absent in a store every worker shares, and a second retry with the same state is
refused with the very error a tampered state gets.

The claim is named by a digest of the sealed state (:func:`state_digest`), never the state
itself, and lapses when the state would have expired. A store that cannot be reached refuses
the request (-32603): a state that may have been used is never taken for a fresh one.
"""

from __future__ import annotations

import heapq
from typing import Protocol, runtime_checkable

import trio

from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR


class StateClaimsUnavailable(ProtocolError):
    """The store of single-use claims cannot be reached: the request is refused (-32603,
    without internals); :attr:`reason` says where and why, for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            INTERNAL_ERROR, "Internal error: the requestState claim store is unavailable"
        )
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


@runtime_checkable
class StateClaims(Protocol):
    """Where single-use states are claimed: shared by every worker that shares the state keys
    (``RedisStateClaims``), or one process's (:class:`MemoryStateClaims`)."""

    async def claim(self, digest: str, ttl: float) -> bool:
        """Claim the state of this digest for ``ttl`` seconds (its remaining life): True the
        first time, False while an earlier claim holds. Atomic: of two workers racing, one
        wins. :class:`StateClaimsUnavailable` when the store cannot answer."""
        ...


@runtime_checkable
class HostedStateClaims(StateClaims, Protocol):
    """A claim store with a lifetime (``RedisStateClaims``): started while the server serves
    (its HTTP app's lifespan), closed after."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


class MemoryStateClaims:
    """The claims of one process: enough for one worker; a fleet needs a shared store.

    Each claim is kept until its state would have expired, so memory follows the rate of
    single-use states, for at most their life.
    """

    def __init__(self) -> None:
        self._claims: dict[str, float] = {}
        self._expiries: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._claims)

    async def claim(self, digest: str, ttl: float) -> bool:
        await trio.lowlevel.checkpoint()
        # No checkpoint from here to the insert: of two claims, one wins.
        now = trio.current_time()
        expiries = self._expiries
        while expiries and expiries[0][0] <= now:
            until, old = heapq.heappop(expiries)
            if self._claims.get(old) == until:
                del self._claims[old]
        held = self._claims.get(digest)
        if held is not None and held > now:
            return False
        until = now + max(ttl, 0.001)
        self._claims[digest] = until
        heapq.heappush(expiries, (until, digest))
        return True
