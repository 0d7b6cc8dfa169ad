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
import importlib
import importlib.util
import ipaddress
import os
import re
import select
import shlex
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import trio

from ._client_commands import (
    CLEAR_LINE,
    LOGIN_SECRET_ENV,
    drive,
    login_secret,
    logout,
    print_json,
)
from ._exception_groups import collapse_exception_groups
from ._observability import LOG_LEVEL_ENV, LOG_LEVELS
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
    secret_from,
    setting_value,
)
from ._version import __version__
from .auth import StaticTokenVerifier
from .client import OAuthError
from .protocol._errors import MCPError
from .protocol._types import (
    LOGGING_LEVELS,
)
from .server import Auth, Principal, Server, TokenVerifier
from .server._principal import every_entry_scopes
from .transports._ws_client import MISSING as WEBSOCKET_MISSING

if TYPE_CHECKING:
    pass

#: Where ``--redis-url`` is read from when the option is not given.
REDIS_URL_ENV = "TRIO_MCP_REDIS_URL"
#: The names a server is looked up by in a module, when the target names none.
SERVER_NAMES = ("server", "mcp", "app")


#: One vocabulary for ``--transport``, the server commands' and the client commands': the
#: specification's names (``streamable-http``, ``sse``), with ``http`` the short name of
#: Streamable HTTP as fastmcp has it. A client picks stdio or WebSocket by its TARGET.
SERVER_TRANSPORTS = ("stdio", "streamable-http", "http", "sse", "ws")
CLIENT_TRANSPORTS = ("streamable-http", "http", "sse")


# -- serving: what ``serve`` loads ----------------------------------------------------------------


