"""Session stores: the contract, in memory and on a real redis-server."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from trio_mcp.http._session_store import (
    MemorySessionStore,
    SessionRecord,
    SessionStoreUnavailable,
)
from trio_mcp.redis._session_store import RedisSessionStore

from .._ports import free_port
from ..deploy._services import redis_server

RECORD = SessionRecord(
    "alice",
    "2025-06-18",
    {"name": "probe", "version": "1"},
    {"elicitation": {}},
    {"tools": {"listChanged": True}},
    "warning",
    frozenset({"file:///a", "file:///b"}),
)


@asynccontextmanager
async def a_store(
    kind: str, tmp_path: Path
) -> AsyncIterator[MemorySessionStore | RedisSessionStore]:
    if kind == "memory":
        yield MemorySessionStore()
        return
    async with redis_server(tmp_path) as redis:
        store = RedisSessionStore(redis.url)
        await store.start()
        try:
            yield store
        finally:
            await store.aclose()


def test_a_record_round_trips_and_refuses_what_is_not_one() -> None:
    assert SessionRecord.from_bytes(RECORD.to_bytes()) == RECORD
    for junk in (b"", b"[]", b'{"o": 1}', RECORD.to_bytes().replace(b'"alice"', b"7")):
        with pytest.raises(ValueError, match="not a session record"):
            SessionRecord.from_bytes(junk)


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_store_keeps_a_record_until_deleted(kind: str, tmp_path: Path) -> None:
    async with a_store(kind, tmp_path) as store:
        assert await store.get("s1") is None
        await store.put("s1", RECORD, 60)
        assert await store.get("s1") == RECORD
        changed = SessionRecord(
            "alice", "2025-06-18", {"name": "probe", "version": "1"}, {}, {}, None, frozenset()
        )
        await store.put("s1", changed, 60)
        assert await store.get("s1") == changed
        await store.delete("s1")
        assert await store.get("s1") is None
        assert await store.touch("s1", 60) is None  # nothing to touch: nothing comes back
        assert await store.get("s1") is None


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_record_expires_unless_touched(kind: str, tmp_path: Path) -> None:
    async with a_store(kind, tmp_path) as store:
        await store.put("kept", RECORD, 0.4)
        await store.put("left", RECORD, 0.4)
        await store.put("forever", RECORD, math.inf)
        for _ in range(3):
            await trio.sleep(0.2)
            assert await store.touch("kept", 0.4) == RECORD
        assert await store.get("kept") == RECORD
        assert await store.get("left") is None
        assert await store.get("forever") == RECORD


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_touch_many_reads_and_refreshes_each_record_in_order(
    kind: str, tmp_path: Path
) -> None:
    async with a_store(kind, tmp_path) as store:
        changed = attrs.evolve(RECORD, log_level="error")
        await store.put("a", RECORD, 0.4)
        await store.put("b", changed, 0.4)
        await store.put("left", RECORD, 0.4)
        assert await store.touch_many([], 0.4) == []
        for _ in range(3):
            await trio.sleep(0.2)
            got = await store.touch_many(["b", "missing", "a"], 0.4)
            assert got == [changed, None, RECORD]
        assert await store.get("left") is None
        assert await store.touch_many(["a"], math.inf) == [RECORD]
        await trio.sleep(0.5)
        assert await store.get("a") == RECORD  # no expiry any more


async def test_redis_down_at_start_is_a_clear_error_without_the_password() -> None:
    url = f"redis://probe:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(SessionStoreUnavailable) as raised:
        await RedisSessionStore(url).start()
    message = str(raised.value)
    assert "127.0.0.1" in message and "cannot be reached" in message
    assert "hunter2" not in message


async def test_redis_lost_mid_run_fails_clearly_and_recovers(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        store = RedisSessionStore(redis.url, timeout=2)
        await store.start()
        try:
            await store.put("s1", RECORD, 60)
            await redis.stop()
            with pytest.raises(SessionStoreUnavailable, match="failed"):
                await store.get("s1")
            await redis.start()
            await store.put("s2", RECORD, 60)
            assert await store.get("s2") == RECORD
        finally:
            await store.aclose()


@pytest.mark.parametrize("prefix", ["trio_mcp:", "other:"])
async def test_records_live_under_the_prefix(prefix: str, tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        mine, theirs = RedisSessionStore(redis.url, prefix=prefix), RedisSessionStore(redis.url)
        await mine.start()
        await theirs.start()
        try:
            await mine.put("s1", RECORD, 60)
            assert (await theirs.get("s1") == RECORD) is (prefix == "trio_mcp:")
        finally:
            await theirs.aclose()  # the last started first: each holds a nursery
            await mine.aclose()
