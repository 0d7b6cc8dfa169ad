"""The CLI's answers to a server's questions: elicitation as a form on the terminal, sampling
typed by the person at it.

A server that asks (``ctx.elicit``, ``ctx.sample``) while ``trio-mcp call`` runs gets an
answer instead of "the client did not declare the capability": on a terminal, the user sees
the question and answers each field of the requested schema (its type, choices and default
shown); elsewhere (stdin a pipe or a file: a script) the question is declined, and sampling
refused, at once and said so on stderr, so a script never hangs on a prompt nobody sees.
Prompts go to stderr, answers come from stdin: stdout stays the tool's result.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import orjson
import trio

from .client._redirect import open_browser
from .protocol._errors import ProtocolError
from .protocol._types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    TextContent,
)

#: The sampling error a client answers when its user (or it) refuses (the spec's example).
REFUSED = -1
#: The model name of a completion typed at the terminal.
TYPED_MODEL = "trio-mcp-terminal"
_YES = ("y", "yes", "true", "1", "on")
_NO = ("n", "no", "false", "0", "off")


class _Cancelled(Exception):
    """End of input (Ctrl-D) while answering: the whole question is cancelled."""


class TerminalAnswers:
    """``on_elicit`` and ``on_sample`` for the CLI; ``note`` writes a line on stderr (ending
    any progress line first)."""

    def __init__(self, note: Callable[[str], None], *, interactive: bool | None = None) -> None:
        self._note = note
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        #: One question at a time: two nested requests never interleave their prompts.
        self._lock = trio.Lock()

    async def _line(self, prompt: str) -> str:
        sys.stderr.write(prompt)
        sys.stderr.flush()
        line: str = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            sys.stderr.write("\n")
            raise _Cancelled
        return line.strip()

    async def _choose(self, prompt: str) -> str:
        """``y``, ``n`` or ``c``, asked until one of them (Enter is yes)."""
        while True:
            answer = (await self._line(prompt)).lower() or "y"
            if answer[0] in "ync":
                return answer[0]

    # -- elicitation -----------------------------------------------------------------------------

    async def elicit(
        self, params: ElicitRequestFormParams | ElicitRequestURLParams
    ) -> ElicitResult:
        if not self.interactive:
            self._note(
                f"trio-mcp: the server asked: {params.message!r}; declined (stdin is not a "
                "terminal to answer on)"
            )
            return ElicitResult(action="decline")
        async with self._lock:
            try:
                if isinstance(params, ElicitRequestURLParams):
                    return await self._visit(params)
                return await self._form(params)
            except _Cancelled:
                return ElicitResult(action="cancel")

    async def _visit(self, params: ElicitRequestURLParams) -> ElicitResult:
        self._note(f"trio-mcp: the server asks you to visit {params.url}\n  {params.message}")
        choice = await self._choose("Open it? [Y]es, [n]o (decline), [c]ancel: ")
        if choice == "y":
            await open_browser(params.url)
            return ElicitResult(action="accept")
        return ElicitResult(action="decline" if choice == "n" else "cancel")

    async def _form(self, params: ElicitRequestFormParams) -> ElicitResult:
        self._note(f"trio-mcp: the server asks: {params.message}")
        choice = await self._choose("Answer? [Y]es, [n]o (decline), [c]ancel: ")
        if choice != "y":
            return ElicitResult(action="decline" if choice == "n" else "cancel")
        schema = params.requested_schema
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, field in properties.items():
            value = await self._field(name, field if isinstance(field, dict) else {}, required)
            if value is not _OMITTED:
                content[name] = value
        return ElicitResult(action="accept", content=content)

    async def _field(self, name: str, field: dict[str, Any], required: set[str]) -> Any:
        choices = _choices(field)
        kind = field.get("type", "string")
        if field.get("description"):
            sys.stderr.write(f"  {field['description']}\n")
        if choices:
            for number, (_, title) in enumerate(choices, 1):
                sys.stderr.write(f"    {number}) {title}\n")
        has_default = "default" in field
        shown = _kind(field, choices)
        needed = "required" if name in required else "optional"
        default = f" [{_show(field['default'])}]" if has_default else ""
        prompt = f"{field.get('title') or name} ({shown}, {needed}){default}: "
        while True:
            text = await self._line(prompt)
            if not text:
                if has_default:
                    return field["default"]
                if name not in required:
                    return _OMITTED
                sys.stderr.write("  an answer is required\n")
                continue
            try:
                return _parse(text, kind, choices, field)
            except ValueError as exc:
                sys.stderr.write(f"  {exc}\n")

    # -- sampling --------------------------------------------------------------------------------

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        if not self.interactive:
            self._note(
                "trio-mcp: the server asked for a model's reply (sampling); refused: trio-mcp "
                "has no model, and stdin is not a terminal to type one on"
            )
            raise ProtocolError(REFUSED, "trio-mcp has no model to sample with; refused")
        async with self._lock:
            self._note(
                "trio-mcp: the server asks for a model's reply (sampling); you are the model"
            )
            if params.system_prompt:
                sys.stderr.write(f"  system: {params.system_prompt}\n")
            for message in params.messages:
                blocks = message.content if isinstance(message.content, list) else [message.content]
                for block in blocks:
                    text = getattr(block, "text", None)
                    shown = text if isinstance(text, str) else f"[{getattr(block, 'type', '?')}]"
                    sys.stderr.write(f"  {message.role}: {shown}\n")
            try:
                reply = await self._line("Reply (an empty line refuses): ")
            except _Cancelled:
                reply = ""
        if not reply:
            raise ProtocolError(REFUSED, "the user refused the sampling request")
        return CreateMessageResult(
            role="assistant", content=TextContent(reply), model=TYPED_MODEL, stop_reason="endTurn"
        )


_OMITTED: Any = object()


def _choices(field: dict[str, Any]) -> list[tuple[Any, str]]:
    """(value, title) of an enum field: ``enum`` (with legacy ``enumNames``), ``oneOf`` of
    ``const``s, or an array's ``items`` of either."""
    source = field.get("items") if field.get("type") == "array" else field
    if not isinstance(source, dict):
        return []
    if isinstance(source.get("enum"), list):
        names = source.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(source["enum"]) else None
        return [(v, str(titles[i]) if titles else _show(v)) for i, v in enumerate(source["enum"])]
    options = source.get("oneOf") or source.get("anyOf")
    if isinstance(options, list):
        found = [o for o in options if isinstance(o, dict) and "const" in o]
        return [(o["const"], str(o.get("title") or _show(o["const"]))) for o in found]
    return []


