"""Typed prompt arguments: MCP sends strings, the handler gets its annotation's type."""

from __future__ import annotations

import enum

import pydantic
import pytest

from trio_mcp import ProtocolError, Server, open_client
from trio_mcp.protocol import INVALID_PARAMS


class Tone(enum.Enum):
    WARM = "warm"
    COLD = "cold"


class Budget(pydantic.BaseModel):
    amount: float
    currency: str


def trip_server() -> tuple[Server, list[dict[str, object]]]:
    server = Server("trips")
    seen: list[dict[str, object]] = []

    @server.prompt
    def plan(
        days: int,
        ratio: float,
        vegan: bool,
        tone: Tone,
        tags: list[str],
        budget: Budget,
        city: str = "Paris",
    ) -> str:
        """Plan a trip.

        Args:
            days: how many days
        """
        seen.append(
            {"days": days, "ratio": ratio, "vegan": vegan, "tone": tone, "tags": tags}
            | {"budget": budget, "city": city}
        )
        return f"{days} days in {city}"

    return server, seen


GOOD = {
    "days": "3",
    "ratio": "2.5",
    "vegan": "true",
    "tone": "warm",
    "tags": '["food", "art"]',
    "budget": '{"amount": 900, "currency": "EUR"}',
}


def test_a_typed_parameter_is_a_prompt_argument_with_its_schema_in_the_description() -> None:
    server, _ = trip_server()
    listed = {a.name: a for a in server.prompts["plan"].prompt.arguments or ()}
    assert list(listed) == ["days", "ratio", "vegan", "tone", "tags", "budget", "city"]
    assert listed["days"].description == (
        'how many days\n\nA JSON value matching the schema {"type":"integer"}.'
    )
    assert listed["vegan"].description == 'A JSON value matching the schema {"type":"boolean"}.'
    assert listed["tone"].description == "One of: warm, cold."
    assert listed["budget"].description is not None
    assert '"required":["amount","currency"]' in listed["budget"].description
    assert listed["city"].description is None  # a string needs no hint
    assert listed["city"].required is False and listed["days"].required is True


async def test_string_arguments_are_converted_to_the_parameters_types() -> None:
    server, seen = trip_server()
    async with open_client(server) as client:
        result = await client.get_prompt("plan", GOOD)
    assert result.messages[0].content.text == "3 days in Paris"  # type: ignore[union-attr]
    (got,) = seen
    assert got == {
        "days": 3,
        "ratio": 2.5,
        "vegan": True,
        "tone": Tone.WARM,
        "tags": ["food", "art"],
        "budget": Budget(amount=900, currency="EUR"),
        "city": "Paris",
    }


@pytest.mark.parametrize(
    ("argument", "value", "says"),
    [
        ("days", "three", "argument 'days': expected an integer"),
        ("vegan", "maybe", "argument 'vegan'"),
        ("tone", "hot", "argument 'tone': expected one of 'warm', 'cold'"),
        ("tags", "[1, 2]", "argument 'tags[0]': expected a string"),
        ("budget", '{"amount": 1}', "missing required argument 'budget.currency'"),
    ],
)
async def test_a_value_that_does_not_convert_is_invalid_params_naming_the_argument(
    argument: str, value: str, says: str
) -> None:
    server, seen = trip_server()
    async with open_client(server) as client:
        with pytest.raises(ProtocolError) as info:
            await client.get_prompt("plan", {**GOOD, argument: value})
    assert info.value.code == INVALID_PARAMS
    assert info.value.message.startswith("Invalid params: prompt plan: ")
    assert says in info.value.message
    assert seen == []
