"""``LazyEvent``: ``trio.Event``'s set, is_set and wait, with the event made only for a wait."""

from __future__ import annotations

import trio
import trio.testing

from trio_mcp._lazy_event import LazyEvent


async def test_a_wait_returns_once_the_event_is_set_and_not_before() -> None:
    event = LazyEvent()
    woke: list[str] = []

    async def waiter(name: str) -> None:
        await event.wait()
        woke.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "a")
        nursery.start_soon(waiter, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [] and not event.is_set()
        event.set()
    assert sorted(woke) == ["a", "b"] and event.is_set()


async def test_a_wait_on_a_set_event_is_a_checkpoint_that_returns() -> None:
    event = LazyEvent()
    event.set()
    event.set()  # setting twice changes nothing
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await event.wait()
        except trio.Cancelled:
            pass
        else:  # pragma: no cover - what this test guards against
            raise AssertionError("a wait on a set event must still be a checkpoint")
    await event.wait()
    assert event._event is None  # nobody ever waited while it was unset


async def test_nothing_is_made_until_a_task_waits() -> None:
    event = LazyEvent()
    assert event._event is None and not event.is_set()
    with trio.move_on_after(0):
        await event.wait()
    assert event._event is not None  # the cancelled wait made it; a later set still wakes
    event.set()
    assert event._event.is_set()
