"""requestState across real processes: two hypercorn workers (``trio-mcp serve ... --transport
http``) given the same keys accept each other's states, so a multi round-trip retry may reach
either; with different keys the other worker refuses it. Keys come from ``TRIO_MCP_STATE_KEYS``
or ``--state-key-file``, as a deployment gives them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import trio

from .._ports import free_port
from ._services import START_GUARD, STOP_GUARD

ROOT = Path(__file__).resolve().parents[2]
ASKING = ROOT / "tests" / "servers" / "asking_server.py"
KEYS_ENV, FILE_ENV = "TRIO_MCP_STATE_KEYS", "TRIO_MCP_STATE_KEYS_FILE"
ONE, TWO, NEW = b"1" * 32, b"2" * 32, b"n" * 32
SERVE = [sys.executable, "-m", "trio_mcp", "serve", str(ASKING), "--transport", "http"]
ANSWER = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}


def child_env(**variables: str) -> dict[str, str]:
    """This environment without any state keys of its own, this checkout importable, plus
    ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in (KEYS_ENV, FILE_ENV)}
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
    return {**env, **variables}


async def _listening(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True


@asynccontextmanager
async def worker(
    directory: Path, *options: str, keys: list[bytes] | None = None
) -> AsyncIterator[str]:
    """A real ``trio-mcp serve`` process on hypercorn at a free loopback port; its URL.
    ``keys``: its ``TRIO_MCP_STATE_KEYS`` (hex, newest first)."""
    port = free_port()
    env = child_env(**({KEYS_ENV: ",".join(k.hex() for k in keys)} if keys else {}))
    log = directory / f"worker-{port}.log"
    with log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [*SERVE, "--port", str(port), *options],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        with trio.fail_after(START_GUARD):
            while not await _listening(port):
                assert process.poll() is None, log.read_text()
                await trio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(STOP_GUARD):
                await process.wait()
            if process.poll() is None:
                process.kill()
                await process.wait()


async def greet(
    client: httpx.AsyncClient, url: str, extra: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """A modern ``tools/call greet`` POST; its status and JSON-RPC response."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "greet", "_meta": meta, **(extra or {})},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "greet",
    }
    response = await client.post(url, json=body, headers=headers)
    reply: dict[str, Any] = response.json()
    return response.status_code, reply


async def asked_state(client: httpx.AsyncClient, url: str) -> str:
    status, asked = await greet(client, url)
    assert status == 200 and asked["result"]["resultType"] == "input_required", asked
    state: str = asked["result"]["requestState"]
    return state


async def retry(client: httpx.AsyncClient, url: str, state: str) -> tuple[int, dict[str, Any]]:
    return await greet(client, url, {"requestState": state, "inputResponses": ANSWER})


def greeted(reply: tuple[int, dict[str, Any]]) -> str:
    status, answer = reply
    assert status == 200, answer
    text: str = answer["result"]["content"][0]["text"]
    return text


def refused(reply: tuple[int, dict[str, Any]]) -> bool:
    status, answer = reply
    return (
        status == 400
        and answer["error"]["code"] == -32602
        and "requestState is not valid" in answer["error"]["message"]
    )


async def test_a_retry_on_the_other_worker_is_accepted_when_both_have_the_same_keys(
    tmp_path: Path,
) -> None:
    async with (
        worker(tmp_path, keys=[ONE]) as first,
        worker(tmp_path, keys=[ONE]) as second,
        httpx.AsyncClient(timeout=START_GUARD) as client,
    ):
        state = await asked_state(client, first)
        assert greeted(await retry(client, second, state)) == "Hello Ada"
        state = await asked_state(client, second)
        assert greeted(await retry(client, first, state)) == "Hello Ada"


async def test_a_retry_on_a_worker_with_other_keys_is_refused(tmp_path: Path) -> None:
    async with (
        worker(tmp_path, keys=[ONE]) as first,
        worker(tmp_path, keys=[TWO]) as second,
        worker(tmp_path) as random_key,
        httpx.AsyncClient(timeout=START_GUARD) as client,
    ):
        state = await asked_state(client, first)
        assert refused(await retry(client, second, state))
        assert refused(await retry(client, random_key, state))
        assert refused(await retry(client, first, await asked_state(client, random_key)))
        assert greeted(await retry(client, first, state)) == "Hello Ada"


async def test_a_key_file_on_the_command_line_and_a_rolling_rotation(tmp_path: Path) -> None:
    """Step 1 gives every worker the new key second (it opens, it does not seal yet); step 2
    puts it first: during the rollout each worker opens what any other sealed."""
    step_one, step_two = tmp_path / "step-one.keys", tmp_path / "step-two.keys"
    step_one.write_text(f"# current key first\n{ONE.hex()}\n# the next one\n{NEW.hex()}\n")
    step_two.write_text(f"{NEW.hex()}\n# until the states it sealed expired (600 s)\n{ONE.hex()}\n")
    async with (
        worker(tmp_path, keys=[ONE]) as old,
        worker(tmp_path, "--state-key-file", str(step_one)) as rolled,
        worker(tmp_path, "--state-key-file", str(step_two)) as rotated,
        httpx.AsyncClient(timeout=START_GUARD) as client,
    ):
        for sealer in (old, rolled, rotated):
            state = await asked_state(client, sealer)
            assert greeted(await retry(client, rolled, state)) == "Hello Ada"
            assert greeted(await retry(client, rotated, state)) == "Hello Ada"
        # Only a worker that never got the new key refuses what the rotated one sealed.
        assert refused(await retry(client, old, await asked_state(client, rotated)))


async def test_a_bad_key_file_stops_the_worker_at_start_naming_the_line(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    short = "ab" * 10
    keys.write_text(f"{ONE.hex()}\n# too short:\n{short}\n")
    done = await trio.run_process(
        [*SERVE, "--port", str(free_port()), "--state-key-file", str(keys)],
        env=child_env(),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "keys.txt', line 3: the key is 10 bytes" in stderr
    assert short not in stderr and ONE.hex() not in stderr
    # The same from the environment: the variable and the key's place are named, never the key.
    done = await trio.run_process(
        [sys.executable, "-m", "trio_mcp", "demo", "--transport", "http", "--port", "0"],
        env=child_env(**{KEYS_ENV: f"{ONE.hex()},{short}"}),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"{KEYS_ENV}: key 2: the key is 10 bytes" in stderr
    assert short not in stderr and ONE.hex() not in stderr
