"""Schemas from signatures, argument and result conversion, and the two JSON Schema checkers:
the compiled one for generated schemas, and the ``jsonschema`` library for hand-written ones."""

# Optional[...] is spelled out on purpose: it is one of the annotations under test.
# ruff: noqa: UP045

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, Required, TypedDict

import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema_specifications import REGISTRY as META_SCHEMAS  # type: ignore[import-untyped]

from trio_mcp import (
    CallToolResult,
    Context,
    ElicitRequestFormParams,
    ElicitResult,
    MCPError,
    Server,
    TextContent,
    open_client,
)
from trio_mcp.protocol._jsonschema import (
    ANNOTATIONS,
    IMPLEMENTED,
    REFUSED,
    compile_schema,
    format_path,
)
from trio_mcp.server._schema import (
    ArgumentsError,
    FunctionSignature,
    elicitation_schema,
    explicit_signature,
    function_signature,
    parse_docstring,
    schema_for_type,
    to_json,
    validate,
)

# --- fixtures: module level so string annotations resolve -------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: int
    y: int = attrs.field(default=0, metadata={"description": "vertical offset"})


@attrs.define
class Shape:
    name: str
    points: list[Point] = attrs.Factory(list)
    _secret: str = "s"
    computed: int = attrs.field(init=False, default=7)


@attrs.frozen
class Positive:
    value: int = attrs.field()

    @value.validator
    def _check(self, attribute: Any, value: int) -> None:
        if value <= 0:
            raise ValueError("value must be positive")


@attrs.frozen
class Circle:
    radius: float


@attrs.frozen
class Square:
    side: float


@dataclasses.dataclass
class Box:
    width: float
    label: str = "box"
    tags: list[str] = dataclasses.field(default_factory=list)
    note: Optional[str] = dataclasses.field(default=None, metadata={"description": "free text"})


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Partial(TypedDict, total=False):
    id: Required[str]
    rating: Annotated[float, "stars"]


@attrs.frozen
class Node:
    value: int
    children: list[Node]


class Ctx:
    pass


class SubCtx(Ctx):
    pass


class TextBlock:
    pass


class Result:
    pass


def sig_of(fn: Any, **kwargs: Any) -> FunctionSignature:
    return function_signature(fn, **kwargs)


def param_schema(tp: Any) -> dict[str, Any]:
    """The property schema of a single required parameter annotated ``tp``."""
    schema = schema_for_type(tp)
    return schema


def errors_of(sig: FunctionSignature, arguments: Any) -> str:
    with pytest.raises(ArgumentsError) as info:
        sig.convert_arguments(arguments)
    return str(info.value)


def one_arg(tp: Any, *, strict: bool = True) -> FunctionSignature:
    """A signature with a single required parameter ``v`` of annotation ``tp`` (strict unless
    told: most tests here are about the exact types; the lax conversions have their own)."""

    def fn(v: Any) -> None:
        pass

    fn.__annotations__ = {"v": tp, "return": None}
    return function_signature(fn, strict=strict)


def convert_one(tp: Any, value: Any) -> Any:
    return one_arg(tp).convert_arguments({"v": value})["v"]


def error_one(tp: Any, value: Any) -> str:
    return errors_of(one_arg(tp), {"v": value})


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


# --- input schemas of functions ----------------------------------------------------------------


def tool_basic(a: int, b: str = "x", c: float | None = None, d: Color = Color.RED) -> None:
    """Add things.

    Second paragraph.

    Args:
        a: the first number
            spanning two lines.
        b (str): a label
    """


def test_function_input_schema() -> None:
    sig = function_signature(tool_basic)
    assert sig.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "the first number spanning two lines."},
            "b": {"type": "string", "description": "a label", "default": "x"},
            "c": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "d": {"type": "string", "enum": ["red", "green"], "default": "red"},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert sig.description == "Add things.\n\nSecond paragraph."
    assert sig.context_param is None
    assert sig.output_schema is None
    assert sig.wraps_output is False


def test_no_required_key_when_all_optional() -> None:
    def fn(a: int = 1) -> None:
        pass

    assert function_signature(fn).input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer", "default": 1}},
        "additionalProperties": False,
    }


