"""Type annotations as JSON Schemas and converters, and Python values back to JSON.

``@server.tool()`` needs two things from a function's annotations: the JSON Schemas MCP clients
see, and, on every call, a check that the client's JSON arguments fit them plus conversion into
the Python values the annotations promise (an attrs instance, an ``Enum`` member, a
``tuple``...). Both come from one walk over the type hints at registration (:class:`_Builder`):
each annotation becomes a node holding its schema and a converter closure, so a call does no
reflection. ``_signature`` applies it to a function's parameters and return type.

Decisions worth knowing:

* Conversion is lax by default, as pydantic's lax mode (so fastmcp and the official SDK) is: a
  string holding exactly a number or a boolean is accepted for an ``int``, ``float`` or
  ``bool`` (``"5"`` -> ``5``, ``"true"`` -> ``True``); ``strict=True`` refuses it, as the schema
  does. Either way an ``int`` accepts a JSON number with an integral value (``3.0`` -> ``3``),
  because JSON Schema's ``integer`` does; a ``float`` accepts integers. ``bool`` is never a number.
* ``annotated_types`` constraints and pydantic ``Field(...)`` become schema keywords, and
  pydantic models keep pydantic's schema and validation. Neither package is imported here: their
  objects are recognised by module and class name, and only exist once the user loaded them.
* Objects built from classes (attrs, dataclasses, ``TypedDict``) reject unknown keys
  (``additionalProperties: false``), so a misspelt field is reported rather than ignored.
* ``set``/``frozenset`` reject duplicate items, matching the ``uniqueItems`` they advertise.
* Schemas are inlined (no ``$ref``), since several MCP clients do not resolve references;
  recursive types are therefore rejected at registration.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import enum
import math
import re
import sys
import types
import typing
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin

import attrs
import orjson

from ...protocol._jsonschema import (
    Collector,
    Path,
    canonical,
    compile_schema,
    join_or,
    json_kind,
    short_repr,
)

__all__ = ["Convert", "schema_for_type", "to_json"]

Convert = Callable[[Any, Path, Collector], Any]

#: Returned by a converter that recorded a problem (callers also compare collector lengths).
_INVALID: Any = object()
#: Marks "no default value".
_NO_DEFAULT: Any = object()

_ALL_KINDS = ("string", "integer", "number", "boolean", "null", "array", "object", "unknown")
_NUMERIC = frozenset({"integer", "number"})


@attrs.frozen
class _Node:
    """One annotation, compiled: its JSON Schema and how to convert a JSON value to it."""

    schema: dict[str, Any]
    convert: Convert
    #: Worded for messages: "an integer", "a Point object".
    expected: str
    #: JSON kinds this node is the natural match for (``None``: any); unions try these first.
    kinds: frozenset[str] | None
    #: JSON kinds it can convert at all (``None``: any).
    accepts: frozenset[str] | None


# --- leaf converters ---------------------------------------------------------------------------


def _convert_any(value: Any, path: Path, found: Collector) -> Any:
    return value


def _convert_str(value: Any, path: Path, found: Collector) -> Any:
    if type(value) is str or isinstance(value, str):  # a decoder's str: told with no call
        return value
    found.wrong_type(path, "a string", value)
    return _INVALID


def _convert_int(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    found.wrong_type(path, "an integer", value)
    return _INVALID


def _convert_float(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            found.fail(path, f"number is too large, got {short_repr(value)}")
            return _INVALID
    found.wrong_type(path, "a number", value)
    return _INVALID


def _convert_bool(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, bool):
        return value
    found.wrong_type(path, "a boolean", value)
    return _INVALID


# Lax conversion (the default): a string holding exactly a number or a boolean is accepted for
# an int, float or bool, as pydantic's lax mode (and so fastmcp and the official SDK) does.
_LAX_INT = re.compile(r"\s*[+-]?\d+(?:\.0*)?\s*\Z")
_LAX_FLOAT = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*\Z")
_LAX_BOOL = {
    **dict.fromkeys(("true", "t", "yes", "y", "on", "1"), True),
    **dict.fromkeys(("false", "f", "no", "n", "off", "0"), False),
}


def _convert_int_lax(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, str) and _LAX_INT.match(value):
        return int(value.strip().split(".")[0])
    return _convert_int(value, path, found)


def _convert_float_lax(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, str) and _LAX_FLOAT.match(value):
        number = float(value)
        if math.isfinite(number):
            return number
        found.fail(path, f"number is too large, got {short_repr(value)}")
        return _INVALID
    return _convert_float(value, path, found)


def _convert_bool_lax(value: Any, path: Path, found: Collector) -> Any:
    if isinstance(value, str):
        flag = _LAX_BOOL.get(value.strip().lower())
        if flag is not None:
            return flag
    return _convert_bool(value, path, found)


def _convert_null(value: Any, path: Path, found: Collector) -> Any:
    if value is None:
        return None
    found.wrong_type(path, "null", value)
    return _INVALID


def _string_parser(parse: Callable[[str], Any], expected: str, wording: str) -> Convert:
    def convert(value: Any, path: Path, found: Collector) -> Any:
        if not isinstance(value, str):
            found.wrong_type(path, expected, value)
            return _INVALID
        try:
            return parse(value)
        except ValueError:
            found.fail(path, f"expected {wording}, got {short_repr(value)}")
            return _INVALID

    return convert


def _leaf(schema: dict[str, Any], convert: Convert, expected: str, kind: str) -> _Node:
    kinds = frozenset({kind})
    accepts = _NUMERIC if kind in _NUMERIC else kinds
    return _Node(schema, convert, expected, kinds, accepts)


_ANY = _Node({}, _convert_any, "any value", None, None)
_NULL = _leaf({"type": "null"}, _convert_null, "null", "null")
_LEAVES: dict[Any, _Node] = {
    str: _leaf({"type": "string"}, _convert_str, "a string", "string"),
    int: _leaf({"type": "integer"}, _convert_int, "an integer", "integer"),
    float: _leaf({"type": "number"}, _convert_float, "a number", "number"),
    bool: _leaf({"type": "boolean"}, _convert_bool, "a boolean", "boolean"),
    datetime.datetime: _leaf(
        {"type": "string", "format": "date-time"},
        _string_parser(
            datetime.datetime.fromisoformat, "a date-time string", "an ISO 8601 date-time"
        ),
        "a date-time string",
        "string",
    ),
    datetime.date: _leaf(
        {"type": "string", "format": "date"},
        _string_parser(datetime.date.fromisoformat, "a date string", "an ISO 8601 date"),
        "a date string",
        "string",
    ),
    datetime.time: _leaf(
        {"type": "string", "format": "time"},
        _string_parser(datetime.time.fromisoformat, "a time string", "an ISO 8601 time"),
        "a time string",
        "string",
    ),
    uuid.UUID: _leaf(
        {"type": "string", "format": "uuid"},
        _string_parser(uuid.UUID, "a UUID string", "a UUID"),
        "a UUID string",
        "string",
    ),
}

#: The leaves that differ in lax mode: they also accept (exact) strings.
_LAX_LEAVES: dict[Any, _Node] = {
    tp: attrs.evolve(
        _LEAVES[tp], convert=convert, accepts=(_LEAVES[tp].accepts or frozenset()) | {"string"}
    )
    for tp, convert in (
        (int, _convert_int_lax),
        (float, _convert_float_lax),
        (bool, _convert_bool_lax),
    )
}

_LIST_TYPES: frozenset[Any] = frozenset(
    {
        list,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Collection,
        collections.abc.Iterable,
    }
)
_SET_TYPES: dict[Any, Callable[[list[Any]], Any]] = {
    set: set,
    collections.abc.MutableSet: set,
    frozenset: frozenset,
    collections.abc.Set: frozenset,
}
_MAPPING_TYPES: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
_JSON_SCALARS = (str, int, float, bool, type(None))


@attrs.frozen
class _Field:
    """A property of an object schema: a parameter, or a field of a class."""

    name: str  # the JSON property name
    arg: str  # the keyword the constructor (or function) takes
    node: _Node
    required: bool
    schema: dict[str, Any]


# --- building nodes ----------------------------------------------------------------------------


class _Builder:
    """Turns annotations into nodes; ``output=True`` describes values a tool *returns*.

    The two modes differ only for classes: an input object lists the fields its constructor
    takes, with defaults; an output object lists every field, all of them present.
    """

    def __init__(self, *, output: bool = False, strict: bool = True) -> None:
        self.output = output
        self.strict = strict
        self.stack: list[type] = []

    def build(self, tp: Any) -> _Node:
        if tp is Any or tp is object:
            return _ANY
        if tp is None or tp is type(None):
            return _NULL
        origin = get_origin(tp)
        if origin is Annotated:
            return self._annotated(tp)
        if origin is Required or origin is NotRequired:
            return self.build(get_args(tp)[0])
        if isinstance(tp, typing.NewType):
            return self.build(tp.__supertype__)
        if origin is Union or origin is types.UnionType:
            return self._union(get_args(tp))
        if origin is Literal:
            return self._literal(get_args(tp))
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._enum(tp)
        if isinstance(tp, type) and tp in _LEAVES:
            if not self.strict and tp in _LAX_LEAVES:
                return _LAX_LEAVES[tp]
            return _LEAVES[tp]
        container = origin if origin is not None else tp
        args = get_args(tp)
        if container in _LIST_TYPES:
            return self._array(args[0] if args else Any, list, unique=False)
        if container is tuple:
            if not args or (len(args) == 2 and args[1] is Ellipsis):
                return self._array(args[0] if args else Any, tuple, unique=False)
            return self._fixed_tuple(args)
        if container in _SET_TYPES:
            return self._array(args[0] if args else Any, _SET_TYPES[container], unique=True)
        if container in _MAPPING_TYPES:
            return self._mapping(args)
        if _pydantic_model(tp):
            return self._model(tp)
        if isinstance(tp, type):
            if attrs.has(tp):
                return self._class(tp, self._attrs_fields)
            if dataclasses.is_dataclass(tp):
                return self._class(tp, self._dataclass_fields)
            if _is_typeddict(tp):
                return self._class(tp, self._typeddict_fields)
        raise TypeError(f"unsupported type annotation {_type_name(tp)}")

    # Annotated, unions and literals.

    def _annotated(self, tp: Any) -> _Node:
        inner_tp, *metadata = get_args(tp)
        strict = _strictness(metadata)
        if strict is not None and strict != self.strict:  # pydantic's Strict() / Field(strict=)
            builder = _Builder(output=self.output, strict=strict)
            builder.stack = self.stack
            inner = builder.build(inner_tp)
        else:
            inner = self.build(inner_tp)
        description: str | None = None
        constraints: dict[str, Any] = {}
        for item in metadata:
            if isinstance(item, str):
                description = item
            elif isinstance(item, Mapping):
                constraints.update(item)
            else:
                found = _metadata_schema(item, inner.schema.get("type"))
                if found is not None:
                    constraints.update(found)
        description = constraints.pop("description", description)
        schema = {**inner.schema, **constraints}
        if description is not None:
            schema["description"] = description
        if not constraints:
            return attrs.evolve(inner, schema=schema)
        check = compile_schema(constraints)  # a malformed constraint fails here, at registration
        convert_inner = inner.convert

        def convert(value: Any, path: Path, found: Collector) -> Any:
            before = len(found)
            result = convert_inner(value, path, found)
            if len(found) != before:
                return _INVALID
            # Constraints apply to the JSON value, as clients see them; a string taken as a
            # number or boolean (lax mode) is checked as the value it became.
            coerced = type(value) is str and type(result) in (int, float, bool)
            check(result if coerced else value, path, found)
            return _INVALID if len(found) != before else result

        return attrs.evolve(inner, schema=schema, convert=convert)

    def _union(self, members: tuple[Any, ...]) -> _Node:
        options = [self.build(m) for m in members]
        schema = {"anyOf": [o.schema for o in options]}
        expected = join_or([o.expected for o in options])
        # Per JSON kind, the alternatives worth trying: natural matches first (so ``float | int``
        # keeps ``3`` an int), then any other that might convert it, in declaration order.
        candidates: dict[str, list[_Node]] = {}
        #: Whether some alternative is the natural match of a kind (not only a lax conversion).
        natural: dict[str, bool] = {}
        for kind in _ALL_KINDS:
            exact = [o for o in options if o.kinds is not None and kind in o.kinds]
            rest = [
                o for o in options if o not in exact and (o.accepts is None or kind in o.accepts)
            ]
            candidates[kind] = exact + rest
            natural[kind] = bool(exact)

        def convert(value: Any, path: Path, found: Collector) -> Any:
            kind = json_kind(value)
            tries = candidates[kind]
            if not tries:
                found.wrong_type(path, expected, value)
                return _INVALID
            if len(tries) == 1 and natural[kind]:
                return tries[0].convert(value, path, found)
            failures = []
            for option in tries:
                attempt = Collector()
                result = option.convert(value, path, attempt)
                if not attempt.issues:
                    return result
                failures.append((option.expected, attempt))
            if not natural[kind] and all(
                i.kind == "type" and i.path == path for _, a in failures for i in a.issues
            ):
                found.wrong_type(path, expected, value)  # say every alternative, not the lax one
                return _INVALID
            found.none_matched(path, value, failures)
            return _INVALID

        kinds = _union_kinds([o.kinds for o in options])
        accepts = _union_kinds([o.accepts for o in options])
        return _Node(schema, convert, expected, kinds, accepts)

    def _literal(self, values: tuple[Any, ...]) -> _Node:
        json_values = []
        for value in values:
            if isinstance(value, enum.Enum):
                json_values.append(_enum_value(type(value), value))
            elif isinstance(value, _JSON_SCALARS):
                json_values.append(value)
            else:
                raise TypeError(f"unsupported Literal value {value!r}")
        return _choice(json_values, list(values))

    def _enum(self, cls: type[enum.Enum]) -> _Node:
        members = list(cls)
        if not members:
            raise TypeError(f"enum {cls.__qualname__} has no members")
        return _choice([_enum_value(cls, m) for m in members], members)

    # Containers.

    def _array(self, item_tp: Any, build: Callable[[list[Any]], Any], *, unique: bool) -> _Node:
        item = self.build(item_tp)
        schema: dict[str, Any] = {"type": "array", "items": item.schema}
        if unique:
            schema["uniqueItems"] = True
        convert_item = item.convert

        def convert(value: Any, path: Path, found: Collector) -> Any:
            if not isinstance(value, list | tuple):
                found.wrong_type(path, "an array", value)
                return _INVALID
            before = len(found)
            items = [convert_item(v, (*path, i), found) for i, v in enumerate(value)]
            if len(found) != before:
                return _INVALID
            if unique and not _all_distinct(items, path, found):
                return _INVALID
            return build(items)

        return _leaf(schema, convert, "an array", "array")

    def _fixed_tuple(self, members: tuple[Any, ...]) -> _Node:
        items = [self.build(m) for m in members]
        count = len(items)
        schema = {
            "type": "array",
            "prefixItems": [i.schema for i in items],
            "minItems": count,
            "maxItems": count,
        }
        converters = [i.convert for i in items]

        def convert(value: Any, path: Path, found: Collector) -> Any:
            if not isinstance(value, list | tuple):
                found.wrong_type(path, "an array", value)
                return _INVALID
            if len(value) != count:
                found.fail(path, f"expected an array of exactly {count} items, got {len(value)}")
                return _INVALID
            before = len(found)
            out = tuple(
                c(v, (*path, i), found)
                for i, (c, v) in enumerate(zip(converters, value, strict=True))
            )
            return _INVALID if len(found) != before else out

        return _leaf(schema, convert, "an array", "array")

    def _mapping(self, args: tuple[Any, ...]) -> _Node:
        key_tp, value_tp = args if args else (str, Any)
        if key_tp is not str and key_tp is not Any:
            raise TypeError(
                "dictionary keys must be str (JSON object keys are strings), "
                f"not {_type_name(key_tp)}"
            )
        value = self.build(value_tp)
        schema: dict[str, Any] = {"type": "object"}
        if value is not _ANY:
            schema["additionalProperties"] = value.schema
        convert_value = value.convert

        def convert(data: Any, path: Path, found: Collector) -> Any:
            if not isinstance(data, Mapping):
                found.wrong_type(path, "an object", data)
                return _INVALID
            before = len(found)
            out = {k: convert_value(v, (*path, k), found) for k, v in data.items()}
            return _INVALID if len(found) != before else out

        return _leaf(schema, convert, "an object", "object")

    # Classes.

    def _class(self, cls: type, fields_of: Callable[[type], list[_Field]]) -> _Node:
        if cls in self.stack:
            raise TypeError(
                f"{cls.__qualname__} refers to itself; recursive types are not supported "
                "because tool schemas are inlined (no $ref)"
            )
        self.stack.append(cls)
        try:
            fields = fields_of(cls)
        finally:
            self.stack.pop()
        build = dict if _is_typeddict(cls) else cls
        return _object_node(fields, build, f"a {cls.__qualname__} object", cls.__qualname__)

    def _model(self, cls: Any) -> _Node:
        """A pydantic model: pydantic's own schema (references inlined) and validation."""
        mode = "serialization" if self.output else "validation"
        raw = cls.model_json_schema(mode=mode)
        schema = _without_titles(_inline_refs(raw, raw.get("$defs", {})))
        check = compile_schema(schema) if self.strict else None
        label = f"a {cls.__qualname__} object"
        error_type = sys.modules["pydantic"].ValidationError

        def convert(value: Any, path: Path, found: Collector) -> Any:
            if not isinstance(value, Mapping):
                found.wrong_type(path, label, value)
                return _INVALID
            before = len(found)
            if check is not None:  # strict: the exact schema first, then pydantic's checks
                check(value, path, found)
                if len(found) != before:
                    return _INVALID
            try:
                return cls.model_validate(value)
            except error_type as exc:
                _pydantic_errors(exc, path, found)
                return _INVALID

        return _leaf(schema, convert, label, "object")

    def _attrs_fields(self, cls: type) -> list[_Field]:
        hints = _class_hints(cls)
        out = []
        for f in attrs.fields(cls):
            if not f.init and not self.output:
                continue
            node = self._field_node(cls, f.name, hints.get(f.name, Any))
            name = f.alias or f.name
            default: Any = _NO_DEFAULT
            required = True
            if not self.output and f.default is not attrs.NOTHING:
                required = False
                if not isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                    default = f.default
            out.append(
                _make_field(name, name, node, required, f.metadata.get("description"), default)
            )
        return out

    def _dataclass_fields(self, cls: type) -> list[_Field]:
        hints = _class_hints(cls)
        if any(isinstance(h, dataclasses.InitVar) for h in hints.values()):
            raise TypeError(f"dataclass {cls.__qualname__} has an InitVar, which is not supported")
        out = []
        for f in dataclasses.fields(cls):
            if not f.init and not self.output:
                continue
            node = self._field_node(cls, f.name, hints.get(f.name, Any))
            default: Any = _NO_DEFAULT
            required = True
            if not self.output:
                if f.default is not dataclasses.MISSING:
                    required, default = False, f.default
                elif f.default_factory is not dataclasses.MISSING:
                    required = False
            desc = f.metadata.get("description")
            out.append(_make_field(f.name, f.name, node, required, desc, default))
        return out

    def _typeddict_fields(self, cls: type) -> list[_Field]:
        hints = _class_hints(cls)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        out = []
        for key, hint in hints.items():
            # With string annotations Python 3.11 mis-computes __required_keys__ for explicit
            # Required/NotRequired, so those wrappers are read here; totality covers the rest.
            required = key in required_keys
            while get_origin(hint) is Required or get_origin(hint) is NotRequired:
                required = get_origin(hint) is Required
                hint = get_args(hint)[0]
            node = self._field_node(cls, key, hint)
            out.append(_make_field(key, key, node, required, None, _NO_DEFAULT))
        return out

    def _field_node(self, cls: type, name: str, hint: Any) -> _Node:
        try:
            return self.build(hint)
        except TypeError as exc:
            raise TypeError(f"field {cls.__qualname__}.{name}: {exc}") from None


