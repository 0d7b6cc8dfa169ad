"""The curated public API: the root exports what its public methods return, and nothing of the
engine, which lives in ``trio_mcp.lowlevel``."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.metadata
import inspect
import re
import subprocess
import sys
import tomllib
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import trio_mcp
import trio_mcp.lowlevel
import trio_mcp.middleware
import trio_mcp.protocol
from trio_mcp.client._client import DEFAULT_CLIENT_INFO

ENGINE = {
    "BaseTransport",
    "ClientDispatcher",
    "Dispatcher",
    "InFlight",
    "MemoryTransport",
    "OutgoingMessage",
    "Route",
    "ServerConnection",
    "Engine",
    "Transport",
    "memory_transport_pair",
}


#: Special methods whose results a user meets (``async for note in subscription``).
ITERATION = {"__aenter__", "__anext__", "__enter__", "__next__"}


def _exported(module: Any) -> dict[int, str]:
    return {id(getattr(module, name)): name for name in module.__all__}


@functools.cache
def _library_classes() -> dict[str, type]:
    """Every class defined in a trio_mcp module, by name (for names imported only for typing)."""
    found: dict[str, type] = {}
    for name, module in list(sys.modules.items()):
        if name == "trio_mcp" or name.startswith("trio_mcp."):
            for value in vars(module).values():
                if inspect.isclass(value) and value.__module__ == name:
                    found.setdefault(value.__qualname__, value)
    return found


def _classes_in(annotation: object, namespace: dict[str, Any]) -> Iterator[type]:
    """The trio_mcp classes an annotation names, through aliases and generics."""
    if isinstance(annotation, str):
        tree = ast.parse(annotation, mode="eval")
        modules = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and id(node) not in modules:
                if node.id in namespace:
                    yield from _classes_in(namespace[node.id], namespace)
                elif node.id in _library_classes():
                    yield _library_classes()[node.id]  # imported under TYPE_CHECKING
                else:
                    assert hasattr(builtins, node.id) or hasattr(typing, node.id), node.id
        return
    if isinstance(annotation, type):
        if annotation.__module__.startswith("trio_mcp"):
            yield annotation
        return
    if typing.get_origin(annotation) is typing.Literal:
        return
    for argument in typing.get_args(annotation):
        yield from _classes_in(argument, namespace)


def _met_by_users(obj: object) -> Iterator[tuple[str, type]]:
    """(where, class) for every class a public method or property of ``obj`` returns, and for
    an attrs value, the types of its fields."""
    if inspect.isfunction(obj):
        namespace = vars(sys.modules[obj.__module__])
        returned = obj.__annotations__.get("return")
        for cls in _classes_in(returned, namespace):
            yield f"{obj.__name__}()", cls
        return
    if not inspect.isclass(obj) or not obj.__module__.startswith("trio_mcp"):
        return
    namespace = vars(sys.modules[obj.__module__])
    for name, member in vars(obj).items():
        if name.startswith("_") and name not in ITERATION:
            continue
        function = member.fget if isinstance(member, property) else member
        if isinstance(function, classmethod | staticmethod):
            function = function.__func__
        if inspect.isfunction(function):
            returned = function.__annotations__.get("return")
            for cls in _classes_in(returned, namespace):
                yield f"{obj.__name__}.{name}", cls
    if attrs.has(obj):
        for field in attrs.fields(obj):
            if field.inherited:
                continue  # its annotation is read in its own class's module, when that is walked
            for cls in _classes_in(field.type, namespace):
                yield f"{obj.__name__}.{field.name}", cls


#: The public modules: each has an ``__all__``, and docs/api.md lists exactly its names.
PUBLIC_MODULES = (
    "trio_mcp",
    "trio_mcp.protocol",
    "trio_mcp.server",
    "trio_mcp.tasks",
    "trio_mcp.skills",
    "trio_mcp.apps",
    "trio_mcp.openapi",
    "trio_mcp.client",
    "trio_mcp.http",
    "trio_mcp.auth",
    "trio_mcp.redis",
    "trio_mcp.middleware",
    "trio_mcp.otel",
    "trio_mcp.lowlevel",
    "trio_mcp.transports",
    "trio_mcp.testing",
)
API_PAGE = Path(__file__).resolve().parent.parent / "docs" / "api.md"


def _listed_on_the_api_page() -> dict[str, list[str]]:
    """Each ``## `module` `` section's ``Names:`` paragraph, as a list of names."""
    listed: dict[str, list[str]] = {}
    module = None
    for paragraph in API_PAGE.read_text().split("\n\n"):
        if paragraph.startswith("## `"):
            module = paragraph.strip().removeprefix("## `").removesuffix("`")
        elif paragraph.startswith("Names:") and module is not None:
            listed[module] = re.findall(r"`(\w+)`", paragraph)
    return listed


