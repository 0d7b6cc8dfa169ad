"""The 2024-11-05 HTTP+SSE transport, client side, on httpx.

The connection is one GET stream: its first event, ``endpoint``, names the URL every message
is POSTed to (resolved against the stream's URL, and refused if it names another origin), and
every message of the server arrives on it as a ``message`` event. A POST is answered 202 and
carries nothing back; the answers come down the stream.

Errors are clear, never hangs: no ``endpoint`` event within ``endpoint_timeout``, a GET that is
refused or is not an event stream, or a stream that ends, end the connection with
``ConnectionClosed`` saying which; a POST refused with an HTTP error fails the request it
carried (the caller gets ``ProtocolError``), and a 404 (the server forgot the session) ends
the connection.
"""

from __future__ import annotations

import logging
import math
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx
import trio

from ..protocol._errors import ConnectionClosed, MCPError
from ..protocol._jsonrpc import (
    INTERNAL_ERROR,
    Batch,
    ErrorObject,
    ErrorResponse,
    Parsed,
    Request,
    RequestId,
    parse,
)
from ..protocol._sse import SSEParser
from ._http_client import running
from ._transport import BaseTransport, RequestFailed

logger = logging.getLogger("trio_mcp.sse.client")

#: How long the GET may take to give its ``endpoint`` event.
ENDPOINT_TIMEOUT = 10.0
#: The largest SSE event accepted; a bigger one is a broken stream.
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Messages read from the stream and not yet taken by the engine; past it, reading waits.
MAX_QUEUED_MESSAGES = 256
#: How much of a refused POST's body is read, for its JSON-RPC error.
MAX_ERROR_BODY = 64 * 1024


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def resolve_endpoint(url: str, endpoint: str) -> str:
    """The POST URL an ``endpoint`` event names, resolved against the stream's ``url``;
    ``ValueError`` if it is on another origin (a server must not send our messages elsewhere)."""
    resolved = urllib.parse.urljoin(url, endpoint.strip())
    if _origin(resolved) != _origin(url):
        raise ValueError(
            f"the server's endpoint {endpoint!r} is on another origin than {url!r}; refused"
        )
    return resolved


