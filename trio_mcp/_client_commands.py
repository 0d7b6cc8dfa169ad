"""What the client commands do (``trio-mcp call``, ``list``, ``read``, ``prompt``, ``skills``,
``login``, ``logout`` and the others): a client opened from the command line on its TARGET,
driving the server there, and what it prints.

``_cli.py`` parses the command line and turns the TARGET into a command or a URL; everything
after that is here: the arguments typed by the tool's input schema, the output (text, or
JSON with ``--json``; progress on a terminal), OAuth for a server that asks for it, and the
tokens ``logout`` forgets.
"""

from __future__ import annotations

import argparse
import base64
import math
import mimetypes
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import orjson
import trio

from ._settings import EXIT_INTERRUPTED, UsageError, secret_from
from ._terminal import TerminalAnswers
from .client import Client, HttpTarget, Target, WebSocketTarget, open_client
from .client._redirect import LoopbackReceiver, open_browser
from .protocol._errors import MCPError
from .protocol._types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    LoggingMessageNotificationParams,
    TextResourceContents,
    to_wire,
)

if TYPE_CHECKING:
    from .client import OAuth

#: Where ``login --client-id`` finds its client's secret, unless ``--client-secret-env``.
LOGIN_SECRET_ENV = "TRIO_MCP_CLIENT_SECRET"


def _headers(values: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header expects NAME:VALUE, got {value!r}")
        headers[name.strip()] = content.strip()
    return headers


def print_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _typed(value: str, schema: Any) -> Any:
    """A ``key=value`` value as the property's schema types it (a string unless told)."""
    if not isinstance(schema, dict):
        return _json_or_text(value)
    kinds = schema.get("type")
    if kinds is None and isinstance(schema.get("anyOf"), list):
        kinds = [option.get("type") for option in schema["anyOf"] if isinstance(option, dict)]
    if isinstance(kinds, str):
        kinds = [kinds]
    if not kinds:
        return _json_or_text(value)
    if "string" in kinds and not ({"integer", "number", "boolean", "array", "object"} & set(kinds)):
        return value
    parsed = _json_or_text(value)
    matches = {
        "integer": isinstance(parsed, int) and not isinstance(parsed, bool),
        "number": isinstance(parsed, int | float) and not isinstance(parsed, bool),
        "boolean": isinstance(parsed, bool),
        "array": isinstance(parsed, list),
        "object": isinstance(parsed, dict),
        "null": parsed is None,
    }
    if any(matches.get(kind, False) for kind in kinds):
        return parsed
    return value  # as written: the server's validation says what is wrong with it


def _arguments(words: Sequence[str], schema: dict[str, Any] | None) -> dict[str, Any]:
    """One JSON object, or ``key=value`` pairs typed by ``schema`` (strings without one)."""
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            value = orjson.loads(words[0])
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise UsageError("the arguments must be a JSON object")
        return value
    properties = (schema or {}).get("properties", {})
    arguments: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"expected key=value or one JSON object, got {word!r}")
        arguments[key] = value if schema is None else _typed(value, properties.get(key))
    return arguments


CLEAR_LINE = "\r\033[K"
#: Types ``mimetypes`` may not know (it depends on the platform's tables).
_EXTENSIONS = {
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "audio/webm": ".webm",
    "image/webp": ".webp",
    "image/png": ".png",
    "image/jpeg": ".jpg",
}


class Output:
    """Where the commands write: stdout for results, stderr for progress, logs and failures."""

    def __init__(self, save_dir: str | None) -> None:
        self.terminal = sys.stderr.isatty()
        self._save_dir = save_dir
        self._saved = 0
        self._progress_shown = False

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        text = f"progress {amount}{'  ' + message if message else ''}"
        if self.terminal:
            sys.stderr.write(f"\r{text}\033[K")
            self._progress_shown = True
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def end_progress(self) -> None:
        if self._progress_shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._progress_shown = False

    def note(self, text: str) -> None:
        """One line on stderr, on a line of its own even while progress is shown."""
        self.end_progress()
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def log(self, message: LoggingMessageNotificationParams) -> None:
        data = message.data if isinstance(message.data, str) else orjson.dumps(message.data)
        text = data if isinstance(data, str) else data.decode()
        source = f" {message.logger}" if message.logger else ""
        self.note(f"[{message.level}{source}] {text}")

    def save(self, data: str, mime_type: str | None, stem: str) -> str:
        """Decode base64 ``data`` into a new file; its path."""
        if self._save_dir is None:
            self._save_dir = tempfile.mkdtemp(prefix="trio-mcp-")
        directory = Path(self._save_dir)
        directory.mkdir(parents=True, exist_ok=True)
        base = (mime_type or "").split(";")[0].strip().lower()
        extension = _EXTENSIONS.get(base) or mimetypes.guess_extension(base) or ".bin"
        self._saved += 1
        path = directory / f"{stem}-{self._saved}{extension}"
        try:
            path.write_bytes(base64.b64decode(data, validate=True))
        except ValueError:
            raise MCPError(f"the server sent {stem} data that is not base64") from None
        return str(path)

    def contents(self, item: Any) -> str:
        """A content block or resource contents, as a line of text (binary saved to a file)."""
        if isinstance(item, ImageContent | AudioContent):
            path = self.save(item.data, item.mime_type, item.type)
            return f"{item.type} ({item.mime_type}) saved to {path}"
        if isinstance(item, EmbeddedResource):
            return self.contents(item.resource)
        if isinstance(item, TextResourceContents):
            return item.text
        if isinstance(item, BlobResourceContents):
            path = self.save(item.blob, item.mime_type, "resource")
            return f"{item.uri} ({item.mime_type or 'binary'}) saved to {path}"
        text = getattr(item, "text", None)
        return text if isinstance(text, str) else orjson.dumps(to_wire(item)).decode()


