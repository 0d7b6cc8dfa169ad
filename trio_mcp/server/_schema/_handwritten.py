"""Hand-written JSON Schemas, checked by the ``jsonschema`` library.

A schema a user writes (a tool's ``input_schema=`` or ``output_schema=``, a dict passed to
``ctx.elicit``) may use any keyword of JSON Schema 2020-12, MCP's default dialect (SEP-1613), or
declare another draft with ``$schema``. The ``jsonschema`` library is the well-kept reference
implementation of every draft, so it checks these. The compiled checker
(``protocol/_jsonschema.py``) serves only the schemas trio_mcp generates from type hints, whose
keywords it knows.

Everything that can be decided about a schema is decided once, by :func:`compile_handwritten`,
at registration: the dialect, the check against its meta-schema, and every reference resolved
(within the schema and the drafts' own meta-schemas only; a remote one is never fetched, so it
fails here). A call then runs the prepared validator and words its errors as the compiled checker
does (``argument 'a': must be >= 0, got -1``) into the same :class:`Collector`, so a client (often
a language model) reads one style whichever checker ran. Errors are reported in the order the
library finds them, which depends only on the schema and the value.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import jsonschema_specifications  # type: ignore[import-untyped]
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from ...protocol._jsonschema import Check, Collector, Path, canonical, short_repr, type_names

__all__ = ["DIALECT", "compile_handwritten"]

#: The dialect of a schema without ``$schema``.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: The drafts' meta-schemas (a ``$ref`` may point at one), and nothing that is fetched.
_OFFLINE: referencing.jsonschema.SchemaRegistry = jsonschema_specifications.REGISTRY

_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def compile_handwritten(schema: Mapping[str, Any] | bool, what: str) -> Check:
    """Prepare ``schema`` to check values; ``what`` names it in errors (``tool 'x': input_schema``).

    Raises :class:`TypeError` if the schema is not valid under its dialect's meta-schema, declares
    a dialect the library does not know, or holds a reference that does not resolve.
    """
    cls = _dialect(schema, what)
    document: Any = schema
    try:
        cls.check_schema(document)
    except SchemaError as exc:
        where = f" at {exc.json_path}" if exc.path else ""
        raise TypeError(f"{what} is not a valid JSON Schema{where}: {exc.message}") from None
    _resolve_references(schema, what)
    validator = cls(_located_false(document), registry=_OFFLINE)

    def check(value: Any, path: Path, found: Collector) -> None:
        errors = list(validator.iter_errors(value))
        if errors:
            _Reporter(value, path, found).report(errors)

    return check


def _dialect(schema: Mapping[str, Any] | bool, what: str) -> type[Validator]:
    if not isinstance(schema, Mapping) or "$schema" not in schema:
        return Draft202012Validator
    declared = schema["$schema"]
    cls = validator_for(schema, default=Draft202012Validator)
    if cls is Draft202012Validator and (
        not isinstance(declared, str) or declared.rstrip("#") != DIALECT
    ):
        raise TypeError(f"{what}: unknown JSON Schema dialect {declared!r} in '$schema'")
    return cls


def _resolve_references(schema: Mapping[str, Any] | bool, what: str) -> None:
    """Resolve every reference now, so none can fail while a call is being checked."""
    dialect = schema.get("$schema", DIALECT) if isinstance(schema, Mapping) else DIALECT
    specification = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    pending = [(root, _OFFLINE.resolver_with_root(root))]
    while pending:
        resource, resolver = pending.pop()
        contents = resource.contents
        if isinstance(contents, Mapping):
            for key in _KEYS:
                ref = contents.get(key)
                if not isinstance(ref, str):
                    continue
                try:
                    resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:
                    raise TypeError(
                        f"{what}: {key} {ref!r} does not resolve (references resolve within the "
                        "schema; remote ones are never fetched)"
                    ) from None
        for sub in resource.subresources():
            pending.append((sub, resolver.in_subresource(sub)))


# Where the library meets a ``false`` subschema of these keywords it reports the error without
# the property or index that led there, so a copy with ``{"not": {}}`` (exactly as strict) is
# validated instead. ``additionalProperties``, ``items`` and the like report ``false`` themselves.
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "dependencies")
_SCHEMA_LISTS = ("prefixItems", "items", "allOf", "anyOf", "oneOf")
_PLACES = ("$defs", "definitions")
_SCHEMA_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
)


def _located_false(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    for key, sub in schema.items():
        if key in _SCHEMA_MAPS and isinstance(sub, Mapping):
            out[key] = {k: {"not": {}} if v is False else _located_false(v) for k, v in sub.items()}
        elif key in _SCHEMA_LISTS and isinstance(sub, list):
            out[key] = [{"not": {}} if v is False else _located_false(v) for v in sub]
        elif key in _PLACES and isinstance(sub, Mapping):
            out[key] = {k: _located_false(v) for k, v in sub.items()}
        elif key in _SCHEMA_ONE:
            out[key] = _located_false(sub)
    return out


# --- wording the library's errors --------------------------------------------------------------

_BOUNDS = {
    "minimum": "must be >= ",
    "exclusiveMinimum": "must be > ",
    "maximum": "must be <= ",
    "exclusiveMaximum": "must be < ",
    "multipleOf": "must be a multiple of ",
}
_COUNTS = {
    "minLength": ("at least", "character"),
    "maxLength": ("at most", "character"),
    "minItems": ("at least", "item"),
    "maxItems": ("at most", "item"),
    "minProperties": ("at least", "properties"),
    "maxProperties": ("at most", "properties"),
}
_DRAFT4_EXCLUSIVE = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}
_ONLY_MATCHED = re.compile(r"but only (\d+) matched\)\Z")


class _Reporter:
    """Turns the library's errors for one value into the compiled checker's issues."""

    def __init__(self, value: Any, base: Path, found: Collector) -> None:
        self.value = value
        self.base = base
        self.found = found
        # Keyword applications already reported in full ("required" yields one error per name).
        self.done: set[Hashable] = set()

    def report(self, errors: Sequence[ValidationError]) -> None:
        for error in errors:
            self._one(error, self.found)

    def _one(self, error: ValidationError, found: Collector) -> None:
        located = tuple(error.absolute_path)
        path: Path = (*self.base, *located)
        keyword = error.validator
        limit = error.validator_value
        value = error.instance
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        once = (located, tuple(error.absolute_schema_path))
        if (
            isinstance(value, str)
            and "propertyNames" in error.absolute_schema_path
            and isinstance(self._at(located), Mapping)
        ):
            # Only propertyNames checks a value other than the one at the error's path: the name.
            if (located, value) not in self.done:
                self.done.add((located, value))
                found.fail((*path, value), "property name is not allowed")
        elif keyword in ("anyOf", "oneOf") and error.context:
            found.none_matched(path, value, self._branches(error, limit))
        elif keyword == "oneOf":
            found.fail(path, "matches more than one alternative")
        elif keyword == "type" and _type_names(limit):
            found.wrong_type(path, type_names(_type_names(limit)), value)
        elif keyword in ("required", "dependentRequired", "dependencies"):
            if once not in self.done:
                self.done.add(once)
                for name in _missing(keyword, limit, value):
                    found.missing((*path, name))
        elif keyword == "additionalProperties" and limit is False and isinstance(value, Mapping):
            for name in _additional(value, schema):
                found.unexpected((*path, name))
        elif keyword == "unevaluatedProperties" and limit is False and isinstance(value, Mapping):
            unevaluated = _unevaluated(value, error.message)
            if unevaluated is None:
                found.fail(path, _plain(error.message))
            for name in unevaluated or ():
                found.unexpected((*path, name))
        elif keyword in ("items", "additionalItems") and limit is False:
            start = _prefix_length(keyword, schema)
            for index in range(start, len(value) if isinstance(value, list) else start):
                found.fail((*path, index), "no value is allowed here")
        elif keyword is None or (keyword == "not" and limit == {}):
            found.fail(path, _nothing_allowed(error))
        elif keyword == "enum" and isinstance(limit, list):
            listing = ", ".join(short_repr(v) for v in limit[:10]) + (
                ", ..." if len(limit) > 10 else ""
            )
            found.fail(path, f"expected one of {listing}, got {short_repr(value)}")
        elif keyword == "const":
            found.fail(path, f"expected {short_repr(limit)}, got {short_repr(value)}")
        elif keyword in _BOUNDS:
            text = _BOUNDS[keyword]
            if schema.get(_DRAFT4_EXCLUSIVE.get(keyword, "")) is True:
                text = text.replace("=", "")  # draft 4 spelled exclusive bounds as booleans
            found.fail(path, f"{text}{short_repr(limit)}, got {short_repr(value)}")
        elif keyword in _COUNTS and isinstance(limit, int) and hasattr(value, "__len__"):
            side, noun = _COUNTS[keyword]
            count = _plural(limit, noun) if noun != "properties" else f"{limit} {noun}"
            found.fail(path, f"expected {side} {count}, got {len(value)}")
        elif keyword == "pattern":
            found.fail(path, f"{short_repr(value)} does not match the pattern {limit!r}")
        elif keyword == "uniqueItems" and isinstance(value, list):
            found.fail(path, _repeated(value))
        elif keyword in ("contains", "minContains"):
            at_least = schema.get("minContains", 1)
            matched = _ONLY_MATCHED.search(error.message)
            hits = matched[1] if matched else "0" if keyword == "contains" else None
            got = f", got {hits}" if hits is not None else ""
            found.fail(path, f"expected at least {at_least} matching items{got}")
        elif keyword == "maxContains":
            found.fail(path, f"expected at most {limit} matching items, got more")
        elif keyword == "not":
            found.fail(path, f"{short_repr(value)} is not allowed")
        else:
            found.fail(path, _plain(error.message))

    def _branches(self, error: ValidationError, options: Any) -> list[tuple[str, Collector]]:
        """The problems of each alternative of an anyOf/oneOf none of which matched."""
        by_index: dict[int, Collector] = {}
        for sub in error.context or ():
            index = sub.relative_schema_path[0]
            if isinstance(index, int):
                self._one(sub, by_index.setdefault(index, Collector()))
        out = []
        for index in sorted(by_index):
            option = options[index] if isinstance(options, list) else None
            title = option.get("title") if isinstance(option, Mapping) else None
            label = title if isinstance(title, str) else f"option {index + 1}"
            out.append((label, by_index[index]))
        return out

    def _at(self, located: tuple[str | int, ...]) -> Any:
        node = self.value
        for part in located:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return None
        return node


def _type_names(limit: Any) -> list[str]:
    """The names of a ``type`` keyword, or none if it holds more (draft 3 allowed schemas)."""
    kinds = [limit] if isinstance(limit, str) else limit if isinstance(limit, list) else []
    return kinds if all(isinstance(k, str) for k in kinds) else []


def _missing(keyword: str, limit: Any, value: Any) -> list[str]:
    if not isinstance(value, Mapping):
        return []
    if keyword == "required":
        needs = limit if isinstance(limit, list) else []
        return [n for n in needs if isinstance(n, str) and n not in value]
    out: list[str] = []
    for name, needs in limit.items() if isinstance(limit, Mapping) else ():
        if name in value:
            needs = [needs] if isinstance(needs, str) else needs  # draft 3 allowed one name
            if isinstance(needs, list):
                out.extend(n for n in needs if isinstance(n, str) and n not in value)
    return out


def _additional(value: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The properties ``additionalProperties: false`` refused: matched by no (pattern)property."""
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        name
        for name in value
        if name not in known and not any(re.search(p, name) for p in patterns)
    ]


