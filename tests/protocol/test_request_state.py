"""requestState sealing, with the time passed in: encrypted, bound to its audience, method,
target, arguments and subject, tamper-proof, and expired exactly ``ttl`` seconds after it was
sealed; a key ring (the first key seals, every one opens); keys written as text."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp.protocol._request_state import (
    MAX_STATE_SIZE,
    StateSealer,
    arguments_digest,
    decode_key,
    key_id,
    keys_from_file,
    keys_from_list,
)

OLD, NEW, GONE = b"o" * 32, b"n" * 32, b"g" * 32

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


# -- the key ring ---------------------------------------------------------------------------------


def test_a_ring_seals_with_its_first_key_and_opens_with_every_one() -> None:
    before = StateSealer(OLD)
    rotated = StateSealer([NEW, OLD])
    assert rotated.key == NEW and rotated.key_id == key_id(NEW)
    assert rotated.key_ids == (key_id(NEW), key_id(OLD))
    # A state sealed before the rotation still opens...
    assert rotated.open("tools/call", "transfer", ARGS, sealed(before), now=1000.0) == PAYLOAD
    # ...and a new one is sealed under the new key, which the old process cannot open.
    token = sealed(rotated)
    assert token.split(".")[1] == key_id(NEW)
    assert before.open("tools/call", "transfer", ARGS, token, now=1000.0) is None
    assert StateSealer(NEW).open("tools/call", "transfer", ARGS, token, now=1000.0) == PAYLOAD


def test_a_state_sealed_under_a_rotated_out_key_is_refused() -> None:
    token = sealed(StateSealer([OLD, GONE]))
    assert StateSealer([NEW, OLD]).open("tools/call", "transfer", ARGS, token, now=0.0) == PAYLOAD
    retired = sealed(StateSealer([GONE, OLD]))
    assert StateSealer([NEW, OLD]).open("tools/call", "transfer", ARGS, retired, now=0.0) is None


def test_an_unknown_key_id_is_refused_like_a_forged_state() -> None:
    ring = StateSealer([NEW, OLD])
    version, _, body = sealed(ring).split(".")
    for kid in (key_id(GONE), "AAAAAAAA", "", ring.key_id.lower()):
        forged = f"{version}.{kid}.{body}"
        assert ring.open("tools/call", "transfer", ARGS, forged, now=0.0) is None, kid
    # The id of the ring's other key: the body was sealed under the first, so it fails too.
    moved = f"{version}.{key_id(OLD)}.{body}"
    assert ring.open("tools/call", "transfer", ARGS, moved, now=0.0) is None


def test_a_ring_needs_distinct_keys_each_long_enough() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        StateSealer([])
    with pytest.raises(ValueError, match="same key twice"):
        StateSealer([NEW, OLD, NEW])
    with pytest.raises(ValueError, match="at least 16 bytes"):
        StateSealer([NEW, b"short"])
    with pytest.raises(TypeError):
        StateSealer("k" * 32)  # type: ignore[arg-type]
    assert not StateSealer(NEW).ephemeral and StateSealer().ephemeral


def test_a_state_is_bound_to_its_audience() -> None:
    """Two servers sharing a key open each other's states only for the same audience."""
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call", "t", {}, PAYLOAD, now=0.0, audience="https://a.example/mcp")
    assert sealer.open("tools/call", "t", {}, token, now=0.0, audience="https://a.example/mcp")
    for other in ("https://b.example/mcp", "", "https://a.example/mcp/"):
        assert sealer.open("tools/call", "t", {}, token, now=0.0, audience=other) is None, other
    assert sealer.open("tools/call", "t", {}, sealed(sealer), now=1000.0, audience="a") is None


# -- keys written as text -------------------------------------------------------------------------


def test_keys_are_read_as_hex_or_base64url() -> None:
    key = bytes(range(32))
    assert decode_key(key.hex()) == key
    assert decode_key(key.hex().upper()) == key
    spelled = base64.urlsafe_b64encode(key).decode()
    assert spelled.endswith("=") and decode_key(spelled) == key
    assert decode_key(spelled.rstrip("=")) == key
    assert decode_key(f"  {key.hex()}\n") == key
    # 16 bytes is the least: as hex, 32 digits.
    assert decode_key("ab" * 16) == b"\xab" * 16


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("ab" * 15, "15 bytes, under the 16"),
        ("c2hvcnQ", "5 bytes"),
        ("a+b/" * 11, "neither hex nor base64url"),
        ("ü" * 40, "neither hex nor base64url"),
        ("abc=def" * 8, "neither hex nor base64url"),
        ("A" * 41, "neither hex nor base64url"),  # no byte string has 41 base64 characters
    ],
)
def test_a_malformed_or_short_key_says_why_and_never_shows_the_key(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        decode_key(text)
    if text.strip():
        assert text.strip() not in str(caught.value)


def test_a_key_list_is_comma_separated_newest_first() -> None:
    assert keys_from_list(f"{NEW.hex()}, {OLD.hex()}", "KEYS") == [NEW, OLD]
    assert keys_from_list(NEW.hex(), "KEYS") == [NEW]
    short = "ab" * 16 + "," + "cd" * 4
    with pytest.raises(ValueError, match=r"^KEYS: key 2: the key is 4 bytes") as caught:
        keys_from_list(short, "KEYS")
    assert "cd" * 4 not in str(caught.value)
    with pytest.raises(ValueError, match=r"^KEYS: key 2: the key is empty"):
        keys_from_list(f"{NEW.hex()},", "KEYS")
    with pytest.raises(ValueError, match=r"^KEYS: key 1: the key is empty"):
        keys_from_list("", "KEYS")
    with pytest.raises(ValueError, match=r"^KEYS: key 3 repeats key 1"):
        keys_from_list(f"{NEW.hex()},{OLD.hex()},{NEW.hex()}", "KEYS")


def test_a_key_file_has_one_key_a_line_and_comments() -> None:
    text = f"# rotated in on Monday\n{NEW.hex()}\n\n   # the old one, until Tuesday\n{OLD.hex()}\n"
    assert keys_from_file(text, "keys.txt") == [NEW, OLD]
    assert keys_from_file(f"{NEW.hex()}\r\n{OLD.hex()}", "keys.txt") == [NEW, OLD]
    with pytest.raises(ValueError, match=r"^keys.txt, line 4: the key is neither") as caught:
        keys_from_file(f"# new\n{NEW.hex()}\n\nnot a key at all!\n", "keys.txt")
    assert "not a key" not in str(caught.value)
    with pytest.raises(ValueError, match=r"^keys.txt, line 1: the key is 3 bytes"):
        keys_from_file("abcdef\n", "keys.txt")
    with pytest.raises(ValueError, match=r"^keys.txt: line 3 repeats line 1"):
        keys_from_file(f"{NEW.hex()}\n{OLD.hex()}\n{NEW.hex()}\n", "keys.txt")
    for empty in ("", "\n\n", "# only a comment\n"):
        with pytest.raises(ValueError, match=r"^keys.txt holds no key"):
            keys_from_file(empty, "keys.txt")
