"""Composition: ``parent.mount(child, prefix="weather")``, one server's offer inside another's.

Theory of operation. A mount is a :class:`Provider` under a prefix. The parent's connection
keeps answering every request itself; for the methods that reach registrations (the lists,
``tools/call``, ``prompts/get``, ``resources/read``, subscriptions, ``completion/complete``,
``logging/setLevel``) its handler is wrapped (:meth:`Mounts.handler`) so that:

- a list is the parent's own entries followed by every mount's, renamed, paged as one list
  with the parent's page size (so a cursor of the parent walks all of them);
- a request naming a mounted entry (by its prefix) is renamed back and handed to that mount's
  provider *inside the parent's request*: same task, same cancel scope, same record. A cancel
  from the parent's client therefore cancels the child's handler (or, through a proxy, the
  upstream call: the upstream sees ``notifications/cancelled``); nothing runs outside the
  request that asked for it.

Two providers exist. A :class:`Server` child is served directly (:class:`ServerProvider`): its
own handlers run on a view of the parent's connection that shares its engine and lifecycle, so
the child's handler gets a ``Context`` of its own (its server, its registrations) whose
progress, logging, elicitation, sampling and roots go to the parent's client. A proxy
(``trio_mcp.proxy``) is a provider that forwards to an MCP client session.

Names: tools and prompts become ``{prefix}_{name}`` (the fastmcp convention); a resource or
template URI ``scheme://rest`` becomes ``scheme://{prefix}/rest`` (a URI without ``://`` becomes
``{prefix}/uri``). The URI keeps its scheme, so a client that dispatches on schemes still
can, and the prefix sits where a path segment would, which URI templates handle like any other
literal. The parent's own entries win over mounted ones; among mounts, the latest wins.

Liveness: nothing is copied at mount time. Lists are read from the child on every request, and
the child's list changes and resource updates reach the parent's clients (renamed) as they
happen, through a relay registered among the child's connections.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import Any, Protocol, runtime_checkable

import attrs
import trio

from .._engine import InFlight
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    JSONObject,
)
from ._connection import ServerConnection
from ._registry import Registrations, page


class Composable(Registrations, Protocol):
    """What may be mounted directly, and mount others: a :class:`~trio_mcp.Server`."""

    @property
    def connections(self) -> set[ServerConnection]: ...
    @property
    def mounts(self) -> Mounts: ...
    def hosting(self) -> AbstractAsyncContextManager[None]: ...


MethodHandler = Callable[[ServerConnection, InFlight], Awaitable[JSONObject]]

#: The list methods and the key of their items.
LISTS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
#: The lists a mounted server always offers (live: they may be empty now).
_LIVE = ("tools", "prompts", "resources")
#: What a mount may add to the parent's capabilities, at most.
FULL_CAPABILITIES: JSONObject = {
    "logging": {},
    "completions": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "tools": {"listChanged": True},
}


@runtime_checkable
class Provider(Protocol):
    """What a mount forwards to: a child server served directly, or a proxy's upstream.

    ``forward`` answers ``record`` (whose params are already renamed for the provider) for the
    parent's connection ``conn``, inside the parent's request.
    """

    #: How the provider is named in messages and logs.
    name: str

    def capabilities(self, conn: ServerConnection) -> JSONObject: ...

    async def prepare(self, conn: ServerConnection, record: InFlight) -> None: ...

    async def forward(self, conn: ServerConnection, record: InFlight) -> JSONObject: ...

    def attach(self, mount: Mount) -> None: ...

    def detach(self) -> None: ...


class Mount:
    """One provider mounted under a prefix (None: its names as they are), as
    :meth:`Server.mount <trio_mcp.Server.mount>` returns it (for ``unmount``)."""

    def __init__(self, provider: Provider, prefix: str | None, parent: Composable) -> None:
        self.provider = provider
        self.prefix = prefix
        #: The server it is mounted in (whose connections hear of its changes).
        self.parent = parent

    def __repr__(self) -> str:
        return f"<Mount of {self.provider.name!r} under {self.prefix!r}>"

    # -- names ---------------------------------------------------------------------------------

    def name(self, name: str) -> str:
        return name if self.prefix is None else f"{self.prefix}_{name}"

    def unname(self, name: str) -> str | None:
        """The provider's name for a parent's name, or None if it is not one of this mount's."""
        if self.prefix is None:
            return name
        head = self.prefix + "_"
        return name[len(head) :] if name.startswith(head) and len(name) > len(head) else None

    def uri(self, uri: str) -> str:
        if self.prefix is None:
            return uri
        scheme, sep, rest = uri.partition("://")
        return f"{scheme}://{self.prefix}/{rest}" if sep else f"{self.prefix}/{uri}"

    def unuri(self, uri: str) -> str | None:
        if self.prefix is None:
            return uri
        scheme, sep, rest = uri.partition("://")
        if sep:
            head = self.prefix + "/"
            return f"{scheme}://{rest[len(head) :]}" if rest.startswith(head) else None
        head = self.prefix + "/"
        return uri[len(head) :] if uri.startswith(head) else None

    def renamed(self, key: str, item: JSONObject) -> JSONObject:
        """A list item of the provider as the parent lists it."""
        if key in ("tools", "prompts") and isinstance(item.get("name"), str):
            return {**item, "name": self.name(item["name"])}
        if key == "resources" and isinstance(item.get("uri"), str):
            return {**item, "uri": self.uri(item["uri"])}
        if key == "resourceTemplates" and isinstance(item.get("uriTemplate"), str):
            return {**item, "uriTemplate": self.uri(item["uriTemplate"])}
        return item

    # -- what the provider tells the parent's clients -------------------------------------------

    def connections(self, conn: ServerConnection | None) -> list[ServerConnection]:
        return [conn] if conn is not None else list(self.parent.connections)

    def list_changed(self, kind: str, conn: ServerConnection | None = None) -> None:
        """The provider's ``kind`` list changed: for one connection of the parent, or all."""
        for connection in self.connections(conn):
            connection.send_list_changed(kind)

    def resource_updated(self, uri: str, conn: ServerConnection | None = None) -> None:
        for connection in self.connections(conn):
            connection.send_resource_updated(self.uri(uri))


