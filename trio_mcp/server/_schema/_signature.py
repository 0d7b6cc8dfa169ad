"""What a Python callable looks like over MCP: a tool's schemas from its signature (or given by
hand), and the calls that convert its arguments and its result.

* The parameters make the input schema (through ``_builder``), the docstring the descriptions
  (``_docstrings``); a parameter annotated with the context type is left out, for the caller to
  fill.
* A derived signature rejects ``*args`` and ``**kwargs`` at registration: tool arguments are
  passed by name against a closed schema, so there is nothing for them to receive. A function
  given a hand-written schema may take ``**kwargs`` (it then receives every argument).
* Return values are checked against the output schema (:class:`ResultError`).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

import attrs

from ...protocol._jsonschema import Check, Collector, compile_schema
from ._builder import (
    _MAPPING_TYPES,
    _NO_DEFAULT,
    _Builder,
    _field_info,
    _make_field,
    _object_node,
    to_json,
)
from ._docstrings import parse_docstring

__all__ = ["FunctionSignature", "ResultError", "explicit_signature", "function_signature"]


class ResultError(ValueError):
    """A tool's return value does not match its declared output type (or output schema).

    The message names the path and the reason, like :class:`ArgumentsError`'s; ``errors`` holds
    every individual problem.
    """

    def __init__(self, message: str, errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.errors = errors or (message,)


@attrs.frozen
class FunctionSignature:
    """What a tool's function looks like over MCP: its schemas, and how to call it.

    ``convert_arguments`` turns a ``tools/call`` request's ``arguments`` into keyword arguments
    (without the context parameter, which the caller adds); ``convert_result`` turns the
    function's return value into ``structuredContent``.
    """

    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    wraps_output: bool
    description: str | None
    context_param: str | None
    #: ``convert_arguments(arguments)``: check a call's ``arguments`` (None: an empty object)
    #: and return the function's keyword arguments. Raises :class:`ArgumentsError` naming
    #: every problem found; optional parameters the client omitted are left out, so the
    #: function's own defaults apply. The compiled converter itself (called once per call):
    #: no method in front of it.
    convert_arguments: Callable[[Mapping[str, Any] | None], dict[str, Any]] = attrs.field(
        alias="convert", repr=False, eq=False
    )
    #: Checks a return value (as JSON, unwrapped) against the output schema.
    _check_output: Check | None = attrs.field(default=None, repr=False, eq=False)

    def convert_result(self, value: Any) -> Any:
        """A return value as JSON-ready structured content (wrapped as ``{"result": ...}`` when
        ``wraps_output``), checked against ``output_schema``: structured content MUST conform
        to it, so a mismatch raises :class:`ResultError` naming what is wrong."""
        data = to_json(value)
        if self._check_output is not None:
            found = Collector()
            self._check_output(data, (), found)
            if found.issues:
                error = found.error("property", "the return value")
                raise ResultError(str(error), error.errors)
        return {"result": data} if self.wraps_output else data


def _callable_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def _hint_target(fn: Any) -> Any:
    """The object whose annotations and docstring describe calling ``fn``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    return type(fn).__call__  # a callable instance: its class's __call__ has the hints


def _function_hints(target: Any, name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot resolve the type hints of {name}: {exc}") from None


def _is_context(hint: Any, context_type: type) -> bool:
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) is Union or get_origin(hint) is types.UnionType:
        members = [m for m in get_args(hint) if m is not type(None)]
        if len(members) != 1:
            return False
        hint = members[0]
    hint = get_origin(hint) or hint
    return isinstance(hint, type) and issubclass(hint, context_type)


def _mentions(tp: Any, classes: tuple[type, ...]) -> bool:
    """Whether ``tp`` or any type argument inside it is (a subclass of) one of ``classes``."""
    base = get_origin(tp) or tp
    if isinstance(base, type) and issubclass(base, classes):
        return True
    return any(_mentions(arg, classes) for arg in get_args(tp) if arg is not tp)


