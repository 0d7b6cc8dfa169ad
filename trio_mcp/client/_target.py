"""What :func:`~trio_mcp.open_client` connects to, each kind with its own settings.

As in httpx, a transport's settings live with the transport: a child process carries its
environment and its stop timeouts (:class:`Command`), an HTTP URL its headers and its
authorization (:class:`HttpTarget`), a WebSocket URL its upgrade headers
(:class:`WebSocketTarget`); ``open_client`` itself takes only what every connection has (modes,
callbacks, timeouts of requests). A plain string or list is still a target with default
settings. The client knows no server class: an in-memory target is anything that can serve a
connection over a transport, which a :class:`~trio_mcp.Server` does.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, TypedDict, runtime_checkable

import attrs

from ..protocol._framing import DEFAULT_MAX_LINE_BYTES
from ..transports._stdio import StderrTarget
from ..transports._transport import Transport
from ..transports._ws_client import is_ws_url

if TYPE_CHECKING:
    import httpx


@runtime_checkable
class Servable(Protocol):
    """Serves one connection on ``transport`` until the peer goes away."""

    async def serve_transport(self, transport: Transport, /) -> None: ...


def _is_http_url(value: object) -> bool:
    return isinstance(value, str) and value.lower().startswith(("http://", "https://"))


def _argv(value: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    argv = tuple(value)
    if not argv or not all(isinstance(arg, str) for arg in argv):
        raise TypeError(f"a command is a program, or a list of strings, not {value!r}")
    return argv


@attrs.frozen(eq=False)
class Command:
    """A child process, spoken to over stdio.

    ``argv`` is the program and its arguments, or a program alone as a string (never split on
    spaces). ``env`` adds to (and overrides) this process's environment; ``stderr`` is
    ``"inherit"``, ``"discard"``, a path or file, or a callable given each line; a line longer
    than ``max_line_bytes`` ends the connection. On exit the child's stdin is closed, then it is
    sent SIGTERM after ``close_timeout``, then SIGKILL after ``terminate_timeout``; its process
    group goes with it (and, on Linux, descendants that left the group).
    """

    argv: tuple[str, ...] = attrs.field(converter=_argv)
    env: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)
    cwd: str | Path | None = attrs.field(default=None, kw_only=True)
    stderr: StderrTarget = attrs.field(default="inherit", kw_only=True)
    max_line_bytes: int = attrs.field(default=DEFAULT_MAX_LINE_BYTES, kw_only=True)
    close_timeout: float = attrs.field(default=2.0, kw_only=True)
    terminate_timeout: float = attrs.field(default=2.0, kw_only=True)

    def __str__(self) -> str:
        return " ".join(self.argv)


#: ``HttpTarget(transport=...)``: None detects (Streamable HTTP, falling back to HTTP+SSE when
#: the server answers as a 2024-11-05 one), or either of them alone.
HttpTransportName: TypeAlias = Literal["streamable-http", "sse"]
HTTP_TRANSPORTS = (None, "streamable-http", "sse")


def _check_http_url(instance: object, attribute: object, url: str) -> None:
    if is_ws_url(url):
        raise ValueError(f"{url!r} is a WebSocket URL: connect with WebSocketTarget({url!r})")
    if not _is_http_url(url):
        raise ValueError(f"an HttpTarget needs an http:// or https:// URL, not {url!r}")


def _check_transport(instance: object, attribute: object, value: object) -> None:
    if value not in HTTP_TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(map(str, HTTP_TRANSPORTS))}")


@attrs.frozen(eq=False)
class HttpTarget:
    """An ``http://`` or ``https://`` MCP endpoint: Streamable HTTP, or HTTP+SSE.

    ``headers`` are sent with every HTTP request; ``auth`` authorizes every request
    (:class:`~trio_mcp.client.OAuth` runs the MCP authorization flow); ``http_client`` is an
    ``httpx.AsyncClient`` to reuse, left open. A server that answers the ``initialize`` POST as
    a 2024-11-05 one does (HTTP 400, 404 or 405) is reached over the HTTP+SSE transport instead;
    ``transport="sse"`` goes there at once (the URL of its event stream, say
    ``http://host/sse``), ``"streamable-http"`` never. On exit the session is ended with a
    DELETE bounded by ``close_timeout``.
    """

    url: str = attrs.field(validator=_check_http_url)
    headers: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)
    auth: httpx.Auth | None = attrs.field(default=None, kw_only=True)
    http_client: httpx.AsyncClient | None = attrs.field(default=None, kw_only=True)
    transport: HttpTransportName | None = attrs.field(
        default=None, kw_only=True, validator=_check_transport
    )
    close_timeout: float = attrs.field(default=2.0, kw_only=True)

    def __str__(self) -> str:
        return self.url


def _check_ws_url(instance: object, attribute: object, url: str) -> None:
    if not is_ws_url(url):
        raise ValueError(f"a WebSocketTarget needs a ws:// or wss:// URL, not {url!r}")


@attrs.frozen(eq=False)
class WebSocketTarget:
    """A ``ws://`` or ``wss://`` MCP endpoint (subprotocol ``mcp``; needs the ``websocket``
    extra). ``headers`` go on the upgrade request (an ``Authorization`` header, say); the
    closing handshake is bounded by ``close_timeout``."""

    url: str = attrs.field(validator=_check_ws_url)
    headers: Mapping[str, str] | None = attrs.field(default=None, kw_only=True)
    close_timeout: float = attrs.field(default=2.0, kw_only=True)

    def __str__(self) -> str:
        return self.url


#: What ``open_client`` connects to: a servable (served in memory), a :class:`Command`, an
#: :class:`HttpTarget` or :class:`WebSocketTarget`, a transport, or the short forms: an
#: ``http(s)://`` or ``ws(s)://`` URL, a program alone, or a list of the program and its
#: arguments (each a target with default settings).
Target: TypeAlias = (
    Servable | Command | HttpTarget | WebSocketTarget | Transport | str | Sequence[str]
)
#: A target once its short form is read.
Resolved: TypeAlias = Servable | Command | HttpTarget | WebSocketTarget | Transport


class MovedOptions(TypedDict, total=False):
    """``open_client``'s keywords that moved to a target (deprecated there)."""

    env: Mapping[str, str] | None
    cwd: str | Path | None
    stderr: StderrTarget
    max_line_bytes: int
    close_timeout: float
    terminate_timeout: float
    headers: Mapping[str, str] | None
    http_client: httpx.AsyncClient | None
    auth: httpx.Auth | None
    transport: HttpTransportName | None


