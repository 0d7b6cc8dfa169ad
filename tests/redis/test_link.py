"""The Redis link the stores share: its faults as the store's own error, and redaction."""

from __future__ import annotations

from pathlib import Path

import anyio
import coredis.exceptions
import pytest
import trio

from trio_mcp.http import EventStoreUnavailable
from trio_mcp.redis import RedisEventStore
from trio_mcp.redis._link import RedisLink, reason, redact

from .._ports import free_port
from ..deploy._services import redis_server


class Down(Exception):
    pass


def a_link(url: str = "redis://probe:hunter2@127.0.0.1:1/0", timeout: float = 5.0) -> RedisLink:
    return RedisLink(url, what="the probe store", unavailable=Down, timeout=timeout)


def test_redact_hides_only_the_password() -> None:
    assert redact("redis://user:s3cret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redact("redis://:s3cret@[::1]:6379") == "redis://:***@[::1]:6379"
    assert redact("redis://host:6379/0") == "redis://host:6379/0"
    assert redact("redis://[::1") == "<an unparsable Redis URL>"


def test_reason_is_the_innermost_message() -> None:
    assert reason(ExceptionGroup("outer", [OSError("refused")])) == "refused"
    assert reason(trio.TooSlowError()) == "no answer in time"
    assert reason(ValueError()) == "ValueError"


def test_a_link_not_started_says_so_without_the_password() -> None:
    link = a_link()
    assert not link.started
    with pytest.raises(Down) as raised:
        _ = link.client
    assert str(raised.value) == (
        "the probe store's Redis at redis://probe:***@127.0.0.1:1/0 is not started"
    )


@pytest.mark.parametrize(
    "error",
    [
        OSError("refused"),
        coredis.exceptions.ConnectionError("refused"),
        anyio.ClosedResourceError(),
        anyio.BrokenResourceError(),
        ExceptionGroup("outer", [OSError("refused")]),
    ],
)
async def test_every_failure_to_talk_to_redis_is_the_stores_error(error: Exception) -> None:
    with pytest.raises(Down) as raised:
        async with a_link().errors():
            raise error
    message = str(raised.value)
    assert message.startswith("the probe store's Redis at redis://probe:***@127.0.0.1:1/0 failed: ")
    assert "hunter2" not in message


async def test_a_redis_that_does_not_answer_in_time_is_the_stores_error(
    autojump_clock: trio.abc.Clock,
) -> None:
    with pytest.raises(Down, match="failed: no answer in time"):
        async with a_link(timeout=1).errors():
            await trio.sleep_forever()


async def test_other_errors_pass_through() -> None:
    with pytest.raises(ValueError, match="a bug"):
        async with a_link().errors():
            raise ValueError("a bug")
    with pytest.raises(Down, match=r"^as raised$"):
        async with a_link().errors():
            raise Down("as raised")


async def test_a_started_link_answers_for_its_commands_as_one_not_started_does(
    tmp_path: Path,
) -> None:
    """Once started, every use goes through the hub's circuit, with one scope for the bound
    and the circuit: the same errors come out as before the start."""
    async with redis_server(tmp_path) as redis:
        link = a_link(redis.url, timeout=0.3)
        await link.start()
        try:
            async with link.errors():
                assert await link.client.ping()
            with pytest.raises(Down, match=r"failed: refused$"):
                async with link.errors():
                    raise OSError("refused")
            with pytest.raises(ValueError, match="a bug"):
                async with link.errors():
                    raise ValueError("a bug")
            began = trio.current_time()
            with pytest.raises(Down, match=r"failed: no answer in time$"):
                async with link.errors():
                    await trio.sleep(5)
            assert trio.current_time() - began < 2
            circuit = link.circuit
            assert circuit is not None and not circuit.open  # Redis answered the pings
        finally:
            await link.aclose()


async def test_a_command_in_flight_is_refused_when_the_circuit_opens(tmp_path: Path) -> None:
    async with redis_server(tmp_path) as redis:
        link = a_link(redis.url, timeout=30)
        await link.start()
        circuit = link.circuit
        assert circuit is not None
        refused: list[str] = []
        answered = trio.Event()

        async def in_flight() -> None:
            with pytest.raises(Down) as raised:
                async with link.errors():
                    await trio.sleep(30)  # a command on a Redis that hangs
            refused.append(str(raised.value))
            answered.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_flight)
                await trio.testing.wait_all_tasks_blocked()
                with trio.fail_after(5):  # not the command's 30 s
                    circuit.trip("it hangs")
                    await answered.wait()
            assert "refused at once" in refused[0] and "it hangs" in refused[0]
            # No watcher here: the next command pings first, and Redis answering closes it.
            async with link.errors():
                assert await link.client.ping()
            assert not circuit.open
        finally:
            await link.aclose()


async def test_start_against_no_redis_fails_without_the_password() -> None:
    link = a_link(f"redis://probe:hunter2@127.0.0.1:{free_port()}/0", timeout=2)
    with pytest.raises(Down) as raised:
        await link.start()
    message = str(raised.value)
    assert "cannot be reached" in message and "hunter2" not in message
    assert not link.started
    await link.aclose()  # closing a link that never started is a no-op


async def test_the_event_store_maps_a_connection_closed_under_it() -> None:
    store = RedisEventStore("redis://127.0.0.1:1/0")
    with pytest.raises(EventStoreUnavailable, match=r"the event store's Redis at .* failed"):
        async with store._errors():
            raise anyio.ClosedResourceError()
