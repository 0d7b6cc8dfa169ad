"""The fleet's limits and single-use claims on a real redis-server: leases counted under a cap
by several stores at once, lapsing when renewed no more; token buckets shared by stores; claims
that win once; keys that hold digests only, each one hash tag; and the in-memory versions
holding the same contract."""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp.http import LimitStoreUnavailable, MemoryLimitStore
from trio_mcp.redis import RedisLimitStore, RedisStateClaims
from trio_mcp.server import StateClaimsUnavailable

from .._ports import free_port
from ..deploy._services import redis_server


@asynccontextmanager
async def started(store: Any) -> AsyncIterator[Any]:
    await store.start()
    try:
        yield store
    finally:
        await store.aclose()


async def redis_keys(url: str) -> list[str]:
    import coredis

    client = coredis.Redis.from_url(url, decode_responses=True)
    async with client:
        return sorted(await client.keys("*"))


async def test_racing_stores_never_take_more_leases_than_the_cap(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        started(RedisLimitStore(redis.url)) as one,
        started(RedisLimitStore(redis.url)) as two,
    ):
        taken: list[bool] = []

        async def take(store: RedisLimitStore, lease: str) -> None:
            taken.append(await store.acquire("sessions:alice", lease, 5, 30.0))

        async with trio.open_nursery() as nursery:
            for number in range(20):
                nursery.start_soon(take, one if number % 2 else two, f"lease-{number}")
        assert taken.count(True) == 5
        # Another client has a count of its own; a release makes room again.
        assert await one.acquire("sessions:bob", "b", 5, 30.0)
        held = [f"lease-{n}" for n in range(20)]
        for lease in held:
            await two.release("sessions:alice", lease)
        assert await one.acquire("sessions:alice", "again", 5, 30.0)


async def test_a_lease_renewed_no_more_lapses_and_a_renewed_one_stays(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis, started(RedisLimitStore(redis.url)) as store:
        assert await store.acquire("sessions:alice", "kept", 2, 0.3)
        assert await store.acquire("sessions:alice", "dead", 2, 0.3)
        assert not await store.acquire("sessions:alice", "third", 2, 0.3)
        # Renewed on and on, "kept" stays; "dead" (its worker gone) lapses on Redis's clock.
        for _ in range(4):
            await trio.sleep(0.15)
            await store.renew("sessions:alice", ["kept"], 0.3)
        assert await store.acquire("sessions:alice", "third", 2, 0.3)
        assert not await store.acquire("sessions:alice", "fourth", 2, 0.3)


async def test_a_bucket_is_shared_by_stores_and_says_how_long_to_wait(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        started(RedisLimitStore(redis.url)) as one,
        started(RedisLimitStore(redis.url)) as two,
    ):
        # A tiny refill rate: nothing comes back during the test.
        waits = [await (one if n % 2 else two).take("rate:alice", 0.001, 3) for n in range(6)]
        assert waits[:3] == [0.0, 0.0, 0.0]
        assert all(wait > 900 for wait in waits[3:])  # ~1000 s for one token at 0.001/s
        assert await one.take("rate:bob", 0.001, 3) == 0.0
        # A fast bucket refills.
        assert await one.take("rate:carol", 50.0, 1) == 0.0
        assert 0 < await two.take("rate:carol", 50.0, 1) <= 0.03
        await trio.sleep(0.05)
        assert await two.take("rate:carol", 50.0, 1) == 0.0


async def test_keys_are_one_hash_tag_each_and_hold_no_client_key(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        started(RedisLimitStore(redis.url)) as limits,
        started(RedisStateClaims(redis.url)) as claims,
    ):
        await limits.acquire("sessions:principal:alice@example", "l", 1, 30.0)
        await limits.take("tool-rate:10.0.0.7\x00pay", 1.0, 1)
        digest = hashlib.sha256(b"v1.abc.sealed").hexdigest()
        assert await claims.claim(digest, 30.0)
        keys = await redis_keys(redis.url)
    assert len(keys) == 3
    for key in keys:
        assert re.fullmatch(r"trio_mcp:\{[0-9a-f]{64}\}:[a-z-]+", key), key
        assert "alice" not in key and "10.0.0.7" not in key and "pay" not in key
    assert {key.rsplit(":", 1)[1] for key in keys} == {"sessions", "tool-rate", "rs"}


async def test_a_claim_wins_once_across_stores_and_lapses_with_the_state(tmp_path: Path) -> None:
    async with (
        redis_server(tmp_path) as redis,
        started(RedisStateClaims(redis.url)) as one,
        started(RedisStateClaims(redis.url)) as two,
    ):
        won: list[bool] = []

        async def claim(store: RedisStateClaims) -> None:
            won.append(await store.claim("d" * 64, 0.3))

        async with trio.open_nursery() as nursery:
            for number in range(10):
                nursery.start_soon(claim, one if number % 2 else two)
        assert won.count(True) == 1
        await trio.sleep(0.4)
        assert await two.claim("d" * 64, 0.3)  # the state is dead by now: nothing to guard


async def test_an_unreachable_redis_fails_the_start_naming_it_without_password() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(LimitStoreUnavailable) as limits_error:
        await RedisLimitStore(url, timeout=1.0).start()
    with pytest.raises(StateClaimsUnavailable) as claims_error:
        await RedisStateClaims(url, timeout=1.0).start()
    for error in (limits_error.value, claims_error.value):
        assert "hunter2" not in str(error) and "127.0.0.1" in str(error)


async def test_the_memory_limit_store_holds_the_same_contract(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryLimitStore()
    assert await store.acquire("sessions:a", "1", 2, 30.0)
    assert await store.acquire("sessions:a", "2", 2, 30.0)
    assert not await store.acquire("sessions:a", "3", 2, 30.0)
    await store.release("sessions:a", "1")
    assert await store.acquire("sessions:a", "3", 2, 30.0)
    await trio.sleep(20)
    await store.renew("sessions:a", ["3"], 30.0)
    await trio.sleep(20)  # "2" lapsed, "3" was renewed
    assert store.held("sessions:a") == 1
    assert await store.take("rate:a", 1.0, 2) == 0.0
    assert await store.take("rate:a", 1.0, 2) == 0.0
    assert await store.take("rate:a", 1.0, 2) == pytest.approx(1.0)
    await trio.sleep(1.0)
    assert await store.take("rate:a", 1.0, 2) == 0.0
