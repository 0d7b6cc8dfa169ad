"""The skills extension's server half: what it serves from a folder and from code, on the wire
of both eras and over HTTP, and how it keeps its entries right when files change."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import ProtocolError, Server, open_client
from trio_mcp.skills import SkillsExtension
from trio_mcp.testing import http_client, http_server

ERAS = ["legacy", "modern"]

PDF = """---
name: pdf-processing
description: Extract text and fill forms in PDF files.
license: Apache-2.0
on: yes
released: 2024-01-02
metadata:
  version: "1.0"
---
# PDF processing

Read [the forms guide](references/FORMS.md).
"""


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write(root: Path, path: str, content: str | bytes) -> Path:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        target.write_text(content)
    else:
        target.write_bytes(content)
    return target


def skill_md(name: str, description: str = "Does a thing.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write(root, "pdf-processing/SKILL.md", PDF)
    write(root, "pdf-processing/references/FORMS.md", "# Forms\n")
    write(root, "pdf-processing/assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\xff")
    write(root, "acme/billing/refunds/SKILL.md", skill_md("refunds", "Refund an order."))
    return root


def skills_server(folder: Path, **options: Any) -> tuple[Server, SkillsExtension]:
    skills = SkillsExtension(folder, watch_interval=None, **options)
    return Server("skills", extensions=[skills]), skills


@pytest.mark.parametrize("mode", ERAS)
async def test_the_extension_is_declared_with_directory_read_and_resources(
    folder: Path, mode: str
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode=mode) as client:
        caps = client.server_capabilities
        assert caps.extra["extensions"] == {
            "io.modelcontextprotocol/skills": {"directoryRead": True}
        }
        assert caps.resources is not None


@pytest.mark.parametrize("mode", ERAS)
async def test_skills_list_gives_each_skill_with_its_frontmatter_digests_and_sizes(
    folder: Path, mode: str
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode=mode) as client:
        result = await client.request("skills/list", {})
    by_uri = {entry["uri"]: entry for entry in result["skills"]}
    assert sorted(by_uri) == [
        "skill://acme/billing/refunds/SKILL.md",
        "skill://pdf-processing/SKILL.md",
    ]
    pdf = by_uri["skill://pdf-processing/SKILL.md"]
    # The frontmatter verbatim, read as YAML 1.2's core schema reads it (as other SDKs do).
    assert pdf["frontmatter"] == {
        "name": "pdf-processing",
        "description": "Extract text and fill forms in PDF files.",
        "license": "Apache-2.0",
        "on": "yes",
        "released": "2024-01-02",
        "metadata": {"version": "1.0"},
    }
    files = {
        "SKILL.md": PDF.encode(),
        "references/FORMS.md": b"# Forms\n",
        "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\xff",
    }
    assert {r["uri"]: (r["digest"], r["size"]) for r in pdf["resources"]} == {
        f"skill://pdf-processing/{path}": (digest(data), len(data)) for path, data in files.items()
    }
    assert len(pdf["resources"]) == len(files)
    # Cache hints: always in the modern era; in the handshake era only when configured.
    assert ("ttlMs" in result, "cacheScope" in result) == ((mode == "modern",) * 2)


@pytest.mark.parametrize("mode", ERAS)
async def test_skills_get_answers_the_entry_with_cache_hints_and_refuses_an_unknown_uri(
    folder: Path, mode: str
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode=mode) as client:
        listed = (await client.request("skills/list", {}))["skills"]
        got = await client.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
        with pytest.raises(ProtocolError) as unknown:
            await client.request("skills/get", {"uri": "skill://nope/SKILL.md"})
    assert got["skill"] == next(e for e in listed if e["uri"].endswith("pdf-processing/SKILL.md"))
    assert "nextCursor" not in got
    assert ("ttlMs" in got) == (mode == "modern")
    assert unknown.value.code == -32602


async def test_cache_hints_are_sent_in_the_handshake_era_when_configured(folder: Path) -> None:
    skills = SkillsExtension(folder, watch_interval=None)
    server = Server("skills", ttl_ms=60_000, cache_scope="public", extensions=[skills])
    async with open_client(server, mode="legacy") as client:
        listed = await client.request("skills/list", {})
        got = await client.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
    assert (listed["ttlMs"], listed["cacheScope"]) == (60_000, "public")
    assert (got["ttlMs"], got["cacheScope"]) == (60_000, "public")


async def test_skills_list_pages_never_split_an_entry(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        write(tmp_path, f"{name}/SKILL.md", skill_md(name))
    server, _ = skills_server(tmp_path, page_size=2)
    async with open_client(server, mode="modern") as client:
        first = await client.request("skills/list", {})
        second = await client.request("skills/list", {"cursor": first["nextCursor"]})
        with pytest.raises(ProtocolError) as bad:
            await client.request("skills/list", {"cursor": "not-ours"})
    assert [e["frontmatter"]["name"] for e in first["skills"]] == ["alpha", "beta"]
    assert [e["frontmatter"]["name"] for e in second["skills"]] == ["gamma"]
    assert "nextCursor" not in second
    assert bad.value.code == -32602


@pytest.mark.parametrize("mode", ERAS)
async def test_every_file_is_a_skill_resource_and_each_skill_md_is_listed(
    folder: Path, mode: str
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode=mode) as client:
        listed = {r.uri: r for r in await client.list_resources()}
        skill_md = await client.read_resource("skill://pdf-processing/SKILL.md")
        forms = await client.read_resource("skill://pdf-processing/references/FORMS.md")
        logo = await client.read_resource("skill://pdf-processing/assets/logo.png")
        with pytest.raises(ProtocolError):
            await client.read_resource("skill://pdf-processing/missing.md")
    pdf = listed["skill://pdf-processing/SKILL.md"]
    assert (pdf.name, pdf.description, pdf.mime_type) == (
        "pdf-processing",
        "Extract text and fill forms in PDF files.",
        "text/markdown",
    )
    [text] = skill_md.contents
    assert (text.text, text.mime_type) == (PDF, "text/markdown")  # type: ignore[union-attr]
    assert forms.contents[0].text == "# Forms\n"  # type: ignore[union-attr]
    [blob] = logo.contents
    assert blob.mime_type == "image/png" and hasattr(blob, "blob")


@pytest.mark.parametrize("mode", ERAS)
async def test_directory_read_gives_direct_children_and_refuses_a_file(
    folder: Path, mode: str
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode=mode) as client:
        root = await client.request("resources/directory/read", {"uri": "skill://pdf-processing"})
        refs = await client.request(
            "resources/directory/read", {"uri": "skill://pdf-processing/references"}
        )
        prefix = await client.request("resources/directory/read", {"uri": "skill://acme"})
        with pytest.raises(ProtocolError) as a_file:
            await client.request(
                "resources/directory/read", {"uri": "skill://pdf-processing/SKILL.md"}
            )
    assert [(r["uri"], r["mimeType"]) for r in root["resources"]] == [
        ("skill://pdf-processing/SKILL.md", "text/markdown"),
        ("skill://pdf-processing/assets", "inode/directory"),
        ("skill://pdf-processing/references", "inode/directory"),
    ]
    assert [r["uri"] for r in refs["resources"]] == ["skill://pdf-processing/references/FORMS.md"]
    assert [r["uri"] for r in prefix["resources"]] == ["skill://acme/billing"]
    assert a_file.value.code == -32602


async def test_without_directory_read_the_method_is_not_served(folder: Path) -> None:
    server, _ = skills_server(folder, directory_read=False)
    async with open_client(server, mode="modern") as client:
        assert client.server_capabilities.extra["extensions"] == {
            "io.modelcontextprotocol/skills": {}
        }
        with pytest.raises(ProtocolError) as refused:
            await client.request("resources/directory/read", {"uri": "skill://pdf-processing"})
    assert refused.value.code == -32601


async def test_skills_are_served_over_streamable_http_in_both_eras(folder: Path) -> None:
    server, _ = skills_server(folder)
    async with http_server(server) as running:
        for mode in ERAS:
            async with http_client(running, mode=mode) as client:
                listed = await client.request("skills/list", {})
                read = await client.read_resource("skill://acme/billing/refunds/SKILL.md")
                assert len(listed["skills"]) == 2
                assert read.contents[0].text == skill_md("refunds", "Refund an order.")  # type: ignore[union-attr]


async def test_a_skill_from_code_is_served_beside_the_folder(folder: Path) -> None:
    server, skills = skills_server(folder)
    skills.add("tools/greeter", {"SKILL.md": skill_md("greeter"), "notes.txt": b"hi"})
    async with open_client(server, mode="modern") as client:
        got = await client.request("skills/get", {"uri": "skill://tools/greeter/SKILL.md"})
        notes = await client.read_resource("skill://tools/greeter/notes.txt")
    assert {r["uri"] for r in got["skill"]["resources"]} == {
        "skill://tools/greeter/SKILL.md",
        "skill://tools/greeter/notes.txt",
    }
    assert notes.contents[0].text == "hi"  # type: ignore[union-attr]


class Notes:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append((method, params))


async def test_a_changed_file_is_rehashed_alone_and_clients_are_told(folder: Path) -> None:
    server, skills = skills_server(folder)
    notes = Notes()
    before = {f.path: f for f in skills.skills[1].files}
    async with open_client(server, on_notification=notes) as client:
        await client.subscribe_resource("skill://pdf-processing/references/FORMS.md")
        write(folder, "pdf-processing/references/FORMS.md", "# Forms, second edition\n")
        await skills.reload()
        await trio.testing.wait_all_tasks_blocked()
        got = await client.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
    after = {f.path: f for f in skills.skills[1].files}
    # Unchanged files keep the digest computed once (the same object); the changed one is new.
    assert after["SKILL.md"] is before["SKILL.md"]
    assert after["references/FORMS.md"].digest == digest(b"# Forms, second edition\n")
    forms = next(r for r in got["skill"]["resources"] if r["uri"].endswith("FORMS.md"))
    assert forms == {
        "uri": "skill://pdf-processing/references/FORMS.md",
        "digest": digest(b"# Forms, second edition\n"),
        "size": len(b"# Forms, second edition\n"),
    }
    assert (
        "notifications/resources/updated",
        {"uri": "skill://pdf-processing/references/FORMS.md"},
    ) in notes.seen


async def test_a_file_changed_before_a_rescan_is_served_as_it_is_and_its_entry_follows(
    folder: Path,
) -> None:
    server, _ = skills_server(folder)
    async with open_client(server, mode="modern") as client:
        write(folder, "pdf-processing/references/FORMS.md", "# New forms\n")
        read = await client.read_resource("skill://pdf-processing/references/FORMS.md")
        got = await client.request("skills/get", {"uri": "skill://pdf-processing/SKILL.md"})
    assert read.contents[0].text == "# New forms\n"  # type: ignore[union-attr]
    forms = next(r for r in got["skill"]["resources"] if r["uri"].endswith("FORMS.md"))
    assert forms["digest"] == digest(b"# New forms\n")


async def test_the_folder_is_watched_while_the_server_runs(folder: Path) -> None:
    # A real clock: the rescans run in a thread, which a mock clock would jump past. The
    # bound only turns a hang into a failure.
    skills = SkillsExtension(folder, watch_interval=0.01)
    server = Server("skills", extensions=[skills])
    changed = trio.Event()

    def on_notification(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/resources/list_changed":
            changed.set()

    async with open_client(server, on_notification=on_notification) as client:
        write(folder, "newcomer/SKILL.md", skill_md("newcomer"))
        with trio.fail_after(30):
            await changed.wait()
        listed = await client.request("skills/list", {})
    assert "skill://newcomer/SKILL.md" in {e["uri"] for e in listed["skills"]}
