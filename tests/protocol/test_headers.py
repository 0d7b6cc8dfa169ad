"""The modern era's header codec (2026-07-28): what a tool's ``x-mcp-header`` declarations ask
for, the declarations a client must refuse, how values are written, and which requests carry
which headers."""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol import ProtocolError
from trio_mcp.protocol._headers import (
    check_request,
    decode_header_value,
    encode_header_value,
    modern_headers,
    param_headers,
    param_text,
    param_value,
    schema_declarations,
    tool_param_headers,
)
from trio_mcp.protocol._jsonrpc import Request

MODERN = "2026-07-28"
ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"
ENVELOPE = {ENVELOPE_KEY: MODERN}


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# -- the declarations ------------------------------------------------------------------------------


def test_declarations_are_found_through_properties_alone() -> None:
    declared = schema(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        dry={"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
        maybe={"anyOf": [{"type": "string"}, {"type": "null"}], "x-mcp-header": "Maybe"},
        tier={"enum": ["gold", "silver"], "x-mcp-header": "Tier"},
        where={"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Z"}}},
        query={"type": "string"},
    )
    assert tool_param_headers(declared) == {
        ("region",): "Region",
        ("count",): "Count",
        ("dry",): "Dry-Run",
        ("maybe",): "Maybe",
        ("tier",): "Tier",
        ("where", "zone"): "Z",
    }
    assert tool_param_headers(schema(query={"type": "string"})) == {}
    assert tool_param_headers(None) == {}
    # A property merely named like a keyword is still a property.
    assert tool_param_headers(schema(items={"type": "string", "x-mcp-header": "I"})) == {
        ("items",): "I"
    }