#: ``annotated_types`` constraints, recognised by class name and attribute (so that package is
#: never imported here): the attribute holding the bound and the keyword it becomes.
_BOUNDS = {
    "Gt": ("gt", "exclusiveMinimum"),
    "Ge": ("ge", "minimum"),
    "Lt": ("lt", "exclusiveMaximum"),
    "Le": ("le", "maximum"),
    "MultipleOf": ("multiple_of", "multipleOf"),
}
_LENGTHS = {"MinLen": ("min_length", "min"), "MaxLen": ("max_length", "max")}
_LENGTH_KEYWORDS = {
    "string": {"min": "minLength", "max": "maxLength"},
    "array": {"min": "minItems", "max": "maxItems"},
    "object": {"min": "minProperties", "max": "maxProperties"},
}


def _metadata_schema(item: Any, json_type: Any) -> dict[str, Any] | None:
    """The schema keywords an ``Annotated`` metadata object stands for (``annotated_types``
    constraints, a pydantic ``Field(...)``), ``None`` for metadata with no bearing on JSON.

    A constraint that cannot be expressed raises :class:`TypeError`: dropping it silently
    would accept values the author meant to refuse.
    """
    cls = type(item)
    if cls.__module__.split(".")[0] == "annotated_types":
        if getattr(item, "__is_annotated_types_grouped_metadata__", False):  # Interval, Len
            out: dict[str, Any] = {}
            for part in item:
                out.update(_metadata_schema(part, json_type) or {})
            return out
        name = cls.__name__
        if name in _BOUNDS:
            attr, keyword = _BOUNDS[name]
            bound = getattr(item, attr)
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                raise TypeError(f"{name}({bound!r}): only numeric bounds can be checked")
            return {keyword: bound}
        if name in _LENGTHS:
            attr, side = _LENGTHS[name]
            keywords = _LENGTH_KEYWORDS.get(json_type)
            if keywords is None:
                raise TypeError(f"{name} applies to strings, arrays and objects only")
            return {keywords[side]: getattr(item, attr)}
        raise TypeError(f"the constraint {item!r} is not supported")
    fields = sys.modules.get("pydantic.fields")  # a Field(...) exists only if pydantic is loaded
    if fields is not None and isinstance(item, fields.FieldInfo):
        return _field_info_schema(item, json_type)
    if _is_pydantic_strict(item):
        return None  # it chose how the type converts (see _Builder._annotated), not the schema
    if cls.__name__ == "_PydanticGeneralMetadata":
        extra = dict(vars(item))
        out = {"pattern": extra.pop("pattern")} if "pattern" in extra else {}
        if extra:
            raise TypeError(f"the Field options {sorted(extra)} are not supported")
        return out
    return None


