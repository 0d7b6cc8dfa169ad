"""OAuth for MCP clients, sans-IO: the formats and the rules, not the requests.

What the authorization flow (``trio_mcp.client._oauth``) needs to decide without touching the
network: parsing a ``WWW-Authenticate`` challenge, the well-known URLs to try for Protected
Resource Metadata (RFC 9728) and for authorization-server metadata (RFC 8414 and OpenID Connect
Discovery, in the order the MCP specification gives), the validation of both documents, PKCE
(S256), the canonical resource URI (RFC 8707), the scope to ask for, and the checks on the
redirect that ends the authorization step (``state`` and RFC 9207 ``iss``).

Where a URL may point (the SSRF rules, applied to every URL a metadata document hands us):

- https anywhere, http only on a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``);
- a loopback URL only when the MCP server itself is on loopback, so a remote server's metadata
  cannot aim us at services on this machine;
- the ``resource_metadata`` URL of a challenge only on the MCP server's own origin (the server
  describes itself; RFC 9728 lets it say where, not send us elsewhere);
- authorization-server endpoints may be on another origin than the issuer (RFC 8414 allows it
  and large providers do it), within the two rules above.

Every refusal is an :class:`OAuthInvalid` naming the step; the client turns it into its
``OAuthError``. Nothing here logs, and no message carries a token or a secret.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import attrs

from ._errors import MCPError

OFFLINE_ACCESS = "offline_access"
PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"
#: Bounds on what a peer may make us hold (a hostile metadata document, a huge challenge).
MAX_LIST = 100
MAX_STRING = 4096


class OAuthInvalid(MCPError):
    """A document, challenge or redirect broke a rule; ``step`` says where in the flow."""

    def __init__(self, step: str, message: str, *, error: str | None = None) -> None:
        self.step = step
        self.message = message
        self.error = error
        super().__init__(f"{step}: {message}")


# -- WWW-Authenticate ------------------------------------------------------------------------------


@attrs.frozen
class Challenge:
    """One challenge of a ``WWW-Authenticate`` header: its scheme and its parameters."""

    scheme: str
    params: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def scope(self) -> str | None:
        return self.params.get("scope") or None

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None


_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_AUTH_PARAM = re.compile(
    rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))\s*(?:,|$)', re.DOTALL
)
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*\s*(?:,|$)")


def parse_www_authenticate(values: Iterable[str]) -> list[Challenge]:
    """Every challenge in the given ``WWW-Authenticate`` header values (RFC 9110 §11.6.1).

    Lenient where servers are sloppy (no comma between challenges is tolerated only at a
    scheme boundary), bounded, and never raising: a value it cannot read yields nothing more.
    """
    challenges: list[Challenge] = []
    for value in values:
        text = value[: MAX_STRING * 4]
        pos = 0
        while pos < len(text) and len(challenges) < MAX_LIST:
            while pos < len(text) and text[pos] in " ,\t":
                pos += 1
            scheme = _SCHEME.match(text, pos)
            if scheme is None:
                break
            pos = scheme.end()
            params: dict[str, str] = {}
            token68 = _TOKEN68.match(text, pos)
            if token68 is not None and _AUTH_PARAM.match(text, pos) is None:
                pos = token68.end()  # a credential-like blob (Negotiate, Basic): no parameters
            while pos < len(text):
                found = _AUTH_PARAM.match(text, pos)
                if found is None:
                    break
                name = found.group(1).lower()
                quoted, bare = found.group(2), found.group(3)
                raw = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
                params.setdefault(name, raw)
                pos = found.end()
            challenges.append(Challenge(scheme.group(1).lower(), params))
    return challenges


def bearer_challenge(values: Iterable[str]) -> Challenge | None:
    """The first Bearer (or DPoP) challenge, the one an MCP server answers with."""
    for challenge in parse_www_authenticate(values):
        if challenge.scheme in ("bearer", "dpop"):
            return challenge
    return None


# -- URLs ------------------------------------------------------------------------------------------


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


def check_url(url: Any, *, step: str, what: str, server_url: str) -> str:
    """``url`` if it may be fetched or sent to, by the rules in this module's docstring."""
    if not isinstance(url, str) or not url or len(url) > MAX_STRING:
        raise OAuthInvalid(step, f"{what} is not a URL")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise OAuthInvalid(step, f"{what} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not parts.hostname:
        raise OAuthInvalid(step, f"{what} must be an https URL, not {_show(url)}")
    if parts.username is not None or parts.password is not None:
        raise OAuthInvalid(step, f"{what} must not carry credentials")
    if parts.fragment:
        raise OAuthInvalid(step, f"{what} must not have a fragment")
    loopback = is_loopback_host(parts.hostname)
    if scheme == "http" and not loopback:
        raise OAuthInvalid(step, f"{what} must be https outside loopback, not {_show(url)}")
    if loopback and not is_loopback_host(urlsplit(server_url).hostname):
        raise OAuthInvalid(
            step, f"{what} points at this machine ({_show(url)}) for a remote server"
        )
    return url


def _show(url: str) -> str:
    """A URL for a message: scheme, host and path only (a query might carry a secret)."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))[:200]
    except ValueError:
        return "(unreadable)"


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707, MCP "canonical server URI"): lowercase
    scheme and host, no default port, no fragment, no trailing slash on an empty path."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and (scheme, port) not in (("https", 443), ("http", 80)):
        host = f"{host}:{port}"
    path = parts.path if parts.path != "/" else ""
    return urlunsplit((scheme, host, path, parts.query, ""))


def prm_urls(server_url: str, resource_metadata: str | None) -> list[str]:
    """Where to look for the Protected Resource Metadata, in order: the challenge's
    ``resource_metadata`` (on the server's origin only), then the path-based well-known URI,
    then the root one (RFC 9728 §3.1, MCP "Protected Resource Metadata Discovery")."""
    urls: list[str] = []
    if resource_metadata is not None:
        check_url(
            resource_metadata, step="discovery", what="resource_metadata", server_url=server_url
        )
        if origin(resource_metadata) != origin(server_url):
            raise OAuthInvalid(
                "discovery",
                "the challenge's resource_metadata is on another origin than the server",
            )
        urls.append(resource_metadata)
    base = origin(server_url)
    path = urlsplit(server_url).path.rstrip("/")
    if path:
        urls.append(f"{base}{PRM_WELL_KNOWN}{path}")
    urls.append(f"{base}{PRM_WELL_KNOWN}")
    return list(dict.fromkeys(urls))


def as_metadata_urls(issuer: str) -> list[str]:
    """The authorization-server metadata URLs for ``issuer``, in the order MCP gives: RFC 8414
    path-inserted, OpenID path-inserted, OpenID path-appended; for an issuer without a path,
    RFC 8414 then OpenID at the root."""
    base = origin(issuer)
    path = urlsplit(issuer).path.rstrip("/")
    if not path:
        return [f"{base}{OAUTH_WELL_KNOWN}", f"{base}{OIDC_WELL_KNOWN}"]
    return [
        f"{base}{OAUTH_WELL_KNOWN}{path}",
        f"{base}{OIDC_WELL_KNOWN}{path}",
        f"{base}{path}{OIDC_WELL_KNOWN}",
    ]


def legacy_metadata(server_url: str) -> ServerMetadata:
    """The 2025-03-26 fallback for a server without any metadata: the MCP server's origin is
    the authorization server, with the default endpoints at its root."""
    base = origin(server_url)
    return ServerMetadata(
        issuer=base,
        authorization_endpoint=f"{base}/authorize",
        token_endpoint=f"{base}/token",
        registration_endpoint=f"{base}/register",
    )


# -- metadata documents ----------------------------------------------------------------------------


def _string_list(value: Any, *, step: str, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise OAuthInvalid(step, f"{what} is not a list of strings")
    if not all(isinstance(item, str) and len(item) <= MAX_STRING for item in value):
        raise OAuthInvalid(step, f"{what} is not a list of strings")
    return tuple(value)


@attrs.frozen
class ResourceMetadata:
    """The parts of a Protected Resource Metadata document the client uses."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether a PRM ``resource`` identifies the server at ``server_url``: the same origin
    and a path that is the server's path or a segment-wise prefix of it (RFC 9728 §3.3 with
    the root form, whose resource is the origin)."""
    try:
        declared = canonical_resource(resource)
        actual = canonical_resource(server_url)
    except ValueError:
        return False
    if origin(declared) != origin(actual) or urlsplit(declared).query:
        return False
    prefix = urlsplit(declared).path.rstrip("/")
    path = urlsplit(actual).path
    return path == prefix or path.startswith(prefix + "/") or not prefix


def parse_resource_metadata(body: Any, *, server_url: str) -> ResourceMetadata:
    step = "discovery"
    if not isinstance(body, dict):
        raise OAuthInvalid(step, "the protected resource metadata is not a JSON object")
    resource = body.get("resource")
    if not isinstance(resource, str) or not resource or len(resource) > MAX_STRING:
        raise OAuthInvalid(step, "the protected resource metadata has no resource")
    if not resource_matches(resource, server_url):
        raise OAuthInvalid(
            step,
            f"the protected resource metadata is for {_show(resource)}, not this server",
            error="resource_mismatch",
        )
    servers = _string_list(
        body.get("authorization_servers"), step=step, what="authorization_servers"
    )
    if not servers:
        raise OAuthInvalid(step, "the protected resource metadata names no authorization server")
    for issuer in servers:
        check_url(issuer, step=step, what="authorization server", server_url=server_url)
    scopes = _string_list(body.get("scopes_supported"), step=step, what="scopes_supported")
    return ResourceMetadata(resource, servers, scopes)


@attrs.frozen
class ServerMetadata:
    """The parts of authorization-server metadata (RFC 8414 / OpenID) the client uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    #: The whole document, for the grants that read more of it.
    raw: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)