def from_source(source: str) -> Any:
    """A function defined from source, for signatures mypy would not let the test spell."""
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return namespace["fn"]


def test_unannotated_parameter_is_any() -> None:
    sig = function_signature(from_source("def fn(a, b=3): pass"))
    assert sig.input_schema["properties"] == {"a": {}, "b": {"default": 3}}
    assert sig.convert_arguments({"a": [1, {"x": None}]}) == {"a": [1, {"x": None}]}


def test_non_json_default_is_omitted() -> None:
    marker = object()

    def fn(
        a: Any = marker, p: Point = Point(1, 2), when: datetime.date = datetime.date(2024, 1, 2)
    ) -> None:
        pass

    props = function_signature(fn).input_schema["properties"]
    assert props["a"] == {}
    assert props["p"]["default"] == {"x": 1, "y": 2}
    assert props["when"] == {"type": "string", "format": "date", "default": "2024-01-02"}


def test_annotated_description_beats_docstring() -> None:
    def fn(a: Annotated[int, "from annotation"], b: int) -> None:
        """Doc.

        Args:
            a: from docstring
            b: b from docstring
        """

    props = function_signature(fn).input_schema["properties"]
    assert props["a"]["description"] == "from annotation"
    assert props["b"]["description"] == "b from docstring"


def test_description_none_without_docstring() -> None:
    def fn() -> None:
        pass

    sig = function_signature(fn)
    assert sig.description is None
    assert sig.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert sig.convert_arguments(None) == {}
    assert sig.convert_arguments({}) == {}


# --- docstrings --------------------------------------------------------------------------------


def test_parse_google_docstring() -> None:
    doc = """Summary line.

    Details here.

    Args:
        x (int): the x value,
            continued.
        y: the y value

    Returns:
        something
    """
    assert parse_docstring(doc) == (
        "Summary line.\n\nDetails here.",
        {"x": "the x value, continued.", "y": "the y value"},
    )


def test_parse_rest_docstring() -> None:
    doc = """Summary.

    :param x: the x value
        continued
    :param int y: the y value
    :returns: nothing
    """
    assert parse_docstring(doc) == ("Summary.", {"x": "the x value continued", "y": "the y value"})


def test_parse_numpy_docstring() -> None:
    doc = """Summary.

    Parameters
    ----------
    x : int
        the x value
    y
        the y value
        more

    Returns
    -------
    int
        not a parameter
    """
    assert parse_docstring(doc) == ("Summary.", {"x": "the x value", "y": "the y value more"})


def test_parse_docstring_edge_cases() -> None:
    assert parse_docstring(None) == (None, {})
    assert parse_docstring("") == (None, {})
    assert parse_docstring("\n    Args:\n        a: only args\n    ") == (None, {"a": "only args"})


# --- context parameter -------------------------------------------------------------------------


def test_context_parameter_excluded() -> None:
    def fn(a: int, ctx: Ctx) -> None:
        pass

    sig = function_signature(fn, context_type=Ctx)
    assert sig.context_param == "ctx"
    assert list(sig.input_schema["properties"]) == ["a"]
    assert sig.convert_arguments({"a": 1}) == {"a": 1}
    assert "unexpected argument 'ctx'" in errors_of(sig, {"a": 1, "ctx": {}})


@pytest.mark.parametrize("annotation", [Ctx, SubCtx, Optional[Ctx], Annotated[Ctx, "c"]])
def test_context_parameter_forms(annotation: Any) -> None:
    def fn(a: int, context: Any = None) -> None:
        pass

    fn.__annotations__ = {"a": int, "context": annotation}
    assert function_signature(fn, context_type=Ctx).context_param == "context"


def test_context_type_not_given_means_regular_parameter() -> None:
    def fn(ctx: Ctx) -> None:
        pass

    with pytest.raises(TypeError, match="parameter 'ctx': unsupported type annotation Ctx"):
        function_signature(fn)


def test_two_context_parameters_rejected() -> None:
    def fn(a: Ctx, b: Ctx) -> None:
        pass

    with pytest.raises(TypeError, match="both 'a' and 'b' take the context"):
        function_signature(fn, context_type=Ctx)


# --- registration errors -----------------------------------------------------------------------


