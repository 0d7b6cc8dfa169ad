"""The conformance suite's grant and DPoP scenarios, against trio_mcp's client.

These are extension scenarios (client credentials, SEP-1046; enterprise-managed authorization,
SEP-990; workload identity, SEP-1933; DPoP, SEP-1932): the suite lists them under
``[extension]`` rather than a protocol version, so each runs once, without ``--spec-version``,
through ``grant_client.py``, with the same baseline as the other client scenarios (its
``client:`` list empty). The suite runs them at 2025-11-25; each runs once more at 2026-07-28
(``--force``, since no version claims them), so the modern era's stateless requests go through
the same authorization. Node 22 and the suite come from package.json (``npm ci``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .test_client_conformance import ANSI, BASELINE, LISTED, ROOT, RUN_GUARD, _failed_checks, _suite

CLIENT = Path(__file__).resolve().parent / "grant_client.py"
SCENARIOS = (
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
    "auth/dpop",
    "auth/dpop-nonce",
)


async def test_the_suite_lists_each_scenario_as_an_extension() -> None:
    """A suite upgrade that dates one of them must run it per version here instead."""
    done = await trio.run_process(
        [*_suite(), "list", "--client"], capture_stdout=True, capture_stderr=True, cwd=ROOT
    )
    listed = dict(LISTED.findall(done.stdout.decode()))
    assert {name: listed.get(name) for name in SCENARIOS} == dict.fromkeys(SCENARIOS, "extension")


@pytest.mark.parametrize("modern", [False, True], ids=["as-listed", "2026-07-28"])
@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_grant_scenario(scenario: str, modern: bool, tmp_path: Path) -> None:
    results = tmp_path / "results"
    # The runner splits the command on spaces and appends the scenario server's URL.
    command = shlex.join([sys.executable, str(CLIENT)])
    with trio.fail_after(RUN_GUARD):
        done = await trio.run_process(
            [
                *_suite(),
                "client",
                "--command",
                command,
                "--scenario",
                scenario,
                *(["--spec-version", "2026-07-28", "--force"] if modern else []),
                "--expected-failures",
                str(BASELINE),
                "--output-dir",
                str(results),
            ],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
        )
    output = ANSI.sub("", (done.stdout + done.stderr).decode(errors="replace"))
    report = "\n".join(
        [f"conformance suite exited with {done.returncode}", *_failed_checks(results), output]
    )
    # The exit status already weighs the failures against the baseline.
    assert done.returncode == 0, report
    assert "SKIPPED: scenario" not in output, report
    assert "Client exited with code" not in output, report
    # Every check the scenario recorded passed: an extension scenario is never partly passed.
    assert "0 failed, 0 warnings" in output, report
