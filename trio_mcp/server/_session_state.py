"""Session state: what a handler keeps for its session across requests (``ctx.session_state``).

Its *scope* (whose state it is) follows the era:

- handshake era: the session (the ``Mcp-Session-Id`` of an HTTP session, the connection on
  stdio); it is dropped when the session ends (an HTTP ``DELETE``, the end of a stdio
  connection) and lapses after ``ttl`` without use (an expired HTTP session's state lapses so);
- modern era (no sessions, SEP-2567): the principal and a handle the client chose and sends in
  each request's ``_meta`` under :data:`STATE_META_KEY`. State spanning requests must be named by
  an explicit identifier the client passes, so a modern request without one has no state (a
  clear error says what to send). Two principals sending the same handle see two states; without
  authorization the handle alone names it (a bearer capability: choose it at random).

Values are JSON (stored as their encoding); each scope holds at most ``max_bytes`` (names plus
encoded values) and each value at most ``max_value_bytes``. A write over either bound raises
:class:`SessionStateFull` and stores nothing. Every use refreshes the scope's ``ttl``.

The scope reaches a store as a digest (:func:`state_scope`), never a session id, principal or
handle in the clear: a store shared by a fleet (``RedisSessionStateStore``) holds no identity.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from typing import Any, Protocol, runtime_checkable

import trio

from ..protocol._errors import MCPError, ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR

__all__ = [
    "DEFAULT_STATE_MAX_BYTES",
    "DEFAULT_STATE_MAX_VALUE_BYTES",
    "DEFAULT_STATE_TTL",
    "STATE_META_KEY",
    "HostedSessionStateStore",
    "MemorySessionStateStore",
    "SessionState",
    "SessionStateError",
    "SessionStateFull",
    "SessionStateStore",
    "SessionStateUnavailable",
    "state_scope",
]

#: The ``_meta`` key of a modern request naming its state (a string of 1 to 256 characters).
STATE_META_KEY = "trio-mcp/state"
#: How long a scope's state lives without use, in seconds.
DEFAULT_STATE_TTL = 3600.0
#: The bound of one scope: names plus encoded values, in bytes.
DEFAULT_STATE_MAX_BYTES = 1 << 20
#: The bound of one encoded value, in bytes.
DEFAULT_STATE_MAX_VALUE_BYTES = 256 << 10
_MAX_HANDLE = 256
_MAX_NAME = 256


class SessionStateError(MCPError):
    """Session state cannot be used as asked (a modern request without a handle, a value that
    is not JSON). Left uncaught in a tool, its message is the tool's ``isError`` result."""


class SessionStateFull(SessionStateError):
    """A write over the bound of a value or of its scope: nothing was stored."""


