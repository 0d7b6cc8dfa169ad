"""The modern era's HTTP headers (2026-07-28), both directions, one codec.

A modern POST repeats its protocol version, method and name in headers, so that intermediaries
can route it without reading the body; a ``tools/call`` also repeats the arguments its tool's
input schema marks with ``x-mcp-header`` as ``Mcp-Param-{name}`` headers. A value a header
cannot carry as it is travels as ``=?base64?{UTF-8, base64}?=``.

The client computes its headers with :func:`modern_headers`. The server's :func:`check_request`
computes the same headers for the body it received, with the same functions, and compares: the
two halves cannot disagree about what a body's headers are. Sans-IO: plain functions of values.

The canonical text of an argument (:func:`param_text`) is decided by its JSON value:

- a string is itself (any characters; the encoding makes it safe);
- a boolean is ``true`` or ``false``;
- a number with no fractional part is its decimal integer, however the body wrote it: ``2``,
  ``2.0`` and ``2e0`` are all ``2`` (the spec: integers are sent in decimal, and a server
  compares them numerically);
- any other finite number is its shortest round-trip decimal (``2.5``); a declared parameter is
  never a ``number``, so only a body that breaks its schema has one;
- ``null``, an absent argument, an object, an array: no header.

A server compares numbers numerically, as the spec asks, so a header written ``42.0`` by
another client agrees with a body ``42``; anything else must equal the canonical text.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from ._envelope import PROTOCOL_VERSION_KEY
from ._errors import ProtocolError
from ._jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    Request,
)
from ._versions import MODERN_VERSIONS

#: Header names (lowercase; HTTP header names are case-insensitive).
PROTOCOL_VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
#: What precedes an ``x-mcp-header`` name to make its header's name.
PARAM_HEADER_PREFIX = "Mcp-Param-"
#: The schema keyword that declares a parameter's header.
X_MCP_HEADER = "x-mcp-header"

#: The body field each name-bearing method repeats in ``Mcp-Name``.
NAMED = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension (SEP-2663): the task id, so a load balancer can route on it.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

#: Argument paths (through ``properties``) a tool mirrors into headers, to the header names.
ParamHeaders = Mapping[tuple[str, ...], str]


# -- header values -------------------------------------------------------------------------------

_BASE64_PREFIX = "=?base64?"
_BASE64_SUFFIX = "?="
_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
#: What a header value may carry as it is (RFC 9110 section 5.5: visible ASCII, space, tab).
_FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")


def encode_header_value(text: str) -> str:
    """``text`` as a header carries it: as it is when that is safe (printable ASCII with no
    leading or trailing space, and not looking like the base64 form), else ``=?base64?...?=``."""
    safe = (
        text.isascii()
        and text == text.strip()
        and all(0x20 <= ord(c) < 0x7F for c in text)
        and not (text.startswith("=?") and text.endswith("?="))
    )
    if safe:
        return text
    return _BASE64_PREFIX + base64.b64encode(text.encode()).decode("ascii") + _BASE64_SUFFIX


def decode_header_value(value: str) -> str:
    """The text a header value carries: the ``=?base64?...?=`` form undone.

    Raises :class:`ProtocolError` (-32020) for what no client sends: base64 that is invalid or
    not in its canonical form (padding, trailing bits), bytes that are not UTF-8, or a plain
    value with characters a header may not carry.
    """
    match = _SENTINEL.fullmatch(value)
    if match is None:
        if not _FIELD_VALUE.fullmatch(value):
            raise ProtocolError(
                HEADER_MISMATCH, f"Header mismatch: {value!r} holds characters a header cannot"
            )
        return value
    payload = match.group(1)
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:
            raise ValueError("not the canonical encoding")
        return raw.decode()
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise ProtocolError(
            HEADER_MISMATCH, f"Header mismatch: {value!r} is not valid base64"
        ) from None


def param_text(value: Any) -> str | None:
    """The canonical text of an argument's header (see the module's docstring), not yet
    encoded; None leaves the header out."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    return None


def param_value(value: Any) -> str | None:
    """An argument as its ``Mcp-Param-*`` header carries it (its canonical text, encoded);
    None (null or absent, or not a primitive) leaves the header out."""
    text = param_text(value)
    return None if text is None else encode_header_value(text)


#: A plain decimal: what a header may write a number as, to be compared numerically.
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def _agrees(sent: str, text: str, value: Any) -> bool:
    """Whether a header's text ``sent`` says the same as the canonical ``text`` of ``value``."""
    if sent == text:
        return True
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return is_number and _DECIMAL.fullmatch(sent) is not None and Decimal(sent) == Decimal(text)


# -- x-mcp-header: the declarations of a tool's input schema ---------------------------------------

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
    ``properties`` (at any depth) to its header name (``Mcp-Param-`` + name).

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


# -- what a client sends -------------------------------------------------------------------------


