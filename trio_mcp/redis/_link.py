"""What the Redis stores share: one client's lifetime, its faults as the store's own error, and
Redis URLs as they may be shown.

coredis is imported only when a link starts (or meets an error): a server without Redis never
loads it.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    import coredis


def redact(url: str) -> str:
    """``url`` without its password (``redis://user:***@host:port/db``), for messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<an unparsable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def reason(error: BaseException) -> str:
    """The innermost message of an error (coredis raises some inside exception groups)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, trio.TooSlowError):
        return "no answer in time"
    return str(error) or type(error).__name__


class RedisLink:
    """One store's client of the Redis at ``url``: started, used and closed by that store.

    ``what`` names the store in messages ("the event store"); ``unavailable`` is the store's
    error for a Redis it cannot talk to, raised naming the URL without its password;
    ``timeout`` bounds the start and each use of :meth:`errors`.
    """

    def __init__(
        self, url: str, *, what: str, unavailable: type[Exception], timeout: float
    ) -> None:
        self.url = url
        self.what = what
        self.unavailable = unavailable
        self.timeout = timeout
        self._client: coredis.Redis[bytes] | None = None
        self._exit: contextlib.AsyncExitStack | None = None

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def started(self) -> bool:
        return self._client is not None

    @property
    def client(self) -> coredis.Redis[bytes]:
        if self._client is None:
            raise self.unavailable(f"{self.what}'s Redis at {self.where} is not started")
        return self._client

    async def start(
        self, ready: Callable[[coredis.Redis[bytes]], Awaitable[object]] | None = None
    ) -> None:
        """Connect and ping, then await ``ready(client)`` if given, all within ``timeout``;
        the store's unavailable error if any of it fails."""
        import coredis

        stack = contextlib.AsyncExitStack()
        client: coredis.Redis[bytes] = coredis.Redis.from_url(self.url)
        try:
            # Entered outside the time bound: the client's own nursery lives until aclose().
            await stack.enter_async_context(client)
            with trio.fail_after(self.timeout):
                await client.ping()
                if ready is not None:
                    await ready(client)
        except BaseException as error:
            with trio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await stack.aclose()
            if isinstance(error, trio.Cancelled):
                raise
            raise self.unavailable(
                f"{self.what}'s Redis at {self.where} cannot be reached: {reason(error)}"
            ) from None
        self._client, self._exit = client, stack

    async def aclose(self) -> None:
        """Close the connections (in the task that started the link)."""
        if self._exit is None:
            return
        stack, self._exit, self._client = self._exit, None, None
        with contextlib.suppress(Exception):
            await stack.aclose()

    @contextlib.asynccontextmanager
    async def errors(self) -> AsyncIterator[None]:
        """Any failure to talk to Redis, as the store's unavailable error, bounded in time."""
        try:
            with trio.fail_after(self.timeout):
                yield
        except self.unavailable:
            raise
        except (OSError, trio.TooSlowError, ExceptionGroup) as error:
            raise self.unavailable(
                f"{self.what}'s Redis at {self.where} failed: {reason(error)}"
            ) from None
        except Exception as error:
            import anyio
            import coredis.exceptions

            # A connection closed under coredis (Redis gone mid-command) surfaces as anyio's.
            lost = (
                coredis.exceptions.RedisError,
                anyio.ClosedResourceError,
                anyio.BrokenResourceError,
            )
            if isinstance(error, lost):
                raise self.unavailable(
                    f"{self.what}'s Redis at {self.where} failed: {reason(error)}"
                ) from None
            raise