class SseClientTransport(BaseTransport):
    """The client end of an HTTP+SSE connection; an engine transport.

    Build it with :func:`open_sse_transport`. ``endpoint`` is the POST URL, once the stream
    named it.
    """

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        *,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | None = None,
        endpoint_timeout: float = ENDPOINT_TIMEOUT,
    ) -> None:
        self.url = url
        self._client = client
        self._headers = dict(headers or {})
        self._auth = auth
        self.endpoint_timeout = endpoint_timeout
        self.endpoint: str | None = None
        base = client.timeout
        # No read limit on the stream: it is idle for as long as nothing happens.
        self._timeout = httpx.Timeout(
            connect=base.connect, read=None, write=base.write, pool=base.pool
        )
        # Parsed is a forward-referenced alias, so the channel's type is given by annotation.
        self._in_send: trio.MemorySendChannel[Parsed | Batch | RequestFailed | BaseException]
        self._in_receive: trio.MemoryReceiveChannel[Parsed | Batch | RequestFailed | BaseException]
        self._in_send, self._in_receive = trio.open_memory_channel(MAX_QUEUED_MESSAGES)
        self._closed = False
        self._scope = trio.CancelScope()
        self._stopped = trio.Event()

    # -- running ---------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the stream; started once its ``endpoint`` event came (else it raises
        ``ConnectionClosed``); then read it until it ends or :meth:`aclose`."""
        try:
            with self._scope:
                await self._listen(task_status=task_status)
        finally:
            self._closed = True
            self._stopped.set()

    async def _listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        started = False
        try:
            await self._read_stream(task_status)
        except trio.TooSlowError:
            raise ConnectionClosed(
                f"no endpoint event from {self.url} within {self.endpoint_timeout} s"
            ) from None
        except (ValueError, httpx.HTTPError, ConnectionClosed) as exc:
            started = self.endpoint is not None
            if isinstance(exc, ConnectionClosed):
                why = exc
            elif isinstance(exc, httpx.HTTPError):
                why = ConnectionClosed(f"the HTTP+SSE stream of {self.url} failed: {exc!r}")
            else:  # SSEError, or an endpoint on another origin
                why = ConnectionClosed(f"the HTTP+SSE stream of {self.url} broke: {exc}")
            if not started:
                raise why from None
            self._put(why)

    async def _read_stream(self, task_status: trio.TaskStatus[None]) -> None:
        headers = {**self._headers, "accept": "text/event-stream", "cache-control": "no-cache"}
        with trio.fail_after(self.endpoint_timeout) as waiting:
            # Never follow a redirect: nothing is sent to any address but the one we were given.
            async with self._client.stream(
                "GET",
                self.url,
                headers=headers,
                timeout=self._timeout,
                follow_redirects=False,
                auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
            ) as response:
                if response.status_code != 200:
                    raise ConnectionClosed(
                        f"GET {self.url} for an HTTP+SSE stream got HTTP {response.status_code}"
                    )
                media = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media != "text/event-stream":
                    raise ConnectionClosed(
                        f"GET {self.url} did not answer with an event stream "
                        f"(content type {media or 'none'!r}): not an HTTP+SSE endpoint"
                    )
                parser = SSEParser(max_event_bytes=MAX_MESSAGE_BYTES)
                async for chunk in response.aiter_bytes():
                    for event in parser.feed(chunk):
                        if event.event == "endpoint" and self.endpoint is None:
                            self.endpoint = resolve_endpoint(self.url, event.data)
                            waiting.deadline = math.inf
                            task_status.started()
                        elif event.event == "message" and self.endpoint is not None:
                            await self._deliver(event.data)
                if self.endpoint is None:
                    raise ConnectionClosed(
                        f"the HTTP+SSE stream of {self.url} ended before its endpoint event"
                    )
                raise ConnectionClosed("the server ended the HTTP+SSE stream")

    async def _deliver(self, data: str) -> None:
        try:
            await self._in_send.send(parse(data))
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # closing: nobody reads any more

    def _put(self, item: Parsed | Batch | RequestFailed | BaseException) -> None:
        try:
            self._in_send.send_nowait(item)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    # -- the engine's side -----------------------------------------------------------------------

    async def receive(self) -> Parsed | Batch | RequestFailed:
        try:
            item = await self._in_receive.receive()
        except trio.ClosedResourceError:
            raise ConnectionClosed("the HTTP+SSE transport is closed") from None
        if isinstance(item, BaseException):
            raise item
        return item

    async def send(
        self, data: bytes, *, related_request_id: RequestId | None = None, final: bool = False
    ) -> None:
        """POST one message, in order: the engine's writer sends a cancel after its request."""
        if self._closed or self.endpoint is None:
            raise ConnectionClosed("the HTTP+SSE transport is closed")
        headers = {**self._headers, "content-type": "application/json"}
        try:
            response = await self._client.post(
                self.endpoint,
                content=data,
                headers=headers,
                follow_redirects=False,
                auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as exc:
            self._refused(data, f"HTTP request failed: {type(exc).__name__}: {exc}", None, b"")
            return
        except MCPError as exc:
            if isinstance(exc, ConnectionClosed):
                raise
            # Its authorization failed (an ``OAuthError``): the requests it carried fail with
            # it; the connection goes on.
            sent = parse(data)
            for item in sent.items if isinstance(sent, Batch) else (sent,):
                if isinstance(item, Request):
                    self._put(RequestFailed(item.id, exc))
            return
        if response.is_success:
            return
        if response.status_code == 404:
            self._put(ConnectionClosed("the server no longer knows this HTTP+SSE session (404)"))
        self._refused(
            data,
            f"HTTP {response.status_code}: {response.reason_phrase}",
            response.status_code,
            response.content[:MAX_ERROR_BODY],
        )

    def _refused(self, data: bytes, message: str, status: int | None, body: bytes) -> None:
        """A POST that failed: the requests it carried fail with an error response each (the
        server's JSON-RPC error if its body held one)."""
        sent = parse(data)
        requests = [
            item
            for item in (sent.items if isinstance(sent, Batch) else (sent,))
            if isinstance(item, Request)
        ]
        if not requests:
            logger.debug("the server refused a message: %s", message)
            return
        answer = parse(body) if body else None
        if isinstance(answer, ErrorResponse):
            error = answer.error
        elif status is not None:
            error = ErrorObject.make(INTERNAL_ERROR, message, data={"httpStatus": status})
        else:
            error = ErrorObject.make(INTERNAL_ERROR, message)
        for request in requests:
            self._put(ErrorResponse(request.id, error))

    # -- closing ---------------------------------------------------------------------------------

    async def aclose(self, timeout: float) -> None:
        """Stop reading (closing the stream ends the session on the server); bounded."""
        self._closed = True
        self._in_send.close()
        self._scope.cancel()
        with trio.move_on_after(timeout):
            await self._stopped.wait()


@asynccontextmanager
async def open_sse_transport(
    url: str,
    nursery: trio.Nursery,
    *,
    headers: Mapping[str, str] | None = None,
    http_client: httpx.AsyncClient | None = None,
    auth: httpx.Auth | None = None,
    endpoint_timeout: float = ENDPOINT_TIMEOUT,
    close_timeout: float = 2.0,
) -> AsyncIterator[SseClientTransport]:
    """An HTTP+SSE transport to the stream at ``url`` whose tasks run in ``nursery``; entered
    once the server named its endpoint (else ``ConnectionClosed``).

    ``headers`` go on the GET and every POST; ``http_client`` is an ``httpx.AsyncClient`` to
    reuse (left open), and ``auth`` authorizes every request, as for Streamable HTTP.
    """
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r}")

    def make(client: httpx.AsyncClient) -> SseClientTransport:
        return SseClientTransport(
            url, client, headers=headers, auth=auth, endpoint_timeout=endpoint_timeout
        )

    async with running(make, http_client, nursery, close_timeout) as transport:
        yield transport


__all__ = ["SseClientTransport", "open_sse_transport", "resolve_endpoint"]
