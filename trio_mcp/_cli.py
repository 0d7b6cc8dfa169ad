"""The ``trio-mcp`` command: serve a server over stdio, or drive one from the shell.

    trio-mcp demo                          serve the built-in demo server over stdio
    trio-mcp serve package.module:server   serve any Server object over stdio
    trio-mcp tools TARGET [--json]         list a server's tools
    trio-mcp call TARGET TOOL [JSON]       call a tool (Ctrl-C cancels it on the wire)

TARGET is the command line of a server to spawn, as one shell-quoted string, or the URL of a
Streamable HTTP endpoint (http:// or https://).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any

import orjson
import trio

from .client import Client, open_client
from .protocol._errors import MCPError
from .protocol._types import to_wire
from .server import Server

EXIT_INTERRUPTED = 130


def load_server(spec: str) -> Server:
    """Import ``module:attribute`` (the current directory is importable) and return the Server.

    The attribute may also be a function returning a Server.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"trio-mcp: expected module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemExit(f"trio-mcp: cannot import {module_name!r}: {exc}") from None
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        raise SystemExit(f"trio-mcp: {module_name!r} has no attribute {attribute!r}") from None
    if callable(value) and not isinstance(value, Server):
        value = value()
    if not isinstance(value, Server):
        raise SystemExit(f"trio-mcp: {spec!r} is a {type(value).__name__}, not a trio_mcp.Server")
    return value


def _target(text: str) -> list[str] | str:
    if text.strip().lower().startswith(("http://", "https://")):
        return text.strip()
    command = shlex.split(text)
    if not command:
        raise SystemExit("trio-mcp: TARGET is empty")
    return command


def _print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


async def _list_tools(client: Client, as_json: bool) -> None:
    tools = await client.list_tools()
    if as_json:
        _print_json([to_wire(tool) for tool in tools])
        return
    for tool in tools:
        params = ", ".join(tool.input_schema.get("properties", {}))
        description = (tool.description or "").strip().splitlines()
        line = f"{tool.name}({params})"
        print(f"{line}  {description[0]}" if description else line)


def _show_progress(progress: float, total: float | None, message: str | None) -> None:
    amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
    sys.stderr.write(f"\rprogress {amount}{'  ' + message if message else ''}\033[K")
    sys.stderr.flush()


async def _call_tool(client: Client, tool: str, arguments: dict[str, Any], as_json: bool) -> int:
    result = await client.call_tool(tool, arguments, on_progress=_show_progress)
    sys.stderr.write("\r\033[K")
    if as_json:
        _print_json(to_wire(result))
    else:
        # A tool error (isError) is the tool's own output, but a failure: it goes to stderr, so
        # a shell that captures stdout never mistakes it for a result.
        out = sys.stderr if result.is_error else sys.stdout
        for block in result.content:
            text = getattr(block, "text", None)
            print(text if text is not None else orjson.dumps(to_wire(block)).decode(), file=out)
    return 1 if result.is_error else 0


async def _drive(command: list[str] | str, action: str, args: argparse.Namespace) -> int:
    """Run one client action, cancelled on the wire by Ctrl-C."""
    interrupted = False
    code = 0
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with open_client(command) as client, trio.open_nursery() as nursery:

            async def on_interrupt() -> None:
                nonlocal interrupted
                async for _ in signals:
                    interrupted = True
                    nursery.cancel_scope.cancel()
                    return

            async def run() -> None:
                nonlocal code
                if action == "tools":
                    await _list_tools(client, args.json)
                else:
                    code = await _call_tool(client, args.tool, args.arguments, args.json)
                nursery.cancel_scope.cancel()

            nursery.start_soon(on_interrupt)
            nursery.start_soon(run)
    if interrupted:
        sys.stderr.write("\rcancelled\033[K\n")
        return EXIT_INTERRUPTED
    return code


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SystemExit(f"trio-mcp: the tool arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit("trio-mcp: the tool arguments must be a JSON object")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-mcp", description="Serve or drive Model Context Protocol servers."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="serve the built-in demo server")
    serve = commands.add_parser("serve", help="serve a Server object")
    serve.add_argument("server", help="module:attribute naming a trio_mcp.Server")
    for served in (demo, serve):
        served.add_argument(
            "--transport", choices=["stdio", "http"], default="stdio", help="default: stdio"
        )
        served.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
        served.add_argument("--port", type=int, default=8000, help="HTTP port (0: any free)")
        served.add_argument(
            "--allowed-host",
            action="append",
            metavar="HOST",
            help="HTTP: accept this Host header (host or host:port; repeatable); default: "
            "loopback names for requests arriving on loopback, any name otherwise",
        )
        served.add_argument(
            "--allowed-origin",
            action="append",
            metavar="ORIGIN",
            help="HTTP: accept this Origin header (repeatable; * for any); default: loopback "
            "origins for requests arriving on loopback, any origin otherwise",
        )
    tools = commands.add_parser("tools", help="list the tools of a server")
    tools.add_argument("target", help="the server's command line (one quoted string) or URL")
    tools.add_argument("--json", action="store_true", help="print JSON")
    call = commands.add_parser("call", help="call a tool")
    call.add_argument("target", help="the server's command line (one quoted string) or URL")
    call.add_argument("tool", help="the tool's name")
    call.add_argument("arguments", nargs="?", default="{}", type=_arguments, help="JSON object")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("demo", "serve"):
        if args.command == "demo":
            from ._demo import demo_server

            server = demo_server()
        else:
            server = load_server(args.server)
        if args.transport == "stdio":
            trio.run(server.serve_stdio)
            return 0
        from .server._http_app import HttpOptions
        from .server._hypercorn import serve_http

        options = HttpOptions(allowed_hosts=args.allowed_host, allowed_origins=args.allowed_origin)

        def ready(binds: list[str]) -> None:
            sys.stderr.write("".join(f"serving MCP at {b}/mcp\n" for b in binds))
            sys.stderr.flush()

        trio.run(
            lambda: serve_http(
                server, host=args.host, port=args.port, options=options, on_ready=ready
            )
        )
        return 0
    try:
        return trio.run(_drive, _target(args.target), args.command, args)
    except MCPError as exc:
        sys.stderr.write(f"\ntrio-mcp: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"trio-mcp: cannot start {args.target!r}: {exc}\n")
        return 1