def _split_target(spec: str) -> tuple[str, str | None]:
    """``path/x.py:attr`` or ``module:attr`` into its module part and attribute (if any)."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail and head and "/" not in tail and "\\" not in tail:
        return head, tail
    return spec, None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"no such file: {str(path)!r}")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its neighbours
    name = path.stem
    if not name.isidentifier() or name in sys.modules:  # never replace a loaded module
        name = "_trio_mcp_served"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def _import_module(name: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"cannot import {name!r}: {exc}") from None
    except Exception as exc:
        raise UsageError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _find_server(module: ModuleType, where: str) -> Server:
    servers = {name: v for name, v in vars(module).items() if isinstance(v, Server)}
    distinct = {id(v): v for v in servers.values()}
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    for name in SERVER_NAMES:
        if name in servers:
            return servers[name]
    if not servers:
        raise UsageError(f"{where} defines no trio_mcp.Server; name one with {where}:ATTRIBUTE")
    names = ", ".join(sorted(servers))
    raise UsageError(f"{where} defines several servers ({names}); pick one with {where}:NAME")


def load_server(spec: str) -> Server:
    """The Server that ``spec`` names.

    ``spec`` is a file (``./x.py``, ``/abs/x.py``) or an importable module (the current
    directory is importable), optionally followed by ``:attribute``. Without one, the module's
    only Server is taken, else the one called ``server``, ``mcp`` or ``app``. The attribute may
    also be a function returning a Server. A bad spec raises :class:`UsageError`.
    """
    location, attribute = _split_target(spec)
    if not location:
        raise UsageError(f"expected FILE.py[:attribute] or module[:attribute], got {spec!r}")
    is_file = location.endswith(".py") or os.sep in location or "/" in location
    module = _import_file(Path(location).resolve()) if is_file else _import_module(location)
    if attribute is None:
        return _find_server(module, location)
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"{location!r} has no attribute {attribute!r}") from None
    if callable(value) and not isinstance(value, Server):
        value = value()
    if not isinstance(value, Server):
        raise UsageError(f"{spec!r} is a {type(value).__name__}, not a trio_mcp.Server")
    return value


# -- serving protected: the --auth options -------------------------------------------------------

#: Where the introspection client's secret is read from, unless ``--auth-client-secret-env``.
CLIENT_SECRET_ENV = "TRIO_MCP_AUTH_CLIENT_SECRET"
#: Who a development token (``--auth-token-env``) stands for.
DEVELOPER = "developer"
#: A bearer token's characters (RFC 6750 section 2.1, b64token).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _is_protected(args: argparse.Namespace) -> bool:
    """Whether the command line asks for a protected server; refuses combinations that make
    no sense (two sources of tokens, an option whose companion is missing, auth on stdio)."""
    verifiers = [
        name
        for name, value in (
            ("--auth-introspect", args.auth_introspect),
            ("--auth-token-env", args.auth_token_env),
        )
        if value is not None
    ]
    if len(verifiers) > 1:
        raise UsageError(f"{' and '.join(verifiers)} are two sources of tokens: choose one")
    if args.auth_token_env is not None and args.auth_issuer is not None:
        raise UsageError(
            "--auth-token-env serves development tokens of its own: it takes no --auth-issuer"
        )
    if args.auth_introspect is None:
        for name, value in (
            ("--auth-client-id", args.auth_client_id),
            ("--auth-client-secret-env", args.auth_client_secret_env),
            ("--auth-client-auth", args.auth_client_auth),
        ):
            if value is not None:
                raise UsageError(f"{name} is for --auth-introspect")
    elif args.auth_client_id is None:
        raise UsageError("--auth-introspect needs --auth-client-id (this server's client id)")
    for name, value in (
        ("--auth-issuer", args.auth_issuer),
        ("--auth-introspect", args.auth_introspect),
        ("--public-url", args.public_url),
    ):
        if value is not None and not value.lower().startswith(("http://", "https://")):
            raise UsageError(f"{name} must be an http(s):// URL, got {value!r}")
    wanted = bool(verifiers) or args.auth_issuer is not None
    if not wanted:
        for name, value in (("--public-url", args.public_url), ("--auth-scope", args.auth_scope)):
            if value:
                raise UsageError(
                    f"{name} is for a protected server: add --auth-issuer, --auth-introspect "
                    "or --auth-token-env"
                )
        return False
    if not _over_http(args):
        raise UsageError(
            "the --auth options protect an HTTP server (--transport http); a stdio server "
            "takes its credentials from the environment its host starts it with"
        )
    return True


def _over_http(args: argparse.Namespace) -> bool:
    """Whether the server is served by the HTTP app (``sse`` and ``ws``: announcing its HTTP+SSE
    or WebSocket endpoint)."""
    return bool(args.transport in ("http", "sse", "ws"))


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _is_wildcard(host: str) -> bool:
    try:
        return not host or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


#: The pending connections a listening socket of ours queues (hypercorn's default).
LISTEN_BACKLOG = 100


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, for the server to serve on (``--fd``):
    bound before the server starts, so the port of ``--port 0`` is known to the URLs that name
    it, and held by a ``--reload`` supervisor across restarts, so nothing else takes the port
    between two servers and a client that connects meanwhile waits instead of being refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    return sock


def take_listener(args: argparse.Namespace) -> None:
    """``args.fd`` and ``args.port`` for an HTTP server: the port of the socket ``--fd`` hands
    over, or, for ``--port 0``, a socket bound now (whose port the URLs then name)."""
    if args.fd is None:
        if args.port == 0:
            sock = _listening_socket(args.host, 0)
            args.port = sock.getsockname()[1]
            args.fd = sock.detach()  # the server's now: it closes it when it ends
        return
    try:
        sock = socket.socket(fileno=args.fd)
    except OSError as exc:
        raise UsageError(f"--fd {args.fd}: not a socket ({exc.strerror or exc})") from None
    try:
        if sock.type != socket.SOCK_STREAM or sock.family not in (
            socket.AF_INET,
            socket.AF_INET6,
        ):
            raise UsageError(f"--fd {args.fd}: not a TCP socket")
        args.port = sock.getsockname()[1]
    finally:
        sock.detach()


def _public_url(args: argparse.Namespace) -> str:
    """The resource: ``--public-url``, else ``http://HOST:PORT/mcp`` of the bind (for
    ``--port 0``, the port of the socket bound already: :func:`take_listener`)."""
    if args.public_url is not None:
        url: str = args.public_url
        return url
    if _is_wildcard(args.host):
        raise UsageError(
            f"--host {args.host!r} listens on every address, so the server cannot tell "
            "the URL clients reach it at: give it with --public-url"
        )
    return f"http://{_url_host(args.host)}:{args.port}/mcp"


def _verifier(args: argparse.Namespace, server: Server) -> TokenVerifier:
    if args.auth_token_env is not None:
        token = secret_from(args.auth_token_env)
        if not _B64TOKEN.fullmatch(token):
            raise UsageError(
                f"{args.auth_token_env} does not hold a bearer token (RFC 6750: letters, "
                "digits and -._~+/ only)"
            )
        # A developer's token may call everything the server has.
        scopes = frozenset(args.auth_scope or ()).union(*every_entry_scopes(server))
        return StaticTokenVerifier({token: Principal(DEVELOPER, scopes=scopes)})
    if args.auth_introspect is not None:
        secret = secret_from(args.auth_client_secret_env or CLIENT_SECRET_ENV)
        from .auth._introspection import IntrospectionVerifier

        return IntrospectionVerifier(
            args.auth_introspect,
            client_id=args.auth_client_id,
            client_secret=secret,
            auth_method=args.auth_client_auth or "client_secret_basic",
            issuer=args.auth_issuer,
        )
    from .auth._jwt import JWTVerifier

    return JWTVerifier(args.auth_issuer)


def build_auth(args: argparse.Namespace, server: Server) -> Auth:
    """The :class:`Auth` the ``--auth`` options describe, for ``server`` (its entries' scopes
    are what a development token grants). Raises :class:`UsageError`."""
    try:
        scopes = frozenset(args.auth_scope or ())
        auth = Auth(
            _verifier(args, server),
            resource=_public_url(args),
            authorization_servers=[args.auth_issuer] if args.auth_issuer else [],
            required_scopes=scopes,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return auth


# -- driving: a client command's TARGET (what it does: _client_commands.py) ------------------------


def serve_command(spec: str) -> list[str] | None:
    """``FILE.py[:attribute]`` as the command that serves it over stdio from any directory
    (this interpreter, ``-m trio_mcp serve`` and the file's absolute path); None when ``spec``
    names no Python file."""
    location, attribute = _split_target(spec)
    if not location.endswith(".py"):
        return None
    path = Path(location).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"no such file: {location!r}")
    served = f"{path}:{attribute}" if attribute else str(path)
    return [sys.executable, "-m", "trio_mcp", "serve", served]


def _target(text: str) -> list[str] | str:
    if text.strip().lower().startswith(("http://", "https://", "ws://", "wss://")):
        return text.strip()
    command = shlex.split(text)
    if not command:
        raise UsageError("TARGET is empty")
    if len(command) == 1 and (served := serve_command(command[0])) is not None:
        return served  # a server file: served by this interpreter over stdio
    return command


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
        _add_auth_options(served)
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
    _add_install(commands)
    _add_dev(commands)
    _add_card(commands)
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


def _add_install(commands: Any) -> None:
    from ._install import HOSTS

    install = commands.add_parser(
        "install",
        help="add a server file to an MCP host's configuration",
        description="Add SERVER_FILE to HOST's JSON configuration, as an entry that starts it "
        "with this interpreter from any directory. Hosts: "
        + "; ".join(f"{host.name}: {host.title}" for host in HOSTS.values()),
    )
    install.add_argument("host", choices=list(HOSTS), metavar="HOST", help=", ".join(HOSTS))
    install.add_argument(
        "server_file",
        metavar="SERVER_FILE",
        nargs="?",
        help="FILE.py[:NAME] (default: the project file's server)",
    )
    install.add_argument("--name", help="the entry's name (default: NAME, else the file's stem)")
    install.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server (repeatable; after --env-file)",
    )
    install.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="PATH",
        help="KEY=VALUE lines (# comments, optional quotes) for the server's environment",
    )
    install.add_argument(
        "--config", metavar="PATH", help="the configuration file (default: where HOST keeps it)"
    )
    install.add_argument(
        "--project",
        action="store_true",
        help="cursor, vscode: the project's file in this directory (.cursor/mcp.json, "
        ".vscode/mcp.json) instead of the user's",
    )
    install.add_argument("--force", action="store_true", help="replace an entry of the same name")
    install.add_argument(
        "--no-check",
        action="store_true",
        help="write the entry without first loading the server (by default a file that does "
        "not import, or names no Server, is refused)",
    )
    install.add_argument(
        "--dry-run", action="store_true", help="print the entry as JSON; write nothing"
    )
    install.add_argument(
        "--no-uv",
        action="store_true",
        help="start the server with this interpreter even when uv is on PATH (by default the "
        "entry runs `uv run --with trio-mcp ...` when it is, with the project file's "
        "dependencies)",
    )


def _add_dev(commands: Any) -> None:
    dev = commands.add_parser(
        "dev",
        help="open a server file in the MCP Inspector (a web UI; needs Node.js 22)",
        description="Start the MCP Inspector 2.x on 127.0.0.1 with SERVER_FILE as its server "
        "(spawned over stdio at each connection) and print the URL to open. The Inspector and "
        "Node.js 22.19+ are found in node_modules here or above (npm install "
        "@modelcontextprotocol/inspector@2.12.0), or given with --inspector / --node.",
    )
    dev.add_argument(
        "server_file",
        metavar="SERVER_FILE",
        nargs="?",
        help="FILE.py[:NAME] (default: the project file's server)",
    )
    dev.add_argument(
        "--port", type=int, default=6274, help="the Inspector's page port (default: 6274)"
    )
    dev.add_argument(
        "--sandbox-port",
        type=int,
        metavar="PORT",
        help="the port of the Inspector's MCP Apps sandbox (default: the Inspector's, 6275)",
    )
    dev.add_argument(
        "--no-browser", action="store_true", help="print the URL only; open no browser"
    )
    dev.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server (repeatable)",
    )
    dev.add_argument(
        "--env-file", action="append", default=[], metavar="PATH", help="KEY=VALUE lines"
    )
    dev.add_argument("--node", metavar="PATH", help="the Node.js to run the Inspector with")
    dev.add_argument("--inspector", metavar="PATH", help="the Inspector's package directory")


def _dev(args: argparse.Namespace) -> int:
    from ._dev import DevError, find_inspector, find_node, launch, run
    from ._install import InstallError, parse_env

    served = serve_command(args.server_file)
    if served is None:
        raise UsageError(
            f"SERVER_FILE must be a Python file (FILE.py[:NAME]), got {args.server_file!r}"
        )
    try:
        env = parse_env(args.env, args.env_file)
        cwd = Path.cwd()
        started = launch(
            find_node(args.node, cwd),
            find_inspector(args.inspector, cwd),
            served,
            port=args.port,
            sandbox_port=args.sandbox_port,
            open_browser=not args.no_browser,
            server_env=env,
        )
    except (DevError, InstallError) as exc:
        raise UsageError(str(exc)) from None
    return run(started)


def _check_entry(spec: str, env: dict[str, str]) -> None:
    """Load the server an entry names, as ``serve`` will, in the entry's environment: a file
    that does not import, or names no Server, is said now rather than by the host later."""
    from contextlib import redirect_stdout

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with redirect_stdout(sys.stderr):  # a print() of the server file is not our output
            load_server(spec)
    except UsageError as exc:
        raise UsageError(
            f"{exc}; nothing written (--no-check installs without loading the server)"
        ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _install(args: argparse.Namespace) -> int:
    from ._install import InstallError, install, parse_env, server_spec

    try:
        launcher = _install_launcher(args)
        env = parse_env(args.env, args.env_file)
        if not args.no_check:
            _check_entry(server_spec(args.server_file), env)
        done = install(
            args.host,
            args.server_file,
            name=args.name,
            env=env,
            config=args.config,
            project=args.project,
            force=args.force,
            dry_run=args.dry_run,
            launcher=launcher,
        )
    except InstallError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        sys.stderr.write(f"trio-mcp: cannot write the configuration: {exc}\n")
        return 1
    if done.outcome == "dry-run":
        print_json(done.snippet)
        sys.stderr.write(f"trio-mcp: would write {done.name!r} to {done.path} (dry run)\n")
    elif done.outcome == "unchanged":
        sys.stderr.write(f"trio-mcp: {done.name!r} is in {done.path} already, unchanged\n")
    else:
        sys.stderr.write(f"trio-mcp: {done.outcome} {done.name!r} in {done.path}\n")
    return 0


def _install_launcher(args: argparse.Namespace) -> list[str] | None:
    """The words that start ``trio-mcp`` in the entry: uv's, when it is on PATH (and not
    ``--no-uv``), with the project file's ``dependencies``; else None (this interpreter)."""
    import shutil

    from ._install import uv_launcher

    uv = None if args.no_uv else shutil.which("uv")
    dependencies = getattr(args, "dependencies", [])
    if uv is None:
        if dependencies and not args.no_uv:
            sys.stderr.write(
                "trio-mcp: uv is not on PATH: the entry runs this interpreter, which must "
                "have the project file's dependencies\n"
            )
        return None
    return uv_launcher(uv, dependencies)