def test_var_args_rejected() -> None:
    def fn(*args: int) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter \*args is not supported"):
        function_signature(fn)


def test_var_kwargs_rejected() -> None:
    def fn(a: int, **kwargs: int) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter \*\*kwargs is not supported"):
        function_signature(fn)


def test_self_rejected() -> None:
    class Tools:
        def method(self, a: int) -> None:
            pass

    with pytest.raises(TypeError, match="parameter 'self' suggests an unbound method"):
        function_signature(Tools.method)
    # The bound method is fine.
    assert list(function_signature(Tools().method).input_schema["properties"]) == ["a"]


def test_positional_only_rejected() -> None:
    def fn(a: int, /) -> None:
        pass

    with pytest.raises(TypeError, match="positional-only parameter 'a'"):
        function_signature(fn)


def test_unsupported_parameter_names_the_parameter() -> None:
    def fn(blob: bytes) -> None:
        pass

    with pytest.raises(TypeError, match="fn: parameter 'blob': unsupported type annotation bytes"):
        function_signature(fn)


def test_recursive_parameter_type_rejected() -> None:
    def fn(tree: Node) -> None:
        pass

    with pytest.raises(TypeError, match="recursive types are not supported"):
        function_signature(fn)


def test_unresolvable_hint_rejected() -> None:
    def fn(a: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(TypeError, match="cannot resolve the type hints of"):
        function_signature(fn)


def test_partial_and_callable_instance() -> None:
    def fn(a: int, b: str) -> None:
        """Partial doc."""

    sig = function_signature(functools.partial(fn, b="x"))
    assert sig.input_schema["properties"]["a"] == {"type": "integer"}
    assert sig.input_schema["properties"]["b"] == {"type": "string", "default": "x"}
    assert sig.description == "Partial doc."

    class Callable_:
        def __call__(self, q: int) -> int:
            """Call doc."""
            return q

    inst = function_signature(Callable_())
    assert inst.input_schema["required"] == ["q"]
    assert inst.description == "Call doc."


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


# --- output schemas and results ----------------------------------------------------------------


def _ret(tp: Any, **kwargs: Any) -> FunctionSignature:
    def fn() -> None:
        pass

    fn.__annotations__ = {"return": tp}
    return function_signature(fn, **kwargs)


def test_no_output_schema_cases() -> None:
    assert function_signature(from_source("def fn(): pass")).output_schema is None
    unstructured: list[Any] = [None, Any, str, Annotated[str, "text"], bytes]
    for tp in unstructured:
        sig = _ret(tp)
        assert sig.output_schema is None, tp
        assert sig.wraps_output is False
    content: list[Any] = [
        TextBlock,
        list[TextBlock],
        TextBlock | Result,
        Result,
        Sequence[TextBlock | Result],
    ]
    for tp in content:
        assert _ret(tp, skip_output_types=(TextBlock, Result)).output_schema is None, tp


def test_object_output_schemas_not_wrapped() -> None:
    sig = _ret(Point)
    assert sig.wraps_output is False
    # Every field of a returned object is present, so all are required; no defaults.
    assert sig.output_schema == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "description": "vertical offset"},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert _ret(Movie).output_schema == schema_for_type(Movie)
    assert _ret(dict[str, int]).output_schema == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    # init=False fields are part of what a tool returns.
    shape = _ret(Shape).output_schema
    assert shape is not None
    assert list(shape["properties"]) == ["name", "points", "secret", "computed"]
    assert shape["required"] == ["name", "points", "secret", "computed"]


@pytest.mark.parametrize(
    ("tp", "inner"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (
            Point | None,
            {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {
                            "x": {"type": "integer"},
                            "y": {"type": "integer", "description": "vertical offset"},
                        },
                        "required": ["x", "y"],
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ]
            },
        ),
        (str | None, {"anyOf": [{"type": "string"}, {"type": "null"}]}),
    ],
)
def test_wrapped_output_schemas(tp: Any, inner: dict[str, Any]) -> None:
    sig = _ret(tp)
    assert sig.wraps_output is True
    assert sig.output_schema == {
        "type": "object",
        "properties": {"result": inner},
        "required": ["result"],
    }


