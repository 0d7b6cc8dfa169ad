"""One worker's part in a fleet whose workers share their stores: the app's ``Fleet``.

With a session store, a request for a session this worker does not hold follows the session's
record and builds a replica here; a session held here follows what other workers changed, and
ends when its record is gone. With a relay, the few messages of a session that belong to
another worker's copy go there (a client's answer to that copy's request, a cancel of a
request running there, the end of the session, a message for a GET stream held there). With a
shared event store, a resume of a stream held elsewhere is served from the store.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

import attrs
import orjson
import trio

from ..http import Relay, RelayUnavailable, SessionRecord, SessionStore, SessionStoreUnavailable
from ..http._app import McpHttpApp
from ..http._asgi import HttpError, Receive, Scope, Send, header
from ..http._http_session import HttpSession
from ..http._sessions import identity
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import ErrorResponse, Notification, RequestId, Response, parse
from ..protocol._sse import event_id, parse_event_id, stream_id
from ..server._principal import Principal
from ._records import follow, restore, save
from ._resume import resume_elsewhere

logger = logging.getLogger("trio_mcp.http")

#: Records a stopping worker rewrites at once as it hands its sessions over.
_HAND_OVER_AT_ONCE = 16


@attrs.define
class _Announced:
    """A change or an end this worker announced, waiting for every subscriber's word."""

    #: How many subscribers the announcement reached (None: not known yet).
    needed: int | None = None
    heard: int = 0
    done: trio.Event = attrs.field(factory=trio.Event)

    def hear(self) -> None:
        self.heard += 1
        self.check()

    def check(self) -> None:
        if self.needed is not None and self.heard >= self.needed:
            self.done.set()


