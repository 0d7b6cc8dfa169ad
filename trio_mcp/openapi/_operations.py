"""The operations of an OpenAPI document, each as what a tool (or a resource) needs: a valid,
unique name, its arguments and where each goes on the wire, its input and output schemas.

Sans-IO, like ``_document``: nothing here sends a request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from ._document import OpenApiError, SchemaConverter, follow, pointer_of

__all__ = ["Argument", "Operation", "operations"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header", "cookie")
#: Tool names of MCP (2025-11-25): 1 to 128 of these characters.
_INVALID = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_NAME = 128
_JSON = re.compile(r"^application/(?:[\w.+-]+\+)?json$")


@attrs.frozen
class Argument:
    """One argument of a tool and where it goes: ``location`` is path, query, header, cookie,
    ``body`` (one property of an object body) or ``whole body`` (the body itself)."""

    name: str
    location: str
    wire: str
    style: str = "form"
    explode: bool = True


@attrs.frozen
class Operation:
    """One operation of the document, ready to serve."""

    method: str
    path: str
    name: str
    pointer: str
    description: str | None
    tags: tuple[str, ...]
    arguments: tuple[Argument, ...]
    input_schema: dict[str, Any]
    #: The 2xx JSON response's schema as a tool's output schema (an object at its root).
    output_schema: dict[str, Any] | None
    #: The output schema wraps the response as ``{"result": ...}`` (it is not an object).
    wraps_output: bool
    #: The request body's media type, when it has one.
    body_media: str | None
    #: The 2xx response is JSON (a resource says so in its MIME type).
    returns_json: bool

    @property
    def required(self) -> frozenset[str]:
        return frozenset(self.input_schema.get("required", ()))


def operations(
    document: Mapping[str, Any], skip: Callable[[str, str, list[str]], bool] | None = None
) -> Iterator[Operation]:
    """Every operation of ``document`` in its order, named uniquely, but those ``skip``
    (method, path, tags) leaves out."""
    taken: set[str] = set()
    for path, item in document.get("paths", {}).items():
        where = pointer_of("paths", path)
        item, _ = follow(document, item, where)
        if not isinstance(item, Mapping):
            raise OpenApiError("a path item must be an object", where)
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                operation = item[method]
                here = pointer_of("paths", path, method)
                if not isinstance(operation, Mapping):
                    raise OpenApiError("an operation must be an object", here)
                tags = operation.get("tags", [])
                tags = [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []
                if skip is not None and skip(method, path, tags):
                    continue
                yield _operation(document, path, method, operation, shared, here, taken)


def tool_name(text: str) -> str:
    """``text`` as a valid tool name: invalid characters become ``_``, at most 128."""
    name = _INVALID.sub("_", text).strip("_")[:_MAX_NAME]
    return name or "operation"


def _unique(name: str, taken: set[str]) -> str:
    found, n = name, 1
    while found in taken:
        n += 1
        suffix = f"_{n}"
        found = name[: _MAX_NAME - len(suffix)] + suffix
    taken.add(found)
    return found


def _operation(
    document: Mapping[str, Any],
    path: str,
    method: str,
    op: Mapping[str, Any],
    shared: Any,
    where: str,
    taken: set[str],
) -> Operation:
    converter = SchemaConverter(document)
    operation_id = op.get("operationId")
    base = operation_id if isinstance(operation_id, str) and operation_id else f"{method}{path}"
    name = _unique(tool_name(base), taken)

    # Parameters: the operation's override the path item's of the same name and location.
    params: dict[tuple[str, str], tuple[Mapping[str, Any], str]] = {}
    for source, at in ((shared, where.rsplit("/", 1)[0]), (op.get("parameters", []), where)):
        if not isinstance(source, list):
            raise OpenApiError("'parameters' must be a list", f"{at}/parameters")
        for i, raw in enumerate(source):
            param, p_where = follow(document, raw, f"{at}/parameters/{i}")
            if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
                raise OpenApiError("a parameter needs a name", p_where)
            location = param.get("in")
            if location not in LOCATIONS:
                raise OpenApiError(f"parameter 'in' must be one of {LOCATIONS}", p_where)
            params[param["name"], location] = (param, p_where)

    properties: list[tuple[str, str, Any, bool, Argument]] = []  # name, location, schema, req
    for (wire, location), (param, p_where) in params.items():
        if location == "header" and wire.lower() in ("accept", "content-type", "authorization"):
            continue  # OpenAPI says these are ignored as parameters: they are the client's
        schema = _parameter_schema(converter, param, p_where)
        if param.get("description") and isinstance(schema, dict):
            schema = {**schema, "description": param["description"]}
        style = param.get("style", "form" if location in ("query", "cookie") else "simple")
        explode = bool(param.get("explode", style == "form"))
        required = bool(param.get("required")) or location == "path"
        properties.append(
            (wire, location, schema, required, Argument(wire, location, wire, style, explode))
        )

    body_media = None
    body = op.get("requestBody")
    if body is not None:
        body, b_where = follow(document, body, f"{where}/requestBody")
        content = body.get("content", {}) if isinstance(body, Mapping) else {}
        body_media = _pick_media(content, b_where)
        media = content[body_media]
        schema = media.get("schema", {}) if isinstance(media, Mapping) else {}
        required = bool(body.get("required"))
        here = f"{b_where}/content/{body_media.replace('/', '~1')}/schema"
        target, t_where = converter.target(schema, here)
        flat = (
            body_media != "text/plain"
            and isinstance(target, Mapping)
            and _is_object(target)
            and isinstance(target.get("properties"), Mapping)
            and target.get("additionalProperties", False) is False
            and not any(k in target for k in ("allOf", "anyOf", "oneOf", "patternProperties"))
        )
        if flat:
            converted = converter.convert(target, t_where)
            inner = set(target.get("required", ())) if required else set()
            for prop, prop_schema in converted["properties"].items():
                properties.append(
                    (prop, "body", prop_schema, prop in inner, Argument(prop, "body", prop))
                )
        else:
            properties.append(
                (
                    "body",
                    "whole body",
                    converter.convert(schema, here),
                    required,
                    Argument("body", "whole body", ""),
                )
            )

    # Names made unique: where two places share one, each takes its location as a suffix.
    counts: dict[str, int] = {}
    for prop in properties:
        counts[prop[0]] = counts.get(prop[0], 0) + 1
    arguments: list[Argument] = []
    input_properties: dict[str, Any] = {}
    required_names: list[str] = []
    used: set[str] = set()
    for wire, location, schema, required, argument in properties:
        arg = wire
        if counts[wire] > 1:
            arg = f"{wire}_{location.replace(' ', '_')}"
        arg = _unique(arg, used)
        arguments.append(attrs.evolve(argument, name=arg))
        input_properties[arg] = schema
        if required:
            required_names.append(arg)
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": input_properties,
        "additionalProperties": False,
    }
    if required_names:
        input_schema["required"] = required_names
    input_schema = converter.rooted(input_schema)

    output_schema, wraps, returns_json = _output(converter, op, where)
    summary, detail = op.get("summary"), op.get("description")
    text = "\n\n".join(t for t in (summary, detail) if isinstance(t, str) and t.strip())
    tags = op.get("tags", [])
    return Operation(
        method=method.upper(),
        path=path,
        name=name,
        pointer=where,
        description=text.strip() or None,
        tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
        arguments=tuple(arguments),
        input_schema=input_schema,
        output_schema=output_schema,
        wraps_output=wraps,
        body_media=body_media,
        returns_json=returns_json,
    )


def _parameter_schema(converter: SchemaConverter, param: Mapping[str, Any], where: str) -> Any:
    if "schema" in param:
        return converter.convert(param["schema"], f"{where}/schema")
    content = param.get("content")
    if isinstance(content, Mapping) and len(content) == 1:
        media, value = next(iter(content.items()))
        if _JSON.match(media) and isinstance(value, Mapping):
            schema = value.get("schema", {})
            return converter.convert(schema, f"{where}/content/{media.replace('/', '~1')}/schema")
        raise OpenApiError(f"parameter content {media!r} is not supported (only JSON)", where)
    return {}


def _pick_media(content: Any, where: str) -> str:
    """The request body's media type this import sends: JSON, else a form, else plain text."""
    if not isinstance(content, Mapping) or not content:
        raise OpenApiError("a request body without content", where)
    for kind in content:
        if _JSON.match(kind.split(";")[0].strip()):
            return str(kind)
    for kind in ("application/x-www-form-urlencoded", "text/plain"):
        if kind in content:
            return kind
    raise OpenApiError(
        f"the request body's content ({', '.join(content)}) is not supported: only JSON, "
        "application/x-www-form-urlencoded and text/plain are sent; leave the operation out "
        "with a route (Route('exclude', ...))",
        where,
    )


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping))


