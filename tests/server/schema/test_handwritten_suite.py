"""Hand-written input schemas against cases of the official JSON-Schema-Test-Suite.

The cases are transcribed from the suite's ``tests/draft2020-12`` files for the keywords the
compiled checker never implemented (``unevaluatedProperties``, ``unevaluatedItems``,
``dependentSchemas``, ``$dynamicRef``): before hand-written schemas went to the ``jsonschema``
library, a tool with these schemas received arguments their author meant to refuse. Each case
runs through a real ``Server`` and a real client in memory: a valid instance reaches the handler,
an invalid one gets an ``isError: true`` result and the handler never runs.

Transcription: ``$schema`` (always draft 2020-12 here) is left out, and only instances a tool
can receive are kept. A tool's input schema must be an object schema, so a case whose instances
are all objects gets ``"type": "object"`` at its root (which changes nothing for objects); a case
about arrays or other values is wrapped (``wrap=True``) as the property ``value`` of an object
schema, and only cases whose references still resolve once wrapped are (they resolve against the
case's own ``$id``, or use none).
"""

# The suite's descriptions are kept whole, so each case can be found in the suite by its text.
# ruff: noqa: E501

from __future__ import annotations

from typing import Any

import attrs
import pytest

from trio_mcp import Server, TextContent, open_client
from trio_mcp.protocol._jsonschema import REFUSED, compile_schema


@attrs.frozen
class Group:
    """One schema of the suite with some of its test instances: (description, data, valid)."""

    file: str
    description: str
    schema: Any
    tests: list[tuple[str, Any, bool]]
    wrap: bool = False

    def input_schema(self) -> dict[str, Any]:
        if self.wrap:
            return {"type": "object", "properties": {"value": self.schema}, "required": ["value"]}
        assert isinstance(self.schema, dict)
        return {"type": "object", **self.schema}

    def arguments(self, data: Any) -> dict[str, Any]:
        if self.wrap:
            return {"value": data}
        assert isinstance(data, dict)
        return data


