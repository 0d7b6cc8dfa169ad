"""The report that ``run.py`` writes: markdown tables and the PNG chart, from its summary.

The summary holds, per job (``"ts->trio"``: the TypeScript client driving trio_mcp's server;
``"cancel raw->floor"``; ``"scale trio"``; ``"inprocess"``) and per metric, the median, min and
max over the runs; and the same for every ratio, each computed within one run.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: Display names of the implementations.
NAMES = {
    "trio": "trio_mcp",
    "ts": "TypeScript SDK",
    "ts2": "TypeScript SDK v2 server",
    "py": "Python SDK",
    "floor": "bare-Trio floor",
    "raw": "raw driver",
}
SERVERS = ("trio", "ts", "ts2", "py")
CLIENTS = ("trio", "ts", "py")
HTTP_NAMES = {
    **NAMES,
    "floor": "bare-hypercorn floor",
    "floor-tasks": "bare-hypercorn floor, a task and a scope per request",
    "floor_tasks": "bare-hypercorn floor, a task and a scope per request",
}
HTTP_CONNECTIONS = 10
#: Bare POST round trips per cancel in the floor's HTTP cancel job (run.py's HTTP_POST_ROUNDS).
HTTP_POST_ROUNDS = 10
DASH = "\u2013"  # an en dash, for ranges
#: The rows of ``fleet_cost.py`` (run.py's ratios, the report's table): each fleet and load.
#: The control (three standalone processes at once, no nginx, no Redis); three backends
#: (tagged; any worker, round robin and behind the map; tagged, by connection) at the same
#: load in all and per process; the tagged fleet's machinery
#: with one backend, whose load per process is the standalone's.
FLEET_COST_ROWS = (
    ("three", "per"),
    ("three", "total"),
    ("tagged", "per"),
    ("tagged", "total"),
    ("any", "per"),
    ("any", "total"),
    ("anymap", "per"),
    ("anymap", "total"),
    ("connection", "per"),
    ("connection", "total"),
    ("one", "total"),
)

Stat = dict[str, float]


def fmt(value: float, digits: int = 0) -> str:
    if value != value:  # NaN
        return "n/a"
    return f"{value:,.{digits}f}"


def cell(stat: Stat | None, digits: int = 0, unit: str = "") -> str:
    """``median (min to max)``, or just the median when there was one run."""
    if stat is None:
        return "n/a"
    median = fmt(stat["median"], digits)
    if stat["n"] < 2:
        return f"{median}{unit}"
    return f"{median}{unit} ({fmt(stat['min'], digits)}{DASH}{fmt(stat['max'], digits)})"


class Goal:
    """One goal of the benchmark issue, read against a ratio or a figure."""

    def __init__(
        self,
        text: str,
        source: tuple[str, str],
        *,
        at_least: float | None = None,
        at_most: float | None = None,
        digits: int = 2,
        unit: str = "x",
        context: Callable[[Report], str] = lambda _: "",
        profile: str = "",
        floor: tuple[str, str] | None = None,
    ) -> None:
        self.text = text
        self.profile = profile
        #: The floor held to the same goal (its label, and the ratio that reads it): a bare
        #: program that meets nothing more than the goal's own stack must. Where it misses the
        #: goal too, no server on that stack can meet it.
        self.floor = floor
        self.source = source
        self.at_least = at_least
        self.at_most = at_most
        self.digits = digits
        self.unit = unit
        self.context = context

    def missed(self, report: Report, stat: Stat | None = None) -> bool:
        stat = self.stat(report) if stat is None else stat
        if stat is None:
            return False
        value = stat["median"]
        return not (
            (self.at_least is None or value >= self.at_least)
            and (self.at_most is None or value <= self.at_most)
        )

    def stat(self, report: Report) -> Stat | None:
        kind, name = self.source
        if kind == "ratio":
            return report.ratio(name)
        job, metric = name.split(":")
        return report.stat(job, metric)

    def row(self, report: Report) -> list[str]:
        stat = self.stat(report)
        verdict = (
            "not measured" if stat is None else "**missed**" if self.missed(report) else "**met**"
        )
        limits = ""
        if self.missed(report) and self.profile:
            limits = f"profile *{self.profile}*" + (
                "" if self.profile in report.profiles_recorded() else " (not recorded in this run)"
            )
        text = self.text.format(parked=f"{report.p['parked']:,}")
        floor = ""
        if self.floor is not None:
            label, ratio = self.floor
            held = report.ratio(ratio)
            if held is not None:
                judged = "missed" if self.missed(report, held) else "met"
                floor = f"{label}: {cell(held, self.digits, self.unit)}, {judged}"
        row = [text, cell(stat, self.digits, self.unit), verdict, floor, self.context(report)]
        return [*row, limits]


#: The Streamable HTTP eras and responses of the goals, and the profile that shows what limits
#: each: the era's own, or for the modern era's JSON (whose floor answers cheaper than with
#: SSE) ours beside the floor's, in µs per call.
_STREAMABLE = [
    ("hs", "handshake", "sse", "http"),
    ("hs", "handshake", "json", "http"),
    ("modern", "modern", "sse", "http-modern"),
    ("modern", "modern", "json", "http-modern-floor"),
]


def _task_floor(era: str, response: str, wrk: str) -> tuple[str, str] | None:
    """The handshake era's floor with a task and a scope per request, held to its goal."""
    if era != "hs":
        return None
    return ("a task and a scope per request", f"http_hs_{response}_floor_tasks{wrk}_vs_floor_con")


def _ws_task_floor(transport: str, ratio: str) -> tuple[str, str] | None:
    """WebSocket's floor with a task and a scope per request, held to its goal."""
    if transport != "ws":
        return None
    return ("a task and a scope per request", f"http_ws_floor_tasks{ratio}")


