"""``deploy/nginx.conf`` runs as docs/deploy.md says, as a user without root: its pid file, its
error log and its temporary files go under the prefix the user chose, and nothing else is
written. When the tests run as root, nginx runs as ``nobody``, who can write nowhere else."""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .._ports import free_port
from . import system_packages
from ._fleet import NGINX_CONF, ROOT, render_nginx_conf

DEPLOY_MD = ROOT / "docs" / "deploy.md"
#: Hang guard, never a performance assertion.
GUARD = 30


def documented_commands() -> list[str]:
    """The commands docs/deploy.md gives for starting nginx (its prefix made first)."""
    text = DEPLOY_MD.read_text()
    block = re.search(r"## Several processes on one host\n.*?```sh\n(.*?)```", text, re.S)
    assert block is not None
    lines = [line.split("#", 1)[0].strip() for line in block[1].splitlines()]
    return [line for line in lines if line.startswith(("mkdir", "nginx"))]


@pytest.fixture
def prefix() -> Iterator[Path]:
    """A fresh directory the unprivileged user owns (in the system's temp directory, which
    everyone may enter, unlike pytest's)."""
    directory = Path(tempfile.mkdtemp(prefix="mcp-nginx-"))
    directory.chmod(0o755)
    try:
        yield directory / "mcp-nginx"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def as_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    nobody = pwd.getpwnam("nobody")
    drop = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    return [*drop, *command]


def _wait_for(ready: Callable[[], bool], what: str) -> None:
    """Poll ``ready()`` until true; a hang guard, never a performance assertion."""
    deadline = time.monotonic() + GUARD
    while not ready():
        assert time.monotonic() < deadline, f"no {what} within {GUARD}s"
        time.sleep(0.05)


def _ask(port: int) -> bytes | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as connection:
            connection.sendall(b"GET /ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return connection.recv(4096)
    except ConnectionRefusedError:
        return None


def test_the_documented_command_runs_nginx_without_root(prefix: Path) -> None:
    system_packages.ensure()
    nginx = system_packages.find("nginx")
    assert nginx is not None
    mkdir, start = documented_commands()
    assert mkdir == "mkdir -p ~/mcp-nginx"
    # The file as shipped, only its ports moved off 8000-8003 (they may be taken here).
    ports = {"n1": free_port(), "n2": free_port(), "n3": free_port()}
    listen = free_port()
    conf = prefix.parent / "nginx.conf"
    conf.write_text(render_nginx_conf(NGINX_CONF.read_text(), listen=listen, ports=ports))
    assert not re.search(r"^\s*(pid|error_log|\w+_temp_path)\s+/", conf.read_text(), re.M)
    words = shlex.split(start.replace("~/mcp-nginx", str(prefix)))
    words = [str(conf) if w == "/full/path/to/deploy/nginx.conf" else w for w in words]
    assert words[0] == "nginx"
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(prefix.parent, nobody.pw_uid, nobody.pw_gid)
    made = subprocess.run(as_user(["mkdir", "-p", str(prefix)]), check=False)
    assert made.returncode == 0
    started = subprocess.run(
        as_user([nginx, *words[1:]]), capture_output=True, text=True, timeout=GUARD, check=False
    )
    pid_file = prefix / "nginx.pid"
    try:
        assert started.returncode == 0, started.stderr
        assert "could not open" not in started.stderr, started.stderr
        answers: list[bytes] = []

        def answered() -> bool:
            found = _ask(listen)
            if found:
                answers.append(found)
            return bool(found)

        _wait_for(answered, "answer from nginx")
        answer = answers[-1]
        # nginx answered (502: no backend runs here), from files of the prefix only.
        assert answer.startswith(b"HTTP/1.1 502"), answer
        assert pid_file.is_file()
        assert (prefix / "error.log").is_file()
        assert {p.name for p in prefix.iterdir()} >= {"nginx.pid", "error.log", "proxy_temp"}
        quit_ = subprocess.run(
            as_user([nginx, *words[1:], "-s", "quit"]), capture_output=True, check=False
        )
        assert quit_.returncode == 0, quit_.stderr
        _wait_for(lambda: not pid_file.exists(), "exit of nginx")
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