def _is_pydantic_strict(item: Any) -> bool:
    cls = type(item)
    return cls.__name__ == "Strict" and cls.__module__.split(".")[0] == "pydantic"


def _strictness(metadata: list[Any]) -> bool | None:
    """What pydantic's ``Strict()`` (or ``Field(strict=...)``) in ``metadata`` asks for, if any."""
    fields = sys.modules.get("pydantic.fields")
    found: bool | None = None
    for item in metadata:
        if fields is not None and isinstance(item, fields.FieldInfo):
            found = _strictness(list(item.metadata)) if item.metadata else found
        elif _is_pydantic_strict(item):
            found = bool(item.strict)
    return found


def _field_info_schema(info: Any, json_type: Any) -> dict[str, Any]:
    """What a pydantic ``FieldInfo`` adds to its type's schema: constraints and annotations."""
    out: dict[str, Any] = {}
    for item in info.metadata:
        found = _metadata_schema(item, json_type)
        if found is not None:
            out.update(found)
    if info.description is not None:
        out["description"] = info.description
    if info.title is not None:
        out["title"] = info.title
    if info.examples is not None:
        out["examples"] = to_json(info.examples)
    if isinstance(info.json_schema_extra, dict):
        out.update(info.json_schema_extra)
    return out


def _field_info(default: Any) -> Any:
    """``default`` if it is a pydantic ``FieldInfo`` (``n: int = Field(3)``), else ``None``."""
    fields = sys.modules.get("pydantic.fields")
    if fields is not None and isinstance(default, fields.FieldInfo):
        return default
    return None


