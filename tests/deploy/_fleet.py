"""N trio_mcp processes behind a real nginx on 127.0.0.1, for one block: the deployment that
``docs/deploy.md`` describes, run from its own ``deploy/nginx.conf``.

    async with fleet(tmp_path, 3) as running:
        running.url                      # the MCP endpoint, through nginx
        running.backends[0].terminate()  # SIGTERM (a drain) or .kill() (SIGKILL) one backend

Each backend is ``python -m trio_mcp demo --transport http --port P --node-id nK`` (or
``serve SERVER``, with ``server=``), plus whatever options the test passes through, in its own
process group; the fleet waits until each one's readiness path answers 200, then starts nginx
(``daemon off``, loopback only, its pid file, error log and temp files in the block's
directory) and waits until it accepts connections. When the block ends, however it ends,
nginx and every backend are killed with their process groups.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import trio

from .._ports import free_port
from . import system_packages

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
#: The test server with the ``backend`` tool (which pid, which node answered).
FLEET_SERVER = ROOT / "tests" / "servers" / "fleet_server.py"
#: The nodes ``deploy/nginx.conf`` names, and the ports it gives them and itself.
TEMPLATE_NODES = ("n1", "n2", "n3")
TEMPLATE_PORTS = {"n1": 8001, "n2": 8002, "n3": 8003}
TEMPLATE_LISTEN = 8000
#: Variables of the runner's environment the backends do not get (a fleet's keys and node ids
#: are the test's to give, through ``env`` or ``options``).
INHERITED_NOT = ("TRIO_MCP_STATE_KEYS", "TRIO_MCP_STATE_KEYS_FILE", "TRIO_MCP_NODE_ID")
#: Hang guards, never performance assertions.
START_GUARD = 30
STOP_GUARD = 10


def render_nginx_conf(
    template: str,
    *,
    listen: int,
    ports: dict[str, int],
    routing: str = "map",
) -> str:
    """``deploy/nginx.conf`` for these nodes (a prefix of n1, n2, n3) on these ports; its pid
    file, error log and temp files are relative to the prefix nginx runs with (``-p``), as the
    file says, so they are left as written. Every placeholder must be found, so the config
    and this harness cannot drift apart unnoticed. ``routing="any"``: every request
    round robin, the ``map`` on the session id left unused (for ``--any-worker`` backends);
    ``routing="connection"``: the ``map`` as shipped, and the requests without a session
    sent by client connection (the config's commented ``hash`` line in use)."""
    nodes = list(ports)
    if not nodes or nodes != list(TEMPLATE_NODES[: len(nodes)]):
        raise ValueError(f"the nodes are a prefix of {TEMPLATE_NODES}, not {nodes}")
    text = template
    for node in TEMPLATE_NODES[len(nodes) :]:
        address = f"127.0.0.1:{TEMPLATE_PORTS[node]}"
        text, blocks = re.subn(
            rf"\n    upstream mcp_{node} \{{.*?\n    \}}\n", "\n", text, flags=re.S
        )
        kept = [
            line for line in text.splitlines() if address not in line and f"mcp_{node};" not in line
        ]
        if blocks != 1:
            raise ValueError(f"deploy/nginx.conf has no upstream mcp_{node}")
        text = "\n".join(kept) + "\n"
    by_connection = "hash $remote_addr$remote_port consistent;"
    replacements = {
        "proxy_pass http://$mcp_backend;": (
            "proxy_pass http://mcp_any;" if routing == "any" else "proxy_pass http://$mcp_backend;"
        ),
        f"listen 127.0.0.1:{TEMPLATE_LISTEN};": f"listen 127.0.0.1:{listen};",
        f"#{by_connection}": by_connection if routing == "connection" else f"#{by_connection}",
    }
    for old, new in replacements.items():
        if old not in text:
            raise ValueError(f"deploy/nginx.conf no longer holds {old!r}")
        text = text.replace(old, new)
    by_template_port = {str(TEMPLATE_PORTS[node]): str(port) for node, port in ports.items()}
    return re.sub(
        r"127\.0\.0\.1:(800[1-3])\b", lambda m: "127.0.0.1:" + by_template_port[m[1]], text
    )


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    # The children import this checkout's trio_mcp, whatever is installed, unless PYTHONPATH
    # names another (the benchmarks' ``--commit`` snapshot).
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), str(ROOT)) if p)
    # What a backend is configured with comes from the test, never from the runner's shell.
    inherited = {k: v for k, v in os.environ.items() if k not in INHERITED_NOT}
    return {**inherited, "PYTHONPATH": path, **extra}


