"""Session records on Redis, shared by every worker, so that any of them serves any session.

coredis is imported only when a store starts: a server without Redis never loads it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..http._session_store import SessionRecord, SessionStoreUnavailable
from ._keys import key
from ._link import LinkedStore, milliseconds


class RedisSessionStore(LinkedStore):
    """A :class:`SessionStore` on Redis, shared by every worker that names the same server and
    ``prefix``: one string key per session (``<prefix>{<id>}:session``), its value the record,
    its Redis expiry the record's.

    One store serves one app (started and closed by that app's lifespan). Faults: a Redis that
    cannot be reached at start fails the start (:meth:`start` raises
    :class:`SessionStoreUnavailable` naming the URL, never its password); lost later, every call
    raises it until Redis answers again (the client reconnects by itself).
    """

    what = "the session store"
    unavailable = SessionStoreUnavailable

    async def put(self, session_id: str, record: SessionRecord, ttl: float) -> None:
        async with self._errors():
            await self._redis().set(self._key(session_id), record.to_bytes(), px=_ms(ttl))

    async def get(self, session_id: str) -> SessionRecord | None:
        async with self._errors():
            data = await self._redis().get(self._key(session_id))
        return _record(data)

    async def touch(self, session_id: str, ttl: float) -> SessionRecord | None:
        ms = _ms(ttl)
        async with self._errors():
            # GETEX: read and refresh in one round trip (Redis 6.2 and later).
            if ms is None:
                data = await self._redis().getex(self._key(session_id), persist=True)
            else:
                data = await self._redis().getex(self._key(session_id), px=ms)
        return _record(data)

    async def touch_many(
        self, session_ids: Sequence[str], ttl: float
    ) -> list[SessionRecord | None]:
        """:meth:`touch` for each session, pipelined: one round trip (on a cluster, one per
        node holding some of them), each key read and refreshed by a command of its own."""
        ms = _ms(ttl)
        async with self._errors(), self._redis().pipeline(transaction=False) as pipe:
            requests = [
                pipe.getex(self._key(session_id), persist=True)
                if ms is None
                else pipe.getex(self._key(session_id), px=ms)
                for session_id in session_ids
            ]
        async with self._errors():
            return [_record(await request) for request in requests]

    async def delete(self, session_id: str) -> None:
        async with self._errors():
            await self._redis().delete([self._key(session_id)])

    def _key(self, session_id: str) -> str:
        return key(self.prefix, session_id, "session")


def _record(data: bytes | None) -> SessionRecord | None:
    if data is None:
        return None
    try:
        return SessionRecord.from_bytes(data)
    except ValueError:
        return None  # not ours (another program under the prefix): no such session


def _ms(ttl: float) -> int | None:
    """Redis's expiry in milliseconds; None (no expiry) for an infinite ttl."""
    return milliseconds(ttl) if math.isfinite(ttl) else None
