"""Where a server's requestState keys come from when its code gives none: the environment.

``TRIO_MCP_STATE_KEYS`` holds the keys themselves, comma-separated, newest first;
``TRIO_MCP_STATE_KEYS_FILE`` names a file holding them, one per line (``#`` comments). Each key
is hex or base64url (:func:`~trio_mcp.protocol._request_state.decode_key`). A malformed, short
or repeated key is a ``ValueError`` naming the variable or the file and the line, never the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..protocol._request_state import keys_from_file, keys_from_list

#: The keys themselves, comma-separated, newest first.
STATE_KEYS_ENV = "TRIO_MCP_STATE_KEYS"
#: A file of keys, one per line, newest first.
STATE_KEYS_FILE_ENV = "TRIO_MCP_STATE_KEYS_FILE"


def read_key_file(path: str | os.PathLike[str]) -> list[bytes]:
    """The keys of a key file, newest first; ``ValueError`` naming the file (and the line)."""
    where = f"the state key file {os.fspath(path)!r}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{where} is not UTF-8 text") from None
    return keys_from_file(text, where)


def configured_state_keys(
    environ: Mapping[str, str] | None = None,
) -> tuple[list[bytes], str] | None:
    """The keys the environment gives, with where they came from (for the log), or None when
    neither variable is set. Setting both is an error: one of them would be ignored."""
    environ = os.environ if environ is None else environ
    listed, filed = environ.get(STATE_KEYS_ENV), environ.get(STATE_KEYS_FILE_ENV)
    if listed is not None and filed is not None:
        raise ValueError(f"{STATE_KEYS_ENV} and {STATE_KEYS_FILE_ENV} are both set: choose one")
    if listed is not None:
        return keys_from_list(listed, STATE_KEYS_ENV), STATE_KEYS_ENV
    if filed is not None:
        if not filed.strip():
            raise ValueError(f"{STATE_KEYS_FILE_ENV} is set but names no file")
        return read_key_file(filed), f"{STATE_KEYS_FILE_ENV} ({filed})"
    return None


def server_state_keys(
    state_key: bytes | None, state_keys: Iterable[bytes] | None
) -> tuple[list[bytes] | None, str | None]:
    """The keys a ``Server`` is given (in code, else by the environment) and where they came
    from; ``(None, None)`` when it has none and draws its own."""
    if state_key is not None and state_keys is not None:
        raise ValueError("give state_key or state_keys, not both")
    if state_key is not None:
        return [state_key], "Server(state_key=...)"
    if state_keys is not None:
        return list(state_keys), "Server(state_keys=...)"
    configured = configured_state_keys()
    if configured is not None:
        return configured
    return None, None