GROUPS: list[Group] = [
    # --- unevaluatedProperties.json ------------------------------------------------------------
    # unevaluatedProperties.json: unevaluatedProperties schema
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties schema",
        {"unevaluatedProperties": {"type": "string", "minLength": 3}},
        [
            ("with no unevaluated properties", {}, True),
            ("with valid unevaluated properties", {"foo": "foo"}, True),
            ("with invalid unevaluated properties", {"foo": "fo"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties false
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties false",
        {"unevaluatedProperties": False},
        [
            ("with no unevaluated properties", {}, True),
            ("with unevaluated properties", {"foo": "foo"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with adjacent properties
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with adjacent properties",
        {"properties": {"foo": {"type": "string"}}, "unevaluatedProperties": False},
        [
            ("with no unevaluated properties", {"foo": "foo"}, True),
            ("with unevaluated properties", {"foo": "foo", "bar": "bar"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with adjacent patternProperties
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with adjacent patternProperties",
        {"patternProperties": {"^foo": {"type": "string"}}, "unevaluatedProperties": False},
        [
            ("with no unevaluated properties", {"foo": "foo"}, True),
            ("with unevaluated properties", {"foo": "foo", "bar": "bar"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with nested properties
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with nested properties",
        {
            "properties": {"foo": {"type": "string"}},
            "allOf": [{"properties": {"bar": {"type": "string"}}}],
            "unevaluatedProperties": False,
        },
        [
            ("with no additional properties", {"foo": "foo", "bar": "bar"}, True),
            ("with additional properties", {"foo": "foo", "bar": "bar", "baz": "baz"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with nested patternProperties
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with nested patternProperties",
        {
            "properties": {"foo": {"type": "string"}},
            "allOf": [{"patternProperties": {"^bar": {"type": "string"}}}],
            "unevaluatedProperties": False,
        },
        [
            ("with no additional properties", {"foo": "foo", "bar": "bar"}, True),
            ("with additional properties", {"foo": "foo", "bar": "bar", "baz": "baz"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with anyOf
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with anyOf",
        {
            "properties": {"foo": {"type": "string"}},
            "anyOf": [
                {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
                {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]},
                {"properties": {"quux": {"const": "quux"}}, "required": ["quux"]},
            ],
            "unevaluatedProperties": False,
        },
        [
            (
                "when one matches and has no unevaluated properties",
                {"foo": "foo", "bar": "bar"},
                True,
            ),
            (
                "when one matches and has unevaluated properties",
                {"foo": "foo", "bar": "bar", "baz": "not-baz"},
                False,
            ),
            (
                "when two match and has no unevaluated properties",
                {"foo": "foo", "bar": "bar", "baz": "baz"},
                True,
            ),
            (
                "when two match and has unevaluated properties",
                {"foo": "foo", "bar": "bar", "baz": "baz", "quux": "not-quux"},
                False,
            ),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with oneOf
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with oneOf",
        {
            "properties": {"foo": {"type": "string"}},
            "oneOf": [
                {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]},
                {"properties": {"baz": {"const": "baz"}}, "required": ["baz"]},
            ],
            "unevaluatedProperties": False,
        },
        [
            ("with no unevaluated properties", {"foo": "foo", "bar": "bar"}, True),
            ("with unevaluated properties", {"foo": "foo", "bar": "bar", "quux": "quux"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with not
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with not",
        {
            "properties": {"foo": {"type": "string"}},
            "not": {"not": {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]}},
            "unevaluatedProperties": False,
        },
        [
            ("with unevaluated properties", {"foo": "foo", "bar": "bar"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with if/then/else
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with if/then/else",
        {
            "if": {"properties": {"foo": {"const": "then"}}, "required": ["foo"]},
            "then": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]},
            "else": {"properties": {"baz": {"type": "string"}}, "required": ["baz"]},
            "unevaluatedProperties": False,
        },
        [
            (
                "when if is true and has no unevaluated properties",
                {"foo": "then", "bar": "bar"},
                True,
            ),
            (
                "when if is true and has unevaluated properties",
                {"foo": "then", "bar": "bar", "baz": "baz"},
                False,
            ),
            ("when if is false and has no unevaluated properties", {"baz": "baz"}, True),
            (
                "when if is false and has unevaluated properties",
                {"foo": "else", "baz": "baz"},
                False,
            ),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with if/then/else, else not defined
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with if/then/else, else not defined",
        {
            "if": {"properties": {"foo": {"const": "then"}}, "required": ["foo"]},
            "then": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]},
            "unevaluatedProperties": False,
        },
        [
            (
                "when if is true and has no unevaluated properties",
                {"foo": "then", "bar": "bar"},
                True,
            ),
            (
                "when if is true and has unevaluated properties",
                {"foo": "then", "bar": "bar", "baz": "baz"},
                False,
            ),
            ("when if is false and has no unevaluated properties", {"baz": "baz"}, False),
            (
                "when if is false and has unevaluated properties",
                {"foo": "else", "baz": "baz"},
                False,
            ),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with dependentSchemas
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with dependentSchemas",
        {
            "properties": {"foo": {"type": "string"}},
            "dependentSchemas": {
                "foo": {"properties": {"bar": {"const": "bar"}}, "required": ["bar"]}
            },
            "unevaluatedProperties": False,
        },
        [
            ("with no unevaluated properties", {"foo": "foo", "bar": "bar"}, True),
            ("with unevaluated properties", {"bar": "bar"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with $ref
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with $ref",
        {
            "$ref": "#/$defs/bar",
            "properties": {"foo": {"type": "string"}},
            "unevaluatedProperties": False,
            "$defs": {"bar": {"properties": {"bar": {"type": "string"}}}},
        },
        [
            ("with no unevaluated properties", {"foo": "foo", "bar": "bar"}, True),
            ("with unevaluated properties", {"foo": "foo", "bar": "bar", "baz": "baz"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties with $dynamicRef
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties with $dynamicRef",
        {
            "$id": "https://example.com/unevaluated-properties-with-dynamic-ref/derived",
            "$ref": "./baseSchema",
            "$defs": {
                "derived": {"$dynamicAnchor": "addons", "properties": {"bar": {"type": "string"}}},
                "baseSchema": {
                    "$id": "./baseSchema",
                    "$comment": "unevaluatedProperties comes first so it's more likely to catch bugs with implementations that are sensitive to keyword ordering",
                    "unevaluatedProperties": False,
                    "properties": {"foo": {"type": "string"}},
                    "$dynamicRef": "#addons",
                    "$defs": {
                        "defaultAddons": {
                            "$comment": "Needed to satisfy the bookending requirement",
                            "$dynamicAnchor": "addons",
                        }
                    },
                },
            },
        },
        [
            ("with no unevaluated properties", {"foo": "foo", "bar": "bar"}, True),
            ("with unevaluated properties", {"foo": "foo", "bar": "bar", "baz": "baz"}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties can't see inside cousins
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties can't see inside cousins",
        {"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]},
        [
            ("always fails", {"foo": 1}, False),
        ],
    ),
    # unevaluatedProperties.json: nested unevaluatedProperties, outer true, inner false, properties outside
    Group(
        "unevaluatedProperties",
        "nested unevaluatedProperties, outer true, inner false, properties outside",
        {
            "properties": {"foo": {"type": "string"}},
            "allOf": [{"unevaluatedProperties": False}],
            "unevaluatedProperties": True,
        },
        [
            ("with no nested unevaluated properties", {"foo": "foo"}, False),
            ("with nested unevaluated properties", {"foo": "foo", "bar": "bar"}, False),
        ],
    ),
    # unevaluatedProperties.json: in-place applicator siblings, allOf has unevaluated
    Group(
        "unevaluatedProperties",
        "in-place applicator siblings, allOf has unevaluated",
        {
            "allOf": [{"properties": {"foo": True}, "unevaluatedProperties": False}],
            "anyOf": [{"properties": {"bar": True}}],
        },
        [
            ("base case: both properties present", {"foo": 1, "bar": 1}, False),
            ("in place applicator siblings, bar is missing", {"foo": 1}, True),
            ("in place applicator siblings, foo is missing", {"bar": 1}, False),
        ],
    ),
    # unevaluatedProperties.json: unevaluatedProperties + single cyclic ref
    Group(
        "unevaluatedProperties",
        "unevaluatedProperties + single cyclic ref",
        {"properties": {"x": {"$ref": "#"}}, "unevaluatedProperties": False},
        [
            ("Empty is valid", {}, True),
            ("Single is valid", {"x": {}}, True),
            ("Unevaluated on 1st level is invalid", {"x": {}, "y": {}}, False),
            ("Nested is valid", {"x": {"x": {}}}, True),
            ("Unevaluated on 2nd level is invalid", {"x": {"x": {}, "y": {}}}, False),
            ("Deep nested is valid", {"x": {"x": {"x": {}}}}, True),
            ("Unevaluated on 3rd level is invalid", {"x": {"x": {"x": {}, "y": {}}}}, False),
        ],
    ),
    # unevaluatedProperties.json: dependentSchemas with unevaluatedProperties
    Group(
        "unevaluatedProperties",
        "dependentSchemas with unevaluatedProperties",
        {
            "properties": {"foo2": {}},
            "dependentSchemas": {"foo": {}, "foo2": {"properties": {"bar": {}}}},
            "unevaluatedProperties": False,
        },
        [
            ("unevaluatedProperties doesn't consider dependentSchemas", {"foo": ""}, False),
            ("unevaluatedProperties doesn't see bar when foo2 is absent", {"bar": ""}, False),
            ("unevaluatedProperties sees bar when foo2 is present", {"foo2": "", "bar": ""}, True),
        ],
    ),
    # unevaluatedProperties.json: Evaluated properties collection needs to consider instance location
    Group(
        "unevaluatedProperties",
        "Evaluated properties collection needs to consider instance location",
        {
            "properties": {"foo": {"properties": {"bar": {"type": "string"}}}},
            "unevaluatedProperties": False,
        },
        [
            (
                "with an unevaluated property that exists at another location",
                {"foo": {"bar": "foo"}, "bar": "bar"},
                False,
            ),
        ],
    ),
    # --- unevaluatedItems.json ------------------------------------------------------------
    # unevaluatedItems.json: unevaluatedItems false
    Group(
        "unevaluatedItems",
        "unevaluatedItems false",
        {"unevaluatedItems": False},
        [
            ("with no unevaluated items", [], True),
            ("with unevaluated items", ["foo"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems as schema
    Group(
        "unevaluatedItems",
        "unevaluatedItems as schema",
        {"unevaluatedItems": {"type": "string"}},
        [
            ("with no unevaluated items", [], True),
            ("with valid unevaluated items", ["foo"], True),
            ("with invalid unevaluated items", [42], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with tuple
    Group(
        "unevaluatedItems",
        "unevaluatedItems with tuple",
        {"prefixItems": [{"type": "string"}], "unevaluatedItems": False},
        [
            ("with no unevaluated items", ["foo"], True),
            ("with unevaluated items", ["foo", "bar"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with items
    Group(
        "unevaluatedItems",
        "unevaluatedItems with items",
        {"items": {"type": "number"}, "unevaluatedItems": {"type": "string"}},
        [
            ("valid under items", [5, 6, 7, 8], True),
            ("invalid under items", ["foo", "bar", "baz"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with nested tuple
    Group(
        "unevaluatedItems",
        "unevaluatedItems with nested tuple",
        {
            "prefixItems": [{"type": "string"}],
            "allOf": [{"prefixItems": [True, {"type": "number"}]}],
            "unevaluatedItems": False,
        },
        [
            ("with no unevaluated items", ["foo", 42], True),
            ("with unevaluated items", ["foo", 42, True], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with nested items
    Group(
        "unevaluatedItems",
        "unevaluatedItems with nested items",
        {"unevaluatedItems": {"type": "boolean"}, "anyOf": [{"items": {"type": "string"}}, True]},
        [
            ("with only (valid) additional items", [True, False], True),
            ("with no additional items", ["yes", "no"], True),
            ("with invalid additional item", ["yes", False], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with anyOf
    Group(
        "unevaluatedItems",
        "unevaluatedItems with anyOf",
        {
            "prefixItems": [{"const": "foo"}],
            "anyOf": [
                {"prefixItems": [True, {"const": "bar"}]},
                {"prefixItems": [True, True, {"const": "baz"}]},
            ],
            "unevaluatedItems": False,
        },
        [
            ("when one schema matches and has no unevaluated items", ["foo", "bar"], True),
            ("when one schema matches and has unevaluated items", ["foo", "bar", 42], False),
            ("when two schemas match and has no unevaluated items", ["foo", "bar", "baz"], True),
            ("when two schemas match and has unevaluated items", ["foo", "bar", "baz", 42], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with oneOf
    Group(
        "unevaluatedItems",
        "unevaluatedItems with oneOf",
        {
            "prefixItems": [{"const": "foo"}],
            "oneOf": [
                {"prefixItems": [True, {"const": "bar"}]},
                {"prefixItems": [True, {"const": "baz"}]},
            ],
            "unevaluatedItems": False,
        },
        [
            ("with no unevaluated items", ["foo", "bar"], True),
            ("with unevaluated items", ["foo", "bar", 42], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with not
    Group(
        "unevaluatedItems",
        "unevaluatedItems with not",
        {
            "prefixItems": [{"const": "foo"}],
            "not": {"not": {"prefixItems": [True, {"const": "bar"}]}},
            "unevaluatedItems": False,
        },
        [
            ("with unevaluated items", ["foo", "bar"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with if/then/else
    Group(
        "unevaluatedItems",
        "unevaluatedItems with if/then/else",
        {
            "prefixItems": [{"const": "foo"}],
            "if": {"prefixItems": [True, {"const": "bar"}]},
            "then": {"prefixItems": [True, True, {"const": "then"}]},
            "else": {"prefixItems": [True, True, True, {"const": "else"}]},
            "unevaluatedItems": False,
        },
        [
            ("when if matches and it has no unevaluated items", ["foo", "bar", "then"], True),
            ("when if matches and it has unevaluated items", ["foo", "bar", "then", "else"], False),
            (
                "when if doesn't match and it has no unevaluated items",
                ["foo", 42, 42, "else"],
                True,
            ),
            (
                "when if doesn't match and it has unevaluated items",
                ["foo", 42, 42, "else", 42],
                False,
            ),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with boolean schemas
    Group(
        "unevaluatedItems",
        "unevaluatedItems with boolean schemas",
        {"allOf": [True], "unevaluatedItems": False},
        [
            ("with no unevaluated items", [], True),
            ("with unevaluated items", ["foo"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems can't see inside cousins
    Group(
        "unevaluatedItems",
        "unevaluatedItems can't see inside cousins",
        {"allOf": [{"prefixItems": [True]}, {"unevaluatedItems": False}]},
        [
            ("always fails", [1], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems depends on adjacent contains
    Group(
        "unevaluatedItems",
        "unevaluatedItems depends on adjacent contains",
        {"prefixItems": [True], "contains": {"type": "string"}, "unevaluatedItems": False},
        [
            ("second item is evaluated by contains", [1, "foo"], True),
            ("contains fails, second item is not evaluated", [1, 2], False),
            ("contains passes, second item is not evaluated", [1, 2, "foo"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems and contains interact to control item dependency relationship
    Group(
        "unevaluatedItems",
        "unevaluatedItems and contains interact to control item dependency relationship",
        {
            "if": {"contains": {"const": "a"}},
            "then": {
                "if": {"contains": {"const": "b"}},
                "then": {"if": {"contains": {"const": "c"}}},
            },
            "unevaluatedItems": False,
        },
        [
            ("empty array is valid", [], True),
            ("only a's are valid", ["a", "a"], True),
            ("a's and b's are valid", ["a", "b", "a", "b", "a"], True),
            ("a's, b's and c's are valid", ["c", "a", "c", "c", "b", "a"], True),
            ("only b's are invalid", ["b", "b"], False),
            ("only c's are invalid", ["c", "c"], False),
            ("only b's and c's are invalid", ["c", "b", "c", "b", "c"], False),
            ("only a's and c's are invalid", ["c", "a", "c", "a", "c"], False),
        ],
        wrap=True,
    ),
    # unevaluatedItems.json: unevaluatedItems with minContains = 0
    Group(
        "unevaluatedItems",
        "unevaluatedItems with minContains = 0",
        {"contains": {"type": "string"}, "minContains": 0, "unevaluatedItems": False},
        [
            ("empty array is valid", [], True),
            ("no items evaluated by contains", [0], False),
            ("some but not all items evaluated by contains", ["foo", 0], False),
            ("all items evaluated by contains", ["foo", "bar"], True),
        ],
        wrap=True,
    ),
    # --- dependentSchemas.json ------------------------------------------------------------
    # dependentSchemas.json: single dependency
    Group(
        "dependentSchemas",
        "single dependency",
        {
            "dependentSchemas": {
                "bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}}
            }
        },
        [
            ("valid", {"foo": 1, "bar": 2}, True),
            ("no dependency", {"foo": "quux"}, True),
            ("wrong type", {"foo": "quux", "bar": 2}, False),
            ("wrong type other", {"foo": 2, "bar": "quux"}, False),
            ("wrong type both", {"foo": "quux", "bar": "quux"}, False),
        ],
    ),
    # dependentSchemas.json: boolean subschemas
    Group(
        "dependentSchemas",
        "boolean subschemas",
        {"dependentSchemas": {"foo": True, "bar": False}},
        [
            ("object with property having schema true is valid", {"foo": 1}, True),
            ("object with property having schema false is invalid", {"bar": 2}, False),
            ("object with both properties is invalid", {"foo": 1, "bar": 2}, False),
            ("empty object is valid", {}, True),
        ],
    ),
    # dependentSchemas.json: dependencies with escaped characters
    Group(
        "dependentSchemas",
        "dependencies with escaped characters",
        {
            "dependentSchemas": {
                "foo\tbar": {"minProperties": 4},
                "foo'bar": {"required": ['foo"bar']},
            }
        },
        [
            ("quoted tab", {"foo\tbar": 1, "a": 2, "b": 3, "c": 4}, True),
            ("quoted quote", {"foo'bar": {'foo"bar': 1}}, False),
            ("quoted tab invalid under dependent schema", {"foo\tbar": 1, "a": 2}, False),
            ("quoted quote invalid under dependent schema", {"foo'bar": 1}, False),
        ],
    ),
    # dependentSchemas.json: dependent subschema incompatible with root
    Group(
        "dependentSchemas",
        "dependent subschema incompatible with root",
        {
            "properties": {"foo": {}},
            "dependentSchemas": {"foo": {"properties": {"bar": {}}, "additionalProperties": False}},
        },
        [
            ("matches root", {"foo": 1}, False),
            ("matches dependency", {"bar": 1}, True),
            ("matches both", {"foo": 1, "bar": 2}, False),
            ("no dependency", {"baz": 1}, True),
        ],
    ),
    # --- dynamicRef.json ------------------------------------------------------------
    # dynamicRef.json: A $dynamicRef to a $dynamicAnchor in the same schema resource behaves like a normal $ref to an $anchor
    Group(
        "dynamicRef",
        "A $dynamicRef to a $dynamicAnchor in the same schema resource behaves like a normal $ref to an $anchor",
        {
            "$id": "https://test.json-schema.org/dynamicRef-dynamicAnchor-same-schema/root",
            "type": "array",
            "items": {"$dynamicRef": "#items"},
            "$defs": {"foo": {"$dynamicAnchor": "items", "type": "string"}},
        },
        [
            ("An array of strings is valid", ["foo", "bar"], True),
            ("An array containing non-strings is invalid", ["foo", 42], False),
        ],
        wrap=True,
    ),
    # dynamicRef.json: A $dynamicRef to an $anchor in the same schema resource behaves like a normal $ref to an $anchor
    Group(
        "dynamicRef",
        "A $dynamicRef to an $anchor in the same schema resource behaves like a normal $ref to an $anchor",
        {
            "$id": "https://test.json-schema.org/dynamicRef-anchor-same-schema/root",
            "type": "array",
            "items": {"$dynamicRef": "#items"},
            "$defs": {"foo": {"$anchor": "items", "type": "string"}},
        },
        [
            ("An array of strings is valid", ["foo", "bar"], True),
            ("An array containing non-strings is invalid", ["foo", 42], False),
        ],
        wrap=True,
    ),
    # dynamicRef.json: A $dynamicRef resolves to the first $dynamicAnchor still in scope that is encountered when the schema is evaluated
    Group(
        "dynamicRef",
        "A $dynamicRef resolves to the first $dynamicAnchor still in scope that is encountered when the schema is evaluated",
        {
            "$id": "https://test.json-schema.org/typical-dynamic-resolution/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#items"},
                    "$defs": {
                        "items": {
                            "$comment": "This is only needed to satisfy the bookending requirement",
                            "$dynamicAnchor": "items",
                        }
                    },
                },
            },
        },
        [
            ("An array of strings is valid", ["foo", "bar"], True),
            ("An array containing non-strings is invalid", ["foo", 42], False),
        ],
        wrap=True,
    ),
    # dynamicRef.json: A $dynamicRef without anchor in fragment behaves identical to $ref
    Group(
        "dynamicRef",
        "A $dynamicRef without anchor in fragment behaves identical to $ref",
        {
            "$id": "https://test.json-schema.org/dynamicRef-without-anchor/root",
            "$ref": "list",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#/$defs/items"},
                    "$defs": {
                        "items": {
                            "$comment": "This is only needed to satisfy the bookending requirement",
                            "$dynamicAnchor": "items",
                            "type": "number",
                        }
                    },
                },
            },
        },
        [
            ("An array of strings is invalid", ["foo", "bar"], False),
            ("An array of numbers is valid", [24, 42], True),
        ],
        wrap=True,
    ),
    # dynamicRef.json: A $dynamicRef with intermediate scopes that don't include a matching $dynamicAnchor does not affect dynamic scope resolution
    Group(
        "dynamicRef",
        "A $dynamicRef with intermediate scopes that don't include a matching $dynamicAnchor does not affect dynamic scope resolution",
        {
            "$id": "https://test.json-schema.org/dynamic-resolution-with-intermediate-scopes/root",
            "$ref": "intermediate-scope",
            "$defs": {
                "foo": {"$dynamicAnchor": "items", "type": "string"},
                "intermediate-scope": {"$id": "intermediate-scope", "$ref": "list"},
                "list": {
                    "$id": "list",
                    "type": "array",
                    "items": {"$dynamicRef": "#items"},
                    "$defs": {
                        "items": {
                            "$comment": "This is only needed to satisfy the bookending requirement",
                            "$dynamicAnchor": "items",
                        }
                    },
                },
            },
        },
        [
            ("An array of strings is valid", ["foo", "bar"], True),
            ("An array containing non-strings is invalid", ["foo", 42], False),
        ],
        wrap=True,
    ),
    # dynamicRef.json: A $dynamicRef that initially resolves to a schema with a matching $dynamicAnchor resolves to the first $dynamicAnchor in the dynamic scope
    Group(
        "dynamicRef",
        "A $dynamicRef that initially resolves to a schema with a matching $dynamicAnchor resolves to the first $dynamicAnchor in the dynamic scope",
        {
            "$id": "https://test.json-schema.org/relative-dynamic-reference/root",
            "$dynamicAnchor": "meta",
            "type": "object",
            "properties": {"foo": {"const": "pass"}},
            "$ref": "extended",
            "$defs": {
                "extended": {
                    "$id": "extended",
                    "$dynamicAnchor": "meta",
                    "type": "object",
                    "properties": {"bar": {"$ref": "bar"}},
                },
                "bar": {
                    "$id": "bar",
                    "type": "object",
                    "properties": {"baz": {"$dynamicRef": "extended#meta"}},
                },
            },
        },
        [
            (
                "The recursive part is valid against the root",
                {"foo": "pass", "bar": {"baz": {"foo": "pass"}}},
                True,
            ),
            (
                "The recursive part is not valid against the root",
                {"foo": "pass", "bar": {"baz": {"foo": "fail"}}},
                False,
            ),
        ],
    ),
    # dynamicRef.json: A $dynamicRef that initially resolves to a schema without a matching $dynamicAnchor behaves like a normal $ref to $anchor
    Group(
        "dynamicRef",
        "A $dynamicRef that initially resolves to a schema without a matching $dynamicAnchor behaves like a normal $ref to $anchor",
        {
            "$id": "https://test.json-schema.org/relative-dynamic-reference-without-bookend/root",
            "$dynamicAnchor": "meta",
            "type": "object",
            "properties": {"foo": {"const": "pass"}},
            "$ref": "extended",
            "$defs": {
                "extended": {
                    "$id": "extended",
                    "$anchor": "meta",
                    "type": "object",
                    "properties": {"bar": {"$ref": "bar"}},
                },
                "bar": {
                    "$id": "bar",
                    "type": "object",
                    "properties": {"baz": {"$dynamicRef": "extended#meta"}},
                },
            },
        },
        [
            (
                "The recursive part doesn't need to validate against the root",
                {"foo": "pass", "bar": {"baz": {"foo": "fail"}}},
                True,
            ),
        ],
    ),
    # dynamicRef.json: multiple dynamic paths to the $dynamicRef keyword
    Group(
        "dynamicRef",
        "multiple dynamic paths to the $dynamicRef keyword",
        {
            "$id": "https://test.json-schema.org/dynamic-ref-with-multiple-paths/main",
            "if": {"properties": {"kindOfList": {"const": "numbers"}}, "required": ["kindOfList"]},
            "then": {"$ref": "numberList"},
            "else": {"$ref": "stringList"},
            "$defs": {
                "genericList": {
                    "$id": "genericList",
                    "properties": {"list": {"items": {"$dynamicRef": "#itemType"}}},
                    "$defs": {
                        "defaultItemType": {
                            "$comment": "Only needed to satisfy bookending requirement",
                            "$dynamicAnchor": "itemType",
                        }
                    },
                },
                "numberList": {
                    "$id": "numberList",
                    "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "number"}},
                    "$ref": "genericList",
                },
                "stringList": {
                    "$id": "stringList",
                    "$defs": {"itemType": {"$dynamicAnchor": "itemType", "type": "string"}},
                    "$ref": "genericList",
                },
            },
        },
        [
            ("number list with number values", {"kindOfList": "numbers", "list": [1.1]}, True),
            ("number list with string values", {"kindOfList": "numbers", "list": ["foo"]}, False),
            ("string list with number values", {"kindOfList": "strings", "list": [1.1]}, False),
            ("string list with string values", {"kindOfList": "strings", "list": ["foo"]}, True),
        ],
    ),
    # dynamicRef.json: after leaving a dynamic scope, it is not used by a $dynamicRef
    Group(
        "dynamicRef",
        "after leaving a dynamic scope, it is not used by a $dynamicRef",
        {
            "$id": "https://test.json-schema.org/dynamic-ref-leaving-dynamic-scope/main",
            "if": {
                "$id": "first_scope",
                "$defs": {
                    "thingy": {
                        "$comment": "this is first_scope#thingy",
                        "$dynamicAnchor": "thingy",
                        "type": "number",
                    }
                },
            },
            "then": {
                "$id": "second_scope",
                "$ref": "start",
                "$defs": {
                    "thingy": {
                        "$comment": "this is second_scope#thingy, the final destination of the $dynamicRef",
                        "$dynamicAnchor": "thingy",
                        "type": "null",
                    }
                },
            },
            "$defs": {
                "start": {
                    "$comment": "this is the landing spot from $ref",
                    "$id": "start",
                    "$dynamicRef": "inner_scope#thingy",
                },
                "thingy": {
                    "$comment": "this is the first stop for the $dynamicRef",
                    "$id": "inner_scope",
                    "$dynamicAnchor": "thingy",
                    "type": "string",
                },
            },
        },
        [
            (
                "string matches /$defs/thingy, but the $dynamicRef does not stop here",
                "a string",
                False,
            ),
            ("first_scope is not in dynamic scope for the $dynamicRef", 42, False),
            ("/then/$defs/thingy is the final stop for the $dynamicRef", None, True),
        ],
        wrap=True,
    ),
    # dynamicRef.json: $dynamicRef points to a boolean schema
    Group(
        "dynamicRef",
        "$dynamicRef points to a boolean schema",
        {
            "$defs": {"true": True, "false": False},
            "properties": {
                "true": {"$dynamicRef": "#/$defs/true"},
                "false": {"$dynamicRef": "#/$defs/false"},
            },
        },
        [
            ("follow $dynamicRef to a true schema", {"true": 1}, True),
            ("follow $dynamicRef to a false schema", {"false": 1}, False),
        ],
    ),
    # dynamicRef.json: $dynamicRef skips over intermediate resources - direct reference
    Group(
        "dynamicRef",
        "$dynamicRef skips over intermediate resources - direct reference",
        {
            "$id": "https://test.json-schema.org/dynamic-ref-skips-intermediate-resource/main",
            "type": "object",
            "properties": {"bar-item": {"$ref": "item"}},
            "$defs": {
                "bar": {
                    "$id": "bar",
                    "type": "array",
                    "items": {"$ref": "item"},
                    "$defs": {
                        "item": {
                            "$id": "item",
                            "type": "object",
                            "properties": {"content": {"$dynamicRef": "#content"}},
                            "$defs": {
                                "defaultContent": {"$dynamicAnchor": "content", "type": "integer"}
                            },
                        },
                        "content": {"$dynamicAnchor": "content", "type": "string"},
                    },
                }
            },
        },
        [
            ("integer property passes", {"bar-item": {"content": 42}}, True),
            ("string property fails", {"bar-item": {"content": "value"}}, False),
        ],
    ),
    # dynamicRef.json: $dynamicRef avoids the root of each schema, but scopes are still registered
    Group(
        "dynamicRef",
        "$dynamicRef avoids the root of each schema, but scopes are still registered",
        {
            "$id": "https://test.json-schema.org/dynamic-ref-avoids-root-of-each-schema/base",
            "$ref": "first#/$defs/stuff",
            "$defs": {
                "first": {
                    "$id": "first",
                    "$defs": {
                        "stuff": {"$ref": "second#/$defs/stuff"},
                        "length": {
                            "$comment": "unused, because there is no $dynamicAnchor here",
                            "maxLength": 1,
                        },
                    },
                },
                "second": {
                    "$id": "second",
                    "$defs": {
                        "stuff": {"$ref": "third#/$defs/stuff"},
                        "length": {"$dynamicAnchor": "length", "maxLength": 2},
                    },
                },
                "third": {
                    "$id": "third",
                    "$defs": {
                        "stuff": {"$dynamicRef": "#length"},
                        "length": {"$dynamicAnchor": "length", "maxLength": 3},
                    },
                },
            },
        },
        [
            ("data is sufficient for schema at second#/$defs/length", "hi", True),
            ("data is not sufficient for schema at second#/$defs/length", "hey", False),
        ],
        wrap=True,
    ),
]

CASES = [
    pytest.param(
        group, description, data, valid, id=f"{group.file}/{group.description}/{description}"
    )
    for group in GROUPS
    for description, data, valid in group.tests
]


def probe_server(group: Group) -> tuple[Server, list[dict[str, Any]]]:
    server = Server("suite")
    received: list[dict[str, Any]] = []

    @server.tool(input_schema=group.input_schema())
    async def probe(whole: dict[str, Any]) -> str:
        received.append(whole)
        return "reached"

    return server, received


@pytest.mark.parametrize(("group", "description", "data", "valid"), CASES)
async def test_suite_case_through_a_server(
    group: Group, description: str, data: Any, valid: bool
) -> None:
    server, received = probe_server(group)
    arguments = group.arguments(data)
    async with open_client(server) as client:
        result = await client.call_tool("probe", arguments)
    if valid:
        assert not result.is_error, result.content
        assert result.content == [TextContent("reached")]
        assert received == [arguments]
    else:
        assert result.is_error
        [block] = result.content
        assert isinstance(block, TextContent)
        assert block.text.startswith("Invalid arguments for tool probe: ")
        assert received == []


def test_the_selection_covers_each_keyword_with_valid_and_invalid_instances() -> None:
    for file in ("unevaluatedProperties", "unevaluatedItems", "dependentSchemas", "dynamicRef"):
        tests = [t for g in GROUPS if g.file == file for t in g.tests]
        assert len(tests) >= 8, file
        assert {valid for _, _, valid in tests} == {True, False}, file


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: f"{g.file}/{g.description}")
def test_the_compiled_checker_refuses_these_schemas_instead_of_ignoring_keywords(
    group: Group,
) -> None:
    with pytest.raises(TypeError, match="not supported by the compiled checker") as info:
        compile_schema(group.input_schema())
    assert any(repr(keyword) in str(info.value) for keyword in REFUSED)


def test_a_remote_reference_fails_registration() -> None:
    # dynamicRef.json: strict-tree schema, guards against misspelled properties. Its "tree.json"
    # lives in the suite's remotes; references are never fetched, so the tool cannot register.
    schema = {
        "$id": "http://localhost:1234/draft2020-12/strict-tree.json",
        "$dynamicAnchor": "node",
        "$ref": "tree.json",
        "unevaluatedProperties": False,
    }
    server = Server("suite")
    with pytest.raises(TypeError, match=r"^tool 'probe': input_schema: \$ref 'tree.json'"):

        @server.tool(name="probe", input_schema={"type": "object", **schema})
        async def probe(whole: dict[str, Any]) -> str:
            return "reached"