def _parameters(
    fn: Any, name: str, hints: Mapping[str, Any], context_type: type | None, *, allow_var_kw: bool
) -> tuple[list[inspect.Parameter], str | None, bool]:
    """The ordinary parameters of ``fn``, its context parameter, and whether it has ``**kw``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot inspect the signature of {name}: {exc}") from None
    params: list[inspect.Parameter] = []
    context_param: str | None = None
    var_kw = False
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD and allow_var_kw:
            var_kw = True
            continue
        if p.kind is p.VAR_POSITIONAL or p.kind is p.VAR_KEYWORD:
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{name}: parameter {star}{p.name} is not supported; tool arguments are passed "
                "by name, so declare each one as a parameter"
            )
        if p.name in ("self", "cls"):
            raise TypeError(
                f"{name}: parameter {p.name!r} suggests an unbound method; register the bound "
                "method (instance.method) or a plain function instead"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(
                f"{name}: positional-only parameter {p.name!r} is not supported; arguments are "
                "passed by keyword"
            )
        if context_type is not None and _is_context(hints.get(p.name, Any), context_type):
            if context_param is not None:
                raise TypeError(
                    f"{name}: both {context_param!r} and {p.name!r} take the context; keep one"
                )
            context_param = p.name
            continue
        params.append(p)
    return params, context_param, var_kw


def function_signature(
    fn: Callable[..., Any],
    *,
    context_type: type | None = None,
    skip_output_types: tuple[type, ...] = (),
    strict: bool = False,
) -> FunctionSignature:
    """Derive a tool's schemas and argument converter from ``fn``'s type hints and docstring.

    A parameter annotated with ``context_type`` (a subclass, or ``Optional`` of it) is the
    context parameter, left out of the schema. No output schema is produced for a return
    annotation that is absent, ``None``, ``Any``, ``str``, one that mentions a type in
    ``skip_output_types`` (content blocks: unstructured results), or one that cannot be
    described; object-like returns give their own schema, others are wrapped as ``result``.

    ``strict=False`` (the default) also accepts a string holding exactly a number or a boolean
    for an ``int``, ``float`` or ``bool`` (``"10"``, ``"2.5"``, ``"true"``), as pydantic's lax
    mode does; the schemas are the same either way. A pydantic ``Field(...)`` default
    (``n: int = Field(3, ge=1)``) gives its constraints to the schema and its default to calls.

    Raises :class:`TypeError` with the offending parameter named when ``fn`` cannot be a tool.
    """
    name = _callable_name(fn)
    target = _hint_target(fn)
    hints = _function_hints(target, name)
    description, param_docs = parse_docstring(inspect.getdoc(target))
    params, context_param, _ = _parameters(fn, name, hints, context_type, allow_var_kw=False)
    builder = _Builder(strict=strict)
    fields = []
    #: Parameters whose Python default is a ``Field(...)``: the value to pass when omitted.
    fills: dict[str, Callable[[], Any]] = {}
    for p in params:
        hint = hints.get(p.name, Any)
        default = _NO_DEFAULT if p.default is p.empty else p.default
        info = _field_info(default)
        if info is not None:
            hint = Annotated[hint, info]
            default = _NO_DEFAULT
            if not info.is_required():
                fills[p.name] = functools.partial(info.get_default, call_default_factory=True)
                if info.default_factory is None:
                    default = info.default
        try:
            node = builder.build(hint)
        except TypeError as exc:
            raise TypeError(f"{name}: parameter {p.name!r}: {exc}") from None
        required = p.default is p.empty or (info is not None and info.is_required())
        fields.append(_make_field(p.name, p.name, node, required, param_docs.get(p.name), default))
    arguments = _object_node(fields, None, "an object", name)
    convert = arguments.convert

    def convert_arguments(values: Mapping[str, Any] | None) -> dict[str, Any]:
        found = Collector()
        result = convert({} if values is None else values, (), found)
        if found.issues:
            raise found.error("argument", "arguments")
        kwargs: dict[str, Any] = result
        if fills:
            for key, fill in fills.items():
                if key not in kwargs:
                    kwargs[key] = fill()
        return kwargs

    output_schema, wraps, returned = _output_schema(
        hints.get("return", _NO_DEFAULT), skip_output_types
    )
    return FunctionSignature(
        input_schema=arguments.schema,
        output_schema=output_schema,
        wraps_output=wraps,
        description=description,
        context_param=context_param,
        convert=convert_arguments,
        check_output=compile_schema(returned) if returned is not None else None,
    )


def _output_schema(
    hint: Any, skip: tuple[type, ...]
) -> tuple[dict[str, Any] | None, bool, dict[str, Any] | None]:
    """The output schema, whether it wraps the value as ``result``, and the returned value's
    own schema (what a return value is checked against)."""
    bare = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    if bare is _NO_DEFAULT or bare in (None, type(None), Any, object, str):
        return None, False, None
    if skip and _mentions(bare, skip):
        return None, False, None
    try:
        node = _Builder(output=True).build(hint)
    except TypeError:
        return None, False, None  # not describable: the server sends unstructured content
    if node.schema.get("type") == "object":
        return node.schema, False, node.schema
    wrapped = {"type": "object", "properties": {"result": node.schema}, "required": ["result"]}
    return wrapped, True, node.schema


def _is_mapping_hint(hint: Any) -> bool:
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return (get_origin(hint) or hint) in _MAPPING_TYPES


def _require_object_root(schema: Any, what: str) -> dict[str, Any]:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise TypeError(f'{what} must be a JSON Schema object with "type": "object" at the root')
    return dict(schema)


def explicit_signature(
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None,
    fn: Callable[..., Any],
    *,
    context_type: type | None = None,
    tool: str | None = None,
) -> FunctionSignature:
    """A signature for a tool registered with a hand-written JSON Schema.

    Arguments are validated against ``input_schema`` by the ``jsonschema`` library (any keyword of
    the schema's dialect, draft 2020-12 by default; see ``_handwritten``) and then passed as
    keywords, one per top-level property. The rule for calling ``fn``:

    * If ``fn`` has exactly one parameter (besides the context), annotated ``dict`` or
      ``Mapping``, and that parameter's name is not a property of the schema, it receives the
      whole arguments object.
    * Otherwise each parameter must be a property of the schema (parameters without a default
      must also be ``required``), and every declared property must be a parameter unless ``fn``
      takes ``**kwargs``. Arguments the schema allows but ``fn`` cannot take (undeclared extras,
      when there is no ``**kwargs``) are dropped; with ``**kwargs`` all arguments are passed.

    Mismatches and malformed schemas (both are checked against their meta-schema, and every
    ``$ref`` must resolve) raise :class:`TypeError` here, at registration, naming ``tool`` (by
    default the function).
    """
    from ._handwritten import compile_handwritten  # loads jsonschema: only when used

    name = _callable_name(fn)
    who = f"tool {tool!r}" if tool is not None else name
    schema = _require_object_root(input_schema, f"{who}: input_schema")
    output = None
    check_output = None
    if output_schema is not None:
        output = _require_object_root(output_schema, f"{who}: output_schema")
        check_output = compile_handwritten(output, f"{who}: output_schema")
    check = compile_handwritten(schema, f"{who}: input_schema")
    target = _hint_target(fn)
    hints = _function_hints(target, name)
    params, context_param, var_kw = _parameters(fn, name, hints, context_type, allow_var_kw=True)
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    whole: str | None = None
    if (
        len(params) == 1
        and not var_kw
        and params[0].name not in properties
        and _is_mapping_hint(hints.get(params[0].name, Any))
    ):
        whole = params[0].name
    else:
        for p in params:
            if p.name not in properties:
                if p.default is p.empty:
                    raise TypeError(
                        f"{name}: parameter {p.name!r} is not a property of the input schema"
                    )
            elif p.default is p.empty and p.name not in required:
                raise TypeError(
                    f"{name}: parameter {p.name!r} has no default, so the input schema must "
                    "list it in 'required'"
                )
        if not var_kw:
            missing = [k for k in properties if k not in {p.name for p in params}]
            if missing:
                raise TypeError(
                    f"{name}: the input schema's properties {missing} are not parameters of "
                    "the function"
                )
    accepted = frozenset(p.name for p in params)

    def convert_arguments(values: Mapping[str, Any] | None) -> dict[str, Any]:
        if values is None:
            values = {}
        found = Collector()
        check(values, (), found)
        if found.issues:
            raise found.error("argument", "arguments")
        if whole is not None:
            return {whole: dict(values)}
        if var_kw:
            return dict(values)
        return {k: v for k, v in values.items() if k in accepted}

    return FunctionSignature(
        input_schema=schema,
        output_schema=output,
        wraps_output=False,
        description=parse_docstring(inspect.getdoc(target))[0],
        context_param=context_param,
        convert=convert_arguments,
        check_output=check_output,
    )
