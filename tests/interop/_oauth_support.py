"""The parent's side of the OAuth client drivers (``py_oauth_client.py``,
``ts_oauth_client.mjs``): it plays the user at the browser for them.

A driver writes one JSON object per line on stdout: ``{"authorize": URL}`` when its SDK sends
the user to the authorization server, answered with one line on its stdin (the redirect that
``drive_login`` ended with), and finally ``{"report": {...}}``. Its stderr goes to a file, shown
when it fails.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from ..auth._oidc import drive_login
from ._support import ROOT

#: More sign-ins than this is a client that loops (the spec: limit the retries).
MAX_SIGN_INS = 3


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some()
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line


async def run_oauth_driver(
    command: Sequence[str], stderr_log: Path, *, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Run a driver to its end, signing in (``drive_login``) whenever it asks; its report and
    the authorization URLs it was sent to. It must exit with status 0."""
    with stderr_log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
            env=env,
        )
    assert process.stdin is not None and process.stdout is not None

    def failure(what: str) -> str:
        return f"{command!r} {what}\n{stderr_log.read_text(errors='replace')}"

    authorizations: list[str] = []
    report: dict[str, Any] | None = None
    try:
        async for line in _lines(process.stdout):
            try:
                message = json.loads(line)
            except ValueError:
                pytest.fail(failure(f"wrote a line that is not JSON: {line!r}"))
            if "authorize" in message:
                authorizations.append(message["authorize"])
                if len(authorizations) > MAX_SIGN_INS:
                    pytest.fail(failure(f"asked for a sign-in {len(authorizations)} times"))
                redirect = await drive_login(message["authorize"])
                await process.stdin.send_all(redirect.encode() + b"\n")
            elif "report" in message:
                report = message["report"]
            else:
                pytest.fail(failure(f"wrote {message!r}"))
        status = await process.wait()
        if status != 0 or report is None:
            pytest.fail(failure(f"exited with {status} (report: {report!r})"))
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    return report, authorizations
