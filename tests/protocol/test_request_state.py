"""requestState sealing, with the time passed in: bound to its method and target, tamper-proof,
and expired exactly ``ttl`` seconds after it was sealed."""

from __future__ import annotations

import base64

import orjson
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._request_state import StateSealer

PAYLOAD = {"answers": {"elicitation-1": {"action": "accept"}}, "data": {}, "asked": []}


def test_a_sealed_state_opens_for_its_method_and_target_only() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call", "deploy", PAYLOAD, now=1000.0)
    assert sealer.open("tools/call", "deploy", token, now=1000.0) == PAYLOAD
    assert sealer.open("prompts/get", "deploy", token, now=1000.0) is None
    assert sealer.open("tools/call", "other", token, now=1000.0) is None
    assert StateSealer(b"x" * 32).open("tools/call", "deploy", token, now=1000.0) is None


def test_a_state_expires_ttl_seconds_after_it_was_sealed() -> None:
    sealer = StateSealer(b"k" * 32, ttl=60)
    token = sealer.seal("tools/call", "t", PAYLOAD, now=500.0)
    assert sealer.open("tools/call", "t", token, now=560.0) == PAYLOAD
    assert sealer.open("tools/call", "t", token, now=560.001) is None
    # No clock is read: a state sealed "in the future" of the reader is simply not expired yet.
    assert sealer.open("tools/call", "t", token, now=0.0) == PAYLOAD


def test_a_changed_body_or_mac_is_refused() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call", "t", PAYLOAD, now=0.0)
    body, mac = token.split(".")
    forged = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged["p"]["answers"] = {"elicitation-1": {"action": "decline"}}
    forged_body = base64.urlsafe_b64encode(orjson.dumps(forged)).rstrip(b"=").decode()
    assert sealer.open("tools/call", "t", f"{forged_body}.{mac}", now=0.0) is None
    for bad in (None, 7, "", "a", "a.b.c", f"{body}.", f".{mac}", f"{body}.{mac}x", "%%.%%"):
        assert sealer.open("tools/call", "t", bad, now=0.0) is None, bad


@given(st.text(), st.text(), st.floats(min_value=0, max_value=4e9), st.booleans())
def test_any_state_round_trips_within_its_lifetime(
    method: str, target: str, now: float, later: bool
) -> None:
    sealer = StateSealer(b"k" * 32, ttl=10)
    token = sealer.seal(method, target, {"data": {"n": 1}}, now=now)
    opened = sealer.open(method, target, token, now=now + (10 if later else 0))
    assert opened == {"data": {"n": 1}}