def _type_of(schema: Any) -> str:
    """A property's schema as a short type: ``integer``, ``string|null``, ``"a"|"b"``,
    ``string[]``; ``any`` when it says nothing."""
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list):
        return "|".join(orjson.dumps(v).decode() for v in schema["enum"][:6]) + (
            "|..." if len(schema["enum"]) > 6 else ""
        )
    if "const" in schema:
        return orjson.dumps(schema["const"]).decode()
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return "|".join(str(k) for k in kinds)
    if kinds == "array":
        items = _type_of(schema.get("items")) if "items" in schema else "any"
        return f"({items})[]" if "|" in items else f"{items}[]"
    if isinstance(kinds, str):
        return kinds
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return "|".join(dict.fromkeys(_type_of(option) for option in options))
    return "object" if "properties" in schema else "any"


def _parameters(schema: dict[str, Any]) -> str:
    """A tool's parameters as ``name: type``, the optional ones in brackets."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ""
    required = set(schema.get("required") or ())
    shown = [f"{name}: {_type_of(value)}" for name, value in properties.items()]
    return ", ".join(
        text if name in required else f"[{text}]"
        for name, text in zip(properties, shown, strict=True)
    )


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def _listing(head: str, description: str | None) -> str:
    first = _first_line(description)
    return f"{head}  {first}" if first else head


async def _list(client: Client, what: str, as_json: bool) -> int:
    capability = "resources" if what == "templates" else what
    if getattr(client.server_capabilities, capability) is None:
        # Nothing to list, and asking would only fetch "Method not found".
        if as_json:
            print_json([])
        else:
            sys.stderr.write(f"trio-mcp: the server offers no {capability}\n")
        return 0
    if what == "tools":
        tools = await client.list_tools()
        if as_json:
            print_json([to_wire(t) for t in tools])
        for tool in [] if as_json else tools:
            print(_listing(f"{tool.name}({_parameters(tool.input_schema)})", tool.description))
    elif what == "resources":
        resources = await client.list_resources()
        if as_json:
            print_json([to_wire(r) for r in resources])
        for resource in [] if as_json else resources:
            print(_listing(resource.uri, resource.description or resource.name))
    elif what == "templates":
        templates = await client.list_resource_templates()
        if as_json:
            print_json([to_wire(t) for t in templates])
        for template in [] if as_json else templates:
            print(_listing(template.uri_template, template.description or template.name))
    else:
        prompts = await client.list_prompts()
        if as_json:
            print_json([to_wire(p) for p in prompts])
        for prompt in [] if as_json else prompts:
            params = ", ".join(
                a.name if a.required else f"[{a.name}]" for a in prompt.arguments or []
            )
            print(_listing(f"{prompt.name}({params})", prompt.description))
    return 0


async def _call_tool(client: Client, args: argparse.Namespace, out: Output) -> int:
    schema: dict[str, Any] | None = None
    if args.arguments and not args.arguments[0].lstrip().startswith("{"):
        tools = {tool.name: tool for tool in await client.list_tools()}
        if args.tool in tools:
            schema = tools[args.tool].input_schema
    arguments = _arguments(args.arguments, schema if schema is not None else {})
    result = await client.call_tool(args.tool, arguments, on_progress=out.progress)
    out.end_progress()
    if args.json:
        print_json(to_wire(result))
        return 1 if result.is_error else 0
    # A tool error (isError) is the tool's own output, but a failure: it goes to stderr, so a
    # shell that captures stdout never mistakes it for a result.
    stream = sys.stderr if result.is_error else sys.stdout
    for block in result.content:
        print(out.contents(block), file=stream)
    return 1 if result.is_error else 0


async def _read(client: Client, args: argparse.Namespace, out: Output) -> int:
    result = await client.read_resource(args.uri)
    if args.json:
        print_json(to_wire(result))
        return 0
    for contents in result.contents:
        print(out.contents(contents))
    return 0


async def _get_prompt(client: Client, args: argparse.Namespace, out: Output) -> int:
    arguments = _arguments(args.arguments, None)
    prompt_arguments = {
        key: value if isinstance(value, str) else orjson.dumps(value).decode()
        for key, value in arguments.items()
    }
    result = await client.get_prompt(args.name, prompt_arguments)
    if args.json:
        print_json(to_wire(result))
        return 0
    for message in result.messages:
        print(f"{message.role}: {out.contents(message.content)}")
    return 0


async def _run_action(client: Client, args: argparse.Namespace, out: Output) -> int:
    if client.server_capabilities.logging is not None:
        await client.set_logging_level(args.log_level)
    if args.command == "inspect":
        from . import _inspect

        found = await _inspect.report(client)
        if args.json:
            print_json(found)
        else:
            sys.stdout.write(_inspect.as_text(found))
        return 0
    if args.command in ("tools", "resources", "templates", "prompts"):
        return await _list(client, args.command, args.json)
    if args.command == "call":
        return await _call_tool(client, args, out)
    if args.command == "read":
        return await _read(client, args, out)
    if args.command == "skills":
        return await _skills(client, args)
    return await _get_prompt(client, args, out)


async def _skills(client: Client, args: argparse.Namespace) -> int:
    from .skills import SkillsClient, SkillVerificationError

    skills = SkillsClient(client)
    if not skills.supported:
        raise MCPError("the server does not declare the skills extension")
    if args.get is not None:
        try:
            text = await skills.read_skill(args.get)
        except SkillVerificationError as exc:
            raise MCPError(f"refused ({exc.reason}): {exc}") from None
        if args.json:
            print_json({"uri": (await skills.find(args.get)).uri, "text": text})
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    entries = await skills.list_skills()
    if args.json:
        print_json([{"uri": e.uri, "frontmatter": dict(e.frontmatter)} for e in entries])
    for entry in [] if args.json else entries:
        print(_listing(entry.path, entry.description))
    for refused in skills.invalid:
        sys.stderr.write(f"trio-mcp: not listed: {refused}\n")
    return 0


def token_dir() -> Path:
    """Where the CLI keeps its OAuth tokens and client registrations: ``TRIO_MCP_TOKEN_DIR``,
    else ``trio-mcp/tokens`` under the user's configuration directory."""
    configured = os.environ.get("TRIO_MCP_TOKEN_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "trio-mcp" / "tokens"


def logout(args: argparse.Namespace) -> int:
    """Forget what ``login`` (or any command's sign-in) kept: one server's tokens, or with
    ``--all`` every token and client registration in :func:`token_dir`."""
    from .client import FileTokenStore
    from .protocol._oauth import canonical_resource

    directory = token_dir()
    if args.all:
        if args.target is not None:
            raise UsageError("logout takes a server URL or --all, not both")
        kept = [
            path
            for path in (directory.glob("*.json") if directory.is_dir() else ())
            if path.name.startswith(("server-", "client-"))
        ]
        for path in kept:
            path.unlink(missing_ok=True)
        sys.stderr.write(f"trio-mcp: signed out of every server ({len(kept)} files removed)\n")
        return 0
    url = args.target
    if url is None:
        raise UsageError("logout needs a server URL, or --all")
    if not url.lower().startswith(("http://", "https://")):
        raise UsageError("logout is for an http(s):// server URL")
    store = FileTokenStore(directory)
    resource = canonical_resource(url)

    async def forget() -> bool:
        if await store.get_tokens(resource) is None:
            return False
        await store.delete_tokens(resource)
        return True

    if trio.run(forget):
        sys.stderr.write(f"trio-mcp: signed out of {url}\n")
    else:
        sys.stderr.write(f"trio-mcp: not signed in to {url} (nothing kept in {directory})\n")
    return 0


def _wants_oauth(target: list[str] | str, headers: dict[str, str]) -> bool:
    """An http(s) server is authenticated on demand, unless the user sends a header of their own."""
    if not isinstance(target, str) or target.lower().startswith(("ws://", "wss://")):
        return False  # a WebSocket takes its token in --header
    return not any(k.lower() == "authorization" for k in headers)


def login_secret(args: argparse.Namespace) -> str | None:
    """The secret of ``login --client-id``: from the environment or asked at the terminal,
    never from the command line (the old ``--client-secret S`` still works, with a warning)."""
    given = [
        name
        for name, value in (
            ("--client-secret", args.client_secret),
            ("--client-secret-env", args.client_secret_env),
            ("--ask-client-secret", args.ask_client_secret or None),
        )
        if value is not None
    ]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} are two sources of the secret: choose one")
    if given and args.client_id is None:
        raise UsageError(f"{given[0]} is the secret of --client-id: give the client id too")
    if args.client_secret is not None:
        sys.stderr.write(
            "trio-mcp: --client-secret is deprecated: a secret on the command line can be read "
            f"by every user (ps, the shell's history); put it in ${LOGIN_SECRET_ENV} or use "
            "--ask-client-secret\n"
        )
        return str(args.client_secret)
    if args.ask_client_secret:
        import getpass

        return getpass.getpass(f"client secret of {args.client_id}: ", stream=sys.stderr) or None
    if args.client_secret_env is not None:
        return secret_from(args.client_secret_env)
    if args.client_id is None:
        return None
    return os.environ.get(LOGIN_SECRET_ENV) or None


