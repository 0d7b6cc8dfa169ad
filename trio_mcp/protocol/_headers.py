"""The modern era's HTTP headers (2026-07-28): a request repeats its version, method and name in
headers, and the tool arguments its input schema marks with ``x-mcp-header``.

Both directions live here: what a client sends for a request, and the server's check that the
headers agree with the body. Sans-IO: plain functions of values.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from typing import Any

from ._envelope import PROTOCOL_VERSION_KEY
from ._jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    Request,
)
from ._versions import MODERN_VERSIONS

# -- the modern era's headers -------------------------------------------------------------------

_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def header_value(value: str) -> str:
    """A value as a header may carry it; anything unsafe goes as ``=?base64?...?=``."""
    safe = (
        value.isascii()
        and value == value.strip()
        and all(0x20 <= ord(c) < 0x7F for c in value)
        and not (value.startswith("=?") and value.endswith("?="))
    )
    if safe:
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode("ascii") + "?="


#: Argument paths (through ``properties``) a tool mirrors into headers, to the header names.
ParamHeaders = Mapping[tuple[str, ...], str]


def modern_headers(
    method: str | None,
    params: JSONObject | None,
    tool_headers: Mapping[str, ParamHeaders] | None = None,
) -> dict[str, str]:
    """A modern request repeats its version, method and name in headers (2026-07-28), so that
    intermediaries can route it without reading the body; a ``tools/call`` also repeats the
    arguments its tool marks with ``x-mcp-header`` (``tool_headers``, by tool name)."""
    meta = params.get("_meta") if params else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str) or method is None:
        return {}
    headers = {"mcp-protocol-version": version, "mcp-method": method}
    key = _NAMED.get(method)
    name = params.get(key) if params and key else None
    if isinstance(name, str):
        headers["mcp-name"] = header_value(name)
        mirrored = (tool_headers or {}).get(name) if method == "tools/call" else None
        arguments = params.get("arguments") if params else None
        for path, header in (mirrored or {}).items():
            value = param_value(_argument_at(arguments, path))
            if value is not None:
                headers["Mcp-Param-" + header] = value
    return headers


# -- x-mcp-header: tool arguments mirrored into Mcp-Param-* headers --------------------------------

X_MCP_HEADER = "x-mcp-header"
#: An HTTP field-name token (RFC 9110 section 5.6.2): what may follow ``Mcp-Param-``.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PARAM_TYPES = frozenset({"string", "integer", "boolean"})
#: Keywords holding one subschema or a list of them; a declaration under one is unreachable.
_SUBSCHEMA = frozenset(
    {
        "items",
        "prefixItems",
        "contains",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
    }
)
#: Keywords holding a map of names to subschemas (other than ``properties``).
_SUBSCHEMA_MAPS = frozenset({"$defs", "definitions", "patternProperties", "dependentSchemas"})


def tool_param_headers(input_schema: Any) -> dict[tuple[str, ...], str]:
    """The ``x-mcp-header`` declarations of a tool's input schema: each argument's path through
    ``properties`` to its header name (``Mcp-Param-`` + name).

    Raises ``ValueError`` for a declaration the spec forbids: a name that is not an HTTP token
    (empty, spaces, ``:``, non-ASCII, control characters), one repeated (case-insensitively), on
    a parameter that is not a string, integer or boolean, or not reachable through
    ``properties`` alone. Clients must not use such a tool: what it would put in headers is
    undefined.
    """
    found: dict[tuple[str, ...], str] = {}
    _collect_param_headers(input_schema, (), found)
    return found


def _collect_param_headers(
    node: Any, path: tuple[str, ...] | None, found: dict[tuple[str, ...], str]
) -> None:
    """Walk a schema; ``path`` is None once the walk left the ``properties``-only chain."""
    if isinstance(node, list):
        for item in node:
            _collect_param_headers(item, None, found)
        return
    if not isinstance(node, dict):
        return
    if X_MCP_HEADER in node:
        name = node[X_MCP_HEADER]
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"{X_MCP_HEADER} {name!r} is not an HTTP header name token")
        if not path:
            raise ValueError(f"{X_MCP_HEADER} {name!r} is not on a property reached by properties")
        if not _is_primitive(node):
            raise ValueError(f"{X_MCP_HEADER} {name!r} is on a {node.get('type')!r} parameter")
        if name.lower() in {known.lower() for known in found.values()}:
            raise ValueError(f"{X_MCP_HEADER} {name!r} is declared twice")
        found[path] = name
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            for prop, schema in value.items():
                _collect_param_headers(schema, None if path is None else (*path, prop), found)
        elif key in _SUBSCHEMA:
            _collect_param_headers(value, None, found)
        elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            for schema in value.values():
                _collect_param_headers(schema, None, found)


def _is_primitive(schema: dict[str, Any]) -> bool:
    """A string, integer or boolean, maybe nullable: by ``type`` (a name or a list), by
    ``anyOf``/``oneOf`` branches of such types (how an optional parameter is often written),
    or else by its ``enum``/``const`` values."""
    kinds = _types_of(schema.get("type"))
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        for branch in branches if isinstance(branches, list) else ():
            branch_kinds = _types_of(branch.get("type") if isinstance(branch, dict) else None)
            if not branch_kinds:
                return False
            kinds += branch_kinds
    if not kinds and ("enum" in schema or "const" in schema):
        values = schema.get("enum") if "enum" in schema else [schema["const"]]
        kinds = [_JSON_TYPES.get(type(v)) for v in values] if isinstance(values, list) else []
    named = [k for k in kinds if k != "null"]
    return bool(named) and all(isinstance(k, str) and k in _PARAM_TYPES for k in named)


def _types_of(kind: Any) -> list[Any]:
    if isinstance(kind, list):
        return list(kind)
    return [] if kind is None else [kind]


_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", bool: "boolean", type(None): "null"}


def _argument_at(arguments: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(arguments, dict):
            return None
        arguments = arguments.get(key)
    return arguments


def param_value(value: Any) -> str | None:
    """An argument as its ``Mcp-Param-*`` header carries it; None (null or absent, or not a
    primitive) leaves the header out."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return header_value(value)
    return None


# -- the server's check ---------------------------------------------------------------------------

#: The body field each name-bearing method repeats in ``Mcp-Name``.
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class HeaderProblem(Exception):
    """A modern request refused before it runs: the JSON-RPC code and message to answer."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


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
