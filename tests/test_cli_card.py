"""``trio-mcp card``: the Server Card (and, with ``--registry``, the registry's ``server.json``)
of a server file, as a publisher runs it, checked against the published schemas."""

from __future__ import annotations

from pathlib import Path

import orjson

from trio_mcp.server import CARD_META_KEY

from ._card_schemas import card_errors, server_json_errors
from .servers.card_server import EXTENSION, NAME, RESOURCE
from .test_cli import ROOT, run_cli

CARD_SERVER = str(ROOT / "tests" / "servers" / "card_server.py")
DEMO = ("trio_mcp.demo", "--name", "io.github.example/trio-mcp-demo")
PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"


def test_the_demo_servers_card_and_server_json_validate() -> None:
    done = run_cli("card", *DEMO, "--url", "https://demo.example.com/mcp")
    assert done.returncode == 0, done.stderr
    card = orjson.loads(done.stdout)
    assert card_errors(card) == []
    assert card["remotes"][0]["url"] == "https://demo.example.com/mcp"
    assert [t["name"] for t in card["_meta"][CARD_META_KEY]["tools"]] == ["echo", "add", "sleep"]

    done = run_cli(
        "card", *DEMO, "--registry", "--package", "pypi:trio-mcp==0.9.0", "--description", "Demo"
    )
    assert done.returncode == 0, done.stderr
    document = orjson.loads(done.stdout)
    assert server_json_errors(document) == []
    assert document["description"] == "Demo"
    assert document["packages"] == [
        {
            "registryType": "pypi",
            "identifier": "trio-mcp",
            "version": "0.9.0",
            "transport": {"type": "stdio"},
        }
    ]


def test_a_server_with_auth_and_extensions_validates() -> None:
    done = run_cli("card", CARD_SERVER)
    assert done.returncode == 0, done.stderr
    card = orjson.loads(done.stdout)
    assert card_errors(card) == []
    assert card["name"] == NAME
    assert card["remotes"][0]["url"] == RESOURCE
    assert card["remotes"][0]["headers"][0]["name"] == "Authorization"
    listed = card["_meta"][CARD_META_KEY]
    assert EXTENSION in listed["extensions"]
    assert listed["authorization"]["requiredScopes"] == ["weather:read"]

    done = run_cli("card", CARD_SERVER, "--registry")
    assert done.returncode == 0, done.stderr
    document = orjson.loads(done.stdout)
    assert server_json_errors(document) == []
    assert EXTENSION in document["_meta"][PUBLISHER][CARD_META_KEY]["extensions"]


def test_a_server_file_that_does_not_import_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    done = run_cli("card", "./broken.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("trio-mcp: importing ")
    assert "broken.py' failed: ModuleNotFoundError: No module named" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_what_a_card_cannot_say_is_one_line_naming_the_option() -> None:
    done = run_cli("card", "trio_mcp.demo")  # "trio-mcp-demo" is no registry name
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("trio-mcp: the server's name 'trio-mcp-demo' is not a registry")
    assert "--name" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    done = run_cli("card", *DEMO, "--package", "pypi:x")
    assert done.returncode == 2
    assert "--package is for --registry" in done.stderr
    done = run_cli("card", *DEMO, "--registry", "--package", "x")
    assert done.returncode == 2
    assert "REGISTRY:IDENTIFIER" in done.stderr


def test_a_print_in_the_server_file_does_not_corrupt_the_json(tmp_path: Path) -> None:
    (tmp_path / "chatty.py").write_text(
        "from trio_mcp import Server\n"
        "print('loading the weather server')\n"
        "server = Server('com.example/chatty', '1.0.0', description='Talks while loading.')\n"
    )
    done = run_cli("card", "chatty.py", "--url", "https://chatty.example.com/mcp", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert card_errors(orjson.loads(done.stdout)) == []
    assert "loading the weather server" in done.stderr
