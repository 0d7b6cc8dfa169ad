"""Authorization at the server: who a token says the caller is, and what it lets them do.

A :class:`TokenVerifier` turns an access token into a :class:`Principal` (or refuses it with
:class:`InvalidToken`); :class:`Auth` is a server's whole policy: the verifier, the resource
this server is (the audience every token must name), the authorization servers its Protected
Resource Metadata points clients at, the scopes every request needs and the hierarchy among
them. Each tool, prompt, resource and template may need scopes of its own
(``@server.tool(scopes=...)``); :func:`needed_scopes` says what one request needs, so the HTTP
app can refuse it with one complete ``insufficient_scope`` challenge before any handler runs.

Nothing here keeps a token: a principal holds what the token said, never the token itself, and
no message names one.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from ..protocol._bearer import read_bearer
from ..protocol._errors import MCPError
from ..protocol._oauth import canonical_resource

logger = logging.getLogger("trio_mcp.auth")


@attrs.frozen
class Principal:
    """What a verified access token says about the caller (``ctx.auth``).

    ``audience`` is the token's audience (the resources it was issued for), or None when the
    verifier itself vouches that the token is for this server (static tokens). ``expires_at``
    is a Unix time, None for a token that does not expire.
    """

    subject: str | None
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    issuer: str | None = None
    expires_at: float | None = None
    audience: tuple[str, ...] | None = None

    @functools.cached_property
    def identity(self) -> str:
        """Who this is, stable across token refreshes: a session, a sealed requestState, a task
        and a cache entry are bound to it, never to the token.

        The canonical JSON array ``[issuer, subject, client_id]`` (ASCII, no spaces, ``null``
        for an absent piece): each piece is quoted and escaped, so no subject or client id can
        carry a separator that makes two principals one (``"alice\x1fapp"`` with client
        ``"web"`` is not ``"alice"`` with client ``"app\x1fweb"``). A binding made under the
        old ``U+001F``-joined form never equals this one, so it is refused, never inherited.
        """
        return json.dumps(
            [self.issuer, self.subject, self.client_id], ensure_ascii=True, separators=(",", ":")
        )


class InvalidToken(MCPError):
    """The token is not accepted (bad signature, expired, issued for another resource, revoked,
    unknown). ``description`` goes into the 401 challenge: it says why, never what the token
    was."""

    def __init__(self, description: str = "the access token is not valid") -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailable(MCPError):
    """The token could not be checked now (the authorization server's keys or its
    introspection endpoint are unreachable): a 503, since a 401 would send the client to sign
    in again for nothing."""


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks an access token. Implementations: :class:`JWTVerifier` (signed JWTs, keys from
    a JWKS), :class:`IntrospectionVerifier` (RFC 7662) and :class:`StaticTokenVerifier`."""

    async def verify(self, token: str) -> Principal:
        """The principal the token stands for; raises :class:`InvalidToken` (401) or
        :class:`VerifierUnavailable` (503)."""
        ...


def _scope_set(scopes: Iterable[str] | str | None, what: str) -> frozenset[str]:
    if scopes is None:
        return frozenset()
    if isinstance(scopes, str):
        scopes = scopes.split()
    found = frozenset(scopes)
    for scope in found:
        if not isinstance(scope, str):
            raise TypeError(f"{what}: a scope is a string, not {type(scope).__name__}")
        if not scope or any(ch in scope for ch in ' "\\') or not scope.isprintable():
            raise ValueError(f"{what}: {scope!r} is not a scope (RFC 6749 section 3.3)")
    return found


def check_scopes(scopes: Iterable[str] | str | None, what: str = "scopes") -> frozenset[str]:
    """Registration-time validation of a ``scopes=`` argument (a string is split on spaces)."""
    return _scope_set(scopes, what)


def _required(scopes: Iterable[str] | str | None) -> frozenset[str]:
    return check_scopes(scopes, "required_scopes")


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    # A typed converter: with the bare ``tuple`` the attrs plugin types the argument as
    # ``Iterable[_T_co]``, which no caller's list or tuple of str satisfies under mypy.
    return tuple(values)


def _listed(scopes: Iterable[str] | str | None) -> tuple[str, ...] | None:
    # Kept in the order given (the metadata lists them so); a string is split, not iterated.
    if scopes is None:
        return None
    listed = scopes.split() if isinstance(scopes, str) else list(scopes)
    check_scopes(listed, "scopes_supported")
    return tuple(dict.fromkeys(listed))


def _hierarchy(implied: Mapping[str, Iterable[str] | str]) -> dict[str, frozenset[str]]:
    # Keys and values checked like any scopes= (a string value is split, never read letter by
    # letter: {"mcp:admin": "mcp:tools"} implies mcp:tools, not "m", "c", ...).
    hierarchy: dict[str, frozenset[str]] = {}
    for scope, below in implied.items():
        check_scopes([scope], "implied_scopes")
        hierarchy[scope] = check_scopes(below, f"implied_scopes[{scope!r}]")
    return hierarchy


