"""Every limit of the HTTP app and of the tasks is a ``trio-mcp serve`` flag and an environment
variable, in one table of docs/deploy.md: the table and the command line agree, and each flag
and each variable reaches its ``HttpOptions`` field or the server's tasks."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_mcp import Server
from trio_mcp._cli import build_parser
from trio_mcp._settings import (
    HTTP_SETTINGS,
    SERVE_SETTINGS,
    TASK_SETTINGS,
    UsageError,
    apply_task_settings,
    http_options,
)
from trio_mcp.http import HostRules, HttpOptions, Limits, RateLimit, ScaleOut, WebSocketOptions
from trio_mcp.tasks import TaskManager

DEPLOY = Path(__file__).parent.parent / "docs" / "deploy.md"

#: The groups whose every field is a limit, a timing or who is let in (their other fields are
#: objects given in code: a hook, a store, a relay, the node id has its own flag).
GROUPS: dict[str, type[Any]] = {
    "limits": Limits,
    "hosts": HostRules,
    "scale_out": ScaleOut,
    "websocket": WebSocketOptions,
}
NOT_SETTINGS = {
    "limits.client_key",
    "scale_out.event_store",
    "scale_out.session_store",
    "scale_out.relay",
    "scale_out.limit_store",
    "scale_out.node_id",
    "websocket.path",
}
#: ``HttpOptions``'s own fields that are limits or timings.
TOP = {
    "keepalive_interval",
    "shutdown_grace",
    "drain_grace",
    "ready_path",
    "ready_timeout",
    "live_path",
}


def table_rows() -> list[list[str]]:
    """The rows of the table under ``## Settings``, cells without their backticks."""
    text = DEPLOY.read_text()
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `--")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows]


def shown(default: Any, kind: str) -> str:
    if default is None:
        return "unset"
    if kind == "switch":
        return "on" if default else "off"
    return f"{default:g}" if kind == "seconds" else str(default)


def serve_flags() -> set[str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve = commands.choices["serve"]
    return {flag for action in serve._actions for flag in action.option_strings}


def test_the_deploy_table_and_the_command_line_agree() -> None:
    rows = table_rows()
    assert rows, "docs/deploy.md has no settings table"
    documented = {row[0]: row for row in rows}
    assert len(documented) == len(rows), "a flag is in the table twice"
    flags = serve_flags()
    for flag, *_ in rows:
        assert flag in flags, f"{flag} is in docs/deploy.md but not a flag of trio-mcp serve"
    by_flag = {setting.flag: setting for setting in SERVE_SETTINGS}
    assert set(documented) == set(by_flag)
    for setting in SERVE_SETTINGS:
        flag, env, default, meaning = documented[setting.flag]
        assert env == setting.env
        assert env == "TRIO_MCP_" + flag[2:].upper().replace("-", "_") + (
            "S" if setting.kind == "list" else ""
        )
        assert default == shown(setting.default, setting.kind), flag
        assert meaning == setting.meaning, flag


def test_every_limit_of_the_http_app_has_a_flag() -> None:
    targets = {setting.target for setting in HTTP_SETTINGS}
    for group, cls in GROUPS.items():
        for field in attrs.fields_dict(cls):
            target = f"{group}.{field}"
            if target not in NOT_SETTINGS:
                assert target in targets, f"{target} has no flag (and no row in docs/deploy.md)"
    assert targets >= TOP
    # And every flag names a real field, whose default it states.
    for setting in HTTP_SETTINGS:
        group, _, field = setting.target.rpartition(".")
        assert field in attrs.fields_dict(GROUPS[group] if group else HttpOptions), setting.flag
        assert setting.default == field_of(HttpOptions(), setting.target), setting.flag


def test_the_help_loads_nothing_of_http() -> None:
    code = (
        "import sys\n"
        "from trio_mcp._cli import build_parser\n"
        "build_parser().format_help()\n"
        "assert 'hypercorn' not in sys.modules and 'trio_mcp.http' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def options_of(argv: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    for setting in SERVE_SETTINGS:
        monkeypatch.delenv(setting.env, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["serve", "app.py", "--transport", "http", *argv])
    return http_options(args, ScaleOut(node_id="n1"))


def value_for(kind: str, index: int) -> tuple[str, Any]:
    """A text for a setting of ``kind`` and the value it stands for (each one different)."""
    if kind == "count":
        return str(7 + index), 7 + index
    if kind == "seconds":
        return f"{index + 0.5}", index + 0.5
    if kind == "path":
        return f"/p{index}", f"/p{index}"
    if kind == "name":
        return f"x-addr-{index}", f"x-addr-{index}"
    if kind == "rate":
        return f"{index}.5/{index + 2}", RateLimit(index + 0.5, index + 2)
    if kind == "switch":
        return "yes", True
    return f"a{index}.example, b{index}.example", [f"a{index}.example", f"b{index}.example"]


def field_of(options: HttpOptions, target: str) -> Any:
    value: Any = options
    for name in target.split("."):
        value = getattr(value, name)
    return value


def test_each_flag_and_each_variable_reaches_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    argv: list[str] = []
    env: dict[str, str] = {}
    expected: dict[str, Any] = {}
    for index, setting in enumerate(HTTP_SETTINGS):
        text, value = value_for(setting.kind, index)
        if index % 2:
            env[setting.env] = text
        elif setting.kind == "list":
            for item in text.split(","):
                argv += [setting.flag, item.strip()]
        elif setting.kind == "switch":
            argv += [setting.flag]
        else:
            argv += [setting.flag, text]
        expected[setting.target] = value
    options = options_of(argv, env, monkeypatch)
    for target, value in expected.items():
        assert field_of(options, target) == value, target
    assert options.scale_out.node_id == "n1"


def test_a_flag_wins_over_its_variable_and_defaults_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    options = options_of(
        ["--max-sessions", "5"],
        {"TRIO_MCP_MAX_SESSIONS": "9", "TRIO_MCP_CLIENT_ADDRESS_HEADER": "x-forwarded-for"},
        monkeypatch,
    )
    assert options.limits.max_sessions == 5
    assert options.hosts.client_address_header == "x-forwarded-for"
    assert options.limits.max_sessions_per_client == Limits().max_sessions_per_client
    assert options.drain_grace == HttpOptions().drain_grace


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (["--max-sessions", "0"], {}, "--max-sessions: expected a whole number of at least 1"),
        ([], {"TRIO_MCP_MAX_SESSIONS": "lots"}, "TRIO_MCP_MAX_SESSIONS: expected a whole number"),
        (["--drain-grace", "-1"], {}, "--drain-grace: expected a number of seconds above 0"),
        ([], {"TRIO_MCP_READY_TIMEOUT": "nan"}, "TRIO_MCP_READY_TIMEOUT: expected a number"),
        (["--live-path", "live"], {}, "--live-path: expected a path starting with /"),
        ([], {"TRIO_MCP_CLIENT_ADDRESS_HEADER": "x forwarded"}, "expected one word"),
        (["--rate-limit", "0"], {}, "--rate-limit: expected RATE or RATE/BURST"),
        ([], {"TRIO_MCP_TOOL_RATE_LIMIT": "5/0"}, "TRIO_MCP_TOOL_RATE_LIMIT: expected RATE"),
        ([], {"TRIO_MCP_SHARE_REQUEST_LIMITS": "maybe"}, "expected 1, true, yes or on"),
    ],
)
def test_a_bad_value_is_a_usage_error_naming_it(
    argv: list[str], env: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UsageError, match=re.escape(said)):
        options_of(argv, env, monkeypatch)


def test_every_task_limit_has_a_flag_stating_the_managers_default() -> None:
    manager = Server("t").tasks
    assert isinstance(manager, TaskManager)
    for setting in TASK_SETTINGS:
        attribute = setting.target.removeprefix("tasks.")
        assert setting.default == getattr(manager, attribute), setting.flag
    assert {s.target for s in TASK_SETTINGS} == {
        "tasks.max_running",
        "tasks.max_per_principal",
        "tasks.input_timeout",
    }


def test_task_limits_reach_the_servers_tasks_from_flags_and_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for setting in SERVE_SETTINGS:
        monkeypatch.delenv(setting.env, raising=False)
    monkeypatch.setenv("TRIO_MCP_MAX_TASKS_PER_PRINCIPAL", "3")
    monkeypatch.setenv("TRIO_MCP_MAX_TASKS", "50")
    args = build_parser().parse_args(
        ["serve", "app.py", "--max-tasks", "7", "--task-input-timeout", "2.5"]
    )
    server = Server("t")
    apply_task_settings(args, server)
    assert server.tasks.max_running == 7  # the flag wins over its variable
    assert server.tasks.max_per_principal == 3
    assert server.tasks.input_timeout == 2.5
    with pytest.raises(UsageError, match="--max-tasks: expected a whole number"):
        apply_task_settings(
            build_parser().parse_args(["serve", "app.py", "--max-tasks", "0"]), server
        )


def test_single_use_state_reaches_the_server_from_its_flag_or_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for setting in SERVE_SETTINGS:
        monkeypatch.delenv(setting.env, raising=False)
    server = Server("t")
    apply_task_settings(build_parser().parse_args(["serve", "app.py"]), server)
    assert server.single_use_state is False
    apply_task_settings(
        build_parser().parse_args(["serve", "app.py", "--single-use-state"]), server
    )
    assert server.single_use_state is True
    monkeypatch.setenv("TRIO_MCP_SINGLE_USE_STATE", "off")
    server = Server("t", single_use_state=True)
    apply_task_settings(build_parser().parse_args(["serve", "app.py"]), server)
    assert server.single_use_state is False
