"""Skills as a server holds them: each skill's files with their sizes and digests, computed
once (from a folder of skill folders, or from code), and the catalog a server answers from.

A file's digest is computed when it is first seen and kept while its ``stat`` (inode,
modification time, size) stays the same; a rescan hashes only what changed. A skill that
breaks a rule (no ``SKILL.md``, a malformed frontmatter, a bad name, over the limits) is left
out with a :class:`SkillProblem` saying why; the others are served.
"""

from __future__ import annotations

import mimetypes
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..protocol._errors import MCPError
from ..protocol._jsonrpc import JSONObject
from ._wire import (
    DIRECTORY_MIME_TYPE,
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_MD,
    SKILL_SCHEME,
    FrontmatterError,
    digest_of,
    frontmatter_problems,
    parse_frontmatter,
)

#: A path segment of a skill (its prefix and folder): what a URI carries unescaped.
_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@-]+")
_TEXT_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain"}


@attrs.frozen
class SkillProblem:
    """Why a skill (or a folder meant to hold one) is not served: ``where`` names the folder,
    file or skill path."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class SkillError(MCPError):
    """A skill that cannot be served: its :attr:`problems` say why, each naming where."""

    def __init__(self, problems: Iterable[SkillProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems) or "invalid skill")


@attrs.frozen
class SkillFile:
    """One file of a skill: its path under the skill's folder (``/``-separated), its size and
    digest, and where its bytes are (a file on disk, with the ``stat`` they were hashed at, or
    bytes held in memory)."""

    path: str
    size: int
    digest: str
    mime_type: str
    origin: Path | bytes = attrs.field(repr=False)
    stamp: tuple[int, int, int] | None = None


@attrs.frozen
class Skill:
    """One skill: its path (``acme/refunds``; the last segment is its name), the frontmatter of
    its ``SKILL.md``, and every file of it (``SKILL.md`` included), sorted by path."""

    path: str
    frontmatter: Mapping[str, Any]
    files: tuple[SkillFile, ...]
    #: The ``skills/list`` entry, built once.
    entry: JSONObject = attrs.field(eq=False, repr=False)

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))

    @property
    def root_uri(self) -> str:
        return SKILL_SCHEME + self.path

    @property
    def uri(self) -> str:
        """Its ``SKILL.md``'s URI: the skill's identity on the wire."""
        return f"{self.root_uri}/{SKILL_MD}"

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def file_uri(self, path: str) -> str:
        return f"{self.root_uri}/{path}"


def mime_type_of(path: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _TEXT_TYPES:
        return _TEXT_TYPES[suffix]
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a skill path (None if it can)."""
    segments = path.split("/")
    if not path or any(s in ("", ".", "..") or not _SEGMENT.fullmatch(s) for s in segments):
        return (
            f"the skill path {path!r} must be '/'-separated segments of letters, digits and "
            "URI-safe punctuation"
        )
    return None


def make_skill(path: str, files: Iterable[SkillFile], skill_md: bytes) -> Skill:
    """A skill from its checked parts; ``SkillError`` naming every rule it breaks."""
    listed = sorted(files, key=lambda f: f.path)
    problems = []
    if (problem := path_problem(path)) is not None:
        problems.append(problem)
    frontmatter: dict[str, Any] = {}
    try:
        frontmatter, _ = parse_frontmatter(skill_md.decode("utf-8"))
    except UnicodeDecodeError:
        problems.append(f"{SKILL_MD} is not UTF-8 text")
    except FrontmatterError as exc:
        problems.append(str(exc))
    else:
        problems.extend(frontmatter_problems(frontmatter, path.rpartition("/")[2]))
    problems.extend(_limit_problems(len(listed), sum(f.size for f in listed)))
    if problems:
        raise SkillError(SkillProblem(path, p) for p in problems)
    root = SKILL_SCHEME + path
    entry: JSONObject = {
        "uri": f"{root}/{SKILL_MD}",
        "frontmatter": frontmatter,
        "resources": [
            {"uri": f"{root}/{f.path}", "digest": f.digest, "size": f.size} for f in listed
        ],
    }
    return Skill(path, frontmatter, tuple(listed), entry)


