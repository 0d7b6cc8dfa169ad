"""An OpenAPI 3.x document as plain JSON: loaded, checked, and its schemas made JSON Schema.

Sans-IO: the document arrives as a dict, the text of a file, or bytes someone fetched. A schema of
an operation becomes a self-contained JSON Schema 2020-12 document: every local ``$ref`` it
reaches (transitively) is copied under ``$defs`` and pointed at there, so a recursive schema stays
a reference instead of being expanded forever, and the schema needs nothing of the document.
OpenAPI 3.0's dialect is rewritten on the way (``nullable``, boolean ``exclusiveMinimum``,
``example``); OpenAPI's own annotations (``discriminator``, ``xml``, ``externalDocs``) are
dropped, being nothing a JSON Schema validator or a model reads.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["OpenApiError", "SchemaConverter", "load_document", "pointer_of", "resolve"]


class OpenApiError(ValueError):
    """An OpenAPI document that cannot be served: not OpenAPI 3.x, a ``$ref`` that points at
    nothing, an operation with only content it cannot send. ``pointer`` is the JSON pointer of
    the place (``#/paths/~1pets/post/requestBody``), also named in the message."""

    def __init__(self, message: str, pointer: str = "#") -> None:
        super().__init__(f"{message} (at {pointer})")
        self.pointer = pointer


def load_document(
    source: Mapping[str, Any] | str | bytes, where: str = "the document"
) -> dict[str, Any]:
    """The document as JSON values, checked to be OpenAPI 3.x. ``source`` is the document
    itself or its text (JSON or YAML); ``where`` names it in errors."""
    if isinstance(source, Mapping):
        document: Any = source
    else:
        try:
            document = yaml.safe_load(source)
        except yaml.YAMLError as exc:
            raise OpenApiError(f"{where} is neither JSON nor YAML: {exc}".splitlines()[0]) from None
    document = _json_safe(document)
    if not isinstance(document, dict):
        raise OpenApiError(f"{where} is not an OpenAPI document (not an object)")
    version = document.get("openapi")
    if not isinstance(version, str) or not re.fullmatch(r"3\.\d+(\.\d+)?(-.+)?", version):
        found = f"Swagger {document['swagger']}" if "swagger" in document else repr(version)
        raise OpenApiError(
            f"{where} is not OpenAPI 3.x (its 'openapi' is {found}); convert a Swagger 2.0 "
            "document to OpenAPI 3 first",
            "#/openapi",
        )
    if not isinstance(document.get("paths", {}), dict):
        raise OpenApiError(f"{where}: 'paths' is not an object", "#/paths")
    return document


def _json_safe(value: Any) -> Any:
    """YAML's dates and times as the ISO strings JSON would carry, keys as strings."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


def pointer_of(*parts: str | int) -> str:
    """The JSON pointer (as a URI fragment) of a place: ``pointer_of("paths", "/pets")``."""
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def resolve(document: Mapping[str, Any], ref: str, where: str) -> Any:
    """What a local ``$ref`` (``#/components/...``) points at; ``where`` is the referrer."""
    if not ref.startswith("#"):
        raise OpenApiError(
            f"$ref {ref!r} is not in this document (external references are not followed)", where
        )
    if ref != "#" and not ref.startswith("#/"):
        raise OpenApiError(f"$ref {ref!r} is not a JSON pointer", where)
    node: Any = document
    for raw in ref[2:].split("/") if ref != "#" else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise OpenApiError(f"$ref {ref!r} points at nothing", where)
    return node


def follow(document: Mapping[str, Any], value: Any, where: str) -> tuple[Any, str]:
    """``value`` with its ``$ref`` chain followed (a parameter, a body, a response): the object
    and its pointer. A chain that comes back to itself is an error."""
    seen: set[str] = set()
    while isinstance(value, Mapping) and isinstance(value.get("$ref"), str):
        ref = value["$ref"]
        if ref in seen:
            raise OpenApiError(f"$ref {ref!r} refers to itself", where)
        seen.add(ref)
        value, where = resolve(document, ref, where), ref
    return value, where


# -- schemas ---------------------------------------------------------------------------------

_SCHEMA = (
    "additionalProperties",
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: OpenAPI's annotations that are not JSON Schema (3.0 and 3.1 alike).
_DROPPED = ("discriminator", "xml", "externalDocs")
_DEF_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class SchemaConverter:
    """Turns the schemas of one tool into JSON Schema 2020-12 sharing one ``$defs``.

    ``convert`` gives a schema whose local references point into :attr:`defs`; ``defs`` holds
    every schema they reach, each converted once (a cycle ends at the name already taken).
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        self.legacy = str(document.get("openapi", "")).startswith("3.0")
        self.defs: dict[str, Any] = {}
        self._names: dict[str, str] = {}

    def convert(self, schema: Any, where: str) -> Any:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, Mapping):
            raise OpenApiError("a schema must be an object or a boolean", where)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROPPED:
                continue
            here = f"{where}/{key}"
            if key == "$ref" and isinstance(value, str):
                out[key] = "#/$defs/" + self.define(value, where)
            elif key in _SCHEMA:
                out[key] = (
                    [self.convert(v, f"{here}/{i}") for i, v in enumerate(value)]
                    if isinstance(value, list)
                    else self.convert(value, here)
                )
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.convert(v, f"{here}/{i}") for i, v in enumerate(value)]
            elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {
                    name: self.convert(v, f"{here}/{_escape(name)}") for name, v in value.items()
                }
            elif key == "example":
                out.setdefault("examples", [value])
            else:
                out[key] = value
        # 3.1 dropped ``nullable``; a 3.1 document that kept it means 3.0's sense.
        if self.legacy or "nullable" in out:
            _from_openapi_30(out)
        return out

    def define(self, ref: str, where: str) -> str:
        """The ``$defs`` name of what ``ref`` points at, converting it the first time."""
        name = self._names.get(ref)
        if name is None:
            target = resolve(self.document, ref, where)
            base = _DEF_NAME.sub("_", ref.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~"))
            name, n = base or "schema", 1
            while name in self.defs:
                n += 1
                name = f"{base}_{n}"
            self._names[ref] = name
            self.defs[name] = True  # taken before converting: a cycle ends here
            self.defs[name] = self.convert(target, ref)
        return name

    def target(self, schema: Any, where: str) -> tuple[Any, str]:
        """A schema with its top-level ``$ref`` chain followed (to look at its shape)."""
        return follow(self.document, schema, where)

    def rooted(self, schema: Any) -> dict[str, Any]:
        """``schema`` as a document of its own: with the ``$defs`` it reaches, and only those."""
        if not isinstance(schema, dict):
            return (
                {"allOf": [schema]}
                if not isinstance(schema, bool)
                else {}
                if schema
                else {"not": {}}
            )
        used = _reached(schema, self.defs)
        if not used:
            return schema
        return {
            **schema,
            "$defs": {**schema.get("$defs", {}), **{n: self.defs[n] for n in sorted(used)}},
        }


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _reached(schema: Any, defs: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name in defs and name not in found:
                    found.add(name)
                    todo.append(defs[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return found


def _from_openapi_30(schema: dict[str, Any]) -> None:
    """OpenAPI 3.0's schema dialect in 2020-12 terms, in place."""
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = schema.get(bound)
        if isinstance(flag, bool):
            del schema[bound]
            if flag and limit in schema:
                schema[bound] = schema.pop(limit)
    if schema.pop("nullable", False) is True:
        kind = schema.get("type")
        if isinstance(kind, str):
            schema["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            schema["type"] = [*kind, "null"]
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        if kind is None and "enum" not in schema:
            rest = dict(schema)
            schema.clear()
            schema["anyOf"] = [rest, {"type": "null"}]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
