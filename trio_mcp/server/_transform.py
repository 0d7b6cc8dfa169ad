"""Tool transforms: tools derived from registered ones, and prompts and resources as tools.

A derived tool (``server.transform_tool``) is an ordinary :class:`ToolEntry`: its wire
definition (renamed arguments, hidden ones left out, new descriptions and defaults, the parent's
output schema) and a signature whose converter maps the client's arguments onto the parent's and
runs the parent's own converter, so a call is checked exactly as the parent's would be and a
mismatch is the same SEP-1303 ``isError`` result, worded with the derived names. Its function
calls the parent's in the same task, so the request's cancel scope, ``Context`` and scopes (the
parent's and its own) all hold; nothing runs outside the request.

``prompts_as_tools`` and ``resources_as_tools`` add tools that answer what ``prompts/list``,
``prompts/get``, ``resources/list`` and ``resources/read`` would: each runs the connection's own
handler for that method (mounts included) on a record of the same request, authorized as that
request would be, so scopes and visibility apply to the caller as they do to the methods.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import orjson

from .._engine import InFlight
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import JSONObject
from ..protocol._jsonschema import ArgumentsError, Collector
from ..protocol._types import CallToolResult, TextContent, Tool, ToolAnnotations, from_wire
from ._connection import ServerConnection, ToolError
from ._context import Context
from ._registry import ToolEntry, call_user, context_param
from ._schema import function_signature

#: Reserved keyword arguments of a derived tool's function: the request's ``Context``, and the
#: parent's converted arguments the client does not see (hidden ones).
_CONTEXT = "__trio_mcp_context__"
_HIDDEN = "__trio_mcp_hidden__"


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


#: No default given (None is a JSON value a default may be).
_NOTHING: Any = _Unset()


@attrs.frozen(kw_only=True)
class ArgTransform:
    """How a derived tool changes one of its parent's arguments (``server.transform_tool``).

    ``name``: what the client calls it; ``description``: its new description; ``default``: a
    JSON value used when the client omits it (the argument becomes optional); ``hide=True``:
    the client never sees it, and the parent always gets ``default`` (or a fresh
    ``default_factory()``), converted like an argument the client sent. A hidden argument the
    parent requires needs one of them; one it does not require may have neither (the parent's
    own default applies).
    """

    name: str | None = None
    description: str | None = None
    default: Any = _NOTHING
    default_factory: Callable[[], Any] | None = None
    hide: bool = False

    def __attrs_post_init__(self) -> None:
        if self.default_factory is not None and not self.hide:
            raise ValueError("ArgTransform(default_factory=...) is for hidden arguments")
        if self.default_factory is not None and self.default is not _NOTHING:
            raise ValueError("ArgTransform takes default or default_factory, not both")
        if self.hide and (self.name is not None or self.description is not None):
            raise ValueError("a hidden argument has no name or description to change")


#: An argument's name at the head of an error message's path (``argument 'a.b': ...``).
_ARGUMENT = re.compile(r"(argument ')([A-Za-z_][A-Za-z0-9_-]*)(?=['.\[])")


def _renamed(exc: ArgumentsError, back: Mapping[str, str]) -> ArgumentsError:
    """The parent's verdict, worded with the derived tool's argument names."""

    def fix(text: str) -> str:
        return _ARGUMENT.sub(lambda m: m.group(1) + back.get(m.group(2), m.group(2)), text)

    return ArgumentsError(fix(str(exc)), [fix(e) for e in exc.errors])


def transformed_tool(
    parent: ToolEntry,
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    arguments: Mapping[str, ArgTransform],
    wrap: Callable[..., Any] | None,
    output_schema: dict[str, Any] | None,
    tags: frozenset[str] | None,
    scopes: frozenset[str],
) -> ToolEntry:
    """The entry of a tool derived from ``parent`` (see ``Server.transform_tool``)."""
    schema = parent.tool.input_schema
    props: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        raise ValueError(
            f"tool {parent.tool.name!r} has no argument {', '.join(map(repr, unknown))}"
        )
    renames: dict[str, str] = {}  # derived name -> parent's
    hidden: dict[str, ArgTransform] = {}
    defaults: dict[str, Any] = {}  # derived name -> default the derived tool adds
    new_props: dict[str, Any] = {}
    new_required: list[str] = []
    for old, prop in props.items():
        change = arguments.get(old, ArgTransform())
        if change.hide:
            if old in required and change.default is _NOTHING and change.default_factory is None:
                raise ValueError(
                    f"argument {old!r} of tool {parent.tool.name!r} is required: hiding it "
                    "needs ArgTransform(hide=True, default=...) or default_factory"
                )
            hidden[old] = change
            continue
        new = change.name or old
        if new in renames:
            raise ValueError(f"two arguments would be named {new!r}")
        renames[new] = old
        shown = dict(prop) if isinstance(prop, dict) else prop
        if isinstance(shown, dict):
            if change.description is not None:
                shown["description"] = change.description
            if change.default is not _NOTHING:
                shown["default"] = change.default
        if change.default is not _NOTHING:
            defaults[new] = change.default
        new_props[new] = shown
        if old in required and change.default is _NOTHING:
            new_required.append(new)
    back = {old: new for new, old in renames.items()}
    derived_schema = {k: v for k, v in schema.items() if k not in ("properties", "required")}
    derived_schema["properties"] = new_props
    if new_required:
        derived_schema["required"] = new_required
    tool_name = name or parent.tool.name
    convert_parent = parent.signature.convert_arguments

    def convert(given: Mapping[str, Any] | None) -> dict[str, Any]:
        if given is None:
            given = {}
        mapped: dict[str, Any] = {}
        refused = Collector()
        for key, value in given.items():
            old = renames.get(key)
            if old is None:
                if key in back or key in hidden or key in (_CONTEXT, _HIDDEN):
                    refused.unexpected((key,))  # the parent's name, not the derived tool's
                    continue
                old = key  # not the parent's either: the parent's converter says so
            mapped[old] = value
        if refused.issues:
            raise refused.error("argument", "arguments")
        for new, value in defaults.items():
            if new not in given:
                mapped[renames[new]] = copy.deepcopy(value)
        for old, change in hidden.items():
            if change.default_factory is not None:
                mapped[old] = change.default_factory()
            elif change.default is not _NOTHING:
                mapped[old] = copy.deepcopy(change.default)
        try:
            converted = convert_parent(mapped)
        except ArgumentsError as exc:
            raise _renamed(exc, back) from None
        kept = {k: converted.pop(k) for k in [*hidden, _HIDDEN] if k in converted}
        visible = {back.get(k, k): v for k, v in converted.items()}
        visible[_HIDDEN] = kept
        return visible

    signature = parent.signature
    changes: dict[str, Any] = {
        "input_schema": derived_schema,
        "context_param": _CONTEXT,
        "convert": convert,
    }
    wire_output = parent.tool.output_schema
    if output_schema is not None:
        from ._schema._handwritten import compile_handwritten

        changes["check_output"] = compile_handwritten(
            output_schema, f"tool {tool_name!r}: output_schema"
        )
        changes["output_schema"] = wire_output = output_schema
        changes["wraps_output"] = False
    derived_signature = attrs.evolve(signature, **changes)
    parent_context = signature.context_param
    wrap_context = context_param(wrap, Context) if wrap is not None else None

    async def run(**kwargs: Any) -> Any:
        ctx = kwargs.pop(_CONTEXT, None)
        kept = kwargs.pop(_HIDDEN, {})

        async def call_parent(**given: Any) -> Any:
            call = {renames.get(k, k): v for k, v in given.items()}
            call.update(kept)
            if parent_context is not None:
                call[parent_context] = ctx
            return await call_user(parent.fn, parent.is_async, call, in_thread=parent.in_thread)

        if wrap is None:
            return await call_parent(**kwargs)
        if wrap_context is not None:
            kwargs[wrap_context] = ctx
        return await wrap(call_parent, **kwargs)

    tool = attrs.evolve(
        parent.tool,
        name=tool_name,
        title=title if title is not None else parent.tool.title,
        description=description if description is not None else parent.tool.description,
        input_schema=derived_schema,
        output_schema=wire_output,
    )
    return ToolEntry(
        tool,
        run,
        derived_signature,
        True,
        parent.in_thread,
        scopes=parent.scopes | scopes,
        options=parent.options,
        single_use_state=parent.single_use_state,
        tags=parent.tags if tags is None else tags,
    )


# -- prompts and resources as tools ---------------------------------------------------------------

#: A bound on the pages one listing tool reads (a mount whose cursors never end cannot hang it).
_MAX_PAGES = 1000


async def _ask(ctx: Context, method: str, params: JSONObject) -> JSONObject:
    """Run the connection's handler of ``method`` for the request ``ctx`` serves, authorized
    as that request; a refusal becomes a tool error the model reads."""
    record, conn = ctx._served_request()
    if not isinstance(conn, ServerConnection):  # pragma: no cover - contexts come from one
        raise ToolError(f"{method} is not available here")
    meta = record.params.get("_meta")
    asked = InFlight(
        request=attrs.evolve(
            record.request,
            method=method,
            params={**params, **({"_meta": meta} if isinstance(meta, dict) else {})},
        ),
        session=record.session,
        scope=record.scope,
        envelope=record.envelope,
        principal=record.principal,
    )
    try:
        if conn.server.auth is not None:
            conn.authorize(asked)
        handler = conn._handler(method)
        return await handler(conn, asked)
    except ProtocolError as exc:
        raise ToolError(exc.message) from None


async def _all(ctx: Context, method: str, key: str) -> list[Any]:
    items: list[Any] = []
    cursor: Any = None
    for _ in range(_MAX_PAGES):
        result = await _ask(ctx, method, {} if cursor is None else {"cursor": cursor})
        found = result.get(key)
        if isinstance(found, list):
            items.extend(found)
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return items


def _json(value: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(orjson.dumps(value).decode())])


def _has(ctx: Context, capability: str) -> bool:
    conn = ctx.connection
    return isinstance(conn, ServerConnection) and capability in conn.capabilities()


async def list_prompts(ctx: Context) -> CallToolResult:
    """List the prompts this server offers: each one's name, description and arguments."""
    return _json(await _all(ctx, "prompts/list", "prompts") if _has(ctx, "prompts") else [])


