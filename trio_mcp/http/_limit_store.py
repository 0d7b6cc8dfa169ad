"""Where the app's limits are counted: the sessions of a client, the requests in flight, the
tokens of a rate limit; in this process, or in a store every worker of a fleet shares.

Two shapes cover every limit:

- a **counter of leases** (:meth:`LimitStore.acquire`): a session or a request in flight holds a
  lease under a name (``sessions:<client>``) until it ends (:meth:`LimitStore.release`); at most
  ``cap`` leases at once. A lease lapses ``lapse`` seconds after it was taken or last renewed
  (:meth:`LimitStore.renew`), so the leases of a worker that died stop counting on their own;
- a **token bucket** (:meth:`LimitStore.take`): ``burst`` tokens, refilled at ``rate`` a second;
  a request takes one, or learns how long until one is there.

A name is ``<family>:<id>``: a short family (``sessions``, ``requests``, ``rate``) and the id
of what is counted (a client's key, a session's id). A shared store names its keys after the
family and a digest of the id, so no client's key reaches it, and one name is one key
(``RedisLimitStore``).

:class:`MemoryLimitStore` counts in this process, on Trio's clock (so a ``MockClock`` drives it).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Collection
from typing import Protocol

import trio


class LimitStoreUnavailable(Exception):
    """The limit store cannot be reached: the message says where, never with a password."""


class LimitStore(Protocol):
    """The counters and buckets of the app's limits (see the module's docstring)."""

    async def start(self) -> None:
        """Before the app serves: connect (a store that cannot be reached fails the start)."""
        ...

    async def aclose(self) -> None: ...

    async def acquire(self, name: str, lease: str, cap: int, lapse: float) -> bool:
        """Take ``lease`` under ``name`` unless ``cap`` unlapsed leases are held there already;
        whether it was taken. Atomic: workers racing cannot overshoot the cap."""
        ...

    async def renew(self, name: str, leases: Collection[str], lapse: float) -> None:
        """Push the lapse of these leases (those still held) ``lapse`` seconds from now."""
        ...

    async def release(self, name: str, lease: str) -> None: ...

    async def take(self, name: str, rate: float, burst: int) -> float:
        """Take a token from the bucket ``name`` (``burst`` at most, ``rate`` more a second):
        0 if one was taken, else the seconds until one will be there (nothing is taken)."""
        ...


class MemoryLimitStore:
    """The limits of one process: the default, and enough for one worker.

    At most ``max_buckets`` rate buckets are kept (the least recently used is forgotten, which
    only gives its client a full bucket again); counters go when their last lease does.
    """

    def __init__(self, *, max_buckets: int = 10_000) -> None:
        self.max_buckets = max_buckets
        self._leases: dict[str, dict[str, float]] = {}
        self._buckets: collections.OrderedDict[str, tuple[float, float]] = collections.OrderedDict()

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def held(self, name: str) -> int:
        """How many unlapsed leases ``name`` has."""
        now = trio.current_time()
        return sum(1 for until in self._leases.get(name, {}).values() if until > now)

    async def acquire(self, name: str, lease: str, cap: int, lapse: float) -> bool:
        await trio.lowlevel.checkpoint()
        now = trio.current_time()
        leases = self._leases.setdefault(name, {})
        for old in [old for old, until in leases.items() if until <= now]:
            del leases[old]
        if len(leases) >= cap:
            if not leases:
                del self._leases[name]
            return False
        leases[lease] = now + lapse
        return True

    async def renew(self, name: str, leases: Collection[str], lapse: float) -> None:
        await trio.lowlevel.checkpoint()
        held = self._leases.get(name)
        if held is None:
            return
        until = trio.current_time() + lapse
        for lease in leases:
            if lease in held:
                held[lease] = until

    async def release(self, name: str, lease: str) -> None:
        await trio.lowlevel.checkpoint()
        held = self._leases.get(name)
        if held is not None:
            held.pop(lease, None)
            if not held:
                del self._leases[name]

    async def take(self, name: str, rate: float, burst: int) -> float:
        await trio.lowlevel.checkpoint()
        now = trio.current_time()
        tokens, at = self._buckets.pop(name, (float(burst), now))
        tokens = min(float(burst), tokens + (now - at) * rate)
        if tokens < 1:
            self._buckets[name] = (tokens, now)
            return (1 - tokens) / rate
        self._buckets[name] = (tokens - 1, now)
        while len(self._buckets) > self.max_buckets:
            self._buckets.popitem(last=False)
        return 0.0


def retry_after_seconds(wait: float) -> int:
    """``Retry-After`` for a wait: whole seconds, at least 1."""
    return max(1, math.ceil(wait))
