"""The skills extension (SEP-2640) as a server extension: ``skills/list``, ``skills/get``,
``resources/directory/read``, and every skill file as a ``skill://`` resource.

Skills come from a folder of skill folders (rescanned while the server runs, so a change on
disk reaches clients) and from code (:meth:`SkillsExtension.add`). Each ``SKILL.md`` is listed
in ``resources/list`` (its frontmatter's name and description, ``text/markdown``); every file
of a skill is read with ``resources/read`` through one ``skill://{+path}`` template.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from .._engine import InFlight
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INVALID_PARAMS, JSONObject
from ..protocol._types import BlobResourceContents, Resource, TextResourceContents
from ..server._connection import MethodHandler, ResourceNotFound, ServerConnection
from ..server._extensions import Extension, ExtensionHost
from ..server._registry import ResourceEntry, decode_cursor, encode_cursor
from ._catalog import (
    Catalog,
    Skill,
    SkillError,
    SkillFile,
    SkillProblem,
    path_problem,
    scan_directory,
    skill_from_files,
)
from ._wire import (
    DIRECTORY_READ,
    SKILL_MD,
    SKILL_MD_MIME_TYPE,
    SKILL_SCHEME,
    SKILLS_EXTENSION,
    SKILLS_GET,
    SKILLS_LIST,
    digest_of,
)

logger = logging.getLogger("trio_mcp.skills")

#: The template every skill file is read through.
SKILL_TEMPLATE = SKILL_SCHEME + "{+path}"


def _invalid(message: str) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, message)


class SkillsExtension(Extension):
    """Skills for a server (SEP-2640, ``io.modelcontextprotocol/skills``), in both eras.

    ``directory``: a folder of skill folders, each with a ``SKILL.md`` (nested skills and
    organising folders too: ``acme/refunds/SKILL.md`` is the skill ``skill://acme/refunds``).
    It is scanned now, and every ``watch_interval`` seconds while the server runs (None: only
    by :meth:`reload`); digests are computed once per file version. ``prefix`` puts every
    folder skill under ``skill://<prefix>/``. ``page_size``: entries per ``skills/list`` and
    directory page. ``directory_read``: serve ``resources/directory/read`` (declared as
    ``directoryRead``). A folder that breaks a rule is left out and its :class:`SkillProblem`
    logged and kept in :attr:`problems`; with ``strict``, the constructor raises
    :class:`SkillError` instead.
    """

    name = SKILLS_EXTENSION
    handshake_era = True

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        prefix: str = "",
        page_size: int = 100,
        directory_read: bool = True,
        watch_interval: float | None = 1.0,
        strict: bool = False,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be a positive integer")
        if prefix and (problem := path_problem(prefix)) is not None:
            raise ValueError(f"prefix: {problem}")
        if watch_interval is not None and watch_interval <= 0:
            raise ValueError("watch_interval must be positive, or None")
        self.directory = Path(directory) if directory is not None else None
        self.prefix = prefix
        self.page_size = page_size
        self.directory_read = directory_read
        self.watch_interval = watch_interval
        #: Why folders under ``directory`` are not served, as of the last scan.
        self.problems: tuple[SkillProblem, ...] = ()
        self._host: ExtensionHost | None = None
        self._from_disk: list[Skill] = []
        self._from_code: dict[str, Skill] = {}
        self._catalog = Catalog.of(())
        self._listed: set[str] = set()
        self._lock = trio.Lock()
        self._watching = False
        if self.directory is not None:
            if not self.directory.is_dir():
                raise SkillError([SkillProblem(str(self.directory), "is not a folder")])
            skills, problems = scan_directory(self.directory, prefix)
            if strict and problems:
                raise SkillError(problems)
            self._from_disk = skills
            self._said(problems)
        self._swap()
        self._routes: dict[str, MethodHandler] = {SKILLS_LIST: self._list, SKILLS_GET: self._get}
        if directory_read:
            self._routes[DIRECTORY_READ] = self._read_directory

    # -- what it serves ------------------------------------------------------------------------

    @property
    def skills(self) -> tuple[Skill, ...]:
        """The skills served now, sorted by URI."""
        return self._catalog.skills

    def add(self, path: str, files: Mapping[str, str | bytes]) -> Skill:
        """Serve a skill from code: ``path`` (``refunds``, or ``acme/refunds``; its last segment
        is the skill's name) and its files by path (``SKILL.md`` and the rest, text or bytes).
        ``SkillError`` if it breaks a rule; ``ValueError`` if the path is taken."""
        skill = skill_from_files(path, files)
        if skill.uri in self._catalog.by_uri:
            raise ValueError(f"a skill {skill.uri!r} is already served")
        self._from_code[skill.uri] = skill
        self._swap()
        return skill

    def remove(self, path: str) -> None:
        """Stop serving a skill added with :meth:`add`."""
        del self._from_code[f"{SKILL_SCHEME}{path}/{SKILL_MD}"]
        self._swap()

    async def reload(self) -> None:
        """Scan ``directory`` again (in a thread), hashing only files whose ``stat`` changed,
        and serve the result: clients hear ``notifications/resources/list_changed`` when the
        skills or their files changed, and ``notifications/resources/updated`` for a file whose
        content changed. A folder that now breaks a rule is left out (and said), the rest
        still served."""
        if self.directory is None:
            await trio.lowlevel.checkpoint()
            return
        async with self._lock:
            known = {
                f.origin: f for s in self._from_disk for f in s.files if isinstance(f.origin, Path)
            }
            skills, problems = await trio.to_thread.run_sync(
                scan_directory, self.directory, self.prefix, known
            )
            self._from_disk = skills
            self._said(problems)
            self._swap()

    def _said(self, problems: list[SkillProblem]) -> None:
        """Log the problems of a scan that a previous scan did not already report."""
        for problem in problems:
            if problem not in self.problems:
                logger.warning("skill not served: %s", problem)
        self.problems = tuple(problems)

    def _swap(self) -> None:
        """Serve the current skills: one new catalog, the ``SKILL.md`` resources listed, and
        clients told what changed."""
        skills = {s.uri: s for s in self._from_disk}
        for uri, skill in self._from_code.items():
            if uri in skills:
                logger.warning("skill not served from the folder: %s is served from code", uri)
            skills[uri] = skill
        old, new = self._catalog, Catalog.of(skills.values())
        self._catalog = new
        if self._host is None:
            return
        self._list_skill_mds()
        before = {uri: file.digest for uri, (_, file) in old.files.items()}
        after = {uri: file.digest for uri, (_, file) in new.files.items()}
        described = {s.uri: (s.name, s.description) for s in old.skills}
        if before.keys() != after.keys() or described != {
            s.uri: (s.name, s.description) for s in new.skills
        }:
            self._host.notify_list_changed("resources")
        for uri, digest in after.items():
            if before.get(uri, digest) != digest:
                self._host.notify_resource_updated(uri)

    def _list_skill_mds(self) -> None:
        """Each ``SKILL.md`` as a listed resource (the suite's manifest checks read them in
        ``resources/list``), read like every other skill file."""
        assert self._host is not None
        resources = self._host.resources
        wanted = {s.uri: s for s in self._catalog.skills}
        for uri in self._listed - wanted.keys():
            resources.pop(uri, None)
        listed = set()
        for uri, skill in wanted.items():
            entry = resources.get(uri)
            if entry is not None and uri not in self._listed:
                logger.warning("%s is registered as another resource: not listed as a skill", uri)
                continue
            if entry is None or (entry.resource.name, entry.resource.description) != (
                skill.name,
                skill.description,
            ):
                resources[uri] = ResourceEntry(
                    Resource(
                        uri=uri,
                        name=skill.name,
                        description=skill.description,
                        mime_type=SKILL_MD_MIME_TYPE,
                    ),
                    self._reader(uri),
                    None,
                    True,
                    False,
                )
            listed.add(uri)
        self._listed = listed

    def _reader(self, uri: str) -> Any:
        async def read() -> TextResourceContents | BlobResourceContents:
            return await self.read(uri)

        return read

    async def read(self, uri: str) -> TextResourceContents | BlobResourceContents:
        """A skill file's content (text when it is UTF-8, else a blob); ``ResourceNotFound``
        for a URI no skill serves. A file changed on disk since it was hashed is served as it
        is now, and the folder rescanned first, so the entries say what is served."""
        found = self._catalog.files.get(uri)
        if found is None:
            await trio.lowlevel.checkpoint()
            raise ResourceNotFound(uri)
        skill, file = found
        data = await _bytes_of(file)
        if data is None or (len(data), digest_of(data)) != (file.size, file.digest):
            await self.reload()
            found = self._catalog.files.get(uri)
            if found is None:
                raise ResourceNotFound(uri)
            skill, file = found
            data = await _bytes_of(file)
            if data is None:
                raise ResourceNotFound(uri)
        mime_type = SKILL_MD_MIME_TYPE if uri == skill.uri else file.mime_type
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode("ascii")
            return BlobResourceContents(uri=uri, blob=blob, mime_type=mime_type)
        return TextResourceContents(uri=uri, text=text, mime_type=mime_type)

    # -- the seam ------------------------------------------------------------------------------

    def attach(self, host: ExtensionHost) -> None:
        if self._host is not None:
            raise ValueError("a SkillsExtension serves one server")
        self._host = host

        async def path(path: str) -> TextResourceContents | BlobResourceContents:
            return await self.read(SKILL_SCHEME + path)

        host.resource(
            SKILL_TEMPLATE,
            name="skill-file",
            description="A file of a skill this server serves (SEP-2640: skills/list names them)",
            in_thread=False,
        )(path)
        self._list_skill_mds()

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        return {"directoryRead": True} if self.directory_read else {}

    def route(self, method: str, client_capabilities: Mapping[str, Any]) -> MethodHandler | None:
        return self._routes.get(method)

    def hosting(self) -> AbstractAsyncContextManager[None]:
        return self._watch()

    @asynccontextmanager
    async def _watch(self) -> AsyncIterator[None]:
        """Rescan the folder every ``watch_interval`` while the server runs (once, however
        many connections or apps enter this)."""
        if self._watching or self.directory is None or self.watch_interval is None:
            yield
            return
        self._watching = True
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._rescan_forever, self.watch_interval)
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            self._watching = False

    async def _rescan_forever(self, interval: float) -> None:
        while True:
            await trio.sleep(interval)
            try:
                await self.reload()
            except Exception:
                logger.exception("rescanning the skills folder %s failed", self.directory)

    # -- the methods ---------------------------------------------------------------------------

    async def _list(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        skills = self._catalog.skills
        start = _offset(record.params, SKILLS_LIST)
        page = skills[start : start + self.page_size]
        result: JSONObject = {"skills": [s.entry for s in page]}
        if start + self.page_size < len(skills):
            result["nextCursor"] = encode_cursor(start + self.page_size)
        return _hinted(result, conn, record)

    async def _get(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        uri = record.params.get("uri")
        if not isinstance(uri, str):
            raise _invalid("Invalid params: skills/get needs a string 'uri'")
        skill = self._catalog.by_uri.get(uri)
        if skill is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown skill: {uri}", {"uri": uri})
        return _hinted({"skill": skill.entry}, conn, record)

    async def _read_directory(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        await trio.lowlevel.checkpoint()
        uri = record.params.get("uri")
        if not isinstance(uri, str):
            raise _invalid(f"Invalid params: {DIRECTORY_READ} needs a string 'uri'")
        children = self._catalog.directories.get(uri)
        if children is None:
            raise ProtocolError(INVALID_PARAMS, f"Not a directory: {uri}", {"uri": uri})
        start = _offset(record.params, DIRECTORY_READ)
        result: JSONObject = {"resources": list(children[start : start + self.page_size])}
        if start + self.page_size < len(children):
            result["nextCursor"] = encode_cursor(start + self.page_size)
        return _hinted(result, conn, record)


def _offset(params: JSONObject, method: str) -> int:
    cursor = params.get("cursor")
    if cursor is None:
        return 0
    offset = decode_cursor(cursor)
    if offset is None:
        raise _invalid(f"Invalid params: {method} got a cursor it did not issue")
    return offset


def _hinted(result: JSONObject, conn: ServerConnection, record: InFlight) -> JSONObject:
    """Cache hints, as on the core's list results: always in the modern era (the suite checks
    ``skills/get`` for them too), in the handshake era when the server configured them."""
    hints = conn.cache_hints
    if record.envelope is not None or hints.explicit:
        result["ttlMs"] = hints.ttl_ms
        result["cacheScope"] = hints.cache_scope
    return result


async def _bytes_of(file: SkillFile) -> bytes | None:
    """A file's bytes as they are now; None if it is gone."""
    if isinstance(file.origin, bytes):
        await trio.lowlevel.checkpoint()
        return file.origin
    try:
        return await trio.to_thread.run_sync(file.origin.read_bytes)
    except OSError:
        return None