async def get_prompt(
    name: str, ctx: Context, arguments: dict[str, str] | None = None
) -> CallToolResult:
    """Get a prompt's messages, by its name, with its arguments (strings)."""
    params: JSONObject = {"name": name}
    if arguments:
        params["arguments"] = arguments
    return _json(await _ask(ctx, "prompts/get", params))


async def list_resources(ctx: Context) -> CallToolResult:
    """List the resources (by URI) and resource templates (URI templates) this server offers."""
    if not _has(ctx, "resources"):
        return _json({"resources": [], "resourceTemplates": []})
    resources = await _all(ctx, "resources/list", "resources")
    templates = await _all(ctx, "resources/templates/list", "resourceTemplates")
    return _json({"resources": resources, "resourceTemplates": templates})


async def read_resource(uri: str, ctx: Context) -> CallToolResult:
    """Read a resource by its URI (or a URI a resource template matches)."""
    result = await _ask(ctx, "resources/read", {"uri": uri})
    content: list[Any] = []
    for item in result.get("contents", ()):
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            content.append({"type": "text", "text": item["text"]})
        else:
            content.append({"type": "resource", "resource": item})
    return from_wire({"content": content}, CallToolResult)


def _entries(fns: list[Callable[..., Any]], tags: frozenset[str]) -> list[ToolEntry]:
    entries = []
    for fn in fns:
        signature = function_signature(
            fn, context_type=Context, skip_output_types=(CallToolResult,)
        )
        tool = Tool(
            name=fn.__name__,
            description=signature.description,
            input_schema=signature.input_schema,
            annotations=ToolAnnotations(read_only_hint=True),
        )
        entries.append(ToolEntry(tool, fn, signature, True, True, tags=tags))
    return entries


def prompt_tools(tags: frozenset[str]) -> list[ToolEntry]:
    """The tools ``list_prompts`` and ``get_prompt``."""
    return _entries([list_prompts, get_prompt], tags)


def resource_tools(tags: frozenset[str]) -> list[ToolEntry]:
    """The tools ``list_resources`` and ``read_resource``."""
    return _entries([list_resources, read_resource], tags)
