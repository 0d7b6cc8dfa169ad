"""Hand-written schemas, checked by the ``jsonschema`` library: their failures are worded as the
compiled checker words its own."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.protocol._jsonschema import compile_schema

from ._shared import EXPLICIT

SAME_WORDING: list[tuple[dict[str, Any], Any]] = [
    (EXPLICIT, {"a": -1, "b": 2}),
    ({"type": "object", "required": ["a", "b"], "additionalProperties": False}, {"a": 1, "c": 0}),
    ({"properties": {"a": {"type": ["integer", "null"]}}}, {"a": "x"}),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1, "NO": 2}),
    (
        {"patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": False},
        {"x_1": "a", "y": 1},
    ),
    ({"properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}, {"v": None}),
    ({"properties": {"v": {"anyOf": [{"type": "integer"}, {"minLength": 2}]}}}, {"v": "a"}),
    (
        {
            "anyOf": [
                {"title": "circle", "type": "object", "required": ["r"]},
                {"type": "object", "required": ["side"]},
            ]
        },
        {},
    ),
    ({"properties": {"v": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}}, {"v": -1.5}),
    ({"properties": {"v": {"allOf": [{"type": "integer"}, {"minimum": 2}]}}}, {"v": 1}),
    (
        {"properties": {"v": {"prefixItems": [{"type": "string"}], "items": False}}},
        {"v": [1, 1, 3]},
    ),
    ({"properties": {"v": {"items": {"type": "integer"}}}}, {"v": [1, "a"]}),
    ({"properties": {"v": {"uniqueItems": True}}}, {"v": [1, 2, 1.0]}),
    ({"properties": {"v": {"contains": {"type": "string"}}}}, {"v": [1]}),
    ({"properties": {"v": {"contains": {"type": "string"}, "minContains": 2}}}, {"v": [1, "a"]}),
    ({"properties": {"v": {"minItems": 2}, "w": {"maxItems": 1}}}, {"v": [1], "w": [1, 2]}),
    ({"properties": {"v": {"minLength": 2}, "w": {"maxLength": 1}}}, {"v": "a", "w": "ab"}),
    ({"properties": {"v": {"pattern": "^[a-z]+$"}}}, {"v": "aB"}),
    (
        {"properties": {"v": {"minProperties": 1}, "w": {"maxProperties": 1}}},
        {"v": {}, "w": {"a": 1, "b": 2}},
    ),
    ({"properties": {"v": {"minimum": 1}, "w": {"exclusiveMaximum": 2}}}, {"v": 0, "w": 2}),
    ({"properties": {"v": {"maximum": 1.5}, "w": {"exclusiveMinimum": 1}}}, {"v": 2, "w": 1}),
    ({"properties": {"v": {"multipleOf": 0.1}}}, {"v": 0.35}),
    ({"properties": {"v": {"enum": ["a", "b"]}, "w": {"const": False}}}, {"v": "c", "w": 0}),
    ({"properties": {"v": {"not": {"type": "null"}}}}, {"v": None}),
    ({"properties": {"v": False, "w": {"prefixItems": [True, False]}}}, {"v": "x", "w": [1, 2]}),
    ({"dependentRequired": {"a": ["b"]}}, {"a": 1}),
    (
        {
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["a"]},
            "else": {"required": ["b"]},
        },
        {"kind": "z"},
    ),
    (
        {
            "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/definitions/n"}},
            "$defs": {"point": {"type": "object", "required": ["x"]}},
            "definitions": {"n": {"type": "integer"}},
        },
        {"p": {}, "q": "2"},
    ),
    (
        {
            "properties": {
                "children": {"type": "array", "items": {"$ref": "#"}},
                "v": {"type": "integer"},
            }
        },
        {"children": [{"children": [{"v": "x"}]}]},
    ),
]


@pytest.mark.parametrize(("schema", "value"), SAME_WORDING)
def test_both_checkers_word_a_failure_alike(schema: dict[str, Any], value: Any) -> None:
    from trio_mcp.protocol._jsonschema import Collector
    from trio_mcp.server._schema._handwritten import compile_handwritten

    compiled, library = Collector(), Collector()
    compile_schema(schema)(value, (), compiled)
    compile_handwritten(schema, "test")(value, (), library)
    assert compiled.messages("argument", "arguments") != []
    assert library.messages("argument", "arguments") == compiled.messages("argument", "arguments")


@pytest.mark.parametrize(
    ("schema", "value", "messages"),
    [
        (
            {"unevaluatedProperties": False, "properties": {"a": {}}},
            {"a": 1, "b": 2, "c c": 3},
            ["unexpected argument 'b'", "unexpected argument '['c c']'"],
        ),
        (
            {"properties": {"v": {"prefixItems": [{}], "unevaluatedItems": False}}},
            {"v": [1, 2, 3]},
            ["argument 'v': unevaluated items are not allowed (2, 3 were unexpected)"],
        ),
        (
            {"dependentSchemas": {"bar": False}},
            {"bar": 2},
            ["arguments: no value is allowed when 'bar' is present"],
        ),
        (
            {"dependentSchemas": {"bar": {"required": ["foo"]}}},
            {"bar": 2},
            ["missing required argument 'foo'"],
        ),
        (
            {"properties": {"v": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}},
            {"v": 1},
            ["argument 'v': matches more than one alternative"],
        ),
        (
            {"properties": {"v": {"contains": {"type": "string"}, "maxContains": 1}}},
            {"v": ["a", "b"]},
            ["argument 'v': expected at most 1 matching items, got more"],
        ),
        (
            {"required": ["a"], "dependentRequired": {"b": ["a"]}},
            {"b": 1},
            ["missing required argument 'a'", "missing required argument 'a'"],
        ),
        (
            # Draft 3 allowed schemas among the types: no wording of ours, the library's own.
            {
                "$schema": "http://json-schema.org/draft-03/schema#",
                "properties": {"a": {"type": ["string", {"type": "integer"}]}},
            },
            {"a": None},
            ["argument 'a': none is not of type 'string', {'type': 'integer'}"],
        ),
    ],
)
def test_hand_written_only_keywords_are_worded_too(
    schema: dict[str, Any], value: Any, messages: list[str]
) -> None:
    from trio_mcp.protocol._jsonschema import Collector
    from trio_mcp.server._schema._handwritten import compile_handwritten

    found = Collector()
    compile_handwritten(schema, "test")(value, (), found)
    assert found.messages("argument", "arguments") == messages
