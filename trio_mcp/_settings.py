"""The settings of ``trio-mcp serve``: every limit, timing and admission rule of the HTTP app
(``HttpOptions``), the tasks' limits and the server's own, each as a flag and an environment
variable (the flag wins), with its default; docs/deploy.md has them in tables, which a test
holds to these lists. Nothing of HTTP is imported until the options are built, so ``--help``
stays light. And what every command shares: its usage error, its exit statuses, a secret read
from the environment.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any, Literal

import attrs


class UsageError(Exception):
    """A bad command line or target: one line on stderr, exit status 2, no traceback."""


#: The exit status of a command the user interrupted (Ctrl-C), and of a bad command line.
EXIT_INTERRUPTED = 130
EXIT_USAGE = 2


def secret_from(name: str) -> str:
    """The secret in the environment variable ``name`` (a secret never goes on a command line,
    where every user of the machine can read it)."""
    value = os.environ.get(name, "")
    if not value:
        raise UsageError(f"the environment variable {name} is not set")
    return value


@attrs.frozen
class HttpSetting:
    """One setting of the HTTP app (``HttpOptions``, or a field of one of its groups) as a
    ``trio-mcp serve`` flag and an environment variable; docs/deploy.md has them in one
    table, which a test holds to this list."""

    #: The flag, ``--max-sessions``; its variable is its name in capitals after ``TRIO_MCP_``.
    flag: str
    #: Where it goes: ``HttpOptions``'s own field, or ``group.field`` (``limits.max_sessions``).
    target: str
    #: ``count`` (a whole number >= 1), ``seconds`` (> 0), ``path`` (``/...``), ``name``,
    #: ``list`` (a repeatable flag; its variable takes a comma-separated list and ends in S),
    #: ``rate`` (``RATE`` or ``RATE/BURST``: requests a second, and at once) or ``switch`` (a
    #: flag without a value; its variable is ``1``/``true``/``yes``/``on`` or the opposite).
    kind: Literal["count", "seconds", "path", "name", "list", "rate", "switch"]
    #: What it means, for ``--help`` and the table.
    meaning: str
    #: ``HttpOptions()``'s value, which applies when neither flag nor variable is given (here,
    #: so that ``--help`` loads nothing of HTTP; a test holds it to ``HttpOptions``).
    default: Any

    @property
    def env(self) -> str:
        name = "TRIO_MCP_" + self.flag.removeprefix("--").upper().replace("-", "_")
        return name + "S" if self.kind == "list" else name

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


#: Every limit of the HTTP app, its timings, and who it lets in (the tables of docs/deploy.md).
HTTP_SETTINGS = (
    HttpSetting(
        "--max-sessions",
        "limits.max_sessions",
        "count",
        "sessions of the app at once, over every transport; beyond it, 503",
        10_000,
    ),
    HttpSetting(
        "--max-sessions-per-client",
        "limits.max_sessions_per_client",
        "count",
        "sessions one client (its principal, else its address) may hold at once; beyond it, 429",
        100,
    ),
    HttpSetting(
        "--session-idle-timeout",
        "limits.session_idle_timeout",
        "seconds",
        "a session with nothing in flight ends this long after its last use",
        1800.0,
    ),
    HttpSetting(
        "--unused-session-timeout",
        "limits.unused_session_timeout",
        "seconds",
        "a session that never carried a request ends this long after it opened",
        60.0,
    ),
    HttpSetting(
        "--max-body-bytes",
        "limits.max_body_bytes",
        "count",
        "the largest request body; a larger one gets 413",
        4 * 1024 * 1024,
    ),
    HttpSetting(
        "--max-requests-per-session",
        "limits.max_requests_per_session",
        "count",
        "requests of one session running at once; one more gets 429",
        256,
    ),
    HttpSetting(
        "--max-requests-per-client",
        "limits.max_requests_per_client",
        "count",
        "modern-era requests of one client (its principal, else its address) running at once; "
        "one more gets 429",
        256,
    ),
    HttpSetting(
        "--rate-limit",
        "limits.rate_limit",
        "rate",
        "RATE[/BURST]: requests a second one client may make, and at once (default: one "
        "second's worth); past it, 429 with Retry-After (across workers sharing Redis); unset: "
        "no limit",
        None,
    ),
    HttpSetting(
        "--tool-rate-limit",
        "limits.tool_rate_limit",
        "rate",
        "RATE[/BURST]: the same for each tool one client calls; unset: no limit",
        None,
    ),
    HttpSetting(
        "--max-pending-events",
        "limits.max_pending_events",
        "count",
        "events waiting for one slow SSE reader before its connection is ended (it resumes)",
        1024,
    ),
    HttpSetting(
        "--max-pending-bytes",
        "limits.max_pending_bytes",
        "count",
        "bytes waiting for one slow SSE reader before its connection is ended (it resumes)",
        8 * 1024 * 1024,
    ),
    HttpSetting(
        "--max-backlog-events",
        "limits.max_backlog_events",
        "count",
        "events kept for a session's next GET stream while none is open",
        256,
    ),
    HttpSetting(
        "--max-backlog-bytes",
        "limits.max_backlog_bytes",
        "count",
        "bytes kept for a session's next GET stream while none is open",
        1024 * 1024,
    ),
    HttpSetting(
        "--max-buffered-bytes",
        "limits.max_buffered_bytes",
        "count",
        "all pending and backlog bytes together, over every session",
        64 * 1024 * 1024,
    ),
    HttpSetting(
        "--allowed-host",
        "hosts.allowed_hosts",
        "list",
        "Host headers accepted (host or host:port); unset: loopback names on loopback, any "
        "name otherwise",
        None,
    ),
    HttpSetting(
        "--allowed-origin",
        "hosts.allowed_origins",
        "list",
        "Origin headers accepted (* for any); unset: loopback origins on loopback, any otherwise",
        None,
    ),
    HttpSetting(
        "--cors-origin",
        "hosts.cors_origins",
        "list",
        "origins CORS allows (* for any); unset: no CORS headers",
        None,
    ),
    HttpSetting(
        "--client-address-header",
        "hosts.client_address_header",
        "name",
        "the header a trusted reverse proxy puts the client's address in (x-forwarded-for, "
        "x-real-ip), which keys the per-client session budget; set it only when every "
        "request comes through that proxy",
        None,
    ),
    HttpSetting(
        "--share-request-limits",
        "scale_out.share_request_limits",
        "switch",
        "with --redis-url: count requests in Redis too, so the per-session and per-client "
        "request limits hold across workers (two more round trips per request)",
        False,
    ),
    HttpSetting(
        "--max-store-queue-events",
        "scale_out.max_store_queue_events",
        "count",
        "events queued for a slow shared event store before streams lose resumability",
        4096,
    ),
    HttpSetting(
        "--max-store-queue-bytes",
        "scale_out.max_store_queue_bytes",
        "count",
        "bytes queued for a slow shared event store before streams lose resumability",
        32 * 1024 * 1024,
    ),
    HttpSetting(
        "--event-store-timeout",
        "scale_out.event_store_timeout",
        "seconds",
        "the longest write to the shared event store",
        5.0,
    ),
    HttpSetting(
        "--event-store-coalesce",
        "scale_out.event_store_coalesce",
        "seconds",
        "how long writes to the shared event store are gathered; a stream delivered whole "
        "within it is never written",
        0.02,
    ),
    HttpSetting(
        "--resume-poll-interval",
        "scale_out.resume_poll_interval",
        "seconds",
        "how often a resume of another worker's stream looks for its new events",
        0.25,
    ),
    HttpSetting(
        "--record-cache",
        "scale_out.record_cache",
        "seconds",
        "with --any-worker: how long a worker serves a session on the record it read (changes "
        "wait for every worker's word, so they apply at once everywhere)",
        1.0,
    ),
    HttpSetting(
        "--ws-max-message-bytes",
        "websocket.max_message_bytes",
        "count",
        "the largest WebSocket message a client may send; a larger one closes its socket",
        4 * 1024 * 1024,
    ),
    HttpSetting(
        "--ws-ping-interval",
        "websocket.ping_interval",
        "seconds",
        "how often each WebSocket client is pinged (one not answered in as long closes it); "
        "unset: never",
        None,
    ),
    HttpSetting(
        "--keepalive-interval",
        "keepalive_interval",
        "seconds",
        "a comment line on every idle SSE stream this often",
        15.0,
    ),
    HttpSetting(
        "--shutdown-grace",
        "shutdown_grace",
        "seconds",
        "at shutdown, after the drain, how long sessions get to end",
        5.0,
    ),
    HttpSetting(
        "--drain-grace",
        "drain_grace",
        "seconds",
        "on SIGTERM, how long requests in flight may finish before they end with an error "
        "telling their clients to retry",
        10.0,
    ),
    HttpSetting(
        "--ready-path",
        "ready_path",
        "path",
        "GET answers 200 while serving, 503 while starting, draining, or a store the "
        "configuration needs (Redis) does not answer",
        "/ready",
    ),
    HttpSetting(
        "--ready-timeout",
        "ready_timeout",
        "seconds",
        "how long the readiness path waits for each store before it counts it unavailable",
        2.0,
    ),
    HttpSetting(
        "--live-path",
        "live_path",
        "path",
        "GET answers 200 for as long as the process answers at all (restart it when it fails)",
        "/live",
    ),
)


#: The tasks' limits (the server's tasks extension, on every transport): the same kind of
#: flag and variable, in the same table of docs/deploy.md; each target is the task manager's
#: attribute of that name (``tasks.max_running``), its default the manager's own.
TASK_SETTINGS = (
    HttpSetting(
        "--max-tasks",
        "tasks.max_running",
        "count",
        "tasks running or waiting for input at once in this process; one more is refused",
        1000,
    ),
    HttpSetting(
        "--max-tasks-per-principal",
        "tasks.max_per_principal",
        "count",
        "tasks of one signed-in principal at once (across workers sharing Redis); one more is "
        "refused with -32000",
        100,
    ),
    HttpSetting(
        "--task-input-timeout",
        "tasks.input_timeout",
        "seconds",
        "how long a task waits for the answers to its questions before it fails",
        600.0,
    ),
)

#: The server's own settings (every transport); each target is the server's attribute.
SERVER_SETTINGS = (
    HttpSetting(
        "--single-use-state",
        "server.single_use_state",
        "switch",
        "a requestState opens once: a replayed multi round-trip retry is refused, on any "
        "worker sharing --redis-url (a tool may choose for itself)",
        False,
    ),
)

#: Every setting of ``serve`` that is a flag and a variable, as docs/deploy.md's table has them.
SERVE_SETTINGS = HTTP_SETTINGS + TASK_SETTINGS + SERVER_SETTINGS


def add_http_settings(command: argparse.ArgumentParser) -> None:
    http = command.add_argument_group(
        "HTTP limits and settings (--transport http)",
        "Each one also from its environment variable (a flag wins); docs/deploy.md has them "
        "in one table.",
    )
    tasks = command.add_argument_group(
        "task limits (every transport)", "Each one also from its environment variable."
    )
    metavars = {
        "count": "N",
        "seconds": "SECONDS",
        "path": "PATH",
        "name": "NAME",
        "rate": "RATE[/BURST]",
    }
    for setting in SERVE_SETTINGS:
        group = tasks if setting in TASK_SETTINGS or setting in SERVER_SETTINGS else http
        default = setting.default
        shown = (
            "unset"
            if default is None
            else ("on" if default else "off")
            if setting.kind == "switch"
            else f"{default:_}"
            if type(default) is int
            else default
        )
        help = f"{setting.meaning} (${setting.env}; default: {shown})".replace("%", "%%")
        if setting.kind == "switch":
            group.add_argument(setting.flag, action="store_true", default=None, help=help)
            continue
        group.add_argument(
            setting.flag,
            action="append" if setting.kind == "list" else "store",
            metavar=metavars.get(setting.kind, "VALUE"),
            help=help,
        )


def setting_value(setting: HttpSetting, given: Any, where: str) -> Any:
    """A flag's or a variable's text as the setting's value; UsageError naming ``where``."""
    if setting.kind == "list":
        items = given if isinstance(given, list) else given.split(",")
        values = [item.strip() for item in items if item.strip()]
        if not values:
            raise UsageError(f"{where}: give at least one value")
        return values
    if given is True:  # a switch's flag
        return True
    text = given.strip()
    if setting.kind == "switch":
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(
            f"{where}: expected 1, true, yes or on (or 0, false, no, off), not {given!r}"
        )
    if setting.kind == "rate":
        return _rate_limit(text, where, given)
    if setting.kind == "count":
        try:
            count = int(text.replace("_", ""))
        except ValueError:
            count = 0
        if count < 1:
            raise UsageError(f"{where}: expected a whole number of at least 1, not {given!r}")
        return count
    if setting.kind == "seconds":
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not (seconds > 0 and math.isfinite(seconds)):
            raise UsageError(f"{where}: expected a number of seconds above 0, not {given!r}")
        return seconds
    if setting.kind == "path" and not text.startswith("/"):
        raise UsageError(f"{where}: expected a path starting with /, not {given!r}")
    if not text or any(c.isspace() for c in text):
        raise UsageError(f"{where}: expected one word, not {given!r}")
    return text


