"""Annotations as schemas and converters: the schema of each kind of annotation, argument
conversion and its errors, and round trips through JSON."""

# Optional[...] is spelled out on purpose: it is one of the annotations under test.
# ruff: noqa: UP045

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, Optional

import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.server._schema import (
    ArgumentsError,
    function_signature,
    schema_for_type,
    to_json,
    validate,
)

from ._shared import (
    Box,
    Circle,
    Color,
    Level,
    Movie,
    Node,
    Partial,
    Point,
    Positive,
    Shape,
    Square,
    convert_one,
    error_one,
    errors_of,
    one_arg,
    tool_basic,
)

# --- schemas of single annotations -------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (object, {}),
        (Literal["a"], {"type": "string", "const": "a"}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Literal[True], {"type": "boolean", "const": True}),
        (Literal[Color.RED], {"type": "string", "const": "red"}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array", "items": {}}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (set[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (frozenset[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Mapping[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (dict[str, Any], {"type": "object"}),
        (dict, {"type": "object"}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (datetime.datetime, {"type": "string", "format": "date-time"}),
        (datetime.date, {"type": "string", "format": "date"}),
        (datetime.time, {"type": "string", "format": "time"}),
        (uuid.UUID, {"type": "string", "format": "uuid"}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (
            Annotated[int, {"minimum": 0, "maximum": 9}],
            {"type": "integer", "minimum": 0, "maximum": 9},
        ),
        (
            Annotated[str | None, "maybe", {"maxLength": 3}],
            {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "maybe",
                "maxLength": 3,
            },
        ),
        (
            list[Annotated[int, {"minimum": 1}]],
            {"type": "array", "items": {"type": "integer", "minimum": 1}},
        ),
    ],
)
def test_schema_for_type(tp: Any, schema: dict[str, Any]) -> None:
    assert schema_for_type(tp) == schema


def test_no_type_lists_for_optional() -> None:
    schema = schema_for_type(Optional[list[int]])
    assert schema == {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}
    assert not any(isinstance(s.get("type"), list) for s in schema["anyOf"])


def test_attrs_schema() -> None:
    assert schema_for_type(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "description": "vertical offset", "default": 0},
        },
        "required": ["x"],
        "additionalProperties": False,
    }


def test_attrs_schema_factory_alias_and_init_false() -> None:
    # Factory defaults are optional without a "default"; private fields use their init alias;
    # init=False fields cannot be passed in, so they are not part of the input schema.
    assert schema_for_type(Shape) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "points": {"type": "array", "items": schema_for_type(Point)},
            "secret": {"type": "string", "default": "s"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def test_dataclass_schema() -> None:
    assert schema_for_type(Box) == {
        "type": "object",
        "properties": {
            "width": {"type": "number"},
            "label": {"type": "string", "default": "box"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "free text",
                "default": None,
            },
        },
        "required": ["width"],
        "additionalProperties": False,
    }


def test_typeddict_schema() -> None:
    assert schema_for_type(Movie) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title"],
        "additionalProperties": False,
    }
    assert schema_for_type(Partial) == {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "rating": {"type": "number", "description": "stars"},
        },
        "required": ["id"],
        "additionalProperties": False,
    }


