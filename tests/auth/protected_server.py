"""An MCP server that requires tokens from an authorization server: the official Python SDK's
protected resource (``mcp``), over Streamable HTTP on 127.0.0.1.

    python -m tests.auth.protected_server ISSUER [--port PORT] [--scope SCOPE]...

(from the repository root). The SDK does the protocol: ``AuthSettings`` with ``issuer_url`` =
ISSUER and ``resource_server_url`` = this server's ``/mcp`` URL, so it serves the Protected
Resource Metadata (RFC 9728) at ``/.well-known/oauth-protected-resource/mcp``, and its
``RequireAuthMiddleware`` answers 401 ``invalid_token`` (``WWW-Authenticate`` naming that
metadata) without a valid token, 403 ``insufficient_scope`` without the required scopes (default
``mcp:tools``). This file gives it the token verifier the SDK leaves to its users:
:class:`JwksTokenVerifier` checks a JWT access token (RFC 9068) against the issuer's published
keys, its ``iss``, its ``aud`` (this server), its expiry. One tool, ``whoami``, returns the
token's subject.

PORT 0 (the default) binds a free port. Once the socket listens, ``serving MCP at URL`` is
written to stderr. SIGINT or SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import Any

import anyio
import httpx
import uvicorn
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

#: The algorithms a token may be signed with (never ``none``, never a symmetric one).
ALGORITHMS = ("ES256", "RS256", "PS256", "EdDSA")
#: How long a fetched key set is trusted before a token with an unknown ``kid`` refetches it.
KEYS_MIN_AGE = 10.0


class JwksTokenVerifier:
    """Verifies RFC 9068 JWT access tokens from ``issuer`` for ``resource``: the signature by a
    key of the issuer's ``jwks_uri`` (found through its OpenID or OAuth metadata), ``typ``
    ``at+jwt``, ``iss`` equal to the issuer, ``aud`` naming the resource, ``exp`` in the future,
    a ``sub``. Anything else is no token (``None``: the SDK answers 401)."""

    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self._keys: KeySet | None = None
        self._fetched_at = 0.0
        self._lock = anyio.Lock()

    async def _fetch_keys(self) -> KeySet:
        async with httpx.AsyncClient(timeout=10) as http:
            metadata = (await http.get(self.issuer + "/.well-known/openid-configuration")).json()
            if metadata.get("issuer") != self.issuer:
                raise ValueError("the issuer's metadata names another issuer")
            jwks = (await http.get(metadata["jwks_uri"])).json()
        return KeySet.import_key_set(jwks)

    async def _key_set(self, kid: object) -> KeySet:
        async with self._lock:
            stale = time.monotonic() - self._fetched_at > KEYS_MIN_AGE
            known = self._keys is not None and any(
                key.kid == kid for key in self._keys.keys if kid is not None
            )
            if self._keys is None or (not known and stale):
                self._keys = await self._fetch_keys()
                self._fetched_at = time.monotonic()
            return self._keys

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            header = jws.extract_compact(token.encode()).headers()
            if header.get("typ") not in ("at+jwt", "application/at+jwt"):
                return None
            keys = await self._key_set(header.get("kid"))
            decoded = jwt.decode(token, keys, algorithms=list(ALGORITHMS))
            claims = decoded.claims
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self.resource},
                sub={"essential": True},
                exp={"essential": True},
            ).validate(claims)
        except (JoseError, ValueError, KeyError, TypeError, httpx.HTTPError):
            return None
        scope = claims.get("scope")
        client_id = claims.get("client_id")
        if not isinstance(client_id, str) or not isinstance(scope, str | None):
            return None
        return AccessToken(
            token=token,
            client_id=client_id,
            scopes=scope.split() if scope else [],
            expires_at=int(claims["exp"]),
            resource=self.resource,
            subject=str(claims["sub"]),
            claims={"iss": claims["iss"]},
        )


def protected_server(issuer: str, resource: str, scopes: list[str]) -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(
        "oidc-protected-server",
        version="1.0.0",
        log_level="WARNING",
        token_verifier=JwksTokenVerifier(issuer, resource),
        auth=AuthSettings(
            issuer_url=issuer,  # type: ignore[arg-type]  # pydantic validates the string
            resource_server_url=resource,  # type: ignore[arg-type]
            required_scopes=scopes,
            validate_token_resource=True,
        ),
    )

    add_whoami(server)
    return server


def add_whoami(server: MCPServer[Any]) -> None:
    """The one tool of the protected servers: the subject of the request's access token."""

    @server.tool()
    def whoami() -> str:
        """The subject (the signed-in user) of the access token of this request."""
        token = get_access_token()
        assert token is not None, "the SDK runs tools only behind its auth middleware"
        return token.subject or ""


def loopback_listener(port: int) -> tuple[socket.socket, str]:
    """A listening socket on 127.0.0.1 (port 0: a free one), and its ``http://host:port``."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    host, bound = listener.getsockname()
    return listener, f"http://{host}:{bound}"


async def serve(server: MCPServer[Any], listener: socket.socket, base_url: str) -> None:
    """Serve ``server`` on ``listener``; say so on stderr once it listens."""
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stderr.write(f"serving MCP at {base_url}/mcp\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[listener])


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("issuer")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scope", action="append", dest="scopes")
    args = parser.parse_args(argv)
    listener, base_url = loopback_listener(args.port)
    server = protected_server(args.issuer, f"{base_url}/mcp", args.scopes or ["mcp:tools"])
    await serve(server, listener, base_url)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