def _oauth(args: argparse.Namespace, receiver: LoopbackReceiver) -> OAuth:
    """The CLI's OAuth: tokens kept on disk, the sign-in URL shown and opened in a browser."""
    # Imported here: a stdio target never loads the HTTP stack.
    from .client import FileTokenStore, OAuth

    async def sign_in(url: str) -> str:
        # Always shown: the browser may not open (no display, a remote shell), and a user
        # should see where they are being sent.
        sys.stderr.write(f"trio-mcp: sign in at {url}\n")
        sys.stderr.flush()
        await open_browser(url)
        return await receiver.wait(args.login_timeout)

    return OAuth(
        store=FileTokenStore(token_dir()),
        client_name="trio-mcp",
        client_id=getattr(args, "client_id", None),
        client_secret=getattr(args, "secret", None),
        redirect_uri=receiver.redirect_uri,
        on_authorize=sign_in,
        authorize_timeout=args.login_timeout,
    )


async def drive(target: list[str] | str, args: argparse.Namespace) -> int:
    """Run one client action, cancelled on the wire by Ctrl-C."""
    http = isinstance(target, str) and target.lower().startswith(("http://", "https://"))
    if args.command == "login" and not http:
        raise UsageError("login is for an http(s):// server URL")
    transport = getattr(args, "transport", None)
    if transport is not None and not http:
        raise UsageError("--transport is for an http(s):// TARGET")
    if transport == "http":
        transport = "streamable-http"
    headers = _headers(args.header)
    if args.header and not isinstance(target, str):
        raise UsageError("--header is for an http(s):// or ws(s):// TARGET")
    if not _wants_oauth(target, headers):
        return await _drive_with(_client_target(target, headers, transport), args)
    # The redirect receiver listens for the whole run: a sign-in may be needed at any request.
    async with LoopbackReceiver() as receiver:
        auth = _oauth(args, receiver)
        return await _drive_with(_client_target(target, headers, transport, auth), args)