def _rate_limit(text: str, where: str, given: str) -> Any:
    """``RATE`` or ``RATE/BURST`` as a ``RateLimit``; UsageError naming ``where``."""
    from .http import RateLimit

    rate_text, _, burst_text = text.partition("/")
    try:
        rate = float(rate_text)
        burst = int(burst_text.replace("_", "")) if burst_text else None
        if not math.isfinite(rate):
            raise ValueError(rate)
        return RateLimit(rate) if burst is None else RateLimit(rate, burst)
    except ValueError:
        raise UsageError(
            f"{where}: expected RATE or RATE/BURST (requests a second above 0, a whole burst of "
            f"at least 1), not {given!r}"
        ) from None


def given_setting(args: argparse.Namespace, setting: HttpSetting) -> Any:
    """The setting's value from its flag, else its variable; None when neither is given."""
    given = getattr(args, setting.dest, None)
    where = setting.flag
    if given is None and os.environ.get(setting.env, "").strip():
        given, where = os.environ[setting.env], setting.env
    return None if given is None else setting_value(setting, given, where)


def apply_task_settings(args: argparse.Namespace, server: Any) -> None:
    """Set the server's task limits (:data:`TASK_SETTINGS`) and its own settings
    (:data:`SERVER_SETTINGS`) from their flags or variables."""
    for setting in TASK_SETTINGS:
        value = given_setting(args, setting)
        if value is not None:
            setattr(server.tasks, setting.target.removeprefix("tasks."), value)
    for setting in SERVER_SETTINGS:
        value = given_setting(args, setting)
        if value is not None:
            setattr(server, setting.target.removeprefix("server."), value)


def http_options(args: argparse.Namespace, scale_out: Any) -> Any:
    """The ``HttpOptions`` of ``serve``: each of :data:`HTTP_SETTINGS` from its flag, else its
    environment variable, else its default; ``scale_out`` carries the stores and the node id."""
    from .http import HttpOptions

    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for setting in HTTP_SETTINGS:
        value = given_setting(args, setting)
        if value is None:
            continue
        group, _, field = setting.target.rpartition(".")
        (groups.setdefault(group, {}) if group else top)[field] = value
    options = HttpOptions(scale_out=scale_out, **top)
    for group, fields in groups.items():
        options = attrs.evolve(options, **{group: attrs.evolve(getattr(options, group), **fields)})
    return options
