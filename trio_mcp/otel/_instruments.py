"""The tracer, the meter's instruments and the attribute rules: imported only once something
listens (an SDK is installed), so only then is OpenTelemetry imported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter

from .._version import __version__
from ..protocol._jsonrpc import JSONObject
from ._held import held_bytes

#: The conventions' bucket advice for every duration histogram (seconds).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
SCOPE = "trio_mcp"
SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
#: The span attributes kept off the metrics (high cardinality, or opt-in there).
SPAN_ONLY = frozenset(
    {
        "jsonrpc.request.id",
        "mcp.session.id",
        "mcp.resource.uri",
        "client.address",
        "client.port",
    }
)
#: The keys of W3C Trace Context and Baggage in ``params._meta`` (SEP-414).
TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _listening_tracer_provider(explicit: Any) -> Any:
    provider = explicit if explicit is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _listening_meter_provider(explicit: Any) -> Any:
    provider = explicit if explicit is not None else metrics.get_meter_provider()
    # The API's stand-in before an SDK is set is a private class: known by its name.
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__ in (
        "_ProxyMeterProvider",
        "ProxyMeterProvider",
    ):
        return None
    return provider


@attrs.define(eq=False)
class Instrumentation:
    """The tracer and the instruments of one pair of providers (made once, then shared)."""

    tracer: trace.Tracer
    #: Whether the tracer records (a real provider's), for a log formatter and the cost checks.
    tracing: bool
    client_operation: metrics.Histogram
    server_operation: metrics.Histogram
    client_session: metrics.Histogram
    server_session: metrics.Histogram
    in_flight: metrics.ObservableUpDownCounter
    #: Requests of the peer being answered now, by transport: counted here, read by
    #: ``in_flight`` when a reader collects (two measurements per request were about a sixth
    #: of what the SDK cost a call).
    answering: dict[str, int]
    cancellations: metrics.Counter
    sessions_open: metrics.UpDownCounter
    event_store_bytes: metrics.ObservableUpDownCounter
    limits_hit: metrics.Counter
    redis_errors: metrics.Counter

    @classmethod
    def make(cls, tracer_provider: Any, meter_provider: Any) -> Instrumentation:
        tracer = (
            tracer_provider.get_tracer(SCOPE, __version__, schema_url=SCHEMA_URL)
            if tracer_provider is not None
            else trace.NoOpTracer()
        )
        meter = (
            meter_provider.get_meter(SCOPE, __version__, schema_url=SCHEMA_URL)
            if meter_provider is not None
            else metrics.NoOpMeter(SCOPE)
        )

        answering: dict[str, int] = {}

        def observe_answering(options: metrics.CallbackOptions) -> list[metrics.Observation]:
            return [
                metrics.Observation(count, {"trio_mcp.transport": transport})
                for transport, count in list(answering.items())
            ]

        def duration(name: str, what: str) -> metrics.Histogram:
            return meter.create_histogram(
                name,
                unit="s",
                description=what,
                explicit_bucket_boundaries_advisory=list(map(float, DURATION_BUCKETS)),
            )

        return cls(
            tracer=tracer,
            tracing=tracer_provider is not None,
            client_operation=duration(
                "mcp.client.operation.duration",
                "The duration of an MCP request or notification as observed on the sender, "
                "from the time it was sent until the response or ack is received.",
            ),
            server_operation=duration(
                "mcp.server.operation.duration",
                "The duration of an MCP request or notification as observed on the receiver, "
                "from the time it was received until the result or ack is sent.",
            ),
            client_session=duration(
                "mcp.client.session.duration",
                "The duration of the MCP session as observed on the MCP client.",
            ),
            server_session=duration(
                "mcp.server.session.duration",
                "The duration of the MCP session as observed on the MCP server.",
            ),
            in_flight=meter.create_observable_up_down_counter(
                "trio_mcp.server.requests.in_flight",
                callbacks=[observe_answering],
                unit="{request}",
                description="Requests of the peer being answered now.",
            ),
            answering=answering,
            cancellations=meter.create_counter(
                "trio_mcp.server.cancellations",
                unit="{request}",
                description="Requests cancelled before they were answered, by who cancelled.",
            ),
            sessions_open=meter.create_up_down_counter(
                "trio_mcp.sessions.open",
                unit="{session}",
                description="Connections and sessions open now, per transport.",
            ),
            event_store_bytes=meter.create_observable_up_down_counter(
                "trio_mcp.event_store.bytes",
                callbacks=[_observe_held_bytes],
                unit="By",
                description="The bytes of events an event store holds for resumption.",
            ),
            limits_hit=meter.create_counter(
                "trio_mcp.limits.hit",
                unit="{refusal}",
                description="Refusals because a bound was reached (sessions, tasks, ...).",
            ),
            redis_errors=meter.create_counter(
                "trio_mcp.redis.errors",
                unit="{error}",
                description="Redis calls that failed.",
            ),
        )


def _observe_held_bytes(options: metrics.CallbackOptions) -> list[metrics.Observation]:
    """What the event stores hold now, read when a metric reader collects."""
    return [
        metrics.Observation(held, {"trio_mcp.event_store": store})
        for store, held in held_bytes().items()
    ]


_cache: dict[tuple[int, int], tuple[Any, Any, Instrumentation]] = {}


def current(tracer_provider: Any, meter_provider: Any) -> Instrumentation | None:
    """The instrumentation of the providers that listen (explicit ones, else the global ones),
    or None when neither does."""
    tp = _listening_tracer_provider(tracer_provider)
    mp = _listening_meter_provider(meter_provider)
    if tp is None and mp is None:
        return None
    key = (id(tp), id(mp))
    found = _cache.get(key)
    if found is None or found[0] is not tp or found[1] is not mp:
        found = (tp, mp, Instrumentation.make(tp, mp))
        _cache[key] = found
    return found[2]


# -- attributes ------------------------------------------------------------------------------


def describe(method: str, params: JSONObject) -> tuple[str, dict[str, Any]]:
    """A request's or notification's span name (``{mcp.method.name} {target}``) and the
    attributes that depend on its method. Never its arguments, results or ``_meta``."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    target: Any = None
    if method == "tools/call":
        target = params.get("name")
        if isinstance(target, str):
            attributes["gen_ai.tool.name"] = target
            attributes["gen_ai.operation.name"] = "execute_tool"
    elif method == "prompts/get":
        target = params.get("name")
        if isinstance(target, str):
            attributes["gen_ai.prompt.name"] = target
    elif method in _URI_METHODS:
        uri = params.get("uri")
        if isinstance(uri, str):
            attributes["mcp.resource.uri"] = uri
    if isinstance(target, str) and target:
        return f"{method} {target}", attributes
    return method, attributes


_URI_METHODS = frozenset(
    {
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/resources/updated",
    }
)


def metric_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if k not in SPAN_ONLY}


# -- propagation (W3C Trace Context and Baggage in params._meta) --------------------------------


class _MetaGetter(Getter[Mapping[str, Any]]):
    """Reads only string values: ``_meta`` is the peer's, and may hold anything."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        value = carrier.get(key)
        return [value] if isinstance(value, str) else None

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return [k for k in carrier if isinstance(k, str)]


_GETTER = _MetaGetter()


def extract(params: JSONObject) -> Context | None:
    """The remote parent a request or notification carries in ``_meta``, or None."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("traceparent"), str):
        return None
    found = propagate.extract(meta, getter=_GETTER)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def inject(params: JSONObject | None) -> JSONObject | None:
    """``params`` with the current trace context (and baggage) in its ``_meta``; a new dict,
    so a caller's own is never changed. Unchanged when there is nothing to carry."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return params
    body = dict(params) if params else {}
    meta = body.get("_meta")
    body["_meta"] = {**(meta if isinstance(meta, dict) else {}), **carrier}
    return body
