"""The package's rooms and layers (docs/design.md), checked on its source.

Every import counts: at the top of a module, inside a function, under ``if TYPE_CHECKING:``. The
one exception is named in ``CONVENIENCES``: a method of a lower room that imports a binding above
it only when called (``Server.http_app()`` imports the HTTP room), never at module level.
No room reaches for another room's ``_``-members (:func:`private_reaches` says how that is
read from the source). Run ``python -m tests.test_layers`` to see the parts, the edges between
them and any violation.
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
    {"engine": ("_engine.py", "_exception_groups.py", "_lazy_event.py", "_mailbox.py")},
    # Traces and metrics (OpenTelemetry, when an application installed its SDK): plugged into
    # the engine's observer seam; the rooms above hand it their connections' attributes.
    {"otel": ("otel/",)},
    # What a user writes a server against, and the client: neither knows HTTP, Redis or JOSE.
    {"server": ("server/",), "client": ("client/",)},
    # The extensions, each in a room of its own: it plugs into the server's extension seam
    # (server/_extensions.py), which names none of them.
    {"tasks": ("tasks/",), "skills": ("skills/",), "apps": ("apps/",)},
    # An HTTP API served from its OpenAPI document: a server whose tools call the API (httpx).
    {"openapi": ("openapi/",)},
    # The resource server: the token verifiers and the HTTP gate.
    {"auth": ("auth/",)},
    # The ASGI binding: Streamable HTTP, HTTP+SSE, WebSocket, the stores a second worker shares.
    {"http": ("http/",)},
    # What a second worker needs of the HTTP app: sessions served by any worker of a fleet.
    {"scaleout": ("scaleout/",)},
    # The only importer of the Redis client: the stores and the bus of the rooms below it.
    {"redis": ("redis/",)},
    {"entry points": ()},
]
#: Imports from a room to a binding above it, made only when a convenience method is called (or
#: under ``if TYPE_CHECKING:`` for its annotations), never when the module is imported: source
#: module -> the binding's modules it may name.
CONVENIENCES = {
    "trio_mcp/server/_server.py": {
        "trio_mcp/http/_binding.py",
        "trio_mcp/http/__init__.py",
        # Every Server installs the tasks extension (its keywords, ``server.tasks``).
        "trio_mcp/tasks/__init__.py",
        # Server.from_openapi builds a server from an OpenAPI document.
        "trio_mcp/openapi/__init__.py",
    },
    # Every Client follows tasks (unless tasks=False); call_tool_task hands out a ToolTask.
    "trio_mcp/client/_client.py": {"trio_mcp/tasks/__init__.py"},
    # An app whose options name a store or a relay that workers share builds its fleet.
    "trio_mcp/http/_app.py": {"trio_mcp/scaleout/__init__.py"},
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
    # Installed or not, OpenTelemetry is loaded only by an application that uses it.
    "opentelemetry",
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


# -- private members: rooms talk through public names ------------------------------------------
#
# The rule (docs/design.md): a room uses another room only through its public names, never its
# `_`-members. Checked on names, from the source alone (see private_reaches for what is seen).


class Reach(NamedTuple):
    source: str  #: the reaching module's path, like trio_mcp/_proxy.py
    line: int
    name: str  #: the private name reached for
    owners: tuple[str, ...]  #: the other rooms that define it


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def _unpacked(target: ast.expr) -> list[ast.expr]:
    """The single targets of an assignment's target: ``a, (b, *c)`` is ``a``, ``b``, ``c``."""
    if isinstance(target, ast.Tuple | ast.List):
        return [t for element in target.elts for t in _unpacked(element)]
    if isinstance(target, ast.Starred):
        return _unpacked(target.value)
    return [target]


def _names(target: ast.expr) -> list[str]:
    return [t.id for t in _unpacked(target) if isinstance(t, ast.Name)]


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module or class body, those under ``if``/``try``/``with`` included."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _statements(node.body) + _statements(node.orelse)
        elif isinstance(node, ast.With):
            found += _statements(node.body)
        elif isinstance(node, ast.Try):
            parts = [node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)]
            found += [s for part in parts for s in _statements(part)]
    return found


