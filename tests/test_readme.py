"""The README's quick start works when pasted: it is run as a real child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import trio

from trio_mcp import Command, open_client

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def quick_start_code() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"## Quick start\n\n```python\n(.*?)```", readme, re.S)
    assert found is not None, "the README lost its quick start"
    return found.group(1)


def test_the_example_file_is_the_readme_quick_start() -> None:
    example = (ROOT / "examples" / "quickstart.py").read_text()
    docstring, _, body = example.partition("\n\n")
    assert docstring.startswith('"""')
    assert body == quick_start_code()


def test_the_quick_start_runs_as_pasted(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quick_start_code())
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['add', 'countdown']",
        "{'result': 5}",
        "progress 1 3 step 1",
        "progress 2 3 step 2",
        "progress 3 3 step 3",
        "liftoff",
        "cancelled; the server was told",
    ]


# -- serving the quick start: the README's one command, as a real child process -------------------


def serve_commands() -> list[str]:
    """The README's commands that serve the quick start (``trio-mcp serve ...``)."""
    readme = (ROOT / "README.md").read_text()
    lines = re.findall(r"^(trio-mcp serve [^#`\n]*)", readme, re.M)
    return [line.strip() for line in lines]


def as_child(command: str, port: str | None = None) -> list[str]:
    """A README command run with this interpreter (``trio-mcp`` is ``python -m trio_mcp``)."""
    words = command.split()
    assert words[0] == "trio-mcp"
    if port is not None:
        words[words.index("--port") + 1] = port
    return [sys.executable, "-m", "trio_mcp", *words[1:]]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def pasted(tmp_path: Path) -> Path:
    (tmp_path / "quickstart.py").write_text(quick_start_code())
    return tmp_path


def test_the_readme_names_the_commands_that_serve_it() -> None:
    assert serve_commands() == [
        "trio-mcp serve quickstart:server",
        "trio-mcp serve quickstart:server --transport http --port 8000",
        "trio-mcp serve examples.quickstart:server",
    ]


async def test_the_quick_start_served_over_stdio_in_one_command(tmp_path: Path) -> None:
    stdio, _, in_repo = serve_commands()
    for command, cwd in ((stdio, pasted(tmp_path)), (in_repo, ROOT)):
        with trio.fail_after(60):
            async with open_client(Command(as_child(command), cwd=cwd, env=child_env())) as client:
                assert client.server_info.name == "demo"
                added = await client.call_tool("add", {"a": 2, "b": 3})
                assert added.structured_content == {"result": 5}


async def test_the_quick_start_served_over_http_in_one_command(tmp_path: Path) -> None:
    http = serve_commands()[1]
    process = await trio.lowlevel.open_process(
        as_child(http, port="0"),
        cwd=pasted(tmp_path),
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(60):
            assert process.stderr is not None and process.stdout is not None
            seen = b""
            while b"/mcp\n" not in seen:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, f"the server ended early: {seen.decode(errors='replace')}"
                seen += chunk
            url = re.search(rb"serving MCP at (\S+/mcp)", seen)
            assert url is not None, seen
            async with open_client(url.group(1).decode()) as client:
                result = await client.call_tool("countdown", {"n": 2})
                assert result.content[0].text == "liftoff"  # type: ignore[union-attr]
            os.kill(process.pid, signal.SIGINT)
            assert await process.wait() == 0
            # Serving imported the module without running its demo client.
            assert await process.stdout.receive_some(4096) == b""
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _lowest_node(spec: str) -> tuple[int, int, int]:
    """The lowest Node.js version an ``engines.node`` range admits (its least lower bound)."""
    found = [
        tuple(int(part or 0) for part in match)
        for match in re.findall(r"(?:>=|\^|~|=|\s|^)\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", spec)
    ]
    return min(found) if found else (0, 0, 0)  # type: ignore[return-value]


def test_the_readme_names_the_node_that_installs_the_npm_peers_without_warnings() -> None:
    lock = json.loads((ROOT / "package-lock.json").read_text())
    wanted = max(
        _lowest_node(str(entry["engines"]["node"]))
        for entry in lock["packages"].values()
        if isinstance(entry.get("engines"), dict) and "node" in entry["engines"]
    )
    stated = re.search(r"Node\.js (\d+)\.(\d+)\+ for a clean\s+`npm ci`", README.read_text())
    assert stated is not None, "the README names the Node.js that npm ci installs cleanly with"
    assert (int(stated[1]), int(stated[2]), 0) >= wanted, wanted
