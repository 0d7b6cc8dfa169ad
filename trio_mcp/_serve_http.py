"""How ``serve`` and ``demo`` serve over HTTP from the command line: the listening socket
(``--fd``, ``--port 0``), the URL its clients reach, and a protected resource from the
``--auth-*`` options."""

from __future__ import annotations

import argparse
import ipaddress
import re
import socket

from ._settings import UsageError, secret_from
from .auth import StaticTokenVerifier
from .server import Auth, Principal, Server, TokenVerifier
from .server._principal import every_entry_scopes

#: Where the introspection client's secret is read from, unless ``--auth-client-secret-env``.
CLIENT_SECRET_ENV = "TRIO_MCP_AUTH_CLIENT_SECRET"
#: Who a development token (``--auth-token-env``) stands for.
DEVELOPER = "developer"
#: A bearer token's characters (RFC 6750 section 2.1, b64token).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def is_protected(args: argparse.Namespace) -> bool:
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
    if not over_http(args):
        raise UsageError(
            "the --auth options protect an HTTP server (--transport http); a stdio server "
            "takes its credentials from the environment its host starts it with"
        )
    return True


def over_http(args: argparse.Namespace) -> bool:
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


def listening_socket(host: str, port: int) -> socket.socket:
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
            sock = listening_socket(args.host, 0)
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


def add_auth_options(command: argparse.ArgumentParser) -> None:
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
