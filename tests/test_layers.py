"""The package's rooms and layers (docs/design.md), checked on its source.

Every import counts: at the top of a module, inside a function, under ``if TYPE_CHECKING:``. The
one exception is named in ``CONVENIENCES``: a method of a lower room that imports a binding above
it only when called (``Server.http_app()`` imports the HTTP room), never at module level.
Run ``python -m tests.test_layers`` to see the parts, the edges between them and any violation.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent

#: The parts in layer order: each imports only from the levels before its own. A part is named
#: by paths under trio_mcp/ (a folder ends in "/"); every top-level module that no other part
#: names is an entry point (__init__.py, lowlevel.py, _cli.py, __main__.py, _demo.py, demo.py).
LAYERS: list[dict[str, tuple[str, ...]]] = [
    # _version.py holds one constant and imports nothing: every layer may read it.
    {"protocol": ("protocol/", "_version.py")},
    {"transports": ("transports/",)},
    {"engine": ("_session.py", "_exception_groups.py")},
    # What a user writes a server against, and the client: neither knows HTTP, Redis or JOSE.
    {"server": ("server/",), "client": ("client/",)},
    # The resource server: the token verifiers and the HTTP gate.
    {"auth": ("auth/",)},
    # The ASGI binding: Streamable HTTP, HTTP+SSE, WebSocket, the stores a second worker shares.
    {"http": ("http/",)},
    # The only importer of the Redis client: the stores and the bus of the rooms below it.
    {"redis": ("redis/",)},
    {"entry points": ()},
]
#: Imports from a room to a binding above it, made only when a convenience method is called (or
#: under ``if TYPE_CHECKING:`` for its annotations), never when the module is imported: source
#: module -> the binding's modules it may name.
CONVENIENCES = {
    "trio_mcp/server/_server.py": {"trio_mcp/http/_binding.py", "trio_mcp/http/__init__.py"},
}
#: What importing the ``Server`` module alone must not load: the bindings and their libraries.
NOT_LOADED_BY_SERVER = (
    "trio_mcp.http",
    "trio_mcp.auth",
    "trio_mcp.redis",
    "hypercorn",
    "h11",
    "h2",
    "wsproto",
    "httpx",
    "httpcore",
    "coredis",
    "joserfc",
    "trio_websocket",
)
#: protocol/ is sans-IO: it imports itself, the standard library and these, and never NO_IO.
PROTOCOL_MAY_IMPORT = {"attrs", "cattrs", "orjson", "cryptography"}
NO_IO = {"trio", "httpx", "hypercorn", "socket", "asyncio", "time", "threading", "os", "select"}

LEVEL = {part: n for n, level in enumerate(LAYERS) for part in level}


class Import(NamedTuple):
    source: str  #: the importing module's path, like trio_mcp/server/_server.py
    target: str  #: the imported module's path if it is in the package, else its dotted name
    line: int
    eager: bool = True  #: made when the module is imported (not in a function, not type-only)


def _eager_nodes(tree: ast.Module) -> set[int]:
    """The ids of the import statements that run when the module is imported."""
    eager: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                eager.add(id(node))
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for part in (node.body, node.orelse, node.finalbody):
                    visit(part)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.With | ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return eager


def modules(root: Path = ROOT) -> dict[str, str]:
    """Every module of the package: dotted name -> path."""
    found = {}
    for path in sorted((root / "trio_mcp").rglob("*.py")):
        name = path.relative_to(root).with_suffix("").parts
        found[".".join(name[:-1] if name[-1] == "__init__" else name)] = str(
            path.relative_to(root).as_posix()
        )
    return found


def imports(root: Path = ROOT) -> list[Import]:
    names = modules(root)
    found: set[Import] = set()
    for module, path in names.items():
        package = module if path.endswith("/__init__.py") else module.rpartition(".")[0]
        tree = ast.parse((root / path).read_text(), path)
        eager = _eager_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: package.count(".") + 2 - node.level]
                    base = ".".join([*up, base] if base else up)
                # `from package import module` imports that module; `from module import name`
                # imports the module.
                targets = [f"{base}.{a.name}" for a in node.names]
                targets = [t if t in names else base for t in targets]
            else:
                continue
            now = id(node) in eager
            found |= {Import(path, names.get(t, t), node.lineno, now) for t in targets}
    return sorted(found, key=lambda i: (i.source, i.line, i.target))


def part_of(path: str) -> str | None:
    inside = path.removeprefix("trio_mcp/")
    for level in LAYERS:
        for part, names in level.items():
            if any(inside == n or (n.endswith("/") and inside.startswith(n)) for n in names):
                return part
    return "entry points" if "/" not in inside else None


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The groups of nodes that reach one another through ``edges``: each holds a circle."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    reached: dict[str, set[str]] = {}
    for node in list(graph):
        seen: set[str] = set()
        todo = [node]
        while todo:
            todo += graph.get(todo.pop(), set()) - seen
            seen |= set(todo)
        reached[node] = seen
    groups = {frozenset(m for m in reached[n] if n in reached.get(m, ())) for n in reached}
    return sorted(sorted(group) for group in groups if group)


def where(i: Import) -> str:
    return f"  {i.source}:{i.line} imports {i.target}"


def internal(root: Path = ROOT) -> list[Import]:
    return [i for i in imports(root) if i.target.startswith("trio_mcp/")]


def is_convenience(i: Import) -> bool:
    """A lazy import a convenience method makes of a binding above it (``CONVENIENCES``)."""
    return not i.eager and i.target in CONVENIENCES.get(i.source, ())


def layered() -> list[Import]:
    """The package's own imports less the declared conveniences."""
    return [i for i in internal() if not is_convenience(i)]


