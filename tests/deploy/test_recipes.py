"""The container recipes of ``deploy/`` (the Dockerfile, the compose file, the Kubernetes
manifests) agree with the command line, with ``deploy/nginx.conf`` and with docs/deploy.md:
every ``TRIO_MCP_`` variable they set is a setting the CLI reads, and each value one it takes;
every command parses; the ports agree; the probes ask the app's ready and live paths; every
stop timeout covers the drain. Nothing is built or run here (no image can be pulled): the
files are read as text and as YAML."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from trio_mcp._cli import NODE_ID_ENV, REDIS_URL_ENV, build_parser
from trio_mcp._settings import SERVE_SETTINGS, setting_value
from trio_mcp.http import HttpOptions
from trio_mcp.server._request_state_keys import STATE_KEYS_ENV, STATE_KEYS_FILE_ENV

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
KUBERNETES = DEPLOY / "kubernetes"
NGINX_CONF = DEPLOY / "nginx.conf"
DOCS = ROOT / "docs" / "deploy.md"

SETTINGS = {setting.env: setting for setting in SERVE_SETTINGS}
#: The variables the CLI reads beyond the settings table: the fleet's own.
FLEET_VARIABLES = {REDIS_URL_ENV, NODE_ID_ENV, STATE_KEYS_ENV, STATE_KEYS_FILE_ENV}
DEFAULTS = HttpOptions()
#: What a stop timeout must leave beyond the drain and the sessions' end (the hand-over).
MARGIN = 5


def recipes() -> list[Path]:
    return [DOCKERFILE, COMPOSE, *sorted(KUBERNETES.glob("*.yaml"))]


def manifests() -> dict[str, dict[str, Any]]:
    """Every Kubernetes object of deploy/kubernetes, by kind."""
    objects: dict[str, dict[str, Any]] = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                objects[document["kind"]] = document
    return objects


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def dockerfile_json(instruction: str) -> list[str]:
    """The exec-form arguments of the Dockerfile's (last) ``instruction``, continuation lines
    joined."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [line for line in text.splitlines() if line.startswith(instruction + " ")]
    assert lines, f"the Dockerfile has no {instruction}"
    form = re.search(r"(\[.*\])\s*$", lines[-1])
    assert form is not None, f"{instruction} is not in exec form: {lines[-1]}"
    values: list[str] = yaml.safe_load(form[1])
    return values


def serve_args(args: list[str]) -> Any:
    """``trio-mcp ARGS`` as the CLI parses it (SystemExit if any flag is unknown)."""
    return build_parser().parse_args(args)


def nginx_ports() -> dict[str, int]:
    """The port of each node of deploy/nginx.conf (its upstream's first server)."""
    text = NGINX_CONF.read_text()
    found = re.findall(r"upstream mcp_(n\d) \{\s*server 127\.0\.0\.1:(\d+);", text)
    return {node: int(port) for node, port in found}


def check_environment(env: dict[str, str], where: str) -> None:
    for name, value in env.items():
        if not name.startswith("TRIO_MCP_"):
            continue
        assert name in SETTINGS or name in FLEET_VARIABLES, f"{where}: {name} is no setting"
        if name in SETTINGS and value is not None:
            setting_value(SETTINGS[name], str(value), f"{where}: {name}")  # UsageError if not


def seconds(env: dict[str, str], name: str, default: float) -> float:
    value = env.get(name)
    return float(value) if value is not None else default


def drain_and_end(env: dict[str, str]) -> float:
    """How long a stop takes at most before the process exits: the drain's grace, then the
    sessions' end."""
    drain = seconds(env, "TRIO_MCP_DRAIN_GRACE", DEFAULTS.drain_grace)
    return drain + seconds(env, "TRIO_MCP_SHUTDOWN_GRACE", DEFAULTS.shutdown_grace)


def k8s_env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


# -- every variable ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", recipes(), ids=lambda p: p.name)
def test_every_variable_a_recipe_names_is_a_setting_in_the_table(path: Path) -> None:
    docs = DOCS.read_text()
    for name in set(re.findall(r"TRIO_MCP_[A-Z0-9_]+", path.read_text())):
        assert name in SETTINGS or name in FLEET_VARIABLES, f"{path.name}: {name} is no setting"
        assert f"`{name}`" in docs, f"{path.name}: {name} is not in docs/deploy.md"


# -- the Dockerfile ---------------------------------------------------------------------------