def test_nested_schema_inlined() -> None:
    schema = schema_for_type(dict[str, list[Point | None]])
    assert schema == {
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "items": {"anyOf": [schema_for_type(Point), {"type": "null"}]},
        },
    }
    assert "$ref" not in orjson.dumps(schema).decode()


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (Node, "Node refers to itself; recursive types are not supported"),
        (dict[int, str], "dictionary keys must be str"),
        (bytes, "unsupported type annotation bytes"),
        (Literal[b"x"], "unsupported Literal value b'x'"),
    ],
)
def test_unsupported_types(tp: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        schema_for_type(tp)


def test_enum_with_non_json_value_rejected() -> None:
    class Odd(enum.Enum):
        A = (1, 2)

    with pytest.raises(TypeError, match="non-JSON value"):
        schema_for_type(Odd)


# --- argument conversion -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (str, "abc", "abc"),
        (int, 5, 5),
        (int, 3.0, 3),
        (float, 2, 2.0),
        (float, 2.5, 2.5),
        (bool, True, True),
        (None, None, None),
        (Any, {"a": [1]}, {"a": [1]}),
        (Literal["a", "b"], "b", "b"),
        (Literal[1, 2], 2.0, 2),
        (Literal[Color.GREEN], "green", Color.GREEN),
        (Color, "green", Color.GREEN),
        (Level, 2, Level.HIGH),
        (list[int], [1, 2], [1, 2]),
        (Sequence[str], ["a"], ["a"]),
        (tuple[int, ...], [1, 2, 3], (1, 2, 3)),
        (tuple[int, str], [1, "a"], (1, "a")),
        (set[int], [3, 1], {1, 3}),
        (frozenset[Color], ["red"], frozenset({Color.RED})),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (Mapping[str, Color], {"a": "red"}, {"a": Color.RED}),
        (Optional[int], None, None),
        (Optional[int], 4, 4),
        (int | str, "x", "x"),
        (float | int, 3, 3),
        (int | float, 2.5, 2.5),
        (Point, {"x": 1}, Point(1, 0)),
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Shape, {"name": "s", "secret": "t"}, Shape("s", [], "t")),
        (Box, {"width": 1}, Box(1.0)),
        (Movie, {"title": "T"}, {"title": "T"}),
        (Movie, {"title": "T", "year": 1999}, {"title": "T", "year": 1999}),
        (list[Point], [{"x": 1}], [Point(1, 0)]),
        (Circle | Square, {"side": 2}, Square(2.0)),
        (
            datetime.datetime,
            "2024-01-02T03:04:05Z",
            datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        ),
        (datetime.date, "2024-01-02", datetime.date(2024, 1, 2)),
        (datetime.time, "03:04", datetime.time(3, 4)),
        (
            uuid.UUID,
            "12345678-1234-5678-1234-567812345678",
            uuid.UUID(int=0x12345678123456781234567812345678),
        ),
        (Annotated[int, {"minimum": 0}], 0, 0),
    ],
)
def test_convert(tp: Any, value: Any, expected: Any) -> None:
    result = convert_one(tp, value)
    assert result == expected
    assert type(result) is type(expected)


def test_convert_builds_nested_instances() -> None:
    shape = convert_one(Shape, {"name": "tri", "points": [{"x": 1}, {"x": 2, "y": 3}]})
    assert shape == Shape("tri", [Point(1, 0), Point(2, 3)])
    assert shape.computed == 7


def test_omitted_optional_arguments_are_left_out() -> None:
    sig = function_signature(tool_basic)
    assert sig.convert_arguments({"a": 1}) == {"a": 1}
    assert sig.convert_arguments({"a": 1, "c": None, "d": "green"}) == {
        "a": 1,
        "c": None,
        "d": Color.GREEN,
    }


