"""The OpenTelemetry SDK's in-memory exporter and reader, given to the library as its providers
(``trio_mcp.otel.configure``) for one test, then taken back: the global providers, which can
be set once per process, are never touched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import trio_mcp.otel


@attrs.define
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str, kind: SpanKind) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name and s.kind == kind]
        assert len(found) == 1, (name, kind, [(s.name, s.kind) for s in self.spans()])
        return found[0]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        found += list(m.data.data_points)
        return found

    def histogram(self, metric: str, **wanted: Any) -> Any:
        """The one point of ``metric`` whose attributes include ``wanted`` (dots as ``__``)."""
        want = {k.replace("__", "."): v for k, v in wanted.items()}
        found = [
            p for p in self.points(metric) if all(p.attributes.get(k) == v for k, v in want.items())
        ]
        assert len(found) == 1, (metric, want, [dict(p.attributes) for p in self.points(metric)])
        return found[0]


def attributes_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return (
        child.parent is not None
        and child.parent.span_id == parent.context.span_id
        and child.context.trace_id == parent.context.trace_id
    )


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    trio_mcp.otel.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Telemetry(exporter, reader, tracer_provider)
    finally:
        trio_mcp.otel.configure()
        meter_provider.shutdown()
        tracer_provider.shutdown()
