"""``hypercorn --worker-class trio trio_mcp.demo:app``, exactly as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import trio

from trio_mcp import open_client

from .._ports import free_port


async def test_the_demo_app_under_the_hypercorn_command() -> None:
    port = free_port()
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-m",
            "hypercorn",
            "--worker-class",
            "trio",
            "--bind",
            f"127.0.0.1:{port}",
            "trio_mcp.demo:app",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(60):
            assert process.stderr is not None
            seen = b""
            while b"Running on" not in seen:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"hypercorn ended early: {seen.decode(errors='replace')}"
                seen += chunk
            url = f"http://127.0.0.1:{port}/mcp"
            for mode in ("legacy", "modern"):
                async with open_client(url, mode=mode) as client:
                    assert client.server_info.name == "trio-mcp-demo"
                    added = await client.call_tool("add", {"a": 40, "b": 2})
                    assert added.structured_content == {"result": 42}
            os.kill(process.pid, signal.SIGINT)
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