@pytest.mark.parametrize(
    "bad",
    [
        schema(v={"type": "string", "x-mcp-header": ""}),
        schema(v={"type": "string", "x-mcp-header": "My Region"}),
        schema(v={"type": "string", "x-mcp-header": "Region:Primary"}),
        schema(v={"type": "string", "x-mcp-header": "Région"}),
        schema(v={"type": "string", "x-mcp-header": "Region\t1"}),
        schema(v={"type": "string", "x-mcp-header": 7}),
        schema(v={"type": "object", "x-mcp-header": "Data"}),
        schema(v={"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}),
        schema(v={"type": "null", "x-mcp-header": "Nil"}),
        schema(v={"type": "number", "x-mcp-header": "Ratio"}),
        schema(v={"x-mcp-header": "Untyped"}),
        schema(v={"type": {"weird": 1}, "x-mcp-header": "Odd"}),
        schema(v={"anyOf": [{"type": "string"}, {"type": "number"}], "x-mcp-header": "Mixed"}),
        schema(v={"anyOf": [{"type": "string"}, {"not": {}}], "x-mcp-header": "Vague"}),
        schema(v={"enum": ["a", 1.5], "x-mcp-header": "Ratio"}),
        schema(
            a={"type": "string", "x-mcp-header": "MyField"},
            b={"type": "string", "x-mcp-header": "myfield"},
        ),
        schema(v={"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}),
        schema(v={"anyOf": [{"type": "string", "x-mcp-header": "Either"}]}),
        {**schema(), "$defs": {"d": {"type": "string", "x-mcp-header": "Def"}}},
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_invalid_declarations_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="x-mcp-header"):
        tool_param_headers(bad)


def test_values_are_written_as_headers_carry_them() -> None:
    assert param_value("us-west1") == "us-west1"
    assert param_value("") == ""
    assert param_value("us west 1") == "us west 1"
    for unsafe in ("Hello, 世界", " padded", "line1\r\nline2", "\tx", "=?base64?x?="):
        assert param_value(unsafe) == b64(unsafe)
    assert (param_value(True), param_value(False)) == ("true", "false")
    assert (param_value(42), param_value(42.0), param_value(2.5)) == ("42", "42", "2.5")
    # An integral number is its decimal integer, however the body wrote it.
    assert (param_value(2e0), param_value(-0.0), param_value(1e20)) == ("2", "0", "1" + "0" * 20)
    assert param_value(-7) == "-7" and param_value(2**70) == str(2**70)
    for absent in (None, {"a": 1}, [1], float("nan")):
        assert param_value(absent) is None


def test_only_tools_calls_mirror_the_present_arguments() -> None:
    mirrored = {"t": {("region",): "Region", ("verbose",): "Verbose", ("at", "zone"): "Zone"}}
    params = {
        "_meta": ENVELOPE,
        "name": "t",
        "arguments": {"region": "eu", "verbose": None, "at": {"zone": "b"}, "q": "x"},
    }
    assert modern_headers("tools/call", params, mirrored) == {
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "t",
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Zone": "b",
    }
    assert "Mcp-Param-Region" not in modern_headers("prompts/get", params, mirrored)
    assert modern_headers("tools/call", {**params, "_meta": {}}, mirrored) == {}


# -- header values ---------------------------------------------------------------------------------

#: What a header value may be: visible ASCII, space and tab (RFC 9110).
FIELD_VALUE = re.compile(r"[\x20-\x7e\t]*")


@given(st.text())
def test_any_text_survives_a_header(text: str) -> None:
    encoded = encode_header_value(text)
    assert FIELD_VALUE.fullmatch(encoded) and encoded == encoded.strip()
    assert decode_header_value(encoded) == text


def test_values_are_decoded_as_the_spec_writes_them() -> None:
    assert decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=") == "Hello, 世界"
    assert decode_header_value("=?base64?IHBhZGRlZCA=?=") == " padded "
    assert decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=") == "=?base64?literal?="
    # Without the whole sentinel a value is literal, base64-looking or not.
    for literal in ("SGVsbG8=", "=?base64?SGVsbG8=", "SGVsbG8=?=", "=?base64?=", "a b\tc", ""):
        assert decode_header_value(literal) == literal


@pytest.mark.parametrize(
    "bad",
    [
        "=?base64?SGVsbG8?=",  # padding missing
        "=?base64?SGVs!!!bG8=?=",  # not the alphabet
        "=?base64?SGVsbG9=?=",  # "Hello" with trailing bits set: not what an encoder writes
        "=?base64?/w==?=",  # not UTF-8
        "Z\xc3\xbcrich",  # raw UTF-8 bytes (as an ASGI server hands them over, latin-1)
        "line\nbreak",
    ],
)
def test_what_no_client_sends_is_refused(bad: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_header_value(bad)
    assert info.value.code == -32020


# -- the server's check ----------------------------------------------------------------------------

DEPLOY = schema(
    region={"type": "string", "x-mcp-header": "Region"},
    replicas={"type": "integer", "x-mcp-header": "Replicas"},
    dry={"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"},
    target={
        "type": "object",
        "properties": {
            "zone": {"type": "string", "x-mcp-header": "Zone"},
            "rack": {
                "type": "object",
                "properties": {"n": {"type": "integer", "x-mcp-header": "N"}},
            },
        },
    },
    query={"type": "string"},
)
TOOLS = {"deploy": DEPLOY, "plain": schema(q={"type": "string"})}


def call(arguments: Any, name: str = "deploy") -> Request:
    return Request(1, "tools/call", {"_meta": ENVELOPE, "name": name, "arguments": arguments})


def sent_for(request: Request, tools: dict[str, Any] = TOOLS) -> dict[str, str]:
    """What our client sends for ``request``, once it listed ``tools``."""
    declared = {name: tool_param_headers(s) for name, s in tools.items()}
    return modern_headers(request.method, request.params, declared)


def refusal(request: Request, headers: dict[str, str], tools: dict[str, Any] = TOOLS) -> str:
    with pytest.raises(ProtocolError) as info:
        check_request(request, headers, schema_declarations(tools))
    assert info.value.code == -32020, info.value.message
    return info.value.message


def test_the_check_accepts_what_the_client_sends_nested_declarations_included() -> None:
    request = call({"region": "Zürich", "replicas": 3, "target": {"zone": "b", "rack": {"n": 4}}})
    headers = sent_for(request)
    assert {k: v for k, v in headers.items() if k.startswith("Mcp-Param-")} == {
        "Mcp-Param-Region": b64("Zürich"),
        "Mcp-Param-Replicas": "3",
        "Mcp-Param-Zone": "b",
        "Mcp-Param-N": "4",
    }
    check_request(request, headers, schema_declarations(TOOLS))
    # Names in any case, whitespace around values, base64 where plain would do: all the same.
    relaxed = {k.upper(): f" {v}\t" for k, v in headers.items()}
    relaxed["MCP-PARAM-ZONE"] = b64("b")
    check_request(request, relaxed, schema_declarations(TOOLS))


def test_a_nested_declared_header_is_checked() -> None:
    request = call({"region": "eu", "replicas": 1, "target": {"zone": "b"}})
    headers = sent_for(request)
    assert "Zone" in refusal(request, {**headers, "Mcp-Param-Zone": "c"})
    missing = {k: v for k, v in headers.items() if k != "Mcp-Param-Zone"}
    assert refusal(request, missing) == "Header mismatch: Mcp-Param-Zone is missing"
    # A header for an argument the body does not have is a header no client sends.
    assert "Mcp-Param-N" in refusal(request, {**headers, "Mcp-Param-N": "4"})


def test_an_integral_float_is_the_integer_it_equals() -> None:
    """The measured disagreement: a ``2.0`` argument was sent as ``2`` and refused."""
    request = call({"region": "eu", "replicas": 2.0})
    headers = sent_for(request)
    assert headers["Mcp-Param-Replicas"] == "2"
    check_request(request, headers, schema_declarations(TOOLS))
    # Numbers compare numerically (the spec's SHOULD), in plain decimal notation only.
    for same in ("2.0", "2.000", "02"):
        check_request(request, {**headers, "Mcp-Param-Replicas": same}, schema_declarations(TOOLS))
    for other in ("2.5", "3", "2e0", "0x2", "two", ""):
        refusal(request, {**headers, "Mcp-Param-Replicas": other})
    # A string that looks like a number is still a string.
    text = call({"region": "2", "replicas": 1})
    refusal(text, {**sent_for(text), "Mcp-Param-Region": "2.0"})


def test_null_and_absent_arguments_have_no_header() -> None:
    request = call({"region": "eu", "replicas": 1, "dry": None})
    headers = sent_for(request)
    assert "Mcp-Param-Dry-Run" not in headers
    check_request(request, headers, schema_declarations(TOOLS))
    refusal(request, {**headers, "Mcp-Param-Dry-Run": "false"})
    # Objects and arrays (a body that breaks its schema) have no header either.
    odd = call({"region": ["eu"], "replicas": {"n": 1}})
    assert not param_headers(tool_param_headers(DEPLOY), odd.params["arguments"])  # type: ignore[index]
    check_request(odd, sent_for(odd), schema_declarations(TOOLS))


def test_the_standard_headers_keep_their_codes_and_messages() -> None:
    request = call({"region": "eu"}, name="plain")
    headers = sent_for(request)
    check_request(request, headers, schema_declarations(TOOLS))
    with pytest.raises(ProtocolError) as info:
        check_request(
            request, {**headers, "mcp-protocol-version": "2030-01-01"}, schema_declarations(TOOLS)
        )
    assert info.value.code == -32022
    assert info.value.data == {"supported": [MODERN], "requested": "2030-01-01"}
    bare = Request(1, "tools/call", {"name": "plain"})
    with pytest.raises(ProtocolError) as info:
        check_request(bare, headers, schema_declarations(TOOLS))
    assert info.value.code == -32602
    assert refusal(request, {**headers, "mcp-method": "tools/list"}) == (
        "Header mismatch: Mcp-Method header value 'tools/list' does not match body value "
        "'tools/call'"
    )
    no_method = {k: v for k, v in headers.items() if k != "mcp-method"}
    assert refusal(request, no_method) == "Header mismatch: the Mcp-Method header is missing"
    no_name = {k: v for k, v in headers.items() if k != "mcp-name"}
    assert refusal(request, no_name) == "Header mismatch: tools/call needs an Mcp-Name header"
    assert refusal(request, {**headers, "mcp-name": "other"}) == (
        "Header mismatch: Mcp-Name header value 'other' does not match body value 'plain'"
    )
    later = Request(2, "tools/list", {"_meta": {ENVELOPE_KEY: "2027-01-01"}})
    assert refusal(later, modern_headers("tools/list", {"_meta": ENVELOPE})) == (
        "Header mismatch: MCP-Protocol-Version header value '2026-07-28' does not match body "
        "value '2027-01-01'"
    )
    # An Mcp-Param header no declaration names is not ours to judge (an intermediary's, say).
    check_request(request, {**headers, "Mcp-Param-Trace": "abc"}, schema_declarations(TOOLS))


def test_a_tool_with_invalid_declarations_cannot_be_called() -> None:
    tools = {"odd": schema(ratio={"type": "number", "x-mcp-header": "Ratio"})}
    request = call({"ratio": 1.5}, name="odd")
    headers = modern_headers(request.method, request.params)
    assert "cannot be called over HTTP" in refusal(request, headers, tools)


# -- the property: the two halves never disagree ---------------------------------------------------

#: JSON values as a body carries them (integers within what JSON encoders write).
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)
RACK = st.fixed_dictionaries({}, optional={"n": JSON})
TARGET = st.fixed_dictionaries({}, optional={"zone": JSON, "rack": st.one_of(JSON, RACK)})
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "region": JSON,
        "replicas": JSON,
        "dry": JSON,
        "target": st.one_of(JSON, TARGET),
        "query": JSON,
    },
)
DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def received(request: Request) -> Request:
    """The request as the server parses it from the wire."""
    return Request(request.id, request.method, orjson.loads(orjson.dumps(request.params)))


def means_the_same(header: str, text: str, body: Any) -> bool:
    """The spec's rule, written out again: equal text, or equal numbers for a numeric body."""
    numeric = isinstance(body, int | float) and not isinstance(body, bool)
    return header == text or (
        numeric and DECIMAL.fullmatch(header) is not None and Decimal(header) == Decimal(text)
    )


def another_value(text: str, body: Any) -> st.SearchStrategy[str]:
    """The canonical text of any argument that means something else than ``text``."""
    return (
        st.one_of(st.booleans(), st.integers(), st.floats(), st.text())
        .map(param_text)
        .filter(lambda other: other is not None and not means_the_same(other, text, body))
        .map(str)
    )


@given(st.text(min_size=1), ARGUMENTS)
def test_the_check_accepts_exactly_what_the_client_sends(name: str, arguments: Any) -> None:
    tools = {name: DEPLOY}
    request = call(arguments, name=name)
    check_request(received(request), sent_for(request, tools), schema_declarations(tools))


@given(ARGUMENTS, st.data())
def test_the_check_refuses_a_changed_removed_or_added_param_header(
    arguments: Any, data: st.DataObject
) -> None:
    request = call(arguments)
    headers = sent_for(request)
    on_wire = received(request)
    declared = tool_param_headers(DEPLOY)
    for path, param in declared.items():
        header = "Mcp-Param-" + param
        body: Any = arguments
        for key in path:
            body = body.get(key) if isinstance(body, dict) else None
        if header not in headers:
            refusal(on_wire, {**headers, header: data.draw(st.text().map(encode_header_value))})
            continue
        refusal(on_wire, {k: v for k, v in headers.items() if k != header})
        text = decode_header_value(headers[header])
        changed = data.draw(another_value(text, body))
        refusal(on_wire, {**headers, header: encode_header_value(changed)})
