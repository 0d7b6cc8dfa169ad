"""Testing MCP servers with pytest: a pytest plugin, and the helpers behind its fixtures.

Installing trio_mcp registers the plugin (an entry point of the ``pytest11`` group); a project
that has it otherwise names it in a ``conftest.py``: ``pytest_plugins = ["trio_mcp.testing"]``.
Everything runs under pytest-trio, in the test's own Trio run, so a tool and a test can share
a ``trio.Event``.

Helpers, usable in any Trio code:

- :func:`connected`: a :class:`~trio_mcp.Client` connected to a server in memory (either era,
  with ``mode="legacy"`` or ``mode="modern"``);
- :func:`stdio_client`: a client of a real child process spoken to over stdio, stopped at the
  end; what the child wrote to stderr is attached to an exception raised inside the block;
- :func:`http_server`: a server's Streamable HTTP app behind a real hypercorn on a free
  loopback port (:class:`HttpServer`: its URL, the app, an ``httpx.AsyncClient``), stopped at
  the end; :func:`http_client` connects a client to it.

Fixtures, built on them (override ``mcp_server`` in a test module or a ``conftest.py``):

- ``mcp_server``: the server under test; the plugin's own fails, asking for one;
- ``mcp_client_options``: keyword arguments for every client the fixtures open (default none);
- ``mcp_client``: a client connected to ``mcp_server`` in memory;
- ``mcp_era``/``mcp_era_client``: a client of ``mcp_server`` in each era, the test run once each;
- ``mcp_http``: ``mcp_server`` on HTTP (:class:`HttpServer`), with ``mcp_http_options``;
- ``mcp_http_client``: a client connected to ``mcp_http``;
- ``mcp_stdio``: a factory, ``async with mcp_stdio(command) as client``; the children's stderr
  is shown in the report of a failed test.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from .client import Client, Command, HttpTarget, Servable, open_client
from .http import HttpOptions, McpHttpApp
from .server import Server

__all__ = [
    "ERAS",
    "HttpServer",
    "connected",
    "http_client",
    "http_server",
    "stdio_client",
]

#: The two protocol eras a client connects in: ``mode=`` of :func:`~trio_mcp.open_client`.
ERAS = ("legacy", "modern")
#: How many of a child's last stderr lines are kept to explain a failure.
STDERR_LINES = 200


# -- in memory -------------------------------------------------------------------------------------


def connected(server: Servable, **options: Any) -> AbstractAsyncContextManager[Client]:
    """A client connected to ``server`` in memory, served inside this context.

    ``options`` are :func:`~trio_mcp.open_client`'s (``mode="modern"`` for the modern era,
    ``on_sample=``, ``on_elicit=``, ...)."""
    return open_client(server, **options)


# -- a child process -------------------------------------------------------------------------------


class _StderrTail:
    """The last lines a child wrote to stderr."""

    def __init__(self, limit: int = STDERR_LINES) -> None:
        self.limit = limit
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line.rstrip("\n"))
        del self.lines[: -self.limit]

    def text(self) -> str:
        return "\n".join(self.lines)


def _split(options: dict[str, Any], target: type[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` parted into those of ``target`` (an attrs class) and the rest."""
    own = {field.name for field in attrs.fields(target)}
    return (
        {k: v for k, v in options.items() if k in own},
        {k: v for k, v in options.items() if k not in own},
    )


def _argv(command: Sequence[str] | Command) -> list[str]:
    if isinstance(command, str):
        raise TypeError("command is a sequence of the program and its arguments, not a string")
    return list(command.argv if isinstance(command, Command) else command)