class Mounts:
    """A server's mounts, in the order mounted."""

    def __init__(self) -> None:
        self.mounts: list[Mount] = []

    def __bool__(self) -> bool:
        return bool(self.mounts)

    def __iter__(self) -> Iterator[Mount]:
        return iter(self.mounts)

    def add(self, mount: Mount) -> None:
        self.mounts.append(mount)
        mount.provider.attach(mount)

    def remove(self, mount: Mount) -> None:
        self.mounts.remove(mount)
        mount.provider.detach()

    def capabilities(self, conn: ServerConnection, caps: JSONObject) -> None:
        """Add what the mounts offer to ``caps`` (the parent's own, changed in place)."""
        for mount in self.mounts:
            for key, value in mount.provider.capabilities(conn).items():
                if key in FULL_CAPABILITIES and isinstance(value, dict):
                    caps[key] = dict(FULL_CAPABILITIES[key])

    def by_handle(self, own: MethodHandler) -> MethodHandler:
        """``own`` (an extension's method addressing a handle, such as ``tasks/get``), made to
        ask the mounts, latest first, about a handle it does not know."""
        return _by_handle(self, own)

    @asynccontextmanager
    async def hosting(self) -> AsyncIterator[None]:
        """The mounted servers' services (a child's task nursery), for as long as the
        parent's run: a task created through the mount runs there."""
        async with AsyncExitStack() as stack:
            for mount in self.mounts:
                hosting = getattr(mount.provider, "hosting", None)
                if hosting is not None:
                    await stack.enter_async_context(hosting())
            yield

    def handler(self, method: str, own: MethodHandler, server: Registrations) -> MethodHandler:
        """``own`` (the parent's handler of ``method``), made to answer for the mounts too."""
        if method in LISTS:
            return _merged_list(self, own, LISTS[method])
        if method in ("tools/call", "prompts/get"):
            return _by_name(self, own)
        if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
            return _by_uri(self, own, method)
        if method == "completion/complete":
            # Offered by a mount though perhaps not by the parent, which then has no handler.
            return _completion(self, own if server.completion_handler is not None else None)
        if method in ("initialize", "server/discover"):
            return _preparing(self, own)
        if method == "logging/setLevel":
            return _everywhere(self, own)
        if method == "subscriptions/listen" and self.mounts:
            return _listening(self, own)
        return own


@contextmanager
def renamed(record: InFlight, params: JSONObject) -> Iterator[None]:
    """``record`` carrying ``params`` for as long as the provider handles it (the engine and
    the parent's instrumentation see the parent's own request again afterwards)."""
    original = record.request
    record.request = attrs.evolve(original, params=params)
    try:
        yield
    finally:
        record.request = original


async def forward(
    mount: Mount, conn: ServerConnection, record: InFlight, params: JSONObject
) -> JSONObject:
    with renamed(record, params):
        return await mount.provider.forward(conn, record)