@attrs.define
class Backend:
    node_id: str
    port: int
    log: Path
    process: trio.Process

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def terminate(self) -> None:
        """SIGTERM: the backend drains, then exits."""
        self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the backend dies at once, mid-whatever."""
        self.process.kill()

    async def wait(self) -> int:
        return await self.process.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@attrs.define
class Fleet:
    port: int
    directory: Path
    backends: list[Backend]
    nginx: trio.Process

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def backend(self, node_id: str) -> Backend:
        return next(b for b in self.backends if b.node_id == node_id)

    def by_pid(self) -> dict[int, Backend]:
        return {b.pid: b for b in self.backends}

    def nginx_errors(self) -> str:
        log = self.directory / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""


async def _ready(client: httpx.AsyncClient, backend: Backend) -> None:
    with trio.fail_after(START_GUARD):
        while True:
            if backend.process.poll() is not None:
                raise RuntimeError(
                    f"backend {backend.node_id} exited with {backend.process.returncode}:\n"
                    + backend.output()[-3000:]
                )
            try:
                if (await client.get(backend.base + "/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await trio.sleep(0.05)


async def _accepting(port: int, process: trio.Process, directory: Path) -> None:
    with trio.fail_after(START_GUARD):
        while True:
            if process.poll() is not None:
                log = directory / "error.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                raise RuntimeError(f"nginx exited with {process.returncode}:\n{text[-3000:]}")
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def _kill_group(process: trio.Process) -> None:
    """SIGKILL the process and everything in its group (nginx's workers), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    with trio.move_on_after(STOP_GUARD):
        await process.wait()


@asynccontextmanager
async def fleet(
    directory: Path,
    count: int = 3,
    *,
    server: str | None = None,
    options: Sequence[str] = (),
    env: dict[str, str] | None = None,
    routing: str = "map",
) -> AsyncIterator[Fleet]:
    """``count`` backends (1 to 3) behind nginx; ``server``: a ``trio-mcp serve`` target
    (default: the demo); ``options``: more command-line options for every backend (those of
    other parts: ``--redis-url``, key files, ...); ``env``: more environment for them;
    ``routing``: ``"map"`` (a session's requests to the node its id names, as
    ``deploy/nginx.conf`` says), ``"any"`` (plain round robin) or ``"connection"`` (the map, and
    the requests without a session by client connection; see :func:`render_nginx_conf`)."""
    await trio.to_thread.run_sync(system_packages.ensure)
    nginx_command = system_packages.find("nginx")
    assert nginx_command is not None
    nodes = TEMPLATE_NODES[:count]
    started: list[trio.Process] = []
    try:
        backends = []
        for node in nodes:
            port = free_port()
            log = directory / f"{node}.log"
            # -P: the working directory (this checkout) does not go first on the path, so a
            # PYTHONPATH that names another trio_mcp (the benchmarks' --commit) is the one run.
            command = [sys.executable, "-P", "-m", "trio_mcp"]
            command += ["serve", server] if server is not None else ["demo"]
            command += ["--transport", "http", "--port", str(port), "--node-id", node, *options]
            with log.open("wb") as out:
                process = await trio.lowlevel.open_process(
                    command,
                    cwd=ROOT,
                    env=_child_env({"TRIO_MCP_NODE_ID": node, **(env or {})}),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            started.append(process)
            backends.append(Backend(node, port, log, process))
        async with httpx.AsyncClient(timeout=5) as client:
            for backend in backends:
                await _ready(client, backend)
        port = free_port()
        conf = directory / "nginx.conf"
        ports = {b.node_id: b.port for b in backends}
        conf.write_text(
            render_nginx_conf(
                NGINX_CONF.read_text(),
                listen=port,
                ports=ports,
                routing=routing,
            )
        )
        # As root, nginx's workers would run as nobody, who cannot enter the temp directory.
        globals_ = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
        command = [nginx_command, "-p", str(directory), "-e", "error.log", "-c", str(conf)]
        command += ["-g", globals_]
        with (directory / "nginx.stderr").open("wb") as out:
            nginx = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=out,
                start_new_session=True,
            )
        started.append(nginx)
        await _accepting(port, nginx, directory)
        yield Fleet(port, directory, backends, nginx)
    finally:
        with trio.CancelScope(shield=True):
            for process in reversed(started):
                await _kill_group(process)