def _add_card(commands: Any) -> None:
    card = commands.add_parser(
        "card",
        help="print a server's Server Card (or its MCP Registry server.json)",
        description="Print the Server Card (SEP-2127) of a server file or module: its name, "
        "version, description, remotes, and under _meta what it offers (tools, prompts, "
        "resources, templates), the extensions it declares and the authorization it needs. "
        "With --registry, the MCP Registry's server.json instead. Nothing is served.",
    )
    card.add_argument(
        "server",
        nargs="?",
        help="FILE.py or package.module, optionally :attribute (default: the project file's)",
    )
    card.add_argument(
        "--registry",
        action="store_true",
        help="print the MCP Registry's server.json (release 2025-12-11) instead of the card",
    )
    card.add_argument(
        "--name",
        help="the registry name, NAMESPACE/NAME in reverse-DNS form (io.github.you/weather); "
        "default: the server's name, if it is one",
    )
    card.add_argument(
        "--description",
        help="at most 100 characters (default: the server's description, else the first line "
        "of its instructions)",
    )
    card.add_argument(
        "--url",
        help="the public URL of its Streamable HTTP endpoint (default: Auth.resource of a "
        "protected server, else no remote)",
    )
    card.add_argument("--sse-url", help="the public URL of its HTTP+SSE event stream, if served")
    card.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="REGISTRY:IDENTIFIER[==VERSION]",
        help="--registry: a package that runs the server over stdio (pypi:my-server; "
        "repeatable); VERSION defaults to the server's",
    )


