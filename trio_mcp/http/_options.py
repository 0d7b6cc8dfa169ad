"""The settings of the HTTP app (:meth:`Server.http_app`): Streamable HTTP's own at the top,
the rest grouped by concern (:class:`Limits`, :class:`HostRules`, :class:`ScaleOut`,
:class:`LegacySse`, :class:`WebSocketOptions`), each group a frozen value.

The flat keywords of earlier releases (``HttpOptions(max_sessions=5)``) still work for one
release, with a DeprecationWarning naming the new spelling; so does reading them
(``options.max_sessions``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ._event_store import EventStore
from ._limit_store import LimitStore
from ._node_tags import check_node_id
from ._relay import Relay
from ._session_store import SessionStore


def _valid_node_id(_options: object, _field: object, node_id: str | None) -> None:
    if node_id is not None:
        check_node_id(node_id)


def _positive_rate(_limit: object, _field: object, rate: float) -> None:
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"a rate limit needs a rate above 0 (requests a second), not {rate!r}")


def _positive_burst(_limit: object, _field: object, burst: int) -> None:
    if burst < 1:
        raise ValueError(f"a rate limit needs a burst of at least 1, not {burst!r}")


@attrs.frozen
class RateLimit:
    """A token bucket: ``burst`` requests at once, then ``rate`` more a second on average.
    ``burst`` defaults to one second's worth (at least 1)."""

    rate: float = attrs.field(validator=_positive_rate)
    burst: int = attrs.field(
        default=attrs.Factory(lambda self: max(1, math.ceil(self.rate)), takes_self=True),
        validator=_positive_burst,
    )


@attrs.frozen
class Limits:
    """What the app holds at most, and for how long: sessions, requests, buffered events.

    Every buffer has a bound; past one, a client gets a clear refusal (413, 429, 503) or its
    connection is ended to resume later, and nothing else stops.
    """

    #: Sessions of the app at once, over every transport (opening ones count); beyond it, 503.
    max_sessions: int = 10_000
    #: Sessions one client may hold at once, over every transport (opening ones count);
    #: beyond it, 429.
    max_sessions_per_client: int = 100
    #: Who a request comes from, for ``max_sessions_per_client`` (counted over Streamable
    #: HTTP, HTTP+SSE and WebSocket together): called ``(scope, principal)``, the principal
    #: None for a request that is not authenticated (a hook of one argument gets the scope
    #: alone, as before). None: the principal's identity when there is one, else
    #: :func:`client_address` (with ``HostRules.client_address_header``). A key may be
    #: anything a client cannot choose freely.
    client_key: Callable[..., str] | None = None
    #: A session of any transport (Streamable HTTP, HTTP+SSE, WebSocket) with no request in
    #: flight and no stream open of its own ends this long after its last use: an HTTP+SSE
    #: session's stream ends, a socket is closed with 1001.
    session_idle_timeout: float = 1800.0
    #: A session that has carried no request (nor GET stream) since it was opened (by its
    #: ``initialize``, its HTTP+SSE stream or its socket) expires this long after it was
    #: opened, whatever ``session_idle_timeout`` says.
    unused_session_timeout: float = 60.0
    #: The largest request body; a larger one is refused with 413.
    max_body_bytes: int = 4 * 1024 * 1024
    #: Requests of one session running at once; one more gets 429 with ``Retry-After``
    #: (across the session's copies on every worker with ``ScaleOut(share_request_limits=True)``).
    max_requests_per_session: int = 256
    #: Modern-era requests (2026-07-28, no session) of one client (``client_key``) running at
    #: once; one more gets 429 with ``Retry-After`` (in this process; across the fleet with
    #: ``ScaleOut(share_request_limits=True)``).
    max_requests_per_client: int = 256
    #: Requests a client (``client_key``) may make: a token bucket, over both eras
    #: (``initialize``, ``ping`` and ``server/discover`` aside). Past it, 429 with
    #: ``Retry-After`` and the JSON-RPC error -32000 with ``data: {"retryAfterMs": ...}``.
    #: Counted in ``ScaleOut.limit_store``: across the fleet when it is shared. None: no limit.
    rate_limit: RateLimit | None = None
    #: The same for each tool a client calls (``tools/call``), one bucket per client and tool.
    tool_rate_limit: RateLimit | None = None
    #: Events handed to one SSE connection and not yet written to it (a client that does not
    #: read): past either bound the connection is ended, and its client resumes with
    #: ``Last-Event-ID``.
    max_pending_events: int = 1024
    max_pending_bytes: int = 8 * 1024 * 1024
    #: Events kept for a session's next GET while none is open (list changes, server requests),
    #: the oldest dropped first.
    max_backlog_events: int = 256
    max_backlog_bytes: int = 1024 * 1024
    #: All of those together, over every session and connection of the app.
    max_buffered_bytes: int = 64 * 1024 * 1024