def _kind(field: dict[str, Any], choices: list[tuple[Any, str]]) -> str:
    kind = str(field.get("type", "string"))
    if kind == "array":
        return "several of the numbers or values, comma-separated"
    if choices:
        return "a number or a value above"
    if kind == "boolean":
        return "y/n"
    bounds = [
        f"{word} {field[key]}"
        for key, word in (("minimum", "min"), ("maximum", "max"))
        if key in field
    ]
    extra = field.get("format")
    return ", ".join([kind, *([extra] if isinstance(extra, str) else []), *bounds])


def _show(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _pick(text: str, choices: list[tuple[Any, str]]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, title in choices:
        if text in (_show(value), title):
            return value
    raise ValueError(f"choose one of 1 to {len(choices)}, or a value listed")


def _parse(text: str, kind: Any, choices: list[tuple[Any, str]], field: dict[str, Any]) -> Any:
    """The typed value of an answer; ValueError saying what is expected."""
    if kind == "array":
        return [_pick(part.strip(), choices) for part in text.split(",") if part.strip()]
    if choices:
        return _pick(text, choices)
    if kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        try:
            number: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(
                f"expected {'an integer' if kind == 'integer' else 'a number'}"
            ) from None
        if "minimum" in field and number < field["minimum"]:
            raise ValueError(f"at least {field['minimum']}")
        if "maximum" in field and number > field["maximum"]:
            raise ValueError(f"at most {field['maximum']}")
        return number
    return text