def _card(args: argparse.Namespace) -> int:
    from contextlib import redirect_stdout

    from .server import ServerCardError, server_card, server_json

    if args.package and not args.registry:
        raise UsageError("--package is for --registry (a Server Card lists no packages)")
    with redirect_stdout(sys.stderr):  # a print() of the server file must not corrupt the JSON
        server = load_server(args.server)
    packages = [_package(spec, server.info.version) for spec in args.package]
    try:
        if args.registry:
            document = server_json(
                server,
                name=args.name,
                description=args.description,
                url=args.url,
                sse_url=args.sse_url,
                packages=packages,
            )
        else:
            document = server_card(
                server,
                name=args.name,
                description=args.description,
                url=args.url,
                sse_url=args.sse_url,
            )
    except ServerCardError as exc:
        raise UsageError(str(exc)) from None
    print_json(document)
    if "remotes" not in document and not packages:
        sys.stderr.write(
            "trio-mcp: no remote listed: give the public URL of its endpoint with --url\n"
        )
    return 0


def _package(spec: str, version: str) -> dict[str, Any]:
    registry, sep, identifier = spec.partition(":")
    identifier, _, pinned = identifier.partition("==")
    if not sep or not registry or not identifier or any(c.isspace() for c in spec):
        raise UsageError(f"--package wants REGISTRY:IDENTIFIER[==VERSION], got {spec!r}")
    return {
        "registryType": registry,
        "identifier": identifier,
        "version": pinned or version,
        "transport": {"type": "stdio"},
    }


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
    elif args.server is not None and _split_target(args.server)[0].endswith(".py"):
        folders = [Path(_split_target(args.server)[0]).resolve().parent]
    elif args.server is None and args.openapi is None:
        raise UsageError("serve needs a server file (FILE.py or package.module) or --openapi")
    else:
        folders = [Path.cwd()]  # a module is imported from here
    files = [args.project_file] if getattr(args, "project_file", None) else []
    if args.fd is not None:
        raise UsageError("--reload binds the port itself: give --host and --port, not --fd")
    # One socket for every child: the URL survives a restart, and a client that connects while
    # one server ends and the next starts waits in its queue.
    with _listening_socket(args.host, args.port) as sock:
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