def test_the_api_page_lists_exactly_each_public_modules_names() -> None:
    listed = _listed_on_the_api_page()
    assert sorted(listed) == sorted(PUBLIC_MODULES), "a public module without a section, or back"
    for name in PUBLIC_MODULES:
        exported = importlib.import_module(name).__all__
        missing = sorted(set(exported) - set(listed[name]))
        extra = sorted(set(listed[name]) - set(exported))
        assert not missing and not extra, (
            f"{name}: not on docs/api.md {missing}, not exported {extra}"
        )


def test_the_api_page_check_sees_a_missing_name(tmp_path: Path, monkeypatch: Any) -> None:
    page = tmp_path / "api.md"
    page.write_text("## `trio_mcp.auth`\n\nVerifiers.\n\nNames: `JWTVerifier`.\n")
    monkeypatch.setattr(sys.modules[__name__], "API_PAGE", page)
    assert _listed_on_the_api_page() == {"trio_mcp.auth": ["JWTVerifier"]}


def test_the_protocols_codes_left_the_root_and_are_still_found_there_with_a_warning() -> None:
    assert "INVALID_PARAMS" not in trio_mcp.__all__ and "to_wire" not in trio_mcp.__all__
    with pytest.warns(DeprecationWarning, match=r"trio_mcp\.protocol\.INVALID_PARAMS"):
        assert trio_mcp.INVALID_PARAMS == trio_mcp.protocol.INVALID_PARAMS  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match=r"trio_mcp\.protocol\.to_wire"):
        assert trio_mcp.to_wire is trio_mcp.protocol.to_wire  # type: ignore[attr-defined]


def test_every_name_in_the_public_modules_resolves() -> None:
    for module in map(importlib.import_module, PUBLIC_MODULES):
        assert len(set(module.__all__)) == len(module.__all__)
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"


def test_nothing_of_the_engine_is_in_the_root() -> None:
    assert set(trio_mcp.lowlevel.__all__) >= ENGINE
    assert not ENGINE & set(trio_mcp.__all__)
    assert not _exported(trio_mcp).keys() & _exported(trio_mcp.lowlevel).keys()
    for name in trio_mcp.__all__:
        value = getattr(trio_mcp, name)
        assert getattr(value, "__module__", None) not in {
            "trio_mcp._engine",
            "trio_mcp.transports._transport",
            "trio_mcp.transports._memory",
        }, name


def test_the_root_exports_every_type_its_public_methods_return() -> None:
    """Closed over the exports: what an exported class returns must itself be exported. The
    engine's hooks (``Context.connection``, say) are reached through ``trio_mcp.lowlevel``, the
    wire types (``TaskRecord.state``, a ``TaskState``) through ``trio_mcp.protocol``."""
    root = _exported(trio_mcp)
    lowlevel = _exported(trio_mcp.lowlevel)
    protocol = _exported(trio_mcp.protocol)  # the wire types a user meets but seldom names
    missing: list[str] = []
    for name in trio_mcp.__all__:
        for where, cls in _met_by_users(getattr(trio_mcp, name)):
            if id(cls) not in root and id(cls) not in lowlevel and id(cls) not in protocol:
                missing.append(f"{where} -> {cls.__module__}.{cls.__qualname__}")
    assert not missing, "not importable from trio_mcp:\n" + "\n".join(sorted(set(missing)))


def test_the_walk_finds_what_a_method_returns() -> None:
    # The check above means something only if the walk sees through aliases and generics.
    found = set(_met_by_users(trio_mcp.Client))
    assert ("Client.list_tools_page", trio_mcp.ListToolsResult) in found
    assert ("Client.list_tools", trio_mcp.Tool) in found
    assert ("Context.connection", trio_mcp.lowlevel.ConnectionView) in set(
        _met_by_users(trio_mcp.Context)
    )
    assert ("CallToolResult.content", trio_mcp.TextContent) in set(
        _met_by_users(trio_mcp.CallToolResult)
    )
    assert ("Subscription.__anext__", trio_mcp.Notification) in set(
        _met_by_users(trio_mcp.Subscription)
    )


@pytest.mark.parametrize("module", PUBLIC_MODULES[1:])
def test_a_name_the_root_shares_with_a_public_package_is_the_same_object(module: str) -> None:
    public = importlib.import_module(module)
    for name in set(trio_mcp.__all__) & set(public.__all__):
        assert getattr(trio_mcp, name) is getattr(public, name), name


def test_the_version_is_written_once_and_the_package_metadata_agrees() -> None:
    assert trio_mcp.__version__ == importlib.metadata.version("trio-mcp")
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert DEFAULT_CLIENT_INFO.version == trio_mcp.__version__