def _meta_of(record: InFlight) -> JSONObject:
    meta = record.params.get("_meta")
    return {"_meta": meta} if isinstance(meta, dict) else {}


async def _all_items(
    handler: Callable[[InFlight], Awaitable[JSONObject]], record: InFlight, key: str
) -> list[JSONObject]:
    """Every item of a list, page after page (the request's ``_meta`` kept on each)."""
    items: list[JSONObject] = []
    cursor: Any = None
    meta = _meta_of(record)
    for _ in range(10_000):  # a bound: a provider whose cursors never end cannot hang us
        params: JSONObject = dict(meta)
        if cursor is not None:
            params["cursor"] = cursor
        with renamed(record, params):
            result = await handler(record)
        got = result.get(key)
        if isinstance(got, list):
            items.extend(item for item in got if isinstance(item, dict))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return items
    raise ProtocolError(INVALID_PARAMS, f"Invalid params: the {key} list does not end")


def _asking(mount: Mount, conn: ServerConnection) -> Callable[[InFlight], Awaitable[JSONObject]]:
    return lambda record: mount.provider.forward(conn, record)


def _merged_list(mounts: Mounts, own: MethodHandler, key: str) -> MethodHandler:
    async def listed(conn: ServerConnection, record: InFlight) -> JSONObject:
        cursor = record.params.get("cursor")
        items = await _all_items(lambda r: own(conn, r), record, key)
        for mount in mounts:
            if key not in _LIST_NEEDS or _LIST_NEEDS[key] in mount.provider.capabilities(conn):
                provided = await _all_items(_asking(mount, conn), record, key)
                items.extend(mount.renamed(key, item) for item in provided)
        try:
            chunk, next_cursor = page(items, cursor, conn.server.page_size)
        except ValueError:
            raise ProtocolError(INVALID_PARAMS, "Invalid params: invalid cursor") from None
        result: JSONObject = {key: chunk}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return result

    return listed


#: The capability a provider's list needs (a provider without it is not asked).
_LIST_NEEDS = {
    "tools": "tools",
    "prompts": "prompts",
    "resources": "resources",
    "resourceTemplates": "resources",
}


def _own_name(conn: ServerConnection, method: str, name: str) -> bool:
    registry = conn.server.tools if method == "tools/call" else conn.server.prompts
    return name in registry


def _own_uri(conn: ServerConnection, uri: str) -> bool:
    server = conn.server
    return uri in server.resources or any(
        t.match(uri) is not None for t in server.templates.values()
    )


async def _candidates(
    mounts: Mounts,
    conn: ServerConnection,
    record: InFlight,
    kind: str,
    match: Callable[[Mount], str | None],
) -> tuple[Mount, str] | None:
    """The mount a name (or URI) belongs to, latest mounted first. Only when several mounts'
    prefixes match is any asked for its list; without a list that holds it, the latest wins."""
    found = [(m, n) for m in reversed(mounts.mounts) if (n := match(m)) is not None]
    if len(found) <= 1:
        return found[0] if found else None
    method, key, field = {
        "tools": ("tools/list", "tools", "name"),
        "prompts": ("prompts/list", "prompts", "name"),
    }.get(kind, ("resources/list", "resources", "uri"))
    for mount, name in found[:-1]:
        listing = _listing(record, method)
        items = await _all_items(_asking(mount, conn), listing, key)
        if any(item.get(field) == name for item in items):
            return mount, name
    return found[-1]


def _listing(record: InFlight, method: str) -> InFlight:
    """A record like ``record`` (its scope, session, principal, envelope) for a list request."""
    return InFlight(
        request=attrs.evolve(record.request, method=method, params=_meta_of(record)),
        session=record.session,
        scope=record.scope,
        envelope=record.envelope,
        principal=record.principal,
    )


def _by_name(mounts: Mounts, own: MethodHandler) -> MethodHandler:
    async def named(conn: ServerConnection, record: InFlight) -> JSONObject:
        method = record.method
        name = record.params.get("name")
        if not isinstance(name, str) or _own_name(conn, method, name):
            return await own(conn, record)
        kind = "tools" if method == "tools/call" else "prompts"
        found = await _candidates(mounts, conn, record, kind, lambda m: m.unname(name))
        if found is None:
            return await own(conn, record)  # answers "Unknown tool" (or prompt)
        mount, inner = found
        if inner == name:  # a mount without a prefix: the request goes as it came
            return await mount.provider.forward(conn, record)
        return await forward(mount, conn, record, {**record.params, "name": inner})

    return named


