"""A resume of a stream whose session this worker does not hold, served from the shared store."""

from __future__ import annotations

import logging

import trio

from ..http import EventStoreUnavailable
from ..http._app import McpHttpApp
from ..http._asgi import HttpError, Receive, Scope, Send, cancel_on_disconnect
from ..http._sessions import identity
from ..protocol._jsonrpc import INTERNAL_ERROR, ErrorObject, ErrorResponse, RequestId, encode
from ..protocol._sse import KEEPALIVE, encode_event, event_id, stream_id
from ..server._principal import Principal

logger = logging.getLogger("trio_mcp.http")


async def resume_elsewhere(
    app: McpHttpApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    principal: Principal | None,
    session_id: str,
    parsed: tuple[str, str, int],
) -> None:
    """A resume of a stream whose session this worker does not hold, from the shared store.

    Served only if the event id names the session of the request, and the store has that
    stream for the same owner; anything else is the 404 of an unknown session. Then the
    events after the id, and, while the stream is not finished and its session lives on
    another worker (its liveness key), the new ones as they come. A stream that ends
    unfinished, its session living nowhere (its worker died), ends with an error response
    for its request: the client never waits for an answer that cannot come.
    """
    owner, key, after = parsed
    stream = stream_id(owner, key) if owner == session_id else None
    replay = await app.replay(stream, after) if stream is not None else None
    meta = replay.meta if replay is not None else None
    if (
        stream is None
        or replay is None
        or meta is None
        or meta.session_id != session_id
        or meta.owner != identity(principal)
    ):
        raise HttpError(404, "Session not found")
    await app.sse_start(scope, send)
    options = app.options
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_on_disconnect, receive, nursery.cancel_scope)
            last = after
            idle = 0.0
            while True:
                for seq, data in replay.events:
                    body = encode_event(data, event="message", id=event_id(owner, key, seq))
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    last = seq
                    idle = 0.0
                if replay.finished:
                    break
                try:
                    alive = await app.store.session_alive(session_id)
                    if not alive:
                        # Its worker is gone: anything it wrote before it went is in the
                        # store by now.
                        replay = await app.store.replay(stream, last)
                except EventStoreUnavailable as error:
                    logger.error("a resumed stream lost its store: %s", error)
                    alive, replay = False, None
                if not alive:
                    if replay is not None:
                        for seq, data in replay.events:
                            body = encode_event(data, event="message", id=event_id(owner, key, seq))
                            await send(
                                {"type": "http.response.body", "body": body, "more_body": True}
                            )
                    if (replay is None or not replay.finished) and meta.request_id is not None:
                        body = encode_event(_orphaned(meta.request_id), event="message")
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                    break
                await trio.sleep(options.scale_out.resume_poll_interval)
                idle += options.scale_out.resume_poll_interval
                if idle >= options.keepalive_interval:
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                    idle = 0.0
                try:
                    replay = await app.store.replay(stream, last)
                except EventStoreUnavailable:
                    replay = None
                if replay is None:
                    break  # forgotten (delivered, or its session ended) or dropped
            nursery.cancel_scope.cancel()
        await send({"type": "http.response.body", "body": b""})
    except OSError:
        return  # the client went away; it may resume again


def _orphaned(request_id: RequestId) -> bytes:
    """The end of a resumed stream whose request can no longer be answered."""
    error = ErrorObject.make(
        INTERNAL_ERROR,
        "The server handling this request stopped before it answered; retry the request",
    )
    return encode(ErrorResponse(request_id, error))
