"""The annotated types and the helpers the schema tests share: at module level, so that
string annotations resolve."""

# Optional[...] is spelled out on purpose: it is one of the annotations under test.
# ruff: noqa: UP045

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, NotRequired, Optional, Required, TypedDict

import attrs
import pytest

from trio_mcp.server._schema import (
    ArgumentsError,
    FunctionSignature,
    function_signature,
    schema_for_type,
)


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


def tool_basic(a: int, b: str = "x", c: float | None = None, d: Color = Color.RED) -> None:
    """Add things.

    Second paragraph.

    Args:
        a: the first number
            spanning two lines.
        b (str): a label
    """


EXPLICIT = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string"}},
    "required": ["a"],
}