def _strings(node: ast.expr | None) -> list[str]:
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def private_definitions(tree: ast.Module) -> set[str]:
    """The ``_name``s a module defines: its module-level names (functions, classes,
    assignments), every class's members (methods, nested classes, class attributes and attrs
    fields, the names in ``__slots__``), and every attribute it assigns on ``self`` or ``cls``
    (tuple targets included). An import defines nothing: what it names stays its room's."""
    defined: set[str] = set()

    def body(statements: list[ast.stmt]) -> None:
        for node in _statements(statements):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            for target in _targets(node):
                defined.update(_names(target))
                if _names(target) == ["__slots__"]:
                    defined.update(_strings(getattr(node, "value", None)))
            if isinstance(node, ast.ClassDef):
                body(node.body)

    body(tree.body)
    for node in ast.walk(tree):
        for target in (t for whole in _targets(node) for t in _unpacked(whole)):
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id in ("self", "cls")
            ):
                defined.add(target.attr)
    return {name for name in defined if _private(name)}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def private_reaches(root: Path = ROOT) -> list[Reach]:
    """Every place a module reaches for a ``_``-member that another room defines.

    What a room defines is :func:`private_definitions` of its modules (rooms are
    :func:`part_of`'s parts). A reach is an attribute read, written or deleted (``x._name``),
    ``getattr``/``setattr``/``hasattr``/``delattr`` with a constant name, or an import of a
    ``_name`` that is not a module. Dunders are nobody's private members. It is a violation:

    - ``from <a module of another room> import _name``: always;
    - ``mod._name`` where ``mod`` is a module of another room imported under that name;
    - ``self._name`` or ``cls._name``: when another room defines ``_name`` and this room does
      not (a member inherited from another room's class);
    - ``x._name`` on anything else: when another room defines ``_name``, even if this room
      does too. Names alone cannot tell whose object ``x`` is, so a name two rooms define
      counts against the reacher: a public name (or a distinct one) settles it.

    So every reach into a member another room defines in one of those ways is reported, with
    one gap: ``self._name`` in a subclass of another room's class, when both rooms define
    ``_name``. Not seen at all: members made otherwise (``setattr`` with a computed name,
    ``__dict__``), and the ``_``-members of outside libraries' objects (the standard
    library's ``_replace``), which no room defines. Importing a public name from another
    room's private module (``from ..server._connection import ServerConnection``) is the
    house style, and no reach; so is a dotted path through private modules.
    """
    names = modules(root)
    trees = {path: ast.parse((root / path).read_text(), path) for path in names.values()}
    owners: dict[str, set[str]] = defaultdict(set)
    for path, tree in trees.items():
        for name in private_definitions(tree):
            owners[name].add(str(part_of(path)))
    found: set[Reach] = set()
    for module, path in names.items():
        room = str(part_of(path))
        package = module if path.endswith("/__init__.py") else module.rpartition(".")[0]
        #: Local names bound to a module of another room (``from .. import _engine``).
        foreign: set[str] = set()
        for node in ast.walk(trees[path]):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: package.count(".") + 2 - node.level]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    if (imported := names.get(f"{base}.{alias.name}")) is not None:
                        if part_of(imported) != room:  # a module, not a member
                            foreign.add(alias.asname or alias.name)
                    elif base in names and part_of(names[base]) != room and _private(alias.name):
                        owner = str(part_of(names[base]))
                        found.add(Reach(path, node.lineno, alias.name, (owner,)))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in names and part_of(names[alias.name]) != room:
                        foreign.add(alias.asname)
        for node in ast.walk(trees[path]):
            if isinstance(node, ast.Attribute):
                name, obj = node.attr, node.value
                if _dotted(node) in names:
                    continue  # trio_mcp.server._connection: a module, named by its path
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                name, obj = node.args[1].value, node.args[0]
            else:
                continue
            if not _private(name):
                continue
            others = owners[name] - {room}
            base_name = obj.id if isinstance(obj, ast.Name) else None
            if (
                base_name in foreign
                or (base_name in ("self", "cls") and others and room not in owners[name])
                or (base_name not in ("self", "cls") and others)
            ):
                found.add(Reach(path, node.lineno, name, tuple(sorted(others))))
    return sorted(found)