def test_the_http_names_are_there_without_loading_httpx_or_hypercorn_up_front() -> None:
    code = (
        "import sys, trio_mcp\n"
        "assert 'httpx' not in sys.modules and 'hypercorn' not in sys.modules\n"
        "from trio_mcp import serve_http, SessionExpired, SESSION_EXPIRED\n"
        "from trio_mcp.http._hypercorn import serve_http as real\n"
        "from trio_mcp.transports._http_client import SessionExpired as expired\n"
        "assert serve_http is real and SessionExpired is expired and SESSION_EXPIRED == -32001\n"
        "assert issubclass(SessionExpired, trio_mcp.ConnectionClosed)\n"
        "from trio_mcp import OAuth, ClientAuth, ClientCredentials, DPoPKey\n"
        "from trio_mcp import EnterpriseManaged, WorkloadIdentity\n"
        "from trio_mcp.client import _grants, _jose, _oauth\n"
        "assert OAuth is _oauth.OAuth and ClientAuth is _grants.ClientAuth\n"
        "assert ClientCredentials is _grants.ClientCredentials and DPoPKey is _jose.DPoPKey\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_token_verifiers_are_there_without_loading_httpx_or_joserfc_up_front() -> None:
    code = (
        "import sys, trio_mcp\n"
        "assert 'httpx' not in sys.modules and 'joserfc' not in sys.modules\n"
        "from trio_mcp import JWTVerifier, IntrospectionVerifier, TokenVerifier\n"
        "from trio_mcp.auth import _introspection, _jwt\n"
        "assert JWTVerifier is _jwt.JWTVerifier\n"
        "assert IntrospectionVerifier is _introspection.IntrospectionVerifier\n"
        "assert isinstance(JWTVerifier('https://issuer.example'), TokenVerifier)\n"
        "assert isinstance(\n"
        "    IntrospectionVerifier('https://issuer.example/introspect', client_id='rs'),\n"
        "    TokenVerifier,\n"
        ")\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_jsonschema_is_loaded_by_the_first_hand_written_schema_not_by_the_import() -> None:
    """A stdio server that a host spawns pays for what it uses: most have no hand-written
    schema, and the library costs tens of milliseconds and megabytes to import."""
    code = (
        "import sys, trio_mcp\n"
        "assert 'jsonschema' not in sys.modules and 'importlib.metadata' not in sys.modules\n"
        "server = trio_mcp.Server('s')\n"
        "@server.tool()\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "assert 'jsonschema' not in sys.modules\n"
        "server.tool(name='raw', input_schema={'type': 'object'})(lambda **kw: 'ok')\n"
        "assert 'jsonschema' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_testing_module_is_public_and_names_only_public_types() -> None:
    """``trio_mcp.testing`` (the pytest plugin) is a public module of its own, never loaded by
    ``import trio_mcp`` (it imports pytest); what its names return is importable."""
    import trio_mcp.testing

    module = trio_mcp.testing
    assert len(set(module.__all__)) == len(module.__all__)
    public = _exported(trio_mcp) | _exported(trio_mcp.lowlevel) | _exported(module)
    missing = [
        f"{where} -> {cls.__module__}.{cls.__qualname__}"
        for name in module.__all__
        for where, cls in _met_by_users(getattr(module, name))
        if id(cls) not in public
    ]
    assert not missing, "not importable from trio_mcp or trio_mcp.testing:\n" + "\n".join(missing)
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    # Named like the module, so that `pytest_plugins = ["trio_mcp.testing"]` or
    # `-p trio_mcp.testing` beside the entry point do not register it twice.
    assert project["entry-points"]["pytest11"] == {"trio_mcp.testing": "trio_mcp.testing"}
    code = (
        "import sys, trio_mcp\nassert 'pytest' not in sys.modules, 'import trio_mcp loads pytest'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_engines_old_name_is_found_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"lowlevel\.Engine"):
        assert trio_mcp.lowlevel.Session is trio_mcp.lowlevel.Engine


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Engine"):
        trio_mcp.Engine  # type: ignore[attr-defined]  # noqa: B018


def test_the_middleware_module_gives_what_its_classes_return() -> None:
    """``trio_mcp.middleware`` is public: what its built-ins return is importable from it or
    from the root."""
    public = _exported(trio_mcp) | _exported(trio_mcp.middleware)
    missing = [
        f"{where} -> {cls.__qualname__}"
        for name in trio_mcp.middleware.__all__
        for where, cls in _met_by_users(getattr(trio_mcp.middleware, name))
        if id(cls) not in public
    ]
    assert not missing, missing
