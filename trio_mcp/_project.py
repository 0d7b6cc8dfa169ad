"""The project file: ``trio-mcp.toml``, or ``[tool.trio-mcp]`` of ``pyproject.toml``, in the
current folder. It names the server (``server = "app.py[:name]"``) and holds any setting of
``trio-mcp serve`` under its flag's name without ``--``; ``serve``, ``dev``, ``install`` and
``card`` read it when no server is given on the command line (docs/cli.md)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import attrs

#: The file of its own; ``pyproject.toml``'s table is read when it is absent.
PROJECT_FILE = "trio-mcp.toml"


class ProjectError(Exception):
    """A project file that cannot be read or holds what we do not know: one line."""


@attrs.frozen
class Project:
    #: The file it was read from.
    path: Path
    #: Its keys and values, as written.
    table: dict[str, Any]

    @property
    def folder(self) -> Path:
        return self.path.parent

    def server(self) -> str | None:
        """``server`` with a file made absolute (relative to the project file's folder)."""
        value = self.table.get("server")
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ProjectError(f"{self.path}: server must be a string, FILE.py[:NAME]")
        head, sep, tail = value.rpartition(":")
        location, attribute = (head, sep + tail) if sep and head.endswith(".py") else (value, "")
        if location.endswith(".py"):
            location = str((self.folder / location).resolve())
        return location + attribute

    def strings(self, key: str) -> list[str]:
        """A list of strings (``dependencies``), empty when absent."""
        value = self.table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ProjectError(f"{self.path}: {key} must be a list of strings")
        return value


def _load(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ProjectError(f"cannot read {path}: {exc.strerror}") from None


def find_project(folder: Path, known: frozenset[str]) -> Project | None:
    """The project file of ``folder``, its keys checked against ``known``; None without one."""
    path = folder / PROJECT_FILE
    if path.is_file():
        table = _load(path)
        where = path
    else:
        path = folder / "pyproject.toml"
        if not path.is_file():
            return None
        table = _load(path).get("tool", {}).get("trio-mcp")
        if table is None:
            return None
        where = path
        if not isinstance(table, dict):
            raise ProjectError(f"{path}: [tool.trio-mcp] must be a table")
    for key in table:
        if key not in known:
            raise ProjectError(f"{where}: unknown key {key!r} (the keys are serve's flag names)")
    return Project(where.absolute(), table)