GOALS = [
    *(
        goal
        for era, era_label, response, profile in _STREAMABLE
        for goal in (
            Goal(
                f"HTTP ≥ 0.85x the bare-hypercorn floor per worker, {era_label} era, "
                f"{response.upper()}, 10 connections, the project's driver",
                ("ratio", f"http_{era}_{response}_vs_floor_con"),
                at_least=0.85,
                context=lambda r, e=era, x=response: (
                    f"ours {cell(r.stat(f'http {e} trio {x}', 'con_cps'))}, floor "
                    f"{cell(r.stat(f'http {e} floor {x}', 'con_cps'))} calls/s; by CPU per "
                    f"call (floor/ours): {cell(r.ratio(f'http_{e}_{x}_cpu_vs_floor'), 2, 'x')}"
                    f"{r.over_task_floor(e, x, '')}"
                ),
                floor=_task_floor(era, response, ""),
                profile=profile,
            ),
            Goal(
                f"HTTP ≥ 0.85x the bare-hypercorn floor per worker, {era_label} era, "
                f"{response.upper()}, 10 connections, under wrk",
                ("ratio", f"http_{era}_{response}_wrk_vs_floor_con"),
                at_least=0.85,
                context=lambda r, e=era, x=response: (
                    r.under_wrk(e, x) + r.over_task_floor(e, x, "_wrk")
                ),
                floor=_task_floor(era, response, "_wrk"),
                profile=profile,
            ),
        )
    ),
    *(
        goal
        for transport, label in (("legacy_sse", "HTTP+SSE (2024-11-05)"), ("ws", "WebSocket"))
        for goal in (
            Goal(
                f"{label} ≥ 0.8x its bare-hypercorn floor per worker, 10 connections",
                ("ratio", f"http_{transport}_vs_floor_con"),
                at_least=0.8,
                context=lambda r, t=transport.replace("_", "-"), k=transport: (
                    f"ours {cell(r.stat(f'http {t} trio', 'con_cps'))}, floor "
                    f"{cell(r.stat(f'http {t} floor', 'con_cps'))} calls/s"
                    f"{r.over_tasks('http_ws_vs_floor_tasks_con' if k == 'ws' else None)}"
                ),
                floor=_ws_task_floor(transport, "_vs_floor_con"),
                profile=transport.replace("_", "-"),
            ),
            Goal(
                f"{label} ≥ 0.8x its bare-hypercorn floor per worker, by CPU per call (floor/ours)",
                ("ratio", f"http_{transport}_cpu_vs_floor"),
                at_least=0.8,
                context=lambda r, t=transport.replace("_", "-"), k=transport: (
                    f"ours {cell(r.stat(f'http {t} trio', 'cpu_us_per_call'))}, floor "
                    f"{cell(r.stat(f'http {t} floor', 'cpu_us_per_call'))} µs per call"
                    f"{r.over_tasks('http_ws_cpu_vs_floor_tasks' if k == 'ws' else None)}"
                ),
                floor=_ws_task_floor(transport, "_cpu_vs_floor"),
                profile=transport.replace("_", "-"),
            ),
        )
    ),
    Goal(
        "HTTP ≥ 2x the Python SDK server, handshake era, SSE, 10 connections",
        ("ratio", "http_hs_sse_vs_py_con"),
        at_least=2,
        context=lambda r: (
            f"ours {cell(r.stat('http hs trio sse', 'con_cps'))}, Python SDK "
            f"{cell(r.stat('http hs py sse', 'con_cps'))} calls/s"
        ),
        floor=("bare-hypercorn floor", "http_hs_sse_floor_vs_py_con"),
        profile="http",
    ),
    Goal(
        "HTTP ≥ 2x the Python SDK server, handshake era, JSON, 10 connections",
        ("ratio", "http_hs_json_vs_py_con"),
        at_least=2,
        context=lambda r: (
            f"ours {cell(r.stat('http hs trio json', 'con_cps'))}, Python SDK "
            f"{cell(r.stat('http hs py json', 'con_cps'))} calls/s"
        ),
        floor=("bare-hypercorn floor", "http_hs_json_floor_vs_py_con"),
        profile="http",
    ),
    Goal(
        "HTTP ≥ 2x the Python SDK server, modern era, SSE, 10 connections",
        ("ratio", "http_modern_sse_vs_py_con"),
        at_least=2,
        context=lambda r: (
            f"ours {cell(r.stat('http modern trio sse', 'con_cps'))}, Python SDK "
            f"{cell(r.stat('http modern py sse', 'con_cps'))} calls/s"
        ),
        floor=("bare-hypercorn floor", "http_modern_sse_floor_vs_py_con"),
        profile="http-modern",
    ),
    Goal(
        "HTTP, 2 hypercorn workers ≥ 1.8x one worker, modern era, 10 connections",
        ("ratio", "http_workers_2_vs_1"),
        at_least=1.8,
        context=lambda r: (
            f"1 worker {cell(r.stat('http modern trio sse', 'con_cps'))}, 2 workers "
            f"{cell(r.stat('http modern trio sse w2', 'con_cps'))} calls/s; the machine has "
            f"{r.cores()} cores, and the driver needs one too"
        ),
        profile="http-modern",
    ),
    Goal(
        "stdio ≥ 0.7x the bare-Trio floor (ours/floor, raw driver), sequential",
        ("ratio", "stdio_vs_floor_seq"),
        at_least=0.7,
        context=lambda r: (
            f"ours {cell(r.stat('raw->trio', 'seq_cps'))}, floor "
            f"{cell(r.stat('raw->floor', 'seq_cps'))} calls/s"
        ),
        floor=("a task and a scope per request", "floor_tasks_vs_floor_seq"),
        profile="stdio",
    ),
    Goal(
        "stdio ≥ 0.5x the bare-Trio floor (ours/floor, raw driver), concurrent",
        ("ratio", "stdio_vs_floor_con"),
        at_least=0.5,
        context=lambda r: (
            f"ours {cell(r.stat('raw->trio', 'con_cps'))}, floor "
            f"{cell(r.stat('raw->floor', 'con_cps'))} calls/s; ours over the floor with a task "
            f"and a scope per request: {cell(r.ratio('stdio_vs_floor_tasks_con'), 2, 'x')}"
        ),
        floor=("a task and a scope per request", "floor_tasks_vs_floor_con"),
        profile="stdio",
    ),
    Goal(
        "stdio ≥ 1.5x the TypeScript SDK server, sequential (the TypeScript client driving each)",
        ("ratio", "server_vs_ts_seq"),
        at_least=1.5,
        context=lambda r: (
            f"ours {cell(r.stat('ts->trio', 'seq_cps'))}, "
            f"TS {cell(r.stat('ts->ts', 'seq_cps'))}, TS v2 server "
            f"{cell(r.stat('ts->ts2', 'seq_cps'))} calls/s; ours/TS v2 server: "
            f"{cell(r.ratio('server_vs_ts2_seq'), 2, 'x')}; the bare-Trio floor (no task per "
            f"request): {cell(r.ratio('floor_vs_ts_seq'), 2, 'x')}; ours over the floor with a "
            f"task and a scope per request: {cell(r.ratio('server_vs_floor_tasks_seq'), 2, 'x')}"
        ),
        floor=("bare Trio, a task and a scope per request", "floor_tasks_vs_ts_seq"),
        profile="stdio",
    ),
    Goal(
        "stdio ≥ 4x the Python SDK server, sequential (the TypeScript client driving each)",
        ("ratio", "server_vs_py_seq"),
        at_least=4,
        context=lambda r: (
            f"ours {cell(r.stat('ts->trio', 'seq_cps'))}, Python SDK "
            f"{cell(r.stat('ts->py', 'seq_cps'))} calls/s; the bare-Trio floor (no task per "
            f"request): {cell(r.ratio('floor_vs_py_seq'), 2, 'x')}"
        ),
        floor=("bare Trio, a task and a scope per request", "floor_tasks_vs_py_seq"),
        profile="stdio",
    ),
    Goal(
        "memory per parked in-flight request ≤ 5 KiB (stdio server RSS, {parked} parked)",
        ("figure", "scale trio:bytes_per_request"),
        at_most=5 * 1024,
        digits=0,
        unit=" B",
        context=lambda r: (
            "in-process (tracemalloc): trio_mcp "
            f"{cell(r.stat('inprocess', 'parked_bytes'))} B; a bare Trio task with a cancel scope "
            f"in `trio.sleep`: {cell(r.stat('inprocess', 'parked_bytes_floor'))} B"
        ),
        profile="parked",
    ),
    Goal(
        "memory per parked request ≤ 1.05x the bare-Trio task and cancel scope (in-process)",
        ("ratio", "parked_vs_floor"),
        at_most=1.05,
        digits=3,
        context=lambda r: (
            f"trio_mcp {cell(r.stat('inprocess', 'parked_bytes'))} B, the floor "
            f"{cell(r.stat('inprocess', 'parked_bytes_floor'))} B ({r.p['parked_inprocess']:,} "
            "parked); against a bare task and scope awaiting the benchmark's own `sleep` tool "
            f"({cell(r.stat('inprocess', 'parked_bytes_floor_tool'))} B): "
            f"{cell(r.ratio('parked_vs_floor_tool'), 3, 'x')}"
        ),
        floor=("a bare task and scope running the same `sleep` tool", "parked_floor_tool_vs_floor"),
        profile="parked",
    ),
    Goal(
        "memory per idle handshake session ≤ 16 KiB (HTTP server RSS)",
        ("figure", "http sessions trio:bytes_per_session"),
        at_most=16 * 1024,
        digits=0,
        unit=" B",
        context=lambda r: (
            f"TS SDK {cell(r.stat('http sessions ts', 'bytes_per_session'))} B, TS v2 server "
            f"{cell(r.stat('http sessions ts2', 'bytes_per_session'))} B, Python SDK "
            f"{cell(r.stat('http sessions py', 'bytes_per_session'))} B"
        ),
        profile="sessions",
    ),
    Goal(
        "server-observed cancel latency ≤ 0.5x the best peer server's, stdio (p50)",
        ("ratio", "cancel_server_vs_best_peer"),
        at_most=0.5,
        context=lambda r: (
            f"ours {cell(r.stat('cancel ts->trio', 'server_p50'))} µs, TS "
            f"{cell(r.stat('cancel ts->ts', 'server_p50'))} µs, TS v2 server "
            f"{cell(r.stat('cancel ts->ts2', 'server_p50'))} µs, Python SDK "
            f"{cell(r.stat('cancel ts->py', 'server_p50'))} µs, bare-Trio floor "
            f"{cell(r.stat('cancel ts->floor', 'server_p50'))} µs; with the raw driver, over "
            f"TS: ours {cell(r.ratio('cancel_trio_vs_ts_raw'), 2, 'x')}, the floor "
            f"{cell(r.ratio('cancel_floor_vs_ts_raw'), 2, 'x')}"
        ),
        floor=("bare-Trio floor, the same TypeScript client", "cancel_floor_vs_best_peer"),
        profile="stdio",
    ),
    Goal(
        "server-observed cancel latency ≤ 0.5x the best peer server's, HTTP handshake era (p50)",
        ("ratio", "http_cancel_vs_best_peer"),
        at_most=0.5,
        context=lambda r: (
            f"ours {cell(r.stat('http cancel hs trio', 'server_p50'))} µs, TS "
            f"{cell(r.stat('http cancel hs ts', 'server_p50'))} µs, TS v2 server "
            f"{cell(r.stat('http cancel hs ts2', 'server_p50'))} µs, Python SDK "
            f"{cell(r.stat('http cancel hs py', 'server_p50'))} µs, bare-hypercorn floor "
            f"{cell(r.stat('http cancel hs floor', 'server_p50'))} µs; modern era (closing the "
            f"stream): ours {cell(r.stat('http cancel modern trio', 'server_p50'))} µs, TS v2 "
            f"server {cell(r.stat('http cancel modern ts2', 'server_p50'))} µs, Python SDK "
            f"{cell(r.stat('http cancel modern py', 'server_p50'))} µs"
        ),
        floor=("bare-hypercorn floor", "http_cancel_floor_vs_best_peer"),
        profile="http",
    ),
    *(
        Goal(
            f"server-observed cancel latency ≤ 1.2x the bare POST round trip to the "
            f"bare-hypercorn floor, HTTP {label} (p50)",
            ("ratio", f"http_cancel_{era}_vs_post"),
            at_most=1.2,
            context=lambda r, e=era: (
                f"ours {cell(r.stat(f'http cancel {e} trio', 'server_p50'))} µs, the POST round "
                f"trip {cell(r.stat(f'http cancel {e} floor', 'post_p50'))} µs"
            ),
            floor=("bare-hypercorn floor", f"http_cancel_{era}_floor_vs_post"),
        )
        for era, label in (("hs", "handshake era"), ("modern", "modern era, closing the stream"))
    ),
    *(
        Goal(
            f"{transport} throughput with OpenTelemetry's API and no SDK ≥ 0.98x with it absent",
            ("ratio", f"otel_{transport}_api_vs_absent"),
            at_least=0.98,
            digits=3,
            context=lambda r, t=transport: (
                f"absent {cell(r.stat('otel', f'{t}_absent_cps'))}, API "
                f"{cell(r.stat('otel', f'{t}_api_cps'))} calls/s; with the SDK recording: "
                f"{cell(r.stat('otel', f'{t}_sdk_us_per_call'))} µs more per call"
            ),
        )
        for transport in ("stdio", "http")
    ),
    Goal(
        "A proxied call ≤ 1.3x a direct one, stdio (`trio-mcp proxy` in front of a stdio server)",
        ("ratio", "proxy_stdio_vs_direct"),
        at_most=1.3,
        context=lambda r: (
            f"direct {cell(r.stat('proxy', 'stdio_direct_p50_us'))} µs, bare relay "
            f"{cell(r.stat('proxy', 'stdio_floor_p50_us'))} µs, proxied "
            f"{cell(r.stat('proxy', 'stdio_proxied_p50_us'))} µs (p50); proxied/relay "
            f"{cell(r.ratio('proxy_stdio_vs_floor'), 2, 'x')}"
        ),
        floor=("bare Trio relay", "proxy_floor_stdio_vs_direct"),
    ),
    Goal(
        "A proxied call ≤ 1.3x a direct one, HTTP (modern era, in front of a stdio server)",
        ("ratio", "proxy_http_vs_direct"),
        at_most=1.3,
        context=lambda r: (
            f"direct {cell(r.stat('proxy', 'http_direct_p50_us'))} µs, proxied "
            f"{cell(r.stat('proxy', 'http_proxied_p50_us'))} µs (p50)"
        ),
    ),
]