def _by_uri(mounts: Mounts, own: MethodHandler, method: str) -> MethodHandler:
    async def addressed(conn: ServerConnection, record: InFlight) -> JSONObject:
        uri = record.params.get("uri")
        if not isinstance(uri, str) or _own_uri(conn, uri):
            return await own(conn, record)
        found = await _candidates(mounts, conn, record, "resources", lambda m: m.unuri(uri))
        if found is None:
            return await own(conn, record)  # answers "Resource not found" (subscribe: stored)
        mount, inner = found
        result = await forward(mount, conn, record, {**record.params, "uri": inner})
        if method != "resources/read":
            # Once the provider agreed (its scopes, say): the parent's connection holds the
            # subscription under the parent's URI, which the relay and the proxy deliver
            # updates against.
            await own(conn, record)
            return result
        contents = result.get("contents")
        if method == "resources/read" and isinstance(contents, list):
            # The contents name what the client asked for: the parent's URI.
            result = {**result, "contents": [_content_uri(mount, c) for c in contents]}
        return result

    return addressed


def _content_uri(mount: Mount, content: Any) -> Any:
    if isinstance(content, dict) and isinstance(content.get("uri"), str):
        return {**content, "uri": mount.uri(content["uri"])}
    return content


#: The errors by which a provider says it does not know a handle (or the method at all).
_UNKNOWN_HANDLE = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY})


def _by_handle(mounts: Mounts, own: MethodHandler) -> MethodHandler:
    """The parent's answer if it knows the handle; else the first mount's that does (its
    principal is the request's, so a mount never shows one principal another's task); else
    the parent's own "unknown" error."""

    async def handled(conn: ServerConnection, record: InFlight) -> JSONObject:
        try:
            return await own(conn, record)
        except ProtocolError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            unknown = exc.error
        for mount in reversed(mounts.mounts):
            try:
                return await forward(mount, conn, record, dict(record.params))
            except ProtocolError as exc:
                if exc.code not in _UNKNOWN_HANDLE:
                    raise
        raise ProtocolError.from_error(unknown)

    return handled


def _completion(mounts: Mounts, own: MethodHandler | None) -> MethodHandler:
    async def complete(conn: ServerConnection, record: InFlight) -> JSONObject:
        ref = record.params.get("ref")
        found: tuple[Mount, str] | None = None
        field = "name"
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt":
            name = ref.get("name")
            if isinstance(name, str) and name not in conn.server.prompts:
                found = await _candidates(mounts, conn, record, "prompts", lambda m: m.unname(name))
        elif isinstance(ref, dict) and ref.get("type") == "ref/resource":
            uri, field = ref.get("uri"), "uri"
            if (
                isinstance(uri, str)
                and uri not in conn.server.templates
                and not _own_uri(conn, uri)
            ):
                found = await _candidates(mounts, conn, record, "templates", lambda m: m.unuri(uri))
        if found is not None and isinstance(ref, dict):
            mount, inner = found
            params = {**record.params, "ref": {**ref, field: inner}}
            return await forward(mount, conn, record, params)
        if own is None:
            return {"completion": {"values": [], "total": 0, "hasMore": False}}
        return await own(conn, record)

    return complete


def _preparing(mounts: Mounts, own: MethodHandler) -> MethodHandler:
    """``initialize`` and ``server/discover``: the providers get ready first (a proxy connects
    its upstream), so the capabilities announced are what they really offer."""

    async def prepared(conn: ServerConnection, record: InFlight) -> JSONObject:
        for mount in mounts:
            await mount.provider.prepare(conn, record)
        return await own(conn, record)

    return prepared


def _unuri(uri: str) -> Callable[[Mount], str | None]:
    return lambda mount: mount.unuri(uri)


def _listening(mounts: Mounts, own: MethodHandler) -> MethodHandler:
    """``subscriptions/listen`` (modern): the providers get ready (a proxy's upstream then
    tells this connection of its list changes), and are subscribed to the mounted URIs the
    listen asks for, before the parent's own handler acknowledges and listens."""

    async def listening(conn: ServerConnection, record: InFlight) -> JSONObject:
        for mount in mounts:
            await mount.provider.prepare(conn, record)
        wanted = record.params.get("notifications")
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        for uri in uris if isinstance(uris, list) else ():
            if isinstance(uri, str) and not _own_uri(conn, uri):
                found = await _candidates(mounts, conn, record, "resources", _unuri(uri))
                if found is not None:
                    mount, inner = found
                    subscribe = _listing(record, "resources/subscribe")
                    params = {**_meta_of(record), "uri": inner}
                    subscribe.request = attrs.evolve(subscribe.request, params=params)
                    await mount.provider.forward(conn, subscribe)
        return await own(conn, record)

    return listening


