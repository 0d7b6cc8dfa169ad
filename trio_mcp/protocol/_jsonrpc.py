"""JSON-RPC 2.0 framing: bytes in, typed messages out, and back.

Sans-IO, like h11: nothing here reads a socket or knows about trio. The engine feeds bytes to
:func:`parse` and writes what :func:`encode` returns.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping
from typing import Any, Final, TypeAlias, TypeGuard

import attrs
import orjson

RequestId: TypeAlias = "int | str"
JSONObject: TypeAlias = "dict[str, Any]"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP-specific codes.
RESOURCE_NOT_FOUND = -32002
URL_ELICITATION_REQUIRED = -32042
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: The JSON-RPC code of the error a request gets when the server forgot the session and the
#: request was not repeated (``tools/call``, or a list continuation with a cursor).
SESSION_EXPIRED = -32001
#: The JSON-RPC code of a request refused by a rate limit (``RateLimitMiddleware``; ``data``
#: says when to try again): -32000 begins the range JSON-RPC leaves to servers.
RATE_LIMITED = -32000

STANDARD_MESSAGES: Mapping[int, str] = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}


class _NoData(enum.Enum):
    """The type of :data:`NO_DATA` (an enum member: one value, kept by copy and pickle)."""

    NO_DATA = "NO_DATA"

    def __repr__(self) -> str:
        return "NO_DATA"


#: The ``data`` of an error that has none: the member is left out on the wire. Not ``None``,
#: which is a JSON ``null`` a peer may send as data.
NO_DATA: Final = _NoData.NO_DATA


@attrs.frozen
class ErrorObject:
    """The ``error`` member of an error response; ``data`` is :data:`NO_DATA` when absent."""

    code: int
    message: str
    data: Any = NO_DATA

    @classmethod
    def make(cls, code: int, message: str | None = None, *, data: Any = NO_DATA) -> ErrorObject:
        """Build an error; without a ``message``, the standard one for ``code``."""
        text = message if message is not None else STANDARD_MESSAGES.get(code, "Error")
        return cls(code, text, data)

    def to_json(self) -> JSONObject:
        out: JSONObject = {"code": self.code, "message": self.message}
        if self.data is not NO_DATA:
            out["data"] = self.data
        return out


# Messages have no __weakref__ slot: every request in flight holds its Request.
@attrs.frozen(weakref_slot=False)
class Request:
    id: RequestId
    method: str
    params: JSONObject | None = None


@attrs.frozen(weakref_slot=False)
class Notification:
    method: str
    params: JSONObject | None = None


@attrs.frozen(weakref_slot=False)
class Response:
    id: RequestId
    result: JSONObject


@attrs.frozen(weakref_slot=False)
class ErrorResponse:
    id: RequestId | None
    error: ErrorObject


Message: TypeAlias = "Request | Notification | Response | ErrorResponse"


@attrs.frozen
class Invalid:
    """A frame that could not be understood; answer it with :attr:`error` (id may be null).

    ``answer``: it is shaped as an answer (no ``method``) and names the id of a request it may
    answer: the request of ours with that id fails with it, rather than wait for an answer that
    will not come in any other form.
    """

    id: RequestId | None
    error: ErrorObject
    answer: bool = False

    def response(self) -> ErrorResponse:
        return ErrorResponse(self.id, self.error)


Parsed: TypeAlias = "Message | Invalid"


@attrs.frozen
class Batch:
    """A JSON-RPC batch (2025-03-26 allows them): its members, each parsed on its own."""

    items: tuple[Parsed, ...]


def is_valid_id(value: object) -> TypeGuard[RequestId]:
    """Ids are strings or integers (of any size); null, floats and booleans are not ids."""
    kind = type(value)
    if kind is int or kind is str:  # what a decoder gives: no isinstance calls on the hot path
        return True
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# Ids of any size. JSON-RPC allows any number as an id and JSON any integer; orjson reads an
# integer outside the 64-bit range as a float and cannot write one. So a frame whose id (or the
# id a cancel or a progress notification names) came back as such a float is read once more
# with exact integers, and a message holding one is written with it spliced in exactly. Both
# happen only for those frames: the common path is orjson's alone. Such an integer anywhere else
# (in a result, say) still cannot be written: its request gets the generic -32603.

#: Outside [-2**63, 2**64) orjson reads an integer as a float.
_WIDE_FLOAT = float(2**63)


def _maybe_wide(value: object) -> bool:
    """Whether ``value`` may be an integer orjson read as a float (too large for 64 bits)."""
    return isinstance(value, float) and abs(value) >= _WIDE_FLOAT and value.is_integer()


def _names_wide_id(obj: object) -> bool:
    """Whether an id, or the id or token a message's params name, may have lost its exactness.

    Run on every frame orjson decoded (so its objects are plain dicts): written with operators
    alone, it makes no call unless a float is where an id may be."""
    if type(obj) is not dict:
        return False
    if "id" in obj and type(obj["id"]) is float and _maybe_wide(obj["id"]):
        return True
    if "params" not in obj or type(params := obj["params"]) is not dict:
        return False
    for key in ("requestId", "progressToken"):
        if key in params and type(params[key]) is float and _maybe_wide(params[key]):
            return True
    if "_meta" not in params or type(meta := params["_meta"]) is not dict:
        return False
    return (
        "progressToken" in meta
        and type(meta["progressToken"]) is float
        and _maybe_wide(meta["progressToken"])
    )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _exact(data: bytes | bytearray | memoryview | str, fallback: Any) -> Any:
    """``data`` decoded with integers of any size, or ``fallback`` if that fails (integers too
    long for Python's own limit on digits, nesting deeper than its recursion limit)."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return fallback


def _is_wide_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64


def _exact_ids(out: JSONObject) -> JSONObject:
    """``out`` with its id, and the id or token its params name, as exact JSON text where
    orjson cannot write them. Nothing else: a result holding such an integer still fails."""

    def exact(value: Any) -> Any:
        return orjson.Fragment(str(value)) if _is_wide_int(value) else value

    out = {**out, "id": exact(out["id"])} if "id" in out else dict(out)
    params = out.get("params")
    if isinstance(params, dict):
        params = {**params}
        for key in ("requestId", "progressToken"):
            if key in params:
                params[key] = exact(params[key])
        meta = params.get("_meta")
        if isinstance(meta, dict) and "progressToken" in meta:
            params["_meta"] = {**meta, "progressToken": exact(meta["progressToken"])}
        out["params"] = params
    return out


def parse(data: bytes | bytearray | memoryview | str) -> Parsed | Batch:
    """Turn one framed JSON text into a message, a batch, or an :class:`Invalid` to answer."""
    try:
        obj = orjson.loads(data)
    except (orjson.JSONDecodeError, TypeError) as exc:
        return _unreadable(data, exc)
    if isinstance(obj, list):
        if not obj:
            return Invalid(None, ErrorObject.make(INVALID_REQUEST, "Invalid Request: empty batch"))
        if any(_names_wide_id(item) for item in obj):
            obj = _exact(data, obj)
        return Batch(tuple(parse_object(item) for item in obj))
    if _names_wide_id(obj):
        obj = _exact(data, obj)
    return parse_object(obj)


def _unreadable(data: bytes | bytearray | memoryview | str, exc: Exception) -> Invalid:
    """A frame orjson cannot read: a parse error. JSON whose only fault is a lone surrogate
    (``"\\ud800"``: Python's own ``json.dumps`` writes one for a string from a file name, and
    its ``json.loads`` reads it) keeps its id when it is an answer, so that the request it
    answers fails with it instead of waiting for an answer that will not come."""
    if "surrogate" in str(exc):
        try:
            text = data if isinstance(data, str) else bytes(data)
            obj = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and "method" not in obj and is_valid_id(obj.get("id")):
            error = ErrorObject.make(
                PARSE_ERROR, "Parse error: Invalid JSON", data="a lone surrogate is not a character"
            )
            return Invalid(obj["id"], error, answer=True)
    return Invalid(None, ErrorObject.make(PARSE_ERROR, "Parse error: Invalid JSON"))


def _invalid(obj: Mapping[str, Any], why: str) -> Invalid:
    rid = obj.get("id")
    valid = is_valid_id(rid)
    return Invalid(
        rid if valid else None,
        ErrorObject.make(INVALID_REQUEST, "Invalid Request", data=why),
        answer=valid and "method" not in obj,
    )


def parse_object(obj: object) -> Parsed:
    """Classify one decoded JSON value as a JSON-RPC message."""
    if type(obj) is not dict and not isinstance(obj, dict):
        return Invalid(
            None,
            ErrorObject.make(INVALID_REQUEST, "Invalid Request", data="message must be an object"),
        )
    if obj.get("jsonrpc") != "2.0":
        return _invalid(obj, 'the "jsonrpc" member must be "2.0"')
    if "method" in obj:
        method = obj["method"]
        if (type(method) is not str and not isinstance(method, str)) or not method:
            return _invalid(obj, 'the "method" member must be a non-empty string')
        params = obj.get("params")
        if params is not None and type(params) is not dict and not isinstance(params, dict):
            return _invalid(obj, 'the "params" member must be an object')
        # A method name is held by every request in flight: one string per name, not per message.
        method = sys.intern(method)
        if "id" not in obj or obj["id"] is None:
            return Notification(method, params)
        rid = obj["id"]
        if not is_valid_id(rid):
            return _invalid(obj, 'the "id" member must be a string or an integer')
        return Request(rid, method, params)
    rid = obj.get("id")
    if "result" in obj:
        result = obj["result"]
        if not is_valid_id(rid):
            return _invalid(obj, "a response needs a string or integer id")
        if not isinstance(result, dict):
            return _invalid(obj, 'the "result" member must be an object')
        return Response(rid, result)
    if "error" in obj:
        err = obj["error"]
        if (
            not isinstance(err, dict)
            or not isinstance(err.get("code"), int)
            or isinstance(err.get("code"), bool)
        ):
            return _invalid(obj, 'the "error" member must be an object with an integer code')
        message = err.get("message")
        error = ErrorObject(
            err["code"], message if isinstance(message, str) else "", err.get("data", NO_DATA)
        )
        return ErrorResponse(rid if is_valid_id(rid) else None, error)
    return _invalid(obj, "not a request, notification or response")


def to_json(message: Message | Invalid) -> JSONObject:
    """The JSON object for one message."""
    if type(message) is Response:  # the commonest, told apart with no call
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    if isinstance(message, Request):
        out: JSONObject = {"jsonrpc": "2.0", "id": message.id, "method": message.method}
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, Notification):
        out = {"jsonrpc": "2.0", "method": message.method}
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, Response):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    return {"jsonrpc": "2.0", "id": message.id, "error": message.error.to_json()}


def encode(message: Message | Invalid) -> bytes:
    """Serialize one message to compact JSON bytes (no trailing newline).

    Raises :class:`TypeError` for what JSON cannot hold (an object in a result, say)."""
    out = to_json(message)
    try:
        return orjson.dumps(out)
    except orjson.JSONEncodeError:
        # An id outside 64 bits (one a peer chose) is written exactly; anything else that
        # cannot be serialized still raises.
        return orjson.dumps(_exact_ids(out))


def describe_id(rid: RequestId) -> str:
    """How an id is quoted in messages: strings in double quotes, integers bare."""
    return str(rid) if isinstance(rid, int) else orjson.dumps(rid).decode()