def _limit_problems(count: int, size: int) -> list[str]:
    problems = []
    if count > MAX_SKILL_FILES:
        problems.append(
            f"the skill has {count} files, over the limit of {MAX_SKILL_FILES} per skill"
        )
    if size > MAX_SKILL_BYTES:
        problems.append(
            f"the skill's files hold {size} bytes, over the limit of {MAX_SKILL_BYTES} "
            "(16 MiB) per skill"
        )
    return problems


def skill_from_files(path: str, files: Mapping[str, str | bytes]) -> Skill:
    """A skill from code: its path and its files by path under its folder (``SKILL.md``,
    ``references/GUIDE.md``), text or bytes. ``SkillError`` if it breaks a rule."""
    held: list[SkillFile] = []
    bad = []
    for name, content in files.items():
        data = content.encode() if isinstance(content, str) else bytes(content)
        parts = name.split("/")
        if any(p in ("", ".", "..") for p in parts) or "\\" in name:
            bad.append(SkillProblem(f"{path}/{name}", "a file path must stay inside the skill"))
            continue
        held.append(SkillFile(name, len(data), digest_of(data), mime_type_of(name), data))
    skill_md = files.get(SKILL_MD)
    if skill_md is None:
        bad.append(SkillProblem(path, f"a skill needs a {SKILL_MD}"))
    if bad:
        raise SkillError(bad)
    assert skill_md is not None
    return make_skill(path, held, skill_md.encode() if isinstance(skill_md, str) else skill_md)


# -- a folder of skill folders ---------------------------------------------------------------------


