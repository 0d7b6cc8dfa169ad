"""Skills that break a rule get a clear error naming the rule and where, and nothing else stops:
the other skills are still served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trio_mcp import Server, open_client
from trio_mcp.skills import MAX_SKILL_FILES, SkillError, SkillsExtension

GOOD = "---\nname: good\ndescription: A skill that follows the rules.\n---\nBody.\n"


def write(root: Path, path: str, content: str | bytes) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content.encode() if isinstance(content, str) else content)


def problems_of(root: Path) -> dict[str, str]:
    skills = SkillsExtension(root, watch_interval=None)
    assert [s.name for s in skills.skills] == ["good"], skills.problems
    return {p.where: p.message for p in skills.problems}


@pytest.mark.parametrize(
    ("folder", "content", "expected"),
    [
        ("no-frontmatter", "# Just Markdown\n", "must begin with a '---' line"),
        ("unclosed", "---\nname: unclosed\ndescription: x\n", "no closing '---' line"),
        ("bad-yaml", "---\nname: [unclosed\n---\n", "not valid YAML"),
        ("a-list", "---\n- name\n- description\n---\n", "must be a YAML mapping"),
        ("no-description", "---\nname: no-description\n---\n", "needs a 'description'"),
        ("Upper-Case", "---\nname: Upper-Case\ndescription: x\n---\n", "breaks the naming rules"),
        ("double--dash", "---\nname: double--dash\ndescription: x\n---\n", "naming rules"),
        ("elsewhere", "---\nname: other-name\ndescription: x\n---\n", "must equal the skill's"),
        ("too-long", f"---\nname: {'a' * 65}\ndescription: x\n---\n", "longer than 64"),
        ("not-json", "---\nname: not-json\ndescription: .nan\nx: .inf\n---\n", "which JSON cannot"),
        ("latin1", b"---\nname: latin1\ndescription: caf\xe9\n---\n", "not UTF-8"),
    ],
)
def test_a_malformed_skill_md_is_refused_with_the_reason(
    tmp_path: Path, folder: str, content: str | bytes, expected: str
) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, f"{folder}/SKILL.md", content)
    assert expected in problems_of(tmp_path)[folder]


def test_a_folder_without_skill_md_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "forgot/README.md", "no SKILL.md here")
    assert problems_of(tmp_path) == {"forgot": "the folder has no SKILL.md"}


def test_a_skill_over_the_file_limit_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "crowded/SKILL.md", GOOD.replace("good", "crowded"))
    for n in range(MAX_SKILL_FILES):
        write(tmp_path, f"crowded/files/{n}.txt", "x")
    assert "more than 512 files" in problems_of(tmp_path)["crowded"]


def test_a_skill_over_the_byte_limit_is_refused_before_it_is_hashed(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "huge/SKILL.md", GOOD.replace("good", "huge"))
    with (tmp_path / "huge" / "data.bin").open("wb") as out:
        out.truncate(16 * 1024 * 1024)  # sparse: 16 MiB plus the SKILL.md is one byte over
    assert "over the limit of 16777216 (16 MiB)" in problems_of(tmp_path)["huge"]


def test_a_symbolic_link_refuses_its_skill(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "linked/SKILL.md", GOOD.replace("good", "linked"))
    os.symlink("/etc/hostname", tmp_path / "linked" / "secret")
    assert "symbolic links" in problems_of(tmp_path)["linked/secret"]


def test_strict_raises_every_problem(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "Bad/SKILL.md", "---\nname: Bad\ndescription: x\n---\n")
    with pytest.raises(SkillError) as refused:
        SkillsExtension(tmp_path, strict=True)
    assert [p.where for p in refused.value.problems] == ["Bad"]
    assert "naming rules" in str(refused.value)


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SkillError, match="is not a folder"):
        SkillsExtension(tmp_path / "absent")


def test_a_bad_skill_from_code_raises(tmp_path: Path) -> None:
    skills = SkillsExtension()
    with pytest.raises(SkillError, match=r"needs a SKILL\.md"):
        skills.add("empty", {"notes.md": "x"})
    with pytest.raises(SkillError, match="must equal the skill's folder name"):
        skills.add("named", {"SKILL.md": GOOD})
    with pytest.raises(SkillError, match="stay inside the skill"):
        skills.add("good", {"SKILL.md": GOOD, "../escape": "x"})
    with pytest.raises(SkillError, match="files, over the limit of 512"):
        skills.add("good", {"SKILL.md": GOOD, **{f"f{n}": "x" for n in range(512)}})
    skills.add("good", {"SKILL.md": GOOD})
    with pytest.raises(ValueError, match="already served"):
        skills.add("good", {"SKILL.md": GOOD})


async def test_a_skill_that_breaks_later_is_dropped_and_the_rest_served(tmp_path: Path) -> None:
    write(tmp_path, "good/SKILL.md", GOOD)
    write(tmp_path, "fragile/SKILL.md", GOOD.replace("good", "fragile"))
    skills = SkillsExtension(tmp_path, watch_interval=None)
    server = Server("skills", extensions=[skills])
    async with open_client(server, mode="modern") as client:
        write(tmp_path, "fragile/SKILL.md", "now broken\n")
        await skills.reload()
        listed = await client.request("skills/list", {})
        read = await client.read_resource("skill://good/SKILL.md")
    assert [e["uri"] for e in listed["skills"]] == ["skill://good/SKILL.md"]
    assert read.contents[0].text == GOOD  # type: ignore[union-attr]
    assert [p.where for p in skills.problems] == ["fragile"]
