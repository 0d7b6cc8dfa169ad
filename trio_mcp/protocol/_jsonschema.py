"""The compiled JSON Schema checker for the schemas trio_mcp generates (a draft 2020-12 subset).

Schemas built from type hints (the server's ``_schema`` package), with the ``Annotated[T, {...}]``
constraints merged into them, and the schemas derived for elicitation are checked here. Their
keyword set is small and known, so this checker implements exactly that set and compiles a schema
once into closures (:func:`compile_schema`): checking a call does no schema walking. Schemas a
user writes by hand are checked by the ``jsonschema`` library instead (``_schema/_handwritten.py``
in the server). It is pure computation, so it lives here, in the sans-IO core.

A keyword is never silently ignored: one that changes what is valid but is not implemented here
(:data:`REFUSED`: ``unevaluatedProperties``, ``dependentSchemas``, ``$dynamicRef``, ``$id``...)
fails compilation with a ``TypeError`` naming it, so a tool using it fails at registration.
Annotations (``title``, ``description``, ``default``, ``examples``, ``format``...) and keywords
that are not JSON Schema's (``x-...``) have no bearing on validity and are accepted, as the spec
permits. Failures are reported with the JSON path of the offending value, in words an MCP client
(often a language model) can act on.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeAlias
from urllib.parse import unquote

import orjson

__all__ = [
    "ANNOTATIONS",
    "IMPLEMENTED",
    "REFUSED",
    "ArgumentsError",
    "Check",
    "Collector",
    "Path",
    "compile_schema",
    "describe_value",
    "format_path",
    "json_kind",
    "validate",
]

Path: TypeAlias = tuple[str | int, ...]

#: How many individual problems an :class:`ArgumentsError` message lists before summarising.
MAX_REPORTED = 10
#: Values quoted in messages are cut to about this many characters.
MAX_VALUE_CHARS = 40


class ArgumentsError(ValueError):
    """Tool arguments were rejected.

    The message is shown to the MCP client, so it names the failing argument path and never
    includes server internals. ``errors`` holds every individual problem found.
    """

    def __init__(self, message: str, errors: Sequence[str] | None = None) -> None:
        super().__init__(message)
        self.errors: tuple[str, ...] = tuple(errors) if errors is not None else (message,)


# --- describing values and paths ---------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")

_KINDS: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}

_ARTICLES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
}


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value; ints are ``integer``, floats ``number``."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return "unknown"


def short_repr(value: Any) -> str:
    """A JSON-flavoured rendering of ``value`` cut to :data:`MAX_VALUE_CHARS` characters."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = repr(value)
    else:
        try:
            text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            text = repr(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 3] + "..."
    return text


def describe_value(value: Any) -> str:
    """``a string ('abc')``, ``an array``, ``null``: what a message says was received."""
    kind = json_kind(value)
    if kind in ("array", "object"):
        return _ARTICLES[kind]
    if kind == "null":
        return "null"
    if kind == "unknown":
        return f"a {type(value).__name__}"
    return f"{_ARTICLES[kind]} ({short_repr(value)})"


