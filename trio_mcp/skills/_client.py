"""The skills extension's client half (SEP-2640): list and get a server's skills, and read
their files only when asked, each checked against its entry before it is used.

Nothing is fetched ahead of need: listing reads only ``skills/list``; :meth:`SkillsClient.load`
reads a skill's ``SKILL.md``; :meth:`SkillsClient.read` one supporting file. Every read is
checked against the entry held (listed, then size, then digest; for ``SKILL.md`` the
frontmatter too), and content that fails is never returned: :class:`SkillVerificationError`
names the reason.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ..client._client import Client
from ..protocol._errors import MCPError
from ..protocol._jsonrpc import JSONObject
from ..protocol._types import BlobResourceContents, TextResourceContents
from ._wire import (
    DIGEST_RULE,
    DIRECTORY_READ,
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    SKILL_MD,
    SKILLS_EXTENSION,
    SKILLS_GET,
    SKILLS_LIST,
    FrontmatterError,
    digest_of,
    frontmatter_differences,
    parse_frontmatter,
    skill_path_of,
)

#: Why a skill or one of its files was refused: not in the entry, its size or digest not the
#: entry's, its frontmatter not the entry's, the entry over the per-skill limits, or an entry
#: (or an answer) that breaks the extension's rules.
Reason = Literal["unlisted", "size", "digest", "frontmatter", "limits", "invalid"]
#: How many ``skills/list`` pages one listing follows before it stops.
MAX_PAGES = 100


class SkillVerificationError(MCPError):
    """A skill file (or a skill) failed verification: its content must not be used. ``reason``
    says which check, ``uri`` which file, ``differences`` (for ``frontmatter``) one line per
    field that differs."""

    def __init__(
        self, reason: Reason, uri: str, message: str, differences: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.uri = uri
        self.differences = differences


@attrs.frozen
class SkillResource:
    """One file as a skill's entry lists it."""

    uri: str
    digest: str
    size: int


@attrs.frozen
class SkillEntry:
    """A skill as the server describes it (``skills/list``, ``skills/get``): its ``SKILL.md``
    URI, its frontmatter, and its files (None: ``"dynamic"``, no digests to check)."""

    uri: str
    frontmatter: Mapping[str, Any]
    resources: tuple[SkillResource, ...] | None

    @property
    def path(self) -> str:
        """The skill path (``acme/refunds``): the URI between its scheme and ``/SKILL.md``."""
        return skill_path_of(self.uri) or ""

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))

    @property
    def root_uri(self) -> str:
        return self.uri[: -len(SKILL_MD) - 1]

    @property
    def dynamic(self) -> bool:
        return self.resources is None

    def resolve(self, ref: str) -> str:
        """The URI of a file of this skill: ``ref`` is a path under its folder
        (``references/GUIDE.md``) or a URI."""
        return ref if "://" in ref else f"{self.root_uri}/{ref.lstrip('/')}"

    @classmethod
    def from_wire(cls, raw: object) -> SkillEntry:
        """An entry checked against the extension's rules; ``SkillVerificationError``
        (``invalid``) if it breaks one, so it is never loaded."""
        uri = raw.get("uri") if isinstance(raw, dict) else None
        where = uri if isinstance(uri, str) else "(an entry without a uri)"

        def invalid(why: str) -> SkillVerificationError:
            return SkillVerificationError("invalid", where, f"invalid skill entry {where}: {why}")

        if not isinstance(raw, dict) or not isinstance(uri, str):
            raise invalid("it needs a string 'uri'")
        path = skill_path_of(uri)
        if path is None:
            raise invalid("its uri must name a SKILL.md under a skill path")
        frontmatter = raw.get("frontmatter")
        if not isinstance(frontmatter, dict):
            raise invalid("it needs a 'frontmatter' object")
        if frontmatter.get("name") != path.rpartition("/")[2]:
            raise invalid("its frontmatter's name must equal the last segment of its path")
        listed = raw.get("resources")
        if listed == "dynamic":
            return cls(uri, frontmatter, None)
        if not isinstance(listed, list):
            raise invalid("'resources' must be an array or \"dynamic\"")
        resources = []
        for item in listed:
            if not isinstance(item, dict):
                raise invalid("each resource must be an object")
            file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
            if not isinstance(file_uri, str) or not (
                file_uri == uri or file_uri.startswith(uri[: -len(SKILL_MD)])
            ):
                raise invalid(f"the resource {file_uri!r} is not inside the skill")
            if not isinstance(digest, str) or DIGEST_RULE.fullmatch(digest) is None:
                raise invalid(f"the resource {file_uri} has no sha256 digest")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise invalid(f"the resource {file_uri} has no size")
            resources.append(SkillResource(file_uri, digest, size))
        uris = [r.uri for r in resources]
        if uri not in uris or len(set(uris)) != len(uris):
            raise invalid("'resources' must list every file once, its SKILL.md included")
        return cls(uri, frontmatter, tuple(resources))