class SharedFleet:
    """The :class:`~trio_mcp.http._fleet.Fleet` of an app whose options name a shared store or
    a relay (``ScaleOut(session_store=..., relay=..., event_store=...)``): the app builds
    it, and calls it where a session may live on another worker."""

    def __init__(self, app: McpHttpApp) -> None:
        self.app = app
        options = app.options
        self.session_store: SessionStore | None = options.scale_out.session_store
        self.relay: Relay | None = options.scale_out.relay
        self.node_id = options.scale_out.node_id
        if self.session_store is not None and self.node_id is None:
            raise ValueError(
                "ScaleOut(session_store=...) needs a node_id: it names this worker's streams "
                "and the messages other workers send it"
            )
        #: Sessions whose record is being read to build a replica here, by id.
        self._replicating: dict[str, trio.Event] = {}
        ttl = options.limits.session_idle_timeout
        #: How long a record read here stands for its session's requests here (see
        #: ``ScaleOut.record_cache``): only with a relay, which announces changes.
        self._record_cache = (
            min(options.scale_out.record_cache, ttl / 3) if self.relay is not None else 0.0
        )
        #: Changes and ends announced by any worker, heard here so far: a record read while
        #: one was heard is not kept (it may have been read before the change was made).
        self._heard = 0
        #: What this worker announced and waits for the word of the others on, by token.
        self._announced: dict[str, _Announced] = {}
        self._tokens = itertools.count(1)

    @property
    def id_prefix(self) -> str:
        # With a session store, the ids of the requests a copy sends name its node: the
        # client's response may reach any worker, which relays it here.
        return f"{self.node_id}/" if self.session_store is not None else ""

    # -- lifespan ------------------------------------------------------------------------------

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Start the session store, and close it when the block ends."""
        records = self.session_store
        if records is None:
            yield
            return
        await records.start()
        try:
            yield
        finally:
            with trio.CancelScope(shield=True):
                await records.aclose()

    async def start(self, nursery: trio.Nursery) -> None:
        if self.session_store is not None:
            nursery.start_soon(self._keep_records, self.session_store)
            touch_many = _touch_many(self.session_store)
            if touch_many is not None and self._record_cache > 0:
                nursery.start_soon(self._renew_readings, touch_many)
        if self.relay is not None and self.node_id is not None:
            await nursery.start(self.relay.subscribe, self.node_id, self._on_relayed)

    async def _keep_records(self, records: SessionStore) -> None:
        """Push forward the records of the sessions busy here (a tool running for longer than
        the idle timeout, a GET stream held open), which no request may touch meanwhile: a
        session in use anywhere never expires everywhere else."""
        ttl = self.app.options.limits.session_idle_timeout
        touch_many = _touch_many(records)
        while True:
            await trio.sleep(ttl / 3)
            busy = [
                session.id
                for session in self.app.sessions.values()
                if not (session.closing or (session.active == 0 and session.engine.idle))
            ]
            try:
                if touch_many is not None:
                    for batch in _batches(busy):
                        await touch_many(batch, ttl)
                else:
                    for session_id in busy:
                        await records.touch(session_id, ttl)
            except SessionStoreUnavailable as error:
                logger.warning("the records of busy sessions were not refreshed: %s", error)

    async def _renew_readings(self, touch_many: TouchMany) -> None:
        """Read again, before they lapse, the records of the copies whose requests were served
        here on their reading: about every half ``record_cache``, all of them in one round trip
        (``touch_many``), instead of a round trip on each request that finds its reading
        lapsed. With sessions spread over workers that was one read per session, worker and
        ``record_cache``, each costing a request as much CPU as a good part of its own
        serving. A copy not used since its reading is left to lapse: its next request, if
        any, reads the record itself."""
        # A little under half: a reading renewed on one pass lapses after the pass after next,
        # which renews it (each is read about once a ``record_cache``, and never stands
        # lapsed while in use unless a pass is late by a twentieth of ``record_cache``).
        period = self._record_cache * 0.45
        ttl = self.app.options.limits.session_idle_timeout
        failing = False
        while True:
            await trio.sleep(period)
            horizon = trio.current_time() + period  # those that would lapse before the next
            due = [
                session
                for session in self.app.sessions.values()
                if session.record_used and session.record_until < horizon and not session.closing
            ]
            for chunk in _batches(due):
                started, heard = trio.current_time(), self._heard_so_far()
                try:
                    records = await touch_many([session.id for session in chunk], ttl)
                except SessionStoreUnavailable as error:
                    if not failing:
                        logger.warning("readings of sessions were not renewed: %s", error)
                    failing = True
                    break  # each request reads its own meanwhile
                if failing:
                    logger.warning("readings of sessions are renewed again")
                    failing = False
                for session, record in zip(chunk, records, strict=True):
                    if self.app.sessions.get(session.id) is not session or session.closing:
                        continue  # ended meanwhile
                    if record is not None and record.owner != (session.owner or ""):
                        # Not this copy's record (not written by a worker): left to lapse,
                        # for a request's own read to judge, and not renewed again meanwhile.
                        session.record_used = False
                        continue
                    self._follow(session, record, started, heard)

    # -- the drain ---------------------------------------------------------------------------

    @property
    def hands_over(self) -> bool:
        return self.session_store is not None

    async def hand_over(self) -> None:
        """The sessions held here outlive this worker: their records stay, and so do their
        streams (the app keeps them); a record that names this worker as the holder of the
        session's GET stream names none now, so the other copies keep their messages for the
        next GET (which the worker it reaches adopts) instead of relaying them here."""
        store = self.session_store
        assert store is not None
        held = [s for s in self.app.sessions.values() if s.get_node == self.node_id]
        limiter = trio.CapacityLimiter(_HAND_OVER_AT_ONCE)
        ttl = self.app.options.limits.session_idle_timeout

        async def release(session: HttpSession) -> None:
            async with limiter:
                session.get_node = None
                try:
                    record = await store.get(session.id)
                    if record is not None and record.get_node == self.node_id:
                        await store.put(session.id, attrs.evolve(record, get_node=None), ttl)
                        await self._announce("changed", session.id)
                except SessionStoreUnavailable as error:
                    logger.warning(
                        "session %s: its GET stream was not released: %s", session.id, error
                    )

        with trio.move_on_after(self.app.options.shutdown_grace):
            async with trio.open_nursery() as nursery:
                for session in held:
                    nursery.start_soon(release, session)

    # -- records -------------------------------------------------------------------------------

    def opened(self, session: HttpSession) -> None:
        if self.session_store is not None:
            session.connection.on_change = functools.partial(self.changed, session)

    async def save(self, session: HttpSession) -> None:
        """Write the session's record (raises ProtocolError if the store failed)."""
        assert self.session_store is not None
        await save(session, self.session_store, self.app.options.limits.session_idle_timeout)

    async def changed(self, session: HttpSession) -> None:
        """The session changed here after its ``initialize``: its record is rewritten and the
        change announced (raises ProtocolError if the store failed)."""
        await self.save(session)
        await self._announce("changed", session.id)

    async def _announce(self, kind: str, session_id: str) -> None:
        """Tell every worker that the session's record changed (or is gone), and return once
        each worker that heard it has dropped its copy's reading (each one's word), or once
        ``record_cache`` has passed, after which no reading made before the change stands
        anywhere: what the client is answered next holds on whichever worker its next
        request reaches. A worker whose subscriber is down is not counted, nor waited for: it
        keeps no reading until it hears again (:meth:`_kept`, ``Relay.hearing``).

        Without ``record_cache`` no worker keeps a reading: an end is sent for the other
        copies to close, a change not at all (each request reads the record)."""
        relay = self.relay
        if relay is None or self._record_cache <= 0:
            if relay is not None and kind == "end":
                await relay.send(None, relayed(kind, session_id))
            return
        assert self.node_id is not None
        token = f"{self.node_id}:{next(self._tokens)}"
        waiting = self._announced[token] = _Announced()
        try:
            with trio.move_on_after(self._record_cache):
                note = relayed(kind, session_id, node=self.node_id, token=token)
                try:
                    waiting.needed = await relay.send(None, note)
                except RelayUnavailable as error:
                    logger.warning("session %s: no other worker was told: %s", session_id, error)
                if waiting.needed is None:
                    await trio.sleep_forever()  # nobody to count: every reading lapses meanwhile
                waiting.check()
                await waiting.done.wait()
        finally:
            del self._announced[token]

    def _heard_of(self, note: dict[str, object], session: HttpSession | None) -> None:
        """Another worker (or this one) announced a change or an end: this copy reads the
        record again before its next request, and the announcer is told so."""
        self._heard += 1
        if session is not None:
            session.record_until = -math.inf
        node, token = note.get("n"), note.get("t")
        if not isinstance(node, str) or not isinstance(token, str):
            return
        if node == self.node_id:
            # Its own announcement: its word needs no round trip (nor a running app, as it
            # stops and hands its sessions over).
            waiting = self._announced.get(token)
            if waiting is not None:
                waiting.hear()
            return
        nursery, relay = self.app.registry.nursery, self.relay
        if relay is not None and nursery is not None:
            word = relayed("heard", str(note["s"]), token=token)
            nursery.start_soon(_send_relayed, relay, node, word)

    def _follow(
        self,
        local: HttpSession,
        record: SessionRecord | None,
        started: float,
        heard: tuple[int, int | None],
    ) -> None:
        """A copy held here takes the record read from ``started`` (kept as its reading), or
        ends with it (None: DELETEd elsewhere, or expired)."""
        if record is None:
            self.app.registry.forget(local)  # ended elsewhere: gone here too
            local.close()
            return
        follow(local, record)
        local.record_used = False
        self._kept(local, started, heard)

    def _hearing(self) -> int | None:
        return self.relay.hearing() if self.relay is not None else None

    def _kept(self, session: HttpSession, started: float, heard: tuple[int, int | None]) -> None:
        """A record read from ``started`` stands for ``record_cache``, unless a change was
        heard meanwhile (the reading may predate it), or the relay could have missed one."""
        hearing = heard[1]
        if self._record_cache > 0 and hearing is not None and heard == self._heard_so_far():
            session.record_until = started + self._record_cache
            session.record_hearing = hearing

    def _heard_so_far(self) -> tuple[int, int | None]:
        """The announcements heard here, and the relay's ``hearing``: what a reading is made
        under, and stands while neither changed."""
        return self._heard, self._hearing()

    async def initialized(self, session: HttpSession, request_id: RequestId) -> None:
        if self.session_store is None:
            return
        try:
            # Before the client learns the id: its next request may reach any worker.
            await self.save(session)
        except ProtocolError:
            session.close()
            raise HttpError(
                503,
                "Service Unavailable: the session could not be recorded for the other "
                "workers; retry",
                request_id=request_id,
                headers=[(b"retry-after", b"1")],
            ) from None

    async def ended(self, session: HttpSession) -> None:
        if self.session_store is None:
            return
        try:
            await self.session_store.delete(session.id)
            await self._announce("end", session.id)
        except RelayUnavailable as error:
            # Its record is gone: every other copy ends at its next request, or idle.
            logger.warning("session %s: no other worker was told: %s", session.id, error)
        except SessionStoreUnavailable as error:
            logger.error("session %s: %s", session.id, error)
            raise HttpError(
                503,
                "Service Unavailable: the session ended on this worker, but the session "
                "store failed: retry the DELETE",
                headers=[(b"retry-after", b"1")],
            ) from None

    async def before_request(self, scope: Scope, principal: Principal | None, method: str) -> None:
        """With a session store, before a request of a session is served: its record, read
        with its expiry pushed forward (unless this copy read it less than ``record_cache``
        ago and no change was announced since). A session held here takes what other workers
        changed, and ends if its record is gone (DELETEd elsewhere, or expired); a session
        held elsewhere gets a replica here, as its ``initialize`` left it and as its client
        set it since. Then the request is served as any other, and 404 if none of this
        applied."""
        store = self.session_store
        if store is None:
            return
        session_id = header(scope, b"mcp-session-id")
        if not session_id or len(session_id) > 200:
            return
        local = self.app.sessions.get(session_id)
        if local is None:
            if method == "GET":
                last_event = header(scope, b"last-event-id")
                if last_event and parse_event_id(last_event) is not None:
                    return  # a resume of a stream held elsewhere: served from the event store
        elif (
            local.record_until > trio.current_time()
            and local.record_hearing == self._hearing()
            and local.owner == identity(principal)
        ):
            # Its record, read here a moment ago, stands: no change was announced since. It is
            # read again, with the others in use, before it lapses (:meth:`_renew_readings`).
            local.record_used = True
            return
        await self._load(store, scope, principal, session_id)

    async def _load(
        self, store: SessionStore, scope: Scope, principal: Principal | None, session_id: str
    ) -> None:
        """Read the session's record: a copy held here follows it (or ends with it), and one
        held nowhere here is built from it."""
        app = self.app
        local = app.sessions.get(session_id)
        pending = self._replicating.get(session_id)
        if local is None and pending is not None:
            await pending.wait()  # another request is building the replica
            return
        done = trio.Event()
        if local is None:
            self._replicating[session_id] = done
        started, heard = trio.current_time(), self._heard_so_far()
        try:
            try:
                record = await store.touch(session_id, app.options.limits.session_idle_timeout)
            except SessionStoreUnavailable as error:
                logger.error("session %s: %s", session_id, error)
                if local is not None:
                    return  # held here: it goes on as it is
                raise HttpError(
                    503,
                    "Service Unavailable: the session store cannot be reached; retry",
                    headers=[(b"retry-after", b"1")],
                ) from None
            owner = identity(principal)
            if record is None or record.owner != (owner or ""):
                if record is None and local is not None and local.owner == owner:
                    self._follow(local, None, started, heard)
                return  # an unknown session, to this principal: 404 as usual
            if local is not None:
                self._follow(local, record, started, heard)
                return
            replica = await self._replicate(scope, session_id, principal, record)
            if replica is not None:
                self._kept(replica, started, heard)
        finally:
            if local is None:
                del self._replicating[session_id]
                done.set()

    async def _replicate(
        self, scope: Scope, session_id: str, principal: Principal | None, record: SessionRecord
    ) -> HttpSession | None:
        app = self.app
        registry = app.registry
        client = registry.client_of(scope, principal)
        session = HttpSession(
            app, session_id, client=client, owner=identity(principal), replica=True
        )
        # The session was opened (and counted for its client) elsewhere: here it counts
        # against the server's cap only.
        registry.claim(session, per_client=False)
        try:
            restore(session, record)
        except (ProtocolError, ValueError) as error:
            registry.forget(session)
            logger.error("session %s: its record cannot be restored: %s", session_id, error)
            return None  # 404: nothing of it can be served here
        assert registry.nursery is not None
        await registry.nursery.start(session.run)
        registry.keep(session)
        session.touch()  # idle until its request registers: a refused one leaves it to expire
        return session

    # -- the relay -----------------------------------------------------------------------------

    async def send_elsewhere(
        self, session: HttpSession, message: Notification | Response | ErrorResponse, body: bytes
    ) -> bool:
        """Send on a message that belongs to another worker's copy of the session: True if it
        was sent on (or is for every copy), False if it is this copy's."""
        relay = self.relay
        if relay is None:
            return False
        node: str | None
        if isinstance(message, Notification):
            if message.method != "notifications/cancelled":
                return False
            params = message.params or {}
            rid = params.get("requestId")
            if rid is None or session.engine.in_flight(rid) is not None:
                return False  # runs here (or is nothing): this copy's
            node, kind = None, "cancel"  # it runs elsewhere, if anywhere: every copy hears it
        else:
            rid = message.id
            mine = f"{self.node_id}/"
            if not isinstance(rid, str) or "/" not in rid or rid.startswith(mine):
                return False
            node, kind = rid.partition("/")[0], "message"
        try:
            await relay.send(node, relayed(kind, session.id, body))
        except RelayUnavailable as error:
            logger.error("session %s: %s", session.id, error)
            raise HttpError(
                503,
                "Service Unavailable: the message is for another worker, and the relay to it "
                "failed; retry",
                headers=[(b"retry-after", b"1")],
            ) from None
        return True

    def forward_get(self, session: HttpSession, data: bytes) -> bool:
        """A request's message for the GET stream, which another node's copy holds: sent
        there (True). Messages not tied to a request (list changes, resource updates) are
        not: every copy hears them from the notification bus, the GET's own included."""
        relay, node = self.relay, session.get_node
        nursery = self.app.registry.nursery
        if relay is None or node is None or node == self.node_id or nursery is None:
            return False
        nursery.start_soon(_send_relayed, relay, node, relayed("get", session.id, data))
        return True

    async def hold_get(self, session: HttpSession) -> None:
        """This copy holds the session's GET stream now: say so in the record, so that the
        other copies send it their requests' messages for it."""
        if self.session_store is None:
            return
        session.get_node = self.node_id
        try:
            await self.changed(session)
        except ProtocolError as error:
            # The stream works here; the other copies keep the messages for a GET of theirs.
            logger.warning("session %s: %s", session.id, error.message)

    def _on_relayed(self, data: bytes) -> None:
        """A message another worker relayed to this one (or to every one)."""
        try:
            note = orjson.loads(data)
            kind, session_id, body = note["k"], note["s"], note.get("m")
        except (orjson.JSONDecodeError, KeyError, TypeError):
            logger.warning("relay: ignored a message that is not one of ours")
            return
        app = self.app
        session = app.sessions.get(session_id) if isinstance(session_id, str) else None
        if kind == "heard":
            token = note.get("t")
            waiting = self._announced.get(token) if isinstance(token, str) else None
            if waiting is not None:
                waiting.hear()
            return
        if kind in ("changed", "end"):
            self._heard_of(note, session)
        if session is None or session.closing:
            return
        if kind == "end":
            app.registry.forget(session)
            session.close()
            return
        if kind == "changed":
            return  # read again before its next request
        if not isinstance(body, str):
            return
        parsed = parse(body)
        if kind == "get":
            # As for this copy's own: progress and logs only to a GET open now.
            session.push_get(body.encode())
        elif kind == "message" and isinstance(parsed, Response | ErrorResponse):
            session.engine.feed(parsed)
            session.touch()
        elif kind == "cancel" and isinstance(parsed, Notification):
            rid = (parsed.params or {}).get("requestId")
            if rid is not None and session.engine.in_flight(rid) is not None:
                session.engine.feed(parsed)

    # -- resumes -------------------------------------------------------------------------------

    def resumes_elsewhere(self, session_id: str, event: tuple[str, str, int]) -> bool:
        local = self.app.sessions.get(session_id)
        return local is None or (
            # With a session store, a stream none of this worker's copy holds may be live
            # on another worker's copy of the session.
            self.session_store is not None
            and event[0] == local.id
            and local.stream_for_key(event[1]) is None
        )

    async def resume_elsewhere(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        principal: Principal | None,
        session_id: str,
        event: tuple[str, str, int],
    ) -> None:
        store = self.session_store
        if store is not None and await self._adopt_get(
            store, scope, receive, send, principal, session_id, event
        ):
            return
        await resume_elsewhere(self.app, scope, receive, send, principal, session_id, event)

    async def _adopt_get(
        self,
        store: SessionStore,
        scope: Scope,
        receive: Receive,
        send: Send,
        principal: Principal | None,
        session_id: str,
        event: tuple[str, str, int],
    ) -> bool:
        """A resume of a GET stream whose copy ended (its worker stopped, and handed the
        session over): this worker's copy takes the GET over, after what the client missed
        of the old one (True: served). A request's stream, or a GET stream another copy
        still holds, is the plain resume's (False)."""
        owner, key, after = event
        if owner != session_id:
            return False
        app = self.app
        replay = await app.replay(stream_id(owner, key), after)
        meta = replay.meta if replay is not None else None
        if (
            replay is None
            or meta is None
            or not replay.finished
            or meta.request_id is not None
            or meta.session_id != session_id
            or meta.owner != identity(principal)
        ):
            return False
        await self._load(store, scope, principal, session_id)
        local = app.sessions.get(session_id)
        if local is None or local.closing or local.owner != identity(principal):
            return False
        first = [(event_id(owner, key, seq), data) for seq, data in replay.events]
        await app.serve_get(scope, receive, send, local, first)
        return True


