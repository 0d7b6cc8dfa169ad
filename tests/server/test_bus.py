"""The notification bus: ``LocalBus`` and the ``Notifier`` pump in one process, and ``RedisBus``
with a real redis-server (two apps in one process that share it, Redis down and lost)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import BusError, BusEvent, LocalBus, RedisBus, Server, open_client
from trio_mcp.redis._link import redact

from .._http import GUARD, eventually, serving
from .._ports import free_port
from ..deploy._services import redis_server


def _server(name: str, bus: Any = None) -> Server:
    server = Server(name, bus=bus)

    @server.tool()
    async def change() -> str:
        server.notify_list_changed("tools")
        return name

    @server.tool()
    async def update(uri: str) -> str:
        server.notify_resource_updated(uri)
        return uri

    @server.resource("test://doc")
    def doc() -> str:
        return "the doc"

    return server


async def _next_method(subscription: Any) -> str:
    note = await subscription.__anext__()
    return str(note.method)


# -- the event and the local bus ---------------------------------------------------------------


def test_an_event_survives_the_wire_and_junk_is_refused() -> None:
    event = BusEvent("task_status", {"taskId": "t1", "status": "working"}, origin="abc")
    assert BusEvent.decode(event.encode()) == event
    assert BusEvent.list_changed("tools") == BusEvent("list_changed", {"kind": "tools"})
    for junk in (b"{", b"[]", b'{"params": {}}', b'{"kind": "x", "params": []}'):
        with pytest.raises(ValueError):
            BusEvent.decode(junk)


async def test_without_the_pump_notify_delivers_here_at_once_and_queues_nothing() -> None:
    delivered: list[BusEvent] = []
    bus = LocalBus()
    published: list[BusEvent] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(bus.subscribe, published.append)
        server = Server("alone", bus=bus)
        server.notifier._deliver = delivered.append
        server.notify_list_changed("tools")
        assert delivered == [BusEvent.list_changed("tools")]
        await trio.sleep(0.05)
        assert published == []  # no pump, nothing for the bus
        nursery.cancel_scope.cancel()


async def test_two_servers_on_one_local_bus_hear_each_other_once_each() -> None:
    bus = LocalBus()
    one, two = Server("one", bus=bus), Server("two", bus=bus)
    heard: dict[str, list[BusEvent]] = {"one": [], "two": []}
    one.notifier._deliver = heard["one"].append
    two.notifier._deliver = heard["two"].append
    async with trio.open_nursery() as nursery:
        await nursery.start(one.run_notifications)
        await nursery.start(two.run_notifications)
        one.notify_list_changed("tools")
        two.notify_resource_updated("test://doc")
        with trio.fail_after(GUARD):
            await eventually(lambda: len(heard["one"]) >= 2 and len(heard["two"]) >= 2)
        await trio.sleep(0.05)  # nothing more comes: each event once in each server
        nursery.cancel_scope.cancel()
    # Its own change at once, the other's from the bus: both, once each.
    tools, doc = ("list_changed", {"kind": "tools"}), ("resource_updated", {"uri": "test://doc"})
    assert [(e.kind, e.params) for e in heard["one"]] == [tools, doc]
    assert [(e.kind, e.params) for e in heard["two"]] == [doc, tools]


async def test_a_resync_tells_every_listener_every_list_and_resource_again() -> None:
    """What a bus delivers when a worker missed events: each listener hears each list it
    listens to changed, and each resource it subscribed to updated."""
    bus = LocalBus()
    server, other = _server("here", bus), Server("other", bus=bus)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run_notifications)
        await nursery.start(other.run_notifications)
        async with (
            open_client(server, mode="modern") as client,
            client.listen(tools=True, resources=True, resource_uris=["test://doc"]) as listener,
        ):
            with trio.fail_after(GUARD):
                await listener.wait_acknowledged()
                other.notifier.notify(BusEvent.resync(), here=False)
                heard = {await _next_method(listener) for _ in range(3)}
            assert heard == {
                "notifications/tools/list_changed",
                "notifications/resources/list_changed",
                "notifications/resources/updated",
            }
        nursery.cancel_scope.cancel()


async def test_a_full_outbox_drops_the_oldest_with_a_warning_and_owes_a_resync(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Stalled(LocalBus):
        def __init__(self) -> None:
            super().__init__()
            self.release = trio.Event()
            self.published: list[BusEvent] = []

        async def publish(self, event: BusEvent) -> None:
            await self.release.wait()
            self.published.append(event)

    bus = Stalled()
    server = Server("busy", bus=bus)
    server.notifier.max_queued = 3
    server.notifier._deliver = lambda event: None
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run_notifications)
        server.notify_resource_updated("test://0")
        await trio.sleep(0.01)  # the publisher holds test://0, waiting
        with caplog.at_level(logging.WARNING, "trio_mcp.bus"):
            for n in range(1, 6):
                server.notify_resource_updated(f"test://{n}")
        # test://0 stays queued while its publish waits: 1, 2 and 0 itself are dropped.
        assert server.notifier.dropped == 3
        assert sum("dropping the oldest" in r.message for r in caplog.records) == 1
        bus.release.set()
        with trio.fail_after(GUARD):
            await eventually(lambda: len(bus.published) >= 5)
        nursery.cancel_scope.cancel()
    # What was dropped is not silently lost: the other workers are told to resync, first.
    assert [e.params.get("uri", e.kind) for e in bus.published] == [
        "test://0",
        "resync",
        "test://3",
        "test://4",
        "test://5",
    ]


async def test_a_failing_publish_is_logged_once_kept_and_retried_until_it_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Flaky(LocalBus):
        fail = True

        async def publish(self, event: BusEvent) -> None:
            if self.fail:
                raise BusError("the broker is away")
            await super().publish(event)

    bus = Flaky()
    server = _server("flaky", bus)
    other = Server("other", bus=bus)
    heard: list[BusEvent] = []
    other.notifier._deliver = heard.append
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run_notifications)
        await nursery.start(other.run_notifications)
        with caplog.at_level(logging.WARNING, "trio_mcp.bus"):
            async with (
                open_client(server, mode="modern") as client,
                client.listen(tools=True) as subscription,
            ):
                with trio.fail_after(GUARD):
                    await subscription.wait_acknowledged()
                    for _ in range(3):
                        await client.call_tool("change")
                        # This process's listener hears it although the bus is down.
                        assert await _next_method(subscription) == (
                            "notifications/tools/list_changed"
                        )
                await trio.sleep(0.05)
                assert heard == []
                assert sum("publishing failed" in r.message for r in caplog.records) == 1
                bus.fail = False
                await client.call_tool("change")
                with trio.fail_after(GUARD):
                    # The three changes made while the bus was down come too, in order.
                    await eventually(lambda: len(heard) >= 4)
                await trio.sleep(0.05)
                assert [e.params for e in heard] == [{"kind": "tools"}] * 4
        assert any("works again" in r.message for r in caplog.records)
        nursery.cancel_scope.cancel()


async def test_through_http_a_change_reaches_the_listen_and_get_streams_of_a_second_app() -> None:
    """Two servers (two apps) on one LocalBus: what one changes, the other's listeners hear."""
    bus = LocalBus()
    async with serving(_server("a", bus)) as a, serving(_server("b", bus)) as b:
        await _heard_across(a.url, b.url, b)


