"""The vendored Server Card and ``server.json`` schemas (tests/data/schemas/README.md names their
sources), as validators: every card test checks its documents with these, never with the
library's own idea of the format."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.protocols import Validator

SCHEMAS = Path(__file__).resolve().parent / "data" / "schemas"


@functools.cache
def card_validator() -> Validator:
    schema = orjson.loads((SCHEMAS / "server-card.v1.schema.json").read_bytes())
    # The published file holds its definitions only: a card is checked against ServerCard, as
    # the schema's own repository checks its examples.
    root = {**schema, "$ref": "#/$defs/ServerCard"}
    Draft202012Validator.check_schema(root)
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


@functools.cache
def server_json_validator() -> Validator:
    schema = orjson.loads((SCHEMAS / "server.2025-12-11.schema.json").read_bytes())
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)


def card_errors(document: Any) -> list[str]:
    """Every way ``document`` breaks the Server Card schema (empty: valid)."""
    return [f"{list(e.absolute_path)}: {e.message}" for e in card_validator().iter_errors(document)]


def server_json_errors(document: Any) -> list[str]:
    """Every way ``document`` breaks the registry's ``server.json`` schema (empty: valid)."""
    validator = server_json_validator()
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
