"""What a tool's function looks like over MCP: input schemas from its parameters, the context
parameter, the functions refused at registration, output schemas and checked results, and
signatures given a hand-written schema."""

# Optional[...] is spelled out on purpose: it is one of the annotations under test.
# ruff: noqa: UP045

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, Optional

import pytest

from trio_mcp import CallToolResult, Server
from trio_mcp.server._schema import (
    FunctionSignature,
    explicit_signature,
    function_signature,
    schema_for_type,
)

from ._shared import (
    EXPLICIT,
    Box,
    Color,
    Ctx,
    Level,
    Movie,
    Node,
    Point,
    Result,
    Shape,
    SubCtx,
    TextBlock,
    errors_of,
    tool_basic,
)

# --- input schemas of functions ----------------------------------------------------------------


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


# --- explicit schemas --------------------------------------------------------------------------


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


def test_convert_result_without_output_schema_is_plain_json() -> None:
    sig = _ret(str)
    assert sig.output_schema is None
    assert sig.convert_result(Point(1, 2)) == {"x": 1, "y": 2}
