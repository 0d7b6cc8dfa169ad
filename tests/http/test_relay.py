"""Relays: a message to one node reaches that node only, one to every node reaches all; the
Redis relay on a real redis-server, its faults clear."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from trio_mcp.http import MemoryRelay, Relay, RelayUnavailable
from trio_mcp.redis._relay import RedisRelay

from .._http import eventually
from .._ports import free_port
from ..deploy._services import redis_server


@asynccontextmanager
async def a_relay(kind: str, tmp_path: Path) -> AsyncIterator[Relay]:
    if kind == "memory":
        yield MemoryRelay()
        return
    async with redis_server(tmp_path) as redis:
        yield RedisRelay(redis.url)


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_message_reaches_its_node_or_every_node(kind: str, tmp_path: Path) -> None:
    got: dict[str, list[bytes]] = {"n1": [], "n2": []}
    async with a_relay(kind, tmp_path) as relay, trio.open_nursery() as nursery:
        for node, seen in got.items():
            await nursery.start(relay.subscribe, node, seen.append)
        await relay.send("n2", b"to n2")
        await relay.send(None, b"to all")
        await relay.send("n9", b"to nobody")
        with trio.fail_after(5):
            await eventually(lambda: len(got["n1"]) >= 1 and len(got["n2"]) >= 2)
        await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert got == {"n1": [b"to all"], "n2": [b"to n2", b"to all"]}


async def test_redis_down_at_start_is_a_clear_error_without_the_password() -> None:
    relay = RedisRelay(f"redis://probe:hunter2@127.0.0.1:{free_port()}/0", timeout=1)
    with pytest.raises(RelayUnavailable) as raised:
        await relay.subscribe("n1", lambda _: None)
    assert "cannot be reached" in str(raised.value) and "hunter2" not in str(raised.value)
    with pytest.raises(RelayUnavailable, match="not started"):
        await relay.send("n1", b"x")


async def test_redis_lost_mid_run_fails_sends_clearly_and_recovers(tmp_path: Path) -> None:
    got: list[bytes] = []
    async with redis_server(tmp_path) as redis, trio.open_nursery() as nursery:
        relay = RedisRelay(redis.url, timeout=1, reconnect_max=0.2)
        await nursery.start(relay.subscribe, "n1", got.append)
        await redis.stop()
        with pytest.raises(RelayUnavailable):
            for _ in range(50):  # until the subscriber has seen the loss
                await relay.send("n1", b"lost")
                await trio.sleep(0.05)
        await redis.start()
        with trio.fail_after(10):
            while b"back" not in got:
                try:
                    await relay.send("n1", b"back")
                except RelayUnavailable:
                    pass
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
