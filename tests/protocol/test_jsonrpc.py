"""JSON-RPC framing, without an event loop."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    Batch,
    ErrorObject,
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    Response,
    describe_id,
    encode,
    parse,
)


def test_request_notification_response_error() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == Request(1, "ping")
    assert parse(b'{"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}}') == Request(
        "a", "x", {"k": 1}
    )
    assert parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == Notification(
        "notifications/initialized"
    )
    assert parse(b'{"jsonrpc":"2.0","id":3,"result":{}}') == Response(3, {})
    parsed = parse(b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m","data":[1]}}')
    assert isinstance(parsed, ErrorResponse)
    assert parsed.error.code == -1 and parsed.error.data == [1]


def test_null_id_is_a_notification_and_ids_keep_their_type() -> None:
    assert isinstance(parse(b'{"jsonrpc":"2.0","id":null,"method":"m"}'), Notification)
    one, one_str = (
        parse(b'{"jsonrpc":"2.0","id":1,"method":"m"}'),
        parse(b'{"jsonrpc":"2.0","id":"1","method":"m"}'),
    )
    assert isinstance(one, Request) and isinstance(one_str, Request)
    assert one.id == 1 and one_str.id == "1"
    assert one != one_str


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":true,"method":"m"}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',
        b'{"jsonrpc":"2.0","id":[1],"method":"m"}',
        b'{"jsonrpc":"1.0","id":1,"method":"m"}',
        b'{"id":1,"method":"m"}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}',
        b'{"jsonrpc":"2.0","id":1}',
        b"42",
    ],
)
def test_invalid_requests(raw: bytes) -> None:
    parsed = parse(raw)
    assert isinstance(parsed, Invalid)
    assert parsed.error.code == INVALID_REQUEST


def test_invalid_request_keeps_a_readable_id() -> None:
    parsed = parse(b'{"jsonrpc":"1.0","id":7,"method":"m"}')
    assert isinstance(parsed, Invalid) and parsed.id == 7
    parsed = parse(b'{"jsonrpc":"2.0","id":true,"method":"m"}')
    assert isinstance(parsed, Invalid) and parsed.id is None


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":5}', 'the "result" member must be an object'),
        (b'{"jsonrpc":"2.0","id":7,"result":null}', 'the "result" member must be an object'),
        (b'{"jsonrpc":"2.0","id":7,"error":"no"}', '"error" member must be an object'),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}', "with an integer code"),
        (b'{"jsonrpc":"1.0","id":7,"result":{}}', 'the "jsonrpc" member must be "2.0"'),
        (b'{"jsonrpc":"2.0","id":7}', "not a request, notification or response"),
        (b'{"jsonrpc":"2.0","id":7,"result":{"t":"\\ud800"}}', "a lone surrogate"),
        (b'{"jsonrpc":"2.0","id":7,"result":{"t":"\xed\xa0\x80"}}', "a lone surrogate"),
    ],
)
def test_an_answer_that_is_not_a_response_keeps_its_id_to_fail_its_request(
    raw: bytes, why: str
) -> None:
    """Shaped as an answer (no method) with an id: the request of ours it answers can fail
    with it; the error says what is wrong."""
    parsed = parse(raw)
    assert isinstance(parsed, Invalid) and parsed.answer and parsed.id == 7
    assert why in parsed.error.data


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":7,"method":5}',
        b'{"jsonrpc":"2.0","id":7,"method":"\\ud800"}',
        b'{"jsonrpc":"2.0","id":true,"result":{}}',
        b'{"jsonrpc":"2.0","result":5}',
        b"[5]",
    ],
)
def test_a_request_or_an_answer_naming_no_id_is_no_answer_to_fail(raw: bytes) -> None:
    parsed = parse(raw)
    items = parsed.items if isinstance(parsed, Batch) else (parsed,)
    assert all(isinstance(item, Invalid) and not item.answer for item in items)


@pytest.mark.parametrize("raw", [b"{", b"", b"\xff\xfe", b'{"a":}', b"nul"])
def test_parse_error(raw: bytes) -> None:
    parsed = parse(raw)
    assert isinstance(parsed, Invalid)
    assert parsed.error.code == PARSE_ERROR and parsed.id is None
    wire = orjson.loads(encode(parsed))
    assert wire == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": "Parse error: Invalid JSON"},
    }


def test_batch() -> None:
    parsed = parse(
        b'[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}},'
        b'{"jsonrpc":"2.0","id":2002,"method":"ping"}, 5]'
    )
    assert isinstance(parsed, Batch)
    assert isinstance(parsed.items[0], Notification)
    assert parsed.items[1] == Request(2002, "ping")
    assert isinstance(parsed.items[2], Invalid)
    empty = parse(b"[]")
    assert isinstance(empty, Invalid) and empty.error.code == INVALID_REQUEST


def test_error_data_is_optional_on_the_wire() -> None:
    without = orjson.loads(encode(ErrorResponse(1, ErrorObject.make(-32601))))
    assert without["error"] == {"code": -32601, "message": "Method not found"}
    with_null = orjson.loads(encode(ErrorResponse(1, ErrorObject.make(-32601, "x", data=None))))
    assert with_null["error"] == {"code": -32601, "message": "x", "data": None}


def test_describe_id_quotes_strings_only() -> None:
    assert describe_id("req-1") == '"req-1"'
    assert describe_id(42) == "42"


ids = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=20))
params = st.dictionaries(
    st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), max_size=3
)


@given(ids, st.text(min_size=1, max_size=30), params)
def test_request_round_trip(rid: int | str, method: str, p: dict[str, object]) -> None:
    message = Request(rid, method, p)
    assert parse(encode(message)) == message


@given(ids, params)
def test_response_round_trip(rid: int | str, result: dict[str, object]) -> None:
    assert parse(encode(Response(rid, result))) == Response(rid, result)


# Ids of any size: JSON-RPC allows any number, and JSON any integer.
WIDE = [2**64, 2**64 + 1, -(2**63) - 1, 10**100, -(10**300)]


@pytest.mark.parametrize("rid", WIDE)
def test_an_id_outside_64_bits_is_read_and_written_exactly(rid: int) -> None:
    raw = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % rid
    assert parse(raw) == Request(rid, "ping")
    assert encode(Response(rid, {})) == b'{"jsonrpc":"2.0","id":%d,"result":{}}' % rid
    assert parse(encode(ErrorResponse(rid, ErrorObject.make(-32601)))) == ErrorResponse(
        rid, ErrorObject.make(-32601)
    )
    batch = parse(b"[" + raw + b"," + raw.replace(b"ping", b"other") + b"]")
    assert batch == Batch((Request(rid, "ping"), Request(rid, "other")))
    assert describe_id(rid) == str(rid)


@pytest.mark.parametrize("rid", WIDE)
def test_a_cancel_or_progress_naming_a_wide_id_keeps_it_exact(rid: int) -> None:
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}'
    assert parse(cancel % rid) == Notification("notifications/cancelled", {"requestId": rid})
    progress = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%d}}'
    assert parse(progress % rid) == Notification("notifications/progress", {"progressToken": rid})
    meta = b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":%d}}}'
    assert parse(meta % rid) == Request(1, "m", {"_meta": {"progressToken": rid}})
    note = Notification("notifications/progress", {"progressToken": rid, "progress": 1})
    assert parse(encode(note)) == note


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":1e19,"method":"m"}',  # a float, however integral
        b'{"jsonrpc":"2.0","id":18446744073709551616.0,"method":"m"}',
        b'{"jsonrpc":"2.0","id":-1.5e300,"method":"m"}',
    ],
)
def test_a_float_id_stays_refused_however_large(raw: bytes) -> None:
    parsed = parse(raw)
    assert isinstance(parsed, Invalid) and parsed.error.code == INVALID_REQUEST
    assert parsed.id is None


def test_an_integer_beyond_what_a_double_holds_is_a_parse_error() -> None:
    """Past ~1.8e308 (309 digits) orjson refuses the number itself: the whole frame is
    unreadable, as for any text it cannot decode."""
    parsed = parse(b'{"jsonrpc":"2.0","id":%s,"method":"m"}' % (b"9" * 400))
    assert isinstance(parsed, Invalid) and parsed.error.code == PARSE_ERROR


def test_only_ids_are_written_wide() -> None:
    """A wide id is echoed; a wide integer in a result still cannot be written (the engine
    answers its request with -32603)."""
    with pytest.raises(TypeError):
        encode(Response(1, {"n": 2**70}))
    with pytest.raises(TypeError):
        encode(Response(2**64, {"n": 2**70}))
    request = Request(2**64, "m", {"_meta": {"progressToken": 2**64}, "requestId": -(2**64)})
    assert parse(encode(request)) == request


@given(st.integers(-(10**300), 10**300), params)
def test_any_integer_id_round_trips(rid: int, result: dict[str, object]) -> None:
    assert parse(encode(Response(rid, result))) == Response(rid, result)
