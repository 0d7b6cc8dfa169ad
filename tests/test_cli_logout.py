"""``trio-mcp logout URL`` (and ``--all``) forgets what ``trio-mcp login`` kept, through the
installed script: after it, the stored tokens are gone and the next ``trio-mcp call`` asks to
sign in again. A real authorization server (oidc-provider) in front of a protected server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import trio

from .auth._oidc import drive_login, oidc_provider, protected_mcp_server
from .test_cli import GUARD, child_env

SCRIPT = Path(sys.executable).parent / "trio-mcp"


async def login(url: str, env: dict[str, str]) -> None:
    """``trio-mcp login URL``, signed in at the browser by the harness."""
    process = await trio.lowlevel.open_process(
        [str(SCRIPT), "login", url],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    seen = b""
    while b"sign in at " not in seen or not seen.endswith(b"\n"):
        chunk = await process.stderr.receive_some(65536)
        assert chunk, f"login ended before showing a URL: {seen!r}"
        seen += chunk
    landed = await drive_login(seen.decode().split("sign in at ", 1)[1].split()[0])
    async with httpx.AsyncClient() as http:
        assert (await http.get(landed)).status_code == 200
    rest = b""
    async for chunk in process.stderr:
        rest += chunk
    assert await process.wait() == 0, rest


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [str(SCRIPT), *args], capture_stdout=True, capture_stderr=True, env=env, check=False
    )


async def test_logout_forgets_the_tokens_and_the_next_call_signs_in_again(tmp_path: Path) -> None:
    assert SCRIPT.exists(), "the trio-mcp console script is not installed beside this Python"
    tokens = tmp_path / "tokens"
    # BROWSER=true: the script "opens" the browser with a command that does nothing.
    env = {**child_env(), "TRIO_MCP_TOKEN_DIR": str(tokens), "BROWSER": "true"}
    with trio.fail_after(GUARD * 2):
        async with oidc_provider() as op, protected_mcp_server(op.issuer) as url:
            await login(url, env)
            assert list(tokens.glob("server-*.json"))
            signed_in = await cli(env, "call", url, "whoami", "--login-timeout", "5")
            assert signed_in.returncode == 0, signed_in.stderr
            assert b"sign in at" not in signed_in.stderr

            out = await cli(env, "logout", url)
            assert out.returncode == 0, out.stderr
            assert f"signed out of {url}".encode() in out.stderr
            assert not list(tokens.glob("server-*.json"))  # the tokens are gone
            assert list(tokens.glob("client-*.json"))  # the registration stays (per issuer)
            again = await cli(env, "logout", url)
            assert again.returncode == 0 and b"not signed in" in again.stderr

            # The next call asks to sign in (nobody does: it gives up after its timeout).
            asked = await cli(env, "call", url, "whoami", "--login-timeout", "1")
            assert asked.returncode == 1
            assert b"sign in at " in asked.stderr, asked.stderr

            await login(url, env)
            everything = await cli(env, "logout", "--all")
            assert everything.returncode == 0, everything.stderr
            assert b"signed out of every server" in everything.stderr
            assert not list(tokens.glob("*.json"))
            asked = await cli(env, "call", url, "whoami", "--login-timeout", "1")
            assert b"sign in at " in asked.stderr, asked.stderr


async def test_logout_needs_a_url_or_all_and_not_both(tmp_path: Path) -> None:
    env = {**child_env(), "TRIO_MCP_TOKEN_DIR": str(tmp_path)}
    neither = await cli(env, "logout")
    assert neither.returncode == 2
    assert neither.stderr == b"trio-mcp: logout needs a server URL, or --all\n"
    both = await cli(env, "logout", "http://127.0.0.1:1/mcp", "--all")
    assert both.returncode == 2 and b"not both" in both.stderr
    stdio = await cli(env, "logout", "python server.py")
    assert stdio.returncode == 2 and b"http(s)://" in stdio.stderr
