"""``Hosting``: a server's services (its extensions', its mounted servers'), entered once.

Every connection a server serves enters them, and so do the server's own run and the HTTP app's
lifespan: the first entry starts them (the tasks' nursery, a mounted child's), and an entry while
they run is a no-op. Told apart here, before anything is made, the no-op costs a connection one
small object, where entering each service's own context manager left a generator, an exit stack
and their bookkeeping with every open socket for as long as it stayed open.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._extensions import Extensions
    from ._mount import Mounts


class Hosted(Protocol):
    """What hosting needs of a server: its services, and which entry started them."""

    extensions: Extensions
    mounts: Mounts
    _hosted_by: Hosting | None


class Hosting:
    """One entry of ``Server.hosting()``."""

    __slots__ = ("_server", "_stack")

    def __init__(self, server: Hosted) -> None:
        self._server = server
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> None:
        server = self._server
        if server._hosted_by is not None:
            return  # the entry that hosts, still inside, serves this one too
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(server.extensions.hosting())
            await stack.enter_async_context(server.mounts.hosting())
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        server._hosted_by = self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        stack = self._stack
        if stack is None:
            return False
        self._stack = None
        server = self._server
        if server._hosted_by is self:
            server._hosted_by = None  # a later entry starts them again
        return bool(await stack.__aexit__(exc_type, exc, tb))