def reach_violations(root: Path = ROOT) -> list[str]:
    """The reaches of every room, one line each."""
    return [
        f"  {r.source}:{r.line} reaches {r.name}, a private member of "
        + " and ".join(r.owners or ("another room's module",))
        for r in private_reaches(root)
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


def test_serving_and_calling_never_import_opentelemetry() -> None:
    """With OpenTelemetry installed but not imported by the application, a server answers a
    client in memory and an HTTP app is built without loading it: nothing paid when off."""
    code = (
        "import sys, trio\nfrom trio_mcp import Server, open_client\n"
        "server = Server('x')\n"
        "@server.tool()\ndef add(a: int, b: int) -> int:\n    return a + b\n"
        "async def main():\n"
        "    async with open_client(server) as client:\n"
        "        await client.call_tool('add', {'a': 1, 'b': 2})\n"
        "trio.run(main)\nserver.http_app()\n"
        "print([m for m in sys.modules if m.startswith('opentelemetry')])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_a_single_process_app_loads_no_scale_out_code() -> None:
    """An HTTP app with no store or relay that workers share holds no fleet, and the scaleout
    room is never imported; one that names a session store builds its fleet from it."""
    code = (
        "import sys\nfrom trio_mcp import Server\nfrom trio_mcp.http import McpHttpApp\n"
        "app = Server('x').http_app()\n"
        "print(app.fleet is None, 'trio_mcp.scaleout' in sys.modules)\n"
        "from trio_mcp.http import HttpOptions, MemorySessionStore, ScaleOut\n"
        "app = McpHttpApp(Server('x'), HttpOptions(scale_out=ScaleOut("
        "session_store=MemorySessionStore(), node_id='a')))\n"
        "print(type(app.fleet).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["True", "False", "SharedFleet"]


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
        "server/_b.py": "import trio\nfrom . import _a\nfrom .._engine import x\n",
        "client/_c.py": "",
        "_cli.py": "import trio_mcp.server._b\n",
        "_engine.py": "",
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
        ("server/_b.py", "trio_mcp/_engine.py"),
        ("_cli.py", "trio_mcp/server/_b.py"),
    }
    internal_edges = {(i.source, i.target) for i in internal(tmp_path)}
    assert circles(internal_edges) == [["trio_mcp/server/_a.py", "trio_mcp/server/_b.py"]]
    assert [part_of(p) for p in ("trio_mcp/_cli.py", "trio_mcp/_engine.py")] == [
        "entry points",
        "engine",
    ]
    assert part_of("trio_mcp/elsewhere/_x.py") is None  # a folder no part names
    lazy = {(i.source.removeprefix("trio_mcp/"), i.target, i.eager) for i in imports(tmp_path)}
    assert ("server/_a.py", "trio_mcp/server/_b.py", False) in lazy  # under TYPE_CHECKING
    assert ("server/_a.py", "trio_mcp/client/_c.py", False) in lazy  # in a method
    assert ("server/_b.py", "trio_mcp/server/_a.py", True) in lazy


def test_no_room_reaches_into_another_rooms_private_members() -> None:
    """Rooms talk through public names (docs/design.md); the rule is :func:`private_reaches`."""
    problems = reach_violations()
    assert not problems, "\n".join(problems)


def test_the_reach_check_sees_every_kind_of_reach(tmp_path: Path) -> None:
    """Each kind of reach into another room, the inherited one included; and what is not one:
    a room's own members, dunders, outside libraries' members, public names of private
    modules."""
    files = {
        "_engine.py": (
            "class Session:\n"
            "    __slots__ = ('_slot',)\n"
            "    _field: int\n"
            "    def __init__(self):\n"
            "        self._nursery, self._closed = None, False\n"
            "    def _enqueue(self): ...\n"
            "_HELPER = 1\n"
        ),
        "server/_conn.py": (
            "from .._engine import Session, _HELPER\n"  # 1: an engine's private name
            "from .. import _engine as engine\n"
            "import trio_mcp._engine\n"
            "class Conn:\n"
            "    def __init__(self, session):\n"
            "        self._own, self._closed = session, False\n"
            "    def f(self, other, x):\n"
            "        self.session._nursery.start_soon(x)\n"  # 8: the engine's
            "        getattr(self.session, '_slot')\n"  # 9: a slot, by getattr
            "        other._own, self._own, x._replace(), x.__class__\n"
            "        other._closed, self._closed\n"  # 11: both rooms define it: counts
            "        engine._anything, engine.Session, trio_mcp._engine.Session\n"  # 12
            "        return x._field\n"  # 13: an attrs field
            "class View(Session):\n"
            "    def g(self):\n"
            "        self._enqueue()\n"  # 16: inherited from another room
        ),
        "server/_other.py": "from ._conn import Conn\ndef f(c):\n    return c._own\n",
        "http/_app.py": "def f(session):\n    return session._nursery\n",
    }
    for name, text in files.items():
        (tmp_path / "trio_mcp" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "trio_mcp" / name).write_text(text)
    found = {
        (r.source.removeprefix("trio_mcp/"), r.line, r.name) for r in private_reaches(tmp_path)
    }
    assert found == {
        ("server/_conn.py", 1, "_HELPER"),
        ("server/_conn.py", 8, "_nursery"),
        ("server/_conn.py", 9, "_slot"),
        ("server/_conn.py", 11, "_closed"),
        ("server/_conn.py", 12, "_anything"),
        ("server/_conn.py", 13, "_field"),
        ("server/_conn.py", 16, "_enqueue"),
        ("http/_app.py", 2, "_nursery"),
    }
    lines = reach_violations(tmp_path)
    assert len(lines) == 8 and any("http/_app.py:2" in line for line in lines)


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
    if reaches := reach_violations():
        problems += ["reaches into another room's private members:", *reaches]
    if protocol := protocol_violations():
        problems += ["protocol/ imports what a sans-IO layer must not:", *protocol]
    print("violations:" if problems else "no violations")
    for line in problems:
        print(" ", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
