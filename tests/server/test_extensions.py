"""The extension seam (``trio_mcp.server.Extension``): what an extension gives a server reaches
the wire through it alone, and the core names no extension."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import Server
from trio_mcp.lowlevel import InFlight
from trio_mcp.protocol._jsonrpc import JSONObject
from trio_mcp.server import BusEvent, Extension, ExtensionHost, ServerConnection
from trio_mcp.server._connection import MethodHandler
from trio_mcp.server._extensions import ToolCall, ToolCallHook
from trio_mcp.server._registry import ToolEntry
from trio_mcp.tasks import MemoryTaskStore, TasksExtension

from ..wire import wire_to

ROOT = Path(__file__).resolve().parents[2]
ECHO = "example.com/echo"
MODERN = "2026-07-28"


def meta(declared: bool = True) -> dict[str, Any]:
    caps: dict[str, Any] = {"extensions": {ECHO: {}}} if declared else {}
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }


class Echo(Extension):
    """A toy extension using every hook."""

    name = ECHO

    def __init__(self) -> None:
        self.host: ExtensionHost | None = None
        self.hosted = 0
        self.heard: list[str] = []

    def attach(self, host: ExtensionHost) -> None:
        self.host = host

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        return {"loud": True}

    def route(self, method: str, client_capabilities: Mapping[str, Any]) -> MethodHandler | None:
        return self._echo if method == "echo/say" else None

    async def _echo(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        return {"said": record.params.get("text")}

    def tool_call(
        self, entry: ToolEntry, client_capabilities: Mapping[str, Any]
    ) -> ToolCallHook | None:
        if not entry.options.get("echoed"):
            return None

        async def louder(
            conn: ServerConnection, record: InFlight, owner: str, call: ToolCall
        ) -> JSONObject:
            result = await call(conn, record)
            result["content"][0]["text"] += "!"
            return result

        return louder

    async def watch(
        self, conn: ServerConnection, record: InFlight, wanted: JSONObject
    ) -> tuple[JSONObject, frozenset[str]] | None:
        await trio.lowlevel.checkpoint()
        topics = wanted.get("echoTopics")
        return None if topics is None else ({"echoTopics": topics}, frozenset(topics))

    def hosting(self) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def around() -> AsyncIterator[None]:
            self.hosted += 1
            yield

        return around()

    def on_bus_event(self, event: BusEvent) -> bool:
        if event.kind != "echo":
            return False
        self.heard.append(event.params["topic"])
        assert self.host is not None
        for conn in self.host.connections:
            conn.send_watched(ECHO, event.params["topic"], "notifications/echo", {"x": 1})
        return True


def echo_server() -> tuple[Server, Echo]:
    echo = Echo()
    server = Server("ext", extensions=[echo])

    @server.tool()
    async def shout(word: str) -> str:
        return word

    server.tools["shout"].options = {"echoed": True}
    return server, echo


async def test_an_extension_is_announced_routed_and_hosted_through_the_seam() -> None:
    server, echo = echo_server()
    async with wire_to(server, initialize=False) as peer:
        found = await peer.request(1, "server/discover", {"_meta": meta()})
        assert echo.hosted == 1  # around the connection, as the tasks' nursery is
        assert found["result"]["capabilities"]["extensions"] == {ECHO: {"loud": True}}
        said = await peer.request(2, "echo/say", {"text": "hi", "_meta": meta()})
        assert said["result"]["said"] == "hi"
        called = await peer.request(
            3, "tools/call", {"name": "shout", "arguments": {"word": "hey"}, "_meta": meta()}
        )
        assert called["result"]["content"][0]["text"] == "hey!"


async def test_a_listen_hears_what_an_extension_watches_and_its_bus_events() -> None:
    server, echo = echo_server()
    async with wire_to(server, initialize=False) as peer:
        params = {"notifications": {"echoTopics": ["a"]}, "_meta": meta()}
        await peer.send(
            {"jsonrpc": "2.0", "id": 8, "method": "subscriptions/listen", "params": params}
        )
        ack = await peer.recv()
        assert ack["params"]["notifications"] == {"echoTopics": ["a"]}
        server.notifier.notify(BusEvent("echo", {"topic": "b"}))  # not watched
        server.notifier.notify(BusEvent("echo", {"topic": "a"}))
        heard = await peer.recv()
        assert heard["method"] == "notifications/echo"
        assert heard["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 8
        assert echo.heard == ["b", "a"]


def test_an_extension_is_added_once() -> None:
    server, _ = echo_server()
    with pytest.raises(ValueError, match="already added"):
        server.use(Echo())
    with pytest.raises(ValueError, match="needs a name"):
        server.use(Extension())


def test_a_server_given_its_own_tasks_extension_uses_it() -> None:
    store = MemoryTaskStore()
    tasks = TasksExtension(store, ttl_ms=5)
    server = Server("own", extensions=[tasks])
    assert server.tasks is tasks.manager and server.tasks.store is store
    assert Server("default").tasks.ttl_ms == 300_000
    with pytest.raises(ValueError, match="give them to the TasksExtension"):
        Server("both", extensions=[TasksExtension()], task_store=store)


def test_the_core_names_no_extension() -> None:
    """What a connection routes and what a tool entry holds say nothing of tasks."""
    for module in ("_connection.py", "_registry.py", "_extensions.py", "_bus.py"):
        source = (ROOT / "trio_mcp" / "server" / module).read_text()
        for word in ("tasks/", "_tasks", "TASK_CHANGED", "task_id", "taskId", "start_task("):
            assert word not in source, f"server/{module} names {word!r}"


class Picky(Extension):
    """A toy extension announced in both eras that shows the tool ``secret`` only to clients
    declaring it."""

    name = "example.com/picky"
    handshake_era = True

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        return {}

    def lists_tool(self, entry: ToolEntry, client_capabilities: Mapping[str, Any]) -> bool:
        declared = client_capabilities.get("extensions") or {}
        return entry.tool.name != "secret" or self.name in declared


def picky_server() -> Server:
    server = Server("picky", extensions=[Picky()])

    @server.tool()
    async def secret() -> str:
        return "s"

    @server.tool()
    async def plain() -> str:
        return "p"

    return server


async def test_an_extension_marked_for_the_handshake_is_announced_in_initialize_too() -> None:
    async with wire_to(picky_server(), initialize=False) as peer:
        answer = await peer.initialize()
        caps = answer["result"]["capabilities"]
        # Only the extension marked for the handshake: the tasks extension stays modern.
        assert caps["extensions"] == {"example.com/picky": {}}
    async with wire_to(echo_server()[0], initialize=False) as peer:
        answer = await peer.initialize()
        assert "extensions" not in answer["result"]["capabilities"]


async def test_an_extension_decides_which_tools_a_list_shows_by_what_the_client_declared() -> None:
    declared: dict[str, Any] = {"extensions": {"example.com/picky": {}}}
    for caps, expected in (({}, ["plain"]), (declared, ["plain", "secret"])):
        async with wire_to(picky_server(), initialize=False) as peer:
            await peer.initialize(capabilities=caps)
            listed = await peer.request(1, "tools/list")
            assert sorted(t["name"] for t in listed["result"]["tools"]) == expected
        async with wire_to(picky_server(), initialize=False) as peer:
            modern = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": caps,
            }
            listed = await peer.request(1, "tools/list", {"_meta": modern})
            assert sorted(t["name"] for t in listed["result"]["tools"]) == expected


class Counting(Extension):
    """Shows the tools with an even number only, and counts how often it is asked."""

    name = "example.com/counting"
    handshake_era = True

    def __init__(self) -> None:
        self.asked = 0

    def lists_tool(self, entry: ToolEntry, client_capabilities: Mapping[str, Any]) -> bool:
        self.asked += 1
        return int(entry.tool.name.removeprefix("t")) % 2 == 0


async def test_walking_a_filtered_list_asks_about_each_tool_about_once() -> None:
    """Each page looks at its own tools and the ones filtered out between them, not at every
    tool before it: walking 1,000 tools 10 a page asks the filter about 1,000 times, not about
    50 pages times 1,000 (a walk that grew with the square of the tools)."""
    counting = Counting()
    server = Server("many", extensions=[counting], page_size=10)

    async def tool_fn() -> str:
        return "x"

    for i in range(1000):
        server.tool(name=f"t{i}")(tool_fn)
    async with wire_to(server) as peer:
        names: list[str] = []
        cursor = None
        for rid in range(1, 100):
            answer = await peer.request(rid, "tools/list", {"cursor": cursor} if cursor else None)
            page = answer["result"]
            assert len(page["tools"]) == 10  # every page full: the filter applied before paging
            names += [t["name"] for t in page["tools"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
    assert names == [f"t{i}" for i in range(0, 1000, 2)]
    # Each tool once, and the first of each next page once more.
    assert counting.asked <= 1000 + 50


def test_a_list_asks_only_the_extensions_that_filter_tools() -> None:
    """Every server has the tasks extension, which keeps no tool out: a list asks it nothing
    (nor reads the client's capabilities for it), where a list of 10,000 tools asked it
    10,000 times. Extensions that do filter are each asked about each tool."""
    read: list[int] = []

    def capabilities() -> Mapping[str, Any]:
        read.append(1)
        return {}

    assert Server("plain").extensions.tool_filter(capabilities) is None
    assert read == []
    counting = Counting()
    server = Server("two", extensions=[Picky(), counting])

    async def tool_fn() -> str:
        return "x"

    for name in ("t2", "t3"):
        server.tool(name=name)(tool_fn)
    keep = server.extensions.tool_filter(capabilities)
    assert keep is not None
    assert read == [1]  # read once for the list, not once per tool
    assert [keep(server.tools[name]) for name in ("t2", "t3")] == [True, False]
    assert counting.asked == 2