@attrs.frozen
class HostRules:
    """Who may reach the app: the Host and Origin headers it accepts, CORS, and where a
    trusted proxy puts the client's address."""

    #: Host header values accepted (``host`` or ``host:port``); None: loopback names for a
    #: request that arrived on a loopback address (127.0.0.1, or a 0.0.0.0 bind reached through
    #: loopback, as from a proxy on the same host), anything for one that arrived on another.
    allowed_hosts: list[str] | None = None
    #: Origin header values accepted; None: loopback origins on loopback, as for the Host.
    allowed_origins: list[str] | None = None
    #: Origins allowed by CORS (``["*"]`` for any); None disables CORS headers.
    cors_origins: list[str] | None = None
    #: The header a trusted reverse proxy puts the client's address in (``x-forwarded-for``,
    #: ``x-real-ip``); its last value is the one taken. None: the peer address of the
    #: connection, which behind a proxy is the proxy's. Set it only when every request comes
    #: through that proxy, or a client can name itself anything.
    client_address_header: str | None = None


@attrs.frozen
class ScaleOut:
    """What lets several workers (or one across restarts) serve the same sessions and streams:
    the stores they share, the relay between them, and this node's routing tag.

    With none of the stores or the relay, the app is a single process and loads none of the
    code that serves another worker's sessions (``trio_mcp.scaleout``).
    """

    #: Where stream events are kept for a resume (None: a :class:`MemoryEventStore` of this
    #: app's own); a store shared by several workers (``RedisEventStore``) lets any of them
    #: serve a resume.
    event_store: EventStore | None = None
    #: Where handshake-era session records are kept (None: nowhere, and a session lives only
    #: on the worker that opened it); a store shared by several workers
    #: (``RedisSessionStore``) lets any of them serve any request of any session. A record
    #: expires ``Limits.session_idle_timeout`` after the session's last use on any worker.
    #: It needs a ``node_id``.
    session_store: SessionStore | None = None
    #: With a session store, what carries the few messages of a session that belong to
    #: another worker's copy of it (a client's response to that copy's request, a cancel of a
    #: request running there, the end of the session): ``RedisRelay`` across processes. None:
    #: they are not carried (such a response finds no request waiting, such a cancel no
    #: request; other copies end when they next see the record gone, or idle).
    relay: Relay | None = None
    #: Where the limits of clients are counted beyond this process (``RedisLimitStore``):
    #: ``Limits.max_sessions_per_client`` across the fleet, and the rate limits' buckets.
    #: None: in this process only.
    limit_store: LimitStore | None = None
    #: With a ``limit_store``: count requests in it too, so that ``max_requests_per_session``
    #: holds across a session's copies and ``max_requests_per_client`` across the fleet; two
    #: more round trips to the store per request.
    share_request_limits: bool = False
    #: This node's routing tag (letters, digits, ``-``): session ids become ``NODE.<hex>``, so
    #: a load balancer can route a session's requests to the node that holds it (an nginx
    #: ``map`` on ``Mcp-Session-Id``, see ``deploy/nginx.conf``); an id tagged for another node
    #: is an unknown session here (404). None: plain hex ids.
    node_id: str | None = attrs.field(default=None, validator=_valid_node_id)
    #: The writer's queue to the store: past either bound (the store too slow) a stream loses
    #: its resumability, logged, and its live connection goes on; a write that takes longer
    #: than ``event_store_timeout`` fails the same way.
    max_store_queue_events: int = 4096
    max_store_queue_bytes: int = 32 * 1024 * 1024
    event_store_timeout: float = 5.0
    #: How long the writer gathers writes before it makes them (its window): a request's
    #: stream delivered whole within it (most are) is never written, nor deleted; a worker
    #: killed outright loses, for a resume elsewhere, at most its last window of events.
    event_store_coalesce: float = 0.02
    #: How often a resume served from the shared store, for a session that lives on another
    #: worker, looks for the stream's new events.
    resume_poll_interval: float = 0.25
    #: With a session store and a relay: how long a worker serves a session's requests from the
    #: record it last read, without reading it again (at most a third of
    #: ``Limits.session_idle_timeout``, so that use keeps the record alive). A change (log
    #: level, subscriptions, the GET stream's holder) or the end of a session is answered only
    #: once every worker the relay reached has dropped its copy's reading, or once this long
    #: has passed: the client's next request sees it wherever it lands. A reading stands only
    #: while the relay could have missed nothing since (``Relay.hearing``). 0: the record is
    #: read before every request (a round trip to the store each). Without a relay it always
    #: is.
    record_cache: float = 1.0