@pytest.mark.parametrize(
    ("tp", "value", "message"),
    [
        (str, 5, "argument 'v': expected a string, got an integer (5)"),
        (int, "abc", "argument 'v': expected an integer, got a string ('abc')"),
        (int, True, "argument 'v': expected an integer, got a boolean (true)"),
        (int, 3.5, "argument 'v': expected an integer, got a number (3.5)"),
        (float, False, "argument 'v': expected a number, got a boolean (false)"),
        (float, "1.5", "argument 'v': expected a number, got a string ('1.5')"),
        (bool, 1, "argument 'v': expected a boolean, got an integer (1)"),
        (None, 0, "argument 'v': expected null, got an integer (0)"),
        (Literal["a", "b"], "c", "argument 'v': expected one of 'a', 'b', got a string ('c')"),
        (Literal[1], True, "argument 'v': expected 1, got a boolean (true)"),
        (Color, "blue", "argument 'v': expected one of 'red', 'green', got a string ('blue')"),
        (list[int], {"a": 1}, "argument 'v': expected an array, got an object"),
        (
            list[int],
            [1, "x", 3, None],
            "argument 'v[1]': expected an integer, got a string ('x'); "
            "argument 'v[3]': expected an integer, got null",
        ),
        (tuple[int, str], [1], "argument 'v': expected an array of exactly 2 items, got 1"),
        (tuple[int, str], [1, 2], "argument 'v[1]': expected a string, got an integer (2)"),
        (set[int], [1, 2, 1], "argument 'v': items must be unique (item 2 repeats item 0)"),
        (dict[str, int], [], "argument 'v': expected an object, got an array"),
        (
            dict[str, int],
            {"a b": "x"},
            "argument 'v['a b']': expected an integer, got a string ('x')",
        ),
        (Optional[int], "x", "argument 'v': expected an integer or null, got a string ('x')"),
        (int | str | None, [], "argument 'v': expected an integer, a string or null, got an array"),
        (Point, "p", "argument 'v': expected a Point object, got a string ('p')"),
        (Point, {"y": 1}, "missing required argument 'v.x'"),
        (Point, {"x": 1, "z": 2}, "unexpected argument 'v.z'"),
        (Point, {"x": "abc"}, "argument 'v.x': expected an integer, got a string ('abc')"),
        (Positive, {"value": -1}, "argument 'v': invalid Positive: value must be positive"),
        (Movie, {"year": 1}, "missing required argument 'v.title'"),
        (Optional[Point], {"x": "a"}, "argument 'v.x': expected an integer, got a string ('a')"),
        (datetime.date, "yesterday", "argument 'v': expected an ISO 8601 date, got 'yesterday'"),
        (datetime.datetime, 5, "argument 'v': expected a date-time string, got an integer (5)"),
        (uuid.UUID, "nope", "argument 'v': expected a UUID, got 'nope'"),
        (Annotated[int, {"minimum": 0}], -1, "argument 'v': must be >= 0, got -1"),
        (
            Annotated[str, {"pattern": "^a"}],
            "b",
            "argument 'v': 'b' does not match the pattern '^a'",
        ),
        (
            Annotated[int, {"minimum": 0}],
            "x",
            "argument 'v': expected an integer, got a string ('x')",
        ),
    ],
)
def test_conversion_errors(tp: Any, value: Any, message: str) -> None:
    assert error_one(tp, value) == message


def test_union_of_objects_reports_each_alternative() -> None:
    message = error_one(Circle | Square, {"x": 1})
    assert message == (
        "argument 'v': matches none of the allowed alternatives ("
        "a Circle object: missing required argument 'v.radius'; unexpected argument 'v.x' | "
        "a Square object: missing required argument 'v.side'; unexpected argument 'v.x')"
    )


def test_annotated_constraints_inside_containers() -> None:
    tp = list[Annotated[int, {"minimum": 1}]]
    assert convert_one(tp, [1, 2]) == [1, 2]
    assert error_one(tp, [1, 0]) == "argument 'v[1]': must be >= 1, got 0"


def test_all_errors_collected_and_listed() -> None:
    sig = function_signature(tool_basic)
    with pytest.raises(ArgumentsError) as info:
        sig.convert_arguments({"b": 1, "zz": 2, "d": "blue"})
    assert info.value.errors == (
        "missing required argument 'a'",
        "argument 'b': expected a string, got an integer (1)",
        "argument 'd': expected one of 'red', 'green', got a string ('blue')",
        "unexpected argument 'zz'",
    )
    assert str(info.value) == "; ".join(info.value.errors)


def test_many_errors_are_summarised() -> None:
    message = error_one(list[int], ["x"] * 15)
    assert message.count("expected an integer") == 10
    assert message.endswith("; and 5 more problems")


def test_long_values_truncated_in_messages() -> None:
    message = error_one(int, "y" * 500)
    assert message == "argument 'v': expected an integer, got a string ('" + "y" * 36 + "...)"


def test_arguments_must_be_an_object() -> None:
    sig = function_signature(tool_basic)
    assert errors_of(sig, [1, 2]) == "arguments: expected an object, got an array"


