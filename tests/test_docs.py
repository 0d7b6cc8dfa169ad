"""Every ```python block in docs/*.md works when pasted: each one is run as a real child process.

A block is a whole program (or a whole module), run from a file of its own in an empty
directory. Two conventions tie the pages to what the examples do:

- A block whose first line is a comment naming a file (``# server.py``) is that file: it is
  saved under that name beside every other block of its page, so that a later block can spawn
  or import it, as a reader who saved it would.
- A block states what it prints: after a ``# `` comment on each ``print(...)`` line, as the
  README does, or, for output too long for a comment, in a ```text block that follows it with
  nothing between but "It prints:". The output is asserted line by line; a block that states
  nothing must print nothing.

Each case is named after its page and the heading above the block, as a link to it
(``client.md#calls``), so a failure says which example broke.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from trio_mcp import Command, TextContent, open_client

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: A hang guard for one example, never a performance assertion.
TIMEOUT = 60

_FENCE = re.compile(r"^```(\S*)\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")
_FILE_NAME = re.compile(r"^#\s*([\w.-]+\.py)\s*$")
_PRINT = re.compile(r"^\s*print\(")
_STATED = re.compile(r"\)  # (.*)$")


@attrs.frozen
class Example:
    page: str
    anchor: str
    code: str
    #: The name the page gives the block (``# server.py``), if any.
    file_name: str | None
    #: What the ```text block after it says it prints, line by line, if one follows it.
    printed: tuple[str, ...] | None

    @property
    def id(self) -> str:
        return f"{self.page}#{self.anchor}"


def anchor(heading: str) -> str:
    """The link fragment of a heading, as the usual Markdown renderers make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@attrs.frozen
class Block:
    heading: str
    language: str
    code: str
    #: Whether the next block follows this one with nothing between but "It prints:".
    adjacent: bool = False


def fenced_blocks(text: str) -> list[Block]:
    """The fenced blocks of a page, each with the heading above it."""
    blocks: list[Block] = []
    heading = ""
    gap: list[str] = []
    lines = iter(text.splitlines())
    for line in lines:
        fence = _FENCE.match(line)
        if fence is None:
            found = _HEADING.match(line)
            if found is not None:
                heading = found.group(1)
            gap.append(line)
            continue
        if blocks and "".join(gap).strip() in ("", "It prints:"):
            blocks[-1] = attrs.evolve(blocks[-1], adjacent=True)
        body: list[str] = []
        for inner in lines:
            if inner.startswith("```"):
                break
            body.append(inner)
        blocks.append(Block(heading, fence.group(1), "\n".join(body) + "\n"))
        gap = []
    return blocks


def stated_output(code: str) -> tuple[str, ...]:
    """What the ``# `` comments on the print lines say; every print line must have one."""
    stated = []
    for line in code.splitlines():
        if _PRINT.match(line):
            found = _STATED.search(line)
            assert found is not None, f"this print does not say what it prints: {line.strip()}"
            stated.append(found.group(1))
    return tuple(stated)


def examples() -> list[Example]:
    found: list[Example] = []
    seen: dict[str, int] = {}
    for page in sorted(DOCS.glob("*.md")):
        blocks = fenced_blocks(page.read_text())
        for index, block in enumerate(blocks):
            if block.language != "python":
                continue
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            printed = None
            if block.adjacent and after is not None and after.language == "text":
                printed = tuple(after.code.splitlines())
            first = block.code.splitlines()[0] if block.code.strip() else ""
            named = _FILE_NAME.match(first)
            key = f"{page.name}#{anchor(block.heading)}"
            seen[key] = seen.get(key, 0) + 1
            fragment = anchor(block.heading) + (f"-{seen[key]}" if seen[key] > 1 else "")
            found.append(
                Example(page.name, fragment, block.code, named.group(1) if named else None, printed)
            )
    return found


EXAMPLES = examples()


def test_every_page_has_its_examples() -> None:
    pages = {
        "auth.md",
        "cancellation.md",
        "cli.md",
        "client.md",
        "components.md",
        "composition.md",
        "http.md",
        "lifespan.md",
        "middleware.md",
        "modern.md",
        "proxies.md",
        "server.md",
        "stdio.md",
        "testing.md",
    }
    assert {example.page for example in EXAMPLES} >= pages


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.id for example in EXAMPLES])
def test_the_example_runs_as_pasted(example: Example, tmp_path: Path) -> None:
    expected = example.printed if example.printed is not None else stated_output(example.code)
    elided = [line for line in example.code.splitlines() if line.strip() == "..."]
    assert not elided, "an example is a whole program, not an outline with ... in it"
    for other in EXAMPLES:
        if other.page == example.page and other.file_name is not None:
            (tmp_path / other.file_name).write_text(other.code)
    script = tmp_path / (example.file_name or "example.py")
    script.write_text(example.code)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,  # a stdio server reads end of input at once, and returns
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert tuple(done.stdout.splitlines()) == expected, done.stderr


async def test_the_stdio_module_is_served_by_the_command_beside_it(tmp_path: Path) -> None:
    """stdio.md's server.py, served as the page says a host can: ``trio-mcp serve server:server``
    (``python -m trio_mcp`` is the same command), spawned and called."""
    assert "trio-mcp serve server:server" in (DOCS / "stdio.md").read_text()
    (module,) = [e for e in EXAMPLES if e.page == "stdio.md" and e.file_name == "server.py"]
    (tmp_path / "server.py").write_text(module.code)
    command = [sys.executable, "-m", "trio_mcp", "serve", "server:server"]
    with trio.fail_after(TIMEOUT):
        async with open_client(Command(command, env={"MCP_USER": "ada"}, cwd=tmp_path)) as client:
            result = await client.call_tool("whoami")
    assert result.content == [TextContent("ada")]


def test_every_test_that_security_md_names_exists() -> None:
    """docs/security.md says which test checks each promise: a renamed or deleted test, or a
    moved module, fails here instead of leaving the page pointing at nothing."""
    text = (DOCS / "security.md").read_text()
    tests = DOCS.parent / "tests"
    sources = {path: path.read_text() for path in tests.rglob("*.py")}
    modules = {path.stem for path in sources}
    for named in sorted(set(re.findall(r"`(tests/[\w/]+\.py)", text))):
        assert (DOCS.parent / named).is_file(), f"security.md names a missing module {named}"
    names = set(re.findall(r"\b(test_\w*[a-z0-9])\b", text)) - modules
    assert len(names) > 40, "security.md should name the tests behind its promises"
    defined = re.compile(r"^(?:async )?def (test_\w+)\(", re.M)
    everywhere = {name for source in sources.values() for name in defined.findall(source)}
    assert sorted(names - everywhere) == []
