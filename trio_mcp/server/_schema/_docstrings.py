"""A docstring as a tool description and per-parameter descriptions (Google, numpy and reST
styles)."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

_PARAM_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "other parameters",
    }
)
_SECTIONS = _PARAM_SECTIONS | {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "exceptions",
    "examples",
    "example",
    "note",
    "notes",
    "see also",
    "warning",
    "warnings",
    "warns",
    "attributes",
    "todo",
    "references",
}
_UNDERLINE = re.compile(r"\s*-{3,}\s*\Z")
_REST_FIELD = re.compile(
    r"\s*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except|"
    r"exception|yields?|ytype|var|ivar|cvar)\b"
)
_REST_PARAM = re.compile(
    r"(\s*):(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*?\s)?\*{0,2}"
    r"([A-Za-z_]\w*)\s*:(.*)\Z"
)
_GOOGLE_ENTRY = re.compile(r"\*{0,2}([A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:(.*)\Z")
_NUMPY_ENTRY = re.compile(r"\*{0,2}([A-Za-z_]\w*)\s*(?::.*)?\Z")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_header(line: str, names: frozenset[str]) -> bool:
    text = line.strip()
    return text.endswith(":") and text[:-1].strip().lower() in names


def _numpy_header(lines: list[str], index: int, names: frozenset[str]) -> bool:
    return (
        lines[index].strip().lower() in names
        and index + 1 < len(lines)
        and _UNDERLINE.match(lines[index + 1]) is not None
    )


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Split a docstring into the tool description and per-parameter descriptions.

    The description is the text before the first section (Google ``Args:``/``Returns:``...,
    numpy ``Parameters`` + underline, or reST ``:param x:`` fields); parameters are read from
    any of those three styles.
    """
    if not doc:
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    end = len(lines)
    for index, line in enumerate(lines):
        top_level = _indent(line) == 0
        if (
            (top_level and _google_header(line, _SECTIONS))
            or (top_level and _numpy_header(lines, index, _SECTIONS))
            or _REST_FIELD.match(line)
        ):
            end = index
            break
    description = "\n".join(lines[:end]).strip() or None
    params: dict[str, str] = {}
    _google_params(lines, params)
    _numpy_params(lines, params)
    _rest_params(lines, params)
    return description, {k: v for k, v in params.items() if v}


def _append(params: dict[str, str], name: str, text: str) -> None:
    params[name] = f"{params[name]} {text}".strip()


def _google_params(lines: list[str], params: dict[str, str]) -> None:
    index = 0
    while index < len(lines):
        if not _google_header(lines[index], _PARAM_SECTIONS):
            index += 1
            continue
        base = _indent(lines[index])
        index += 1
        entry_indent: int | None = None
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip():
                indent = _indent(line)
                if indent <= base:
                    break
                if entry_indent is None:
                    entry_indent = indent
                if indent <= entry_indent:
                    match = _GOOGLE_ENTRY.match(line.strip())
                    current = match[1] if match else None
                    if match:
                        params[match[1]] = match[2].strip()
                elif current is not None:
                    _append(params, current, line.strip())
            index += 1


def _numpy_params(lines: list[str], params: dict[str, str]) -> None:
    index = 0
    while index < len(lines):
        if not _numpy_header(lines, index, _PARAM_SECTIONS):
            index += 1
            continue
        base = _indent(lines[index])
        index += 2
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip():
                if _indent(line) <= base:
                    if _numpy_header(lines, index, _SECTIONS):
                        break
                    match = _NUMPY_ENTRY.match(line.strip())
                    current = match[1] if match else None
                    if current is not None:
                        params[current] = ""
                elif current is not None:
                    _append(params, current, line.strip())
            index += 1


def _rest_params(lines: list[str], params: dict[str, str]) -> None:
    current: str | None = None
    field_indent = 0
    for line in lines:
        match = _REST_PARAM.match(line)
        if match:
            current, field_indent = match[2], len(match[1])
            params[current] = match[3].strip()
        elif _REST_FIELD.match(line) or (line.strip() and _indent(line) <= field_indent):
            current = None
        elif current is not None and line.strip():
            _append(params, current, line.strip())
