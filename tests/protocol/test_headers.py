"""The modern era's header codec (2026-07-28): what a tool's ``x-mcp-header`` declarations ask
for, the declarations a client must refuse, how values are written, and which requests carry
which headers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from trio_mcp.protocol._headers import modern_headers, param_value, tool_param_headers

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN}


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