def format_path(path: Path) -> str:
    """``point.x``, ``items[2].name``, ``tags['a b']``: a path as the client would write it."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{part!r}]")
    return "".join(out)


def type_names(names: Sequence[str]) -> str:
    """``an integer or null``: JSON type names, worded as a message says what was expected."""
    return join_or([_ARTICLES.get(n, repr(n)) for n in names])


def join_or(items: Sequence[str]) -> str:
    """``a, b or c``."""
    unique = list(dict.fromkeys(items))
    if len(unique) <= 1:
        return "".join(unique)
    return ", ".join(unique[:-1]) + " or " + unique[-1]


# --- collecting problems -----------------------------------------------------------------------


class _Issue:
    __slots__ = ("branches", "kind", "path", "text", "value")

    def __init__(
        self,
        kind: str,
        path: Path,
        text: str = "",
        value: Any = None,
        branches: Sequence[tuple[str, Collector]] = (),
    ) -> None:
        self.kind = kind  # "type", "missing", "unexpected", "other" or "none-matched"
        self.path = path
        self.text = text
        self.value = value
        self.branches = branches


class Collector:
    """Accumulates problems found while checking one value, so all of them can be reported.

    Problems are stored structurally and worded only at the end, because the same checks serve
    tool arguments ("missing required argument 'a'") and plain values ("... property 'a'").
    """

    __slots__ = ("issues",)

    def __init__(self) -> None:
        self.issues: list[_Issue] = []

    def __len__(self) -> int:
        return len(self.issues)

    def wrong_type(self, path: Path, expected: str, value: Any) -> None:
        """``value`` is not of the ``expected`` kind (worded like "an integer")."""
        self.issues.append(_Issue("type", path, expected, value))

    def missing(self, path: Path) -> None:
        self.issues.append(_Issue("missing", path))

    def unexpected(self, path: Path) -> None:
        self.issues.append(_Issue("unexpected", path))

    def fail(self, path: Path, message: str) -> None:
        self.issues.append(_Issue("other", path, message))

    def none_matched(
        self, path: Path, value: Any, branches: Sequence[tuple[str, Collector]]
    ) -> None:
        """Record that no alternative of a union accepted ``value``.

        ``branches`` pairs a label with the problems each alternative found. Alternatives that
        only failed on the value's type are folded into one "expected X or Y" message; if a
        single alternative had the right type, its own (more specific) problems are reported.
        """
        typed_out = [
            (label, found)
            for label, found in branches
            if found.issues and all(i.kind == "type" and i.path == path for i in found.issues)
        ]
        if len(typed_out) == len(branches):
            self.wrong_type(path, join_or([i.text for _, b in branches for i in b.issues]), value)
            return
        remaining = [b for b in branches if b not in typed_out]
        if len(remaining) == 1:
            self.issues.extend(remaining[0][1].issues)
        else:
            self.issues.append(_Issue("none-matched", path, value=value, branches=remaining))

    def messages(self, noun: str = "property", root: str = "value") -> list[str]:
        """Word every problem; ``noun`` names a nested item, ``root`` the value as a whole."""
        return [_render(issue, noun, root) for issue in self.issues]

    def error(self, noun: str = "property", root: str = "value") -> ArgumentsError:
        messages = self.messages(noun, root)
        shown = "; ".join(messages[:MAX_REPORTED])
        if len(messages) > MAX_REPORTED:
            shown += f"; and {len(messages) - MAX_REPORTED} more problems"
        return ArgumentsError(shown, messages)


def _render(issue: _Issue, noun: str, root: str) -> str:
    where = f"{noun} '{format_path(issue.path)}'" if issue.path else root
    if issue.kind == "type":
        return f"{where}: expected {issue.text}, got {describe_value(issue.value)}"
    if issue.kind == "missing":
        return f"missing required {noun} '{format_path(issue.path)}'"
    if issue.kind == "unexpected":
        return f"unexpected {noun} '{format_path(issue.path)}'"
    if issue.kind == "none-matched":
        parts = []
        for label, found in issue.branches:
            inner = "; ".join(found.messages(noun, root)[:2])
            parts.append(f"{label}: {inner}")
        return f"{where}: matches none of the allowed alternatives ({' | '.join(parts)})"
    return f"{where}: {issue.text}"


Check: TypeAlias = Callable[[Any, Path, Collector], None]


# --- JSON equality -----------------------------------------------------------------------------


def canonical(value: Any) -> Hashable:
    """A hashable key equal for JSON-equal values: ``1 == 1.0`` but ``true != 1``."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z",)
    if isinstance(value, list | tuple):
        return ("a", tuple(canonical(v) for v in value))
    if isinstance(value, Mapping):
        return ("o", frozenset((k, canonical(v)) for k, v in value.items()))
    return ("x", id(value))


# --- the compiler ------------------------------------------------------------------------------


def _ok(value: Any, path: Path, found: Collector) -> None:
    return None


def _nothing(value: Any, path: Path, found: Collector) -> None:
    found.fail(path, "no value is allowed here")


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPE_TESTS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list | tuple),
    "object": lambda v: isinstance(v, Mapping),
}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: The keywords the compiler implements. ``then``/``else`` act through ``if``, ``minContains``/
#: ``maxContains`` through ``contains``, and ``additionalItems`` in the draft 4-7 array form of
#: ``items`` (in 2020-12 it is not a keyword); ``$ref`` must be a local JSON pointer.
IMPLEMENTED: frozenset[str] = frozenset(
    {
        "type",
        "enum",
        "const",
        "$ref",
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "prefixItems",
        "items",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
    }
)

#: Keywords with no bearing on validity: annotations (``format`` and the ``content*`` keywords
#: are annotations in 2020-12 unless a validator opts in), the dialect, and the places that only
#: hold subschemas for ``$ref``. Accepted.
ANNOTATIONS: frozenset[str] = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "$schema",
        "$defs",
        "definitions",
    }
)

