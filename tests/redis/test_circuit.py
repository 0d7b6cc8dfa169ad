"""The circuit of a process's Redis: once a ping fails, every user is refused at once (and the
commands in flight are cancelled) instead of waiting out its timeout; the next ping that
answers closes it. On a mock clock, then on a real redis-server hung with SIGSTOP.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from trio_mcp.http import SessionStoreUnavailable
from trio_mcp.redis import RedisBus, RedisSessionStore
from trio_mcp.redis._circuit import Circuit, CircuitOpen

from ..deploy._services import redis_server

GUARD = 20


class Redis:
    """A ping that answers, or hangs."""

    def __init__(self) -> None:
        self.hung = False
        self.pings = 0

    async def ping(self) -> None:
        self.pings += 1
        if self.hung:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()


@pytest.fixture
def mock_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


async def test_a_hung_redis_opens_the_circuit_and_cancels_what_waits_on_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    redis, circuit = Redis(), Circuit("redis://x", probe_timeout=0.5, interval=0.5)
    refused_at: list[float] = []

    async def command_in_flight() -> None:
        with trio.CancelScope() as guard:
            circuit.hold(guard)
            try:
                await trio.sleep(30)  # a command on a hung Redis, with a 30 s timeout
            finally:
                circuit.let_go(guard)
        assert guard.cancelled_caught
        refused_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(circuit.watch, redis.ping)
        await trio.sleep(2.25)  # between two pings: no tie with the watcher
        assert not circuit.open
        redis.hung = True
        hung_at = trio.current_time()
        nursery.start_soon(command_in_flight)
        await trio.sleep(1.0)  # one interval and one probe timeout at most
        assert circuit.open and circuit.opened == 1
        # The command in flight was refused when it opened, not after its timeout.
        assert refused_at and refused_at[0] - hung_at <= 1.0
        # While open, a command is refused at once: no time passes, no ping is sent.
        pings, now = redis.pings, trio.current_time()
        with pytest.raises(CircuitOpen, match="refused at once"):
            await circuit.admit(redis.ping)
        assert trio.current_time() == now and redis.pings == pings
        # Redis answers again: the watcher's next ping closes it, by itself.
        redis.hung = False
        await trio.sleep(1.0)
        assert not circuit.open
        await circuit.admit(redis.ping)
        nursery.cancel_scope.cancel()


async def test_without_a_watcher_one_command_at_a_time_tries_again(
    mock_clock: trio.testing.MockClock,
) -> None:
    redis, circuit = Redis(), Circuit("redis://x", probe_timeout=0.5)
    redis.hung = True
    await circuit.noticed(redis.ping)  # a command failed: the ping says Redis is down
    assert circuit.open
    tried: list[str] = []

    async def command(name: str) -> None:
        try:
            await circuit.admit(redis.ping)
        except CircuitOpen:
            tried.append(f"{name} refused at {trio.current_time() - start:g}")

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(command, "first")  # pings, bounded by the probe timeout
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(command, "second")  # refused at once meanwhile
    assert tried == ["second refused at 0", "first refused at 0.5"]
    redis.hung = False
    await circuit.admit(redis.ping)  # the next one pings, and gets through
    assert not circuit.open


async def test_a_real_redis_hung_refuses_the_store_at_once_and_recovers(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        store = RedisSessionStore(redis.url, timeout=30)
        await store.start()
        bus = RedisBus(redis.url)  # its reader watches Redis
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(bus.subscribe, lambda event: None)
                assert await store.get("none") is None
                circuit = store._link.circuit
                assert circuit is not None and not circuit.open
                redis.pause()
                with trio.fail_after(GUARD):  # far less than the store's 30 s timeout
                    with pytest.raises(SessionStoreUnavailable, match="refused at once"):
                        await store.get("in flight when it hung")
                    assert circuit.open
                    # The next is refused at once, without a word to Redis.
                    with pytest.raises(SessionStoreUnavailable, match="refused at once"):
                        await store.get("after")
                    redis.resume()
                    while circuit.open:  # noqa: ASYNC110 - the watcher's next ping
                        await trio.sleep(0.05)
                    assert await store.get("none") is None
                    assert circuit.opened == 1
                nursery.cancel_scope.cancel()
        finally:
            await store.aclose()
