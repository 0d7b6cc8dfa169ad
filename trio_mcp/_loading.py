"""What a server file or module names: the :class:`Server` that ``serve`` loads, and the
command line that serves a server file over stdio (a client command's TARGET, ``install``,
``dev``)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ._settings import UsageError
from .server import Server

#: The names a server is looked up by in a module, when the target names none.
SERVER_NAMES = ("server", "mcp", "app")


def split_target(spec: str) -> tuple[str, str | None]:
    """``path/x.py:attr`` or ``module:attr`` into its module part and attribute (if any)."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail and head and "/" not in tail and "\\" not in tail:
        return head, tail
    return spec, None


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise UsageError(f"no such file: {str(path)!r}")
    directory = str(path.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file can import its neighbours
    name = path.stem
    if not name.isidentifier() or name in sys.modules:  # never replace a loaded module
        name = "_trio_mcp_served"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from None
    return module


def _import_module(name: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"cannot import {name!r}: {exc}") from None
    except Exception as exc:
        raise UsageError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _find_server(module: ModuleType, where: str) -> Server:
    servers = {name: v for name, v in vars(module).items() if isinstance(v, Server)}
    distinct = {id(v): v for v in servers.values()}
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    for name in SERVER_NAMES:
        if name in servers:
            return servers[name]
    if not servers:
        raise UsageError(f"{where} defines no trio_mcp.Server; name one with {where}:ATTRIBUTE")
    names = ", ".join(sorted(servers))
    raise UsageError(f"{where} defines several servers ({names}); pick one with {where}:NAME")


def load_server(spec: str) -> Server:
    """The Server that ``spec`` names.

    ``spec`` is a file (``./x.py``, ``/abs/x.py``) or an importable module (the current
    directory is importable), optionally followed by ``:attribute``. Without one, the module's
    only Server is taken, else the one called ``server``, ``mcp`` or ``app``. The attribute may
    also be a function returning a Server. A bad spec raises :class:`UsageError`.
    """
    location, attribute = split_target(spec)
    if not location:
        raise UsageError(f"expected FILE.py[:attribute] or module[:attribute], got {spec!r}")
    is_file = location.endswith(".py") or os.sep in location or "/" in location
    module = _import_file(Path(location).resolve()) if is_file else _import_module(location)
    if attribute is None:
        return _find_server(module, location)
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        raise UsageError(f"{location!r} has no attribute {attribute!r}") from None
    if callable(value) and not isinstance(value, Server):
        value = value()
    if not isinstance(value, Server):
        raise UsageError(f"{spec!r} is a {type(value).__name__}, not a trio_mcp.Server")
    return value


def serve_command(spec: str) -> list[str] | None:
    """``FILE.py[:attribute]`` as the command that serves it over stdio from any directory
    (this interpreter, ``-m trio_mcp serve`` and the file's absolute path); None when ``spec``
    names no Python file."""
    location, attribute = split_target(spec)
    if not location.endswith(".py"):
        return None
    path = Path(location).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"no such file: {location!r}")
    served = f"{path}:{attribute}" if attribute else str(path)
    return [sys.executable, "-m", "trio_mcp", "serve", served]


def target_of(text: str) -> list[str] | str:
    """A client command's TARGET: a URL as it is, a server file as the command that serves it,
    else the command line of a server to spawn (one shell-quoted string)."""
    if text.strip().lower().startswith(("http://", "https://", "ws://", "wss://")):
        return text.strip()
    command = shlex.split(text)
    if not command:
        raise UsageError("TARGET is empty")
    if len(command) == 1 and (served := serve_command(command[0])) is not None:
        return served  # a server file: served by this interpreter over stdio
    return command
