"""Many handshake-era sessions through a load balancer with the official Python SDK's client.

    python -m tests.deploy._py_fleet_client URL SESSIONS CALLS CONCURRENCY

Each session (``Client(url, mode="legacy")``: the ``initialize`` handshake, then calls on its
``Mcp-Session-Id``) asks the fleet server's ``backend`` tool which process holds it, then
makes CALLS ``echo`` calls and checks each answer. Prints one JSON object: the sessions and
calls that succeeded, the first errors, and the sessions per backend pid.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import anyio
from mcp import Client


def text(result: Any) -> str:
    if result.is_error:
        raise RuntimeError(f"the call failed: {result}")
    value: str = result.content[0].text
    return value


async def drive(url: str, sessions: int, calls: int, concurrency: int) -> dict[str, Any]:
    report: dict[str, Any] = {"sessions_ok": 0, "calls_ok": 0, "errors": []}
    pids: Counter[int] = Counter()
    limiter = anyio.Semaphore(concurrency)

    async def session(number: int) -> None:
        async with limiter:
            try:
                async with Client(url, mode="legacy", cache=None) as client:
                    pid = json.loads(text(await client.call_tool("backend", {})))["pid"]
                    for call in range(calls):
                        word = f"s{number}c{call}"
                        if text(await client.call_tool("echo", {"text": word})) != word:
                            raise RuntimeError(f"echo of {word!r} came back wrong")
                        report["calls_ok"] += 1
                pids[pid] += 1
                report["sessions_ok"] += 1
            except Exception as exc:  # reported, and the test fails on it
                if len(report["errors"]) < 5:
                    report["errors"].append(f"session {number}: {type(exc).__name__}: {exc}")

    async with anyio.create_task_group() as group:
        for number in range(sessions):
            group.start_soon(session, number)
    report["pids"] = {str(pid): count for pid, count in pids.items()}
    return report


def main(argv: list[str]) -> int:
    url, sessions, calls, concurrency = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    report = anyio.run(drive, url, sessions, calls, concurrency)
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