@asynccontextmanager
async def stdio_client(
    command: Sequence[str] | Command,
    *,
    on_stderr: Callable[[str], None] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """Spawn ``command`` and yield a client speaking to it over stdio; stop it on exit.

    The child's stderr is collected (and each line given to ``on_stderr``, if set): an
    exception raised while connecting or inside the block carries its last lines as a note.
    ``options`` are those of a :class:`~trio_mcp.Command` (``env=``, ``cwd=``, ...; a helper
    for a child process takes them as its own) and :func:`~trio_mcp.open_client`'s
    (``mode=``, ...)."""
    argv = _argv(command)
    process, options = _split(options, Command)
    if "stderr" in process:
        raise TypeError("stdio_client() collects the child's stderr: give on_stderr= instead")
    tail = _StderrTail()

    def collect(line: str) -> None:
        tail(line)
        if on_stderr is not None:
            on_stderr(line)

    if isinstance(command, Command):
        child = attrs.evolve(command, stderr=collect, **process)
    else:
        child = Command(argv, stderr=collect, **process)
    try:
        async with open_client(child, **options) as client:
            yield client
    except Exception as exc:
        if tail.lines:
            exc.add_note(f"stderr of {argv!r}:\n{tail.text()}")
        raise


# -- HTTP ------------------------------------------------------------------------------------------


@attrs.define
class HttpServer:
    """A server's HTTP app behind a running hypercorn on loopback."""

    #: The ASGI app (``app.server`` is the server).
    app: McpHttpApp
    #: ``http://127.0.0.1:PORT``.
    base: str
    #: An ``httpx.AsyncClient`` for raw requests (closed at the end).
    http_client: httpx.AsyncClient
    #: Set to stop the server; ``stopped`` is set once it has.
    shutdown: trio.Event
    stopped: trio.Event
    #: Exceptions that escaped the app (hypercorn alone would only log them and answer 500):
    #: :func:`http_server` fails at the end if there are any.
    errors: list[BaseException]
    #: Where the MCP endpoint is.
    path: str = "/mcp"

    @property
    def url(self) -> str:
        """The MCP endpoint's URL."""
        return self.base + self.path


def _recording(app: McpHttpApp, errors: list[BaseException], lifespan: bool) -> Any:
    """The app as hypercorn sees it: exceptions escaping it are recorded; with ``lifespan``
    false the caller runs ``app.running()`` itself."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan" and not lifespan:
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        try:
            await app(scope, receive, send)
        except Exception as exc:
            errors.append(exc)
            raise

    return asgi


async def _serve(
    app: Any,
    config: Config,
    shutdown: trio.Event,
    stopped: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        await serve(app, config, shutdown_trigger=shutdown.wait, task_status=task_status)
    finally:
        stopped.set()


@asynccontextmanager
async def http_server(
    server: Server,
    options: HttpOptions | None = None,
    *,
    timeout: float | None = None,
    graceful_timeout: float = 2.0,
    lifespan: bool = True,
) -> AsyncIterator[HttpServer]:
    """Serve ``server.http_app(options)`` with hypercorn's Trio worker on 127.0.0.1, on a port
    the system picks; stop it on exit.

    ``timeout`` bounds the whole block (a hang guard: ``trio.TooSlowError``); ``lifespan``
    false leaves running the app's background work to the caller (``app.running()``).
    Exceptions that escaped the app fail the block's exit with an ``AssertionError``."""
    app = server.http_app(options)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = graceful_timeout
    config.accesslog = None
    shutdown, stopped = trio.Event(), trio.Event()
    errors: list[BaseException] = []
    with trio.fail_after(math.inf if timeout is None else timeout):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                functools.partial(
                    _serve, _recording(app, errors, lifespan), config, shutdown, stopped
                )
            )
            async with httpx.AsyncClient(timeout=timeout) as client:
                yield HttpServer(app, binds[0], client, shutdown, stopped, errors)
            shutdown.set()
    if errors:
        raise AssertionError(f"the HTTP app raised: {errors!r}")


def http_client(running: HttpServer, **options: Any) -> AbstractAsyncContextManager[Client]:
    """A client connected to ``running``'s MCP endpoint. ``options`` are those of an
    :class:`~trio_mcp.HttpTarget` (``headers=``, ``auth=``, ...; a helper for HTTP takes them
    as its own) and :func:`~trio_mcp.open_client`'s (``mode=``, ...)."""
    http, options = _split(options, HttpTarget)
    return open_client(HttpTarget(running.url, **http), **options)


# -- the pytest plugin -----------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "mcp_timeout",
        "trio_mcp.testing: a hang guard (seconds) on each HTTP fixture's whole test; "
        "empty for none",
        default="",
    )


#: The plugin's fixtures that run in the test's Trio run (async, or spawning under Trio).
TRIO_FIXTURES = frozenset(
    {"mcp_client", "mcp_era_client", "mcp_http", "mcp_http_client", "mcp_stdio"}
)
#: How to turn pytest-trio's trio mode on, said when it is off.
TRIO_MODE_HINT = (
    "turn pytest-trio's trio mode on (trio_mode = true under [tool.pytest.ini_options] in "
    "pyproject.toml, or under [pytest] in pytest.ini), or mark the test @pytest.mark.trio"
)


