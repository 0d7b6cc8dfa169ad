"""The functions compared with fastmcp (``record.py`` registers them there, the parity test
here): a pydantic model, a dataclass, an attrs class, a TypedDict and ``Annotated``
constraints as parameters, and sample calls, valid and invalid."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Annotated, Any

import annotated_types as at
import attrs
import pydantic
from typing_extensions import TypedDict


class Address(pydantic.BaseModel):
    street: str
    number: int = pydantic.Field(ge=1)


@dataclasses.dataclass
class Size:
    width: int
    height: int = 1


@attrs.define
class Colour:
    name: str
    alpha: float = 1.0


class Tags(TypedDict):
    label: str
    weight: int


def model_tool(address: Address) -> str:
    """A pydantic model."""
    return address.street


def dataclass_tool(size: Size) -> int:
    """A dataclass."""
    return size.width * size.height


def attrs_tool(colour: Colour) -> str:
    """An attrs class."""
    return colour.name


def typeddict_tool(tags: Tags) -> str:
    """A TypedDict."""
    return tags["label"]


def constrained_tool(
    n: Annotated[int, pydantic.Field(ge=1, le=5)],
    ratio: Annotated[float, at.Gt(0), at.Lt(1)] = 0.5,
    code: Annotated[str, at.MinLen(2), at.MaxLen(4)] = "ab",
    items: Annotated[list[int], at.Len(1, 3)] = [1],  # noqa: B006
    step: Annotated[int, at.MultipleOf(5)] = 5,
    count: int = pydantic.Field(3, le=10),
) -> int:
    """Annotated constraints."""
    return n


TOOLS: list[Callable[..., Any]] = [
    model_tool,
    dataclass_tool,
    attrs_tool,
    typeddict_tool,
    constrained_tool,
]

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("model_tool", {"address": {"street": "Main", "number": 3}}),
    ("model_tool", {"address": {"street": "Main", "number": 0}}),
    ("model_tool", {"address": {"number": 3}}),
    ("model_tool", {"address": {"street": "Main", "number": "3"}}),
    ("dataclass_tool", {"size": {"width": 2}}),
    ("dataclass_tool", {"size": {"width": "2", "height": 3}}),
    ("dataclass_tool", {"size": {"height": 3}}),
    ("dataclass_tool", {"size": {"width": "wide"}}),
    ("attrs_tool", {"colour": {"name": "red"}}),
    ("attrs_tool", {"colour": {"name": "red", "alpha": "0.5"}}),
    ("attrs_tool", {"colour": {"alpha": 0.5}}),
    ("typeddict_tool", {"tags": {"label": "a", "weight": 1}}),
    ("typeddict_tool", {"tags": {"label": "a"}}),
    ("typeddict_tool", {"tags": {"label": "a", "weight": "1"}}),
    ("constrained_tool", {"n": 3}),
    ("constrained_tool", {"n": "3"}),
    ("constrained_tool", {"n": 9}),
    ("constrained_tool", {"n": 0}),
    ("constrained_tool", {"n": 3, "ratio": 1}),
    ("constrained_tool", {"n": 3, "ratio": 0.2}),
    ("constrained_tool", {"n": 3, "code": "a"}),
    ("constrained_tool", {"n": 3, "code": "abcde"}),
    ("constrained_tool", {"n": 3, "items": []}),
    ("constrained_tool", {"n": 3, "items": [1, 2, 3, 4]}),
    ("constrained_tool", {"n": 3, "step": 7}),
    ("constrained_tool", {"n": 3, "step": 10}),
    ("constrained_tool", {"n": 3, "count": 11}),
    ("constrained_tool", {"n": "three"}),
    ("constrained_tool", {}),
]