_T = TypeVar("_T")

#: What a store's optional ``touch_many`` is (see :class:`SessionStore`).
TouchMany = Callable[[Sequence[str], float], Awaitable[list[SessionRecord | None]]]

#: The most sessions read or refreshed in one round trip.
RENEWED_AT_ONCE = 256


def _batches(items: list[_T]) -> Iterator[list[_T]]:
    """``items`` in lists of at most ``RENEWED_AT_ONCE``: one round trip to the store each."""
    for start in range(0, len(items), RENEWED_AT_ONCE):
        yield items[start : start + RENEWED_AT_ONCE]


def _touch_many(store: SessionStore) -> TouchMany | None:
    """The store's ``touch_many``, if it has one (an optional method of the protocol)."""
    touch_many: TouchMany | None = getattr(store, "touch_many", None)
    return touch_many


async def _send_relayed(relay: Relay, node: str, message: bytes) -> None:
    try:
        await relay.send(node, message)
    except RelayUnavailable as error:
        logger.error("a message relayed to %s was lost: %s", node, error)


def relayed(
    kind: str,
    session_id: str,
    body: bytes | None = None,
    *,
    node: str | None = None,
    token: str | None = None,
) -> bytes:
    """A message for the relay: its kind, its session, the JSON-RPC message it carries; for an
    announcement, the announcing node and its token, which each worker's word names."""
    note: dict[str, str] = {"k": kind, "s": session_id}
    if body is not None:
        note["m"] = body.decode()
    if node is not None:
        note["n"] = node
    if token is not None:
        note["t"] = token
    return orjson.dumps(note)