def param_headers(declared: ParamHeaders, arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a ``tools/call``'s arguments, for its tool's declarations
    (:func:`tool_param_headers`): one for each declared argument with a value a header carries."""
    headers: dict[str, str] = {}
    for path, name in declared.items():
        value = param_value(_argument_at(arguments, path))
        if value is not None:
            headers[PARAM_HEADER_PREFIX + name] = value
    return headers


def modern_headers(
    method: str | None,
    params: JSONObject | None,
    tool_headers: Mapping[str, ParamHeaders] | None = None,
) -> dict[str, str]:
    """The headers of a modern request: its version, method and name, and for a ``tools/call``
    the arguments its tool declares (``tool_headers``, declarations by tool name).

    Empty for a request that is not modern (no protocol version in ``_meta``).
    """
    meta = params.get("_meta") if params else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str) or method is None:
        return {}
    headers = {PROTOCOL_VERSION_HEADER: version, METHOD_HEADER: method}
    key = NAMED.get(method)
    name = params.get(key) if params and key else None
    if isinstance(name, str):
        headers[NAME_HEADER] = encode_header_value(name)
        declared = (tool_headers or {}).get(name) if method == "tools/call" else None
        if declared:
            headers.update(param_headers(declared, params.get("arguments") if params else None))
    return headers


# -- the server's check --------------------------------------------------------------------------


def _mismatch(header: str, sent: str, body: object) -> ProtocolError:
    return ProtocolError(
        HEADER_MISMATCH,
        f"Header mismatch: {header} header value {sent!r} does not match body value {body!r}",
    )


#: A server's tools' ``x-mcp-header`` declarations, looked up by tool name: a tool's
#: :func:`tool_param_headers` (none for an unknown tool), or its ``ValueError``.
Declarations = Callable[[str], ParamHeaders]


def schema_declarations(tool_schemas: Mapping[str, Mapping[str, Any]]) -> Declarations:
    """:data:`Declarations` read from tools' input schemas, by name, at each lookup. A server
    keeps each tool's instead, walked once: a schema is walked whole to find them."""

    def declared(name: str) -> ParamHeaders:
        schema = tool_schemas.get(name)
        return {} if schema is None else tool_param_headers(schema)

    return declared


def _declared(name: Any, declarations: Declarations) -> ParamHeaders:
    """The declarations of the tool a ``tools/call`` names (none for an unknown tool)."""
    if not isinstance(name, str):
        return {}
    try:
        return declarations(name)
    except ValueError as exc:
        # No client may call it (its headers are undefined): refuse rather than check less.
        raise ProtocolError(
            HEADER_MISMATCH,
            f"Header mismatch: the tool {name!r} cannot be called over HTTP: {exc}",
        ) from None


def check_request(
    request: Request,
    headers: Mapping[str, str],
    declarations: Declarations,
) -> None:
    """Check a modern request's headers against its body; raise :class:`ProtocolError` with
    the error that refuses the request before it runs.

    The headers must be the ones :func:`modern_headers` gives for this body (header names in
    any case, values with optional whitespace around them, the base64 form wherever a client
    chose it, and numbers compared numerically). Only the ``Mcp-`` headers are read: a server
    may pass those alone. ``declarations`` gives the server's tools' ``x-mcp-header``
    declarations by name. Mcp-Param headers no declaration names are left alone: they may be
    meant for an intermediary.
    """
    sent = {name.lower(): value.strip(" \t") for name, value in headers.items()}
    version = sent.get(PROTOCOL_VERSION_HEADER, "")
    if version not in MODERN_VERSIONS:
        raise ProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version or "unknown"},
        )
    params = request.params or {}
    meta = params.get("_meta")
    if not isinstance(meta, dict) or PROTOCOL_VERSION_KEY not in meta:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid params: missing or invalid `{PROTOCOL_VERSION_KEY}` in `_meta`",
        )
    body_version = meta[PROTOCOL_VERSION_KEY]
    if body_version != version:  # (a body version that is no string never equals a header)
        raise _mismatch("MCP-Protocol-Version", version, body_version)
    method = sent.get(METHOD_HEADER)
    if method is None:
        raise ProtocolError(HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is missing")
    if method != request.method:
        raise _mismatch("Mcp-Method", method, request.method)
    field = NAMED.get(request.method)
    if field is not None:
        name = sent.get(NAME_HEADER)
        if name is None:
            raise ProtocolError(
                HEADER_MISMATCH, f"Header mismatch: {request.method} needs an Mcp-Name header"
            )
        # What the client sent (either form, decoded) against the body's name itself: the
        # header a client must send for it decodes to exactly that name.
        text = decode_header_value(name)
        named = params.get(field)
        if not isinstance(named, str) or text != named:
            raise _mismatch("Mcp-Name", text, named)
    tool = params.get("name")
    declared = _declared(tool, declarations) if request.method == "tools/call" else {}
    if not declared:
        return
    expected = param_headers(declared, params.get("arguments"))
    arguments = params.get("arguments")
    for path, param in declared.items():
        header = PARAM_HEADER_PREFIX + param
        value = sent.get(header.lower())
        want = expected.get(header)
        if value is None:
            if want is None:
                continue  # null or absent in the body: no header either
            raise ProtocolError(HEADER_MISMATCH, f"Header mismatch: {header} is missing")
        text = decode_header_value(value)
        body = _argument_at(arguments, path)
        if want is None or not _agrees(text, decode_header_value(want), body):
            raise _mismatch(header, text, body)
