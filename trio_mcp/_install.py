"""``trio-mcp install HOST SERVER_FILE``: add a server to an MCP host's JSON configuration.

The entry the host gets starts the server from any working directory: this interpreter (an
absolute path) with ``-m trio_mcp serve /absolute/server.py[:NAME]``, and the environment given
by ``--env KEY=VALUE`` and ``--env-file``. Every other entry and key of an existing
configuration is kept; an entry of the same name is replaced only with ``--force``; the file is
replaced atomically (a new file beside it, renamed over it), keeping its permissions.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson


class InstallError(Exception):
    """A bad request or a configuration we will not touch: one line, exit status 2."""


@attrs.frozen
class Host:
    """An MCP host with a JSON configuration file."""

    name: str
    title: str
    #: The object of the file that holds the servers, by name.
    key: str = "mcpServers"
    #: Whether its stdio entries carry ``"type": "stdio"``.
    typed: bool = False


HOSTS = {
    host.name: host
    for host in (
        Host("claude-desktop", "Claude Desktop"),
        Host("claude-code", "Claude Code (the project's .mcp.json)", typed=True),
        Host("cursor", "Cursor"),
        Host("vscode", "VS Code", key="servers", typed=True),
        Host("windsurf", "Windsurf"),
        Host("json", "any host with an mcpServers JSON file (give it with --config)"),
    )
}


def _user_config_dir(platform: str, environ: Mapping[str, str], home: Path) -> Path:
    """Where desktop applications keep their settings on ``platform``."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform == "win32":
        appdata = environ.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    xdg = environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def config_path(
    host: str,
    *,
    project: bool = False,
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
    home: Path | None = None,
    cwd: Path | None = None,
) -> Path:
    """The configuration file ``host`` documents, for this user (or, with ``project``, for the
    project in ``cwd``, where the host has one)."""
    home = home if home is not None else Path.home()
    cwd = cwd if cwd is not None else Path.cwd()
    if host == "claude-code":
        return cwd / ".mcp.json"  # project scope: the file Claude Code shares with a team
    if project:
        if host == "cursor":
            return cwd / ".cursor" / "mcp.json"
        if host == "vscode":
            return cwd / ".vscode" / "mcp.json"
        raise InstallError(f"{host} has no project configuration; leave out --project")
    if host == "claude-desktop":
        return _user_config_dir(platform, environ, home) / "Claude" / "claude_desktop_config.json"
    if host == "cursor":
        return home / ".cursor" / "mcp.json"
    if host == "vscode":
        return _user_config_dir(platform, environ, home) / "Code" / "User" / "mcp.json"
    if host == "windsurf":
        return home / ".codeium" / "windsurf" / "mcp_config.json"
    raise InstallError(f"{host} has no known configuration file: give one with --config PATH")


def server_spec(server_file: str) -> str:
    """``FILE.py[:NAME]`` with the file made absolute (it must exist)."""
    head, sep, tail = server_file.rpartition(":")
    location, attribute = (head, tail) if sep and head.endswith(".py") else (server_file, "")
    if not location.endswith(".py"):
        raise InstallError(
            f"SERVER_FILE must be a Python file (FILE.py[:NAME]), got {server_file!r}"
        )
    path = Path(location).expanduser().resolve()
    if not path.is_file():
        raise InstallError(f"no such file: {location!r}")
    if attribute and not attribute.isidentifier():
        raise InstallError(f"{attribute!r} is not a Python name")
    return f"{path}:{attribute}" if attribute else str(path)