@attrs.define
class Auth:
    """A server's authorization policy (``Server(auth=...)``).

    ``resource`` is this server's public URL, the MCP endpoint as clients reach it
    (``https://mcp.example.com/mcp``): it is the audience every token must name and the
    ``resource`` of the metadata. ``authorization_servers`` are the issuers clients get tokens
    from; none is bearer-only mode: tokens come from elsewhere, and no metadata is published.
    ``required_scopes`` are needed by every request; each tool, prompt, resource and template
    may need more. ``implied_scopes`` is the hierarchy: a granted scope stands for the scopes
    it maps to (``{"mcp:admin": ["mcp:tools"]}``), transitively. ``check_audience=False``
    accepts tokens issued for any resource, which lets a token stolen from another service work
    here: it is logged as a warning, and only for an authorization server whose every token is
    meant for this server.
    """

    verifier: TokenVerifier
    resource: str = attrs.field(converter=canonical_resource)
    authorization_servers: Sequence[str] = attrs.field(default=(), converter=_strings)
    required_scopes: frozenset[str] = attrs.field(default=frozenset(), converter=_required)
    #: The scopes the metadata lists; None: the required ones and every entry's, sorted.
    scopes_supported: Sequence[str] | None = attrs.field(default=None, converter=_listed)
    implied_scopes: Mapping[str, Collection[str]] = attrs.field(factory=dict, converter=_hierarchy)
    check_audience: bool = True
    resource_name: str | None = None
    resource_documentation: str | None = None
    #: The largest ``Authorization`` header read; a longer one is refused (400).
    max_header_bytes: int = 8192
    #: stdio has no headers: the token is read from this environment variable (the host that
    #: launches the server sets it), verified once, and stands for the whole connection.
    stdio_token_env: str = "MCP_ACCESS_TOKEN"
    #: The clock that expiry is checked against (Unix seconds).
    clock: Callable[[], float] = attrs.field(default=time.time, repr=False)

    def __attrs_post_init__(self) -> None:
        if not self.check_audience:
            logger.warning(
                "authorization for %s: the token audience is NOT checked "
                "(Auth(check_audience=False)); tokens issued for other resources are accepted",
                self.resource,
            )

    @property
    def bearer_only(self) -> bool:
        return not self.authorization_servers

    def granted(self, principal: Principal) -> frozenset[str]:
        """The principal's scopes with every scope they imply."""
        granted = set(principal.scopes)
        todo = list(granted)
        while todo:
            for implied in self.implied_scopes.get(todo.pop(), ()):
                if implied not in granted:
                    granted.add(implied)
                    todo.append(implied)
        return frozenset(granted)

    def missing(self, principal: Principal | None, needed: Iterable[str]) -> frozenset[str]:
        """The scopes of ``needed`` the principal does not hold (all of them without one)."""
        needed = frozenset(needed)
        if principal is None:
            return needed
        return needed - self.granted(principal)

    def accept(self, principal: Principal) -> Principal:
        """Checks every verifier's principal must pass here: its audience names this resource
        (unless turned off) and it has not expired. Raises :class:`InvalidToken`."""
        audience = principal.audience
        if (
            self.check_audience
            and audience is not None
            and self.resource not in {canonical_or_none(a) for a in audience}
        ):
            raise InvalidToken("the access token was issued for another resource")
        if principal.expires_at is not None and principal.expires_at <= self.clock():
            raise InvalidToken("the access token expired")
        return principal

    async def authenticate(self, authorization: Iterable[str]) -> Principal:
        """The principal of a request's ``Authorization`` header values: read, verified and
        accepted. Raises ``BadCredential``, :class:`InvalidToken` or
        :class:`VerifierUnavailable`."""
        token = read_bearer(authorization, max_bytes=self.max_header_bytes)
        return self.accept(await self.verifier.verify(token))

    def supported(self, entry_scopes: Iterable[frozenset[str]]) -> list[str]:
        """What the metadata lists as ``scopes_supported``."""
        if self.scopes_supported is not None:
            return list(self.scopes_supported)
        found = set(self.required_scopes)
        for scopes in entry_scopes:
            found |= scopes
        return sorted(found)


def canonical_or_none(value: str) -> str | None:
    try:
        return canonical_resource(value)
    except ValueError:
        return None


class _Scoped(Protocol):
    scopes: frozenset[str]


def needed_scopes(server: Any, method: str, params: Mapping[str, Any] | None) -> frozenset[str]:
    """The scopes of the entry one request reaches (beyond ``Auth.required_scopes``): the tool
    of a ``tools/call``, the prompt of a ``prompts/get``, the resource (or first matching
    template) of a ``resources/read`` or ``resources/subscribe``, the prompt a completion is
    for, and a custom method's (``@server.method(scopes=...)``: a request or a notification).
    Anything else needs none of its own."""
    params = params or {}
    entry: _Scoped | None = None
    name = params.get("name")
    custom = server.custom_methods.get(method)
    if custom is not None:
        entry = custom
    elif method == "tools/call" and isinstance(name, str):
        entry = server.tools.get(name)
    elif method == "prompts/get" and isinstance(name, str):
        entry = server.prompts.get(name)
    elif method in ("resources/read", "resources/subscribe"):
        entry = _resource_entry(server, params.get("uri"))
    elif method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict):
            if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                entry = server.prompts.get(ref["name"])
            elif ref.get("type") == "ref/resource":
                # A completion names a template by its URI template, which another template
                # registered before it may also match as a URI.
                uri = ref.get("uri")
                entry = server.templates.get(uri) if isinstance(uri, str) else None
                if entry is None:
                    entry = _resource_entry(server, uri)
    if entry is None:
        return frozenset()
    return entry.scopes


def _resource_entry(server: Any, uri: object) -> _Scoped | None:
    if not isinstance(uri, str):
        return None
    entry: _Scoped | None = server.resources.get(uri)
    if entry is not None:
        return entry
    for template in server.templates.values():
        if template.match(uri) is not None:
            return template  # type: ignore[no-any-return]
    return None


def every_entry_scopes(server: Any) -> list[frozenset[str]]:
    """The scopes of every registered entry, for ``scopes_supported``."""
    kinds = (
        server.tools,
        server.prompts,
        server.resources,
        server.templates,
        server.custom_methods,
    )
    return [entry.scopes for entries in kinds for entry in entries.values()]
