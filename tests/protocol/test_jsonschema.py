"""The compiled JSON Schema checker of the schemas trio_mcp generates, keyword by keyword: what
it implements, what it refuses, how it words a failure."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema_specifications import REGISTRY as META_SCHEMAS  # type: ignore[import-untyped]

from trio_mcp.protocol._jsonschema import (
    ANNOTATIONS,
    IMPLEMENTED,
    REFUSED,
    ArgumentsError,
    compile_schema,
    format_path,
    validate,
)

# --- the JSON Schema validator, keyword by keyword ---------------------------------------------


def check(schema: Any, instance: Any) -> list[str]:
    """The problems ``instance`` has against ``schema`` (empty when valid)."""
    try:
        validate(instance, schema)
    except ArgumentsError as exc:
        return list(exc.errors)
    return []


@pytest.mark.parametrize(
    ("type_", "good", "bad", "message"),
    [
        ("string", ["", "a"], [1, None, True], "expected a string"),
        ("integer", [1, -3, 2.0, 10**30], [1.5, True, "1", None], "expected an integer"),
        ("number", [1, 1.5, -2], [True, "1", None], "expected a number"),
        ("boolean", [True, False], [0, 1, "true"], "expected a boolean"),
        ("null", [None], [0, "", False], "expected null"),
        ("array", [[], [1]], [{}, "a"], "expected an array"),
        ("object", [{}, {"a": 1}], [[], "a"], "expected an object"),
    ],
)
def test_validator_type(type_: str, good: list[Any], bad: list[Any], message: str) -> None:
    for value in good:
        assert check({"type": type_}, value) == [], value
    for value in bad:
        errors = check({"type": type_}, value)
        assert len(errors) == 1 and errors[0].startswith(f"value: {message}, got"), value


def test_validator_type_list() -> None:
    schema = {"type": ["integer", "null"]}
    assert check(schema, None) == []
    assert check(schema, 3) == []
    assert check(schema, "x") == ["value: expected an integer or null, got a string ('x')"]


def test_validator_enum_and_const() -> None:
    assert check({"enum": ["a", 1, None, [1]]}, 1.0) == []
    assert check({"enum": ["a", 1, None, [1]]}, [1]) == []
    assert check({"enum": [1]}, True) == ["value: expected one of 1, got true"]
    assert check({"enum": ["a", "b"]}, "c") == ["value: expected one of 'a', 'b', got 'c'"]
    assert check({"const": {"k": [1, 2]}}, {"k": [1, 2]}) == []
    assert check({"const": "x"}, "y") == ["value: expected 'x', got 'y'"]
    assert check({"const": False}, 0) == ["value: expected false, got 0"]


def test_validator_properties_required_additional() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert check(schema, {"a": 1, "b": "x"}) == []
    assert check(schema, {"a": "1", "c": 0}) == [
        "missing required property 'b'",
        "property 'a': expected an integer, got a string ('1')",
        "unexpected property 'c'",
    ]
    open_schema = {
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    }
    assert check(open_schema, {"a": 1, "z": "ok"}) == []
    assert check(open_schema, {"z": 1}) == ["property 'z': expected a string, got an integer (1)"]
    assert check({"properties": {"a": {"type": "integer"}}}, {"zz": None}) == []


def test_validator_pattern_properties() -> None:
    schema = {
        "patternProperties": {"^x_": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert check(schema, {"x_1": 1}) == []
    assert check(schema, {"x_1": "a", "y": 1}) == [
        "property 'x_1': expected an integer, got a string ('a')",
        "unexpected property 'y'",
    ]


def test_validator_items_and_prefix_items() -> None:
    assert check({"items": {"type": "integer"}}, [1, 2]) == []
    assert check({"items": {"type": "integer"}}, [1, "a"]) == [
        "property '[1]': expected an integer, got a string ('a')"
    ]
    tup = {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False}
    assert check(tup, ["a", 1]) == []
    assert check(tup, ["a"]) == []
    assert check(tup, [1, 1, 3]) == [
        "property '[0]': expected a string, got an integer (1)",
        "property '[2]': no value is allowed here",
    ]
    # Draft 4-7 spelling.
    old = {"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}
    assert check(old, ["a", 1, 2]) == []
    assert check(old, ["a", "b"]) == ["property '[1]': expected an integer, got a string ('b')"]


def test_validator_array_sizes_unique_contains() -> None:
    assert check({"minItems": 2}, [1]) == ["value: expected at least 2 items, got 1"]
    assert check({"maxItems": 1}, [1, 2]) == ["value: expected at most 1 item, got 2"]
    assert check({"minItems": 1, "maxItems": 2}, [1]) == []
    assert check({"uniqueItems": True}, [1, "1", True, [1]]) == []
    assert check({"uniqueItems": True}, [1, 2, 1.0]) == [
        "value: items must be unique (item 2 repeats item 0)"
    ]
    assert check({"uniqueItems": True}, [{"a": 1}, {"a": 1}]) != []
    assert check({"uniqueItems": False}, [1, 1]) == []
    assert check({"contains": {"type": "string"}}, [1, "a"]) == []
    assert check({"contains": {"type": "string"}}, [1]) == [
        "value: expected at least 1 matching items, got 0"
    ]


def test_validator_strings() -> None:
    assert check({"minLength": 2}, "ab") == []
    assert check({"minLength": 2}, "a") == ["value: expected at least 2 characters, got 1"]
    assert check({"maxLength": 1}, "ab") == ["value: expected at most 1 character, got 2"]
    assert check({"maxLength": 1}, "é") == []  # code points, not bytes
    assert check({"pattern": "^[a-z]+$"}, "abc") == []
    assert check({"pattern": "b"}, "abc") == []  # search, not match
    assert check({"pattern": "^[a-z]+$"}, "aB") == [
        "value: 'aB' does not match the pattern '^[a-z]+$'"
    ]
    assert check({"minLength": 5, "pattern": "x"}, 3) == []  # string keywords ignore non-strings


def test_validator_numbers() -> None:
    assert check({"minimum": 1}, 1) == []
    assert check({"minimum": 1}, 0) == ["value: must be >= 1, got 0"]
    assert check({"exclusiveMinimum": 1}, 1) == ["value: must be > 1, got 1"]
    assert check({"maximum": 1.5}, 2) == ["value: must be <= 1.5, got 2"]
    assert check({"exclusiveMaximum": 2}, 2) == ["value: must be < 2, got 2"]
    assert check({"exclusiveMaximum": 2}, 1.9) == []
    assert check({"multipleOf": 3}, 9) == []
    assert check({"multipleOf": 3}, 10) == ["value: must be a multiple of 3, got 10"]
    assert check({"multipleOf": 0.1}, 0.3) == []
    assert check({"multipleOf": 0.1}, 0.35) == ["value: must be a multiple of 0.1, got 0.35"]
    assert check({"minimum": 5}, "a") == []  # numeric keywords ignore non-numbers
    assert check({"minimum": 5}, True) == []
    # Draft 4 boolean exclusive bounds.
    assert check({"minimum": 1, "exclusiveMinimum": True}, 1) == ["value: must be > 1, got 1"]
    assert check({"maximum": 1, "exclusiveMaximum": True}, 1) == ["value: must be < 1, got 1"]


def test_validator_object_counts_names_dependencies() -> None:
    assert check({"minProperties": 1}, {}) == ["value: expected at least 1 properties, got 0"]
    assert check({"maxProperties": 1}, {"a": 1, "b": 2}) == [
        "value: expected at most 1 properties, got 2"
    ]
    assert check({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1, "NO": 2}) == [
        "property 'NO': property name is not allowed"
    ]
    assert check({"dependentRequired": {"a": ["b"]}}, {"a": 1}) == ["missing required property 'b'"]
    assert check({"dependentRequired": {"a": ["b"]}}, {"c": 1}) == []


def test_validator_any_of() -> None:
    schema = {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]}
    assert check(schema, 1) == []
    assert check(schema, "ab") == []
    # The only alternative of the right type explains the failure itself.
    assert check(schema, "a") == ["value: expected at least 2 characters, got 1"]
    assert check(schema, None) == ["value: expected an integer or a string, got null"]
    objects = {
        "anyOf": [
            {"title": "circle", "type": "object", "required": ["r"]},
            {"type": "object", "required": ["side"]},
        ]
    }
    assert check(objects, {}) == [
        "value: matches none of the allowed alternatives (circle: missing required property 'r'"
        " | option 2: missing required property 'side')"
    ]


def test_validator_one_of_all_of_not() -> None:
    one = {"oneOf": [{"type": "integer"}, {"minimum": 0}]}
    assert check(one, -1) == []
    assert check(one, 1.5) == []
    assert check(one, 1) == ["value: matches more than one alternative (option 1, option 2)"]
    # Failing "integer" on type alone, option 1 is ruled out; option 2 explains the failure.
    assert check(one, -1.5) == ["value: must be >= 0, got -1.5"]
    both = {"allOf": [{"type": "integer"}, {"minimum": 2}]}
    assert check(both, 3) == []
    assert check(both, 1) == ["value: must be >= 2, got 1"]
    assert check({"not": {"type": "null"}}, 0) == []
    assert check({"not": {"type": "null"}}, None) == ["value: null is not allowed"]


def test_validator_if_then_else() -> None:
    schema = {
        "if": {"properties": {"kind": {"const": "a"}}},
        "then": {"required": ["a"]},
        "else": {"required": ["b"]},
    }
    assert check(schema, {"kind": "a", "a": 1}) == []
    assert check(schema, {"kind": "a"}) == ["missing required property 'a'"]
    assert check(schema, {"kind": "z"}) == ["missing required property 'b'"]


def test_validator_refs() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/definitions/n"}},
        "$defs": {"point": {"type": "object", "required": ["x"]}},
        "definitions": {"n": {"type": "integer"}},
    }
    assert check(schema, {"p": {"x": 1}, "q": 2}) == []
    assert check(schema, {"p": {}, "q": "2"}) == [
        "missing required property 'p.x'",
        "property 'q': expected an integer, got a string ('2')",
    ]


def test_validator_recursive_ref() -> None:
    tree = {
        "type": "object",
        "properties": {
            "children": {"type": "array", "items": {"$ref": "#"}},
            "v": {"type": "integer"},
        },
    }
    assert check(tree, {"v": 1, "children": [{"v": 2, "children": []}]}) == []
    assert check(tree, {"children": [{"children": [{"v": "x"}]}]}) == [
        "property 'children[0].children[0].v': expected an integer, got a string ('x')"
    ]


def test_validator_boolean_schemas_and_ignored_keywords() -> None:
    assert check(True, object()) == []
    assert check(False, 1) == ["value: no value is allowed here"]
    assert check({"format": "email", "x-custom": 1, "title": "t"}, "not an email") == []


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "strang"}, "unknown 'type'"),
        ({"type": []}, "bad 'type'"),
        ({"pattern": "("}, "bad pattern"),
        ({"$ref": "http://example.com/s.json"}, "only local"),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({"anyOf": []}, "'anyOf' must be a non-empty array"),
        ({"enum": "ab"}, "'enum' must be an array"),
        ({"multipleOf": 0}, "'multipleOf' must be > 0"),
        ([1], "expected an object or boolean"),
    ],
)
def test_validator_rejects_malformed_schemas(schema: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        compile_schema(schema)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"minimum": "5"}, "'minimum' must be a number"),
        ({"exclusiveMaximum": None, "maximum": [1]}, "'maximum' must be a number"),
        ({"minLength": -1}, "'minLength' must be a non-negative integer"),
        ({"maxItems": 1.5}, "'maxItems' must be a non-negative integer"),
        ({"maxItems": float("inf")}, "'maxItems' must be a non-negative integer"),
        ({"minContains": "2", "contains": {}}, "'minContains' must be a non-negative integer"),
        ({"required": "ab"}, "'required' must be an array of strings"),
        ({"required": [1]}, "'required' must be an array of strings"),
        ({"properties": [{"type": "string"}]}, "'properties' must be an object"),
        ({"dependentRequired": {"a": "b"}}, "'dependentRequired' of 'a' must be an array"),
    ],
)
def test_validator_rejects_keyword_values_it_would_otherwise_ignore(
    schema: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        compile_schema(schema)


@pytest.mark.parametrize("keyword", sorted(REFUSED))
def test_compiled_checker_refuses_every_keyword_it_does_not_implement(keyword: str) -> None:
    with pytest.raises(TypeError, match=rf"'{re.escape(keyword)}' is not supported"):
        compile_schema({"type": "object", keyword: {}})
    # Anywhere in the schema, not only at the root.
    with pytest.raises(TypeError, match=rf"'{re.escape(keyword)}' is not supported"):
        compile_schema({"properties": {"a": {"items": {keyword: {}}}}})


def test_compiled_checker_refusal_names_every_unsupported_keyword_and_the_way_out() -> None:
    with pytest.raises(TypeError) as info:
        compile_schema({"unevaluatedProperties": False, "dependentSchemas": {}})
    assert "'unevaluatedProperties', 'dependentSchemas' are not supported" in str(info.value)
    assert "input_schema=" in str(info.value)


@pytest.mark.parametrize("dialect", ["http://json-schema.org/draft-07/schema#", 7])
def test_compiled_checker_refuses_other_dialects(dialect: Any) -> None:
    with pytest.raises(TypeError, match="'\\$schema'"):
        compile_schema({"$schema": dialect, "type": "object"})
    compile_schema({"$schema": "https://json-schema.org/draft/2020-12/schema#"})


def test_compiled_checker_accepts_annotations_and_foreign_keywords() -> None:
    schema = {
        "type": "string",
        "title": "t",
        "description": "d",
        "default": "x",
        "examples": ["a"],
        "deprecated": True,
        "readOnly": False,
        "writeOnly": False,
        "$comment": "c",
        "format": "email",
        "contentEncoding": "base64",
        "contentMediaType": "text/plain",
        "contentSchema": {"unevaluatedProperties": False},  # an annotation: never applied
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"unused": {"dependentSchemas": {}}},  # never referenced, never applied
        "definitions": {},
        "x-mcp-header": "Region",
        "x-custom": {"any": "thing"},
    }
    assert set(schema) - {"x-mcp-header", "x-custom", "type"} == set(ANNOTATIONS)
    assert check(schema, "not an email") == []
    assert check(schema, 1) == ["value: expected a string, got an integer (1)"]


def test_compiled_checker_keyword_sets_cover_every_draft() -> None:
    """Every keyword of every published draft's meta-schema is implemented, an annotation, or
    refused: none can be silently ignored."""
    keywords: set[str] = set()
    for _, resource in META_SCHEMAS.items():
        keywords.update(resource.contents.get("properties", {}))
    assert len(keywords) > 50
    assert keywords - (IMPLEMENTED | ANNOTATIONS | REFUSED) == set()
    assert not IMPLEMENTED & ANNOTATIONS and not IMPLEMENTED & REFUSED and not ANNOTATIONS & REFUSED


def test_validate_custom_nouns_and_format_path() -> None:
    with pytest.raises(ArgumentsError, match=r"^field 'a': expected an integer"):
        validate({"a": "x"}, {"properties": {"a": {"type": "integer"}}}, noun="field")
    assert format_path(("a", 0, "b c", "d")) == "a[0]['b c'].d"
    assert format_path((0,)) == "[0]"


def test_compiled_check_reports_paths_relative_to_base() -> None:
    from trio_mcp.protocol._jsonschema import Collector

    found = Collector()
    compile_schema({"type": "integer"})("x", ("outer", 2), found)
    assert found.messages("argument") == [
        "argument 'outer[2]': expected an integer, got a string ('x')"
    ]
