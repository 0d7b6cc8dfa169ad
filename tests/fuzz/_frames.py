"""What the fuzzers send and what they check: the catalogue of hostile frames, the valid
requests the mutation fuzzer starts from, the mutations, and the checks every reply must pass.

Sans-IO like the library's own protocol layer: the test modules drive a real stdio child and a
real hypercorn with these.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import attrs

VERSION = "2025-11-25"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

#: How many mutated frames one run sends (per transport); raise it for a long run.
FUZZ_EXAMPLES = int(os.environ.get("TRIO_MCP_FUZZ_EXAMPLES", "400"))
#: How many requests one cancel storm sends (per transport); raise it for a long run.
STORM_REQUESTS = int(os.environ.get("TRIO_MCP_STORM_REQUESTS", "600"))
#: The seed of the mutation fuzzer and the storms; a failure message names it.
SEED = int(os.environ.get("TRIO_MCP_FUZZ_SEED", "18"))

#: Error codes a server may answer a hostile frame with. -32603 is not among them: it means a
#: handler failed unexpectedly, which no input should cause.
CLIENT_FAULT_CODES = frozenset({-32700, -32600, -32601, -32602, -32002, -32020, -32021, -32022})

# -- checks --------------------------------------------------------------------------------------

#: What internal text looks like: a traceback, a source path, an exception class name, a repr.
INTERNAL = re.compile(
    r"Traceback|File \"|\.py\b|site-packages|trio_mcp[./]|/usr/|/home/|/tmp/|"
    r"\b[A-Z][A-Za-z]*(?:Error|Exception|Group|Warning)\b|object at 0x|<class '"
)


def internal_text(text: str) -> str | None:
    """The first piece of internal text in ``text``, if any."""
    found = INTERNAL.search(text)
    return None if found is None else text[max(0, found.start() - 60) : found.end() + 60]


def check_reply(raw: bytes | str, context: str) -> list[dict[str, Any]]:
    """One reply frame (a line, an SSE data field, a JSON body): well-formed JSON-RPC from the
    server, leaking nothing. Returns its messages (a batch answer has several)."""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    leak = internal_text(text)
    assert leak is None, f"{context}: internal text in a reply: {leak!r}"
    value = json.loads(text)
    messages = value if isinstance(value, list) else [value]
    assert messages, f"{context}: an empty batch answer"
    for message in messages:
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", (context, message)
        if "error" in message:
            error = message["error"]
            assert "id" in message and "result" not in message, (context, message)
            assert isinstance(error.get("code"), int), (context, message)
            assert isinstance(error.get("message"), str), (context, message)
            assert error["code"] != -32603, f"{context}: an internal error: {message}"
        elif "result" in message:
            assert "id" in message and isinstance(message["result"], dict), (context, message)
        else:
            assert isinstance(message.get("method"), str), (context, message)
    return messages


def check_log(text: str, context: str) -> None:
    """What the server wrote to stderr or its log: nothing internal."""
    leak = internal_text(text)
    assert leak is None, f"{context}: internal text in the server's output: {leak!r}"


# -- frames --------------------------------------------------------------------------------------


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def request(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(rid: Any, name: str, arguments: Any = None, **params: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": arguments or {}, **params})


@attrs.frozen
class Answer:
    """The expected answer class of a frame: the JSON-RPC error ``codes`` allowed, whether a
    ``result`` is, or ``silent`` for no answer at all; ``count`` members for a batch answer;
    over Streamable HTTP, the ``statuses`` the POST may get."""

    codes: frozenset[int] = frozenset()
    result: bool = False
    silent: bool = False
    count: int | None = None
    statuses: frozenset[int] = frozenset({200})

    def describe(self) -> str:
        if self.silent:
            return "no answer"
        allowed = [f"error {sorted(self.codes)}"] if self.codes else []
        return " or ".join(allowed + (["a result"] if self.result else []))


def error(*codes: int, status: int = 200) -> Answer:
    return Answer(frozenset(codes), statuses=frozenset({status}))


RESULT = Answer(result=True)
SILENT = Answer(silent=True, statuses=frozenset({202}))
#: For frames whose exact verdict is the handler's: any client-fault error or a result; over
#: HTTP, refused up front (400) or answered (200).
LENIENT = Answer(CLIENT_FAULT_CODES, result=True, statuses=frozenset({200, 400}))


@attrs.frozen
class Hostile:
    name: str
    frame: bytes
    answer: Answer
    #: Sent over stdio only (HTTP refuses batches and has its own size limit, tested there).
    stdio_only: bool = False


#: Nesting the parser reads, and nesting past its limit.
DEEP = 1000
TOO_DEEP = 3000


def _catalogue() -> Iterator[Hostile]:
    bad_json = [
        b'{"jsonrpc": "2.0", "id": 1, "method": ',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
        b"{'jsonrpc': '2.0'}",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping",}',
        b"\x00",
        b'{"jsonrpc":"2.0","id":1,"method":"p\x00ing"}',
        b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # a surrogate, UTF-8 encoded
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',  # a lone surrogate, escaped
        b'{"jsonrpc":"2.0","id":1,"method":"\\udc00x"}',
        b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":-1e999}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":NaN}}',
        b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % (b"9" * 400),
        b"\xef\xbb\xbf" + b'{"jsonrpc":"2.0","id":1,"method":"ping"}',  # a byte-order mark
        b"\x1b[31m",
    ]
    for n, frame in enumerate(bad_json):
        yield Hostile(f"bad-json-{n}", frame, error(-32700, status=400))
    for n, value in enumerate([42, "ping", None, True, 1.5]):
        yield Hostile(f"not-an-object-{n}", dumps(value), error(-32600, status=400))
    wrong_envelope = [
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": 2.0, "id": 1, "method": "ping"},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": None},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": 1, "method": ["ping"]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 5},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": [1], "method": "ping"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": 5},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}},
        {"jsonrpc": "2.0", "id": 1, "error": 5},
    ]
    for n, message in enumerate(wrong_envelope):
        yield Hostile(f"wrong-envelope-{n}", dumps(message), error(-32600, status=400))
    # Numbers: ids of any size are echoed; huge numbers in arguments are the tool's to judge.
    yield Hostile("id-2**64", dumps(request(2**64, "ping")), RESULT)
    yield Hostile("id--2**63-1", dumps(request(-(2**63) - 1, "ping")), RESULT)
    yield Hostile("id-10**300", dumps(request(10**300, "ping")), RESULT)
    yield Hostile("add-2**70", dumps(call(1, "add", {"a": 2**70, "b": 1})), RESULT)
    yield Hostile("add-1e308", dumps(call(1, "add", {"a": 1e308, "b": 1e308})), RESULT)
    yield Hostile("sleep-negative", dumps(call(1, "sleep", {"seconds": -(2**80)})), RESULT)
    yield Hostile("echo-huge-text", dumps(call(1, "echo", {"text": "x" * 1_000_000})), RESULT)
    # Nesting: as deep as the parser reads (1,024 levels) is served; deeper is unreadable.
    for depth, unreadable in ((DEEP, False), (TOO_DEEP, True)):
        deep = b'{"a":' * depth + b"1" + b"}" * depth
        frames = {
            "batch": b"[" * depth + b"]" * depth,
            "arguments": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
            b'{"name":"echo","arguments":{"text":%s}}}' % deep[5:-1],
            "meta": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":%s}}' % deep,
            "params": b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":%s}' % deep,
        }
        for what, frame in frames.items():
            if unreadable:
                answer = error(-32700, status=400)
            elif what == "batch":
                answer = Answer(frozenset({-32600}), count=1)
            else:
                answer = LENIENT
            yield Hostile(f"deep-{depth}-{what}", frame, answer, stdio_only=what == "batch")
    # NUL and control characters inside strings are data.
    yield Hostile("nul-in-text", dumps(call(1, "echo", {"text": "a\x00b\x01"})), RESULT)
    yield Hostile("nul-method", dumps(request(1, "ping\x00")), error(-32601))
    yield Hostile("nul-tool", dumps(call(1, "echo\x00")), error(-32602))
    # Batches (2025-03-26 allows them; Streamable HTTP refuses them).
    yield Hostile("empty-batch", b"[]", error(-32600, status=400))
    yield Hostile(
        "batch-of-numbers", b"[1, 2, 3]", Answer(frozenset({-32600}), count=3), stdio_only=True
    )
    pings = dumps([request(n, "ping") for n in range(200)])
    yield Hostile("batch-of-200", pings, Answer(result=True, count=200), stdio_only=True)
    notes = dumps([{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 3)
    yield Hostile("batch-of-notifications", notes, SILENT, stdio_only=True)
    nested = dumps([[request(1, "ping")]])
    yield Hostile("nested-batch", nested, Answer(frozenset({-32600}), count=1), stdio_only=True)
    mixed = dumps([request("m1", "ping"), 5, request("m2", "nope"), {"jsonrpc": "2.0", "id": 1}])
    mixed_answer = Answer(frozenset({-32600, -32601}), result=True, count=4)
    yield Hostile("mixed-batch", mixed, mixed_answer, stdio_only=True)
    yield Hostile(
        "batch-with-initialize",
        dumps([request("b-init", "initialize", {"protocolVersion": VERSION})]),
        Answer(frozenset({-32600, -32602}), count=1),
        stdio_only=True,
    )
    # Notification methods sent with an id, and notifications that are hostile themselves.
    for method in ("notifications/initialized", "notifications/cancelled", "notifications/x"):
        yield Hostile(f"note-with-id-{method}", dumps(request(9, method)), error(-32601))
    hostile_notes = [
        {"requestId": {"a": 1}},
        {"requestId": None},
        {"requestId": 10**300},
        {"requestId": "nobody", "reason": ["x"]},
        [1],
    ]
    for n, params in enumerate(hostile_notes):
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        answer = error(-32600, status=400) if isinstance(params, list) else SILENT
        yield Hostile(f"hostile-cancel-{n}", dumps(note), answer)
    for n, params in enumerate([{"progressToken": {}}, {"progressToken": 1, "progress": "x"}]):
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        yield Hostile(f"hostile-progress-{n}", dumps(note), SILENT)
    yield Hostile(
        "unknown-response", dumps({"jsonrpc": "2.0", "id": "never-asked", "result": {}}), SILENT
    )
    yield Hostile(
        "unknown-error-response",
        dumps({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}}),
        SILENT,
    )
    # Hostile _meta.
    metas: list[Any] = [
        "x",
        5,
        [],
        None,
        {"progressToken": {"a": 1}},
        {"progressToken": True},
        {"progressToken": 1.5},
        {"progressToken": "x" * 10_000},
        {"io.modelcontextprotocol/protocolVersion": 5},
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": "x",
        },
        {
            "io.modelcontextprotocol/protocolVersion": "1999-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        {"k" * 1000: "v" * 1000},
    ]
    for n, meta in enumerate(metas):
        frame = dumps(call(1, "echo", {"text": "m"}, _meta=meta))
        yield Hostile(f"hostile-meta-{n}", frame, LENIENT)
    # Wrong types at every field of the everyday requests.
    for name, frame in wrong_types():
        yield Hostile(name, frame, LENIENT)


#: Valid requests the demo server answers, each with the fields a fuzzer may spoil.
VALID: list[dict[str, Any]] = [
    request(1, "ping"),
    request(1, "tools/list", {"cursor": None}),
    call(1, "echo", {"text": "hello"}),
    call(1, "add", {"a": 1, "b": 2}),
    call(1, "sleep", {"seconds": 0.01}, _meta={"progressToken": "p"}),
    request(1, "prompts/list"),
    request(1, "prompts/get", {"name": "greeting", "arguments": {"name": "Ada", "style": "x"}}),
    request(1, "resources/list"),
    request(1, "resources/templates/list"),
    request(1, "resources/read", {"uri": "demo://readme"}),
    request(1, "resources/read", {"uri": "demo://greeting/Ada"}),
    request(1, "logging/setLevel", {"level": "debug"}),
    request(
        1,
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greeting"},
            "argument": {"name": "style", "value": "w"},
        },
    ),
    request(1, "tools/list", {"_meta": MODERN_META}),
    call(1, "echo", {"text": "modern"}, _meta=MODERN_META),
    request(1, "server/discover"),
]

#: What a field is replaced with: every JSON type, empty and odd values, big ones.
HOSTILE_VALUES: list[Any] = [None, True, 0, -1, 2**64, 1.5, "", "x", [], [1], {}, {"a": 1}]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replaced(copy[head], tuple(rest), new)
    return copy


def wrong_types() -> Iterator[tuple[str, bytes]]:
    """Every field of every valid request (but the envelope, covered above) given every
    hostile value."""
    for n, valid in enumerate(VALID):
        for path in _paths(valid):
            if path[0] in ("jsonrpc", "id", "method"):
                continue
            for value in HOSTILE_VALUES:
                name = f"wrong-type-{n}-{valid['method']}-{'.'.join(map(str, path))}-{value!r}"
                yield name[:120], dumps(_replaced(valid, path, value))


CATALOGUE: list[Hostile] = list(_catalogue())

# -- mutations -----------------------------------------------------------------------------------

_BYTES = [b"\x00", b"\xff", b"\xed\xa0\x80", b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"\n"]
_TEXT = [b"null", b"true", b"-1", b"1e400", b"18446744073709551616", b'"\\ud800"', b"{}", b"[]"]


def _byte_mutation(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        where = rng.randrange(len(data) + 1)
        kind = rng.randrange(6)
        if kind == 0 and data:  # flip a bit
            at = min(where, len(data) - 1)
            data[at] ^= 1 << rng.randrange(8)
        elif kind == 1:  # insert a hostile byte sequence
            data[where:where] = rng.choice(_BYTES)
        elif kind == 2:  # delete a run
            del data[where : where + rng.randint(1, 8)]
        elif kind == 3:  # duplicate a run
            run = data[where : where + rng.randint(1, 16)]
            data[where:where] = run
        elif kind == 4:  # truncate
            del data[where:]
        else:  # splice in a hostile JSON value
            data[where:where] = rng.choice(_TEXT)
    return bytes(data)


def _structure_mutation(message: dict[str, Any], rng: random.Random) -> bytes:
    paths = [p for p in _paths(message) if p[0] != "id"]
    value: Any = message
    for _ in range(rng.randint(1, 3)):
        if not paths:
            break
        path = rng.choice(paths)
        kind = rng.randrange(4)
        try:
            if kind == 0:
                value = _replaced(value, path, rng.choice(HOSTILE_VALUES))
            elif kind == 1:  # a huge string
                value = _replaced(value, path, "x" * rng.choice([1, 1000, 100_000]))
            elif kind == 2:  # nest it
                value = _replaced(value, path, [_get(value, path)] * rng.randint(1, 3))
            else:  # drop the field
                value = _dropped(value, path)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed what the path named
    if rng.random() < 0.1:
        value = [value, value]  # as a batch
    return dumps(value)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _dropped(value: Any, path: tuple[Any, ...]) -> Any:
    parent = _get(value, path[:-1])
    copy: Any = dict(parent) if isinstance(parent, dict) else list(parent)
    del copy[path[-1]]
    return _replaced(value, path[:-1], copy)


def mutations(
    count: int, seed: int, *, keep: Callable[[dict[str, Any]], bool] = lambda m: True
) -> Iterator[bytes]:
    """``count`` mutated frames of the :data:`VALID` requests ``keep`` allows, half mutated as
    bytes and half as structure; the same ``seed`` gives the same frames."""
    rng = random.Random(seed)
    bases = [m for m in VALID if keep(m)]
    for n in range(count):
        base = dict(rng.choice(bases), id=f"fz-{n}")
        if rng.random() < 0.5:
            yield _byte_mutation(dumps(base), rng)
        else:
            yield _structure_mutation(base, rng)
