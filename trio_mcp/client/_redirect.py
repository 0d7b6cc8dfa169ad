"""The interactive step of the authorization-code flow: a browser and a redirect receiver.

:class:`LoopbackReceiver` listens on 127.0.0.1 (a free port, or the port of the configured
redirect URI), waits for the one request the browser makes when the authorization server
redirects it back, answers it with a short page and hands the full redirect URL to the flow.
It speaks just enough HTTP/1.1 for that: one request line and its headers, bounded in size
and in time; any other path is answered 404 and the wait goes on.
"""

from __future__ import annotations

import logging
import webbrowser
from urllib.parse import urlsplit, urlunsplit

import trio

from ._oauth_errors import OAuthError

logger = logging.getLogger("trio_mcp.client.oauth")

MAX_REQUEST_BYTES = 16384
#: How long one browser connection may take to send its request.
READ_TIMEOUT = 10.0

_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>Authorization</title>"
    b"<p>Authorization is complete. You can close this window.</p>"
)


class LoopbackReceiver:
    """One redirect, received on loopback. Use as ``async with LoopbackReceiver(uri) as r``:
    ``r.redirect_uri`` is the URI to register and send; ``await r.wait(timeout)`` returns the
    URL the browser was redirected to."""

    def __init__(self, redirect_uri: str | None = None) -> None:
        parts = urlsplit(redirect_uri or "http://127.0.0.1/callback")
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError("the loopback receiver needs an http://127.0.0.1 redirect URI")
        self._host = parts.hostname
        self._port = parts.port or 0
        self._path = parts.path or "/"
        self._listener: trio.SocketListener | None = None
        self.redirect_uri = ""

    async def __aenter__(self) -> LoopbackReceiver:
        listeners = await trio.open_tcp_listeners(self._port, host="127.0.0.1")
        listener = listeners[0]
        for extra in listeners[1:]:
            await extra.aclose()
        assert isinstance(listener, trio.SocketListener)
        self._listener = listener
        port = listener.socket.getsockname()[1]
        self.redirect_uri = urlunsplit(("http", f"{self._host}:{port}", self._path, "", ""))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._listener is not None:
            await self._listener.aclose()

    async def wait(self, timeout: float) -> str:
        """The redirect URL, or ``OAuthError("authorization")`` after ``timeout`` seconds."""
        assert self._listener is not None
        with trio.move_on_after(timeout):
            while True:
                stream = await self._listener.accept()
                async with stream:
                    target = await self._one_request(stream)
                if target is not None:
                    return urlunsplit(("http", self.redirect_uri.split("/")[2], *target, ""))
        raise OAuthError("authorization", f"no redirect reached the browser within {timeout:g}s")

    async def _one_request(self, stream: trio.abc.Stream) -> tuple[str, str] | None:
        data = b""
        with trio.move_on_after(READ_TIMEOUT):
            while b"\r\n\r\n" not in data and len(data) <= MAX_REQUEST_BYTES:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET" or not parts[2].startswith("HTTP/1."):
            await self._reply(stream, b"400 Bad Request", b"")
            return None
        target = urlsplit(parts[1])
        if target.path != self._path:
            await self._reply(stream, b"404 Not Found", b"")
            return None
        await self._reply(stream, b"200 OK", _PAGE)
        return target.path, target.query

    @staticmethod
    async def _reply(stream: trio.abc.Stream, status: bytes, body: bytes) -> None:
        head = (
            b"HTTP/1.1 " + status + b"\r\ncontent-type: text/html; charset=utf-8\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n"
            b"cache-control: no-store\r\n\r\n"
        )
        with trio.move_on_after(READ_TIMEOUT):
            try:
                await stream.send_all(head + body)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass


async def open_browser(url: str) -> None:
    """Open ``url`` in the user's browser (in a thread: some browsers block while starting).
    Without a browser the URL is logged, for the user to open by hand; the wait goes on."""
    opened = await trio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)
    if not opened:
        logger.warning("open this URL in a browser to authorize: %s", url)
