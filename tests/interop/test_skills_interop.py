"""Skills (SEP-2640) between trio_mcp and the TypeScript SDK 2.4's ``ext/skills``, over stdio.

Its client (``SkillsClient``) lists, reads and verifies the skills a trio_mcp server serves
(``skills_server.py``), and trio_mcp's client verifies the skills of a server built with its
server half (``ts_skills_server.mjs``). Each side refuses, naming the reason, a ``SKILL.md``
whose digest or size is not its entry's.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from trio_mcp import open_client
from trio_mcp.skills import SkillsClient, SkillVerificationError

from ._support import HERE, ROOT, node, run_json

SKILLS = ROOT / "tests" / "conformance" / "skills"
OURS = [sys.executable, str(HERE / "skills_server.py"), str(SKILLS)]


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


async def test_the_typescript_skills_client_reads_and_verifies_our_skills() -> None:
    seen = await run_json([node(), str(HERE / "ts_skills_client.mjs"), *OURS])
    assert seen["supported"] is True and seen["directoryRead"] is True
    assert seen["invalid"] == []
    by_uri = {skill["uri"]: skill for skill in seen["skills"]}
    assert sorted(by_uri) == ["skill://pdf-processing/SKILL.md", "skill://release-notes/SKILL.md"]
    pdf = by_uri["skill://pdf-processing/SKILL.md"]
    assert {r["uri"]: r["digest"] for r in pdf["resources"]} == {
        "skill://pdf-processing/SKILL.md": _digest(SKILLS / "pdf-processing" / "SKILL.md"),
        "skill://pdf-processing/references/FORMS.md": _digest(
            SKILLS / "pdf-processing" / "references" / "FORMS.md"
        ),
        "skill://pdf-processing/templates/letter.md": _digest(
            SKILLS / "pdf-processing" / "templates" / "letter.md"
        ),
    }
    # Every file passed its checks (listed, size, digest; SKILL.md's frontmatter too).
    assert len(seen["reads"]) == 4
    assert all(read.get("verified") is True for read in seen["reads"].values()), seen["reads"]
    forms = seen["reads"]["skill://pdf-processing/references/FORMS.md"]["text"]
    assert forms == (SKILLS / "pdf-processing" / "references" / "FORMS.md").read_text()
    children = {(c["uri"], c.get("mimeType")) for c in seen["directory"]}
    assert ("skill://pdf-processing/references", "inode/directory") in children


@pytest.mark.parametrize("how", ["digest", "size"])
async def test_the_typescript_skills_client_refuses_a_tampered_skill_md_of_ours(how: str) -> None:
    seen = await run_json([node(), str(HERE / "ts_skills_client.mjs"), *OURS, how])
    refused = {uri: read.get("refused") for uri, read in seen["reads"].items()}
    # Each skill's SKILL.md refused for that reason, and nothing more of it read.
    assert refused == {
        "skill://pdf-processing/SKILL.md": how,
        "skill://release-notes/SKILL.md": how,
    }


def _ts_server(how: str = "honest") -> list[str]:
    return [node(), str(HERE / "ts_skills_server.mjs"), str(SKILLS), how]


async def test_our_client_verifies_the_skills_of_a_typescript_server() -> None:
    async with open_client(_ts_server()) as client:
        skills = SkillsClient(client)
        assert skills.supported and skills.directory_read
        entries = await skills.list_skills()
        assert [e.path for e in entries] == ["pdf-processing", "release-notes"]
        assert skills.invalid == []
        pdf = entries[0]
        loaded = await skills.load(pdf)
        assert loaded.frontmatter["metadata"] == {"author": "trio-mcp", "version": "1.0"}
        assert loaded.skill_md.data == (SKILLS / "pdf-processing" / "SKILL.md").read_bytes()
        forms = await skills.read(pdf, "references/FORMS.md")
        assert forms.verified
        assert forms.data == (SKILLS / "pdf-processing" / "references" / "FORMS.md").read_bytes()
        children = await skills.read_directory(pdf.root_uri)
        assert {"uri": "skill://pdf-processing/templates", "name": "templates"}.items() <= {
            k: v for c in children if c["uri"].endswith("/templates") for k, v in c.items()
        }.items()


@pytest.mark.parametrize("how", ["digest", "size"])
async def test_our_client_refuses_a_tampered_skill_md_of_a_typescript_server(how: str) -> None:
    async with open_client(_ts_server(how)) as client:
        skills = SkillsClient(client)
        [entry] = await skills.list_skills()
        with pytest.raises(SkillVerificationError) as refused:
            await skills.load(entry)
    assert refused.value.reason == how
    assert refused.value.uri == "skill://release-notes/SKILL.md"
    assert how in str(refused.value) or "bytes" in str(refused.value)
