"""A published OpenAPI document (vendored in tests/data/openapi/) converts without error, and
every schema it gives a tool is a valid JSON Schema."""

from __future__ import annotations

from pathlib import Path

from jsonschema import Draft202012Validator

from trio_mcp import Server
from trio_mcp.openapi import RESOURCES_FOR_GETS

PETSTORE = Path(__file__).resolve().parent.parent / "data" / "openapi" / "petstore-expanded.yaml"


def test_the_petstore_converts_and_every_schema_is_valid_json_schema() -> None:
    server = Server.from_openapi(PETSTORE)
    assert set(server.tools) == {"findPets", "addPet", "find_pet_by_id", "deletePet"}
    for entry in server.tools.values():
        Draft202012Validator.check_schema(entry.tool.input_schema)
        if entry.tool.output_schema is not None:
            Draft202012Validator.check_schema(entry.tool.output_schema)
            assert entry.tool.output_schema["type"] == "object"
    add = server.tools["addPet"].tool
    assert add.input_schema["required"] == ["name"]
    # An array answer is wrapped; an allOf of objects is an object as it is.
    assert server.tools["findPets"].tool.output_schema["required"] == ["result"]  # type: ignore[index]
    pet = server.tools["find_pet_by_id"].tool.output_schema
    assert pet is not None and "allOf" in pet and "NewPet" in pet["$defs"]
    valid = Draft202012Validator(pet)
    assert valid.is_valid({"id": 1, "name": "Rex"})
    assert not valid.is_valid({"name": "Rex"})


def test_the_petstore_s_gets_become_resources_by_rule() -> None:
    server = Server.from_openapi(PETSTORE, routes=RESOURCES_FOR_GETS)
    assert set(server.tools) == {"findPets", "addPet", "deletePet"}
    assert set(server.templates) == {"api://pets/{id}"}
