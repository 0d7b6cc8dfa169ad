"""The official MCP conformance suite's client scenarios, against trio_mcp's client.

In client mode the suite starts a scenario server of its own on localhost and runs
``client.py <url>`` with the scenario's name and protocol version in the environment; the
scenario server then judges what the client sent. Each scenario runs at every protocol version
it applies to among the two this project targets (2025-11-25, the handshake era, and
2026-07-28, the modern era), plus the two 2025-03-26 authorization scenarios at their own
version, with the baseline in ``expected-failures.yml`` (its ``client:`` list kept empty). The
``auth/*`` scenarios run the whole OAuth flow against the suite's own authorization servers.

The extension scenarios (client credentials, SEP-1046; enterprise-managed authorization,
SEP-990; workload identity, SEP-1933; DPoP, SEP-1932; skills, SEP-2640) have no version: the
suite lists them under ``[extension]``, so each runs as listed (without ``--spec-version``; the
suite runs them at 2025-11-25), and once more at 2026-07-28 (``--force``, since no version claims
them), so the modern era's stateless requests go through the same authorization (and skills).

Every run fails on a SKIPPED or WARNING check as well as on a failure (the suite's own verdict
counts only failures, so a scenario whose one check was skipped would "pass").
Node 22 and the suite come from the two npm installs (``tests/_npm.py``), as for the server
scenarios in ``test_conformance.py``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .._npm import node22_suite

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CLIENT = HERE / "client.py"
BASELINE = HERE / "expected-failures.yml"
VERSIONS = ("2025-11-25", "2026-07-28")

#: Each scenario this project answers for, and the versions (of VERSIONS) it applies at.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "initialize": ("2025-11-25",),
    "tools_call": VERSIONS,
    "elicitation-sep1034-client-defaults": ("2025-11-25",),
    "sse-retry": ("2025-11-25",),
    "request-metadata": ("2026-07-28",),
    "sep-2322-client-request-state": ("2026-07-28",),
    "http-standard-headers": ("2026-07-28",),
    "http-custom-headers": ("2026-07-28",),
    "http-invalid-tool-headers": ("2026-07-28",),
    "json-schema-ref-no-deref": ("2026-07-28",),
    "json-schema-2020-12-preservation": VERSIONS,
    "auth/metadata-default": VERSIONS,
    "auth/metadata-var1": VERSIONS,
    "auth/metadata-var2": VERSIONS,
    "auth/metadata-var3": VERSIONS,
    "auth/basic-cimd": VERSIONS,
    "auth/scope-from-www-authenticate": VERSIONS,
    "auth/scope-from-scopes-supported": VERSIONS,
    "auth/scope-omitted-when-undefined": VERSIONS,
    "auth/scope-step-up": VERSIONS,
    "auth/scope-retry-limit": VERSIONS,
    "auth/token-endpoint-auth-basic": VERSIONS,
    "auth/token-endpoint-auth-post": VERSIONS,
    "auth/token-endpoint-auth-none": VERSIONS,
    "auth/pre-registration": VERSIONS,
    "auth/resource-mismatch": ("2026-07-28",),
    "auth/offline-access-scope": ("2026-07-28",),
    "auth/offline-access-not-supported": ("2026-07-28",),
    "auth/authorization-server-migration": ("2026-07-28",),
    "auth/iss-supported": ("2026-07-28",),
    "auth/iss-not-advertised": ("2026-07-28",),
    "auth/iss-supported-missing": ("2026-07-28",),
    "auth/iss-wrong-issuer": ("2026-07-28",),
    "auth/iss-unexpected": ("2026-07-28",),
    "auth/iss-normalized": ("2026-07-28",),
    "auth/metadata-issuer-mismatch": ("2026-07-28",),
}
#: The 2025-03-26 authorization (no Protected Resource Metadata), which servers of that
#: revision still speak: run at the one version the suite gives them.
BACKCOMPAT: dict[str, tuple[str, ...]] = {
    "auth/2025-03-26-oauth-metadata-backcompat": ("2025-03-26",),
    "auth/2025-03-26-oauth-endpoint-fallback": ("2025-03-26",),
}
#: The extension scenarios: listed without a version.
EXTENSIONS = (
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
    "auth/dpop",
    "auth/dpop-nonce",
    # Skills (SEP-2640): list without fetching any file; refuse a SKILL.md whose digest, size
    # or frontmatter is not the entry's, and read nothing more of that skill.
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
)
#: Client scenarios of the suite this project does not answer, and why. Anything else the
#: suite lists must be in one of the tables above, so a new scenario cannot go unrun.
NOT_ANSWERED: set[str] = set()
#: How the extension scenarios run: as listed (no version given), and forced at 2026-07-28.
AS_LISTED = "as-listed"

#: Only turns a hang into a failure: a scenario takes a second or two.
RUN_GUARD = 120
LISTED = re.compile(r"^\s*- (\S+) \[([^\]]*)\]", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _failed_checks(results: Path) -> list[str]:
    out: list[str] = []
    for checks_file in sorted(results.glob("*/checks.json")):
        for check in json.loads(checks_file.read_text()):
            if check.get("status") in ("FAILURE", "WARNING", "SKIPPED"):
                message = check.get("errorMessage") or json.dumps(check.get("details"))
                out.append(f"    {check['status']} {check['id']}: {message}")
    return out or ["    (no failed checks recorded: see the output above)"]


async def test_the_table_matches_where_the_suite_applies_each_scenario() -> None:
    """A suite upgrade that moves a scenario to another version must move it here too."""
    done = await trio.run_process(
        [*node22_suite(), "list", "--client"], capture_stdout=True, capture_stderr=True, cwd=ROOT
    )
    found = LISTED.findall(done.stdout.decode())
    listed = {
        name: tuple(v for v in VERSIONS if v in versions.split(",")) for name, versions in found
    }
    assert {name: listed.get(name) for name in SCENARIOS} == SCENARIOS
    every = {name: tuple(versions.split(",")) for name, versions in found}
    assert {name: every.get(name) for name in BACKCOMPAT} == BACKCOMPAT
    # A suite upgrade that dates an extension scenario must run it per version instead.
    assert {name: every.get(name) for name in EXTENSIONS} == dict.fromkeys(
        EXTENSIONS, ("extension",)
    )
    answered = {*SCENARIOS, *BACKCOMPAT, *EXTENSIONS}
    assert sorted(set(every) - answered - NOT_ANSWERED) == []
    assert sorted(NOT_ANSWERED - set(every)) == []


@pytest.mark.parametrize(
    ("scenario", "version"),
    [
        (scenario, version)
        for table in (SCENARIOS, BACKCOMPAT)
        for scenario, versions in table.items()
        for version in versions
    ]
    + [(scenario, version) for scenario in EXTENSIONS for version in (AS_LISTED, "2026-07-28")],
)
async def test_client_scenario(scenario: str, version: str, tmp_path: Path) -> None:
    output, report = await _run_suite(
        ["--scenario", scenario, *_version_arguments(scenario, version)], tmp_path
    )
    if scenario in EXTENSIONS:
        # Every check the scenario recorded passed: an extension scenario is never partly
        # passed (a version's run weighs warnings against the baseline; this one cannot).
        assert "0 failed, 0 warnings" in output, report


async def test_the_frozen_requirements_of_2026_07_28_pass(tmp_path: Path) -> None:
    """The suite's own frozen set for the revision (what SEP-1730's tiers are read from), in one
    run: every scenario it holds, scored or not, passes with the empty baseline.

    The suite runs a frozen set's scenarios in parallel. The 2025-11-25 set holds ``sse-retry``,
    which times the client's reconnection against its own clock: on two busy cores, a parallel
    run can see the client's ordinary GET stream open late and take it for the reconnection. So
    that set runs scenario by scenario (``test_client_scenario``, the same scenarios and
    checks), and by hand in one run."""
    # 39 clients start at once on two cores: each gets two minutes, not the suite's default 30 s
    # (a hang guard for a busy machine, not a time any client needs).
    arguments = ["--requirements", "2026-07-28", "--timeout", "120000"]
    output, report = await _run_suite(arguments, tmp_path, guard=600)
    assert re.search(r"^Total: \d+ passed, 0 failed, 0 warnings$", output, re.M), report


async def _run_suite(
    arguments: list[str], tmp_path: Path, *, guard: float = RUN_GUARD
) -> tuple[str, str]:
    """Run the suite in client mode against client.py; fail unless it passed. Returns its
    output and a report for assertion messages."""
    results = tmp_path / "results"
    # The runner splits the command on spaces and appends the scenario server's URL.
    command = shlex.join([sys.executable, str(CLIENT)])
    with trio.fail_after(guard):
        done = await trio.run_process(
            [
                *node22_suite(),
                "client",
                "--command",
                command,
                *arguments,
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
    # ... but not skipped checks, nor (in a versioned run) warnings: none may pass for done.
    assert _checks_not_succeeding(results) == [], report
    assert "SKIPPED: scenario" not in output, report
    assert "Client exited with code" not in output, report
    return output, report


#: The only checks that may be SKIPPED (never WARNING), by scenario and check id, and why. Each
#: must still be skipped wherever its scenario runs, so the list stays exact.
ALLOWED_SKIPS: dict[tuple[str, str], str] = {
    # "Client declares valid roots/sampling capability if present": a modern client of
    # trio_mcp declares neither (both are deprecated at 2026-07-28), so there is none to check.
    ("request-metadata", "sep-2575-client-declares-roots-capability"): "declares no roots",
    ("request-metadata", "sep-2575-client-declares-sampling-capability"): "declares no sampling",
    # Mcp-Method on initialize and notifications/initialized: a modern client sends neither
    # (it connects with server/discover); the check succeeds for every request it does send.
    ("http-standard-headers", "sep-2243-client-includes-standard-headers"): "no initialize",
}


def _checks_not_succeeding(results: Path) -> list[str]:
    """Every check recorded WARNING, or SKIPPED unless ``ALLOWED_SKIPS`` names it, and every
    allowed skip of a scenario that ran without it, as ``<result dir>: <status> <id>``."""
    out = []
    for checks_file in sorted(results.glob("*/checks.json")):
        run = checks_file.parent.name
        allowed = {check for scenario, check in ALLOWED_SKIPS if run.startswith(f"{scenario}-")}
        skipped = set()
        for check in json.loads(checks_file.read_text()):
            status, check_id = check.get("status"), check.get("id")
            if status == "SKIPPED" and check_id in allowed:
                skipped.add(check_id)
            elif status in ("SKIPPED", "WARNING"):
                out.append(f"{run}: {status} {check_id}")
        out.extend(
            f"{run}: {c} is not skipped now (update ALLOWED_SKIPS)" for c in allowed - skipped
        )
    return out


def _version_arguments(scenario: str, version: str) -> list[str]:
    if scenario not in EXTENSIONS:
        return ["--spec-version", version]
    return [] if version == AS_LISTED else ["--spec-version", version, "--force"]