def parse_env(pairs: Sequence[str], files: Sequence[str]) -> dict[str, str]:
    """The environment of ``--env-file`` files (in order), then ``--env KEY=VALUE`` pairs."""
    env: dict[str, str] = {}
    for file in files:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise InstallError(f"cannot read --env-file {file!r}: {exc.strerror}") from None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            line = line.removeprefix("export ").lstrip()
            key, sep, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key.isidentifier():
                raise InstallError(f"{file}:{number}: expected KEY=VALUE, got {raw.strip()!r}")
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[key] = value
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise InstallError(f"--env expects KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def uv_launcher(uv: str, dependencies: Sequence[str] = ()) -> list[str]:
    """``uv run --with trio-mcp [--with DEP ...] trio-mcp``: an entry that uv starts in an
    environment it makes (and caches) with trio-mcp and the server's dependencies, so that the
    host needs no virtualenv of ours."""
    withs = [word for dependency in ("trio-mcp", *dependencies) for word in ("--with", dependency)]
    return [uv, "run", *withs, "trio-mcp"]


def entry(
    host: Host, spec: str, env: Mapping[str, str], launcher: Sequence[str] | None = None
) -> dict[str, Any]:
    """The host's entry that starts ``spec`` over stdio: with ``launcher`` (the words that run
    ``trio-mcp``, say :func:`uv_launcher`'s) or else this interpreter."""
    made: dict[str, Any] = {"type": "stdio"} if host.typed else {}
    if launcher:
        made["command"] = launcher[0]
        made["args"] = [*launcher[1:], "serve", spec]
    else:
        made["command"] = sys.executable
        made["args"] = ["-m", "trio_mcp", "serve", spec]
    if env:
        made["env"] = dict(env)
    return made


def _read(path: Path) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InstallError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    if not data.strip():
        return {}
    try:
        config = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InstallError(
            f"{str(path)!r} is not plain JSON ({exc}); it is left as it is: add the entry "
            "by hand (--dry-run prints it)"
        ) from None
    if not isinstance(config, dict):
        raise InstallError(f"{str(path)!r} holds no JSON object; it is left as it is")
    return config


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename: a reader sees the old file or the new one,
    never a part; an existing file's permissions are kept (a new one is the user's alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600  # it may hold the secrets of --env
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@attrs.frozen
class Installed:
    path: Path
    name: str
    entry: dict[str, Any]
    #: "added", "replaced", "unchanged" or "dry-run".
    outcome: str
    #: What would be written (the entry alone, under the host's key), for a dry run.
    snippet: dict[str, Any]


def install(
    host_name: str,
    server_file: str,
    *,
    name: str | None = None,
    env: Mapping[str, str] | None = None,
    config: str | Path | None = None,
    project: bool = False,
    force: bool = False,
    dry_run: bool = False,
    launcher: Sequence[str] | None = None,
) -> Installed:
    """Add (or with ``force`` replace) the entry of ``server_file`` in ``host_name``'s
    configuration; raises :class:`InstallError`."""
    host = HOSTS.get(host_name)
    if host is None:
        raise InstallError(f"unknown host {host_name!r}: one of {', '.join(HOSTS)}")
    spec = server_spec(server_file)
    if name is None:
        location, _, attribute = spec.partition(":")
        name = attribute if attribute else Path(location).stem
    if not name.strip():
        raise InstallError("--name is empty")
    path = (
        Path(config).expanduser() if config is not None else config_path(host.name, project=project)
    )
    made = entry(host, spec, env or {}, launcher)
    snippet = {host.key: {name: made}}
    current = _read(path)
    servers = current.get(host.key, {})
    if not isinstance(servers, dict):
        raise InstallError(f"{str(path)!r}: {host.key!r} is not a JSON object; it is left as it is")
    if dry_run:
        return Installed(path, name, made, "dry-run", snippet)
    if servers.get(name) == made:
        return Installed(path, name, made, "unchanged", snippet)
    if name in servers and not force:
        raise InstallError(
            f"{str(path)!r} has a server named {name!r} already: --force replaces it, "
            "--name installs under another name"
        )
    outcome = "replaced" if name in servers else "added"
    updated = {**current, host.key: {**servers, name: made}}
    write_atomically(path, orjson.dumps(updated, option=orjson.OPT_INDENT_2) + b"\n")
    return Installed(path, name, made, outcome, snippet)
