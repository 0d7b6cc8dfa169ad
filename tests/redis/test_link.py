"""The Redis link the stores share: its faults as the store's own error, and redaction."""

from __future__ import annotations

import anyio
import coredis.exceptions
import pytest
import trio

from trio_mcp.http import EventStoreUnavailable
from trio_mcp.redis import RedisEventStore
from trio_mcp.redis._link import RedisLink, reason, redact

from ..deploy._services import free_port


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
