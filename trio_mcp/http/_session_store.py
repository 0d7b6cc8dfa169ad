"""Session records: what a handshake-era session fixed and set, kept where every worker finds it.

A record holds what a worker needs to serve a session it did not open: the owner's
``Principal.identity`` (``""`` without authorization), the negotiated protocol version, the
client's info and capabilities, the server capabilities the client was told of, the log level
and the resource subscriptions. The HTTP app writes it when ``initialize`` succeeds and whenever
``logging/setLevel``, ``resources/subscribe`` or ``resources/unsubscribe`` change it, reads it
back with its expiry (the session idle timeout) pushed forward while the session is used (on a
request that finds no reading of it standing, see ``ScaleOut.record_cache``, or ahead of that),
and deletes it on DELETE. A worker that gets a request for a session it does not hold builds its
own replica from the record.

:class:`MemorySessionStore` keeps records in this process (several apps of one process can share
it); :class:`RedisSessionStore` (``_redis_sessions.py``) shares them across processes and hosts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs
import orjson

from ..protocol._jsonrpc import JSONObject


class SessionStoreUnavailable(Exception):
    """The session store cannot be reached: the message says where, never with a password."""


@attrs.frozen
class SessionRecord:
    """What a session fixed at ``initialize`` and what its client set since."""

    #: The ``Principal.identity`` that opened it; ``""`` without authorization.
    owner: str
    protocol_version: str
    client_info: JSONObject
    client_capabilities: JSONObject
    #: The server capabilities the client was told of at ``initialize``.
    announced: JSONObject
    log_level: str | None = None
    subscriptions: frozenset[str] = frozenset()
    #: The node whose copy holds the session's GET stream (None: none opened yet).
    get_node: str | None = None

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "o": self.owner,
                "v": self.protocol_version,
                "i": self.client_info,
                "c": self.client_capabilities,
                "a": self.announced,
                "l": self.log_level,
                "s": sorted(self.subscriptions),
                "g": self.get_node,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> SessionRecord:
        """Raises ValueError for anything that is not a record of this module."""
        try:
            fields = orjson.loads(data)
            record = cls(
                fields["o"],
                fields["v"],
                fields["i"],
                fields["c"],
                fields["a"],
                fields["l"],
                frozenset(fields["s"]),
                fields.get("g"),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(f"not a session record: {error}") from None
        if not (
            isinstance(record.owner, str)
            and isinstance(record.protocol_version, str)
            and isinstance(record.client_info, dict)
            and isinstance(record.client_capabilities, dict)
            and isinstance(record.announced, dict)
            and (record.log_level is None or isinstance(record.log_level, str))
            and all(isinstance(uri, str) for uri in record.subscriptions)
            and (record.get_node is None or isinstance(record.get_node, str))
        ):
            raise ValueError("not a session record: a field has the wrong type")
        return record


class SessionStore(Protocol):
    """Where session records are kept, possibly shared by several workers; implement it to keep
    them elsewhere (:class:`MemorySessionStore` in this process, ``RedisSessionStore`` across
    processes and hosts).

    A record expires ``ttl`` seconds after it was last written or touched; ``get`` then answers
    None, as for one that never was. Every method may raise :class:`SessionStoreUnavailable`.
    """

    async def start(self) -> None:
        """Check that the store can be used (called once, when the app starts): a store that
        cannot be reached raises :class:`SessionStoreUnavailable` naming where it is."""
        ...

    async def aclose(self) -> None: ...

    async def put(self, session_id: str, record: SessionRecord, ttl: float) -> None:
        """Write the record (whole), to expire ``ttl`` seconds from now."""
        ...

    async def get(self, session_id: str) -> SessionRecord | None: ...

    async def touch(self, session_id: str, ttl: float) -> SessionRecord | None:
        """The record, its expiry pushed to ``ttl`` seconds from now (None: there is none).

        Called on a request of a session with one round trip: it both keeps the session
        alive and tells the worker what another worker changed.

        A store may also define ``touch_many(session_ids, ttl)``: the same for several
        sessions, in one round trip, each one's record (or None) in the order asked. A worker
        that has it renews, all at once and before they lapse, the readings its requests are
        served on (``ScaleOut.record_cache``), and keeps alive the sessions busy on it; one
        that does not reads each record on the request that finds its reading lapsed."""
        ...

    async def delete(self, session_id: str) -> None: ...


class MemorySessionStore:
    """A :class:`SessionStore` in this process: the apps that share the object share records."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._records: dict[str, tuple[bytes, float]] = {}

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def put(self, session_id: str, record: SessionRecord, ttl: float) -> None:
        # Kept as bytes, as Redis keeps it: a record read back is never the writer's object.
        self._records[session_id] = (record.to_bytes(), self._expiry(ttl))

    async def get(self, session_id: str) -> SessionRecord | None:
        kept = self._live(session_id)
        return SessionRecord.from_bytes(kept[0]) if kept is not None else None

    async def touch(self, session_id: str, ttl: float) -> SessionRecord | None:
        kept = self._live(session_id)
        if kept is None:
            return None
        self._records[session_id] = (kept[0], self._expiry(ttl))
        return SessionRecord.from_bytes(kept[0])

    async def touch_many(
        self, session_ids: Sequence[str], ttl: float
    ) -> list[SessionRecord | None]:
        return [await self.touch(session_id, ttl) for session_id in session_ids]

    async def delete(self, session_id: str) -> None:
        self._records.pop(session_id, None)

    def _expiry(self, ttl: float) -> float:
        return self._clock() + ttl if math.isfinite(ttl) else math.inf

    def _live(self, session_id: str) -> tuple[bytes, float] | None:
        kept = self._records.get(session_id)
        if kept is not None and kept[1] <= self._clock():
            del self._records[session_id]
            return None
        return kept