_ENDPOINTS = ("authorization_endpoint", "token_endpoint", "registration_endpoint")


def parse_server_metadata(
    body: Any, *, issuer: str | None, server_url: str, authorization_code: bool = True
) -> ServerMetadata:
    """Validate a metadata document. ``issuer`` is the issuer the URL was built from; the
    document's must equal it exactly (RFC 8414 §3.3); ``None`` for the 2025-03-26 form, whose
    URL was built from the server's root. For the authorization-code flow
    (``authorization_code``), the document must name an authorization endpoint and offer PKCE
    S256; a grant without a user (client credentials, a JWT bearer) needs neither."""
    step = "metadata"
    if not isinstance(body, dict):
        raise OAuthInvalid(step, "the authorization server metadata is not a JSON object")
    declared = body.get("issuer")
    if not isinstance(declared, str) or not declared:
        raise OAuthInvalid(step, "the authorization server metadata has no issuer")
    if issuer is not None and declared != issuer:
        raise OAuthInvalid(
            step,
            f"the metadata's issuer {_show(declared)} is not the issuer it was fetched for "
            f"({_show(issuer)})",
        )
    endpoints: dict[str, str | None] = {}
    for name in _ENDPOINTS:
        value = body.get(name)
        if value is None and (
            name == "registration_endpoint"
            or (name == "authorization_endpoint" and not authorization_code)
        ):
            endpoints[name] = None
            continue
        endpoints[name] = check_url(value, step=step, what=name, server_url=server_url)
    lists = {
        name: _string_list(body.get(name), step=step, what=name)
        for name in (
            "scopes_supported",
            "token_endpoint_auth_methods_supported",
            "code_challenge_methods_supported",
            "grant_types_supported",
            "dpop_signing_alg_values_supported",
        )
    }
    methods = lists["code_challenge_methods_supported"]
    if authorization_code and (methods is None or "S256" not in methods):
        raise OAuthInvalid(
            step,
            "the authorization server does not advertise PKCE S256 "
            "(code_challenge_methods_supported): refusing to proceed",
        )
    return ServerMetadata(
        issuer=declared,
        authorization_endpoint=endpoints["authorization_endpoint"] or "",
        token_endpoint=endpoints["token_endpoint"] or "",
        registration_endpoint=endpoints["registration_endpoint"],
        client_id_metadata_document_supported=body.get("client_id_metadata_document_supported")
        is True,
        authorization_response_iss_parameter_supported=body.get(
            "authorization_response_iss_parameter_supported"
        )
        is True,
        raw=body,
        **lists,
    )