def part_edges() -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for i in layered():
        a, b = part_of(i.source), part_of(i.target)
        if a != b:
            edges[str(a), str(b)].append(i)
    return edges


def allowed(a: str, b: str) -> bool:
    return a in LEVEL and b in LEVEL and LEVEL[b] < LEVEL[a]


# -- the checks: each gives the offending edges ----------------------------------------------------


def module_circles() -> list[str]:
    found = layered()
    problems = []
    for group in circles({(i.source, i.target) for i in found}):
        problems.append("import circle: " + " <-> ".join(group))
        problems += [where(i) for i in found if i.source in group and i.target in group]
    return problems


def part_circles() -> list[str]:
    edges = part_edges()
    problems = []
    for group in circles(set(edges)):
        problems.append("circle between parts: " + " <-> ".join(group))
        for (a, b), found in sorted(edges.items()):
            if a in group and b in group:
                problems += [f" {a} -> {b}:", *map(where, found)]
    return problems


def layer_violations() -> list[str]:
    paths = modules().values()
    problems = [f"{p} belongs to no part: name it in LAYERS" for p in paths if not part_of(p)]
    for (a, b), found in sorted(part_edges().items()):
        if not allowed(a, b):
            problems += [f"{a} must not import {b}:", *map(where, found)]
    return problems


def protocol_violations() -> list[str]:
    outside = (set(sys.stdlib_module_names) | PROTOCOL_MAY_IMPORT) - NO_IO
    return [
        where(i)
        for i in imports()
        if part_of(i.source) == "protocol"
        and (
            part_of(i.target) != "protocol"
            if i.target.startswith("trio_mcp/")
            else i.target.split(".")[0] not in outside
        )
    ]


def convenience_violations() -> list[str]:
    """A declared convenience import made at module level is an ordinary (forbidden) edge."""
    return [
        where(i) + " at module level: a binding above may be imported only inside a method"
        for i in internal()
        if i.eager
        and i.target in CONVENIENCES.get(i.source, ())
        and not allowed(str(part_of(i.source)), str(part_of(i.target)))
    ]


def test_no_import_circle_between_modules() -> None:
    problems = module_circles()
    assert not problems, "\n".join(problems)


def test_no_circle_between_the_parts() -> None:
    problems = part_circles()
    assert not problems, "\n".join(problems)


def test_each_part_imports_only_from_the_parts_before_it() -> None:
    problems = layer_violations()
    assert not problems, "\n".join(problems)