class SessionStateUnavailable(ProtocolError):
    """The state store cannot be reached: the request fails (-32603, without internals);
    :attr:`reason` says where and why, for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(INTERNAL_ERROR, "Internal error: the session state store is unavailable")
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


@runtime_checkable
class SessionStateStore(Protocol):
    """Where session state is kept: one process's (:class:`MemorySessionStateStore`) or a
    fleet's (``RedisSessionStateStore``). ``scope`` is a digest (:func:`state_scope`); each
    call refreshes the scope's life to ``ttl`` seconds. Raises
    :class:`SessionStateUnavailable` when it cannot answer."""

    async def get(self, scope: str, name: str, ttl: float) -> bytes | None: ...

    async def put(self, scope: str, name: str, value: bytes, ttl: float, max_bytes: int) -> bool:
        """Store ``value`` unless the scope would then hold more than ``max_bytes`` (names
        plus values): True if stored, False (nothing changed) if not. Atomic."""
        ...

    async def delete(self, scope: str, name: str, ttl: float) -> None: ...

    async def drop(self, scope: str) -> None:
        """Forget the whole scope (its session ended)."""
        ...


@runtime_checkable
class HostedSessionStateStore(SessionStateStore, Protocol):
    """A store with a lifetime (``RedisSessionStateStore``): started while the server serves
    (its HTTP app's lifespan), closed after."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


def state_scope(session_id: str | None, principal: str | None, handle: str | None) -> str:
    """The digest naming a scope: of a handshake session (``session_id``), or of a principal's
    identity (None without authorization) and a modern request's handle."""
    if session_id is not None:
        text = json.dumps(["session", session_id])
    else:
        text = json.dumps(["handle", principal, handle])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Bucket:
    __slots__ = ("queued", "size", "until", "values")

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.size = 0
        self.until = 0.0
        #: The expiry its heap entry carries.
        self.queued = 0.0


class MemorySessionStateStore:
    """The session state of one process: enough for one worker; a fleet needs a shared store.

    A scope lapses ``ttl`` after its last use (dropped lazily, on later calls), so memory
    follows the live sessions, each bounded by ``max_bytes``.
    """

    def __init__(self) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._expiries: list[tuple[float, str]] = []

    def __len__(self) -> int:
        """How many scopes hold state now."""
        return len(self._buckets)

    def _bucket(self, scope: str, ttl: float, *, create: bool) -> _Bucket | None:
        now = trio.current_time()
        expiries = self._expiries
        # One heap entry per scope: one found used since is queued again at its new expiry.
        while expiries and expiries[0][0] <= now:
            queued, old = heapq.heappop(expiries)
            held = self._buckets.get(old)
            if held is None or held.queued != queued:
                continue  # a scope dropped (and perhaps started again) since
            if held.until <= now:
                del self._buckets[old]
            else:
                held.queued = held.until
                heapq.heappush(expiries, (held.until, old))
        bucket = self._buckets.get(scope)
        fresh = bucket is None
        if bucket is None:
            if not create:
                return None
            bucket = self._buckets[scope] = _Bucket()
        bucket.until = now + max(ttl, 0.001)
        if fresh:
            bucket.queued = bucket.until
            heapq.heappush(expiries, (bucket.until, scope))
        return bucket

    async def get(self, scope: str, name: str, ttl: float) -> bytes | None:
        await trio.lowlevel.checkpoint()
        bucket = self._bucket(scope, ttl, create=False)
        return None if bucket is None else bucket.values.get(name)

    async def put(self, scope: str, name: str, value: bytes, ttl: float, max_bytes: int) -> bool:
        await trio.lowlevel.checkpoint()
        # No checkpoint from here on: the check and the write are one step.
        bucket = self._bucket(scope, ttl, create=True)
        assert bucket is not None
        old = bucket.values.get(name)
        size = bucket.size + len(value) + _name_size(name)
        if old is not None:
            size -= len(old) + _name_size(name)
        if size > max_bytes:
            if not bucket.values:
                del self._buckets[scope]
            return False
        bucket.values[name] = value
        bucket.size = size
        return True

    async def delete(self, scope: str, name: str, ttl: float) -> None:
        await trio.lowlevel.checkpoint()
        bucket = self._bucket(scope, ttl, create=False)
        if bucket is None:
            return
        old = bucket.values.pop(name, None)
        if old is not None:
            bucket.size -= len(old) + _name_size(name)
        if not bucket.values:
            del self._buckets[scope]

    async def drop(self, scope: str) -> None:
        await trio.lowlevel.checkpoint()
        self._buckets.pop(scope, None)


def _name_size(name: str) -> int:
    return len(name.encode("utf-8", "surrogatepass"))


class SessionState:
    """The state of one scope, as a handler sees it (``ctx.session_state``): async
    :meth:`get`, :meth:`set` and :meth:`delete` of JSON values by name."""

    __slots__ = ("_max_bytes", "_max_value_bytes", "_store", "_ttl", "scope")

    def __init__(
        self,
        store: SessionStateStore,
        scope: str,
        *,
        ttl: float = DEFAULT_STATE_TTL,
        max_bytes: int = DEFAULT_STATE_MAX_BYTES,
        max_value_bytes: int = DEFAULT_STATE_MAX_VALUE_BYTES,
    ) -> None:
        self._store = store
        #: The digest naming whose state this is (see :func:`state_scope`).
        self.scope = scope
        self._ttl = ttl
        self._max_bytes = max_bytes
        self._max_value_bytes = max_value_bytes

    async def get(self, name: str, default: Any = None) -> Any:
        """The value stored under ``name``, else ``default``."""
        data = await self._store.get(self.scope, _check_name(name), self._ttl)
        if data is None:
            return default
        return json.loads(data)

    async def set(self, name: str, value: Any) -> None:
        """Store ``value`` (JSON: dicts, lists, strings, numbers, booleans, None) under
        ``name``. :class:`SessionStateFull` (nothing stored) over a bound;
        :class:`SessionStateError` for a value that is not JSON."""
        _check_name(name)
        try:
            data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SessionStateError(
                f"session state holds JSON values; {name!r} cannot be stored: {exc}"
            ) from None
        encoded = data.encode("utf-8", "surrogatepass")
        if len(encoded) > self._max_value_bytes:
            raise SessionStateFull(
                f"session state value {name!r} is {len(encoded)} bytes, over the bound of "
                f"{self._max_value_bytes} bytes a value; nothing was stored"
            )
        stored = await self._store.put(self.scope, name, encoded, self._ttl, self._max_bytes)
        if not stored:
            raise SessionStateFull(
                f"session state is full: storing {name!r} ({len(encoded)} bytes) would pass "
                f"the bound of {self._max_bytes} bytes a session; nothing was stored "
                "(delete what is no longer needed)"
            )

    async def delete(self, name: str) -> None:
        """Forget ``name`` (nothing happens if it holds nothing)."""
        await self._store.delete(self.scope, _check_name(name), self._ttl)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > _MAX_NAME:
        raise SessionStateError(
            f"a session state name is a string of 1 to {_MAX_NAME} characters, not {name!r}"
        )
    return name


def request_handle(meta: dict[str, Any]) -> str:
    """The state handle a modern request carries in ``_meta``, or :class:`SessionStateError`
    saying what to send."""
    handle = meta.get(STATE_META_KEY)
    if not isinstance(handle, str) or not 0 < len(handle) <= _MAX_HANDLE:
        raise SessionStateError(
            "this request has no session state: a request of protocol 2026-07-28 has no "
            f"session, so its client names its state in params._meta[{STATE_META_KEY!r}] "
            f"(a string of 1 to {_MAX_HANDLE} characters, sent with every request sharing it)"
        )
    return handle


def session_state_of(
    connection: object, *, modern: bool, meta: dict[str, Any], principal: str | None
) -> SessionState:
    """The :class:`SessionState` of a request on ``connection`` (a ``ServerConnection``: its
    server's store and bounds, its id for a handshake session)."""
    server: Any = getattr(connection, "server", None)
    store = getattr(server, "session_state_store", None)
    if store is None:
        raise SessionStateError("this server keeps no session state")
    if modern:
        scope = state_scope(None, principal, request_handle(meta))
    else:
        scope = state_scope(str(getattr(connection, "id")), None, None)  # noqa: B009
    return SessionState(
        store,
        scope,
        ttl=server.session_state_ttl,
        max_bytes=server.session_state_max_bytes,
        max_value_bytes=server.session_state_max_value_bytes,
    )