#: Every keyword of the published drafts (3 to 2020-12) that changes what is valid, or where a
#: ``$ref`` points, and that the compiler does not implement. Refused at compile time: silently
#: ignoring one would accept values the schema's author meant to refuse.
REFUSED: frozenset[str] = frozenset(
    {
        "unevaluatedProperties",
        "unevaluatedItems",
        "dependentSchemas",
        "dependencies",
        "$id",
        "id",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$recursiveRef",
        "$recursiveAnchor",
        "$vocabulary",
        "extends",
        "disallow",
        "divisibleBy",
    }
)

_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _refuse_unsupported(schema: Mapping[str, Any]) -> None:
    refused = [keyword for keyword in schema if keyword in REFUSED]
    if refused:
        names = ", ".join(repr(k) for k in refused)
        raise TypeError(
            f"invalid JSON Schema: {names} {'is' if len(refused) == 1 else 'are'} not supported "
            "by the compiled checker of generated schemas; write the tool's schema by hand "
            "(input_schema=...) to have the jsonschema library check it"
        )
    dialect = schema.get("$schema", _DIALECT)
    if not isinstance(dialect, str) or dialect.rstrip("#") != _DIALECT:
        raise TypeError(
            f"invalid JSON Schema: '$schema' {dialect!r} is not supported here; generated "
            f"schemas are draft 2020-12 ({_DIALECT!r})"
        )


