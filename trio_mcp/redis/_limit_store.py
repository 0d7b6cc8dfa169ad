"""The app's limits on Redis, shared by every worker: leases of sessions and requests, and the
token buckets of rate limits (:class:`~trio_mcp.http.LimitStore`).

coredis is imported only when the store starts: a server without Redis never loads it.

Every key is built by :func:`limit_key`: ``<prefix>{<digest of the id>}:<family>``, through the
stores' one key helper (``_keys.key``), so each key carries its own hash tag on a Redis Cluster, and
no client's key (an address, a principal) is written to Redis. Each script touches one key,
named in ``KEYS``, in one round trip:

- a counter is a sorted set of leases scored by when each lapses (Redis's clock, in
  milliseconds, as the task quota's): :data:`ACQUIRE_LUA` drops the lapsed leases, counts, and
  adds the lease only under the cap, so workers racing cannot overshoot it; the key itself
  expires with its newest lease;
- a bucket is a hash of its tokens (``t``) and when they were counted (``a``):
  :data:`TAKE_LUA` refills it for the time passed, takes a token or says how long until one is
  there; the key expires once a full bucket would be back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import TYPE_CHECKING

from ..http._limit_store import LimitStoreUnavailable
from ._keys import key
from ._link import LinkedStore, milliseconds

if TYPE_CHECKING:
    pass

#: Redis's clock, in milliseconds, in a script (scripts may call TIME: effects are replicated).
NOW_LUA = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# KEYS[1] the counter; ARGV: cap, lapse (ms), lease. 1 if the lease was taken, else 0.
ACQUIRE_LUA = (
    NOW_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""
)

# KEYS[1] the counter; ARGV: lapse (ms), then the leases. Renews those still held.
RENEW_LUA = (
    NOW_LUA
    + """
local lapse = tonumber(ARGV[1])
local kept = 0
for i = 2, #ARGV do
  kept = kept + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + lapse, ARGV[i])
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], lapse) end
return kept
"""
)

# KEYS[1] the bucket; ARGV: rate (tokens a second), burst. 0 if a token was taken, else the
# milliseconds until one is there.
TAKE_LUA = (
    NOW_LUA
    + """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate / 1000)
  at = now
end
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) * 1000 / rate))
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'a', at)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait
"""
)


def limit_key(prefix: str, family: str, ident: str) -> str:
    """The key of a limit (or a single-use claim): the store's one key helper,
    ``<prefix>{<sha256 of ident>}:<family>``, with a digest for the thing's id so that no
    client's address or principal is written to Redis."""
    return key(prefix, hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest(), family)


class RedisLimitStore(LinkedStore):
    """A :class:`~trio_mcp.http.LimitStore` on Redis, shared by every worker that names the
    same Redis and ``prefix``: ``ScaleOut(limit_store=RedisLimitStore("redis://host:6379/0"))``.

    One store serves one app (started and closed by its lifespan). Faults: unreachable at
    start fails the start (:class:`LimitStoreUnavailable` naming the URL, never its password);
    lost later, every call raises it (the app then holds its own process's limits only).
    """

    what = "the limit store"
    unavailable = LimitStoreUnavailable

    async def acquire(self, name: str, lease: str, cap: int, lapse: float) -> bool:
        async with self._errors():
            taken = await self._redis().eval(
                ACQUIRE_LUA, keys=[self._key(name)], args=[cap, milliseconds(lapse), lease]
            )
        return taken == 1

    async def renew(self, name: str, leases: Collection[str], lapse: float) -> None:
        if not leases:
            return
        async with self._errors():
            await self._redis().eval(
                RENEW_LUA, keys=[self._key(name)], args=[milliseconds(lapse), *leases]
            )

    async def release(self, name: str, lease: str) -> None:
        async with self._errors():
            await self._redis().zrem(self._key(name), [lease])

    async def take(self, name: str, rate: float, burst: int) -> float:
        async with self._errors():
            wait = await self._redis().eval(
                TAKE_LUA, keys=[self._key(name)], args=[repr(float(rate)), burst]
            )
        return int(wait) / 1000 if isinstance(wait, int) else 0.0

    def _key(self, name: str) -> str:
        family, _, ident = name.partition(":")
        return limit_key(self.prefix, family, ident)
