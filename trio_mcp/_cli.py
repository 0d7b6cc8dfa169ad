"""The ``trio-mcp`` command: serve a server over stdio, or drive one from the shell.

    trio-mcp demo                          serve the built-in demo server over stdio
    trio-mcp serve FILE.py[:server]        serve a Server from a file (or package.module:server)
    trio-mcp inspect TARGET [--json]       a server's info, capabilities and every list
    trio-mcp install HOST FILE.py[:server] add a server to a host's configuration (--dry-run)
    trio-mcp dev FILE.py[:server]          open a server file in the MCP Inspector (Node.js 22)
    trio-mcp card FILE.py[:server]         a server's Server Card (--registry: its server.json)
    trio-mcp tools TARGET [--json]         list a server's tools
    trio-mcp call TARGET TOOL [ARGS...]    call a tool (Ctrl-C cancels it on the wire)
    trio-mcp resources TARGET              list resources (templates: resource templates)
    trio-mcp read TARGET URI               read a resource
    trio-mcp prompts TARGET                list prompts
    trio-mcp get TARGET PROMPT [ARGS...]   render a prompt

TARGET is the command line of a server to spawn, as one shell-quoted string, a server file
(``FILE.py[:server]``, served by ``trio-mcp serve`` in a child), the URL of a Streamable HTTP
endpoint (http:// or https://), of a 2024-11-05 HTTP+SSE event stream (a server that answers
as one is reached over it; ``--transport sse`` goes there at once), or of a WebSocket one (ws://
or wss://). ARGS are one JSON object or ``key=value`` pairs (a value is typed by the tool's
input schema).

``demo`` and ``serve`` with ``--transport http`` serve a protected resource with an ``--auth-*``
option: tokens from an authorization server (``--auth-issuer``: signed JWTs checked against its
keys; ``--auth-introspect``: RFC 7662 introspection), or development tokens
(``--auth-token-env``). Secrets are read from the environment, never from the command line.
Their requestState keys come from ``--state-key-file PATH`` (one key per line, newest first),
or from ``TRIO_MCP_STATE_KEYS`` / ``TRIO_MCP_STATE_KEYS_FILE``.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from ._client_commands import (
    CLEAR_LINE,
    LOGIN_SECRET_ENV,
    drive,
    login_secret,
    logout,
)
from ._exception_groups import collapse_exception_groups
from ._host_commands import add_card, add_dev, add_install, run_card, run_dev, run_install
from ._loading import load_server, split_target, target_of
from ._observability import LOG_LEVEL_ENV, LOG_LEVELS
from ._serve_http import (
    add_auth_options,
    build_auth,
    is_protected,
    listening_socket,
    over_http,
    take_listener,
)
from ._settings import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    HTTP_SETTINGS,
    SERVE_SETTINGS,
    UsageError,
    add_http_settings,
    apply_task_settings,
    given_setting,
    http_options,
    setting_value,
)
from ._version import __version__
from .client import OAuthError
from .protocol._errors import MCPError
from .protocol._types import (
    LOGGING_LEVELS,
)
from .server import Server
from .transports._ws_client import MISSING as WEBSOCKET_MISSING

#: Where ``--redis-url`` is read from when the option is not given.
REDIS_URL_ENV = "TRIO_MCP_REDIS_URL"


#: One vocabulary for ``--transport``, the server commands' and the client commands': the
#: specification's names (``streamable-http``, ``sse``), with ``http`` the short name of
#: Streamable HTTP as fastmcp has it. A client picks stdio or WebSocket by its TARGET.
SERVER_TRANSPORTS = ("stdio", "streamable-http", "http", "sse", "ws")
CLIENT_TRANSPORTS = ("streamable-http", "http", "sse")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-mcp", description="Serve or drive Model Context Protocol servers."
    )
    parser.add_argument("--version", action="version", version=f"trio-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    # No abbreviated options where one names where a secret is: `--auth-client-secret S` must
    # not be read as `--auth-client-secret-env S`, which would show S in its error.
    demo = commands.add_parser("demo", help="serve the built-in demo server", allow_abbrev=False)
    serve = commands.add_parser(
        "serve", help="serve a Server from a file or module", allow_abbrev=False
    )
    serve.add_argument(
        "server",
        nargs="?",
        help="FILE.py or package.module, optionally :attribute (default: the module's Server)",
    )
    serve.add_argument(
        "--openapi",
        metavar="URL_OR_FILE",
        help="serve the operations of this OpenAPI 3.x document (JSON or YAML) as tools, "
        "calling the API at --base-url (instead of a server file; see docs/openapi.md)",
    )
    serve.add_argument(
        "--base-url",
        metavar="URL",
        help="with --openapi: the API's URL (default: the document's first server URL)",
    )
    fronted = commands.add_parser(
        "proxy", help="serve a proxy of another MCP server (a command or a URL)", allow_abbrev=False
    )
    fronted.add_argument("target", help="the upstream's command line (one quoted string) or URL")
    fronted.add_argument(
        "--max-upstreams",
        type=int,
        default=16,
        metavar="N",
        help="upstream sessions open at once, at most: one per downstream principal (default: 16)",
    )
    fronted.add_argument(
        "--upstream-idle-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="close an upstream session unused for this long (default: 60)",
    )
    for served in (demo, serve, fronted):
        served.add_argument(
            "--transport",
            choices=SERVER_TRANSPORTS,
            default="stdio",
            help="default: stdio; streamable-http (or http): Streamable HTTP at /mcp (and "
            "HTTP+SSE at /sse, WebSocket at /ws); sse: the same server, announcing its "
            "2024-11-05 HTTP+SSE endpoint; ws: the same server, announcing its WebSocket endpoint",
        )
        served.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
        served.add_argument("--port", type=int, default=8000, help="HTTP port (0: any free)")
        served.add_argument(
            "--fd",
            type=int,
            metavar="N",
            help="HTTP: serve on the listening TCP socket at file descriptor N, inherited "
            "(systemd socket activation, a supervisor), instead of binding --host and --port",
        )
        served.add_argument(
            "--state-key-file",
            metavar="PATH",
            help="seal multi round-trip states under the keys in this file (hex or base64url, "
            "one a line, newest first, # comments); give every worker the same file. Default: "
            "$TRIO_MCP_STATE_KEYS or $TRIO_MCP_STATE_KEYS_FILE, else a random key per process",
        )
        served.add_argument(
            "--redis-url",
            metavar="URL",
            default=os.environ.get(REDIS_URL_ENV) or None,
            help="HTTP: share state with the other workers through this Redis "
            "(redis://[:password@]host:port/db; a Redis Cluster: "
            "redis+cluster://host:port[,host:port...]; a Sentinel's primary: "
            "redis+sentinel://host:port[,host:port...]/service): change notifications reach "
            "the listeners of "
            "every worker, a stream cut on one worker resumes on another, and task records "
            "live there (tasks/get, tasks/update, tasks/cancel work on any worker); default: "
            f"${REDIS_URL_ENV}, else none",
        )
        served.add_argument(
            "--log-level",
            type=str.lower,
            choices=LOG_LEVELS,
            metavar="LEVEL",
            help=f"log to stderr from this level: {', '.join(LOG_LEVELS)} (default: "
            f"${LOG_LEVEL_ENV}, else info over HTTP, with a line per request, and warning over "
            "stdio)",
        )
        _add_fleet_options(served)
        add_http_settings(served)
        add_auth_options(served)
    for served in (demo, serve):
        _add_reload(served)

    def client_command(name: str, help: str) -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=help)
        command.add_argument(
            "target",
            help="the server's command line (one quoted string), a server file FILE.py[:NAME], "
            "or a URL",
        )
        return command

    listings = {
        "inspect": "show a server's info, capabilities, tools, prompts, resources and templates",
        "tools": "list the tools of a server",
        "resources": "list the resources of a server",
        "templates": "list the resource templates of a server",
        "prompts": "list the prompts of a server",
    }
    drivers = [client_command(name, text) for name, text in listings.items()]
    call = client_command("call", "call a tool")
    call.add_argument("tool", help="the tool's name")
    call.add_argument("arguments", nargs="*", help="key=value ... or one JSON object")
    read = client_command("read", "read a resource")
    read.add_argument("uri", help="the resource's URI")
    get = client_command("get", "render a prompt")
    get.add_argument("name", help="the prompt's name")
    get.add_argument("arguments", nargs="*", help="key=value ... or one JSON object")
    skills = client_command(
        "skills",
        "list a server's skills (SEP-2640), or print one, verified against its entry",
    )
    skills.add_argument(
        "--get",
        metavar="NAME",
        help="print this skill's SKILL.md (by name, or by path when names collide), after "
        "checking its size, digest and frontmatter; a file that fails is refused",
    )
    drivers.append(skills)
    login = commands.add_parser(
        "login",
        help="sign in to an OAuth-protected server and keep its tokens",
        allow_abbrev=False,
    )
    login.add_argument("target", help="the server's URL")
    login.add_argument("--client-id", help="a client id registered for trio-mcp in advance")
    login.add_argument(
        "--client-secret-env",
        metavar="NAME",
        help=f"the environment variable holding that client's secret, if it has one (default: "
        f"{LOGIN_SECRET_ENV}, when set); never on the command line, where every user can read it",
    )
    login.add_argument(
        "--ask-client-secret",
        action="store_true",
        help="ask for that client's secret at the terminal (not echoed)",
    )
    # Deprecated: a secret on the command line is in `ps` and the shell's history.
    login.add_argument("--client-secret", help=argparse.SUPPRESS)
    logout = commands.add_parser(
        "logout", help="forget the tokens kept for a server (--all: for every server)"
    )
    logout.add_argument("target", nargs="?", help="the server's URL")
    logout.add_argument(
        "--all",
        action="store_true",
        help="forget every kept token and client registration",
    )
    add_install(commands)
    add_dev(commands)
    add_card(commands)
    for command in [*drivers, call, read, get, login]:
        command.add_argument(
            "--login-timeout",
            type=float,
            default=300.0,
            metavar="SECONDS",
            help="how long to wait for the browser's sign-in (default: 300)",
        )
    for command in [*drivers, call, read, get, login]:
        command.add_argument("--json", action="store_true", help="print the result as JSON")
        command.add_argument(
            "--header",
            "-H",
            action="append",
            default=[],
            metavar="NAME:VALUE",
            help="an HTTP header for every request (repeatable; http(s) targets, and the "
            "upgrade of a ws(s) one)",
        )
        command.add_argument(
            "--transport",
            choices=CLIENT_TRANSPORTS,
            help="for a URL: streamable-http (or http): Streamable HTTP only; sse: the "
            "2024-11-05 HTTP+SSE transport (the URL of its event stream, say http://host/sse); "
            "default: Streamable HTTP, falling back to HTTP+SSE when the server answers as one",
        )
        command.add_argument(
            "--timeout",
            type=float,
            metavar="SECONDS",
            help="give up (cancelling on the wire) after this long, connecting included",
        )
        command.add_argument(
            "--log-level",
            default="info",
            choices=list(LOGGING_LEVELS),
            help="the server's log messages shown on stderr from this level (default: info)",
        )
        command.add_argument(
            "--save-dir",
            metavar="DIR",
            help="where images, audio and binary resources are saved (default: a new temp dir)",
        )
    return parser


#: Where ``--node-id`` is read from when the command line has none.
NODE_ID_ENV = "TRIO_MCP_NODE_ID"


# -- the project file and --reload ----------------------------------------------------------------


#: The keys of the project file besides :data:`SERVE_SETTINGS`' flags: serve's flag name (without
#: ``--``) -> its kind (``text``, ``port``, ``switch``, ``list``, ``path`` relative to the file,
#: or the values it may take) and the environment variables that win over the file.
PROJECT_OPTIONS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "server": ("text", ()),
    "dependencies": ("list", ()),
    "transport": (SERVER_TRANSPORTS, ()),
    "host": ("text", ()),
    "port": ("port", ()),
    "state-key-file": ("path", ("TRIO_MCP_STATE_KEYS", "TRIO_MCP_STATE_KEYS_FILE")),
    "redis-url": ("text", (REDIS_URL_ENV,)),
    "log-level": (LOG_LEVELS, (LOG_LEVEL_ENV,)),
    "node-id": ("text", (NODE_ID_ENV,)),
    "any-worker": ("switch", ()),
    "openapi": ("text", ()),
    "base-url": ("text", ()),
    "auth-issuer": ("text", ()),
    "auth-introspect": ("text", ()),
    "auth-client-id": ("text", ()),
    "auth-client-secret-env": ("text", ()),
    "auth-client-auth": (("client_secret_basic", "client_secret_post"), ()),
    "auth-token-env": ("text", ()),
    "public-url": ("text", ()),
    "auth-scope": ("list", ()),
}


def _project_keys() -> frozenset[str]:
    return frozenset(PROJECT_OPTIONS) | {s.flag.removeprefix("--") for s in SERVE_SETTINGS}


def _on_command_line(words: Sequence[str], key: str) -> bool:
    flag = f"--{key}"
    return any(word == flag or word.startswith(flag + "=") for word in words)


def _project_value(key: str, value: Any, project: Any) -> Any:
    """A project file's value as the ``args`` attribute its flag would set; UsageError naming
    the file and the key."""
    where = f"{project.path}: {key}"
    for setting in SERVE_SETTINGS:
        if setting.flag == f"--{key}":
            if setting.kind == "switch" and isinstance(value, bool):
                return True if value else "false"
            if setting.kind == "list":
                value = [value] if isinstance(value, str) else value
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise UsageError(f"{where}: expected a list of strings")
                setting_value(setting, value, where)
                return value
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise UsageError(f"{where}: expected a string or a number, not {value!r}")
            setting_value(setting, str(value), where)  # checked now, naming the file
            return str(value)
    kind = PROJECT_OPTIONS[key][0]
    if kind == "switch":
        if not isinstance(value, bool):
            raise UsageError(f"{where}: expected true or false, not {value!r}")
        return value
    if kind == "port":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise UsageError(f"{where}: expected a port number (0-65535), not {value!r}")
        return value
    if kind == "list":
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: expected a list of strings")
        return value
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: expected a non-empty string, not {value!r}")
    if isinstance(kind, tuple) and value not in kind:
        raise UsageError(f"{where}: expected one of {', '.join(kind)}, not {value!r}")
    if kind == "path":
        return str(project.folder / Path(value).expanduser())
    return value


def _use_project(args: argparse.Namespace, words: Sequence[str]) -> None:
    """Fill in what the command line leaves out from the project file of the current folder:
    a flag wins over an environment variable, which wins over the file, which wins over the
    default. Read only when the command line names no server."""
    from ._project import ProjectError, find_project

    slot = "server" if args.command in ("serve", "card") else "server_file"
    if getattr(args, slot) is not None or getattr(args, "openapi", None) is not None:
        return
    try:
        project = find_project(Path.cwd(), _project_keys())
        server = project.server() if project is not None else None
        if project is not None and args.command == "install":
            args.dependencies = project.strings("dependencies")
    except ProjectError as exc:
        raise UsageError(str(exc)) from None
    if project is None or (server is None and "openapi" not in project.table):
        if args.command == "serve":
            return  # serve says what it needs
        what = "a server file (FILE.py[:NAME])" if args.command != "card" else "a server"
        raise UsageError(
            f"{args.command} needs {what}, or a trio-mcp.toml (or [tool.trio-mcp] in "
            'pyproject.toml) here with server = "app.py"'
        )
    setattr(args, slot, server)
    args.project_file = project.path
    if args.command != "serve":
        return  # the rest is serve's
    for key, value in project.table.items():
        if key in ("server", "dependencies") or _on_command_line(words, key):
            continue
        names = PROJECT_OPTIONS[key][1] if key in PROJECT_OPTIONS else ()
        names += tuple(s.env for s in SERVE_SETTINGS if s.flag == f"--{key}")
        given = _project_value(key, value, project)  # checked even when a variable wins
        if any(os.environ.get(name, "").strip() for name in names):
            continue
        setattr(args, key.replace("-", "_"), given)


def _add_reload(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--reload",
        action="store_true",
        help="for development over HTTP: run the server in a child process and restart it when "
        "a *.py file under the server's folder (or the project file) changes; needs the "
        "reload extra (watchfiles)",
    )


def _reload_grace(args: argparse.Namespace) -> float:
    """How long a restart waits for the child to end: its drain and shutdown graces, and a
    second for the rest."""
    total = 1.0
    for setting in HTTP_SETTINGS:
        if setting.flag in ("--drain-grace", "--shutdown-grace"):
            given = given_setting(args, setting)
            total += setting.default if given is None else given
    return float(total)


def _reload(args: argparse.Namespace, words: Sequence[str]) -> int:
    """``--reload``: supervise the same command line, less ``--reload``, in a child."""
    from ._reload import child_command, run

    if args.transport == "stdio":
        raise UsageError(
            "--reload needs --transport http (or sse, ws): over stdio a restart would cut the "
            "client's session on the pipe"
        )
    if args.command == "demo":
        folders = [Path(__file__).resolve().parent]
    elif args.server is not None and split_target(args.server)[0].endswith(".py"):
        folders = [Path(split_target(args.server)[0]).resolve().parent]
    elif args.server is None and args.openapi is None:
        raise UsageError("serve needs a server file (FILE.py or package.module) or --openapi")
    else:
        folders = [Path.cwd()]  # a module is imported from here
    files = [args.project_file] if getattr(args, "project_file", None) else []
    if args.fd is not None:
        raise UsageError("--reload binds the port itself: give --host and --port, not --fd")
    # One socket for every child: the URL survives a restart, and a client that connects while
    # one server ends and the next starts waits in its queue.
    with listening_socket(args.host, args.port) as sock:
        sock.set_inheritable(True)
        command = [*child_command(words), "--fd", str(sock.fileno())]
        return run(command, folders, files, _reload_grace(args), keep_fds=[sock.fileno()])


def _add_fleet_options(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group(
        "running several (--transport http)",
        "One process per core, each on its own port, behind a load balancer (docs/deploy.md).",
    )
    group.add_argument(
        "--node-id",
        metavar="ID",
        default=os.environ.get(NODE_ID_ENV) or None,
        help="tag session ids with this node id (letters, digits, '-'), for the load "
        f"balancer's routing (default: ${NODE_ID_ENV}, else no tag)",
    )
    group.add_argument(
        "--any-worker",
        action="store_true",
        help="with --redis-url and --node-id: keep handshake sessions' records in Redis and "
        "relay what belongs to another worker, so that any worker serves any request of any "
        "session (plain round robin, no routing on the session id)",
    )


def _state_key_file(args: argparse.Namespace) -> list[bytes] | None:
    """The keys of ``--state-key-file``, if given (never together with the variables)."""
    if args.state_key_file is None:
        return None
    from .server._request_state_keys import STATE_KEYS_ENV, STATE_KEYS_FILE_ENV, read_key_file

    for name in (STATE_KEYS_ENV, STATE_KEYS_FILE_ENV):
        if name in os.environ:
            raise UsageError(f"--state-key-file and {name} both give state keys: choose one")
    try:
        return read_key_file(args.state_key_file)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _use_state_keys(server: Server, keys: list[bytes], args: argparse.Namespace) -> None:
    from .protocol._request_state import StateSealer

    if not server.state_sealer.ephemeral:
        served = getattr(args, "server", "the demo")
        raise UsageError(
            f"{served} has state keys of its own ({server.state_keys_origin}): "
            "--state-key-file would replace them"
        )
    sealer = server.state_sealer
    server.state_sealer = StateSealer(keys, ttl=sealer.ttl, max_size=sealer.max_size)
    server.state_keys_origin = f"--state-key-file ({args.state_key_file})"


def _share_session_state(server: Server, url: str) -> None:
    """--redis-url: the session state on Redis, unless the server chose a store of its own."""
    from .redis._session_state import RedisSessionStateStore
    from .server import MemorySessionStateStore

    if type(server.session_state_store) is MemorySessionStateStore:
        server.session_state_store = RedisSessionStateStore(url)


def _serve(args: argparse.Namespace) -> int:
    if args.transport == "streamable-http":
        args.transport = "http"  # the same transport, by the specification's name
    if over_http(args):
        take_listener(args)
    protected = is_protected(args)
    state_keys = _state_key_file(args)
    if args.command == "demo":
        from ._demo import add_signed_in_tools, demo_server

        try:
            server = demo_server()
        except ValueError as exc:  # the state keys of the environment
            raise UsageError(str(exc)) from None
        if protected:
            add_signed_in_tools(server)
    elif args.command == "proxy":
        from ._proxy import proxy

        try:
            server = proxy(
                target_of(args.target),
                max_upstreams=args.max_upstreams,
                idle_timeout=args.upstream_idle_timeout,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif args.openapi is not None:
        if args.server is not None:
            raise UsageError("serve takes a server file or --openapi, not both")
        try:
            server = Server.from_openapi(args.openapi, base_url=args.base_url)
        except ValueError as exc:  # OpenApiError: the document cannot be served
            raise UsageError(str(exc)) from None
    else:
        if args.server is None:
            raise UsageError("serve needs a server file (FILE.py or package.module) or --openapi")
        if args.base_url is not None:
            raise UsageError("--base-url goes with --openapi")
        server = load_server(args.server)
        if protected and server.auth is not None:
            raise UsageError(
                f"{args.server} has an authorization of its own (Server(auth=...)): "
                "the --auth options would replace it"
            )
    if protected:
        server.auth = build_auth(args, server)
    apply_task_settings(args, server)
    tracing = _setup_telemetry(server.info.name, stdio=not over_http(args))
    _setup_logging(args, server, tracing=tracing)
    if state_keys is not None:
        _use_state_keys(server, state_keys, args)
    event_store = limit_store = None
    if args.redis_url and over_http(args):
        from .redis._bus import RedisBus
        from .redis._event_store import RedisEventStore
        from .redis._limit_store import RedisLimitStore
        from .redis._state_claims import RedisStateClaims
        from .redis._task_store import RedisTaskStore
        from .server import MemoryStateClaims
        from .tasks import MemoryTaskStore

        try:
            server.bus = RedisBus(args.redis_url)
            event_store = RedisEventStore(args.redis_url)
            if type(server.tasks.store) is MemoryTaskStore:  # not one of the server's own
                server.tasks.store = RedisTaskStore(args.redis_url)
            limit_store = RedisLimitStore(args.redis_url)
            if type(server.state_claims) is MemoryStateClaims:  # not one of the server's own
                server.state_claims = RedisStateClaims(args.redis_url)
            _share_session_state(server, args.redis_url)
        except ValueError as exc:
            raise UsageError(f"--redis-url: {exc}") from None
    session_store = relay = None
    if args.any_worker:
        if not over_http(args) or not args.redis_url or not args.node_id:
            raise UsageError("--any-worker needs --transport http, --redis-url and --node-id")
        from .redis._relay import RedisRelay
        from .redis._session_store import RedisSessionStore

        session_store, relay = RedisSessionStore(args.redis_url), RedisRelay(args.redis_url)
    options = None
    if over_http(args):
        from .http import ScaleOut

        try:
            scale_out = ScaleOut(
                event_store=event_store,
                session_store=session_store,
                relay=relay,
                node_id=args.node_id,
                limit_store=limit_store,
            )
        except ValueError as exc:
            raise UsageError(f"--node-id: {exc}") from None
        options = http_options(args, scale_out)
    try:
        if options is None:
            server.run(args.transport)
        else:
            # As server.run() would, saying "trio-mcp:" when the app cannot start.
            from .http._binding import run_blocking

            run_blocking(
                server,
                args.transport,
                host=args.host,
                port=args.port,
                fd=args.fd,
                options=options,
                prog="trio-mcp",
            )
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0


def _why(exc: MCPError, args: argparse.Namespace) -> str:
    """The line that explains a failure; for a server that wants a token and offers no way to
    get one, how to send one."""
    if isinstance(exc, OAuthError) and exc.step == "unavailable":
        realm = f' (realm "{exc.realm}")' if exc.realm else ""
        return (
            f"{args.target} answered 401 Unauthorized{realm} and offers no OAuth sign-in: "
            'it wants a bearer token, pass it with -H "Authorization: Bearer TOKEN"'
        )
    return str(exc)


#: The exit status of a command whose reader went away (``| head``): a shell's for SIGPIPE.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (``trio-mcp tools URL | head -1``)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush finds nothing to fail on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _setup_telemetry(service_name: str, *, stdio: bool) -> bool:
    """OpenTelemetry's SDK from the ``OTEL_*`` variables, when they ask for it and it is
    installed (docs/observability.md); True when spans are recorded. ``stdio``: stdout is the
    protocol's or the answer's, so the console exporter writes to stderr."""
    from ._observability import configure_opentelemetry

    return configure_opentelemetry(service_name, console=sys.stderr if stdio else sys.stdout)


def _setup_logging(args: argparse.Namespace, server: Server, *, tracing: bool) -> None:
    """Log to stderr from ``--log-level`` (or ``$TRIO_MCP_LOG_LEVEL``; default: info over HTTP,
    warning over stdio), with the trace ids when ``tracing``; a line per request when INFO is
    shown (``Server.log_requests``)."""
    import logging

    from ._observability import configure_logging, log_level

    try:
        level = log_level(args.log_level) or ("info" if over_http(args) else "warning")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(level, trace_ids=tracing)
    server.log_requests = server.log_requests or logging.getLogger().isEnabledFor(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """The command; a reader that stops reading (``| head``) ends it quietly, as it does any
    Unix tool (status 141, nothing on stderr)."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        if args.command in ("serve", "dev", "install", "card"):
            _use_project(args, words)
        if getattr(args, "reload", False):
            return _reload(args, words)
        if args.command in ("demo", "serve", "proxy"):
            return _serve(args)
        if args.command == "install":
            return run_install(args)
        if args.command == "dev":
            return run_dev(args)
        if args.command == "card":
            return run_card(args)
        if args.command == "logout":
            return logout(args)
        if args.command == "login":
            args.secret = login_secret(args)

        _setup_telemetry("trio-mcp", stdio=True)  # stdout is the command's answer
        with collapse_exception_groups():
            return trio.run(drive, target_of(args.target), args)
    except UsageError as exc:
        sys.stderr.write(f"trio-mcp: {exc}\n")
        return EXIT_USAGE
    except MCPError as exc:
        # On a terminal, clear a progress line first.
        sys.stderr.write(
            f"{CLEAR_LINE if sys.stderr.isatty() else ''}trio-mcp: {_why(exc, args)}\n"
        )
        return 1
    except ImportError as exc:
        if str(exc) != WEBSOCKET_MISSING:
            raise
        sys.stderr.write(f"trio-mcp: {exc}\n")  # an optional extra, not a bug: no traceback
        return 1
    except BrokenPipeError:
        if _stdout_gone():
            raise  # our reader went away: main() ends quietly
        sys.stderr.write(f"trio-mcp: cannot reach {args.target!r}: the connection broke\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"trio-mcp: cannot reach {args.target!r}: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
