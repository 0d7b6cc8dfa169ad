"""Single-use requestState claims on Redis, shared by every worker
(:class:`~trio_mcp.server.StateClaims`).

A claim is one ``SET key 1 NX PX <remaining life>``: atomic, one round trip, and gone when the
state would have expired. The key is :func:`~trio_mcp.redis._limit_store.limit_key` of family
``rs`` and the state's digest (``<prefix>{<sha256>}:rs``): never the state itself.
"""

from __future__ import annotations

from ..server._state_claims import StateClaimsUnavailable
from ._limit_store import limit_key
from ._link import LinkedStore, milliseconds


class RedisStateClaims(LinkedStore):
    """Where the single-use states of every worker naming the same Redis and ``prefix`` are
    claimed: ``Server(single_use_state=True, state_claims=RedisStateClaims(url))``.

    Started while the server serves (its HTTP app's lifespan). A Redis that cannot be reached
    fails the start; lost later, a retry with a single-use state is refused (-32603) until it
    answers again: a state that may have been used is never taken for a fresh one.
    """

    what = "the requestState claim store"
    unavailable = StateClaimsUnavailable

    def key(self, digest: str) -> str:
        """The key of a claim (what a test or an operator looks for)."""
        return limit_key(self.prefix, "rs", digest)

    async def claim(self, digest: str, ttl: float) -> bool:
        import coredis

        async with self._errors():
            done = await self._redis().set(
                self.key(digest), b"1", condition=coredis.PureToken.NX, px=milliseconds(ttl)
            )
        return bool(done)