class Report:
    def __init__(self, summary: dict[str, Any]) -> None:
        self.s = summary
        self.p: dict[str, int] = summary["profile"]
        self.jobs: dict[str, dict[str, Stat]] = summary["jobs"]
        self.ratios: dict[str, Stat] = summary["ratios"]
        self.lines: list[str] = []

    def cores(self) -> str:
        found = re.search(r"(\d+) logical cores", self.s["machine"].get("CPU", ""))
        return found.group(1) if found else "?"

    def under_wrk(self, era: str, response: str) -> str:
        """What the goal under wrk was measured from, for its context column (or nothing)."""
        if self.ratio(f"http_{era}_{response}_wrk_vs_floor_con") is None:
            return "not measured: wrk is not installed"
        ours = self.stat(f"http {era} trio {response} wrk", "con_cps")
        floor = self.stat(f"http {era} floor {response} wrk", "con_cps")
        cpu = self.ratio(f"http_{era}_{response}_wrk_cpu_vs_floor")
        return (
            f"ours {cell(ours)}, floor {cell(floor)} calls/s; by CPU per call (floor/ours): "
            f"{cell(cpu, 2, 'x')}"
        )

    def over_task_floor(self, era: str, response: str, wrk: str) -> str:
        """Ours over the handshake era's floor with a task and a scope per request (or
        nothing)."""
        return self.over_tasks(f"http_{era}_{response}{wrk}_vs_floor_tasks_con")

    def over_tasks(self, name: str | None) -> str:
        """Ours over a floor with a task and a scope per request, by the ratio ``name`` (or
        nothing: no such floor, or not measured)."""
        ratio = self.ratio(name) if name is not None else None
        if ratio is None:
            return ""
        return f"; ours over the floor with a task and a scope per request: {cell(ratio, 2, 'x')}"

    def profiles_recorded(self) -> set[str]:
        return set((self.s.get("profiles") or {}).get("loads", {}))

    def stat(self, job: str, metric: str) -> Stat | None:
        return self.jobs.get(job, {}).get(metric)

    def ratio(self, name: str) -> Stat | None:
        return self.ratios.get(name)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|")
        self.add(*("| " + " | ".join(row) + " |" for row in rows))
        self.add("")

    def throughput_table(self, jobs: Sequence[tuple[str, str]]) -> None:
        header = ["", "sequential calls/s", "p50", "p90", "p99"]
        header += [f"{self.p['k']} concurrent callers, calls/s", "p50", "p90", "p99"]
        rows = []
        for label, job in jobs:
            if job in self.jobs:
                row = [label]
                for mode in ("seq", "con"):
                    row.append(cell(self.stat(job, f"{mode}_cps")))
                    row += [cell(self.stat(job, f"{mode}_{q}")) for q in ("p50", "p90", "p99")]
                rows.append(row)
        self.table(header, rows)

    def ratio_table(self, rows: Sequence[tuple[str, str]]) -> None:
        self.table(
            ["", "sequential", "concurrent"],
            [
                [
                    label,
                    cell(self.ratio(f"{name}_seq"), 2, "x"),
                    cell(self.ratio(f"{name}_con"), 2, "x"),
                ]
                for label, name in rows
            ],
        )

    def build(self) -> str:
        s, p = self.s, self.p
        self.add(
            "# trio_mcp benchmark report",
            "",
            f"Written by `python3 benchmarks/run.py{s['argv']}` on {s['date']} "
            f"({s['profile_name']} profile: {p['runs']} runs in {s['elapsed_min']:.1f} minutes). "
            f"Every figure is the **median over the runs, with the range (min{DASH}max) in "
            "brackets**; every ratio is computed within each run, pair by pair, then summarised "
            "the same way. Latencies are in microseconds (µs). What each benchmark does and how "
            "to read it: `docs/benchmarks.md`.",
            "",
            "![chart](chart.png)",
            "",
            "## Machine",
            "",
        )
        self.table(["", ""], [[k, v] for k, v in s["machine"].items()])
        if self.jobs:
            self.add(
                "## Goals",
                "",
                "The goals of the performance issues (the latest round's, and those of earlier "
                "rounds still reported), each judged on the median over the runs "
                '(ratios computed within each run; "ours/floor": higher is better). Where a floor '
                "can be held to the same goal, the fourth column does so: a bare program on the "
                "same stack (no MCP), measured the same way in the same run; where the floor "
                "misses a goal too, no server on that stack meets it. For each missed goal, the "
                "last column names the profile (end of the report) that shows what limits it.",
                "",
            )
            header = ["goal", "measured", "verdict", "the floor, held to it", "for context"]
            self.table([*header, "what limits it"], [g.row(self) for g in GOALS])
        self.throughput()
        self.floor()
        self.cancel()
        self.scale()
        self.inprocess()
        self.fleet()
        self.tasks()
        self.proxy()
        self.otel()
        self.http()
        self.growth()
        self.profiles()
        self.clock()
        self.method()
        return "\n".join(self.lines) + "\n"

    def throughput(self) -> None:
        if not any(j in self.jobs for j in ("ts->trio", "trio->ts")):
            return
        self.add(
            "## 1. Round-trip throughput", "", "### Servers, driven by the TypeScript client", ""
        )
        self.throughput_table([(NAMES[s], f"ts->{s}") for s in SERVERS])
        self.add("### Clients, driving the TypeScript server", "")
        self.throughput_table([(NAMES[c], f"{c}->ts") for c in CLIENTS])
        self.add("### Ratios: trio_mcp over the peer, within each run", "")
        self.ratio_table(
            [
                ("server / TypeScript server", "server_vs_ts"),
                ("server / TypeScript SDK v2 server", "server_vs_ts2"),
                ("server / Python SDK server", "server_vs_py"),
                ("client / TypeScript client", "client_vs_ts"),
                ("client / Python SDK client", "client_vs_py"),
            ]
        )

    def floor(self) -> None:
        if "raw->floor" not in self.jobs:
            return
        self.add(
            "## 2. The floor: bare Trio, no MCP",
            "",
            "The raw driver (Node, no SDK) sends the same bytes to every server, so the server is "
            "all that differs; the TypeScript client rows are for reference.",
            "",
        )
        self.throughput_table(
            [
                ("bare-Trio floor, raw driver", "raw->floor"),
                ("bare Trio, a task and a scope per request, raw driver", "raw->floor-tasks"),
                ("trio_mcp, raw driver", "raw->trio"),
                ("TypeScript SDK, raw driver", "raw->ts"),
                ("bare-Trio floor, TypeScript client", "ts->floor"),
                ("bare Trio, a task and a scope per request, TypeScript client", "ts->floor-tasks"),
                ("trio_mcp, TypeScript client", "ts->trio"),
            ]
        )
        self.add(
            "Overhead: the floor's throughput over the server's, within each run (1 = none).", ""
        )
        self.ratio_table(
            [
                ("floor / trio_mcp, raw driver", "floor_raw"),
                ("floor / trio_mcp, TypeScript client", "floor_ts"),
                ("floor / TypeScript server, raw driver", "ts_floor_raw"),
                (
                    "floor with a task and a scope per request / trio_mcp, TypeScript client",
                    "floor_tasks_ts",
                ),
            ]
        )
        self.add(
            "A task and a scope per request (`floor_server.py --tasks`: each request answered by a "
            "task of its own under a cancel scope of its own, kept in a table by id while it "
            "runs, as any server that can cancel every request must) keeps, of the floor's "
            "throughput: sequential "
            f"{cell(self.ratio('floor_tasks_vs_floor_seq'), 2, 'x')}, concurrent "
            f"{cell(self.ratio('floor_tasks_vs_floor_con'), 2, 'x')}. The bare-Trio floor over "
            "the TypeScript server, both driven by the TypeScript client, sequential: "
            f"{cell(self.ratio('floor_vs_ts_seq'), 2, 'x')}.",
            "",
        )

    def cancel(self) -> None:
        if not any(j.startswith("cancel ") for j in self.jobs):
            return
        self.add(
            "## 3. Cancel latency",
            "",
            "From the client issuing the cancel to (a) the call returning to its caller and (b) "
            "the server handler's `finally` running; then the latency of the next call. The raw "
            "driver writes `notifications/cancelled` itself, so its (a) is just that write.",
            "",
        )
        header = ["client → server", "(a) returned p50", "p90", "(b) server observed p50", "p90"]
        header += ["next call p50", "p90"]
        metrics = ("return_p50", "return_p90", "server_p50", "server_p90", "next_p50", "next_p90")
        pairs = [("ts", s) for s in (*SERVERS, "floor")]
        pairs += [(c, "ts") for c in CLIENTS if c != "ts"]
        pairs += [("raw", s) for s in ("floor", "trio", "ts", "ts2")]
        rows = []
        for client, server in pairs:
            job = f"cancel {client}->{server}"
            if job in self.jobs:
                label = f"{NAMES[client]} → {NAMES[server]}"
                rows.append([label] + [cell(self.stat(job, m)) for m in metrics])
        self.table(header, rows)
        self.add(
            "Ratios within each run: trio_mcp server's (b) p50 over the best peer server's "
            f"(TypeScript client): {cell(self.ratio('cancel_server_vs_best_peer'), 2, 'x')}; "
            "trio_mcp client's (a) p50 over the best peer client's (TypeScript server): "
            f"{cell(self.ratio('cancel_client_vs_best_peer'), 2, 'x')}; trio_mcp server's (b) p50 "
            "over the bare-Trio floor's (raw driver): "
            f"{cell(self.ratio('cancel_server_vs_floor'), 2, 'x')}. With the raw driver (the "
            "same bytes to every server), (b) p50 over the TypeScript server's: trio_mcp "
            f"{cell(self.ratio('cancel_trio_vs_ts_raw'), 2, 'x')}, the bare-Trio floor "
            f"{cell(self.ratio('cancel_floor_vs_ts_raw'), 2, 'x')}, the TypeScript SDK v2 server "
            f"{cell(self.ratio('cancel_ts2_vs_ts_raw'), 2, 'x')}. The best peer server is the best "
            "of the TypeScript SDK, its v2 server package and the Python SDK.",
            "",
        )

    def scale(self) -> None:
        if not any(j.startswith("scale ") for j in self.jobs):
            return
        parked = f"{self.p['parked']:,}"
        self.add(
            f"## 4. Scale: {parked} parked requests on one connection",
            "",
            "Driven by the TypeScript client. Throughput runs the workload with "
            f"{self.p['scale_n']} calls, alternately with every call parked (loaded) and after "
            "cancelling them all (idle), twice each; each column is the mean of its two.",
            "",
        )
        header = ["server", "bytes per parked request", "RSS before (MiB)", "RSS after (MiB)"]
        header += ["sequential calls/s idle", f"with {parked} in flight", "ratio"]
        header += ["concurrent calls/s idle", f"with {parked} in flight", "ratio"]
        rows = []
        for server in SERVERS:
            job = f"scale {server}"
            if job not in self.jobs:
                continue
            row = [NAMES[server], cell(self.stat(job, "bytes_per_request"))]
            row += [cell(self.stat(job, m), 1) for m in ("rss_before_mib", "rss_after_mib")]
            for mode in ("seq", "con"):
                row += [cell(self.stat(job, f"idle_{mode}_cps"))]
                row += [cell(self.stat(job, f"loaded_{mode}_cps"))]
                row += [cell(self.stat(job, f"{mode}_ratio"), 2, "x")]
            rows.append(row)
        self.table(header, rows)

    def fleet(self) -> None:
        if not any(j.startswith("fleet ") for j in self.jobs):
            return
        p = self.p
        self.add(
            "## 6. Scale-out: 1, 2 and 3 processes behind nginx",
            "",
            f"Modern-era `tools/call echo` through nginx round robin (`deploy/nginx.conf`) in "
            f"front of K `trio-mcp demo` processes; {p['fleet_n']} calls after "
            f"{p['fleet_warmup']} warm-up, from {p['fleet_concurrency']} keep-alive loops of a "
            "Node.js load generator on the same machine. CPU per call is over all the calls; "
            "the busiest backend's share of the backends' CPU shows the spread (1/K is even).",
            "",
        )
        header = ["backends", "calls/s", "p50", "p90", "p99", "vs 1 backend"]
        header += ["backend CPU ms/call", "nginx CPU ms/call", "busiest share"]
        rows = []
        for job in sorted(j for j in self.jobs if j.startswith("fleet ") and j != "fleet cost"):
            size = job.split()[1]
            row = [size, cell(self.stat(job, "cps"))]
            row += [cell(self.stat(job, q)) for q in ("p50", "p90", "p99")]
            row.append(cell(self.ratio(f"fleet_{size}_vs_1"), 2, "x") if size != "1" else "1x")
            for metric in ("backend_cpu_ms_per_call", "nginx_cpu_ms_per_call"):
                row.append(cell(self.stat(job, metric), 2))
            row.append(cell(self.stat(job, "busiest_backend_cpu_share"), 2))
            rows.append(row)
        self.table(header, rows)
        self.fleet_cost()

    def fleet_cost(self) -> None:
        if "fleet cost" not in self.jobs:
            return
        p = self.p
        loops = p["fleet_cost_sessions"]
        self.add(
            "### CPU per call: through nginx + Redis against one process alone",
            "",
            f"`benchmarks/fleet_cost.py`: the same server alone, called directly, and as four "
            "fleets of three processes behind nginx, each fleet on a `redis-server` of its own: "
            "*tagged*, `--redis-url` backends behind `deploy/nginx.conf` as shipped (a session's "
            "requests go to the node its id names), the recommended fleet; *any worker*, "
            "`--redis-url --any-worker` backends behind nginx round robin (each request of a "
            "session on any process: its record read from Redis every time); *any worker, map*, "
            "the same backends behind `deploy/nginx.conf` as shipped (a session's requests go to "
            "the node that opened it while it lives, and to its backups, which build their copies "
            "from its record, once it is gone); *tagged, by connection*, the tagged fleet with "
            "the config's commented `hash` line in use (the requests without a session, the "
            "modern era's, go by client connection rather than each to the next backend); "
            "and the tagged "
            "fleet's machinery with *one backend* (every hop and Redis write of a fleet's call, "
            "no other backend sharing the cores: on a machine with fewer cores than busy "
            "processes, what separates the three-backend rows from it is their contention). "
            "The control, *three alone*: the standalone and two more like it, no nginx, no "
            "Redis, each called directly by a driver of its own, all at once, with the fleets' "
            "loads split evenly between them: what three processes sharing the cores cost "
            "with none of a fleet's machinery; *over three alone* is a three-backend fleet's "
            "ratio over the control's at the same load, what its machinery adds at the same "
            "contention. "
            f"{p['fleet_cost_calls']} `tools/call echo` after {p['fleet_cost_warmup']} warm-up "
            f"from {loops} keep-alive connections of the raw HTTP driver at once (each its own "
            f"session in the handshake era); each fleet is also driven with {loops * 3} "
            "connections and three times the calls, the same "
            "load per process as the standalone's (*per process*): at the same load in all "
            "(*in all*) each backend runs a third of it, and a process serving fewer requests at "
            "once pays more CPU per call; *per process* avoids that but, with fewer cores than "
            "busy processes, adds their contention for the cores. CPU of every server process "
            "(backends, nginx, redis-server) from "
            "`/proc/<pid>/stat`, per call, in microseconds; the standalone is measured before "
            "and after each fleet's load, and each ratio is to the mean of those two (the "
            "standalone column: the median of its measurements). "
            "Goal: at most 1.3x (reported, not asserted).",
            "",
        )
        header = ["era", "fleet", "load", "standalone", "fleet", "backends", "nginx", "Redis"]
        header += ["fleet/standalone", "over three alone"]
        rows = []
        fleet_labels = {
            "three": "three alone",
            "tagged": "tagged",
            "any": "any worker",
            "anymap": "any worker, map",
            "connection": "tagged, by connection",
            "one": "one backend",
        }
        load_labels = {"per": "per process", "total": "in all"}
        for era, era_label in (("hs", "handshake"), ("modern", "modern")):
            for fleet, load in FLEET_COST_ROWS:
                key = f"{era}_{fleet}_{load}"
                row = [era_label, fleet_labels[fleet], load_labels[load]]
                row.append(cell(self.stat("fleet cost", f"{era}_standalone_us")))
                row.append(cell(self.stat("fleet cost", f"{key}_us")))
                if fleet == "three":  # its processes are the backends; no nginx, no Redis
                    row += [row[-1], "none", "none"]
                else:
                    for part in ("backends", "nginx", "redis"):
                        row.append(cell(self.stat("fleet cost", f"{key}_{part}_us")))
                row.append(cell(self.ratio(f"fleet_cost_{key}"), 2, "x"))
                vs_three = self.ratio(f"fleet_cost_{key}_vs_three")
                row.append("" if vs_three is None else cell(vs_three, 2, "x"))
                rows.append(row)
        self.table(header, rows)

    def tasks(self) -> None:
        if "tasks" not in self.jobs:
            return
        p = self.p
        self.add(
            "## 7. Tasks (SEP-2663) over HTTP",
            "",
            f"`benchmarks/tasks.py`: a trio_mcp server under hypercorn in its own process, "
            f"driven with raw modern-era POSTs, one at a time; {p['task_calls']} calls after "
            f"{p['task_warmup']} warm-up. Creation: `tools/call` to its `CreateTaskResult`; "
            "completion: `tools/call` to the first `tasks/get` showing `completed`, polling at "
            f"once. Memory: server VmRSS before and after {p['task_parked']:,} tasks parked.",
            "",
        )
        rows = [
            [label, *(cell(self.stat("tasks", f"{name}_{q}_us")) for q in ("p50", "p90", "p99"))]
            for label, name in (("creation", "create"), ("completion", "complete"))
        ]
        self.table(["latency (µs)", "p50", "p90", "p99"], rows)
        self.table(
            ["memory per parked task", "KiB"],
            [
                [
                    "at `input_required` (one elicitation)",
                    cell(self.stat("tasks", "parked_input_kib_per_task"), 1),
                ],
                [
                    "sleeping (`trio.sleep`)",
                    cell(self.stat("tasks", "parked_sleep_kib_per_task"), 1),
                ],
            ],
        )

    def proxy(self) -> None:
        if "proxy" not in self.jobs:
            return
        p = self.p
        self.add(
            "## 7b. A proxied call against a direct one",
            "",
            "`benchmarks/proxy.py`: the demo server as a stdio child, called directly, through "
            "a bare Trio relay that copies bytes between its stdin/stdout and the child's "
            "without parsing them (`peers/floor_relay.py`: the second process hop a proxy adds, "
            "and nothing else, so no proxy on this stack costs less), or through "
            "`trio-mcp proxy` (over stdio: the client spawns the relay or the proxy, which "
            "spawns the demo; over HTTP: a modern-era client calls `trio-mcp demo --transport "
            "http`, or `trio-mcp proxy` served over HTTP in front of the demo as a stdio child, "
            "every request on its one pooled upstream session). All the clients of a transport "
            f"are open at once; after {p['proxy_warmup']} warm-up calls each, "
            f"{p.get('proxy_rounds', 1)} rounds of {p['proxy_calls']} `tools/call echo` one at "
            "a time per side, the sides taking turns; a ratio is the median over the rounds. "
            "Goal: a proxied call costs at most 1.3x a direct one.",
            "",
        )
        stdio = [
            cell(self.stat("proxy", "stdio_floor_p50_us")),
            cell(self.stat("proxy", "stdio_proxied_p50_us")),
            cell(self.ratio("proxy_stdio_vs_direct"), 2, "x"),
            cell(self.ratio("proxy_floor_stdio_vs_direct"), 2, "x"),
            cell(self.ratio("proxy_stdio_vs_floor"), 2, "x"),
        ]
        http = [
            "-",
            cell(self.stat("proxy", "http_proxied_p50_us")),
            cell(self.ratio("proxy_http_vs_direct"), 2, "x"),
            "-",
            "-",
        ]
        rows = [
            ["stdio", cell(self.stat("proxy", "stdio_direct_p50_us")), *stdio],
            ["http", cell(self.stat("proxy", "http_direct_p50_us")), *http],
        ]
        self.table(
            [
                "transport",
                "direct p50 (µs)",
                "relay p50 (µs)",
                "proxied p50 (µs)",
                "proxied/direct",
                "relay/direct",
                "proxied/relay",
            ],
            rows,
        )

    def otel(self) -> None:
        if "otel" not in self.jobs:
            return
        p = self.p
        self.add(
            "## 7c. What OpenTelemetry costs",
            "",
            "`benchmarks/otel.py`: the demo served by `trio-mcp demo` and a trio_mcp client, both "
            "in one of three modes: OpenTelemetry absent (its import refused, as without the "
            "`otel` extra), its API loaded with no SDK, and the SDK recording every span and "
            "measurement (a batch processor into an exporter that drops them, an in-memory "
            f"metric reader). {p['otel_calls']} `tools/call echo` after {p['otel_warmup']} "
            f"warm-up, one at a time; {p['otel_rounds']} rounds per run, each mode once per "
            "transport, the modes' order rotating from round to round (each first, second and "
            "last once in every three rounds); one process per measurement. Goal: the API without "
            "an SDK within 2% of OpenTelemetry absent (a ratio of 0.98 or more).",
            "",
        )
        rows = []
        for transport in ("stdio", "http"):
            rows.append(
                [
                    transport,
                    *(
                        cell(self.stat("otel", f"{transport}_{m}_cps"))
                        for m in ("absent", "api", "sdk")
                    ),
                    cell(self.ratio(f"otel_{transport}_api_vs_absent"), 3, "x"),
                    cell(self.ratio(f"otel_{transport}_sdk_vs_absent"), 3, "x"),
                    cell(self.stat("otel", f"{transport}_sdk_us_per_call")),
                ]
            )
        header = ["transport", "absent calls/s", "API calls/s", "SDK calls/s"]
        header += ["API/absent", "SDK/absent", "SDK cost per call (µs)"]
        self.table(header, rows)

    def http(self) -> None:
        if not any(j.startswith("http ") for j in self.jobs):
            return
        p = self.p
        self.add(
            "## 8. Streamable HTTP",
            "",
            "The raw HTTP driver (`peers/http_driver.mjs`: hand-built HTTP/1.1 on keep-alive "
            "`node:net` sockets, every response checked) sends the same bytes to every server. "
            "trio_mcp and the bare-hypercorn floor (`peers/floor_http_server.py`: read the body, "
            "orjson, answer the echo; no MCP) run under `hypercorn --worker-class trio`, one "
            "worker process, and in the handshake era the same floor answering each request in a "
            "task of its own under a cancel scope of its own, in a nursery that outlives the POST "
            "(`BENCH_TASKS=1`: a session's, as trio_mcp runs each request of a session, so that "
            "a cancel or the session's end reaches it); the TypeScript SDK under Node's `http`, "
            "and so its v2 server package "
            "(`@modelcontextprotocol/server`: Node's request turned into a web-standard one, the "
            "body parsed once and handed over, as a Node user without a framework serves it); "
            'the Python SDK as `MCPServer.run("streamable-http")` runs it, under uvicorn. '
            "Handshake era: one session, every connection on it; modern era (2026-07-28): no "
            "session, the `_meta` envelope and the Mcp-Method / Mcp-Name headers (the TypeScript "
            "SDK 1.x does not speak it; its v2 server package does). "
            f"After {p['http_warmup']} warm-up calls on 1 and on "
            f"{HTTP_CONNECTIONS} connections: {p['http_n']} `tools/call echo` calls on 1 "
            f"connection, then {p['http_n']} spread over {HTTP_CONNECTIONS} connections, one call "
            "at a time on each. CPU: the server's processes (user + system) over the whole "
            f"driver run, per call; measured in {min(p.get('http_runs', p['runs']), p['runs'])} "
            "of the runs.",
            "",
        )
        header = ["server", "response", "1 connection calls/s", "p50", "p99"]
        header += [f"{HTTP_CONNECTIONS} connections calls/s", "p50", "p99", "server CPU µs/call"]
        for era, title in (("hs", "Handshake era"), ("modern", "Modern era (2026-07-28)")):
            rows = []
            for server in ("floor", "floor-tasks", "trio", "ts", "ts2", "py"):
                for response in ("sse", "json"):
                    job = f"http {era} {server} {response}"
                    if job not in self.jobs:
                        continue
                    row = [HTTP_NAMES[server], response.upper()]
                    for mode in ("seq", "con"):
                        row.append(cell(self.stat(job, f"{mode}_cps")))
                        row += [cell(self.stat(job, f"{mode}_{q}")) for q in ("p50", "p99")]
                    row.append(cell(self.stat(job, "cpu_us_per_call")))
                    rows.append(row)
            if rows:
                self.add(f"### {title}", "")
                self.table(header, rows)
        self.http_transports()
        self.add("### Ratios: trio_mcp over the other server, within each run", "")
        rows = []
        for era, era_name in (("hs", "handshake"), ("modern", "modern")):
            for response in ("sse", "json"):
                for peer in ("floor", "floor_tasks", "ts", "ts2", "py"):
                    name = f"http_{era}_{response}_vs_{peer}"
                    if self.ratio(f"{name}_seq") or self.ratio(f"{name}_con"):
                        rows.append(
                            [
                                f"{era_name}, {response.upper()}: ours / {HTTP_NAMES[peer]}",
                                cell(self.ratio(f"{name}_seq"), 2, "x"),
                                cell(self.ratio(f"{name}_con"), 2, "x"),
                                cell(self.ratio(f"http_{era}_{response}_cpu_vs_{peer}"), 2, "x"),
                            ]
                        )
        self.table(
            [
                "",
                "1 connection",
                f"{HTTP_CONNECTIONS} connections",
                "by CPU per call (theirs/ours)",
            ],
            rows,
        )
        self.http_wrk()
        if "http modern trio sse w2" in self.jobs:
            self.add(
                "### 1 and 2 hypercorn workers, modern era",
                "",
                f"trio_mcp, SSE, {HTTP_CONNECTIONS} connections: one worker "
                f"{cell(self.stat('http modern trio sse', 'con_cps'))} calls/s, two workers "
                f"(`--workers 2`) {cell(self.stat('http modern trio sse w2', 'con_cps'))} calls/s;"
                f" within each run: {cell(self.ratio('http_workers_2_vs_1'), 2, 'x')}. The machine "
                f"has {self.cores()} cores and the driver, on the same machine, needs CPU too: "
                "with 2 cores, two busy workers and the driver cannot each have one, so this "
                "ratio is bounded well below 2 here, whatever the server does.",
                "",
            )
        cancel_rows = []
        metrics = ("return_p50", "return_p90", "server_p50", "server_p90", "next_p50", "next_p90")
        for era, how in (
            ("hs", "`notifications/cancelled` POST"),
            ("modern", "closing the stream"),
        ):
            for server in ("trio", "floor", "ts", "ts2", "py"):
                job = f"http cancel {era} {server}"
                if job in self.jobs:
                    row = [f"{HTTP_NAMES[server]}, {'handshake' if era == 'hs' else 'modern'}", how]
                    cancel_rows.append(row + [cell(self.stat(job, m)) for m in metrics])
        if cancel_rows:
            self.add(
                "### Cancel latency over HTTP (µs)",
                "",
                "A `sleep` call (SSE) cancelled at its first progress event: in the handshake "
                "era by POSTing `notifications/cancelled` on a second connection, in the modern "
                "era by closing the call's connection (the spec: the disconnect is the "
                "cancellation). (a) to the cancel's end (the 202, or the close); (b) to the "
                "server handler's `finally` (CLOCK_MONOTONIC stamps); then the next call's "
                f"latency. {p['http_cancels']} cancels per run. The bare-hypercorn floor has no "
                "handler: it stamps the moment its app is handed the cancel POST's body, or "
                "sees the stream closed, the earliest a server under the same hypercorn can "
                "observe a cancel.",
                "",
            )
            if self.ratio("http_cancel_vs_floor") is not None:
                self.add(
                    "trio_mcp's (b) over the floor's, handshake era, within each run: "
                    f"{cell(self.ratio('http_cancel_vs_floor'), 2, 'x')}.",
                    "",
                )
            header = ["server, era", "cancel by", "(a) p50", "p90", "(b) server observed p50"]
            self.table([*header, "p90", "next call p50", "p90"], cancel_rows)
            self.http_cancel_post()
        session_rows = []
        for server in ("trio", "ts", "ts2", "py"):
            job = f"http sessions {server}"
            if job in self.jobs:
                row = [HTTP_NAMES[server], cell(self.stat(job, "bytes_per_session"))]
                row += [cell(self.stat(job, m), 1) for m in ("rss_before_mib", "rss_after_mib")]
                session_rows.append(row)
        if session_rows:
            self.add(
                "### Memory per idle handshake session",
                "",
                f"Server RSS (VmRSS of its processes) after {p['http_session_warmup']} sessions, "
                f"then after {p['http_sessions']:,} more (`initialize` and "
                "`notifications/initialized` each, then idle); the growth over the sessions.",
                "",
            )
            self.table(
                ["server", "bytes per session", "RSS before (MiB)", "RSS after (MiB)"],
                session_rows,
            )

    def http_transports(self) -> None:
        """HTTP+SSE and WebSocket, each against the floor speaking its framing."""
        rows = []
        for transport, label in (("legacy-sse", "HTTP+SSE (2024-11-05)"), ("ws", "WebSocket")):
            key = transport.replace("-", "_")
            for server in ("floor", "floor-tasks", "trio"):
                job = f"http {transport} {server}"
                if job not in self.jobs:
                    continue
                row = [label, HTTP_NAMES[server]]
                for mode in ("seq", "con"):
                    row.append(cell(self.stat(job, f"{mode}_cps")))
                    row += [cell(self.stat(job, f"{mode}_{q}")) for q in ("p50", "p99")]
                row.append(cell(self.stat(job, "cpu_us_per_call")))
                if server == "trio":
                    row += [
                        cell(self.ratio(f"http_{key}_vs_floor_{m}"), 2, "x") for m in ("seq", "con")
                    ]
                    row.append(cell(self.ratio(f"http_{key}_cpu_vs_floor"), 2, "x"))
                else:
                    row += ["", "", ""]
                rows.append(row)
        if not rows:
            return
        self.add(
            "### HTTP+SSE (2024-11-05) and WebSocket",
            "",
            "The same workload over the app's two other transports, a handshake-era session per "
            "connection (`initialize` and `notifications/initialized` on each). HTTP+SSE: a GET "
            "of `/sse` opens the session's stream, whose first event names the URL to POST to; "
            "each call is a POST there, answered 202, its answer coming down the stream (a "
            "connection is the stream and the keep-alive connection of its POSTs). WebSocket "
            "(`/ws`, subprotocol `mcp`): one message per text frame each way, the driver's own "
            "client framing (masked frames, pings answered). The floor is the bare-hypercorn "
            "floor speaking that framing: the endpoint event, 202 and the answer down the "
            "stream; or a text frame answered with one; WebSocket's second floor answers each "
            "request in a task of the socket's nursery, under a cancel scope of its own, as "
            "trio_mcp does. Ratios are ours over the floor within each run (CPU: floor/ours); "
            "the goals table gives ours over the second floor.",
            "",
        )
        header = ["transport", "server", "1 connection calls/s", "p50", "p99"]
        header += [f"{HTTP_CONNECTIONS} connections calls/s", "p50", "p99", "server CPU µs/call"]
        header += ["ours/floor, 1 connection", f"{HTTP_CONNECTIONS} connections", "by CPU"]
        self.table(header, rows)

    def http_cancel_post(self) -> None:
        """The server-observed cancel latencies over the bare POST round trip to the floor."""
        posts = {era: self.stat(f"http cancel {era} floor", "post_p50") for era in ("hs", "modern")}
        if all(stat is None for stat in posts.values()):
            return
        self.add(
            "The bare POST round trip, the yardstick of (b): the same driver, on the same "
            "connection as the cancel POST, sends the floor a `notifications/cancelled` naming "
            "no call (a POST like the cancel's) and reads its 202, "
            f"{HTTP_POST_ROUNDS} times per cancel, one at a time. p50: handshake era "
            f"{cell(posts['hs'])} µs, modern era {cell(posts['modern'])} µs. (b) p50 over it, "
            "within each run (goal: at most 1.2x): trio_mcp "
            f"{cell(self.ratio('http_cancel_hs_vs_post'), 2, 'x')} (handshake era), "
            f"{cell(self.ratio('http_cancel_modern_vs_post'), 2, 'x')} (modern era); the floor "
            f"{cell(self.ratio('http_cancel_hs_floor_vs_post'), 2, 'x')}, "
            f"{cell(self.ratio('http_cancel_modern_floor_vs_post'), 2, 'x')}.",
            "",
        )

    def http_wrk(self) -> None:
        """wrk's figures beside the driver's, and why they differ."""
        skipped = self.s.get("wrk_skipped")
        if skipped:
            self.add("### Under wrk", "", f"The wrk jobs were skipped: {skipped}.", "")
            return
        if not any(job.endswith(" wrk") for job in self.jobs):
            return
        p = self.p
        self.add(
            "### Under wrk",
            "",
            f"The same servers under wrk {self.s['machine'].get('wrk', '')} "
            f"(`wrk -t1 -c{HTTP_CONNECTIONS} -d{p.get('wrk_seconds', '?')}s`, after "
            f"{p.get('wrk_warmup_seconds', 0)} s unrecorded), with `peers/wrk_echo.lua`: the "
            "driver's request, byte for byte but for the id and text (fresh for each call; in "
            "the handshake era on one session that run.py opens first, as the driver does). A "
            "call counts when its answer is a 200 holding the echoed text; any other answer, "
            "and any error wrk counts, fails the job. wrk's latency percentiles are from its own "
            "summary. Beside each, the driver's figures on its "
            f"{HTTP_CONNECTIONS} connections from the tables above, measured back to back with "
            "it; CPU per call: the server's processes, and the load generator's own (wrk's from "
            "wait4 over its run, the driver's from `process.cpuUsage` over its "
            f"{HTTP_CONNECTIONS}-connection part).",
            "",
        )
        header = ["server", "era, response", "wrk calls/s", "p50", "p99", "server CPU µs/call"]
        header += ["wrk CPU µs/call", "driver calls/s", "p50", "p99", "server CPU µs/call"]
        header += ["driver CPU µs/call", "wrk/driver calls/s"]
        rows = []
        for era, era_name in (("hs", "handshake"), ("modern", "modern")):
            for server in ("trio", "floor", "floor-tasks"):
                for response in ("sse", "json"):
                    job = f"http {era} {server} {response}"
                    if f"{job} wrk" not in self.jobs:
                        continue
                    row = [HTTP_NAMES[server], f"{era_name}, {response.upper()}"]
                    for name in (f"{job} wrk", job):
                        row += [cell(self.stat(name, m)) for m in ("con_cps", "con_p50", "con_p99")]
                        row += [cell(self.stat(name, "cpu_us_per_call"))]
                        row += [cell(self.stat(name, "client_cpu_us_per_call"))]
                    ratio = self.ratio(f"http_{era}_{server}_{response}_wrk_vs_driver")
                    rows.append([*row, cell(ratio, 2, "x")])
        self.table(header, rows)
        rows = []
        for era, era_name in (("hs", "handshake"), ("modern", "modern")):
            for response in ("sse", "json"):
                wrk = self.ratio(f"http_{era}_{response}_wrk_vs_floor_con")
                if wrk is None:
                    continue
                rows.append(
                    [
                        f"{era_name}, {response.upper()}",
                        cell(wrk, 2, "x"),
                        cell(self.ratio(f"http_{era}_{response}_vs_floor_con"), 2, "x"),
                        cell(self.ratio(f"http_{era}_{response}_wrk_cpu_vs_floor"), 2, "x"),
                        cell(self.ratio(f"http_{era}_{response}_cpu_vs_floor"), 2, "x"),
                    ]
                )
        self.add("Ours over the bare-hypercorn floor, within each run:", "")
        self.table(
            [
                "",
                "under wrk",
                "under the driver",
                "by CPU per call (floor/ours), wrk",
                "the same, driver",
            ],
            rows,
        )
        self.add(
            "Why the two load generators give different figures. Both keep "
            f"{HTTP_CONNECTIONS} keep-alive connections busy with one call at a time each and "
            "send the same bytes, so what differs is the client. (The server's CPU per call under "
            "wrk is over its measured run only; under the driver, over the whole driver run, "
            "warm-up and the 1-connection part included: the two columns are not the same "
            "window.) "
            "wrk is C and LuaJIT: it formats each request with one Lua call and checks an answer "
            "with one substring search, where the driver is Node and parses every answer (a JSON "
            "body or an SSE stream), checks its id and its text, and keeps a promise per call "
            "(the load generator's CPU per call, above). The load generator and the server share "
            f"this machine's {self.cores()} cores: a cheaper client leaves more CPU to the "
            "server and to everything else running, and holds each answer less long between "
            "its arrival and the next request. The cheaper the server's own call, the larger "
            "the part of the machine's work per call that the client's is, so the more a "
            f"cheaper client raises its calls/s.{self.wrk_gain()} The CPU-per-call ratio "
            "(the server's CPU only, whichever the client) is the steadier measure of the two. "
            "Calls/s under wrk are over a fixed time (`-d`), the driver's over a fixed number of "
            "calls; wrk's latency runs from the request written to the answer parsed in its "
            "event loop, the driver's from promise to promise.",
            "",
        )

    def wrk_gain(self) -> str:
        """What wrk gained over the driver in this report, per server (a sentence, or none)."""
        gains = {}
        for server in ("trio", "floor"):
            medians = [
                stat["median"]
                for era in ("hs", "modern")
                for response in ("sse", "json")
                if (stat := self.ratio(f"http_{era}_{server}_{response}_wrk_vs_driver"))
            ]
            if medians:
                gains[server] = statistics.median(medians)
        if len(gains) < 2:
            return ""
        ours, floor = gains["trio"], gains["floor"]
        if floor > ours * 1.05:
            verdict = "the floor gained more than trio_mcp, so ours/floor reads lower under wrk"
        elif ours > floor * 1.05:
            verdict = "trio_mcp gained more than the floor, so ours/floor reads higher under wrk"
        else:
            verdict = "within 5% of each other, so ours/floor reads about the same under either"
        return (
            f" Here wrk's calls/s over the driver's (the median of the four cases) were "
            f"{fmt(ours, 2)}x for trio_mcp and {fmt(floor, 2)}x for the floor: {verdict}."
        )

    def growth(self) -> None:
        """The scale family (``benchmarks/growth.py``): each cost at two or three sizes, and how
        much it grew against how much the work grew."""
        if not any(j.startswith("growth ") for j in self.jobs):
            return
        self.add(
            "## 9. Growth: how the cost grows with the work",
            "",
            "`benchmarks/growth.py`. Each cost is measured at growing sizes of the work; "
            "*growth* is the cost at the larger size over the cost at the smaller, *work* how "
            "much the work grew: growth at most the work is linear or better (10x the work "
            "should cost at most 10x). Memory figures are the steady ones on a shared machine.",
            "",
        )

        def grew(job: str, metric: str, work: float) -> str:
            stat = self.stat(job, metric)
            if stat is None:
                return "n/a"
            verdict = "" if stat["median"] <= work * 1.15 else " **worse than linear**"
            return f"{cell(stat, 2, 'x')} of {fmt(work)}x{verdict}"

        names = {"http": "Streamable HTTP", "sse": "HTTP+SSE (2024-11-05)", "ws": "WebSocket"}
        rows = []
        for transport, label in names.items():
            job = f"growth sessions {transport}"
            if job not in self.jobs:
                continue
            small, large = (self.stat(job, f"sessions_{k}") for k in ("small", "large"))
            work = large["median"] / small["median"] if small and large else float("nan")
            rows.append(
                [
                    label,
                    f"{cell(small)} / {cell(large)}",
                    cell(self.stat(job, "rss_small_bytes_per_session")),
                    cell(self.stat(job, "rss_large_bytes_per_session")),
                    grew(job, "rss_growth", work),
                    cell(self.stat(job, "traced_small_bytes_per_session")),
                    cell(self.stat(job, "traced_large_bytes_per_session")),
                    grew(job, "traced_growth", work),
                    cell(self.stat(job, "idle_cpu_base_ms_per_s"), 2),
                    cell(self.stat(job, "idle_cpu_small_ms_per_s"), 2),
                    cell(self.stat(job, "idle_cpu_large_ms_per_s"), 2),
                    cell(self.stat(job, "idle_cpu_large_us_per_session_s"), 3),
                ]
            )
        if rows:
            self.add(
                "### Idle sessions: memory and CPU per open session",
                "",
                "trio_mcp's server under `hypercorn --worker-class trio` on 127.0.0.1; sessions "
                "opened 32 at a time and left idle: Streamable HTTP after `initialize` and "
                "`notifications/initialized` (no connection kept), HTTP+SSE with its `GET` "
                "stream open, WebSocket open and initialized. Bytes per session over the "
                "baseline: the worker's VmRSS, and tracemalloc in a second server; CPU: the "
                f"worker's, in ms a second, over {self.p.get('growth_idle_ms', 0) / 1000:g} s "
                "while the sessions sit idle, "
                f"{self.p.get('growth_quiet_ms', 0) / 1000:g} s after the last one opened "
                "(each POST leaves a 5 s disconnect grace in trio's deadline heap, dropped "
                "when it comes: the opening's tail, not the sessions'). *Base*: the worker with "
                "only the warm-up sessions: hypercorn's worker looks for its shutdown ten times "
                "a second whatever it serves (`trio-mcp serve` runs no such poll). *Per "
                "session*: the CPU at the larger size over the base, in µs a second per "
                "session; an HTTP+SSE stream writes a keep-alive comment every 15 s "
                "(`keepalive_interval`), which shows there.",
                "",
            )
            header = ["transport", "sessions", "RSS B/session", "at the larger", "RSS growth"]
            header += ["traced B/session", "at the larger", "traced growth"]
            header += ["idle CPU ms/s: base", "at the smaller", "at the larger"]
            header += ["per session µs/s"]
            self.table(header, rows)
        job = "growth tools/list"
        if job in self.jobs:
            self.add(
                "### `tools/list` with many tools registered",
                "",
                "In process: trio_mcp's client over in-memory streams, both engines in one "
                "process (handshake era), best of three runs. *One page*: one call, the "
                "server's default `page_size` of 100; *the walk*: every page, one after the "
                "other; *unpaged*: one call of a server with `page_size=None`; *collector "
                "paused*: the same call with Python's cyclic garbage collector paused while it "
                "is timed (building an answer of 10,000 tools, and the client's parse of it, "
                "sets off full collections, which walk every object of the heap: with the "
                "collector on, the call's cost grows faster than its own work); its *page "
                "faults* per call (minor faults, `getrusage`): CPython gives an answer's empty "
                "memory arenas back to the system, and the next call takes fresh pages, each a "
                "fault (a few µs each), which grows the time faster than the work once an "
                "answer no longer fits in the memory the process keeps.",
                "",
            )
            rows = []
            for index in range(3):
                tools = self.stat(job, f"tools_{index}")
                if tools is None:
                    continue
                work = self.stat(job, f"work_{index}")
                w = work["median"] if work else float("nan")
                # A page holds at most 100 tools: its work grows only up to there.
                page_work = min(tools["median"], 100) / min(tools["median"] / w, 100)
                rows.append(
                    [
                        cell(tools),
                        cell(self.stat(job, f"page_us_{index}")),
                        grew(job, f"page_growth_{index}", page_work) if work else "",
                        cell(self.stat(job, f"walk_us_{index}")),
                        cell(self.stat(job, f"walk_us_per_tool_{index}"), 1),
                        grew(job, f"walk_growth_{index}", w) if work else "",
                        cell(self.stat(job, f"whole_us_{index}")),
                        grew(job, f"whole_growth_{index}", w) if work else "",
                        cell(self.stat(job, f"whole_paused_us_{index}")),
                        grew(job, f"whole_paused_growth_{index}", w) if work else "",
                        cell(self.stat(job, f"whole_paused_faults_{index}")),
                    ]
                )
            header = ["tools", "one page µs", "growth"]
            header += ["the walk µs", "µs/tool", "growth", "unpaged µs", "growth"]
            header += ["unpaged, collector paused µs", "growth", "page faults"]
            self.table(header, rows)
            self.add(
                "A page holds at most 100 tools whatever the server holds: past 100 tools its "
                "work, and so its cost, should stay the same (growth near 1x).",
                "",
            )
        job = "growth tools/call"
        if job in self.jobs:
            self.add(
                "### `tools/call` with large results, against the bare-hypercorn floor",
                "",
                "A `blob` tool whose result is one text block of the size given, over "
                "Streamable HTTP (handshake era, SSE responses), one call at a time on one "
                "keep-alive connection; the bare-hypercorn floor (`peers/floor_http_server.py`) "
                "answers the same sized body. The two take turns round by round (rounds: "
                f"{self.p.get('growth_rounds', 1)}); ours/floor is in calls/s (higher is "
                "better), the median of the rounds' ratios.",
                "",
            )
            rows = []
            for index in range(3):
                size = self.stat(job, f"bytes_{index}")
                if size is None:
                    continue
                work = self.stat(job, f"work_{index}")
                w = work["median"] if work else float("nan")
                rows.append(
                    [
                        f"{fmt(size['median'])} B",
                        cell(self.stat(job, f"trio_us_{index}")),
                        cell(self.stat(job, f"floor_us_{index}")),
                        cell(self.stat(job, f"vs_floor_{index}"), 2, "x"),
                        cell(self.stat(job, f"trio_mb_per_s_{index}"), 1),
                        grew(job, f"trio_growth_{index}", w) if work else "",
                        grew(job, f"floor_growth_{index}", w) if work else "",
                    ]
                )
            header = ["result", "trio_mcp µs/call", "floor µs/call", "ours/floor", "trio_mcp MB/s"]
            self.table([*header, "trio_mcp growth", "floor growth"], rows)
        job = "growth event store"
        if job in self.jobs:
            small, large = self.stat(job, "events_small"), self.stat(job, "events_large")
            work = large["median"] / small["median"] if small and large else float("nan")
            size = self.stat(job, "event_bytes")
            self.add(
                "### The in-memory event store (`MemoryEventStore`)",
                "",
                f"Events of {cell(size)} bytes (a progress notification), kept in one stream "
                "or one per stream (a stream's own cost counted in its event). Bytes per event "
                "by tracemalloc (data and overhead); append time without it, best of three; "
                "a resume of a stream's last 10 events (the same work at every size).",
                "",
            )
            rows = []
            for layout, label in (("one_stream", "one stream"), ("streams", "a stream each")):
                rows.append(
                    [
                        label,
                        cell(self.stat(job, f"{layout}_small_bytes_per_event")),
                        cell(self.stat(job, f"{layout}_large_bytes_per_event")),
                        grew(job, f"{layout}_growth", work),
                        cell(self.stat(job, f"{layout}_small_append_us"), 2),
                        cell(self.stat(job, f"{layout}_large_append_us"), 2),
                        grew(job, f"{layout}_append_growth", work),
                    ]
                )
            header = [f"{cell(small)} / {cell(large)} events", "B/event", "at the larger"]
            header += ["memory growth", "append µs", "at the larger", "time growth"]
            self.table(header, rows)
            self.table(
                ["resume of the last 10 events", "µs", "at the larger", "growth (same work)"],
                [
                    [
                        "one stream",
                        cell(self.stat(job, "replay_tail_small_us"), 1),
                        cell(self.stat(job, "replay_tail_large_us"), 1),
                        grew(job, "replay_tail_growth", 1.0),
                    ]
                ],
            )

    def profiles(self) -> None:
        profiles = self.s.get("profiles")
        if profiles:
            self.add(profiles_markdown(profiles, "##"))

    def inprocess(self) -> None:
        if "inprocess" not in self.jobs:
            return

        def row(label: str, metric: str, unit: str) -> list[str]:
            return [label, cell(self.stat("inprocess", metric)), unit]

        self.add("## 5. In-process parsing and dispatch (no I/O)", "")
        rows = [
            row("`parse()` of a `tools/call echo` request", "parse", "messages/s"),
            row(
                "the floor's work per line (orjson decode, reply, encode)", "floor_work", "lines/s"
            ),
            row("server engine, one message per checkpoint", "engine", "requests/s"),
            row("server engine, 10 messages per checkpoint", "engine_batched", "requests/s"),
            row(
                f"server engine, one per checkpoint, {self.p['parked_inprocess']:,} parked",
                "engine_loaded",
                "requests/s",
            ),
            row("trio_mcp client → server in memory, sequential", "memory_roundtrip", "calls/s"),
            row("memory per parked `sleep` request, trio_mcp engine", "parked_bytes", "bytes"),
            row(
                "memory per parked task: bare Trio, cancel scope, `trio.sleep`",
                "parked_bytes_floor",
                "bytes",
            ),
            row(
                "memory per parked task: bare Trio, cancel scope, the benchmark's `sleep` tool",
                "parked_bytes_floor_tool",
                "bytes",
            ),
        ]
        posts = max(2, self.p["messages"] // 10)
        for mode, label in (
            ("modern", "modern era"),
            ("sse", "handshake-era session, SSE"),
            ("json", "handshake-era session, JSON"),
        ):
            if self.stat("inprocess", f"http_{mode}_us") is not None:
                rows.append(
                    row(
                        f"Streamable HTTP app alone (no ASGI server), {label}: CPU per POST "
                        f"({posts:,} POSTs)",
                        f"http_{mode}_us",
                        "µs",
                    )
                )
        if self.stat("inprocess", "writer_us") is not None:
            rows.append(
                row(
                    "a shared event store's writer, per request stream delivered within its "
                    f"coalescing window ({self.p['messages']:,} streams)",
                    "writer_us",
                    "µs",
                )
            )
        self.table([f"path ({self.p['messages']:,} messages)", "figure", "unit"], rows)
        self.add(
            "Engine throughput with parked requests over without, within each run: "
            f"{cell(self.ratio('engine_loaded'), 2, 'x')}.",
            "",
        )

    def clock(self) -> None:
        clock = self.s.get("clock")
        if not clock:
            return
        inside, rounds = clock["inside"], clock["rounds"]
        self.add(
            "## Clock check",
            "",
            f"Node {clock['node']} (libuv {clock['libuv']}) `process.hrtime` against Python "
            f"`time.clock_gettime_ns`: {rounds} pipe round trips, median bracket "
            f"{clock['bracket_us_median']:.0f} µs. Python's CLOCK_MONOTONIC fell inside Node's "
            f"bracket {inside['monotonic']}/{rounds} times, CLOCK_REALTIME "
            f"{inside['realtime']}/{rounds} (CLOCK_BOOTTIME, {inside['boottime']}/{rounds}, "
            "equals CLOCK_MONOTONIC on a machine that never suspended). libuv's `uv_hrtime` "
            "reads CLOCK_MONOTONIC on Linux: stamps from the two runtimes compare directly.",
            "",
        )

    def method(self) -> None:
        p = self.p
        self.add(
            "## Method in brief",
            "",
            f"- Throughput: after {p['warmup']} sequential and {p['warmup']} concurrent warm-up "
            f"calls, {p['n']} sequential "
            f"`tools/call echo` calls, then {p['k']} concurrent callers making "
            f"{-(-p['n'] // p['k'])} calls each; calls per second over each batch, latency per "
            "call as its caller sees it. Every server is driven by the official TypeScript "
            "client; every client drives the official TypeScript server.",
            "- Floor: `benchmarks/peers/floor_server.py`, one Trio task answering each line with "
            "orjson, no MCP (a task and a cancel scope only for `sleep`).",
            f"- Cancel: {p['cancels']} cancels per run (after {p['warmup_cancels']} unrecorded), "
            "each on a `sleep` call at its first progress notification, with the SDK's own "
            "mechanism (AbortSignal, cancel scope); CLOCK_MONOTONIC stamps in both processes.",
            f"- Scale: {p['parked']:,} concurrent `sleep(3600)` calls parked on one connection; "
            "server VmRSS from `/proc/<pid>/status` before and after.",
            "- In-process: `benchmarks/inprocess.py`, a fresh process per run.",
            "",
        )


def profiles_markdown(profiles: dict[str, Any], heading: str = "##") -> str:
    """The summary as markdown: per load, the packages, then the top functions."""
    lines = [
        f"{heading} Profiles",
        "",
        f"Recorded {profiles['date']} at commit {profiles['commit']} by "
        f"`python3 benchmarks/profiles.py` (or `run.py --profile`): py-spy at {profiles['rate']} "
        f"samples/s for {profiles['seconds']:g} s per load, attached to the process serving; "
        "shares are of the samples in which the server was busy (idle waits left out).",
        "",
    ]
    for name, load in profiles["loads"].items():
        lines += [f"{heading}# Profile: {name} ({load['what']})", ""]
        if name in ("sessions", "parked"):
            what = "idle handshake sessions" if name == "sessions" else "parked `sleep` requests"
            unit = "session" if name == "sessions" else "request"
            count = load["sessions"] if name == "sessions" else load["parked"]
            traced = load[f"traced_bytes_per_{unit}"]
            rss = (
                f" RSS {load['rss_bytes_per_session']:,.0f} B per session (tracemalloc on), of "
                "which"
                if name == "sessions"
                else ""
            )
            lines += [
                f"{count:,} {what}:{rss} tracemalloc traced {traced:,.0f} B per {unit} in Python "
                "objects. The lines that allocated it:",
                "",
                f"| bytes per {unit} | blocks per {unit} | allocated at |",
                "|---|---|---|",
            ]
            lines += [
                f"| {size:,.0f} | {blocks:.1f} | `{where}` |" for where, size, blocks in load["top"]
            ]
            lines.append("")
            continue
        if "beyond_floor" in load:
            lines += _against_floor_markdown(load)
            continue
        skipped = load.get("import_samples", 0)
        left_out = f" ({skipped:,} more while the server was still importing, left out)"
        lines += [
            f"{load['samples']:,} busy samples{left_out if skipped else ''}. Own time by package:",
            "",
        ]
        lines += ["| package | share |", "|---|---|"]
        lines += [f"| {pkg} | {share:.0%} |" for pkg, share in load["by_package"]]
        lines += ["", "| own time | function | total time | function (trio_mcp, hypercorn, h11) |"]
        lines.append("|---|---|---|---|")
        for (own_name, own), (total_name, total) in zip(load["own"], load["total"], strict=False):
            lines.append(f"| {own:.1%} | `{own_name}` | {total:.1%} | `{total_name}` |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _against_floor_markdown(load: dict[str, Any]) -> list[str]:
    """A profile of ours beside the floor's: CPU per call by package, then the functions where
    ours spends the most beyond the floor."""
    (ours_label, ours), (floor_label, floor) = load["servers"].items()
    packages = list(dict.fromkeys([*ours["by_package"], *floor["by_package"]]))
    lines = [
        f"{load['calls']:,} calls to each, in {load['rounds']} turns each, sampled from the "
        "first call to the last: CPU per call (µs, the busy samples times the sampling period "
        "over the calls), by package of the innermost frame.",
        "",
        f"| package | {ours_label} | {floor_label} | beyond the floor |",
        "|---|---|---|---|",
    ]
    for package in packages:
        mine, theirs = ours["by_package"].get(package, 0.0), floor["by_package"].get(package, 0.0)
        lines.append(f"| {package} | {mine:,.0f} | {theirs:,.0f} | {mine - theirs:+,.0f} |")
    spent, floor_spent = ours["us_per_call"], floor["us_per_call"]
    lines += [
        f"| all | {spent:,.0f} | {floor_spent:,.0f} | {spent - floor_spent:+,.0f} |",
        "",
        "| µs per call beyond the floor | function (own time) |",
        "|---|---|",
    ]
    lines += [f"| {extra:+.1f} | `{function}` |" for function, extra in load["beyond_floor"]]
    lines.append("")
    return lines


def build_report(summary: dict[str, Any]) -> str:
    return Report(summary).build()


def draw_chart(summary: dict[str, Any], path: Path) -> None:
    """Six panels of medians with min-to-max error bars (three more with the HTTP section),
    drawn with matplotlib (headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs: dict[str, dict[str, Stat]] = summary["jobs"]
    colours = {
        "trio": "#3b7dd8",
        "ts": "#e0a030",
        "ts2": "#b0662a",
        "py": "#5aa05a",
        "floor": "#888888",
    }
    http = any(job.startswith("http ") for job in jobs)
    Where = Callable[[str], tuple[str, str]]

    def bars(
        ax: Any,
        title: str,
        unit: str,
        groups: Sequence[str],
        series: Sequence[tuple[str, Where]],
        names: dict[str, str] = NAMES,
    ) -> None:
        width = 0.8 / max(1, len(series))
        for i, (impl, where) in enumerate(series):
            xs, medians, lows, highs = [], [], [], []
            for g, group in enumerate(groups):
                stat = jobs.get(where(group)[0], {}).get(where(group)[1])
                if stat is not None:
                    xs.append(g + (i - (len(series) - 1) / 2) * width)
                    medians.append(stat["median"])
                    lows.append(stat["median"] - stat["min"])
                    highs.append(stat["max"] - stat["median"])
            if xs:
                ax.bar(
                    xs,
                    medians,
                    width,
                    yerr=[lows, highs],
                    capsize=3,
                    label=names[impl],
                    color=colours[impl],
                )
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)

    modes = ["sequential", "concurrent"]
    short = {"sequential": "seq", "concurrent": "con"}
    fig, axes = plt.subplots(3 if http else 2, 3, figsize=(15, 12.75 if http else 8.5))
    bars(
        axes[0][0],
        "Servers, driven by the TypeScript client",
        "calls/s",
        modes,
        [(s, lambda g, s=s: (f"ts->{s}", f"{short[g]}_cps")) for s in SERVERS],
    )
    bars(
        axes[0][1],
        "Clients, driving the TypeScript server",
        "calls/s",
        modes,
        [(c, lambda g, c=c: (f"{c}->ts", f"{short[g]}_cps")) for c in CLIENTS],
    )
    bars(
        axes[0][2],
        "Servers and the bare-Trio floor, raw driver",
        "calls/s",
        modes,
        [(s, lambda g, s=s: (f"raw->{s}", f"{short[g]}_cps")) for s in ("floor", "trio", "ts")],
    )
    server_side = "server observed\n(TS client drives)"
    bars(
        axes[1][0],
        "Cancel latency p50 (lower is better)",
        "µs",
        [server_side, "returned to caller\n(TS server serves)", "server observed\n(raw driver)"],
        [
            (
                i,
                lambda g, i=i: (
                    (f"cancel ts->{i}", "server_p50")
                    if g == server_side
                    else (f"cancel {i}->ts", "return_p50")
                    if g.startswith("returned")
                    else (f"cancel raw->{i}", "server_p50")
                ),
            )
            for i in ("trio", "ts", "ts2", "py", "floor")
        ],
    )
    bars(
        axes[1][1],
        "Memory per parked request, server RSS (lower is better)",
        "bytes",
        ["RSS growth / parked"],
        [(s, lambda _g, s=s: (f"scale {s}", "bytes_per_request")) for s in SERVERS],
    )
    axes[1][1].axhline(5120, color="red", linestyle="--", linewidth=1, label="5 KiB goal")
    bars(
        axes[1][2],
        f"Throughput with {summary['profile']['parked']:,} in flight / idle",
        "ratio",
        modes,
        [(s, lambda g, s=s: (f"scale {s}", f"{short[g]}_ratio")) for s in SERVERS],
    )
    axes[1][2].axhline(1.0, color="red", linestyle="--", linewidth=1)
    if http:
        kinds = ["handshake\nSSE", "handshake\nJSON", "modern\nSSE", "modern\nJSON"]

        def http_job(kind: str, server: str) -> str:
            era, response = kind.split()
            return f"http {'hs' if era == 'handshake' else 'modern'} {server} {response.lower()}"

        servers = ("trio", "floor", "ts", "ts2", "py")
        era_of = {"handshake era": "hs", "modern era": "modern"}
        bars(
            axes[2][0],
            "HTTP, 10 connections",
            "calls/s",
            kinds,
            [(s, lambda g, s=s: (http_job(g, s), "con_cps")) for s in servers],
            HTTP_NAMES,
        )
        bars(
            axes[2][1],
            "HTTP, server CPU per call (lower is better)",
            "µs",
            kinds,
            [(s, lambda g, s=s: (http_job(g, s), "cpu_us_per_call")) for s in servers],
            HTTP_NAMES,
        )
        bars(
            axes[2][2],
            "HTTP cancel latency, server observed p50 (lower is better)",
            "µs",
            ["handshake era", "modern era"],
            [
                (s, lambda g, s=s: (f"http cancel {era_of[g]} {s}", "server_p50"))
                for s in ("trio", "ts", "ts2", "py")
            ],
        )
    fig.suptitle(
        f"trio_mcp benchmarks, {summary['date']}: medians over {summary['profile']['runs']} runs, "
        f"error bars min{DASH}max",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
