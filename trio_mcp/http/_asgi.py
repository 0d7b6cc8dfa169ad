"""What the parts of the HTTP app share: the ASGI type names, request headers and media types,
and the HTTP-level refusal."""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Protocol

import trio

from ..auth._gate import Refused
from ..protocol._jsonrpc import INVALID_REQUEST, ErrorObject, RequestId

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class HttpError(Exception):
    """An HTTP-level refusal: its status, and the JSON-RPC error its body carries.

    A bare message is an Invalid Request (-32600); any other error is passed as an
    :class:`ErrorObject`.
    """

    def __init__(
        self,
        status: int,
        error: ErrorObject | str,
        *,
        request_id: RequestId | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        if isinstance(error, str):
            error = ErrorObject.make(INVALID_REQUEST, error)
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.request_id = request_id
        self.headers = list(headers)


def too_many_in_flight(
    limit: int, request_id: RequestId, *, whose: str = "session", across: bool = False
) -> HttpError:
    """429 for a request past a limit of requests at once: of a session
    (``Limits.max_requests_per_session``) or of a client; ``across`` the servers of a fleet."""
    where = " across the servers" if across else ""
    return HttpError(
        429,
        f"Too Many Requests: this {whose} already has {limit} requests in flight{where}, the "
        "limit; retry when one has finished",
        request_id=request_id,
        headers=[(b"retry-after", b"1")],
    )


def _refusal(refused: Refused, request_id: RequestId | None = None) -> HttpError:
    """The gate's refusal as the app answers it: the JSON-RPC error body, the challenge."""
    error = ErrorObject.make(refused.code, refused.message)
    return HttpError(refused.status, error, request_id=request_id, headers=refused.headers)


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (``name`` lowercased); sent more than once, its values joined
    with ``", "`` (as HTTP combines a repeated field), so that a single-valued header sent twice
    fails its check rather than having one copy picked."""
    return header_table(scope).get(name)


#: Where a request's header table is kept in its ASGI scope (scopes take extra keys).
_HEADER_TABLE = "trio_mcp.headers"


def header_table(scope: Scope) -> dict[bytes, str]:
    """Every request header by lowercased name, built once per request and kept in its scope:
    a POST reads about nine of them, and each would otherwise walk the whole list."""
    table: dict[bytes, str] | None = scope.get(_HEADER_TABLE)
    if table is None:
        raw = scope.get("headers", ())
        if not isinstance(raw, list | tuple):
            raw = list(raw)
        table = _usual_table(raw)
        if table is None:
            table = {}
            for key, value in raw:
                name = bytes(key).lower()
                text = bytes(value).decode("latin-1")
                table[name] = table[name] + ", " + text if name in table else text
        scope[_HEADER_TABLE] = table
    return table


def _usual_table(raw: list[Any] | tuple[Any, ...]) -> dict[bytes, str] | None:
    """The header table of the usual request, in one plain loop: names already lowercase bytes
    (as HTTP/1.1 and HTTP/2 servers hand them over), none of them repeated. None for anything
    else, which :func:`header_table` builds header by header. (A loop of dict stores beats
    ``dict()`` with joins and splits here, measured: fewer objects made.)"""
    table: dict[bytes, str] = {}
    try:
        for name, value in raw:
            table[name] = value.decode("latin-1")
        if len(table) != len(raw) or not b"".join(table).islower():
            return None  # a repeated name, or one not lowercase
    except (TypeError, ValueError, AttributeError):
        return None  # not a list of pairs of bytes
    return table


def mcp_headers(scope: Scope) -> dict[str, str]:
    """A request's ``Mcp-`` headers, by lowercased name, repeated ones joined as by
    :func:`_header`: all that a modern request's header check reads."""
    return {
        name.decode("latin-1"): value
        for name, value in header_table(scope).items()
        if name[:4] == b"mcp-"
    }


# RFC 9110 tokens and quoted strings: what a media type and its parameters are made of.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_MEDIA_TYPE = re.compile(
    rf"\s*({_TOKEN}/{_TOKEN})((?:\s*;\s*{_TOKEN}\s*=\s*(?:{_TOKEN}|{_QUOTED}))*)\s*"
)
_PARAMETER = re.compile(rf"\s*;\s*({_TOKEN})\s*=\s*({_TOKEN}|{_QUOTED})")
_QVALUE = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")


# The checks below are pure functions of a header's text, which a client sends the same on
# every request: remembered (a bounded number of texts, so that no client can grow them).
@functools.lru_cache(maxsize=256)
def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type is exactly one media type, ``application/json`` in any case,
    with parameters or without (``text/plain, application/json`` is two, and refused)."""
    match = _MEDIA_TYPE.fullmatch(content_type or "")
    return match is not None and match[1].lower() == "application/json"


@functools.lru_cache(maxsize=256)
def accepts(accept: str | None, media_type: str) -> bool:
    """Whether an Accept header admits ``media_type``: the most specific range that matches it
    (the type itself, then ``type/*``, then ``*/*``) decides, and ``q=0`` refuses. A range
    that does not parse admits nothing."""
    main = media_type.split("/")[0] + "/*"
    best: tuple[int, bool] | None = None  # (specificity, acceptable)
    for part in (accept or "").split(","):
        match = _MEDIA_TYPE.fullmatch(part)
        if match is None:
            continue
        media_range = match[1].lower()
        if media_range == media_type:
            specificity = 2
        elif media_range == main:
            specificity = 1
        elif media_range == "*/*":
            specificity = 0
        else:
            continue
        acceptable = True
        for name, value in _PARAMETER.findall(match[2]):
            if name.lower() == "q":
                acceptable = _QVALUE.fullmatch(value) is not None and float(value) > 0
        if best is None or specificity > best[0]:
            best = (specificity, acceptable)
    return best is not None and best[1]


class Responder(Protocol):
    """How the app's endpoints answer (``McpHttpApp``'s): a whole response, or the start of
    an SSE one, each with the CORS headers of the request's origin."""

    async def respond(
        self,
        scope: Scope,
        send: Send,
        status: int,
        body: bytes = b"",
        headers: Iterable[tuple[bytes, bytes]] = (),
        content_type: bytes = b"application/json",
    ) -> None: ...

    async def sse_start(
        self,
        scope: Scope,
        send: Send,
        headers: Iterable[tuple[bytes, bytes]] = (),
        *,
        length: int | None = None,
    ) -> None: ...


async def end_cut_response(send: Send) -> None:
    """End a streamed response that the server cancels (shutting down, or its client left)
    properly, if the connection is still there: its client sees an end, not a cut. Shielded,
    and bounded, for it runs in a cancelled scope."""
    with trio.move_on_after(1) as cleanup:
        cleanup.shield = True
        try:
            await send({"type": "http.response.body", "body": b""})
        except OSError:
            pass


async def cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the client has gone away (its request body was already read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
