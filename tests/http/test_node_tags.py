"""Routing-tagged session ids (``HttpOptions(node_id=...)``): minted with the node's tag, and
anything tagged for another node, or malformed, is an unknown session."""

from __future__ import annotations

import re

import pytest

from trio_mcp import Server
from trio_mcp._cli import main
from trio_mcp.http import HttpOptions, ScaleOut
from trio_mcp.http._node_tags import (
    check_node_id,
    mint_session_id,
    session_node,
)

from .._http import Served, call_body, error_of, serving

HEX = re.compile(r"[0-9a-f]{32}")


def test_a_tagged_id_is_the_node_then_128_random_bits() -> None:
    minted = mint_session_id("n-1")
    node, _, random = minted.partition(".")
    assert node == "n-1" and HEX.fullmatch(random)
    assert session_node(minted) == "n-1"
    assert mint_session_id("n-1") != minted
    plain = mint_session_id(None)
    assert HEX.fullmatch(plain) and session_node(plain) is None


@pytest.mark.parametrize("bad", ["", "a.b", "n 1", "n_1", "x" * 33, "é", "n1\n"])
def test_a_node_id_is_a_short_token(bad: str) -> None:
    with pytest.raises(ValueError, match="node_id must be"):
        check_node_id(bad)
    with pytest.raises(ValueError, match="node_id must be"):
        HttpOptions(scale_out=ScaleOut(node_id=bad))
    assert check_node_id("Node-7") == "Node-7"


def test_the_cli_refuses_a_bad_node_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--transport", "http", "--port", "0", "--node-id", "a.b"]) == 2
    assert "--node-id: node_id must be" in capsys.readouterr().err


def tools_server() -> Server:
    server = Server("routed")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


async def echo_status(served: Served, session: str) -> tuple[int, dict[str, object] | None]:
    response = await served.post(call_body(1, "echo", {"text": "hi"}), session)
    return response.status_code, error_of(response) if response.status_code != 200 else None


async def test_sessions_carry_the_tag_and_other_tags_are_unknown_sessions() -> None:
    async with serving(tools_server(), HttpOptions(scale_out=ScaleOut(node_id="n1"))) as served:
        session = await served.initialize()
        node, _, random = session.partition(".")
        assert node == "n1" and HEX.fullmatch(random)
        assert (await echo_status(served, session))[0] == 200
        unknown = await echo_status(served, "n1." + "0" * 32)
        assert unknown == (404, {"code": -32600, "message": "Session not found"})
        forged = [
            "n2." + random,  # the same secret under another node's tag
            random,  # untagged
            "n1." + random.upper(),
            "n1.." + random,
            "n1." + random + "0",
            "N1." + random,  # tags are case-sensitive, like the map that routes on them
        ]
        for forged_id in forged:
            assert await echo_status(served, forged_id) == unknown, forged_id
        # The session itself is untouched by all that.
        assert (await echo_status(served, session))[0] == 200


async def test_without_a_node_id_ids_stay_plain_hex_and_tagged_ones_are_unknown() -> None:
    async with serving(tools_server()) as served:
        session = await served.initialize()
        assert HEX.fullmatch(session)
        status, error = await echo_status(served, "n1." + session)
        assert status == 404 and error is not None and error["message"] == "Session not found"