def _add_auth_options(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group(
        "authorization (--transport http)",
        "Serve a protected resource (OAuth 2.1): every request needs a bearer token, checked "
        "by one of --auth-issuer, --auth-introspect or --auth-token-env. Clients find the "
        "authorization server through the Protected Resource Metadata the server publishes.",
    )
    group.add_argument(
        "--auth-issuer",
        metavar="URL",
        help="the authorization server that issues the tokens: listed in the metadata; its "
        "signed JWT access tokens are checked against its published keys (unless "
        "--auth-introspect)",
    )
    group.add_argument(
        "--auth-introspect",
        metavar="URL",
        help="check tokens at this RFC 7662 introspection endpoint instead, as client "
        f"--auth-client-id with the secret from ${CLIENT_SECRET_ENV}",
    )
    group.add_argument(
        "--auth-client-id",
        metavar="ID",
        help="this server's client id at the introspection endpoint",
    )
    group.add_argument(
        "--auth-client-secret-env",
        metavar="NAME",
        help=f"the environment variable holding that client's secret (default: "
        f"{CLIENT_SECRET_ENV}); never on the command line, where every user can read it",
    )
    group.add_argument(
        "--auth-client-auth",
        choices=["client_secret_basic", "client_secret_post"],
        help="how that client authenticates to the introspection endpoint (default: "
        "client_secret_basic)",
    )
    group.add_argument(
        "--auth-token-env",
        metavar="NAME",
        help=f"for development: accept the one token in the environment variable NAME, as "
        f"'{DEVELOPER}' with every scope the server names (no authorization server)",
    )
    group.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL clients reach the MCP endpoint at, which tokens must be issued for "
        "(their audience); default: http://HOST:PORT/mcp of the bind",
    )
    group.add_argument(
        "--auth-scope",
        action="append",
        metavar="SCOPE",
        help="a scope every request needs (repeatable); the demo's admin tool also needs mcp:admin",
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
    if _over_http(args):
        take_listener(args)
    protected = _is_protected(args)
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
                _target(args.target),
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
    tracing = _setup_telemetry(server.info.name, stdio=not _over_http(args))
    _setup_logging(args, server, tracing=tracing)
    if state_keys is not None:
        _use_state_keys(server, state_keys, args)
    event_store = limit_store = None
    if args.redis_url and _over_http(args):
        from .redis._bus import RedisBus
        from .redis._event_store import RedisEventStore
        from .redis._limit_store import RedisLimitStore
        from .redis._state_claims import RedisStateClaims
        from .redis._task_store import RedisTaskStore
        from .server import MemoryStateClaims

        try:
            server.bus = RedisBus(args.redis_url)
            event_store = RedisEventStore(args.redis_url)
            server.tasks.store = RedisTaskStore(args.redis_url)
            limit_store = RedisLimitStore(args.redis_url)
            if type(server.state_claims) is MemoryStateClaims:  # not one of the server's own
                server.state_claims = RedisStateClaims(args.redis_url)
            _share_session_state(server, args.redis_url)
        except ValueError as exc:
            raise UsageError(f"--redis-url: {exc}") from None
    session_store = relay = None
    if args.any_worker:
        if not _over_http(args) or not args.redis_url or not args.node_id:
            raise UsageError("--any-worker needs --transport http, --redis-url and --node-id")
        from .redis._relay import RedisRelay
        from .redis._session_store import RedisSessionStore

        session_store, relay = RedisSessionStore(args.redis_url), RedisRelay(args.redis_url)
    options = None
    if _over_http(args):
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
        level = log_level(args.log_level) or ("info" if _over_http(args) else "warning")
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
            return _install(args)
        if args.command == "dev":
            return _dev(args)
        if args.command == "card":
            return _card(args)
        if args.command == "logout":
            return logout(args)
        if args.command == "login":
            args.secret = login_secret(args)

        _setup_telemetry("trio-mcp", stdio=True)  # stdout is the command's answer
        with collapse_exception_groups():
            return trio.run(drive, _target(args.target), args)
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
