"""The schema of a question put to the user (``ctx.elicit``) and the check of its answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol._jsonschema import Collector, compile_schema
from ._builder import Convert, _Builder

__all__ = ["elicitation_schema"]


def elicitation_schema(
    schema: dict[str, Any] | type[Any],
) -> tuple[dict[str, Any], Callable[[Any], Any]]:
    """The ``requestedSchema`` to send for ``ctx.elicit(message, schema)``, and the check of an
    accepted answer: it raises :class:`ArgumentsError` naming what is wrong, and returns the
    answer as the handler receives it (the content dict for a dict schema, an instance of the
    class for a class).

    A dict is hand-written, so the ``jsonschema`` library checks answers against it; it is
    prepared here, before the question is sent, so a broken schema fails in the handler rather
    than after the user answered. A class gets its derived schema, without
    ``additionalProperties`` (elicitation schemas are flat objects of primitives, and clients
    expect nothing more), checked by the compiled checker; its properties (extra keys dropped)
    then make the instance.
    """
    convert: Convert | None = None
    if isinstance(schema, dict):
        from ._handwritten import compile_handwritten  # loads jsonschema: only when used

        requested = schema
        check = compile_handwritten(requested, "the elicitation schema")
    else:
        node = _Builder().build(schema)
        requested = {k: v for k, v in node.schema.items() if k != "additionalProperties"}
        check = compile_schema(requested)
        convert = node.convert
    known = frozenset(requested.get("properties", ()))

    def check_answer(content: Any) -> Any:
        found = Collector()
        check(content, (), found)
        if found.issues:
            raise found.error()
        if convert is None:
            return content
        value = convert({k: v for k, v in content.items() if k in known}, (), found)
        if found.issues:
            raise found.error()
        return value

    return requested, check_answer