def _trio_mode(config: pytest.Config) -> bool | None:
    """Whether pytest-trio's trio mode is on; None when pytest-trio is not there at all."""
    try:
        value = config.getini("trio_mode")
    except ValueError:  # the ini key is pytest-trio's: without it, nobody declared it
        return None
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test using the plugin's fixtures without Trio to run them fails with what to do,
    rather than with pytest's or pytest-trio's generic errors about async fixtures."""
    used = sorted(TRIO_FIXTURES.intersection(getattr(item, "fixturenames", ())))
    if not used:
        return
    mode = _trio_mode(item.config)
    if mode is None:
        pytest.fail(
            f"trio_mcp.testing: {item.name} uses {', '.join(used)}: the trio_mcp fixtures "
            "run under pytest-trio, which is not installed: pip install pytest-trio, then "
            + TRIO_MODE_HINT,
            pytrace=False,
        )
    if not mode and item.get_closest_marker("trio") is None:
        pytest.fail(
            f"trio_mcp.testing: {item.name} uses {', '.join(used)}: the trio_mcp fixtures "
            f"run under pytest-trio, and its trio mode is off: {TRIO_MODE_HINT}",
            pytrace=False,
        )


def _timeout(config: pytest.Config) -> float | None:
    value = str(config.getini("mcp_timeout")).strip()
    return float(value) if value else None


@pytest.fixture
def mcp_server() -> Server:
    """The server under test: override this fixture (the plugin's own fails)."""
    pytest.fail(
        "the trio_mcp.testing fixtures need a server: define a fixture named mcp_server "
        "that returns it (in the test module or a conftest.py)"
    )


@pytest.fixture
def mcp_client_options() -> dict[str, Any]:
    """Keyword arguments for :func:`~trio_mcp.open_client` of every fixture's client."""
    return {}


@pytest.fixture
async def mcp_client(
    mcp_server: Server, mcp_client_options: dict[str, Any]
) -> AsyncIterator[Client]:
    """A client connected to ``mcp_server`` in memory."""
    async with connected(mcp_server, **mcp_client_options) as client:
        yield client


@pytest.fixture(params=ERAS)
def mcp_era(request: pytest.FixtureRequest) -> str:
    """Each era in turn: a test using it runs once per era."""
    era: str = request.param
    return era


@pytest.fixture
async def mcp_era_client(
    mcp_server: Server, mcp_client_options: dict[str, Any], mcp_era: str
) -> AsyncIterator[Client]:
    """A client connected to ``mcp_server`` in memory, in the era ``mcp_era``."""
    async with connected(mcp_server, **{**mcp_client_options, "mode": mcp_era}) as client:
        yield client


@pytest.fixture
def mcp_http_options() -> HttpOptions | None:
    """The :class:`~trio_mcp.http.HttpOptions` of ``mcp_http`` (default: the defaults)."""
    return None


@pytest.fixture
async def mcp_http(
    request: pytest.FixtureRequest, mcp_server: Server, mcp_http_options: HttpOptions | None
) -> AsyncIterator[HttpServer]:
    """``mcp_server`` on Streamable HTTP behind a real hypercorn on a free loopback port."""
    async with http_server(
        mcp_server, mcp_http_options, timeout=_timeout(request.config)
    ) as running:
        yield running


@pytest.fixture
async def mcp_http_client(
    mcp_http: HttpServer, mcp_client_options: dict[str, Any]
) -> AsyncIterator[Client]:
    """A client connected to ``mcp_http`` over Streamable HTTP."""
    async with http_client(mcp_http, **mcp_client_options) as client:
        yield client


_TAILS = pytest.StashKey[list[tuple[list[str], _StderrTail]]]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """The stderr of the test's children, as sections of its report (shown when it fails)."""
    for command, tail in item.stash.get(_TAILS, []):
        if tail.lines:
            item.add_report_section(call.when, f"stderr of {command!r}", tail.text())
            tail.lines.clear()  # each line is shown once, in the phase it was written in


@pytest.fixture
def mcp_stdio(
    request: pytest.FixtureRequest,
) -> Callable[..., AbstractAsyncContextManager[Client]]:
    """A factory: ``async with mcp_stdio(command, **options) as client`` spawns ``command``
    and connects to it over stdio; what the children wrote to stderr is shown with a failure."""
    tails = request.node.stash.setdefault(_TAILS, [])

    def spawn(
        command: Sequence[str] | Command, **options: Any
    ) -> AbstractAsyncContextManager[Client]:
        tail = _StderrTail()
        tails.append((_argv(command), tail))
        return stdio_client(command, on_stderr=tail, **options)

    return spawn
