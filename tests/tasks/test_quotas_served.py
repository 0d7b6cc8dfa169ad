"""The per-principal task quota through the real path: ``trio-mcp serve`` in a child process on
127.0.0.1, protected by ``--auth-issuer`` (oidc-provider's signed JWTs for two real users),
limited by ``--max-tasks-per-principal``, driven by our client over Streamable HTTP with each
user's bearer token. One principal fills its quota with tasks parked on a question nobody
answers; the next is refused with -32000, and the other principal still gets a task.

Times are hang guards, never performance assertions.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import HttpTarget, ProtocolError, open_client
from trio_mcp.client import Client
from trio_mcp.protocol import RATE_LIMITED
from trio_mcp.tasks import ToolTask

from ..auth._oidc import BOB, oidc_provider
from ..interop._http_support import start_server

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "servers" / "quota_server.py"
CLI = [sys.executable, "-m", "trio_mcp"]
#: A hang guard for the whole test (an authorization server, a served child, two sign-ins).
GUARD = 60
CAP = 3


@asynccontextmanager
async def signed_in(url: str, token: str) -> AsyncIterator[Client]:
    """Our client for one principal: its bearer token on every request; it declares
    elicitation and never answers (a task handle is not followed unless awaited)."""

    async def never(params: Any) -> Any:
        await trio.sleep_forever()

    target = HttpTarget(url, headers={"Authorization": f"Bearer {token}"})
    async with open_client(target, mode="modern", on_elicit=never) as client:
        yield client


async def parked(task: ToolTask) -> ToolTask:
    """``task`` once it waits for its answer (it asks after its creation)."""
    while await task.refresh() != "input_required":  # noqa: ASYNC110 - polling, as a client does
        await trio.sleep(0.02)
    return task


async def test_a_served_principal_at_its_cap_is_refused_and_another_is_not(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider() as op:
            command = [*CLI, "serve", str(SERVER), "--transport", "http", "--port", "0"]
            command += ["--auth-issuer", op.issuer, "--max-tasks-per-principal", str(CAP)]
            command += ["--drain-grace", "1", "--shutdown-grace", "1"]
            server = await start_server(nursery, command)
            alice_token = await op.token(server.url)
            bob_token = await op.token(server.url, user=BOB)
            async with (
                signed_in(server.url, alice_token) as alice,
                signed_in(server.url, bob_token) as bob,
            ):
                for _ in range(CAP):
                    await parked(await alice.call_tool_task("hold"))
                with pytest.raises(ProtocolError) as refused:
                    await alice.call_tool_task("hold")
                assert refused.value.code == RATE_LIMITED == -32000
                assert refused.value.message.startswith(
                    f"Task quota reached: this principal already has {CAP} tasks"
                )
                assert refused.value.data == {"maxTasksPerPrincipal": CAP}
                # Alice's full quota leaves Bob his: the process-wide limit (1000) is far off.
                await parked(await bob.call_tool_task("hold"))
            assert await server.stop() == 0
    logged = "\n".join(server.lines)
    assert alice_token not in logged
    assert bob_token not in logged