@attrs.frozen
class LegacySse:
    """The 2024-11-05 HTTP+SSE transport, beside Streamable HTTP: ``GET path`` opens a session
    (its first event names the URL to POST to), ``POST messages_path`` carries its messages."""

    path: str = "/sse"
    messages_path: str = "/messages/"


@attrs.frozen
class WebSocketOptions:
    """The WebSocket endpoint (``ws://host:port/ws``, subprotocol ``mcp``)."""

    path: str = "/ws"
    #: The largest message a client may send; a larger one closes its socket (1009).
    max_message_bytes: int = 4 * 1024 * 1024
    #: How often the server sends each client a ``ping`` request; one not answered within the
    #: same time closes its socket (1011) and cancels its work. None: never.
    ping_interval: float | None = None


#: The flat keywords of earlier releases: name -> (its group, its name there).
_MOVED: dict[str, tuple[str, str]] = {
    **{name: ("limits", name) for name in attrs.fields_dict(Limits)},
    **{name: ("hosts", name) for name in attrs.fields_dict(HostRules)},
    **{name: ("scale_out", name) for name in attrs.fields_dict(ScaleOut)},
    "sse_path": ("legacy_sse", "path"),
    "sse_messages_path": ("legacy_sse", "messages_path"),
    "ws_path": ("websocket", "path"),
    "ws_max_message_bytes": ("websocket", "max_message_bytes"),
    "ws_ping_interval": ("websocket", "ping_interval"),
}
_GROUPS = {
    "limits": Limits,
    "hosts": HostRules,
    "scale_out": ScaleOut,
    "legacy_sse": LegacySse,
    "websocket": WebSocketOptions,
}


def _new_spelling(name: str, value: Any) -> str:
    group, field = _MOVED[name]
    if field == "path" and value is None:
        return f"{group}=None"
    return f"{group}={_GROUPS[group].__name__}({field}={value!r})"