def test_argument_errors_are_value_errors() -> None:
    assert issubclass(ArgumentsError, ValueError)


def test_to_json_handles_odd_values() -> None:
    ident = uuid.UUID(int=1)
    assert to_json({Color.RED: ident, 1: datetime.date(2020, 1, 1)}) == {
        "red": str(ident),
        "1": "2020-01-01",
    }
    assert to_json(frozenset({"b", "a"})) == ["a", "b"]
    assert to_json(range(3)) == [0, 1, 2]


def test_an_unsupported_keyword_in_annotated_constraints_fails_registration() -> None:
    def fn(options: Annotated[dict[str, Any], {"unevaluatedProperties": False}]) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'options'.*'unevaluatedProperties'"):
        function_signature(fn)


# --- round trips -------------------------------------------------------------------------------


@attrs.frozen
class Record:
    name: str
    score: float
    tags: tuple[str, ...]
    color: Color
    where: Point | None = None


points = st.builds(Point, st.integers(-(2**53), 2**53), st.integers(-(2**53), 2**53))
finite = st.floats(allow_nan=False, allow_infinity=False)
records = st.builds(
    Record,
    name=st.text(),
    score=finite,
    tags=st.lists(st.text(), max_size=4).map(tuple),
    color=st.sampled_from(Color),
    where=st.none() | points,
)

ROUND_TRIP_CASES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers(-(2**63), 2**63 - 1)),
    (float, finite),
    (str, st.text()),
    (list[int], st.lists(st.integers(-(2**63), 2**63 - 1))),
    (dict[str, float], st.dictionaries(st.text(), finite)),
    (tuple[int, str, bool], st.tuples(st.integers(-100, 100), st.text(), st.booleans())),
    (set[str], st.sets(st.text())),
    (Optional[Level], st.none() | st.sampled_from(Level)),
    (Point, points),
    (list[Record], st.lists(records, max_size=3)),
    (datetime.date, st.dates()),
    (uuid.UUID, st.uuids()),
]


@given(st.data())
def test_round_trip_through_json(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(ROUND_TRIP_CASES) - 1))
    tp, strategy = ROUND_TRIP_CASES[index]
    value = data.draw(strategy)
    sig = one_arg(tp)
    wire = orjson.loads(orjson.dumps({"v": to_json(value)}))
    assert sig.convert_arguments(wire) == {"v": value}
    validate(wire["v"], schema_for_type(tp))  # the JSON also satisfies the advertised schema


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from([0.0, 1.0, 2.5, -3.0])
    | st.sampled_from(["", "a", "red", "x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "title", "year", "a"]), inner, max_size=3)
    ),
    max_leaves=8,
)

AGREEMENT_TYPES: list[Any] = [
    int,
    float,
    str,
    bool,
    Optional[int],
    int | str,
    list[int],
    dict[str, float],
    tuple[int, str],
    set[int],
    Literal["a", 1],
    Color,
    Point,
    Movie,
    list[Point | None],
    Annotated[int, {"minimum": 0, "multipleOf": 2}],
]


@given(st.sampled_from(AGREEMENT_TYPES), json_values)
def test_conversion_agrees_with_advertised_schema(tp: Any, value: Any) -> None:
    """A value converts exactly when it satisfies the schema clients are shown."""
    try:
        convert_one(tp, value)
        converts = True
    except ArgumentsError:
        converts = False
    try:
        validate(value, schema_for_type(tp))
        valid = True
    except ArgumentsError:
        valid = False
    assert converts == valid


def test_new_type_uses_its_supertype() -> None:
    UserId = NewType("UserId", int)
    assert schema_for_type(UserId) == {"type": "integer"}
    assert convert_one(UserId, 4) == 4


def test_float_overflow_reported() -> None:
    assert (
        error_one(float, 10**400)
        == "argument 'v': number is too large, got " + repr(10**400)[:37] + "..."
    )


def test_set_of_unhashable_items_reported() -> None:
    assert (
        error_one(set[Box], [{"width": 1}]) == "argument 'v': items cannot be collected into a set"
    )