# -- PKCE, scopes, the authorization request and its redirect --------------------------------------


def pkce_verifier() -> str:
    """A fresh PKCE code verifier: 64 characters of the unreserved alphabet (RFC 7636 §4.1)."""
    return secrets.token_urlsafe(48)


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def new_state() -> str:
    return secrets.token_urlsafe(24)


def split_scope(scope: str | None) -> list[str]:
    return [s for s in (scope or "").split() if s]


def scope_union(*scopes: str | None) -> str | None:
    """The union of space-separated scope strings, in first-seen order; ``None`` if empty."""
    merged = dict.fromkeys(s for scope in scopes for s in split_scope(scope))
    return " ".join(merged) or None


def choose_scope(
    challenge_scope: str | None,
    resource_scopes: Iterable[str] | None,
    server_scopes: Iterable[str] | None,
    *,
    offline: bool = True,
) -> str | None:
    """The scope to ask for (MCP "Scope Selection Strategy"): the challenge's, else every
    scope the resource lists, else none; ``offline_access`` added only when the authorization
    server lists it (and ``offline``), since a refresh token is then worth asking for."""
    scope = challenge_scope or (" ".join(resource_scopes) if resource_scopes else None)
    if offline and server_scopes is not None and OFFLINE_ACCESS in server_scopes:
        scope = scope_union(scope, OFFLINE_ACCESS)
    return scope_union(scope)


