"""What the OpenTelemetry instrumentation costs: the same calls with OpenTelemetry absent, with
its API but no SDK, and with the SDK recording everything.

    python benchmarks/otel.py '{"calls": 500, "warmup": 50, "rounds": 3}'

Three modes, each applied to both sides (the client process and the server it calls) before
trio_mcp is imported:

- ``absent``: ``import opentelemetry`` fails (a finder at the head of ``sys.meta_path`` refuses
  it, as if the ``otel`` extra were not installed);
- ``api``: the API is imported (so trio_mcp asks it, once per connection, whether anything
  listens) and no SDK is installed: the state of an application that has the extra and
  configures nothing;
- ``sdk``: an SDK tracer provider (a batch processor into an exporter that drops everything)
  and meter provider (an in-memory reader, never collected) are the global ones: every span
  and measurement is made, none is sent anywhere.

Each mode serves the demo (``trio-mcp demo``, through the CLI's own ``main``, ``--log-level
warning``) over stdio (the client spawns it) and over HTTP (Streamable HTTP, its default era),
and a trio_mcp client makes ``warmup`` then ``calls`` ``tools/call echo`` one at a time. One
process per measurement; in each of ``rounds`` rounds every mode runs once per transport, the
modes' order rotating from round to round (:func:`in_round_order`), so the modes compared are
measured seconds apart and none always in the same place. Prints one JSON object: per
transport and mode the calls/s and p50 (medians over the rounds), the ratios api/absent and
sdk/absent (calls/s, computed per round, then the median), and the SDK's cost per call in µs.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve()
MODES = ("absent", "api", "sdk")
TRANSPORTS = ("stdio", "http")
#: How long an HTTP server may take to answer its readiness path.
START_TIMEOUT = 30.0
#: A bound on one measurement, only so that a hang fails.
MEASURE_TIMEOUT = 600


class _Absent(importlib.abc.MetaPathFinder):
    """Refuses every ``opentelemetry`` module, as if the package were not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def apply(mode: str) -> None:
    """Put this process in ``mode``; called before trio_mcp is imported."""
    if mode == "absent":
        sys.meta_path.insert(0, _Absent())
        return
    from opentelemetry import metrics, trace  # the API alone: only no-op providers

    if mode == "api":
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


def serve(mode: str, transport: str, port: str | None) -> int:
    """The demo server, in ``mode``, through the ``trio-mcp`` command's own entry point."""
    apply(mode)
    sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)
    from trio_mcp._cli import main

    options = ["--log-level", "warning"]
    if transport == "http":
        options += ["--transport", "http", "--port", str(port)]
    code = main(["demo", *options])
    if mode == "absent":
        assert not any(m.startswith("opentelemetry") for m in sys.modules)
    return code


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(mode: str, transport: str, spec: dict[str, Any]) -> dict[str, float]:
    """One measurement in ``mode``: this client, and the server it starts, both in it."""
    apply(mode)
    sys.path.append(str(ROOT))  # trio_mcp may come from PYTHONPATH (--commit)
    import httpx
    import trio

    from trio_mcp import Command, open_client

    server = [sys.executable, str(HERE), "--serve", mode, transport]

    async def calls(target: Any) -> dict[str, float]:
        samples: list[float] = []
        async with open_client(target) as client:
            for _ in range(spec["warmup"]):
                await client.call_tool("echo", {"text": "ping"})
            began = time.perf_counter()
            for _ in range(spec["calls"]):
                started = time.perf_counter()
                await client.call_tool("echo", {"text": "ping"})
                samples.append((time.perf_counter() - started) * 1e6)
            elapsed = time.perf_counter() - began
        return {"cps": spec["calls"] / elapsed, "p50_us": quantile(samples, 0.5)}

    async def over_http() -> dict[str, float]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        process = await trio.lowlevel.open_process(
            [*server, str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with httpx.AsyncClient() as probe:
                with trio.fail_after(START_TIMEOUT):
                    while True:
                        try:
                            if (await probe.get(base + "/ready")).status_code == 200:
                                break
                        except httpx.TransportError:
                            await trio.sleep(0.05)
            return await calls(base + "/mcp")
        finally:
            process.terminate()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()

    async def run() -> dict[str, float]:
        if transport == "stdio":
            return await calls(Command(server, stderr="discard"))
        return await over_http()

    figures = trio.run(run)
    if mode == "absent":  # honest: nothing of OpenTelemetry was loaded on this side
        assert not any(m.startswith("opentelemetry") for m in sys.modules)
    return figures


def in_round_order(index: int) -> list[tuple[str, str]]:
    """The measurements of round ``index``: the modes in turn, each once per transport, the
    transports alternating. Round after round the modes' order rotates, so that over every three
    rounds each mode is measured first, second and last once: a position in the round (after
    the SDK's measurement, say, or first on a machine still busy with the previous job) weighs
    on no mode more than on another. (A shuffle seeded by the round, as before, gave every run
    the same orders, the API's measurement after the SDK's in two rounds of two.)"""
    shift = index % len(MODES)
    modes = MODES[shift:] + MODES[:shift]
    transports = TRANSPORTS if index % 2 == 0 else TRANSPORTS[::-1]
    return [(transport, mode) for mode in modes for transport in transports]


def main(spec: dict[str, Any]) -> dict[str, float]:
    rounds: list[dict[str, dict[str, float]]] = []
    # The modes are set up here alone: no OTEL_* variable may make the command set up its own.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    for index in range(spec.get("rounds", 3)):
        order = in_round_order(index)
        found: dict[str, dict[str, float]] = {}
        for transport, mode in order:
            done = subprocess.run(
                [sys.executable, str(HERE), "--measure", mode, transport, json.dumps(spec)],
                capture_output=True,
                text=True,
                timeout=MEASURE_TIMEOUT,
                check=False,
                cwd=ROOT,
                env=env,
            )
            if done.returncode != 0:
                raise SystemExit(f"{mode} {transport} failed:\n{done.stderr}")
            found[f"{transport}_{mode}"] = json.loads(done.stdout)
        rounds.append(found)
    out: dict[str, float] = {}
    for transport in TRANSPORTS:
        for mode in MODES:
            for metric in ("cps", "p50_us"):
                values = [r[f"{transport}_{mode}"][metric] for r in rounds]
                out[f"{transport}_{mode}_{metric}"] = statistics.median(values)
        for mode in ("api", "sdk"):
            ratios = [
                r[f"{transport}_{mode}"]["cps"] / r[f"{transport}_absent"]["cps"] for r in rounds
            ]
            out[f"{transport}_{mode}_vs_absent"] = statistics.median(ratios)
        costs = [
            1e6 / r[f"{transport}_sdk"]["cps"] - 1e6 / r[f"{transport}_absent"]["cps"]
            for r in rounds
        ]
        out[f"{transport}_sdk_us_per_call"] = statistics.median(costs)
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        raise SystemExit(
            serve(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
        )
    if sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
    else:
        print(json.dumps(main(json.loads(sys.argv[1]))))
