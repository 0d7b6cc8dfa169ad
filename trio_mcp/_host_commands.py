"""``install``, ``dev`` and ``card``: a server file handed to an MCP host's configuration, to the
MCP Inspector, or described for a registry; their options and what each runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._client_commands import print_json
from ._loading import load_server, serve_command
from ._settings import UsageError


def _add_server_file(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "server_file",
        metavar="SERVER_FILE",
        nargs="?",
        help="FILE.py[:NAME] (default: the project file's server)",
    )


def _add_server_env(command: argparse.ArgumentParser) -> None:
    """The server's environment (``install`` writes it into the entry, ``dev`` starts the
    server with it): ``--env-file`` lines, then ``--env`` pairs over them."""
    command.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the server (repeatable; after --env-file)",
    )
    command.add_argument(
        "--env-file",
        action="append",
        default=[],
        metavar="PATH",
        help="KEY=VALUE lines (# comments, optional quotes) for the server's environment",
    )


def add_install(commands: Any) -> None:
    from ._install import HOSTS

    install = commands.add_parser(
        "install",
        help="add a server file to an MCP host's configuration",
        description="Add SERVER_FILE to HOST's JSON configuration, as an entry that starts it "
        "with this interpreter from any directory. Hosts: "
        + "; ".join(f"{host.name}: {host.title}" for host in HOSTS.values()),
    )
    install.add_argument("host", choices=list(HOSTS), metavar="HOST", help=", ".join(HOSTS))
    _add_server_file(install)
    install.add_argument("--name", help="the entry's name (default: NAME, else the file's stem)")
    _add_server_env(install)
    install.add_argument(
        "--config", metavar="PATH", help="the configuration file (default: where HOST keeps it)"
    )
    install.add_argument(
        "--project",
        action="store_true",
        help="cursor, vscode: the project's file in this directory (.cursor/mcp.json, "
        ".vscode/mcp.json) instead of the user's",
    )
    install.add_argument("--force", action="store_true", help="replace an entry of the same name")
    install.add_argument(
        "--no-check",
        action="store_true",
        help="write the entry without first loading the server (by default a file that does "
        "not import, or names no Server, is refused)",
    )
    install.add_argument(
        "--dry-run", action="store_true", help="print the entry as JSON; write nothing"
    )
    install.add_argument(
        "--no-uv",
        action="store_true",
        help="start the server with this interpreter even when uv is on PATH (by default the "
        "entry runs `uv run --with trio-mcp ...` when it is, with the project file's "
        "dependencies)",
    )


def add_dev(commands: Any) -> None:
    dev = commands.add_parser(
        "dev",
        help="open a server file in the MCP Inspector (a web UI; needs Node.js 22)",
        description="Start the MCP Inspector 2.x on 127.0.0.1 with SERVER_FILE as its server "
        "(spawned over stdio at each connection) and print the URL to open. The Inspector and "
        "Node.js 22.19+ are found in node_modules here or above (npm install "
        "@modelcontextprotocol/inspector@2.12.0), or given with --inspector / --node.",
    )
    _add_server_file(dev)
    dev.add_argument(
        "--port", type=int, default=6274, help="the Inspector's page port (default: 6274)"
    )
    dev.add_argument(
        "--sandbox-port",
        type=int,
        metavar="PORT",
        help="the port of the Inspector's MCP Apps sandbox (default: the Inspector's, 6275)",
    )
    dev.add_argument(
        "--no-browser", action="store_true", help="print the URL only; open no browser"
    )
    _add_server_env(dev)
    dev.add_argument("--node", metavar="PATH", help="the Node.js to run the Inspector with")
    dev.add_argument("--inspector", metavar="PATH", help="the Inspector's package directory")


def run_dev(args: argparse.Namespace) -> int:
    from ._dev import DevError, find_inspector, find_node, launch, run
    from ._install import InstallError, parse_env

    served = serve_command(args.server_file)
    if served is None:
        raise UsageError(
            f"SERVER_FILE must be a Python file (FILE.py[:NAME]), got {args.server_file!r}"
        )
    try:
        env = parse_env(args.env, args.env_file)
        cwd = Path.cwd()
        started = launch(
            find_node(args.node, cwd),
            find_inspector(args.inspector, cwd),
            served,
            port=args.port,
            sandbox_port=args.sandbox_port,
            open_browser=not args.no_browser,
            server_env=env,
        )
    except (DevError, InstallError) as exc:
        raise UsageError(str(exc)) from None
    return run(started)


def _check_entry(spec: str, env: dict[str, str]) -> None:
    """Load the server an entry names, as ``serve`` will, in the entry's environment: a file
    that does not import, or names no Server, is said now rather than by the host later."""
    from contextlib import redirect_stdout

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with redirect_stdout(sys.stderr):  # a print() of the server file is not our output
            load_server(spec)
    except UsageError as exc:
        raise UsageError(
            f"{exc}; nothing written (--no-check installs without loading the server)"
        ) from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def run_install(args: argparse.Namespace) -> int:
    from ._install import InstallError, install, parse_env, server_spec

    try:
        launcher = _install_launcher(args)
        env = parse_env(args.env, args.env_file)
        if not args.no_check:
            _check_entry(server_spec(args.server_file), env)
        done = install(
            args.host,
            args.server_file,
            name=args.name,
            env=env,
            config=args.config,
            project=args.project,
            force=args.force,
            dry_run=args.dry_run,
            launcher=launcher,
        )
    except InstallError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        sys.stderr.write(f"trio-mcp: cannot write the configuration: {exc}\n")
        return 1
    if done.outcome == "dry-run":
        print_json(done.snippet)
        sys.stderr.write(f"trio-mcp: would write {done.name!r} to {done.path} (dry run)\n")
    elif done.outcome == "unchanged":
        sys.stderr.write(f"trio-mcp: {done.name!r} is in {done.path} already, unchanged\n")
    else:
        sys.stderr.write(f"trio-mcp: {done.outcome} {done.name!r} in {done.path}\n")
    return 0


def _install_launcher(args: argparse.Namespace) -> list[str] | None:
    """The words that start ``trio-mcp`` in the entry: uv's, when it is on PATH (and not
    ``--no-uv``), with the project file's ``dependencies``; else None (this interpreter)."""
    import shutil

    from ._install import uv_launcher

    uv = None if args.no_uv else shutil.which("uv")
    dependencies = getattr(args, "dependencies", [])
    if uv is None:
        if dependencies and not args.no_uv:
            sys.stderr.write(
                "trio-mcp: uv is not on PATH: the entry runs this interpreter, which must "
                "have the project file's dependencies\n"
            )
        return None
    return uv_launcher(uv, dependencies)