def authorization_url(endpoint: str, params: Mapping[str, str | None]) -> str:
    """``endpoint`` with ``params`` added to whatever query it already has."""
    parts = urlsplit(endpoint)
    query = [(k, v) for k, vs in parse_qs(parts.query, keep_blank_values=True).items() for v in vs]
    query += [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def parse_redirect(redirect_url: str, *, state: str, issuer: str, iss_required: bool) -> str:
    """The authorization code from the redirect the browser landed on, after the checks of
    RFC 6749 §4.1.2 (``state``) and RFC 9207 §2.4 (``iss``, by exact string; required when
    the server advertises it, compared whenever present). An error response is raised only
    once ``state`` and ``iss`` say it really comes from our authorization server."""
    step = "authorization"
    try:
        query = parse_qs(urlsplit(redirect_url).query, keep_blank_values=True)
    except ValueError:
        raise OAuthInvalid(step, "the redirect URL cannot be read") from None

    def one(name: str) -> str | None:
        values = query.get(name)
        if values is None:
            return None
        if len(values) != 1:
            raise OAuthInvalid(step, f"the redirect carries {name} more than once")
        return values[0]

    if one("state") != state:
        raise OAuthInvalid(step, "the redirect's state does not match the request's")
    iss = one("iss")
    if iss is None:
        if iss_required:
            raise OAuthInvalid(
                step, "the redirect has no iss, which the authorization server promised (RFC 9207)"
            )
    elif iss != issuer:
        raise OAuthInvalid(
            step, "the redirect's iss is not the authorization server's issuer (RFC 9207)"
        )
    error = one("error")
    if error is not None:
        description = one("error_description")
        detail = f": {description[:200]}" if description else ""
        raise OAuthInvalid(
            step, f"the authorization server refused: {error[:100]}{detail}", error=error[:100]
        )
    code = one("code")
    if not code:
        raise OAuthInvalid(step, "the redirect carries no authorization code")
    return code


def token_error(body: Any) -> tuple[str | None, str]:
    """The OAuth error code and a short description from a token endpoint's error body."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        description = body.get("error_description")
        text = f": {description[:200]}" if isinstance(description, str) and description else ""
        return body["error"][:100], f"{body['error'][:100]}{text}"
    return None, "no OAuth error in the response"