def _unevaluated(value: Mapping[str, Any], message: str) -> list[str] | None:
    """The names an ``unevaluatedProperties: false`` error lists, or ``None`` if unsure.

    The library reports them only in its message; the names are read back from it and kept only
    if the message is exactly the one those names give.
    """
    names = sorted((k for k in value if repr(k) in message), key=str)
    verb = "was" if len(names) == 1 else "were"
    listed = ", ".join(repr(k) for k in names)
    expected = f"Unevaluated properties are not allowed ({listed} {verb} unexpected)"
    return names if names and message == expected else None


def _prefix_length(keyword: str, schema: Mapping[str, Any]) -> int:
    # additionalItems follows the array form of items (drafts 3 to 2019-09).
    prefix = schema.get("prefixItems" if keyword == "items" else "items", [])
    return len(prefix) if isinstance(prefix, list) else 0


def _nothing_allowed(error: ValidationError) -> str:
    """For a ``false`` (or ``{"not": {}}``) schema: the property whose presence forbids the value,
    when it is a dependent schema."""
    where = list(error.absolute_schema_path)
    if len(where) >= 3 and where[-3] == "dependentSchemas" and isinstance(where[-2], str):
        return f"no value is allowed when {short_repr(where[-2])} is present"
    return "no value is allowed here"


def _repeated(items: list[Any]) -> str:
    seen: dict[Hashable, int] = {}
    for index, item in enumerate(items):
        key = canonical(item)
        if key in seen:
            return f"items must be unique (item {index} repeats item {seen[key]})"
        seen[key] = index
    return "items must be unique"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _plain(message: str) -> str:
    """The library's own message, for keywords without a wording of ours; kept short."""
    text = message if len(message) <= 200 else message[:197] + "..."
    return text[:1].lower() + text[1:]
