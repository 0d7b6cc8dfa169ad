"""The request log (``Server(log_requests=True)``): one line per request from the record the
``on_request`` hook gets, naming the request and never its content; off by default."""

from __future__ import annotations

import logging

import pytest

from trio_mcp import RequestRecord, Server, ToolError, open_client
from trio_mcp.server._request_log import REQUEST_LOGGER, request_line

SECRET = "s3cr3t-argument"


def server(*, log_requests: bool = False) -> Server:
    server = Server("logged", "1.0.0", log_requests=log_requests)

    @server.tool()
    def shout(text: str) -> str:
        if text == "fail":
            raise ToolError(f"cannot shout {SECRET}")
        return text.upper() + SECRET

    return server


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == REQUEST_LOGGER]


async def test_a_line_per_request_with_its_outcome_and_no_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    records: list[RequestRecord] = []
    logged = server(log_requests=True)
    logged.on_request = records.append  # the hook and the log: the same records
    caplog.set_level(logging.INFO, logger=REQUEST_LOGGER)
    async with open_client(logged) as client:
        await client.call_tool("shout", {"text": SECRET})
        await client.call_tool("shout", {"text": "fail"})
    found = lines(caplog)
    assert len(found) == len(records)
    calls = [line for line in found if line.startswith("method=tools/call ")]
    assert calls[0].startswith("method=tools/call target=shout id=")
    assert " outcome=ok " in calls[0] and " outcome=tool_error " in calls[1]
    assert all(" transport=memory" in line for line in found)
    assert not any(SECRET in line for line in found)
    carried = [
        getattr(r, "request_record", None) for r in caplog.records if r.name == REQUEST_LOGGER
    ]
    assert carried == records


async def test_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with open_client(server()) as client:
        await client.call_tool("shout", {"text": "hi"})
    assert lines(caplog) == []


def test_a_peer_chosen_name_cannot_forge_a_line_or_a_field() -> None:
    record = RequestRecord(
        method="tools/call",
        request_id="7 outcome=ok\nINFO forged",
        name="x principal=admin",
        duration=0.0015,
        cancelled=True,
        cancel_reason=None,
        error_code=None,
        cancelled_by="peer",
        subject="alice",
    )
    line = request_line(record)
    assert "\n" not in line
    assert line == (
        'method=tools/call target="x principal=admin" id="7 outcome=ok\\nINFO forged" '
        "outcome=cancelled cancelled_by=peer duration_ms=1.50 principal=alice"
    )
