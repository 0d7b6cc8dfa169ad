"""protocol/ is sans-IO: it imports the standard library (no clocks, sockets, processes or event
loops), attrs, cattrs, orjson and cryptography (for requestState), and itself; nothing else."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import trio_mcp.protocol

THIRD_PARTY = {"attrs", "cattrs", "orjson", "cryptography"}
#: Standard modules that reach a clock, the network, processes, files or an event loop.
IO = {
    "asyncio",
    "datetime",
    "io",
    "os",
    "select",
    "selectors",
    "signal",
    "socket",
    "ssl",
    "subprocess",
    "threading",
    "time",
    "urllib",
    "http",
}
#: Submodules of an IO package that only compute (URL parsing for the OAuth formats).
PURE = {"urllib.parse"}


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module if node.module in PURE else node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level > 1:
            names.add("." * node.level + (node.module or ""))  # outside protocol/
    return names


def test_protocol_imports_nothing_that_does_io() -> None:
    package = Path(trio_mcp.protocol.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert len(modules) > 5
    for module in modules:
        names = imported(module) - {"__future__"}
        outside = {
            n
            for n in names
            if n not in sys.stdlib_module_names and n not in THIRD_PARTY and n not in PURE
        }
        assert not outside, (module.name, outside)
        assert not names & IO, (module.name, names & IO)
