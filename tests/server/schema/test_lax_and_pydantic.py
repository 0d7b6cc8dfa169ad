"""Schemas a fastmcp user expects: lax numeric and boolean strings (strict on request),
``annotated_types`` and pydantic constraints, pydantic models, checked results, and elicitation
answers as instances of the class asked for."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Annotated, Any, TypedDict

import annotated_types as at
import attrs
import pydantic
import pytest

from trio_mcp import (
    Context,
    ElicitRequestFormParams,
    ElicitResult,
    Server,
    TextContent,
    open_client,
)
from trio_mcp.server._schema import (
    ArgumentsError,
    ResultError,
    elicitation_schema,
    function_signature,
    schema_for_type,
)


def one_arg(tp: Any, *, strict: bool = False) -> Any:
    def fn(v: Any) -> None:
        pass

    fn.__annotations__ = {"v": tp, "return": None}
    return function_signature(fn, strict=strict)


def convert(tp: Any, value: Any, *, strict: bool = False) -> Any:
    return one_arg(tp, strict=strict).convert_arguments({"v": value})["v"]


def error(tp: Any, value: Any, *, strict: bool = False) -> str:
    with pytest.raises(ArgumentsError) as info:
        one_arg(tp, strict=strict).convert_arguments({"v": value})
    return str(info.value)


# --- lax conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (int, "10", 10),
        (int, "-3", -3),
        (int, " 7 ", 7),
        (int, "10.0", 10),
        (float, "2.5", 2.5),
        (float, "1e3", 1000.0),
        (float, "4", 4.0),
        (bool, "true", True),
        (bool, "False", False),
        (bool, "yes", True),
        (bool, "0", False),
        (int | None, "5", 5),
        (list[int], ["1", 2], [1, 2]),
    ],
)
def test_exact_numeric_and_boolean_strings_are_accepted_by_default(
    tp: Any, value: Any, expected: Any
) -> None:
    result = convert(tp, value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("tp", "value", "message"),
    [
        (int, "10.5", "argument 'v': expected an integer, got a string ('10.5')"),
        (int, "ten", "argument 'v': expected an integer, got a string ('ten')"),
        (float, "nan", "argument 'v': expected a number, got a string ('nan')"),
        (bool, "maybe", "argument 'v': expected a boolean, got a string ('maybe')"),
        (int | None, "x", "argument 'v': expected an integer or null, got a string ('x')"),
    ],
)
def test_strings_that_are_not_exactly_a_number_are_still_refused(
    tp: Any, value: Any, message: str
) -> None:
    assert error(tp, value) == message


def test_a_string_stays_a_string_where_the_union_allows_one() -> None:
    assert convert(int | str, "10") == "10"
    assert convert(str | int, "10") == "10"


def test_strict_refuses_strings_and_the_schema_is_the_same() -> None:
    assert error(int, "10", strict=True) == "argument 'v': expected an integer, got a string ('10')"
    assert one_arg(int).input_schema == one_arg(int, strict=True).input_schema


def test_constraints_apply_to_the_number_a_string_became() -> None:
    tp = Annotated[int, {"maximum": 5}]
    assert convert(tp, "4") == 4
    assert error(tp, "9") == "argument 'v': must be <= 5, got 9"


async def test_strictness_is_a_server_default_and_a_per_tool_choice() -> None:
    lax = Server("lax")
    strict = Server("strict", strict=True)
    for server in (lax, strict):

        @server.tool()
        def double(n: int) -> int:
            return 2 * n

        @server.tool(strict=not server.strict)
        def triple(n: int) -> int:
            return 3 * n

    async with open_client(lax) as client:
        assert (await client.call_tool("double", {"n": "10"})).structured_content == {"result": 20}
        refused = await client.call_tool("triple", {"n": "10"})
        assert refused.is_error
    async with open_client(strict) as client:
        refused = await client.call_tool("double", {"n": "10"})
        assert refused.is_error
        assert refused.content == [
            TextContent(
                "Invalid arguments for tool double: argument 'n': expected an integer, "
                "got a string ('10')"
            )
        ]
        assert (await client.call_tool("triple", {"n": "10"})).structured_content == {"result": 30}


# --- annotated_types and pydantic Field ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (Annotated[int, at.Ge(1), at.Le(5)], {"type": "integer", "minimum": 1, "maximum": 5}),
        (Annotated[float, at.Gt(0), at.Lt(1)], {"type": "number", "exclusiveMinimum": 0,
                                                "exclusiveMaximum": 1}),
        (Annotated[int, at.Interval(ge=0, lt=10)], {"type": "integer", "minimum": 0,
                                                    "exclusiveMaximum": 10}),
        (Annotated[int, at.MultipleOf(3)], {"type": "integer", "multipleOf": 3}),
        (Annotated[str, at.MinLen(2), at.MaxLen(4)], {"type": "string", "minLength": 2,
                                                      "maxLength": 4}),
        (Annotated[list[int], at.Len(1, 3)], {"type": "array", "items": {"type": "integer"},
                                              "minItems": 1, "maxItems": 3}),
        (Annotated[int, pydantic.Field(ge=1, le=5, description="How many")],
         {"type": "integer", "minimum": 1, "maximum": 5, "description": "How many"}),
        (Annotated[str, pydantic.Field(pattern="^a", max_length=3)],
         {"type": "string", "pattern": "^a", "maxLength": 3}),
    ],
)  # fmt: skip
def test_annotated_constraints_are_in_the_schema(tp: Any, schema: dict[str, Any]) -> None:
    assert schema_for_type(tp) == schema


@pytest.mark.parametrize(
    ("tp", "good", "bad", "message"),
    [
        (Annotated[int, at.Ge(1), at.Le(5)], 5, 9, "must be <= 5, got 9"),
        (Annotated[int, pydantic.Field(ge=1, le=5)], 1, 0, "must be >= 1, got 0"),
        (Annotated[int, at.Interval(gt=0)], 1, 0, "must be > 0, got 0"),
        (Annotated[int, at.MultipleOf(3)], 6, 7, "must be a multiple of 3, got 7"),
        (Annotated[str, at.MaxLen(2)], "ab", "abc", "expected at most 2 characters, got 3"),
        (Annotated[list[int], at.MinLen(1)], [1], [], "expected at least 1 item, got 0"),
    ],
)
def test_annotated_constraints_are_checked(tp: Any, good: Any, bad: Any, message: str) -> None:
    assert convert(tp, good) == good
    assert error(tp, bad) == f"argument 'v': {message}"


def test_an_inexpressible_constraint_fails_at_registration() -> None:
    with pytest.raises(TypeError, match="Predicate"):
        one_arg(Annotated[int, at.Predicate(lambda n: n > 0)])
    with pytest.raises(TypeError, match="MinLen applies to strings, arrays and objects"):
        one_arg(Annotated[int, at.MinLen(1)])


def test_a_field_default_supplies_its_value_and_its_constraints() -> None:
    def fn(
        n: int = pydantic.Field(3, le=10, description="Count"),
        tags: list[str] = pydantic.Field(default_factory=list),
        need: int = pydantic.Field(description="Needed"),
    ) -> None:
        pass

    sig = function_signature(fn)
    assert sig.input_schema["properties"] == {
        "n": {"type": "integer", "maximum": 10, "description": "Count", "default": 3},
        "tags": {"type": "array", "items": {"type": "string"}},
        "need": {"type": "integer", "description": "Needed"},
    }
    assert sig.input_schema["required"] == ["need"]
    assert sig.convert_arguments({"need": 1}) == {"need": 1, "n": 3, "tags": []}
    with pytest.raises(ArgumentsError, match="argument 'n': must be <= 10, got 11"):
        sig.convert_arguments({"need": 1, "n": 11})


class Item(pydantic.BaseModel):
    sku: str
    qty: int = pydantic.Field(1, ge=1)


class Order(pydantic.BaseModel):
    customer: str
    items: list[Item]


def test_a_pydantic_model_parameter_has_pydantics_schema_inlined_and_its_validation() -> None:
    def place(order: Order) -> Order:
        return order

    sig = function_signature(place)
    schema = sig.input_schema["properties"]["order"]
    assert "$ref" not in str(schema) and "$defs" not in schema
    assert schema["properties"]["items"]["items"]["properties"]["qty"]["minimum"] == 1
    order = sig.convert_arguments({"order": {"customer": "ada", "items": [{"sku": "x"}]}})
    assert order == {"order": Order(customer="ada", items=[Item(sku="x", qty=1)])}
    with pytest.raises(ArgumentsError) as info:
        sig.convert_arguments({"order": {"items": [{"sku": "x", "qty": 0}]}})
    assert str(info.value) == (
        "missing required argument 'order.customer'; argument 'order.items[0].qty': Input "
        "should be greater than or equal to 1, got 0"
    )
    assert sig.output_schema is not None and sig.wraps_output is False
    assert sig.convert_result(Order(customer="b", items=[])) == {"customer": "b", "items": []}


def test_import_trio_mcp_does_not_import_pydantic_or_annotated_types() -> None:
    code = (
        "import sys, trio_mcp; print('pydantic' in sys.modules, 'annotated_types' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# --- results checked against the output schema ----------------------------------------------


def test_a_result_that_does_not_match_its_type_raises_result_error() -> None:
    def count() -> int:
        return 0

    sig = function_signature(count)
    assert sig.convert_result(3) == {"result": 3}
    with pytest.raises(ResultError) as info:
        sig.convert_result("not an int")
    assert str(info.value) == "the return value: expected an integer, got a string ('not an int')"


@attrs.define
class Point:
    x: int
    y: int


async def test_a_mismatched_result_is_a_tool_error_naming_what_is_wrong() -> None:
    server = Server("results")

    @server.tool()
    def count() -> int:
        return "not an int"  # type: ignore[return-value]

    @server.tool()
    def point() -> Point:
        return Point(1, "two")  # type: ignore[arg-type]

    @server.tool(
        input_schema={"type": "object"},
        output_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    )
    def handwritten(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"m": 1}

    async with open_client(server) as client:
        bad = await client.call_tool("count")
        assert bad.is_error and bad.structured_content is None
        assert bad.content == [
            TextContent(
                "Tool count returned an invalid result: the return value: expected an integer, "
                "got a string ('not an int')"
            )
        ]
        bad = await client.call_tool("point")
        assert bad.content == [
            TextContent(
                "Tool point returned an invalid result: property 'y': expected an integer, got a "
                "string ('two')"
            )
        ]
        bad = await client.call_tool("handwritten")
        assert bad.is_error
        assert "missing required property 'n'" in bad.content[0].text  # type: ignore[union-attr]


# --- elicitation answers as instances ------------------------------------------------------------


@dataclasses.dataclass
class Contact:
    email: str
    age: int = 0


@attrs.define
class Booking:
    day: str
    seats: int


class Prefs(TypedDict):
    theme: str


class Survey(pydantic.BaseModel):
    score: int = pydantic.Field(ge=1, le=5)


@pytest.mark.parametrize(
    ("cls", "content", "expected"),
    [
        (Contact, {"email": "a@b.c", "age": 36}, Contact("a@b.c", 36)),
        (Booking, {"day": "mon", "seats": 2}, Booking("mon", 2)),
        (Prefs, {"theme": "dark"}, {"theme": "dark"}),
        (Survey, {"score": 4}, Survey(score=4)),
    ],
)
async def test_an_accepted_elicitation_gives_an_instance_of_the_class(
    cls: Any, content: dict[str, Any], expected: Any
) -> None:
    server = Server("asks")
    got: list[Any] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("?", cls)
        got.append(answer.data)
        return answer.action

    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        return ElicitResult(action="accept", content=content)

    async with open_client(server, on_elicit=on_elicit) as client:
        result = await client.call_tool("ask")
    assert result.content == [TextContent("accept")]
    assert got == [expected]
    assert type(got[0]) is type(expected)


def test_a_dict_elicitation_schema_gives_the_content_and_extra_keys_are_dropped() -> None:
    _, check = elicitation_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert check({"a": "x"}) == {"a": "x"}
    _, check = elicitation_schema(Contact)
    assert check({"email": "e", "extra": 1}) == Contact("e")


def test_pydantic_strict_makes_one_parameter_strict() -> None:
    assert error(Annotated[int, pydantic.Strict()], "10") == (
        "argument 'v': expected an integer, got a string ('10')"
    )
    assert error(Annotated[int, pydantic.Field(strict=True, ge=1)], "10") == (
        "argument 'v': expected an integer, got a string ('10')"
    )
    assert convert(Annotated[int, pydantic.Strict(False)], "10", strict=True) == 10
    assert schema_for_type(Annotated[int, pydantic.Field(strict=True, ge=1)]) == {
        "type": "integer",
        "minimum": 1,
    }
