"""Session state on Redis, shared by every worker (:class:`~trio_mcp.server.SessionStateStore`),
so a session's state follows it to whichever worker serves its next request.

One hash per scope, ``<prefix>{<scope digest>}:state`` (:func:`~trio_mcp.redis._keys.key`):
its fields the names, its values the encoded values, its Redis expiry the scope's ttl. A write
is one script on that one key (:data:`PUT_LUA`): it sums the scope's size, stores only under
the bound and refreshes the expiry, atomically, so workers racing cannot overshoot the bound.
"""

from __future__ import annotations

from ..server._session_state import SessionStateUnavailable
from ._keys import key
from ._link import LinkedStore, milliseconds

# KEYS[1] the scope's hash; ARGV: name, value, ttl (ms), bound. 1 if stored, else 0.
PUT_LUA = """
local size = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  if entries[i] ~= ARGV[1] then size = size + #entries[i] + #entries[i + 1] end
end
if size + #ARGV[1] + #ARGV[2] > tonumber(ARGV[4]) then
  if #entries > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

# KEYS[1] the scope's hash; ARGV: name, ttl (ms). The value (nil if none), the expiry refreshed.
GET_LUA = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return value
"""

# KEYS[1] the scope's hash; ARGV: name, ttl (ms).
DELETE_LUA = """
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""


class RedisSessionStateStore(LinkedStore):
    """Where every worker naming the same Redis and ``prefix`` keeps session state:
    ``Server(session_state_store=RedisSessionStateStore("redis://host:6379/0"))`` (what
    ``trio-mcp serve --redis-url`` gives every worker).

    Started while the server serves (its HTTP app's lifespan). A Redis that cannot be reached
    fails the start; lost later, a handler's use of the state raises
    :class:`~trio_mcp.server.SessionStateUnavailable` (-32603 to the client) until it answers.
    """

    what = "the session state store"
    unavailable = SessionStateUnavailable

    def key(self, scope: str) -> str:
        """The key of a scope's hash (what a test or an operator looks for)."""
        return key(self.prefix, scope, "state")

    async def get(self, scope: str, name: str, ttl: float) -> bytes | None:
        async with self._errors():
            value = await self._redis().eval(
                GET_LUA, keys=[self.key(scope)], args=[name, milliseconds(ttl)]
            )
        return value if isinstance(value, bytes) else None

    async def put(self, scope: str, name: str, value: bytes, ttl: float, max_bytes: int) -> bool:
        async with self._errors():
            stored = await self._redis().eval(
                PUT_LUA, keys=[self.key(scope)], args=[name, value, milliseconds(ttl), max_bytes]
            )
        return stored == 1

    async def delete(self, scope: str, name: str, ttl: float) -> None:
        async with self._errors():
            await self._redis().eval(
                DELETE_LUA, keys=[self.key(scope)], args=[name, milliseconds(ttl)]
            )

    async def drop(self, scope: str) -> None:
        async with self._errors():
            await self._redis().delete([self.key(scope)])
