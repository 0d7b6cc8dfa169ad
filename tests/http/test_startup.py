"""A start is all or nothing: whatever fails before the app serves fails its ASGI lifespan
(``lifespan.startup.failed``, never an exception an ASGI server would shrug off and serve
without), with a message that names what and where and nothing internal; ``serve_http``
binds no port for an app that did not start. Readiness asks the stores (bounded); liveness
asks nothing. The real-Redis versions of these are in tests/redis/test_startup.py."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.utils import LifespanFailureError

from trio_mcp import Server
from trio_mcp._exception_groups import single_error
from trio_mcp.http import HttpOptions, serve_http
from trio_mcp.tasks import MemoryTaskStore, TaskStoreUnavailable

from .._http import GUARD, serving
from .._ports import free_port


class FailingStore(MemoryTaskStore):
    """A hosted task store whose start raises ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def start(self) -> None:
        raise self.error

    async def run(self) -> None:
        await trio.sleep_forever()

    async def aclose(self) -> None:
        pass


class Probed(MemoryTaskStore):
    """A task store with a readiness probe the test controls: fine, failing, or hanging."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "fine"

    async def probe(self) -> None:
        if self.mode == "failing":
            raise TaskStoreUnavailable("the task store's database at db://tasks is gone")
        if self.mode == "hanging":
            await trio.sleep_forever()


async def lifespan_messages(server: Server) -> tuple[list[dict[str, Any]], BaseException]:
    """Serve ``server`` with plain hypercorn (it runs the ASGI lifespan); what the app sent on
    it, and what hypercorn's serve raised."""
    app = server.http_app()
    sent: list[dict[str, Any]] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        async def record(message: Any) -> None:
            if scope["type"] == "lifespan":
                sent.append(message)
            await send(message)

        await app(scope, receive, record)

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    with trio.fail_after(GUARD), pytest.raises(BaseException) as raised:
        await serve(recording, config, shutdown_trigger=trio.sleep_forever)
    return sent, raised.value


async def test_a_store_that_cannot_start_fails_the_lifespan_with_its_message() -> None:
    unavailable = TaskStoreUnavailable("the task store's Redis at redis://:***@db:6379/0 is gone")
    sent, raised = await lifespan_messages(Server("s", task_store=FailingStore(unavailable)))
    assert isinstance(single_error(raised), LifespanFailureError)
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "the task store's Redis at redis://:***@db:6379/0 is gone",
        }
    ]


async def test_any_other_start_failure_fails_the_lifespan_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fault = RuntimeError("internal detail: password=hunter2")
    sent, raised = await lifespan_messages(Server("s", task_store=FailingStore(fault)))
    assert isinstance(single_error(raised), LifespanFailureError)
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "the app failed to start (RuntimeError; see its log)",
        }
    ]
    # The details are the log's, where the operator looks.
    assert "hunter2" in caplog.text


async def test_serve_http_binds_nothing_for_an_app_that_cannot_start() -> None:
    unavailable = TaskStoreUnavailable("the task store's Redis at redis://db:6379/0 is gone")
    server = Server("s", task_store=FailingStore(unavailable))
    port = free_port()
    announced: list[list[str]] = []
    with trio.fail_after(GUARD), pytest.raises(BaseException) as raised:
        await serve_http(server, port=port, on_ready=announced.append)
    assert single_error(raised.value) is unavailable
    assert announced == []
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)


async def test_a_lifespan_held_by_the_host_is_acknowledged_not_started_twice() -> None:
    server = Server("s")
    app = server.http_app()
    async with app.running():
        nursery = app.registry.nursery
        to_app, from_test = trio.open_memory_channel[dict[str, Any]](2)
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        await to_app.send({"type": "lifespan.startup"})
        await to_app.send({"type": "lifespan.shutdown"})
        with trio.fail_after(GUARD):
            await app({"type": "lifespan"}, from_test.receive, send)
        assert [m["type"] for m in sent] == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]
        assert app.registry.nursery is nursery  # still the host's, still serving
        assert app.ready


async def test_ready_asks_the_stores_bounded_and_live_asks_nothing() -> None:
    store = Probed()
    server = Server("s", task_store=store)
    async with serving(server, HttpOptions(ready_timeout=0.2)) as served:
        ready, live = served.base + "/ready", served.base + "/live"
        assert (await served.client.get(ready)).json() == {"status": "ready"}
        for mode in ("failing", "hanging"):
            store.mode = mode
            with trio.fail_after(GUARD):
                # Polled over HTTP, as a load balancer would.
                while (answer := await served.client.get(ready)).status_code != 503:  # noqa: ASYNC110
                    await trio.sleep(0.1)
            assert answer.json() == {"status": "unavailable"}
            assert "db://" not in answer.text  # what is wrong goes to the log only
            live_answer = await served.client.get(live)
            assert (live_answer.status_code, live_answer.json()) == (200, {"status": "live"})
            store.mode = "fine"
            with trio.fail_after(GUARD):
                while (await served.client.get(ready)).status_code != 200:  # noqa: ASYNC110
                    await trio.sleep(0.1)
        assert (await served.client.post(live)).status_code == 405


async def test_live_answers_while_draining_and_ready_does_not() -> None:
    async with serving(Server("s")) as served:
        served.app.begin_drain()
        assert (await served.client.get(served.base + "/ready")).status_code == 503
        assert (await served.client.get(served.base + "/live")).status_code == 200


async def test_live_path_none_serves_no_such_path() -> None:
    async with serving(Server("s"), HttpOptions(live_path=None)) as served:
        assert (await served.client.get(served.base + "/live")).status_code == 404


async def test_readiness_probes_are_shared_and_kept_for_a_moment() -> None:
    """A storm of probes costs each store one probe a second, not one each."""
    calls = 0

    class Counting(MemoryTaskStore):
        async def probe(self) -> None:
            nonlocal calls
            calls += 1
            await trio.sleep(0.05)

    async with (
        serving(Server("s", task_store=Counting())) as served,
        trio.open_nursery() as nursery,
    ):
        for _ in range(20):
            nursery.start_soon(functools.partial(served.client.get, served.base + "/ready"))
    assert 1 <= calls <= 2
