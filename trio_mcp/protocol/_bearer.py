"""Bearer tokens at a resource server, sans-IO: reading the credential, writing the challenge.

What a protected MCP server says on the wire, with no I/O and no clock: the ``Authorization``
header read by the rules of RFC 6750 §2.1 (one ``Bearer`` credential in the ``b64token``
grammar, bounded in size), the ``WWW-Authenticate`` challenge of §3 (and the
``resource_metadata`` parameter of RFC 9728 §5.1), and the Protected Resource Metadata document
with the well-known paths it is served at (RFC 9728 §3). The client side of the same formats is
in :mod:`._oauth`.

A refusal never carries the credential it refused: :class:`BadCredential` names what is wrong
with the header's shape, and nothing of its content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from ._errors import MCPError
from ._oauth import PRM_WELL_KNOWN

#: RFC 6750 §2.1: ``b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="``.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: The largest ``Authorization`` header read at all; a JWT with many claims is a few KiB.
MAX_AUTHORIZATION_BYTES = 8192
#: Error codes of RFC 6750 §3.1.
INVALID_REQUEST = "invalid_request"
INVALID_TOKEN = "invalid_token"
INSUFFICIENT_SCOPE = "insufficient_scope"


class BadCredential(MCPError):
    """The request carries a credential in a form the server does not take (HTTP 400, or 401
    when ``missing``: no credential at all). The message is safe to show: it never quotes the
    header."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


def read_bearer(values: Iterable[str], *, max_bytes: int = MAX_AUTHORIZATION_BYTES) -> str:
    """The access token of a request's ``Authorization`` header values.

    Raises :class:`BadCredential`: ``missing`` when there is no header, one with another
    scheme, or a bare ``Bearer`` with nothing after it (a client that has no token yet, which a
    401 asks for one); a 400 case for two headers, an oversized one, or a Bearer credential
    outside the ``b64token`` grammar.
    """
    found = list(values)
    if not found:
        raise BadCredential("no access token: send `Authorization: Bearer <token>`", missing=True)
    if len(found) > 1:
        raise BadCredential("more than one Authorization header")
    value = found[0]
    if len(value) > max_bytes:
        raise BadCredential(f"the Authorization header is over the limit of {max_bytes} bytes")
    scheme, _, credential = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise BadCredential("the Authorization header does not carry a Bearer token", missing=True)
    credential = credential.strip(" ")
    if not credential:
        raise BadCredential("the Authorization header carries no Bearer token", missing=True)
    if not _B64TOKEN.fullmatch(credential):
        raise BadCredential("the Bearer credential is not a token (RFC 6750 section 2.1)")
    return credential


def token_in_query(query_string: bytes) -> bool:
    """Whether a query string carries ``access_token`` (RFC 6750 §2.3), which MCP forbids.

    The name is compared once percent-decoded (``access%5Ftoken``, ``%61ccess_token``), as the
    server behind would read it."""
    for pair in query_string.split(b"&"):
        name = pair.partition(b"=")[0]
        if unquote_to_bytes(name.replace(b"+", b" ")) == b"access_token":
            return True
    return False


#: The longest ``error_description`` put in a challenge; a longer one is cut.
MAX_DESCRIPTION = 512


def _quoted(value: str) -> str:
    # RFC 9110 §5.6.4 quoted-string: backslash-escape the quote and the backslash. The header
    # stays printable ASCII whatever the value holds: control characters are dropped and any
    # other character outside it becomes "?", so formatting never raises and nothing can end
    # the header or the parameter early.
    clean = "".join(ch if " " <= ch <= "~" else "?" for ch in value if ch >= " " and ch != "\x7f")
    return '"' + clean.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _description(text: str) -> str:
    # RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E, so no quote and no
    # backslash even escaped; bounded, since it may come from a verifier's message.
    text = text.replace('"', "'").replace("\\", "/")
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3] + "..."


def format_challenge(
    *,
    error: str | None = None,
    description: str | None = None,
    scope: Iterable[str] = (),
    resource_metadata: str | None = None,
    realm: str | None = None,
) -> str:
    """A ``WWW-Authenticate: Bearer`` value (RFC 6750 §3, RFC 9728 §5.1).

    ``scope`` is every scope the operation needs, sorted so the challenge is stable. The value
    is printable ASCII whatever the arguments hold (see :func:`_quoted`); the description keeps
    to RFC 6750's characters.
    """
    params: list[tuple[str, str]] = []
    if realm is not None:
        params.append(("realm", realm))
    if error is not None:
        params.append(("error", error))
    if description is not None:
        params.append(("error_description", _description(description)))
    scopes = sorted(set(scope))
    if scopes:
        params.append(("scope", " ".join(scopes)))
    if resource_metadata is not None:
        params.append(("resource_metadata", resource_metadata))
    if not params:
        return "Bearer"
    return "Bearer " + ", ".join(f"{name}={_quoted(value)}" for name, value in params)


def metadata_paths(resource_path: str) -> tuple[str, str]:
    """The two well-known paths of a resource's metadata: path-based first (RFC 9728 §3.1,
    the well-known segment before the resource's path), then the root one."""
    path = resource_path.rstrip("/")
    return (PRM_WELL_KNOWN + path if path else PRM_WELL_KNOWN, PRM_WELL_KNOWN)


def resource_metadata(
    resource: str,
    *,
    authorization_servers: Iterable[str] = (),
    scopes_supported: Iterable[str] = (),
    resource_name: str | None = None,
    resource_documentation: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Protected Resource Metadata document (RFC 9728 §2) of ``resource``.

    Tokens go in the header only (``bearer_methods_supported``). ``offline_access`` is never
    listed: it is a scope of the authorization server, not of this resource.
    """
    document: dict[str, Any] = dict(extra or {})
    document["resource"] = resource
    servers = list(authorization_servers)
    if servers:
        document["authorization_servers"] = servers
    scopes = [scope for scope in scopes_supported if scope != "offline_access"]
    if scopes:
        document["scopes_supported"] = scopes
    document["bearer_methods_supported"] = ["header"]
    if resource_name is not None:
        document["resource_name"] = resource_name
    if resource_documentation is not None:
        document["resource_documentation"] = resource_documentation
    return document
