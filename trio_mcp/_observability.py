"""What the ``trio-mcp`` command sets up around what it serves or drives: Python logging on
stderr, and OpenTelemetry's SDK when the standard ``OTEL_*`` variables ask for it.

The library never does either (that is an application's choice); the command is an
application. Nothing here imports OpenTelemetry unless a variable asks for an exporter, so a
command started without one loads none of it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

#: The command's log level when ``--log-level`` is not given.
LOG_LEVEL_ENV = "TRIO_MCP_LOG_LEVEL"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: The format of the command's log lines; with tracing on, the current span's ids too.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TRACED_LOG_FORMAT = (
    "%(asctime)s %(levelname)s %(name)s [trace_id=%(otelTraceID)s span_id=%(otelSpanID)s]: "
    "%(message)s"
)

#: Libraries whose INFO lines (each HTTP request made, each reconnection attempt) are shown
#: at ``debug`` only.
QUIET_LOGGERS = ("httpx", "httpcore", "coredis")

#: Where an exporter package registers itself, per signal (OpenTelemetry's entry points).
_GROUPS = {
    "TRACES": "opentelemetry_traces_exporter",
    "METRICS": "opentelemetry_metrics_exporter",
}
#: The package that brings an exporter, for the line that says one is missing.
_PACKAGES = {
    "otlp": "opentelemetry-exporter-otlp",
    "prometheus": "opentelemetry-exporter-prometheus",
}


def _say(text: str) -> None:
    sys.stderr.write(f"trio-mcp: {text}\n")
    sys.stderr.flush()


def exporters_asked(env: Mapping[str, str], signal: str) -> list[str]:
    """The exporters ``OTEL_{signal}_EXPORTER`` names (a comma-separated list; ``none``: none);
    unset, ``otlp`` if an OTLP endpoint is set for the signal, else none."""
    value = env.get(f"OTEL_{signal}_EXPORTER")
    if value is None:
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
            f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    names = [name.strip().lower() for name in value.split(",")]
    return [name for name in names if name and name != "none"]


def _exporter_class(signal: str, name: str) -> Any:
    """The class an installed package registered for ``name``, or None (said on stderr)."""
    from importlib.metadata import entry_points

    found = entry_points(group=_GROUPS[signal], name=name)
    variable = f"OTEL_{signal}_EXPORTER"
    if not found:
        package = _PACKAGES.get(name)
        hint = f" (pip install {package})" if package else ""
        _say(f"{variable}: no exporter {name!r} is installed{hint}; it is left out")
        return None
    try:
        return next(iter(found)).load()
    except Exception as exc:  # a broken package: say so, serve anyway
        _say(f"{variable}: exporter {name!r} cannot be loaded ({exc}); it is left out")
        return None


def configure_opentelemetry(service_name: str, *, console: TextIO) -> bool:
    """Install OpenTelemetry's SDK as the global tracer and meter providers, with the exporters
    the ``OTEL_*`` variables name, as ``opentelemetry-instrument`` would; True when spans are
    recorded (so log lines get trace ids).

    ``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` name the exporters (``console``,
    ``otlp``, ``prometheus`` or any an installed package registers; unset: ``otlp`` when an OTLP
    endpoint is set, else none); ``OTEL_SDK_DISABLED=true`` sets up nothing. The SDK reads the
    rest itself (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, the sampler, the batch
    processor's and the exporters' settings). ``console`` is where the console exporters write:
    stderr whenever stdout is the protocol's stream (stdio) or the command's answer.
    ``service_name`` is used when the variables name none.
    """
    env = os.environ
    if not any(name.startswith("OTEL_") for name in env):
        return False
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    traces, metrics = exporters_asked(env, "TRACES"), exporters_asked(env, "METRICS")
    if not traces and not metrics:
        return False
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    except ImportError:
        variable = "OTEL_TRACES_EXPORTER" if traces else "OTEL_METRICS_EXPORTER"
        _say(
            f"{variable} asks for OpenTelemetry, but its SDK is not installed "
            "(pip install opentelemetry-sdk); nothing is exported"
        )
        return False
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service_name}))
    tracing = bool(traces) and _configure_traces(traces, resource, console)
    if metrics:
        _configure_metrics(metrics, resource, console)
    return tracing


def _configure_traces(names: list[str], resource: Any, console: TextIO) -> bool:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    provider = TracerProvider(resource=resource)
    added = False
    for name in names:
        if name == "console":  # printed as each span ends: it is for watching
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
            added = True
            continue
        exporter = _exporter_class("TRACES", name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter()))
            added = True
    if added:
        trace.set_tracer_provider(provider)
    return added


def _configure_metrics(names: list[str], resource: Any, console: TextIO) -> None:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        MetricReader,
        PeriodicExportingMetricReader,
    )

    readers: list[MetricReader] = []
    for name in names:
        if name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(out=console)))
            continue
        exporter = _exporter_class("METRICS", name)
        if exporter is None:
            continue
        # A pull exporter (Prometheus) is a reader of its own; a push one is read periodically.
        is_reader = isinstance(exporter, type) and issubclass(exporter, MetricReader)
        readers.append(exporter() if is_reader else PeriodicExportingMetricReader(exporter()))
    if readers:
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def log_level(given: str | None) -> str | None:
    """The level ``--log-level`` gave, else ``TRIO_MCP_LOG_LEVEL``'s; None when neither did.
    Raises ValueError for a level that is not one of :data:`LOG_LEVELS`."""
    where = "--log-level"
    if given is None:
        given, where = os.environ.get(LOG_LEVEL_ENV, "").strip() or None, LOG_LEVEL_ENV
    if given is None:
        return None
    if given.lower() not in LOG_LEVELS:
        raise ValueError(f"{where}: expected one of {', '.join(LOG_LEVELS)}, not {given!r}")
    return given.lower()


def configure_logging(level: str, *, trace_ids: bool) -> None:
    """Log records of ``level`` and above to stderr, one line each (those of
    :data:`QUIET_LOGGERS` from WARNING unless ``level`` is debug); with ``trace_ids``, the
    current span's trace and span ids in each (:class:`trio_mcp.otel.TraceContextFilter`).

    A served file that configured logging itself (``logging.basicConfig`` when imported) keeps
    its handlers and format; they get the level, and the trace ids as record attributes."""
    root = logging.getLogger()
    trace_filter = None
    if trace_ids:
        from .otel import TraceContextFilter

        trace_filter = TraceContextFilter()
    if root.handlers:
        for handler in root.handlers:
            if trace_filter is not None:
                handler.addFilter(trace_filter)
    else:
        ours = logging.StreamHandler(sys.stderr)
        if trace_filter is not None:
            ours.addFilter(trace_filter)
        ours.setFormatter(logging.Formatter(TRACED_LOG_FORMAT if trace_ids else LOG_FORMAT))
        root.addHandler(ours)
    # hypercorn's error log has a handler of its own (its "Running on" line): not twice.
    logging.getLogger("hypercorn.error").propagate = False
    root.setLevel(level.upper())
    if level != "debug":  # the HTTP and Redis clients' INFO lines are a debugging aid
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