@attrs.frozen
class SkillContent:
    """A file of a skill as read and checked: its bytes exactly as the digest covers them,
    its text when the server sent text. ``verified`` is False only for a ``"dynamic"``
    skill, whose files have no digest to check."""

    uri: str
    data: bytes = attrs.field(repr=False)
    text: str | None = attrs.field(repr=False)
    mime_type: str | None
    verified: bool


@attrs.frozen
class LoadedSkill:
    """A skill whose ``SKILL.md`` was read and checked: its entry (which files later reads
    may name), the frontmatter (equal to the entry's) and the Markdown body."""

    entry: SkillEntry
    skill_md: SkillContent
    frontmatter: Mapping[str, Any]
    body: str


class SkillsClient:
    """A server's skills, on a connected :class:`~trio_mcp.Client`.

    >>> skills = SkillsClient(client)                # doctest: +SKIP
    >>> entries = await skills.list_skills()               # skills/list only; no file is read
    >>> loaded = await skills.load(entries[0])       # SKILL.md, read and checked
    >>> guide = await skills.read(entries[0], "references/GUIDE.md")

    For a model, :meth:`describe` is an index of the skills (from the listing alone) and
    :meth:`read_skill` / :meth:`read_skill_file` load one by name, verified, as text.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        #: The entries a listing refused (``invalid``), with the reason; never loaded.
        self.invalid: list[SkillVerificationError] = []
        self._listing: list[SkillEntry] | None = None

    @property
    def capability(self) -> JSONObject | None:
        """The server's ``io.modelcontextprotocol/skills`` settings; None: not declared."""
        extensions = self.client.server_capabilities.extra.get("extensions")
        found = extensions.get(SKILLS_EXTENSION) if isinstance(extensions, dict) else None
        return found if isinstance(found, dict) else None

    @property
    def supported(self) -> bool:
        return self.capability is not None

    @property
    def directory_read(self) -> bool:
        """Whether the server serves ``resources/directory/read``."""
        return bool((self.capability or {}).get("directoryRead") is True)

    # -- the listing ---------------------------------------------------------------------------

    async def list_skills(self) -> list[SkillEntry]:
        """Every skill the server lists (every page); entries that break the rules are left
        out, into :attr:`invalid`. Empty when the server does not declare the extension."""
        if not self.supported:
            self._listing = []
            return []
        entries: list[SkillEntry] = []
        invalid: list[SkillVerificationError] = []
        seen: set[str] = set()
        cursor: str | None = None
        cursors: set[str] = set()
        for _ in range(MAX_PAGES):
            params: JSONObject = {} if cursor is None else {"cursor": cursor}
            page = await self.client.request(SKILLS_LIST, params)
            raw = page.get("skills")
            if not isinstance(raw, list):
                raise MCPError("skills/list answered without a 'skills' array")
            for item in raw:
                try:
                    entry = SkillEntry.from_wire(item)
                except SkillVerificationError as exc:
                    invalid.append(exc)
                    continue
                if entry.uri in seen:
                    invalid.append(
                        SkillVerificationError(
                            "invalid", entry.uri, f"{entry.uri} is listed more than once"
                        )
                    )
                    continue
                seen.add(entry.uri)
                entries.append(entry)
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor or cursor in cursors:
                break
            cursors.add(cursor)
        self.invalid = invalid
        self._listing = entries
        return entries

    async def get_skill(self, uri: str) -> SkillEntry:
        """One skill by its ``SKILL.md`` URI, listed or not (``skills/get``): the entry the
        server holds now. ``SkillVerificationError`` (``invalid``) for an answer that is not
        that skill's valid entry."""
        result = await self.client.request(SKILLS_GET, {"uri": uri})
        entry = SkillEntry.from_wire(result.get("skill"))
        if entry.uri != uri:
            raise SkillVerificationError(
                "invalid", uri, f"skills/get for {uri} answered with {entry.uri}"
            )
        return entry

    async def read_directory(self, uri: str) -> list[JSONObject]:
        """The direct children of a skill directory (every page), as the server lists them;
        needs :attr:`directory_read`. A listed child is not part of a skill unless the skill's
        entry lists it too: read files through :meth:`read`."""
        if not self.directory_read:
            raise MCPError("the server does not serve resources/directory/read")
        found: list[JSONObject] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params: JSONObject = {"uri": uri} if cursor is None else {"uri": uri, "cursor": cursor}
            page = await self.client.request(DIRECTORY_READ, params)
            items = page.get("resources")
            if not isinstance(items, list):
                raise MCPError(f"{DIRECTORY_READ} answered without a 'resources' array")
            found.extend(item for item in items if isinstance(item, dict))
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return found

    # -- reading, verified ---------------------------------------------------------------------

    async def load(self, skill: SkillEntry) -> LoadedSkill:
        """Read a skill's ``SKILL.md`` and check it (size, digest, then the frontmatter against
        the entry's); ``SkillVerificationError`` if any check fails, and nothing else of the
        skill is read."""
        _check_limits(skill)
        content = await self._read_checked(skill, skill.uri)
        if content.text is None:
            raise SkillVerificationError("invalid", skill.uri, f"{skill.uri} was not sent as text")
        try:
            frontmatter, body = parse_frontmatter(content.text)
        except FrontmatterError as exc:
            raise SkillVerificationError(
                "frontmatter", skill.uri, f"{skill.uri} failed verification: {exc}"
            ) from None
        differences = tuple(frontmatter_differences(skill.frontmatter, frontmatter))
        if differences:
            raise SkillVerificationError(
                "frontmatter",
                skill.uri,
                f"{skill.uri} failed verification: its frontmatter differs from the entry's "
                f"({'; '.join(differences)})",
                differences,
            )
        return LoadedSkill(skill, content, frontmatter, body)

    async def read(self, skill: SkillEntry, ref: str) -> SkillContent:
        """Read one file of a skill (``ref``: a path under its folder, or a URI) and check it
        against the entry: listed, then size, then digest. ``SkillVerificationError`` if a
        check fails."""
        _check_limits(skill)
        return await self._read_checked(skill, skill.resolve(ref))

    async def _read_checked(self, skill: SkillEntry, uri: str) -> SkillContent:
        listed = None
        if skill.resources is not None:
            listed = next((r for r in skill.resources if r.uri == uri), None)
            if listed is None:
                raise SkillVerificationError(
                    "unlisted", uri, f"{uri} is not a file of the skill {skill.uri}"
                )
        result = await self.client.read_resource(uri)
        if not result.contents:
            raise SkillVerificationError("invalid", uri, f"{uri} was read with no contents")
        first = result.contents[0]
        if isinstance(first, TextResourceContents):
            text: str | None = first.text
            data = first.text.encode("utf-8")
        elif isinstance(first, BlobResourceContents):
            text = None
            try:
                data = base64.b64decode(first.blob, validate=True)
            except ValueError:
                raise SkillVerificationError(
                    "invalid", uri, f"{uri} was read with a blob that is not base64"
                ) from None
        else:  # pragma: no cover - the two kinds of contents there are
            raise SkillVerificationError("invalid", uri, f"{uri} was read with no contents")
        if listed is None:
            if len(data) > MAX_SKILL_BYTES:
                raise SkillVerificationError(
                    "limits", uri, f"{uri} holds {len(data)} bytes, over {MAX_SKILL_BYTES}"
                )
            return SkillContent(uri, data, text, first.mime_type, verified=False)
        if len(data) != listed.size:
            raise SkillVerificationError(
                "size",
                uri,
                f"{uri} failed verification: {len(data)} bytes, the entry says {listed.size}",
            )
        if digest_of(data) != listed.digest:
            raise SkillVerificationError(
                "digest",
                uri,
                f"{uri} failed verification: its sha256 digest is not the entry's",
            )
        return SkillContent(uri, data, text, first.mime_type, verified=True)

    # -- for a model ---------------------------------------------------------------------------

    async def describe(self) -> str:
        """An index of the server's skills for a model's context: one line each, its path (what
        :meth:`read_skill` takes), and description. From the listing alone: no file is read."""
        entries = await self._entries()
        if not entries:
            return "No skills."
        return "\n".join(f"- {e.path}: {e.description}" for e in entries)

    async def read_skill(self, name: str) -> str:
        """A skill's verified ``SKILL.md``, by its path or (if no other skill has it) its name:
        what a model's "read skill" tool returns."""
        loaded = await self.load(await self.find(name))
        assert loaded.skill_md.text is not None
        return loaded.skill_md.text

    async def read_skill_file(self, name: str, path: str) -> str:
        """One verified file of a skill (by path or name, as :meth:`read_skill`) as text."""
        content = await self.read(await self.find(name), path)
        if content.text is None:
            raise MCPError(f"{content.uri} is binary ({content.mime_type}), not text")
        return content.text

    async def find(self, name: str) -> SkillEntry:
        """The listed skill whose path is ``name``, else the one skill of that name (two
        skills of one name: give the path)."""
        entries = await self._entries()
        for entry in entries:
            if entry.path == name:
                return entry
        named = [e for e in entries if e.name == name]
        if len(named) == 1:
            return named[0]
        if named:
            paths = ", ".join(e.path for e in named)
            raise MCPError(f"several skills are named {name!r} ({paths}): give the path")
        raise MCPError(f"no skill {name!r} is listed")

    async def _entries(self) -> list[SkillEntry]:
        if self._listing is None:
            return await self.list_skills()
        return self._listing


def _check_limits(skill: SkillEntry) -> None:
    if skill.resources is None:
        return
    count, size = len(skill.resources), sum(r.size for r in skill.resources)
    if count > MAX_SKILL_FILES or size > MAX_SKILL_BYTES:
        raise SkillVerificationError(
            "limits",
            skill.uri,
            f"the skill {skill.uri} lists {count} files of {size} bytes, over the limits "
            f"({MAX_SKILL_FILES} files, {MAX_SKILL_BYTES} bytes)",
        )
