"""A recording stdio proxy: ``python recording_proxy.py LOG -- COMMAND [ARG ...]``.

It spawns COMMAND (an MCP stdio server), relays its stdin and stdout line by line between the
client that spawned this proxy and the server, and appends every frame to LOG as one JSON line
``{"direction": "client->server" | "server->client", "message": <the frame>}`` (a frame that is
not JSON is logged as its text). Frames are logged before they are passed on, so the order in
LOG is the order the proxy saw them in. When the server exits, a last record
``{"direction": "proxy", "exit": <status>}`` says the log is complete.

The server's stderr is inherited. When the client closes the proxy's stdin, the server's stdin
is closed; the proxy exits when the server does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import IO, Any

CLIENT_TO_SERVER = "client->server"
SERVER_TO_CLIENT = "server->client"


class Recorder:
    def __init__(self, path: str) -> None:
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(entry) + "\n")
            self._file.flush()

    def frame(self, direction: str, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").rstrip("\r\n")
        if not text.strip():
            return
        message: Any
        try:
            message = json.loads(text)
        except ValueError:
            message = text
        self.record({"direction": direction, "message": message})

    def close(self) -> None:
        with self._lock:
            self._file.close()


def pump(source: IO[bytes], sink: IO[bytes], direction: str, recorder: Recorder) -> None:
    """Relay ``source`` to ``sink`` line by line, recording each line; close ``sink`` at EOF."""
    try:
        for line in iter(source.readline, b""):
            recorder.frame(direction, line)
            sink.write(line)
            sink.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass  # the other side went away: stop relaying this direction
    finally:
        try:
            sink.close()
        except OSError:
            pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: recording_proxy.py LOG -- COMMAND [ARG ...]\n")
        return 2
    log_path, command = argv[0], argv[2:]
    recorder = Recorder(log_path)
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    inbound = threading.Thread(
        target=pump,
        args=(sys.stdin.buffer, server.stdin, CLIENT_TO_SERVER, recorder),
        daemon=True,  # blocked on our stdin; it must not keep the proxy alive after the server
    )
    outbound = threading.Thread(
        target=pump, args=(server.stdout, sys.stdout.buffer, SERVER_TO_CLIENT, recorder)
    )
    inbound.start()
    outbound.start()
    outbound.join()
    status = server.wait()
    recorder.record({"direction": "proxy", "exit": status})
    recorder.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