def test_convert_result() -> None:
    assert _ret(int).convert_result(3) == {"result": 3}
    assert _ret(list[Point]).convert_result([Point(1, 2)]) == {"result": [{"x": 1, "y": 2}]}
    assert _ret(Color).convert_result(Color.RED) == {"result": "red"}
    assert _ret(Point).convert_result(Point(3, 4)) == {"x": 3, "y": 4}
    assert _ret(Box).convert_result(Box(1.5, tags=["t"])) == {
        "width": 1.5,
        "label": "box",
        "tags": ["t"],
        "note": None,
    }
    assert _ret(Movie).convert_result({"title": "T"}) == {"title": "T"}
    assert _ret(Shape).convert_result(Shape("s", [Point(1, 1)])) == {
        "name": "s",
        "points": [{"x": 1, "y": 1}],
        "secret": "s",
        "computed": 7,
    }
    assert _ret(tuple[int, ...]).convert_result((1, 2)) == {"result": [1, 2]}
    assert _ret(set[int]).convert_result({3, 1, 2}) == {"result": [1, 2, 3]}
    assert _ret(dict[str, Level]).convert_result({"a": Level.LOW}) == {"a": 1}
    when = datetime.datetime(2024, 1, 2, 3, 4, 5)
    assert _ret(datetime.datetime).convert_result(when) == {"result": "2024-01-02T03:04:05"}


def test_to_json_handles_odd_values() -> None:
    ident = uuid.UUID(int=1)
    assert to_json({Color.RED: ident, 1: datetime.date(2020, 1, 1)}) == {
        "red": str(ident),
        "1": "2020-01-01",
    }
    assert to_json(frozenset({"b", "a"})) == ["a", "b"]
    assert to_json(range(3)) == [0, 1, 2]


# --- explicit schemas --------------------------------------------------------------------------

EXPLICIT = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string"}},
    "required": ["a"],
}


def test_explicit_signature_passes_keywords() -> None:
    def fn(a: int, b: str = "x") -> None:
        """Explicit tool."""

    sig = explicit_signature(EXPLICIT, None, fn)
    assert sig.input_schema == EXPLICIT
    assert sig.output_schema is None
    assert sig.description == "Explicit tool."
    assert sig.convert_arguments({"a": 1, "b": "y"}) == {"a": 1, "b": "y"}
    assert sig.convert_arguments({"a": 1, "extra": True}) == {"a": 1}  # allowed, but not taken
    assert errors_of(sig, {"a": -1, "b": 2}) == (
        "argument 'a': must be >= 0, got -1; argument 'b': expected a string, got an integer (2)"
    )
    assert errors_of(sig, None) == "missing required argument 'a'"


def test_explicit_signature_whole_mapping() -> None:
    def fn(arguments: dict[str, Any]) -> None:
        pass

    sig = explicit_signature(EXPLICIT, None, fn)
    assert sig.convert_arguments({"a": 1, "z": 2}) == {"arguments": {"a": 1, "z": 2}}

    def fn2(params: Mapping[str, Any], ctx: Ctx) -> None:
        pass

    sig2 = explicit_signature(EXPLICIT, None, fn2, context_type=Ctx)
    assert sig2.context_param == "ctx"
    assert sig2.convert_arguments({"a": 1}) == {"params": {"a": 1}}


def test_explicit_signature_mapping_parameter_named_like_a_property() -> None:
    schema = {"type": "object", "properties": {"options": {"type": "object"}}}

    def fn(options: dict[str, Any] | None = None) -> None:
        pass

    sig = explicit_signature(schema, None, fn)
    assert sig.convert_arguments({"options": {"k": 1}}) == {"options": {"k": 1}}


def test_explicit_signature_var_kwargs() -> None:
    def fn(a: int, **rest: Any) -> None:
        pass

    sig = explicit_signature(EXPLICIT, None, fn)
    assert sig.convert_arguments({"a": 1, "b": "x", "c": 3}) == {"a": 1, "b": "x", "c": 3}


def test_explicit_signature_output_schema() -> None:
    def fn(a: int, b: str = "") -> Any:
        return {"n": a}

    out = {"type": "object", "properties": {"n": {"type": "integer"}}}
    sig = explicit_signature(EXPLICIT, out, fn)
    assert sig.output_schema == out
    assert sig.wraps_output is False
    assert sig.convert_result({"n": Level.HIGH}) == {"n": 2}


