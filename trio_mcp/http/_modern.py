"""The modern era over Streamable HTTP (2026-07-28): routing and status codes.

A modern request is one POST with no session. Its headers are checked against its body by the
header codec (``protocol/_headers.py``). Pure functions; the app does the serving.
"""

from __future__ import annotations

from ..protocol._jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ..protocol._versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS

_BAD_REQUEST_CODES = frozenset(
    {
        HEADER_MISMATCH,
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        UNSUPPORTED_PROTOCOL_VERSION,
        PARSE_ERROR,
        INVALID_REQUEST,
        INVALID_PARAMS,
    }
)


def status_for(code: int | None) -> int:
    """The HTTP status a modern response travels with: 404 for an unknown method, 400 for the
    request's own faults, 200 for everything else (results and server-side errors)."""
    if code == METHOD_NOT_FOUND:
        return 404
    if code in _BAD_REQUEST_CODES:
        return 400
    return 200


def is_modern(version_header: str | None, has_session: bool, initialize_body: bool) -> bool:
    """Whether a POST takes the modern path.

    No header, an empty one, or a handshake version: the handshake era. A modern version: modern,
    unless the request belongs to a session or is a plain ``initialize`` opening one. Any other
    value: modern too, so that it is answered with the supported versions (-32022).
    """
    if not version_header or version_header in HANDSHAKE_VERSIONS:
        return False
    if version_header in MODERN_VERSIONS:
        return not (has_session or initialize_body)
    return True
