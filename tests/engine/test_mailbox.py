"""``Mailbox``: an unbounded memory channel's behaviour for one sender and one receiver."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp._mailbox import Mailbox


async def test_items_come_out_in_order_and_a_waiting_receiver_wakes_for_the_first() -> None:
    box: Mailbox[int] = Mailbox()
    got: list[int] = []

    async def receiver() -> None:
        for _ in range(3):
            got.append(await box.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        assert got == [] and len(box) == 0 and not box.ready()
        box.send_nowait(1)
        await trio.testing.wait_all_tasks_blocked()
        assert got == [1]
        box.send_nowait(2)
        box.send_nowait(3)
        assert len(box) == 2 and box.ready()
    assert got == [1, 2, 3] and len(box) == 0


async def test_a_close_hands_over_what_came_before_it_then_the_end() -> None:
    box: Mailbox[str] = Mailbox()
    box.send_nowait("last words")
    box.close()
    assert box.ready()
    assert await box.receive() == "last words"
    with pytest.raises(trio.EndOfChannel):
        await box.receive()
    with pytest.raises(trio.ClosedResourceError):
        box.send_nowait("too late")


async def test_a_receiver_waiting_on_an_empty_box_wakes_at_the_close() -> None:
    box: Mailbox[str] = Mailbox()
    ended: list[str] = []

    async def receiver() -> None:
        with pytest.raises(trio.EndOfChannel):
            await box.receive()
        ended.append("ended")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.testing.wait_all_tasks_blocked()
        box.close()
    assert ended == ["ended"]


async def test_a_cancelled_receiver_leaves_nothing_behind_and_the_next_gets_the_item() -> None:
    box: Mailbox[int] = Mailbox()
    cancelled: list[bool] = []

    async def receiver(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await box.receive()
        cancelled.append(scope.cancelled_caught)

    async with trio.open_nursery() as nursery:
        scope = await nursery.start(receiver)
        await trio.testing.wait_all_tasks_blocked()  # parked in the box
        scope.cancel()
    assert cancelled == [True]
    box.send_nowait(7)  # wakes nobody: the cancelled receiver is gone
    assert await box.receive() == 7


async def test_receive_is_a_checkpoint_even_with_an_item_ready() -> None:
    box: Mailbox[int] = Mailbox()
    box.send_nowait(1)
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await box.receive()
    assert len(box) == 1  # a cancelled receive took nothing
    assert box.receive_nowait() == 1
    with pytest.raises(trio.WouldBlock):
        box.receive_nowait()
