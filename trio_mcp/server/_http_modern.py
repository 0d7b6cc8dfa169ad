"""The modern era over Streamable HTTP (2026-07-28): routing, header checks, status codes.

A modern request is one POST with no session: it repeats its protocol version, method and name
in headers (so intermediaries can route it without the body), and the server must refuse a
header that disagrees with the body. Pure functions; the app does the serving.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ..protocol._envelope import PROTOCOL_VERSION_KEY
from ..protocol._jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    Request,
)
from ..protocol._versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS

#: The body field each name-bearing method repeats in ``Mcp-Name``.
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

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


class HeaderProblem(Exception):
    """A modern request refused before it runs: the JSON-RPC code and message to answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


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


def decode_header(value: str) -> str:
    """Undo the ``=?base64?...?=`` form a client uses for values unsafe in a header."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise HeaderProblem(
                HEADER_MISMATCH, f"Header mismatch: {value!r} is not valid base64"
            ) from None
    return value


def _mismatch(header: str, sent: str, body: object) -> HeaderProblem:
    return HeaderProblem(
        HEADER_MISMATCH,
        f"Header mismatch: {header} header value {sent!r} does not match body value {body!r}",
    )


def check_request(
    request: Request,
    headers: Mapping[str, str],
    tool_schemas: Mapping[str, Mapping[str, Any]],
) -> None:
    """Check a modern request's headers against its body; raise :class:`HeaderProblem`."""
    version = headers.get("mcp-protocol-version", "")
    if version not in MODERN_VERSIONS:
        raise HeaderProblem(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version or "unknown"},
        )
    params = request.params or {}
    meta = params.get("_meta")
    if not isinstance(meta, dict) or PROTOCOL_VERSION_KEY not in meta:
        raise HeaderProblem(
            INVALID_PARAMS,
            f"Invalid params: missing or invalid `{PROTOCOL_VERSION_KEY}` in `_meta`",
        )
    if meta[PROTOCOL_VERSION_KEY] != version:
        raise _mismatch("MCP-Protocol-Version", version, meta[PROTOCOL_VERSION_KEY])
    method = headers.get("mcp-method")
    if method is None:
        raise HeaderProblem(HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is missing")
    if method != request.method:
        raise _mismatch("Mcp-Method", method, request.method)
    field = NAMED.get(request.method)
    if field is not None:
        sent = headers.get("mcp-name")
        if sent is None:
            raise HeaderProblem(
                HEADER_MISMATCH, f"Header mismatch: {request.method} needs an Mcp-Name header"
            )
        if decode_header(sent) != params.get(field):
            raise _mismatch("Mcp-Name", decode_header(sent), params.get(field))
    if request.method == "tools/call":
        schema = tool_schemas.get(str(params.get("name")))
        arguments = params.get("arguments")
        if schema is not None and isinstance(arguments, dict):
            _check_params(schema, arguments, headers)


def _check_params(
    schema: Mapping[str, Any], arguments: Mapping[str, Any], headers: Mapping[str, str]
) -> None:
    """Arguments a tool mirrors into ``Mcp-Param-*`` headers (``x-mcp-header``) must agree."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    for argument, spec in properties.items():
        name = spec.get("x-mcp-header") if isinstance(spec, dict) else None
        value = arguments.get(argument)
        if not isinstance(name, str) or value is None:
            continue
        header = f"Mcp-Param-{name}"
        sent = headers.get(header.lower())
        if sent is None:
            raise HeaderProblem(HEADER_MISMATCH, f"Header mismatch: {header} is missing")
        decoded = decode_header(sent)
        if isinstance(value, bool):
            agrees = decoded == ("true" if value else "false")
        elif isinstance(value, int):
            try:
                agrees = int(decoded) == value
            except ValueError:
                agrees = False
        else:
            agrees = decoded == str(value)
        if not agrees:
            raise _mismatch(header, decoded, value)