def _everywhere(mounts: Mounts, own: MethodHandler) -> MethodHandler:
    """``logging/setLevel``: for the parent and every provider that logs."""

    async def everywhere(conn: ServerConnection, record: InFlight) -> JSONObject:
        result = await own(conn, record)
        for mount in mounts:
            if "logging" in mount.provider.capabilities(conn):
                await forward(mount, conn, record, dict(record.params))
        return result

    return everywhere


# -- a child Server, served directly ------------------------------------------------------------


class ServerProvider:
    """A child :class:`Server`, answering on views of the parent's connections.

    A view is a ``ServerConnection`` of the child that shares the parent connection's engine,
    lifecycle state, principal and subscriptions, so that the child's own handlers (with their
    authorization, instrumentation and ``Context``) run as they would on a connection of their
    own, and everything they send goes to the parent's client.
    """

    def __init__(self, child: Composable) -> None:
        self.child = child
        self.name = child.info.name
        self._views: weakref.WeakKeyDictionary[ServerConnection, ServerConnection] = (
            weakref.WeakKeyDictionary()
        )
        self._relay: _Relay | None = None
        self.mount: Mount | None = None

    def view(self, conn: ServerConnection) -> ServerConnection:
        view = self._views.get(conn)
        if view is None:
            view = self._views[conn] = _View(self.child, self, conn)
        return view

    def capabilities(self, conn: ServerConnection) -> JSONObject:
        """The child's, and its lists in any case: they may gain entries at any time, and a
        client that was never told of a capability would not hear of their changes."""
        caps = self.view(conn).capabilities()
        for kind in _LIVE:
            caps[kind] = dict(FULL_CAPABILITIES[kind])
        return caps

    async def prepare(self, conn: ServerConnection, record: InFlight) -> None:
        view = self.view(conn)
        for mount in self.child.mounts:
            await mount.provider.prepare(view, record)

    async def forward(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        view = self.view(conn)
        method = record.method
        subscription = method in ("resources/subscribe", "resources/unsubscribe")
        if subscription and not self.child.mounts:
            if self.child.auth is not None:
                view.authorize(record)  # hearing of a resource needs its scopes
            await trio.lowlevel.checkpoint()
            return {}  # the parent's connection holds it; the relay delivers against it
        if method in LISTS and _LIST_NEEDS[LISTS[method]] not in view.capabilities():
            await trio.lowlevel.checkpoint()
            return {LISTS[method]: []}  # none yet (the child would refuse the method)
        return await view.handle(record)

    def hosting(self) -> AbstractAsyncContextManager[None]:
        """The child's services (its extensions', its own mounts'), while the parent runs."""
        return self.child.hosting()

    def attach(self, mount: Mount) -> None:
        if self._relay is not None:
            raise ValueError(f"the server {self.name!r} is already mounted")
        self.mount = mount
        self._relay = _Relay(self.child, mount)
        self.child.connections.add(self._relay)

    def detach(self) -> None:
        if self._relay is not None:
            self.child.connections.discard(self._relay)
            self._relay = None
        self.mount = None


class _View(ServerConnection):
    """The child's side of one parent connection. What is sent to it for that connection
    alone (by a proxy mounted in the child, say) reaches the parent's, renamed."""

    def __init__(self, child: Composable, provider: ServerProvider, conn: ServerConnection):
        super().__init__(child)
        self.share(conn)
        self._provider = provider
        self._parent = weakref.ref(conn)

    def send_list_changed(self, kind: str) -> None:
        mount, conn = self._provider.mount, self._parent()
        if mount is not None and conn is not None:
            mount.list_changed(kind, conn)

    def send_resource_updated(self, uri: str) -> None:
        mount, conn = self._provider.mount, self._parent()
        if mount is not None and conn is not None:
            mount.resource_updated(uri, conn)


class _Relay(ServerConnection):
    """Among the child's connections: what the child tells its clients, to the parent's."""

    def __init__(self, child: Composable, mount: Mount) -> None:
        super().__init__(child)
        self.mount = mount

    def send_list_changed(self, kind: str) -> None:
        self.mount.list_changed(kind)

    def send_resource_updated(self, uri: str) -> None:
        self.mount.resource_updated(uri)

    def send_watched(self, extension: str, item: str, method: str, params: JSONObject) -> None:
        pass  # what an extension's listeners watch stays with the server that holds it