def _client_target(
    target: list[str] | str,
    headers: dict[str, str],
    transport: str | None,
    auth: OAuth | None = None,
) -> Target:
    """What ``open_client`` connects to, with the command line's settings for it."""
    if isinstance(target, list):
        return target
    if target.lower().startswith(("ws://", "wss://")):
        return WebSocketTarget(target, headers=headers or None)
    return HttpTarget(
        target,
        headers=headers or None,
        auth=auth,
        transport=cast('Literal["streamable-http", "sse"] | None', transport),
    )


async def _drive_with(target: Target, args: argparse.Namespace) -> int:
    out = Output(args.save_dir)
    interrupted = timed_out = False
    code = 0
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as outer:

            async def on_interrupt() -> None:
                nonlocal interrupted
                async for _ in signals:
                    interrupted = True
                    outer.cancel_scope.cancel()
                    return

            async def run() -> None:
                nonlocal code, timed_out
                limit = math.inf if args.timeout is None else args.timeout
                answers = TerminalAnswers(out.note)
                with trio.move_on_after(limit) as deadline:
                    async with open_client(
                        target, on_log=out.log, on_elicit=answers.elicit, on_sample=answers.sample
                    ) as client:
                        if args.command == "login":
                            out.note(f"trio-mcp: signed in to {target} (tokens in {token_dir()})")
                        else:
                            code = await _run_action(client, args, out)
                timed_out = deadline.cancelled_caught
                outer.cancel_scope.cancel()

            outer.start_soon(on_interrupt)
            outer.start_soon(run)
    if interrupted:
        out.note("cancelled")
        return EXIT_INTERRUPTED
    if timed_out:
        out.note(f"trio-mcp: no answer within --timeout {args.timeout:g}s; cancelled")
        return 1
    return code


# -- the command line -----------------------------------------------------------------------------