async def _heard_across(url_a: str, url_b: str, served_b: Any) -> None:
    """A modern listen and a handshake GET stream on ``b`` hear a change made on ``a``."""
    async with (
        open_client(url_b, mode="modern") as listener,
        open_client(url_a, mode="modern") as changer,
        listener.listen(tools=True, resource_uris=["test://doc"]) as subscription,
    ):
        with trio.fail_after(GUARD):
            acknowledged = await subscription.wait_acknowledged()
            assert acknowledged["resourceSubscriptions"] == ["test://doc"]
            session = await served_b.initialize()
            async with served_b.stream_get(session) as stream:
                await changer.call_tool("change")
                assert await _next_method(subscription) == "notifications/tools/list_changed"
                message = await stream.message()
                assert message["method"] == "notifications/tools/list_changed"
                await changer.call_tool("update", {"uri": "test://doc"})
                note = await subscription.__anext__()
                assert note.method == "notifications/resources/updated"
                assert (note.params or {})["uri"] == "test://doc"


# -- Redis -------------------------------------------------------------------------------------


def test_the_url_in_messages_has_no_password() -> None:
    assert redact("redis://user:s3cret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact("redis://:s3cret@[::1]:6379") == "redis://:***@[::1]:6379"
    assert redact("redis://host:6379/0") == "redis://host:6379/0"
    with pytest.raises(ValueError, match="redis://"):
        RedisBus("http://:s3cret@host")


def test_import_trio_mcp_does_not_load_coredis() -> None:
    """Nor does building the Redis parts: the client is loaded when one starts."""
    code = (
        "import sys, trio_mcp, trio_mcp.server\n"
        "assert 'coredis' not in sys.modules\n"
        "from trio_mcp import RedisBus, RedisEventStore, RedisRelay, RedisTaskStore\n"
        "url = 'redis://127.0.0.1:1/0'\n"
        "RedisBus(url), RedisEventStore(url), RedisRelay(url), RedisTaskStore(url)\n"
        "assert 'coredis' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_redis_down_at_start_fails_the_start_naming_the_url_without_password() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    server = _server("down", RedisBus(url, timeout=1))
    with pytest.raises(BusError) as caught:
        async with server.http_app().running():
            pass  # pragma: no cover
    assert "bus's Redis at redis://:***@127.0.0.1:" in str(caught.value)
    assert "cannot be reached" in str(caught.value)
    assert "s3cret" not in str(caught.value)


async def test_redis_down_at_start_fails_the_asgi_lifespan_with_the_reason() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    app = _server("down", RedisBus(url, timeout=1)).http_app()
    sent: list[dict[str, Any]] = []
    messages = iter([{"type": "lifespan.startup"}])

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: Any) -> None:
        sent.append(message)

    with trio.fail_after(GUARD):
        await app({"type": "lifespan"}, receive, send)
    (failed,) = sent
    assert failed["type"] == "lifespan.startup.failed"
    assert "bus's Redis at redis://:***@127.0.0.1:" in failed["message"]
    assert "cannot be reached" in failed["message"]
    assert "s3cret" not in failed["message"]


@asynccontextmanager
async def _redis(tmp_path: Path) -> AsyncIterator[Any]:
    async with redis_server(tmp_path) as redis:
        yield redis


async def test_two_apps_sharing_a_redis_bus_hear_each_other(tmp_path: Path) -> None:
    async with _redis(tmp_path) as redis:
        bus = RedisBus(redis.url)
        async with serving(_server("a", bus)) as a, serving(_server("b", bus)) as b:
            await _heard_across(a.url, b.url, b)
            await _heard_across(b.url, a.url, a)


async def test_a_prefix_keeps_deployments_apart(tmp_path: Path) -> None:
    async with _redis(tmp_path) as redis:
        a = _server("a", RedisBus(redis.url, prefix="one:"))
        b = _server("b", RedisBus(redis.url, prefix="two:"))
        heard: list[BusEvent] = []
        b.notifier._deliver = heard.append
        async with trio.open_nursery() as nursery:
            await nursery.start(a.run_notifications)
            await nursery.start(b.run_notifications)
            a.notify_list_changed("tools")
            await trio.sleep(0.3)
            assert heard == []
            b2 = _server("b2", RedisBus(redis.url, prefix="one:"))
            b2.notifier._deliver = heard.append
            await nursery.start(b2.run_notifications)
            a.notify_list_changed("tools")
            with trio.fail_after(GUARD):
                await eventually(lambda: bool(heard))
            nursery.cancel_scope.cancel()


async def test_redis_lost_mid_run_then_back(tmp_path: Path) -> None:
    """Redis stopped: calls go on and this process's listeners still hear its changes; back:
    the reader has reconnected by itself, the change made meanwhile crosses (kept by its
    publisher, or as a resync: this Redis restarts empty), and changes cross again."""
    async with _redis(tmp_path) as redis:
        bus_a = RedisBus(redis.url, reconnect_max=0.3)
        bus_b = RedisBus(redis.url, reconnect_max=0.3)
        async with (
            serving(_server("a", bus_a)) as a,
            serving(_server("b", bus_b)) as b,
            open_client(a.url, mode="modern") as client_a,
            open_client(b.url, mode="modern") as client_b,
            client_a.listen(tools=True) as on_a,
            client_b.listen(tools=True) as on_b,
        ):
            with trio.fail_after(GUARD):
                await on_a.wait_acknowledged()
                await on_b.wait_acknowledged()
                await client_a.call_tool("change")
                assert await _next_method(on_a) == "notifications/tools/list_changed"
                assert await _next_method(on_b) == "notifications/tools/list_changed"

                await redis.stop()
                await eventually(lambda: not (bus_a.connected or bus_b.connected))
                result = await client_a.call_tool("change")
                assert not result.is_error
                assert await _next_method(on_a) == "notifications/tools/list_changed"
                assert (await client_b.call_tool("update", {"uri": "x://y"})).content

                await redis.start()
                await eventually(lambda: bus_a.connected and bus_b.connected)
                # The change made during the outage is not lost for b.
                assert await _next_method(on_b) == "notifications/tools/list_changed"
                await client_a.call_tool("change")
                assert await _next_method(on_a) == "notifications/tools/list_changed"
                assert await _next_method(on_b) == "notifications/tools/list_changed"


def test_the_cli_takes_the_redis_url_from_the_environment_and_says_why_it_cannot_start() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    done = subprocess.run(
        [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http", "--port", "0"],
        # The start's INFO lines aside (the state keys), it says one line.
        env={**os.environ, "TRIO_MCP_REDIS_URL": url, "TRIO_MCP_LOG_LEVEL": "warning"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    # One line, and nothing served first: the app starts before any port is bound.
    [last] = done.stderr.strip().splitlines()
    # The event store is the first to reach for Redis (the bus comes next): it says so.
    assert last.startswith("trio-mcp: cannot start: ")
    assert "Redis at redis://:***@127.0.0.1:" in last and "cannot be reached" in last
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http", "--redis-url", "x:"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--redis-url: a Redis URL starts with" in bad.stderr