def _output(
    converter: SchemaConverter, op: Mapping[str, Any], where: str
) -> tuple[dict[str, Any] | None, bool, bool]:
    """The output schema from the first 2xx response with JSON content (200 first)."""
    responses = op.get("responses", {})
    if not isinstance(responses, Mapping):
        return None, False, False
    codes = sorted(
        (str(c) for c in responses if str(c).startswith("2")), key=lambda c: (c != "200", c)
    )
    for code in codes:
        response, r_where = follow(converter.document, responses[code], f"{where}/responses/{code}")
        content = response.get("content", {}) if isinstance(response, Mapping) else {}
        if not isinstance(content, Mapping):
            continue
        for media, value in content.items():
            if _JSON.match(media.split(";")[0].strip()) and isinstance(value, Mapping):
                here = f"{r_where}/content/{media.replace('/', '~1')}/schema"
                if "schema" not in value:
                    return None, False, True
                schema = converter.convert(value["schema"], here)
                target, _ = converter.target(value["schema"], here)
                if isinstance(target, Mapping) and _object_at_root(converter, target, here):
                    root = (
                        dict(converter.convert(target, here))
                        if "$ref" in value["schema"]
                        else schema
                    )
                    root.setdefault("type", "object")
                    return converter.rooted(root), False, True
                wrapped = {
                    "type": "object",
                    "properties": {"result": schema},
                    "required": ["result"],
                }
                return converter.rooted(wrapped), True, True
        return None, False, False
    return None, False, False


def _object_at_root(converter: SchemaConverter, target: Mapping[str, Any], where: str) -> bool:
    """Whether every value of ``target`` is an object: it says so, or a member of its
    ``allOf`` does (a value must match them all)."""
    if _is_object(target):
        return True
    kind = target.get("type")
    if kind is not None:
        return False
    for i, member in enumerate(target.get("allOf", ())):
        resolved, _ = converter.target(member, f"{where}/allOf/{i}")
        if isinstance(resolved, Mapping) and _object_at_root(converter, resolved, where):
            return True
    return False