class _Compiler:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, Check] = {}
        self.compiling: set[str] = set()

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _ok
        if schema is False:
            return _nothing
        if not isinstance(schema, Mapping):
            raise TypeError(f"invalid JSON Schema: expected an object or boolean, got {schema!r}")
        _refuse_unsupported(schema)
        type_check = self._type(schema)
        checks: list[Check] = []
        for build in (
            self._ref,
            self._enum,
            self._const,
            self._object,
            self._array,
            self._string,
            self._number,
            self._combinators,
            self._conditional,
        ):
            checks.extend(build(schema))
        if type_check is None:
            if not checks:
                return _ok
            if len(checks) == 1:
                return checks[0]

        def check(value: Any, path: Path, found: Collector) -> None:
            # A value of the wrong type makes the other keywords' complaints noise.
            if type_check is not None and not type_check(value, path, found):
                return
            for one in checks:
                one(value, path, found)

        return check

    # Each builder returns the checks for its keywords (possibly none).

    def _type(self, schema: Mapping[str, Any]) -> Callable[[Any, Path, Collector], bool] | None:
        if "type" not in schema:
            return None
        names = schema["type"]
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names:
            raise TypeError(f"invalid JSON Schema: bad 'type' {schema['type']!r}")
        try:
            tests = [_TYPE_TESTS[n] for n in names]
        except (KeyError, TypeError):
            raise TypeError(f"invalid JSON Schema: unknown 'type' {schema['type']!r}") from None
        expected = type_names(names)

        def type_check(value: Any, path: Path, found: Collector) -> bool:
            for test in tests:
                if test(value):
                    return True
            found.wrong_type(path, expected, value)
            return False

        return type_check

    def _ref(self, schema: Mapping[str, Any]) -> list[Check]:
        if "$ref" not in schema:
            return []
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise TypeError(f"invalid JSON Schema: only local '$ref's are supported, got {ref!r}")
        if ref not in self.refs and ref not in self.compiling:
            # Compile the target now so a broken schema fails at registration; a reference
            # met again while its target is being compiled (a recursive schema) is looked up
            # when checking instead.
            self.compiling.add(ref)
            self.refs[ref] = self.compile(self._lookup(ref))
        refs = self.refs

        def check(value: Any, path: Path, found: Collector) -> None:
            refs[ref](value, path, found)

        return [check]

    def _lookup(self, ref: str) -> Any:
        node = self.root
        pointer = ref[1:]
        if not pointer:
            return node
        if not pointer.startswith("/"):
            raise TypeError(f"invalid JSON Schema: unsupported '$ref' {ref!r}")
        for raw in pointer[1:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise TypeError(f"invalid JSON Schema: '$ref' {ref!r} does not resolve")
        return node

    def _enum(self, schema: Mapping[str, Any]) -> list[Check]:
        if "enum" not in schema:
            return []
        values = schema["enum"]
        if not isinstance(values, list):
            raise TypeError("invalid JSON Schema: 'enum' must be an array")
        allowed = {canonical(v) for v in values}
        listing = ", ".join(short_repr(v) for v in values[:10]) + (
            ", ..." if len(values) > 10 else ""
        )

        def check(value: Any, path: Path, found: Collector) -> None:
            if canonical(value) not in allowed:
                found.fail(path, f"expected one of {listing}, got {short_repr(value)}")

        return [check]

    def _const(self, schema: Mapping[str, Any]) -> list[Check]:
        if "const" not in schema:
            return []
        expected = schema["const"]
        key = canonical(expected)

        def check(value: Any, path: Path, found: Collector) -> None:
            if canonical(value) != key:
                found.fail(path, f"expected {short_repr(expected)}, got {short_repr(value)}")

        return [check]

    def _object(self, schema: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = []
        props = {k: self.compile(v) for k, v in _object_of(schema, "properties").items()}
        patterns = [
            (_regex(p), self.compile(v)) for p, v in _object_of(schema, "patternProperties").items()
        ]
        additional: Check | None = None
        forbid_additional = False
        if "additionalProperties" in schema:
            if schema["additionalProperties"] is False:
                forbid_additional = True
            else:
                additional = self.compile(schema["additionalProperties"])
        required = _names(schema.get("required", []), "'required'")
        if props or patterns or additional is not None or forbid_additional or required:

            def check_properties(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, Mapping):
                    return
                for name in required:
                    if name not in value:
                        found.missing((*path, name))
                for key, item in value.items():
                    matched = False
                    sub = props.get(key)
                    if sub is not None:
                        matched = True
                        sub(item, (*path, key), found)
                    for pattern, pattern_check in patterns:
                        if pattern.search(key):
                            matched = True
                            pattern_check(item, (*path, key), found)
                    if not matched:
                        if forbid_additional:
                            found.unexpected((*path, key))
                        elif additional is not None:
                            additional(item, (*path, key), found)

            checks.append(check_properties)

        low = _count(schema, "minProperties")
        high = _count(schema, "maxProperties")
        if low is not None or high is not None:

            def check_count(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, Mapping):
                    return
                if low is not None and len(value) < low:
                    found.fail(path, f"expected at least {low} properties, got {len(value)}")
                if high is not None and len(value) > high:
                    found.fail(path, f"expected at most {high} properties, got {len(value)}")

            checks.append(check_count)

        if "propertyNames" in schema:
            names_check = self.compile(schema["propertyNames"])

            def check_names(value: Any, path: Path, found: Collector) -> None:
                if isinstance(value, Mapping):
                    for key in value:
                        sub = Collector()
                        names_check(key, (*path, key), sub)
                        if sub.issues:
                            found.fail((*path, key), "property name is not allowed")

            checks.append(check_names)

        dependent = {
            key: _names(needs, f"'dependentRequired' of {key!r}")
            for key, needs in _object_of(schema, "dependentRequired").items()
        }
        if dependent:

            def check_dependent(value: Any, path: Path, found: Collector) -> None:
                if isinstance(value, Mapping):
                    for key, needs in dependent.items():
                        if key in value:
                            for need in needs:
                                if need not in value:
                                    found.missing((*path, need))

            checks.append(check_dependent)
        return checks

    def _array(self, schema: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = []
        prefix_schemas = schema.get("prefixItems")
        items = schema.get("items")
        rest: Any = items
        if isinstance(items, list):  # draft 4-7 spelling of prefixItems
            prefix_schemas, rest = items, schema.get("additionalItems")
        prefix = [self.compile(s) for s in prefix_schemas or ()]
        rest_check = self.compile(rest) if rest is not None else None
        if prefix or rest_check is not None:
            start = len(prefix)

            def check_items(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, list | tuple):
                    return
                for index, (item, sub) in enumerate(zip(value, prefix, strict=False)):
                    sub(item, (*path, index), found)
                if rest_check is not None:
                    for index in range(start, len(value)):
                        rest_check(value[index], (*path, index), found)

            checks.append(check_items)

        low = _count(schema, "minItems")
        high = _count(schema, "maxItems")
        if low is not None or high is not None:

            def check_length(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, list | tuple):
                    return
                if low is not None and len(value) < low:
                    found.fail(path, f"expected at least {_plural(low, 'item')}, got {len(value)}")
                if high is not None and len(value) > high:
                    found.fail(path, f"expected at most {_plural(high, 'item')}, got {len(value)}")

            checks.append(check_length)

        if schema.get("uniqueItems") is True:
            checks.append(_check_unique)

        if "contains" in schema:
            contains = self.compile(schema["contains"])
            at_least = _count(schema, "minContains")
            at_least = 1 if at_least is None else at_least
            at_most = _count(schema, "maxContains")

            def check_contains(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, list | tuple):
                    return
                hits = 0
                for index, item in enumerate(value):
                    sub = Collector()
                    contains(item, (*path, index), sub)
                    hits += not sub.issues
                if hits < at_least:
                    found.fail(path, f"expected at least {at_least} matching items, got {hits}")
                if at_most is not None and hits > at_most:
                    found.fail(path, f"expected at most {at_most} matching items, got {hits}")

            checks.append(check_contains)
        return checks

    def _string(self, schema: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = []
        low = _count(schema, "minLength")
        high = _count(schema, "maxLength")
        if low is not None or high is not None:

            def check_length(value: Any, path: Path, found: Collector) -> None:
                if not isinstance(value, str):
                    return
                if low is not None and len(value) < low:
                    found.fail(
                        path, f"expected at least {_plural(low, 'character')}, got {len(value)}"
                    )
                if high is not None and len(value) > high:
                    found.fail(
                        path, f"expected at most {_plural(high, 'character')}, got {len(value)}"
                    )

            checks.append(check_length)
        if "pattern" in schema:
            source = schema["pattern"]
            pattern = _regex(source)

            def check_pattern(value: Any, path: Path, found: Collector) -> None:
                if isinstance(value, str) and not pattern.search(value):
                    found.fail(path, f"{short_repr(value)} does not match the pattern {source!r}")

            checks.append(check_pattern)
        return checks

    def _number(self, schema: Mapping[str, Any]) -> list[Check]:
        minimum: Any = schema.get("minimum")
        maximum: Any = schema.get("maximum")
        ex_min: Any = schema.get("exclusiveMinimum")
        ex_max: Any = schema.get("exclusiveMaximum")
        # Draft 4 spelled exclusive bounds as booleans qualifying minimum/maximum.
        if ex_min is True:
            ex_min, minimum = minimum, None
        if ex_max is True:
            ex_max, maximum = maximum, None
        ex_min = None if ex_min is False else ex_min
        ex_max = None if ex_max is False else ex_max
        step: Any = schema.get("multipleOf")
        for keyword, limit in (
            ("minimum", minimum),
            ("exclusiveMinimum", ex_min),
            ("maximum", maximum),
            ("exclusiveMaximum", ex_max),
            ("multipleOf", step),
        ):
            if limit is not None and not _is_number(limit):
                raise TypeError(f"invalid JSON Schema: {keyword!r} must be a number")
        if step is not None and step <= 0:
            raise TypeError("invalid JSON Schema: 'multipleOf' must be > 0")
        candidates: list[tuple[Callable[[Any, Any], bool], Any, str]] = [
            (operator.ge, minimum, "must be >= "),
            (operator.gt, ex_min, "must be > "),
            (operator.le, maximum, "must be <= "),
            (operator.lt, ex_max, "must be < "),
            (_multiple_of, step, "must be a multiple of "),
        ]
        bounds = [
            (op, limit, text + short_repr(limit))
            for op, limit, text in candidates
            if _is_number(limit)
        ]
        if not bounds:
            return []

        def check(value: Any, path: Path, found: Collector) -> None:
            if not _is_number(value):
                return
            for op, limit, message in bounds:
                if not op(value, limit):
                    found.fail(path, f"{message}, got {short_repr(value)}")

        return [check]

    def _combinators(self, schema: Mapping[str, Any]) -> list[Check]:
        checks: list[Check] = []
        if "allOf" in schema:
            checks.extend(self.compile(s) for s in _subschemas(schema, "allOf"))
        if "anyOf" in schema:
            checks.append(self._any_of(_subschemas(schema, "anyOf")))
        if "oneOf" in schema:
            checks.append(self._one_of(_subschemas(schema, "oneOf")))
        if "not" in schema:
            negated = self.compile(schema["not"])

            def check_not(value: Any, path: Path, found: Collector) -> None:
                sub = Collector()
                negated(value, path, sub)
                if not sub.issues:
                    found.fail(path, f"{short_repr(value)} is not allowed")

            checks.append(check_not)
        return checks

    def _branches(self, schemas: list[Any]) -> list[tuple[str, Check]]:
        out = []
        for index, sub in enumerate(schemas):
            title = sub.get("title") if isinstance(sub, Mapping) else None
            out.append(
                (title if isinstance(title, str) else f"option {index + 1}", self.compile(sub))
            )
        return out

    def _any_of(self, schemas: list[Any]) -> Check:
        branches = self._branches(schemas)

        def check(value: Any, path: Path, found: Collector) -> None:
            failures = []
            for label, branch in branches:
                sub = Collector()
                branch(value, path, sub)
                if not sub.issues:
                    return
                failures.append((label, sub))
            found.none_matched(path, value, failures)

        return check

    def _one_of(self, schemas: list[Any]) -> Check:
        branches = self._branches(schemas)

        def check(value: Any, path: Path, found: Collector) -> None:
            failures = []
            matched = []
            for label, branch in branches:
                sub = Collector()
                branch(value, path, sub)
                if sub.issues:
                    failures.append((label, sub))
                else:
                    matched.append(label)
            if not matched:
                found.none_matched(path, value, failures)
            elif len(matched) > 1:
                found.fail(path, f"matches more than one alternative ({', '.join(matched)})")

        return check

    def _conditional(self, schema: Mapping[str, Any]) -> list[Check]:
        if "if" not in schema:
            return []
        condition = self.compile(schema["if"])
        then = self.compile(schema["then"]) if "then" in schema else _ok
        otherwise = self.compile(schema["else"]) if "else" in schema else _ok

        def check(value: Any, path: Path, found: Collector) -> None:
            sub = Collector()
            condition(value, path, sub)
            (otherwise if sub.issues else then)(value, path, found)

        return [check]


def _object_of(schema: Mapping[str, Any], keyword: str) -> Mapping[str, Any]:
    value = schema.get(keyword, {})
    if not isinstance(value, Mapping):
        raise TypeError(f"invalid JSON Schema: {keyword!r} must be an object")
    return value


def _names(value: Any, what: str) -> list[str]:
    """An array of property names (``required``, or one of ``dependentRequired``'s)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"invalid JSON Schema: {what} must be an array of strings")
    return value


def _count(schema: Mapping[str, Any], keyword: str) -> int | None:
    """A ``min*``/``max*`` count: absent, or a non-negative integer."""
    value = schema.get(keyword)
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or value < 0 or int(value) != value:
        raise TypeError(f"invalid JSON Schema: {keyword!r} must be a non-negative integer")
    return int(value)


def _subschemas(schema: Mapping[str, Any], keyword: str) -> list[Any]:
    value = schema[keyword]
    if not isinstance(value, list) or not value:
        raise TypeError(f"invalid JSON Schema: {keyword!r} must be a non-empty array")
    return value


def _regex(source: Any) -> re.Pattern[str]:
    try:
        return re.compile(source)
    except (re.error, TypeError) as exc:
        raise TypeError(f"invalid JSON Schema: bad pattern {source!r}: {exc}") from None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _multiple_of(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    quotient = value / step
    if not math.isfinite(quotient):
        return False
    return abs(quotient - round(quotient)) <= 1e-9 * max(1.0, abs(quotient))


def _check_unique(value: Any, path: Path, found: Collector) -> None:
    if not isinstance(value, list | tuple):
        return
    seen: dict[Hashable, int] = {}
    for index, item in enumerate(value):
        key = canonical(item)
        if key in seen:
            found.fail(path, f"items must be unique (item {index} repeats item {seen[key]})")
            return
        seen[key] = index


def compile_schema(schema: Mapping[str, Any] | bool) -> Check:
    """Compile ``schema`` into a check ``(value, path, collector) -> None``.

    Raises :class:`TypeError` if the schema itself is malformed (bad ``type``, ``pattern``,
    unresolvable or non-local ``$ref``), so a broken tool definition fails at registration.
    """
    return _Compiler(schema).compile(schema)


def validate(
    instance: Any, schema: Mapping[str, Any] | bool, *, noun: str = "property", root: str = "value"
) -> None:
    """Check ``instance`` against ``schema``; raise :class:`ArgumentsError` listing the problems.

    This compiles ``schema`` on every call; use :func:`compile_schema` for a schema checked often.
    """
    found = Collector()
    compile_schema(schema)(instance, (), found)
    if found.issues:
        raise found.error(noun, root)
