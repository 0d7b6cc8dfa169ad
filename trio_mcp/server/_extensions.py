"""Extensions: what a feature declared under the ``extensions`` capability gives a server.

An extension (tasks, and whatever comes next) lives in a room of its own and plugs in here;
the core never names one. What it may give, each optional (:class:`Extension`'s defaults give
nothing):

- its entry under ``extensions`` in the server's capabilities (:meth:`Extension.capability`):
  in ``server/discover``, and in the ``initialize`` result too when :attr:`Extension.handshake_era`;
- which tools a ``tools/list`` shows a request, by its client capabilities
  (:meth:`~Extension.lists_tool`);
- the modern request methods it answers, routed through the connection's route table as the
  core methods are, and refused there before the request is registered (:meth:`~Extension.route`);
  with :attr:`~Extension.handshake_era`, its methods and its capability entry in the handshake
  era too (routed the same way, announced in the ``initialize`` result);
- a hook around ``tools/call``, chosen when the call is routed (:meth:`~Extension.tool_call`);
- what a ``subscriptions/listen`` may watch, under its own key of ``notifications``
  (:meth:`~Extension.watch`; :meth:`ServerConnection.send_watched` then tells the listeners);
- a service around the server's work: the HTTP app's lifespan, or a connection's when nothing
  else hosts it (:meth:`~Extension.hosting`);
- the notification bus events it handles (:meth:`~Extension.on_bus_event`).

``Server(extensions=[...])`` or ``server.use(extension)`` adds one; :meth:`Extension.attach`
then gives it its :class:`ExtensionHost`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Protocol, TypeVar

import trio

from .._engine import InFlight
from ..protocol._jsonrpc import JSONObject
from ._bus import BusEvent, Notifier
from ._connection import MethodHandler, ServerConnection
from ._registry import ResourceEntry, ToolEntry

logger = logging.getLogger("trio_mcp.server")
F = TypeVar("F", bound=Callable[..., Any])

#: The ordinary ``tools/call`` of a request, handed to a tool-call hook.
ToolCall = Callable[[ServerConnection, InFlight], Awaitable[JSONObject]]
#: What answers a ``tools/call`` an extension took: the connection, the request, its
#: principal's identity (``""`` without one) and the ordinary call.
ToolCallHook = Callable[[ServerConnection, InFlight, str, ToolCall], Awaitable[JSONObject]]


class ExtensionHost(Protocol):
    """What an extension sees of the server it is added to."""

    @property
    def tools(self) -> dict[str, ToolEntry]: ...
    @property
    def connections(self) -> set[ServerConnection]: ...
    @property
    def notifier(self) -> Notifier: ...
    @property
    def resources(self) -> dict[str, ResourceEntry]: ...
    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        in_thread: bool = True,
    ) -> Callable[[F], F]: ...
    def notify_list_changed(self, kind: str) -> None: ...
    def notify_resource_updated(self, uri: str) -> None: ...


class Extension:
    """A server extension: subclass it and override what it gives. ``name`` is its key under
    ``extensions`` in the capabilities and in a request's client capabilities."""

    name: str = ""
    #: Whether it is served to handshake-era clients too: its capability entry in the
    #: ``initialize`` result and its methods routed there (tasks, a modern-era feature, is not).
    handshake_era: bool = False

    #: Its methods that address something by a handle the server issued (a task id): one the
    #: server does not know (-32602) is asked of its mounts (``Server.mount``, a proxy), where
    #: the handle may have been issued.
    forwarded: frozenset[str] = frozenset()

    def attach(self, host: ExtensionHost) -> None:
        """Called once, when the extension is added to a server."""

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        """Its entry under ``extensions`` in the capabilities; None: not announced now."""
        return None

    def lists_tool(self, entry: ToolEntry, client_capabilities: Mapping[str, Any]) -> bool:
        """Whether ``tools/list`` shows this tool to a request with these client capabilities
        (the request's own in the modern era, ``initialize``'s in the handshake era)."""
        return True

    def route(self, method: str, client_capabilities: Mapping[str, Any]) -> MethodHandler | None:
        """The handler of a modern request ``method`` if it is this extension's (None if not):
        raise a ``ProtocolError`` to refuse it before it is registered."""
        return None

    def tool_call(
        self, entry: ToolEntry, client_capabilities: Mapping[str, Any]
    ) -> ToolCallHook | None:
        """A hook that answers this modern ``tools/call`` in place of the ordinary call (it
        runs past authorization, and may still make that call); None: the ordinary call."""
        return None

    async def watch(
        self, conn: ServerConnection, record: InFlight, wanted: JSONObject
    ) -> tuple[JSONObject, frozenset[str]] | None:
        """What a ``subscriptions/listen`` (``wanted``: its ``notifications``) watches of this
        extension's: the entries honoured and the ids watched; None: it asked for none."""
        await trio.lowlevel.checkpoint()
        return None

    def hosting(self) -> AbstractAsyncContextManager[None]:
        """A service around the server's work (its nursery); re-entered: a no-op is fine."""
        return _nothing()

    def on_bus_event(self, event: BusEvent) -> bool:
        """Handle a bus event from this or another worker; True if it was this extension's."""
        return False


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