@pytest.mark.parametrize(
    ("schema", "fn_source", "message"),
    [
        ({"type": "array"}, "def fn(a): pass", "input_schema must be a JSON Schema object"),
        ({"properties": {}}, "def fn(a): pass", "input_schema must be a JSON Schema object"),
        (EXPLICIT, "def fn(a, c): pass", "parameter 'c' is not a property of the input schema"),
        (EXPLICIT, "def fn(a, b): pass", "parameter 'b' has no default"),
        (EXPLICIT, "def fn(a): pass", r"properties \['b'\] are not parameters"),
        (EXPLICIT, "def fn(*a): pass", r"parameter \*a is not supported"),
        (
            {"type": "object", "properties": {"a": {"type": "wat"}}},
            "def fn(a=1): pass",
            r"^fn: input_schema is not a valid JSON Schema at \$\.properties\.a\.type: 'wat'",
        ),
        ({"type": "object", "$ref": "#/$defs/nope"}, "def fn(): pass", "does not resolve"),
        (
            {"type": "object", "properties": {"a": {"$ref": "http://example.com/a.json"}}},
            "def fn(a=1): pass",
            r"\$ref 'http://example.com/a.json' does not resolve \(.*never fetched\)",
        ),
        (
            {"type": "object", "$schema": "http://example.com/my-dialect"},
            "def fn(): pass",
            "unknown JSON Schema dialect 'http://example.com/my-dialect'",
        ),
        (
            {"type": "object", "properties": {"a": {"pattern": "("}}},
            "def fn(a=1): pass",
            "at \\$\\.properties\\.a\\.pattern: '\\(' is not a 'regex'",
        ),
    ],
)
def test_explicit_signature_registration_errors(
    schema: dict[str, Any], fn_source: str, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        explicit_signature(schema, None, from_source(fn_source))


def test_explicit_signature_rejects_non_object_output() -> None:
    def fn(a: int, b: str = "") -> None:
        pass

    for bad in ({"type": "string"}, {}):
        with pytest.raises(TypeError, match="output_schema must be"):
            explicit_signature(EXPLICIT, bad, fn)


def test_an_invalid_hand_written_schema_fails_registration_naming_the_tool() -> None:
    server = Server("bad-schemas")
    with pytest.raises(
        TypeError,
        match=r"^tool 'lookup': input_schema is not a valid JSON Schema at "
        r"\$\.properties\.q\.minLength",
    ):

        @server.tool(
            name="lookup", input_schema={"type": "object", "properties": {"q": {"minLength": -1}}}
        )
        async def find(q: str = "") -> str:
            return q

    with pytest.raises(TypeError, match=r"^tool 'count': output_schema is not a valid JSON"):

        @server.tool(output_schema={"type": "object", "properties": {"n": {"type": "wat"}}})
        async def count() -> CallToolResult:
            return CallToolResult(content=[])

    assert server.tools == {}


def test_explicit_signature_checks_the_output_schema_too() -> None:
    def fn(a: int, b: str = "") -> None:
        pass

    bad = {"type": "object", "properties": {"n": {"minimum": "0"}}}
    with pytest.raises(TypeError, match=r"^tool 'count': output_schema is not a valid JSON"):
        explicit_signature(EXPLICIT, bad, fn, tool="count")


def test_explicit_signature_gets_every_2020_12_keyword() -> None:
    """The keywords the compiled checker refuses work in a hand-written schema."""
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["circle", "square"]}},
        "required": ["kind"],
        "dependentSchemas": {
            "radius": {"properties": {"radius": {"type": "number", "exclusiveMinimum": 0}}}
        },
        "$defs": {"tagged": {"$dynamicAnchor": "extra", "properties": {"tag": {"type": "string"}}}},
        "allOf": [{"$ref": "#/$defs/tagged"}],
        "unevaluatedProperties": False,
    }

    def fn(shape: dict[str, Any]) -> None:
        pass

    sig = explicit_signature(schema, None, fn)
    assert sig.convert_arguments({"kind": "circle", "radius": 2, "tag": "x"}) == {
        "shape": {"kind": "circle", "radius": 2, "tag": "x"}
    }
    assert (
        errors_of(sig, {"kind": "circle", "radius": 0}) == "argument 'radius': must be > 0, got 0"
    )
    assert errors_of(sig, {"kind": "square", "side": 2, "colour": "red"}) == (
        "unexpected argument 'colour'; unexpected argument 'side'"
    )


