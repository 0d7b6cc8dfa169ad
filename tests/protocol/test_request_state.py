"""requestState sealing, with the time passed in: encrypted, bound to its method, target,
arguments and subject, tamper-proof, and expired exactly ``ttl`` seconds after it was sealed."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._request_state import (
    MAX_STATE_SIZE,
    StateSealer,
    arguments_digest,
)

PAYLOAD = {"answers": {"elicitation-1": {"action": "accept"}}, "data": {}, "asked": []}
ARGS = {"amount": 1, "to": "bob"}


def sealed(sealer: StateSealer, *, subject: str = "") -> str:
    return sealer.seal("tools/call", "transfer", ARGS, PAYLOAD, now=1000.0, subject=subject)


def test_a_sealed_state_opens_for_its_own_request() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    assert sealer.open("tools/call", "transfer", ARGS, token, now=1000.0) == PAYLOAD
    # Key order is not part of the arguments.
    assert sealer.open("tools/call", "transfer", {"to": "bob", "amount": 1}, token, now=1.0)


def test_a_state_for_one_tool_is_refused_on_another() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    assert sealer.open("tools/call", "withdraw", ARGS, token, now=1000.0) is None


def test_a_state_for_a_tool_is_refused_on_a_prompt_of_the_same_name() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    assert sealer.open("prompts/get", "transfer", ARGS, token, now=1000.0) is None


def test_a_state_is_refused_when_only_the_arguments_differ() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    for other in ({"amount": 1000000, "to": "mallory"}, {"amount": 1, "to": "bob", "x": 0}, {}):
        assert sealer.open("tools/call", "transfer", other, token, now=1000.0) is None, other


def test_absent_arguments_and_empty_arguments_are_the_same() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call", "t", None, PAYLOAD, now=0.0)
    assert sealer.open("tools/call", "t", {}, token, now=0.0) == PAYLOAD
    assert arguments_digest(None) == arguments_digest({})
    assert arguments_digest({"a": {"y": 1, "x": 2}}) == arguments_digest({"a": {"x": 2, "y": 1}})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": "1"})


def test_a_state_is_bound_to_its_subject() -> None:
    """The principal a state was issued to (empty without authorization) is bound too."""
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer, subject="alice")
    assert sealer.open("tools/call", "transfer", ARGS, token, now=0.0, subject="alice")
    assert sealer.open("tools/call", "transfer", ARGS, token, now=0.0, subject="bob") is None
    assert sealer.open("tools/call", "transfer", ARGS, token, now=0.0) is None


def test_a_state_sealed_under_another_key_is_refused() -> None:
    token = sealed(StateSealer(b"k" * 32))
    assert StateSealer(b"x" * 32).open("tools/call", "transfer", ARGS, token, now=0.0) is None
    # Even when it claims the right key's id: the key itself decides.
    right, wrong = StateSealer(b"k" * 32), StateSealer(b"x" * 32)
    forged = sealed(wrong).replace(wrong.key_id, right.key_id, 1)
    assert right.open("tools/call", "transfer", ARGS, forged, now=0.0) is None


def test_a_state_expires_ttl_seconds_after_it_was_sealed() -> None:
    sealer = StateSealer(b"k" * 32, ttl=60)
    token = sealer.seal("tools/call", "t", {}, PAYLOAD, now=500.0)
    assert sealer.open("tools/call", "t", {}, token, now=560.0) == PAYLOAD
    assert sealer.open("tools/call", "t", {}, token, now=560.001) is None
    # No clock is read: a state sealed "in the future" of the reader is simply not expired yet.
    assert sealer.open("tools/call", "t", {}, token, now=0.0) == PAYLOAD


def test_a_client_cannot_read_a_state() -> None:
    """Nothing of the payload, the arguments or the expiry is visible in the token."""
    sealer = StateSealer(b"k" * 32)
    payload = {"data": {"quote": "pencil-0.99-EUR"}, "answers": {}, "asked": []}
    token = sealer.seal("tools/call", "buy", {"item": "pencil"}, payload, now=1234.0)
    version, kid, body = token.split(".")
    assert (version, kid) == ("v1", sealer.key_id)
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    for secret in (b"pencil", b"quote", b"1834", b"answers", b"buy"):
        assert secret not in raw
    # A fresh nonce every time: the same state never seals to the same token.
    again = sealer.seal("tools/call", "buy", {"item": "pencil"}, payload, now=1234.0)
    assert again != token


def test_a_state_altered_by_one_byte_is_refused() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    version, kid, body = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    for index in range(len(raw)):  # every byte: the nonce, the ciphertext and the tag
        altered = bytearray(raw)
        altered[index] ^= 0x01
        text = base64.urlsafe_b64encode(bytes(altered)).rstrip(b"=").decode()
        forged = f"{version}.{kid}.{text}"
        assert sealer.open("tools/call", "transfer", ARGS, forged, now=0.0) is None, index
    # One character of the text, anywhere (the base64 spelling is strict, spare bits too).
    for index in range(len(token)):
        swapped = "B" if token[index] == "A" else "A"
        forged = token[:index] + swapped + token[index + 1 :]
        assert sealer.open("tools/call", "transfer", ARGS, forged, now=0.0) is None, index


def test_malformed_tokens_are_refused() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealed(sealer)
    version, kid, body = token.split(".")
    for bad in (
        None,
        7,
        "",
        "a",
        "a.b",
        "a.b.c.d",
        f"v2.{kid}.{body}",
        f"{version}.{kid}.",
        f"{version}.{kid}.{body}=",
        f"{version}.{kid}.{body}!",
        f"{version}.{kid}.{body[:20]}",
        f"{version}.{kid}.%%%%",
        f"{version}.{kid}.{body}é",
    ):
        assert sealer.open("tools/call", "transfer", ARGS, bad, now=0.0) is None, bad


def test_an_oversized_token_is_refused_before_decoding_and_never_sealed() -> None:
    sealer = StateSealer(b"k" * 32)
    assert sealer.max_size == MAX_STATE_SIZE == 64 * 1024
    big = {"data": {"blob": "x" * MAX_STATE_SIZE}}
    small = StateSealer(b"k" * 32, max_size=MAX_STATE_SIZE * 2)
    token = small.seal("tools/call", "t", {}, big, now=0.0)
    assert small.open("tools/call", "t", {}, token, now=0.0) == big
    assert sealer.open("tools/call", "t", {}, token, now=0.0) is None  # same key, too long
    with pytest.raises(ValueError, match="over the limit"):
        sealer.seal("tools/call", "t", {}, big, now=0.0)


def test_a_short_or_missing_key() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        StateSealer(b"short")
    # By default, a random key of its own: another process cannot open its states.
    one, two = StateSealer(), StateSealer()
    token = one.seal("tools/call", "t", {}, PAYLOAD, now=0.0)
    assert one.open("tools/call", "t", {}, token, now=0.0) == PAYLOAD
    assert two.open("tools/call", "t", {}, token, now=0.0) is None


@given(
    st.text(),
    st.text(),
    st.dictionaries(st.text(), st.integers(-(2**70), 2**70) | st.text() | st.none()),
    st.floats(min_value=0, max_value=4e9),
    st.booleans(),
)
def test_any_state_round_trips_within_its_lifetime(
    method: str, target: str, arguments: dict[str, object], now: float, later: bool
) -> None:
    sealer = StateSealer(b"k" * 32, ttl=10)
    token = sealer.seal(method, target, arguments, {"data": {"n": 1}}, now=now)
    opened = sealer.open(method, target, dict(arguments), token, now=now + (10 if later else 0))
    assert opened == {"data": {"n": 1}}