class Extensions:
    """A server's extensions, in the order added: what the core asks of them all at once."""

    def __init__(self) -> None:
        self._all: list[Extension] = []

    def add(self, extension: Extension, host: ExtensionHost) -> None:
        if not extension.name:
            raise ValueError("an extension needs a name (its key under 'extensions')")
        if self.get(extension.name) is not None:
            raise ValueError(f"an extension named {extension.name!r} is already added")
        extension.attach(host)
        self._all.append(extension)

    def get(self, name: str) -> Extension | None:
        return next((e for e in self._all if e.name == name), None)

    def __iter__(self) -> Iterator[Extension]:
        return iter(self._all)

    def __bool__(self) -> bool:
        return bool(self._all)

    def capabilities(self, host: ExtensionHost, *, handshake: bool = False) -> JSONObject:
        """The ``extensions`` capability: every extension announcing itself now (``handshake``:
        those served in the handshake era)."""
        found = {}
        for extension in self._all:
            if handshake and not extension.handshake_era:
                continue
            entry = extension.capability(host)
            if entry is not None:
                found[extension.name] = entry
        return found

    def route(
        self, method: str, client_capabilities: Mapping[str, Any], *, handshake: bool = False
    ) -> MethodHandler | None:
        for extension in self._all:
            if handshake and not extension.handshake_era:
                continue
            handler = extension.route(method, client_capabilities)
            if handler is not None:
                return handler
        return None

    def tool_filter(
        self, client_capabilities: Callable[[], Mapping[str, Any]]
    ) -> Callable[[ToolEntry], bool] | None:
        """What keeps a tool out of a ``tools/list`` (None: nothing does), asking only the
        extensions whose class gives its own :meth:`Extension.lists_tool`, with the client
        capabilities ``client_capabilities()`` gives, read only then. Every server has the
        tasks extension, which keeps no tool out: a list of 10,000 tools asks it nothing,
        where it was asked 10,000 times."""
        asked = [e for e in self._all if type(e).lists_tool is not Extension.lists_tool]
        if not asked:
            return None
        capabilities = client_capabilities()
        if len(asked) == 1:
            only = asked[0]
            return lambda entry: only.lists_tool(entry, capabilities)
        return lambda entry: all(e.lists_tool(entry, capabilities) for e in asked)

    def forwards(self, method: str) -> bool:
        """Whether ``method`` addresses a handle a mount may have issued (``forwarded``)."""
        return any(method in extension.forwarded for extension in self._all)

    def tool_call(
        self, entry: ToolEntry, client_capabilities: Mapping[str, Any]
    ) -> ToolCallHook | None:
        for extension in self._all:
            hook = extension.tool_call(entry, client_capabilities)
            if hook is not None:
                return hook
        return None

    async def watch(
        self, conn: ServerConnection, record: InFlight, wanted: JSONObject
    ) -> tuple[JSONObject, dict[str, frozenset[str]]]:
        honoured: JSONObject = {}
        watching: dict[str, frozenset[str]] = {}
        for extension in self._all:
            found = await extension.watch(conn, record, wanted)
            if found is not None:
                honoured.update(found[0])
                watching[extension.name] = found[1]
        return honoured, watching

    @asynccontextmanager
    async def hosting(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for extension in self._all:
                await stack.enter_async_context(extension.hosting())
            yield

    def on_bus_event(self, event: BusEvent) -> bool:
        handled = False
        for extension in self._all:
            try:
                handled = extension.on_bus_event(event) or handled
            except Exception:
                logger.exception(
                    "the extension %r failed on a %r event", extension.name, event.kind
                )
        return handled