def add_card(commands: Any) -> None:
    card = commands.add_parser(
        "card",
        help="print a server's Server Card (or its MCP Registry server.json)",
        description="Print the Server Card (SEP-2127) of a server file or module: its name, "
        "version, description, remotes, and under _meta what it offers (tools, prompts, "
        "resources, templates), the extensions it declares and the authorization it needs. "
        "With --registry, the MCP Registry's server.json instead. Nothing is served.",
    )
    card.add_argument(
        "server",
        nargs="?",
        help="FILE.py or package.module, optionally :attribute (default: the project file's)",
    )
    card.add_argument(
        "--registry",
        action="store_true",
        help="print the MCP Registry's server.json (release 2025-12-11) instead of the card",
    )
    card.add_argument(
        "--name",
        help="the registry name, NAMESPACE/NAME in reverse-DNS form (io.github.you/weather); "
        "default: the server's name, if it is one",
    )
    card.add_argument(
        "--description",
        help="at most 100 characters (default: the server's description, else the first line "
        "of its instructions)",
    )
    card.add_argument(
        "--url",
        help="the public URL of its Streamable HTTP endpoint (default: Auth.resource of a "
        "protected server, else no remote)",
    )
    card.add_argument("--sse-url", help="the public URL of its HTTP+SSE event stream, if served")
    card.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="REGISTRY:IDENTIFIER[==VERSION]",
        help="--registry: a package that runs the server over stdio (pypi:my-server; "
        "repeatable); VERSION defaults to the server's",
    )


def run_card(args: argparse.Namespace) -> int:
    from contextlib import redirect_stdout

    from .server import ServerCardError, server_card, server_json

    if args.package and not args.registry:
        raise UsageError("--package is for --registry (a Server Card lists no packages)")
    with redirect_stdout(sys.stderr):  # a print() of the server file must not corrupt the JSON
        server = load_server(args.server)
    packages = [_package(spec, server.info.version) for spec in args.package]
    try:
        if args.registry:
            document = server_json(
                server,
                name=args.name,
                description=args.description,
                url=args.url,
                sse_url=args.sse_url,
                packages=packages,
            )
        else:
            document = server_card(
                server,
                name=args.name,
                description=args.description,
                url=args.url,
                sse_url=args.sse_url,
            )
    except ServerCardError as exc:
        raise UsageError(str(exc)) from None
    print_json(document)
    if "remotes" not in document and not packages:
        sys.stderr.write(
            "trio-mcp: no remote listed: give the public URL of its endpoint with --url\n"
        )
    return 0


def _package(spec: str, version: str) -> dict[str, Any]:
    registry, sep, identifier = spec.partition(":")
    identifier, _, pinned = identifier.partition("==")
    if not sep or not registry or not identifier or any(c.isspace() for c in spec):
        raise UsageError(f"--package wants REGISTRY:IDENTIFIER[==VERSION], got {spec!r}")
    return {
        "registryType": registry,
        "identifier": identifier,
        "version": pinned or version,
        "transport": {"type": "stdio"},
    }
