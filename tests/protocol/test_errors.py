"""The error model: one ErrorObject on the wire, one ProtocolError carrying it, data that is
absent kept apart from data that is null, and error codes that never share a value."""

from __future__ import annotations

import ast
import copy
import pickle
from pathlib import Path

import orjson
import pytest

import trio_mcp.protocol
from trio_mcp.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NO_DATA,
    ConnectionClosed,
    ErrorObject,
    ErrorResponse,
    MCPError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    _jsonrpc,
    encode,
    parse,
)


def _error_of(frame: bytes) -> ErrorObject:
    parsed = parse(frame)
    assert isinstance(parsed, ErrorResponse)
    return parsed.error


def test_absent_data_and_null_data_survive_a_round_trip_apart() -> None:
    absent = _error_of(b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}')
    null = _error_of(b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":null}}')
    assert absent.data is NO_DATA
    assert null.data is None
    assert absent != null
    assert orjson.loads(encode(ErrorResponse(1, absent)))["error"] == {"code": -1, "message": "m"}
    assert orjson.loads(encode(ErrorResponse(1, null)))["error"] == {
        "code": -1,
        "message": "m",
        "data": None,
    }


@pytest.mark.parametrize("data", [0, "", [], {}, False, {"k": [1, None]}])
def test_falsy_data_is_still_data(data: object) -> None:
    frame = encode(ErrorResponse(7, ErrorObject.make(-2, "m", data=data)))
    error = _error_of(frame)
    assert error.data == data and error.data is not NO_DATA
    assert orjson.loads(frame)["error"]["data"] == data


def test_make_gives_the_standard_message_and_no_data_by_default() -> None:
    assert ErrorObject.make(METHOD_NOT_FOUND) == ErrorObject(
        METHOD_NOT_FOUND, "Method not found", NO_DATA
    )
    assert ErrorObject.make(-1).message == "Error"
    assert ErrorObject.make(INVALID_PARAMS, "bad", data=None).data is None
    assert ErrorObject.make(INVALID_PARAMS, "bad").to_json() == {
        "code": INVALID_PARAMS,
        "message": "bad",
    }


def test_the_sentinel_is_one_value_that_is_not_none() -> None:
    assert NO_DATA is not None and NO_DATA != None  # noqa: E711
    assert copy.deepcopy(NO_DATA) is NO_DATA
    assert pickle.loads(pickle.dumps(NO_DATA)) is NO_DATA
    assert repr(NO_DATA) == "NO_DATA"
    assert "NO_DATA" in repr(ErrorObject.make(-1))


def test_protocol_error_carries_one_error_object() -> None:
    exc = ProtocolError(INVALID_PARAMS, "Invalid params: x", {"field": "x"})
    assert exc.error == ErrorObject(INVALID_PARAMS, "Invalid params: x", {"field": "x"})
    assert (exc.code, exc.message, exc.data) == (
        INVALID_PARAMS,
        "Invalid params: x",
        {"field": "x"},
    )
    assert str(exc) == f"Invalid params: x (code {INVALID_PARAMS})"
    bare = ProtocolError(INTERNAL_ERROR)
    assert bare.message == "Internal error" and bare.data is NO_DATA
    assert "data" not in bare.error.to_json()
    assert ProtocolError(-1, "m", None).error.to_json() == {
        "code": -1,
        "message": "m",
        "data": None,
    }


def test_from_error_keeps_the_error_and_the_subclass() -> None:
    class Nested(ProtocolError):
        pass

    for error in [ErrorObject(-1, "m"), ErrorObject(-1, "m", None), ErrorObject(-1, "m", [1])]:
        exc = Nested.from_error(error)
        assert type(exc) is Nested and exc.error == error


def test_every_error_the_library_raises_is_an_mcp_error() -> None:
    for cls in [
        ProtocolError,
        ConnectionClosed,
        RequestTimeout,
        RequestCancelled,
        trio_mcp.InitializeError,
        trio_mcp.PaginationError,
        trio_mcp.CapabilityMissing,
        trio_mcp.NestedRequestError,
        trio_mcp.SessionExpired,
    ]:
        assert issubclass(cls, MCPError), cls
    assert issubclass(trio_mcp.SessionExpired, ConnectionClosed)
    assert issubclass(trio_mcp.NestedRequestError, ProtocolError)


def _code_constants(path: Path) -> dict[str, int]:
    """Module-level ``NAME = -32xxx`` assignments: JSON-RPC error codes (-32768 to -32000)."""
    found: dict[str, int] = {}
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.expr):
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                continue
            if type(literal) is int and -32768 <= literal <= -32000:
                found[target.id] = literal
    return found


def test_every_error_code_is_defined_beside_the_others_and_exported_by_the_protocol() -> None:
    package = Path(trio_mcp.__file__).parent
    home = package / "protocol" / "_jsonrpc.py"
    elsewhere = {
        str(path.relative_to(package)): names
        for path in sorted(package.rglob("*.py"))
        if path != home and (names := _code_constants(path))
    }
    assert not elsewhere, f"error codes defined outside protocol/_jsonrpc.py: {elsewhere}"
    assert set(_code_constants(home)) <= set(trio_mcp.protocol.__all__)


def test_the_error_codes_are_distinct() -> None:
    package = Path(trio_mcp.__file__).parent
    names = _code_constants(package / "protocol" / "_jsonrpc.py")
    assert {"PARSE_ERROR", "INTERNAL_ERROR", "SESSION_EXPIRED", "HEADER_MISMATCH"} <= names.keys()
    by_value: dict[int, list[str]] = {}
    for name in names:
        by_value.setdefault(getattr(_jsonrpc, name), []).append(name)
    shared = {value: names for value, names in by_value.items() if len(names) > 1}
    assert not shared, f"error codes that share a value: {shared}"
