"""The skills extension (SEP-2640, ``io.modelcontextprotocol/skills``), in a room of its own.

The server half: :class:`SkillsExtension` (``Server(extensions=[SkillsExtension("skills/")])``)
serves a folder of skill folders and skills from code: ``skills/list``, ``skills/get``,
``resources/directory/read``, each file a ``skill://`` resource. :class:`Skill` and
:class:`SkillFile` are what it holds; :class:`SkillError` and :class:`SkillProblem` say why a
skill is not served.

The client half: :class:`SkillsClient` lists and gets skills and reads their files on demand,
each checked against its :class:`SkillEntry`; :class:`SkillVerificationError` names why content
was refused. See docs/extensions.md.
"""

from ._catalog import Skill, SkillError, SkillFile, SkillProblem
from ._client import (
    LoadedSkill,
    SkillContent,
    SkillEntry,
    SkillResource,
    SkillsClient,
    SkillVerificationError,
)
from ._extension import SkillsExtension
from ._wire import MAX_SKILL_BYTES, MAX_SKILL_FILES, SKILLS_EXTENSION, FrontmatterError

__all__ = [
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "SKILLS_EXTENSION",
    "FrontmatterError",
    "LoadedSkill",
    "Skill",
    "SkillContent",
    "SkillEntry",
    "SkillError",
    "SkillFile",
    "SkillProblem",
    "SkillResource",
    "SkillVerificationError",
    "SkillsClient",
    "SkillsExtension",
]