PROCESS_OPTIONS = ("env", "cwd", "stderr", "max_line_bytes", "terminate_timeout")
HTTP_OPTIONS = ("http_client", "auth", "transport")

#: Where each moved keyword lives now, as the error for a misplaced one says it.
HOMES = {
    **{k: f"a child process: open_client(Command(..., {k}=...))" for k in PROCESS_OPTIONS},
    **{k: f"an HTTP target: open_client(HttpTarget(url, {k}=...))" for k in HTTP_OPTIONS},
    "headers": (
        "an HTTP or WebSocket target: open_client(HttpTarget(url, headers=...)) or "
        "open_client(WebSocketTarget(url, headers=...))"
    ),
    "close_timeout": (
        "the target: open_client(Command(..., close_timeout=...)), "
        "open_client(HttpTarget(url, close_timeout=...)) or "
        "open_client(WebSocketTarget(url, close_timeout=...))"
    ),
}


def misplaced(key: str) -> TypeError:
    return TypeError(f"{key}= is an option of {HOMES[key]}")


def _is_command(target: object) -> bool:
    return isinstance(target, str) or (
        isinstance(target, Sequence) and bool(target) and all(isinstance(a, str) for a in target)
    )


def resolve_target(target: Target, moved: Mapping[str, Any], *, stacklevel: int = 2) -> Resolved:
    """The target ``open_client`` connects to, its short form read.

    ``moved`` holds the keywords that once were ``open_client``'s: with a short form they still
    build its target (with a ``DeprecationWarning`` naming the new spelling); with anything else,
    or where they do not belong, they are a ``TypeError`` naming where they do. One given as
    None where it does not belong was ignored before, and still is, with a warning.
    """
    unknown = sorted(moved.keys() - HOMES.keys())
    if unknown:
        raise TypeError(f"open_client() got an unexpected keyword argument {unknown[0]!r}")
    kind: type[Command | HttpTarget | WebSocketTarget] | None = None
    allowed: set[str] = set()
    if isinstance(target, str) and is_ws_url(target):
        kind, allowed = WebSocketTarget, {"headers", "close_timeout"}
    elif _is_http_url(target):
        kind, allowed = HttpTarget, {"headers", "close_timeout", *HTTP_OPTIONS}
    elif _is_command(target):
        kind, allowed = Command, {"close_timeout", *PROCESS_OPTIONS}
    for key, value in moved.items():
        if key in allowed or value is None:
            continue
        if kind is WebSocketTarget and key in HTTP_OPTIONS:
            raise TypeError(
                f"{key}= is an option of an http(s) URL: open_client(HttpTarget(url, "
                f"{key}=...)); a ws(s) URL takes headers= (an Authorization header, say)"
            )
        raise misplaced(key)
    kept = {key: value for key, value in moved.items() if key in allowed}
    dropped = [f"{key}=None" for key in moved if key not in allowed]
    notes = []
    if kept:
        assert kind is not None
        spelled = ", ".join(f"{key}=..." for key in kept)
        short = "command" if kind is Command else "url"
        notes.append(
            f"open_client({short}, {spelled}) is deprecated: the options of a target go with "
            f"it, open_client({kind.__name__}({short}, {spelled}))"
        )
    if dropped:
        notes.append(
            f"{', '.join(dropped)} has no effect with this target and is deprecated: leave it out"
        )
    if notes:
        warnings.warn("; ".join(notes), DeprecationWarning, stacklevel=stacklevel + 1)
    if kind is None:
        return target  # type: ignore[return-value]  # checked by open_client's connect
    return kind(target, **kept)  # type: ignore[arg-type]