def test_conveniences_import_their_binding_only_when_called() -> None:
    problems = convenience_violations()
    assert not problems, "\n".join(problems)
    lazy = [i for i in internal() if is_convenience(i)]
    assert {i.source for i in lazy} == set(CONVENIENCES), "a listed convenience no longer exists"


def test_the_server_module_alone_loads_no_binding() -> None:
    """In a fresh interpreter, ``import trio_mcp.server._server`` (and so ``import trio_mcp``)
    loads nothing of HTTP, hypercorn, h11, wsproto, Redis or JOSE."""
    code = "import sys, trio_mcp.server._server, trio_mcp\nprint('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    wrong = [
        m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_LOADED_BY_SERVER)
    ]
    assert not wrong, f"importing the Server module loaded {wrong}"


def test_protocol_imports_only_itself_the_standard_library_and_its_listed_dependencies() -> None:
    problems = protocol_violations()
    rule = f"allowed: {sorted(PROTOCOL_MAY_IMPORT)}, never {sorted(NO_IO)}"
    assert not problems, "\n".join([rule, *problems])


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Lazy, TYPE_CHECKING, relative from a package and from a module, `from . import module`."""
    files = {
        "__init__.py": "from .server import Server\n",
        "server/__init__.py": "from ._a import Server\nfrom .. import _cli\n",
        "server/_a.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\n"
            "class Server:\n    def f(self):\n        from ..client import _c\n"
        ),
        "server/_b.py": "import trio\nfrom . import _a\nfrom .._session import x\n",
        "client/_c.py": "",
        "_cli.py": "import trio_mcp.server._b\n",
        "_session.py": "",
    }
    for name, text in files.items():
        (tmp_path / "trio_mcp" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "trio_mcp" / name).write_text(text)
    edges = {(i.source.removeprefix("trio_mcp/"), i.target) for i in imports(tmp_path)}
    assert edges == {
        ("__init__.py", "trio_mcp/server/__init__.py"),
        ("server/__init__.py", "trio_mcp/server/_a.py"),
        ("server/__init__.py", "trio_mcp/_cli.py"),
        ("server/_a.py", "typing"),
        ("server/_a.py", "trio_mcp/server/_b.py"),
        ("server/_a.py", "trio_mcp/client/_c.py"),
        ("server/_b.py", "trio"),
        ("server/_b.py", "trio_mcp/server/_a.py"),
        ("server/_b.py", "trio_mcp/_session.py"),
        ("_cli.py", "trio_mcp/server/_b.py"),
    }
    internal_edges = {(i.source, i.target) for i in internal(tmp_path)}
    assert circles(internal_edges) == [["trio_mcp/server/_a.py", "trio_mcp/server/_b.py"]]
    assert [part_of(p) for p in ("trio_mcp/_cli.py", "trio_mcp/_session.py")] == [
        "entry points",
        "engine",
    ]
    assert part_of("trio_mcp/elsewhere/_x.py") is None  # a folder no part names
    lazy = {(i.source.removeprefix("trio_mcp/"), i.target, i.eager) for i in imports(tmp_path)}
    assert ("server/_a.py", "trio_mcp/server/_b.py", False) in lazy  # under TYPE_CHECKING
    assert ("server/_a.py", "trio_mcp/client/_c.py", False) in lazy  # in a method
    assert ("server/_b.py", "trio_mcp/server/_a.py", True) in lazy


def main() -> int:
    paths = modules().values()
    print("parts, in layer order:")
    for n, level in enumerate(LAYERS):
        for part in level:
            members = [p.removeprefix("trio_mcp/") for p in paths if part_of(p) == part]
            print(f"  {n} {part}: {' '.join(members)}")
    print("edges between parts (number of imports):")
    for (a, b), found in sorted(part_edges().items(), key=lambda e: (LEVEL.get(e[0][0], 9), e)):
        print(f"  {a} -> {b} ({len(found)}){'' if allowed(a, b) else '  NOT ALLOWED'}")
    problems = module_circles() + part_circles() + layer_violations() + convenience_violations()
    if protocol := protocol_violations():
        problems += ["protocol/ imports what a sans-IO layer must not:", *protocol]
    print("violations:" if problems else "no violations")
    for line in problems:
        print(" ", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
