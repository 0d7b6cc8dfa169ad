"""The skills extension's wire (SEP-2640): its names, limits and rules, the ``SKILL.md``
frontmatter, digests, and the shape of a ``skills/list`` entry. Plain values and functions
(no I/O), shared by the server half and the client half so both read a skill the same way.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

#: The extension's identifier, its key under ``extensions`` in the capabilities.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SKILLS_LIST = "skills/list"
SKILLS_GET = "skills/get"
DIRECTORY_READ = "resources/directory/read"
#: What a directory resource says it is.
DIRECTORY_MIME_TYPE = "inode/directory"
SKILL_MD = "SKILL.md"
SKILL_SCHEME = "skill://"
SKILL_MD_MIME_TYPE = "text/markdown"
#: The per-skill limits every host accepts (SEP-2640 "Limits"): files, SKILL.md included,
#: and the bytes of them all.
MAX_SKILL_FILES = 512
MAX_SKILL_BYTES = 16 * 1024 * 1024
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
#: What a skill's name may be (Agent Skills): lowercase ASCII letters, digits and single
#: hyphens inside, at most 64 characters (the conformance suite's reading of the rule).
NAME_RULE = re.compile(r"(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?")
DIGEST_RULE = re.compile(r"sha256:[0-9a-f]{64}")
_CLOSING = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


class FrontmatterError(ValueError):
    """A ``SKILL.md`` whose frontmatter is missing or is not a YAML mapping of JSON values."""


class _CoreLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 core-schema scalars, as other SDKs read a
    frontmatter: ``yes``/``on`` stay strings and a date stays a string (YAML 1.1 would make
    them a bool and a ``date``). Both sides of a skill must parse its frontmatter alike, or a
    server's entry and a client's check would disagree on the same file."""


_CoreLoader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def digest_of(data: bytes) -> str:
    """A file's digest as entries carry it: ``sha256:`` and 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def split_frontmatter(text: str) -> tuple[str, str]:
    """The YAML between a ``SKILL.md``'s opening ``---`` line and its closing one, and the
    Markdown after it; ``FrontmatterError`` when there is none. A leading BOM is ignored."""
    text = text.removeprefix("\ufeff")
    opening = re.match(r"---[ \t]*\r?\n", text)
    if opening is None:
        raise FrontmatterError("SKILL.md must begin with a '---' line opening its frontmatter")
    closing = _CLOSING.search(text, opening.end())
    if closing is None:
        raise FrontmatterError("SKILL.md's frontmatter has no closing '---' line")
    return text[opening.end() : closing.start()], text[closing.end() :]


def parse_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """A ``SKILL.md``'s frontmatter (a mapping of JSON values) and its Markdown body."""
    source, body = split_frontmatter(text)
    try:
        value = yaml.load(source, Loader=_CoreLoader)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"SKILL.md's frontmatter is not valid YAML: {exc}") from None
    if not isinstance(value, dict):
        raise FrontmatterError("SKILL.md's frontmatter must be a YAML mapping")
    problem = _not_json(value, "frontmatter")
    if problem is not None:
        raise FrontmatterError(f"SKILL.md's {problem}")
    return value, body


def _not_json(value: Any, where: str) -> str | None:
    """Why ``value`` has no JSON form (None if it has one)."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} holds {value!r}, which JSON cannot"
    if isinstance(value, list):
        for index, item in enumerate(value):
            if (problem := _not_json(item, f"{where}[{index}]")) is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has a key {key!r} that is not a string"
            if (problem := _not_json(item, f"{where}.{key}")) is not None:
                return problem
        return None
    return f"{where} holds a {type(value).__name__}, which JSON cannot"


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a skill name (None if it is one)."""
    if not isinstance(name, str) or not name:
        return "the frontmatter needs a 'name' (a non-empty string)"
    if len(name) > MAX_NAME_LENGTH:
        return f"the name {name!r} is longer than {MAX_NAME_LENGTH} characters"
    if NAME_RULE.fullmatch(name) is None:
        return (
            f"the name {name!r} breaks the naming rules: lowercase letters, digits and single "
            "hyphens, neither first nor last"
        )
    return None


def frontmatter_problems(frontmatter: Mapping[str, Any], folder: str) -> list[str]:
    """Why a frontmatter cannot describe the skill in ``folder`` (its last path segment)."""
    problems = []
    name = frontmatter.get("name")
    if (problem := name_problem(name)) is not None:
        problems.append(problem)
    elif name != folder:
        problems.append(f"the name {name!r} must equal the skill's folder name {folder!r}")
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("the frontmatter needs a 'description' (a non-empty string)")
    elif len(description) > MAX_DESCRIPTION_LENGTH:
        problems.append(f"the description is longer than {MAX_DESCRIPTION_LENGTH} characters")
    return problems


def same_json(a: Any, b: Any) -> bool:
    """JSON equality, where ``true`` is not ``1`` (as Python's ``==`` would have it)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def frontmatter_differences(entry: Mapping[str, Any], found: Mapping[str, Any]) -> list[str]:
    """One line per field where a file's frontmatter differs from its entry's."""
    return [
        f"{key}: the entry says {entry.get(key)!r}, the file {found.get(key)!r}"
        for key in sorted(set(entry) | set(found))
        if key not in entry or key not in found or not same_json(entry[key], found[key])
    ]


def skill_path_of(uri: str) -> str | None:
    """The skill path of a ``SKILL.md`` URI (``skill://acme/refunds/SKILL.md`` ->
    ``acme/refunds``); None for any other URI."""
    scheme, sep, rest = uri.partition("://")
    if not sep or not scheme or not rest.endswith("/" + SKILL_MD):
        return None
    path = rest[: -len(SKILL_MD) - 1]
    return path if path and "" not in path.split("/") else None
