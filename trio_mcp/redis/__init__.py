"""Everything that lives in Redis: the stores of the other rooms, the notification bus and the
relay, sharing one connection pool and one subscriber per process (``_hub.py``).

The only room that imports the Redis client (coredis, loaded when a link starts, so importing
this package costs nothing until a store is used).
"""

from ._bus import RedisBus
from ._event_store import RedisEventStore
from ._limit_store import RedisLimitStore
from ._relay import RedisRelay
from ._session_state import RedisSessionStateStore
from ._session_store import RedisSessionStore
from ._state_claims import RedisStateClaims
from ._task_store import RedisTaskStore

__all__ = [
    "RedisBus",
    "RedisEventStore",
    "RedisLimitStore",
    "RedisRelay",
    "RedisSessionStateStore",
    "RedisSessionStore",
    "RedisStateClaims",
    "RedisTaskStore",
]
