"""The ``trio-mcp`` command's observability for real: OpenTelemetry's SDK set up from the
``OTEL_*`` variables (console exporter: one trace from ``trio-mcp call`` to the server, over HTTP
and over stdio, with nothing on the protocol's stdout), the log level, and the request log of
``serve --transport http``, which names requests and never their content."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from trio_mcp._observability import exporters_asked

from .test_cli import CLI, GUARD, ROOT, child_env

HTTP = ["--transport", "http", "--port", "0"]
READY = re.compile(r"serving MCP at (http://\S+/mcp)")


def otel_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith(("OTEL_", "TRIO_MCP_LOG"))}
    return {**env, **extra}


def spans_in(text: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (each a JSON object opening on a line of its
    own), among whatever else was written."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    end = 0
    for opening in re.finditer(r"^\{$", text, re.MULTILINE):
        if opening.start() < end:
            continue
        try:
            value, end = decoder.raw_decode(text, opening.start())
        except ValueError:
            continue
        if isinstance(value, dict) and "context" in value and "kind" in value:
            found.append(value)
    return found


def one_span(spans: list[dict[str, Any]], name: str, kind: str) -> dict[str, Any]:
    found = [s for s in spans if s["name"] == name and s["kind"] == f"SpanKind.{kind}"]
    assert len(found) == 1, [(s["name"], s["kind"]) for s in spans]
    return found[0]


def assert_parent(server_span: dict[str, Any], client_span: dict[str, Any]) -> None:
    assert server_span["context"]["trace_id"] == client_span["context"]["trace_id"]
    assert server_span["parent_id"] == client_span["context"]["span_id"]


@contextmanager
def serving(tmp_path: Path, *options: str, env: dict[str, str]) -> Iterator[Any]:
    """``trio-mcp demo`` over HTTP, its stdout and stderr in files; stopped with SIGINT (a
    graceful end, so its exporters flush). Yields (url, stdout path, stderr path)."""
    out, err = tmp_path / "server.out", tmp_path / "server.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*CLI, "demo", *HTTP, *options],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=ROOT,
            env=env,
        )
    try:
        deadline = time.monotonic() + GUARD
        while (found := READY.search(err.read_text())) is None:
            assert process.poll() is None, err.read_text()
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        yield found.group(1), out, err
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=GUARD, cwd=ROOT, env=env, check=False
    )


# -- OpenTelemetry from OTEL_* ---------------------------------------------------------------------


def test_console_spans_over_http_are_one_trace_from_the_client_to_the_server(
    tmp_path: Path,
) -> None:
    env = otel_env(OTEL_TRACES_EXPORTER="console")
    with serving(tmp_path, env=env) as (url, out, err):
        called = cli("call", url, "echo", "text=hello", env=env)
        assert called.returncode == 0, called.stderr
        assert called.stdout == "hello\n"  # the client's spans went to stderr, not the answer
    client_span = one_span(spans_in(called.stderr), "tools/call echo", "CLIENT")
    server_span = one_span(spans_in(out.read_text()), "tools/call echo", "SERVER")
    assert_parent(server_span, client_span)
    assert client_span["resource"]["attributes"]["service.name"] == "trio-mcp"
    assert server_span["resource"]["attributes"]["service.name"] == "trio-mcp-demo"
    # The server's log lines carry the ids of the span they were written in.
    trace_id = server_span["context"]["trace_id"].removeprefix("0x")
    span_id = server_span["context"]["span_id"].removeprefix("0x")
    logged = [line for line in err.read_text().splitlines() if "method=tools/call" in line]
    assert len(logged) == 1 and f"[trace_id={trace_id} span_id={span_id}]" in logged[0], logged


def test_over_stdio_the_call_works_the_spans_go_to_stderr_and_stdout_stays_the_protocols(
    tmp_path: Path,
) -> None:
    env = otel_env(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="traced")
    server_err = tmp_path / "child.err"
    # The stdio child's stderr in a file of its own, so its spans and the client's do not mix.
    demo = shlex.join([*CLI, "demo"])
    target = f"sh -c {shlex.quote(f'exec {demo} 2>{shlex.quote(str(server_err))}')}"
    called = cli("call", target, "echo", "text=hello", env=env)
    assert called.returncode == 0, called.stderr
    assert called.stdout == "hello\n"
    client_span = one_span(spans_in(called.stderr), "tools/call echo", "CLIENT")
    server_span = one_span(spans_in(server_err.read_text()), "tools/call echo", "SERVER")
    assert_parent(server_span, client_span)
    assert client_span["resource"]["attributes"]["service.name"] == "traced"  # OTEL_SERVICE_NAME

    # The served side on its own: every byte of its stdout is a protocol message.
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "echo", "arguments": {"text": "hi"}}},
    ]  # fmt: skip
    served = subprocess.run(
        [*CLI, "demo"],
        input=b"".join(orjson.dumps(m) + b"\n" for m in messages),
        capture_output=True,
        timeout=GUARD,
        cwd=ROOT,
        env=env,
        check=False,
    )
    lines = served.stdout.splitlines()
    answers = [orjson.loads(line) for line in lines]
    assert [a.get("id") for a in answers] == [1, 2], served.stdout
    assert answers[1]["result"]["content"][0]["text"] == "hi"
    spans = spans_in(served.stderr.decode())
    assert one_span(spans, "tools/call echo", "SERVER")["parent_id"] is None


def test_no_exporter_asked_no_sdk_disabled_or_help_loads_no_opentelemetry() -> None:
    """``trio-mcp --help``, a served demo and a client command start as fast as before: without
    an ``OTEL_*`` variable naming an exporter (or with ``OTEL_SDK_DISABLED=true``) nothing of
    OpenTelemetry is imported."""
    helped = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trio_mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
        env=otel_env(OTEL_SERVICE_NAME="x"),
        check=True,
    )
    assert "opentelemetry" not in helped.stderr
    demo = shlex.join([*CLI, "demo"])
    code = (
        "import sys\nfrom trio_mcp._cli import main\n"
        f"assert main(['tools', {demo!r}]) == 0\n"
        "assert main(['demo']) == 0\n"  # stdin is empty: it serves, then ends
        "print([m for m in sys.modules if m.startswith('opentelemetry')], file=sys.stderr)\n"
    )
    for env in (
        otel_env(OTEL_SERVICE_NAME="x"),
        otel_env(OTEL_TRACES_EXPORTER="console", OTEL_SDK_DISABLED="true"),
        otel_env(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GUARD,
            cwd=ROOT,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines()[-1] == "[]", done.stderr


def test_an_exporter_that_is_not_installed_is_one_line_and_the_call_still_works() -> None:
    env = otel_env(OTEL_TRACES_EXPORTER="console,nosuchexporter")
    called = cli("call", shlex.join([*CLI, "demo"]), "echo", "text=hi", env=env)
    assert called.returncode == 0, called.stderr
    assert called.stdout == "hi\n"
    assert "OTEL_TRACES_EXPORTER: no exporter 'nosuchexporter' is installed" in called.stderr
    assert one_span(spans_in(called.stderr), "tools/call echo", "CLIENT")


def test_which_exporters_the_variables_ask_for() -> None:
    assert exporters_asked({}, "TRACES") == []
    assert exporters_asked({"OTEL_TRACES_EXPORTER": "Console, otlp"}, "TRACES") == [
        "console",
        "otlp",
    ]
    assert exporters_asked({"OTEL_TRACES_EXPORTER": "none"}, "TRACES") == []
    # Unset, with an OTLP endpoint: OTLP, as opentelemetry-instrument would.
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}
    assert exporters_asked(endpoint, "METRICS") == ["otlp"]
    metrics_only = {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:4318"}
    assert exporters_asked(metrics_only, "TRACES") == []
    assert exporters_asked(metrics_only, "METRICS") == ["otlp"]


# -- logs ------------------------------------------------------------------------------------------


def test_the_http_request_log_names_each_request_and_never_its_content(tmp_path: Path) -> None:
    """One line per request (method, target, id, outcome, duration, transport, session,
    principal) at INFO; distinctive secrets in a tool's arguments and result, the bearer token
    and a header's value appear nowhere in the server's output."""
    token = "tok-" + secrets.token_hex(12)
    argument = "arg-" + secrets.token_hex(12)  # echo sends it back: in the result too
    number = "num-" + secrets.token_hex(12)  # refused by add's schema, quoted in its error
    header = "hdr-" + secrets.token_hex(12)
    env = otel_env(TRIO_MCP_TEST_TOKEN=token)
    with serving(tmp_path, "--auth-token-env", "TRIO_MCP_TEST_TOKEN", env=env) as (url, out, err):
        headers = ["-H", f"Authorization: Bearer {token}", "-H", f"X-Custom: {header}"]
        echoed = cli("call", url, "echo", f"text={argument}", *headers, env=env)
        assert echoed.stdout == f"{argument}\n", echoed.stderr
        refused = cli("call", url, "add", json.dumps({"a": number, "b": 1}), *headers, env=env)
        assert refused.returncode != 0
        unknown = cli("call", url, "nosuchtool", *headers, env=env)
        assert unknown.returncode != 0
    logged = err.read_text() + out.read_text()
    for secret in (token, argument, number, header):
        assert secret not in logged
    lines = [line for line in err.read_text().splitlines() if " trio_mcp.requests: " in line]
    fields = [dict(f.split("=", 1) for f in line.split(": ", 1)[1].split()) for line in lines]
    calls = [f for f in fields if f["method"] == "tools/call"]
    assert [(f["target"], f["outcome"]) for f in calls] == [
        ("echo", "ok"),
        ("add", "tool_error"),
        ("nosuchtool", "error"),
    ], lines
    assert calls[2]["code"] == "-32602"
    assert sum(f["method"] == "initialize" for f in fields) == 3  # one per `trio-mcp call`
    for line, f in zip(lines, fields, strict=True):
        assert " INFO trio_mcp.requests: " in line
        assert f["transport"] == "streamable-http"
        assert f["principal"] == "developer"
        assert re.fullmatch(r"[0-9a-f]{32}", f["session"]), line
        assert float(f["duration_ms"]) >= 0
        assert f["id"]


def test_log_level_quiets_the_request_log_and_a_bad_level_is_a_usage_error(
    tmp_path: Path,
) -> None:
    env = otel_env(TRIO_MCP_LOG_LEVEL="warning")
    with serving(tmp_path, env=env) as (url, _out, err):
        assert cli("call", url, "echo", "text=hi", env=env).returncode == 0
    assert "trio_mcp.requests" not in err.read_text()
    bad = cli("demo", env=otel_env(TRIO_MCP_LOG_LEVEL="loud"))
    assert bad.returncode == 2
    assert bad.stderr == (
        "trio-mcp: TRIO_MCP_LOG_LEVEL: expected one of debug, info, warning, error, critical, "
        "not 'loud'\n"
    )
    flagged = cli("demo", "--log-level", "loud", env=otel_env())
    assert flagged.returncode == 2 and "--log-level" in flagged.stderr


@pytest.mark.parametrize("level", ["info", "INFO"])
def test_over_stdio_a_log_level_of_info_shows_the_request_log_on_stderr(level: str) -> None:
    """The stdio child inherits the client's stderr: its request log shows there."""
    env = otel_env(TRIO_MCP_LOG_LEVEL=level)
    called = cli("call", shlex.join([*CLI, "demo"]), "echo", "text=hi", env=env)
    assert called.returncode == 0, called.stderr
    assert called.stdout == "hi\n"
    found = re.search(
        r"INFO trio_mcp\.requests: method=tools/call target=echo id=\S+ .*", called.stderr
    )
    assert found is not None, called.stderr
    assert "outcome=ok" in found.group() and "transport=stdio" in found.group()


LOGGING_SERVER = """
import logging

from trio_mcp import Server

logging.basicConfig(format="OWN %(levelname)s %(message)s")
server = Server("own-logging")


@server.tool()
def hello() -> str:
    return "hi"
"""


def test_a_served_file_that_configures_logging_keeps_its_format(tmp_path: Path) -> None:
    path = tmp_path / "own_logging.py"
    path.write_text(LOGGING_SERVER)
    served = shlex.join([*CLI, "serve", str(path), "--log-level", "info"])
    called = cli("call", served, "hello", env=otel_env())
    assert called.returncode == 0, called.stderr
    logged = [line for line in called.stderr.splitlines() if "method=tools/call" in line]
    assert len(logged) == 1 and logged[0].startswith("OWN INFO method=tools/call target=hello"), (
        called.stderr
    )