def _stamp(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def scan_directory(
    root: Path, prefix: str = "", known: Mapping[Path, SkillFile] | None = None
) -> tuple[list[Skill], list[SkillProblem]]:
    """Every skill under ``root``: each folder holding a ``SKILL.md`` is one (a skill's own
    subfolders may hold nested skills, listed on their own too). Names starting with ``.``
    are skipped; symbolic links and other special files refuse the skill holding them.
    ``known``: the files of a previous scan, whose digests are kept while their ``stat`` is
    unchanged. Blocking: run it in a thread from async code."""
    known = known or {}
    skills: list[Skill] = []
    problems: list[SkillProblem] = []
    base = [prefix] if prefix else []

    def visit(folder: Path, segments: list[str]) -> bool:
        """Whether a skill was found in or under ``folder``."""
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            problems.append(SkillProblem("/".join(segments) or str(folder), _os_error(exc)))
            return False
        names = {e.name: e for e in children if not e.name.startswith(".")}
        found = False
        if segments and SKILL_MD in names:
            skill = _read_skill(folder, "/".join(base + segments), known, problems)
            if skill is not None:
                skills.append(skill)
            found = True
        for name, child in names.items():
            if child.is_dir(follow_symlinks=False) and visit(Path(child.path), [*segments, name]):
                found = True
        if not found and segments and len(segments) == 1:
            problems.append(SkillProblem(segments[0], f"the folder has no {SKILL_MD}"))
        return found

    visit(root, [])
    return skills, problems


def _os_error(exc: OSError) -> str:
    return f"could not be read ({exc.strerror or exc})"


def _read_skill(
    folder: Path, path: str, known: Mapping[Path, SkillFile], problems: list[SkillProblem]
) -> Skill | None:
    files: list[SkillFile] = []
    try:
        found = _skill_files(folder, path, problems)
        if found is None:
            return None
        total = sum(stat.st_size for _, _, stat in found)
        limits = _limit_problems(len(found), total)
        if limits:
            problems.extend(SkillProblem(path, p) for p in limits)
            return None
        skill_md = b""
        for relative, file, stat in found:
            previous = known.get(file)
            if previous is not None and previous.stamp == _stamp(stat):
                files.append(previous)
                if relative == SKILL_MD:
                    skill_md = file.read_bytes()
                continue
            data = file.read_bytes()
            if relative == SKILL_MD:
                skill_md = data
            # The stamp taken before reading: a write during the read shows next scan.
            files.append(
                SkillFile(
                    relative, len(data), digest_of(data), mime_type_of(relative), file, _stamp(stat)
                )
            )
        return make_skill(path, files, skill_md)
    except SkillError as exc:
        problems.extend(exc.problems)
    except OSError as exc:
        problems.append(SkillProblem(path, _os_error(exc)))
    return None


def _skill_files(
    folder: Path, path: str, problems: list[SkillProblem]
) -> list[tuple[str, Path, os.stat_result]] | None:
    """Every regular file under a skill's folder: its relative path, path and ``stat``; None
    (with the problem said) when a special file or too many files make it unservable."""
    found: list[tuple[str, Path, os.stat_result]] = []
    pending = [(folder, "")]
    while pending:
        current, relative = pending.pop()
        for entry in sorted(os.scandir(current), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            name = f"{relative}{entry.name}"
            if entry.is_symlink() or not (entry.is_dir() or entry.is_file()):
                problems.append(
                    SkillProblem(
                        f"{path}/{name}",
                        "symbolic links and special files are not served: the skill is left out",
                    )
                )
                return None
            if entry.is_dir():
                pending.append((Path(entry.path), name + "/"))
                continue
            found.append((name, Path(entry.path), entry.stat()))
            if len(found) > MAX_SKILL_FILES:
                problems.append(
                    SkillProblem(
                        path,
                        f"the skill has more than {MAX_SKILL_FILES} files, the limit per skill",
                    )
                )
                return None
    return found


# -- the catalog a server answers from -------------------------------------------------------------


@attrs.frozen
class Catalog:
    """The skills served now, and the indexes the methods read: a snapshot, replaced whole
    when anything changes (a request never sees half a change)."""

    skills: tuple[Skill, ...]
    by_uri: Mapping[str, Skill]
    #: Every file's URI -> its skill and the file (a nested skill's files belong to both).
    files: Mapping[str, tuple[Skill, SkillFile]]
    #: Every directory's URI (skill roots, their subfolders, the folders of their paths) ->
    #: its direct children as directory-read resources, sorted by URI.
    directories: Mapping[str, tuple[JSONObject, ...]]

    @classmethod
    def of(cls, skills: Iterable[Skill]) -> Catalog:
        ordered = tuple(sorted(skills, key=lambda s: s.uri))
        files: dict[str, tuple[Skill, SkillFile]] = {}
        children: dict[str, dict[str, JSONObject]] = {}
        for skill in ordered:
            segments = skill.path.split("/")
            for depth in range(1, len(segments)):
                parent = SKILL_SCHEME + "/".join(segments[:depth])
                _add_directory(children, parent, segments[depth])
            children.setdefault(skill.root_uri, {})
            for file in skill.files:
                uri = skill.file_uri(file.path)
                files.setdefault(uri, (skill, file))
                parts = file.path.split("/")
                for depth in range(len(parts) - 1):
                    parent = "/".join([skill.root_uri, *parts[:depth]])
                    _add_directory(children, parent, parts[depth])
                parent = "/".join([skill.root_uri, *parts[:-1]])
                children.setdefault(parent, {})[uri] = {
                    "uri": uri,
                    "name": parts[-1],
                    "mimeType": file.mime_type,
                    "size": file.size,
                }
        return cls(
            ordered,
            {s.uri: s for s in ordered},
            files,
            {uri: tuple(v for _, v in sorted(kids.items())) for uri, kids in children.items()},
        )


def _add_directory(children: dict[str, dict[str, JSONObject]], parent: str, name: str) -> None:
    uri = f"{parent}/{name}"
    children.setdefault(parent, {})[uri] = {
        "uri": uri,
        "name": name,
        "mimeType": DIRECTORY_MIME_TYPE,
    }
    children.setdefault(uri, {})