def test_explicit_signature_honours_a_declared_draft() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1, "exclusiveMinimum": True}},
        "dependencies": {"n": ["unit"]},
    }

    def fn(args: dict[str, Any]) -> None:
        pass

    sig = explicit_signature(draft4, None, fn)
    assert sig.convert_arguments({"n": 2, "unit": "m"}) == {"args": {"n": 2, "unit": "m"}}
    assert (
        errors_of(sig, {"n": 1})
        == "argument 'n': must be > 1, got 1; missing required argument 'unit'"
    )


def test_hand_written_schemas_are_prepared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    checked: list[Any] = []
    original = jsonschema.Draft202012Validator.check_schema

    def counting(schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(schema)
        original(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", counting)

    def fn(a: int, b: str = "x") -> None:
        pass

    sig = explicit_signature(EXPLICIT, None, fn)
    assert checked == [EXPLICIT]
    for _ in range(3):
        sig.convert_arguments({"a": 1})
        errors_of(sig, {"a": "x"})
    assert checked == [EXPLICIT]


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


def test_an_unsupported_keyword_in_annotated_constraints_fails_registration() -> None:
    def fn(options: Annotated[dict[str, Any], {"unevaluatedProperties": False}]) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'options'.*'unevaluatedProperties'"):
        function_signature(fn)


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


def test_convert_result_without_output_schema_is_plain_json() -> None:
    sig = _ret(str)
    assert sig.output_schema is None
    assert sig.convert_result(Point(1, 2)) == {"x": 1, "y": 2}


# --- elicitation schemas -----------------------------------------------------------------------


def test_elicitation_schema_of_a_class_is_derived_and_checked_by_the_compiled_checker() -> None:
    requested, check_answer = elicitation_schema(Point)
    assert requested == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "description": "vertical offset", "default": 0},
        },
        "required": ["x"],
    }
    check_answer({"x": 1})
    with pytest.raises(ArgumentsError, match=r"^property 'x': expected an integer"):
        check_answer({"x": "1"})


def test_elicitation_schema_written_by_hand_is_checked_by_the_library() -> None:
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
        "dependentRequired": {"phone": ["email"]},
        "unevaluatedProperties": False,
    }
    requested, check_answer = elicitation_schema(schema)
    assert requested == schema
    check_answer({"email": "a@b.c"})
    with pytest.raises(ArgumentsError, match=r"^missing required property 'email'$"):
        check_answer({"phone": "123"})
    with pytest.raises(ArgumentsError, match=r"^unexpected property 'age'$"):
        check_answer({"email": "a@b.c", "age": 3})


def test_a_broken_elicitation_schema_fails_before_anything_is_sent() -> None:
    with pytest.raises(TypeError, match=r"^the elicitation schema is not a valid JSON Schema"):
        elicitation_schema({"type": "object", "properties": {"n": {"type": "int"}}})


async def test_an_answer_the_hand_written_elicitation_schema_refuses_is_not_returned() -> None:
    server = Server("elicit")
    seen: list[Any] = []
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "unevaluatedProperties": False,
    }

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Your name?", schema)
        except MCPError as exc:
            return f"refused: {exc}"
        seen.append(answer.content)
        return "ok"

    answers: Iterator[dict[str, Any]] = iter([{"name": "Ada"}, {"name": "Ada", "admin": True}])

    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        assert params.requested_schema == schema
        return ElicitResult(action="accept", content=next(answers))

    async with open_client(server, on_elicit=on_elicit) as client:
        good = await client.call_tool("ask")
        bad = await client.call_tool("ask")
    assert good.content == [TextContent("ok")]
    assert bad.content == [
        TextContent(
            "refused: the client's elicitation answer is invalid: unexpected property 'admin'"
        )
    ]
    assert seen == [{"name": "Ada"}]
