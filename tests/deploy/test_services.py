"""The real services of the scale-out tests start, answer and stop."""

from __future__ import annotations

from pathlib import Path

import coredis
import pytest
import trio

from ._services import redis_server


async def test_a_real_redis_server_answers_coredis_under_trio_and_stops(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        client = coredis.Redis.from_url(redis.url, decode_responses=True)
        async with client:
            assert await client.ping()
            await client.set("k", "v")
            assert await client.get("k") == "v"
        await redis.stop()
        with pytest.raises(OSError):
            await trio.open_tcp_stream("127.0.0.1", redis.port)
        await redis.start()
        client = coredis.Redis.from_url(redis.url, decode_responses=True)
        async with client:
            assert await client.get("k") is None  # nothing persisted: a fresh server