def _is_typeddict(tp: Any) -> bool:
    """A ``TypedDict`` from ``typing`` or (before Python 3.12, pydantic requires it there) from
    ``typing_extensions``, which is not imported here."""
    if typing.is_typeddict(tp):
        return True
    extensions = sys.modules.get("typing_extensions")
    return extensions is not None and bool(extensions.is_typeddict(tp))


def _pydantic_model(tp: Any) -> bool:
    main = sys.modules.get("pydantic.main")  # a model exists only if pydantic is loaded
    return main is not None and isinstance(tp, type) and issubclass(tp, main.BaseModel)


def _inline_refs(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``schema`` with every ``#/$defs/X`` reference replaced by its definition."""
    if isinstance(schema, list):
        return [_inline_refs(s, defs, seen) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _inline_refs(v, defs, seen) for k, v in schema.items() if k not in ("$defs", "$ref")}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.removeprefix("#/$defs/")
        if name in seen:
            raise TypeError(
                f"{name} refers to itself; recursive types are not supported because tool "
                "schemas are inlined (no $ref)"
            )
        if name not in defs:
            raise TypeError(f"unresolvable reference {ref!r}")
        out = {**_inline_refs(defs[name], defs, (*seen, name)), **out}
    return out


def _without_titles(schema: Any) -> Any:
    """``schema`` without ``title`` keywords (pydantic titles every model and field from its
    name; fastmcp drops them too), keeping properties that happen to be named ``title``."""
    if isinstance(schema, list):
        return [_without_titles(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in ("properties", "patternProperties", "$defs") and isinstance(value, Mapping):
            out[key] = {k: _without_titles(v) for k, v in value.items()}
        else:
            out[key] = _without_titles(value)
    return out


def _pydantic_errors(error: Any, path: Path, found: Collector) -> None:
    """A pydantic ``ValidationError``'s problems, worded as ours are (paths and reasons)."""
    for problem in error.errors(include_url=False, include_context=False, include_input=True):
        where = (*path, *problem["loc"])
        kind = problem["type"]
        if kind == "missing":
            found.missing(where)
        elif kind == "extra_forbidden":
            found.unexpected(where)
        else:
            found.fail(where, f"{problem['msg']}, got {short_repr(problem.get('input'))}")


def _union_kinds(sets: list[frozenset[str] | None]) -> frozenset[str] | None:
    if any(s is None for s in sets):
        return None
    return frozenset().union(*(s for s in sets if s is not None))


def _enum_value(cls: type[enum.Enum], member: enum.Enum) -> Any:
    value = member.value
    if not isinstance(value, _JSON_SCALARS):
        raise TypeError(
            f"enum {cls.__qualname__} has a non-JSON value {value!r}; use str, int, float or bool"
        )
    return value


def _choice(json_values: list[Any], results: list[Any]) -> _Node:
    """A node for a fixed set of values (``Literal``, ``Enum``)."""
    kinds = {json_kind(v) for v in json_values}
    schema: dict[str, Any] = {}
    if kinds <= _NUMERIC and len(kinds) > 1:
        schema["type"] = "number"
    elif len(kinds) == 1:
        schema["type"] = next(iter(kinds))
    if len(json_values) == 1:
        schema["const"] = json_values[0]
        expected = short_repr(json_values[0])
    else:
        schema["enum"] = json_values
        expected = "one of " + ", ".join(short_repr(v) for v in json_values)
    table = {canonical(v): r for v, r in zip(json_values, results, strict=True)}

    def convert(value: Any, path: Path, found: Collector) -> Any:
        key = canonical(value)  # 1 and 1.0 are the same JSON number; true is not 1
        if key in table:
            return table[key]
        found.wrong_type(path, expected, value)
        return _INVALID

    accepts = frozenset(kinds | (_NUMERIC if kinds & _NUMERIC else set()))
    return _Node(schema, convert, expected, frozenset(kinds), accepts)


def _all_distinct(items: list[Any], path: Path, found: Collector) -> bool:
    seen: dict[Any, int] = {}
    for index, item in enumerate(items):
        try:
            earlier = seen.setdefault(item, index)
        except TypeError:
            found.fail(path, "items cannot be collected into a set")
            return False
        if earlier != index:
            found.fail(path, f"items must be unique (item {index} repeats item {earlier})")
            return False
    return True


def _make_field(
    name: str, arg: str, node: _Node, required: bool, description: Any, default: Any
) -> _Field:
    schema = dict(node.schema)
    if isinstance(description, str) and description and "description" not in schema:
        schema["description"] = description
    if default is not _NO_DEFAULT:
        encoded = _json_default(default)
        if encoded is not _NO_DEFAULT:
            schema["default"] = encoded
    return _Field(name, arg, node, required, schema)


def _json_default(value: Any) -> Any:
    """``value`` as JSON for a schema's ``default``, or ``_NO_DEFAULT`` if it has no JSON form."""
    try:
        encoded = to_json(value)
        orjson.dumps(encoded)
    except (TypeError, ValueError):
        return _NO_DEFAULT
    return encoded


def _object_node(
    fields: list[_Field], build: Callable[..., Any] | None, expected: str, label: str
) -> _Node:
    """An object with known properties; ``build(**kwargs)`` makes the result (``None``: kwargs)."""
    schema: dict[str, Any] = {"type": "object", "properties": {f.name: f.schema for f in fields}}
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    # Each field's path at the top level (a tool's arguments) is made once, here.
    plan = [(f.name, f.arg, f.node.convert, f.required, (f.name,)) for f in fields]
    known = frozenset(f.name for f in fields)

    def convert(value: Any, path: Path, found: Collector) -> Any:
        if type(value) is not dict and not isinstance(value, Mapping):
            found.wrong_type(path, expected, value)
            return _INVALID
        issues = found.issues
        before = len(issues) if issues else 0  # none yet, as nearly always: no call
        kwargs: dict[str, Any] = {}
        matched = 0
        for name, arg, convert_field, is_required, top in plan:
            if name in value:
                matched += 1
                kwargs[arg] = convert_field(value[name], (*path, name) if path else top, found)
            elif is_required:
                found.missing((*path, name))
        if matched != len(value):
            for key in value:
                if key not in known:
                    found.unexpected((*path, key))
        if issues and len(issues) != before:
            return _INVALID
        if build is None:
            return kwargs
        try:
            return build(**kwargs)
        except (TypeError, ValueError) as exc:
            # Validators on attrs/dataclass fields speak to the caller through these.
            found.fail(path, f"invalid {label}: {_cut(str(exc), 200)}")
            return _INVALID

    return _leaf(schema, convert, expected, "object")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp)


def _class_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the type hints of {cls.__qualname__}: {exc}") from None


# --- results -----------------------------------------------------------------------------------


_FIELD_NAMES: weakref.WeakKeyDictionary[type, tuple[tuple[str, str], ...] | None] = (
    weakref.WeakKeyDictionary()
)


def _field_names(cls: type) -> tuple[tuple[str, str], ...] | None:
    """(attribute, JSON name) pairs of an attrs class or dataclass, else ``None`` (cached)."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        pass
    names: tuple[tuple[str, str], ...] | None = None
    if attrs.has(cls):
        names = tuple((f.name, f.alias or f.name) for f in attrs.fields(cls))
    elif dataclasses.is_dataclass(cls):
        names = tuple((f.name, f.name) for f in dataclasses.fields(cls))
    _FIELD_NAMES[cls] = names
    return names


def to_json(value: Any) -> Any:
    """A Python value as plain JSON data: attrs/dataclass instances and mappings become dicts,
    enums their values, sequences and sets lists, dates ISO strings, UUIDs strings.

    Values it does not know are returned unchanged, for the JSON encoder to accept or reject.
    """
    cls = type(value)
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, Mapping):
        return {_json_key(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, set | frozenset):
        items = [to_json(v) for v in value]
        try:
            items.sort()  # sets have no order; a stable one makes results reproducible
        except TypeError:
            pass
        return items
    names = _field_names(cls)
    if names is not None:
        return {key: to_json(getattr(value, attr)) for attr, key in names}
    if _pydantic_model(cls):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str | int | float):
        return value
    if isinstance(value, collections.abc.Sequence | collections.abc.Set) and not isinstance(
        value, bytes | bytearray
    ):
        return [to_json(v) for v in value]
    return value


def _json_key(key: Any) -> Any:
    if isinstance(key, enum.Enum):
        key = key.value
    return key if isinstance(key, str) else str(key)


def schema_for_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one annotation (as a tool parameter of that type would have it)."""
    return _Builder().build(tp).schema