@attrs.define
class HttpOptions:
    """Settings of the Streamable HTTP endpoint (see :meth:`Server.http_app`), the other
    endpoints the app serves beside it, and the groups of settings they share."""

    path: str = "/mcp"
    json_response: bool = False
    stateless: bool = False
    keepalive_interval: float = 15.0
    retry_ms: int = 1000
    shutdown_grace: float = 5.0
    #: Where a load balancer or an orchestrator asks whether to send traffic here: ``GET`` is
    #: 200 while serving, 503 before the lifespan started, once draining, and while a store,
    #: the bus or the relay the app was given does not answer (a Redis gone). None: no such
    #: path.
    ready_path: str | None = "/ready"
    #: How long :meth:`McpHttpApp.drain` (SIGTERM or SIGINT under ``serve_http``) lets requests
    #: in flight finish before it ends them with a JSON-RPC error telling the client to retry.
    drain_grace: float = 10.0
    #: Sessions, requests and buffers: how many, how large, how long.
    limits: Limits = Limits()
    #: The Host and Origin headers accepted, CORS, the client's address behind a proxy.
    hosts: HostRules = HostRules()
    #: The stores and the relay several workers share, and this node's routing tag.
    scale_out: ScaleOut = ScaleOut()
    #: The 2024-11-05 HTTP+SSE endpoints; None: not served.
    legacy_sse: LegacySse | None = LegacySse()
    #: The WebSocket endpoint; None: none (every upgrade is refused).
    websocket: WebSocketOptions | None = WebSocketOptions()
    #: How long the readiness path waits for each store's answer before it counts the store
    #: unavailable (so a Redis that hangs never hangs the probe).
    ready_timeout: float = 2.0
    #: Where an orchestrator asks whether the process lives: ``GET`` is 200 for as long as it
    #: answers at all (draining, or with its Redis gone, too): restart it only when this fails.
    #: None: no such path.
    live_path: str | None = "/live"
    #: Once the app has started, collect the garbage and freeze what is left (``gc.freeze``),
    #: once per process: the cyclic collector's full collections, which pause the process,
    #: then walk what was made since the start, not every object of the imports.
    freeze_heap: bool = True

    if TYPE_CHECKING:

        def __init__(
            self,
            path: str = "/mcp",
            json_response: bool = False,
            stateless: bool = False,
            keepalive_interval: float = 15.0,
            retry_ms: int = 1000,
            shutdown_grace: float = 5.0,
            ready_path: str | None = "/ready",
            drain_grace: float = 10.0,
            limits: Limits = Limits(),
            hosts: HostRules = HostRules(),
            scale_out: ScaleOut = ScaleOut(),
            legacy_sse: LegacySse | None = LegacySse(),
            websocket: WebSocketOptions | None = WebSocketOptions(),
            ready_timeout: float = 2.0,
            live_path: str | None = "/live",
            freeze_heap: bool = True,
        ) -> None: ...

    else:

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # The flat keywords of earlier releases, each into its group (with a warning).
            for name in [name for name in kwargs if name in _MOVED]:
                value = kwargs.pop(name)
                group, field = _MOVED[name]
                warnings.warn(
                    f"HttpOptions({name}=...) is deprecated: write HttpOptions("
                    f"{_new_spelling(name, value)})",
                    DeprecationWarning,
                    stacklevel=2,
                )
                if field == "path" and value is None:  # sse_path=None, ws_path=None: not served
                    kwargs[group] = None
                    continue
                current = kwargs[group] if group in kwargs else _GROUPS[group]()
                if current is not None:  # else not served: its settings change nothing
                    kwargs[group] = attrs.evolve(current, **{field: value})
            try:
                self.__attrs_init__(*args, **kwargs)
            except TypeError as error:
                said = str(error).replace("__attrs_init__", "__init__")
                raise TypeError(
                    f"{said}; HttpOptions takes {', '.join(attrs.fields_dict(HttpOptions))} "
                    "(the others are in Limits, HostRules, ScaleOut, LegacySse and "
                    "WebSocketOptions)"
                ) from None

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            if name not in _MOVED:
                raise AttributeError(f"'HttpOptions' object has no attribute {name!r}")
            group, field = _MOVED[name]
            warnings.warn(
                f"HttpOptions.{name} is deprecated: read HttpOptions.{group}.{field}",
                DeprecationWarning,
                stacklevel=2,
            )
            value = getattr(self, group)
            return None if value is None else getattr(value, field)
