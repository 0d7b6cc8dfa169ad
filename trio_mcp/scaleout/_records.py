"""A session's record: what every worker needs to serve a session that another one opened.

Written from the session held here (:func:`record_of`, :func:`save`), read back into a session
built from it (:func:`restore`), and followed by a copy when another worker changed it
(:func:`follow`).
"""

from __future__ import annotations

import logging

from ..http import SessionRecord, SessionStore, SessionStoreUnavailable
from ..http._http_session import HttpSession
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INTERNAL_ERROR
from ..protocol._types import ClientCapabilities, Implementation, from_wire, to_wire

logger = logging.getLogger("trio_mcp.http")


def record_of(session: HttpSession) -> SessionRecord:
    state = session.connection.state
    info = state.client_info
    return SessionRecord(
        session.owner or "",
        state.protocol_version,
        to_wire(info) if info is not None else {},
        to_wire(state.client_capabilities),
        state.announced,
        state.log_level,
        frozenset(session.connection.subscriptions),
        session.get_node,
    )


async def save(session: HttpSession, store: SessionStore, ttl: float) -> None:
    """Write the session's record (after ``initialize``, and when the client changed its log
    level or its subscriptions), so that every worker serves it as this one does."""
    try:
        await store.put(session.id, record_of(session), ttl)
    except SessionStoreUnavailable as error:
        logger.error("session %s: %s", session.id, error)
        raise ProtocolError(
            INTERNAL_ERROR,
            "Internal error: the change applies to this worker only, the session store "
            f"failed: {error}",
        ) from None


def restore(session: HttpSession, record: SessionRecord) -> None:
    """Become the session the record describes, as its ``initialize`` left it."""
    session.connection.state.restore(
        record.protocol_version,
        from_wire(record.client_info, Implementation),
        from_wire(record.client_capabilities, ClientCapabilities),
        record.announced,
        record.log_level,
    )
    session.connection.subscriptions.update(record.subscriptions)
    session.get_node = record.get_node
    session.used = True


def follow(session: HttpSession, record: SessionRecord) -> None:
    """Take what another worker changed: the log level and the subscriptions."""
    state = session.connection.state
    if record.log_level is not None and record.log_level != state.log_level:
        state.set_log_level(record.log_level)
    session.get_node = record.get_node
    if record.subscriptions != session.connection.subscriptions:
        session.connection.subscriptions.clear()
        session.connection.subscriptions.update(record.subscriptions)