def test_the_image_serves_http_as_a_non_root_user_on_the_port_it_exposes() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\s*$", text, re.M)
    assert 'pip install ".[redis]"' in text
    user = re.findall(r"^USER (\S+)\s*$", text, re.M)
    assert user and user[-1] not in ("root", "0")
    command = dockerfile_json("ENTRYPOINT") + dockerfile_json("CMD")
    assert command[0] == "trio-mcp"
    args = serve_args(command[1:])
    assert (args.command, args.transport, args.host) == ("serve", "http", "0.0.0.0")
    assert re.findall(r"^EXPOSE (\d+)\s*$", text, re.M) == [str(args.port)]
    health = re.search(r"^HEALTHCHECK .*$", text.replace("\\\n", " "), re.M)
    assert health is not None
    assert f"http://127.0.0.1:{args.port}{DEFAULTS.live_path}" in health[0]


# -- the compose file -------------------------------------------------------------------------


def test_compose_runs_the_nginx_config_in_front_of_its_workers() -> None:
    services = compose()["services"]
    workers = {name: s for name, s in services.items() if name.startswith("worker-")}
    ports = nginx_ports()
    assert len(workers) == len(ports) == 3
    seen = {}
    for name, worker in workers.items():
        env = {k: str(v) for k, v in worker["environment"].items()}
        check_environment(env, name)
        args = serve_args(worker["command"])
        assert (args.command, args.transport, args.host) == ("serve", "http", "127.0.0.1")
        assert args.any_worker
        assert {REDIS_URL_ENV, NODE_ID_ENV, STATE_KEYS_FILE_ENV} <= set(env)
        node = env[NODE_ID_ENV]
        assert ports[node] == args.port, (name, node, args.port)  # as nginx.conf routes it
        seen[node] = args.port
        probe = " ".join(worker["healthcheck"]["test"])
        assert f"http://127.0.0.1:{args.port}{DEFAULTS.live_path}" in probe
        grace = float(worker["stop_grace_period"].removesuffix("s"))
        assert grace >= drain_and_end(env) + MARGIN, name
        assert worker["network_mode"] == "host"  # nginx.conf's 127.0.0.1 addresses
    assert seen == ports
    nginx = services["nginx"]
    assert "./nginx.conf:/etc/nginx/mcp/nginx.conf:ro" in nginx["volumes"]
    assert nginx["command"][:3] == ["nginx", "-c", "/etc/nginx/mcp/nginx.conf"]
    assert nginx["network_mode"] == "host"
    redis = services["redis"]["command"]
    assert redis[redis.index("--appendonly") + 1] == "yes"
    assert redis[redis.index("--maxmemory-policy") + 1] == "noeviction"
    url = workers["worker-1"]["environment"][REDIS_URL_ENV]
    assert url.endswith(":" + redis[redis.index("--port") + 1] + "/0")


# -- Kubernetes -------------------------------------------------------------------------------


def test_the_deployment_probes_ready_and_live_and_outlasts_the_drain() -> None:
    objects = manifests()
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(objects)
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = k8s_env(container)
    check_environment(env, "deployment.yaml")
    assert {NODE_ID_ENV, REDIS_URL_ENV, STATE_KEYS_FILE_ENV} <= set(env)
    args = serve_args(container["args"])
    assert (args.command, args.transport, args.host) == ("serve", "http", "0.0.0.0")
    assert args.any_worker
    (port,) = container["ports"]
    assert port["containerPort"] == args.port
    ready = env.get("TRIO_MCP_READY_PATH") or DEFAULTS.ready_path
    live = env.get("TRIO_MCP_LIVE_PATH") or DEFAULTS.live_path
    for probe, path in (("readinessProbe", ready), ("livenessProbe", live)):
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        assert get["port"] in (port["name"], port["containerPort"]), probe
    assert pod["terminationGracePeriodSeconds"] >= drain_and_end(env) + MARGIN
    assert pod["securityContext"]["runAsNonRoot"] is True
    keys = env[STATE_KEYS_FILE_ENV]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(keys).parent) in mounts  # the key file is where the variable says
    service = objects["Service"]["spec"]
    assert service["selector"] == objects["Deployment"]["spec"]["selector"]["matchLabels"]
    assert [p["targetPort"] for p in service["ports"]] == [port["name"]]
    assert "sessionAffinity" not in service  # any worker serves any session
    budget = objects["PodDisruptionBudget"]["spec"]
    assert budget["selector"] == objects["Deployment"]["spec"]["selector"]
    assert budget.get("maxUnavailable") == 1


def test_docs_name_every_recipe_and_its_command() -> None:
    docs = DOCS.read_text()
    for path in recipes():
        assert f"`deploy/{path.relative_to(DEPLOY)}`" in docs, path
    for line in re.findall(r"^\s*(docker (?:build|compose|run) .*)$", docs, re.M):
        words = shlex.split(line)
        if "-f" in words:
            assert (ROOT / words[words.index("-f") + 1]).exists(), line
