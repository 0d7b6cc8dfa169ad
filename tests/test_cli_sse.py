"""``trio-mcp demo --transport sse`` and the URL commands on an HTTP+SSE target, for real."""

from __future__ import annotations

import signal
import subprocess

import trio

from .test_cli import CLI, DEMO_LINE, GUARD, child_env, run_cli, served_url


async def test_the_demo_over_sse_and_the_url_commands_on_it() -> None:
    with trio.fail_after(GUARD):
        process = await trio.lowlevel.open_process(
            [*CLI, "demo", "--transport", "sse", "--port", "0"],
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        try:
            url = await served_url(process, rb"/sse")
            assert url.startswith("http://127.0.0.1:"), url
            listed = await trio.to_thread.run_sync(run_cli, "tools", url, "--transport", "sse")
            assert listed.returncode == 0, listed.stderr
            assert "add" in listed.stdout and "sleep" in listed.stdout
            # With no --transport the Streamable HTTP attempt is refused (405), and the
            # client falls back to HTTP+SSE.
            called = await trio.to_thread.run_sync(run_cli, "call", url, "add", "a=1", "b=2")
            assert called.returncode == 0, called.stderr
            assert called.stdout == "3\n"
            only = await trio.to_thread.run_sync(
                run_cli, "tools", url, "--transport", "streamable-http"
            )
            assert only.returncode == 1
            assert "transport='sse'" in only.stderr
            wrong = await trio.to_thread.run_sync(run_cli, "tools", DEMO_LINE, "--transport", "sse")
            assert wrong.returncode == 2
            assert wrong.stderr == "trio-mcp: --transport is for an http(s):// TARGET\n"
        finally:
            process.send_signal(signal.SIGINT)  # a graceful shutdown
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0
