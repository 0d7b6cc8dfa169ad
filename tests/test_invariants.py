"""The design's invariants stay traced: the table in docs/design.md and the markers agree.

The table ("Invariants and the tests that hold them") names, for each invariant, the tests that
fail without it; each of those carries ``@pytest.mark.invariant(n)``. The markers are read from
the source with ``ast``, so a renamed test, a dropped marker or a stale row fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Invariants and the tests that hold them"
INVARIANTS = set(range(1, 12))


def table() -> dict[int, set[str]]:
    """Invariant number -> the tests its row names (``tests/...py::test_name``)."""
    text = (ROOT / "docs" / "design.md").read_text()
    assert SECTION in text, f"docs/design.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows: dict[int, set[str]] = {}
    for line in section.splitlines():
        row = re.fullmatch(r"\|\s*(\d+)\s*\|.*\|(.*)\|\s*", line)
        if row is not None:
            assert int(row[1]) not in rows, f"invariant {row[1]} has two rows"
            rows[int(row[1])] = set(re.findall(r"`([^`\s]+\.py::\w+)`", row[2]))
    return rows


def markers() -> set[tuple[int | str, str]]:
    """(the marker's number, or its arguments if they are not one, ``tests/...py::test_name``)."""
    found: set[tuple[int | str, str]] = set()
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        functions = [("", node) for node in tree.body]
        functions += [
            (f"{c.name}::", node)
            for c in tree.body
            if isinstance(c, ast.ClassDef)
            for node in c.body
        ]
        for prefix, node in functions:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and ast.unparse(decorator.func) == "pytest.mark.invariant"
                ):
                    args = ast.unparse(decorator).removeprefix("pytest.mark.invariant")
                    number = int(args[1:-1]) if re.fullmatch(r"\(\d+\)", args) else args
                    found.add((number, f"{path.relative_to(ROOT).as_posix()}::{prefix}{node.name}"))
    return found


def test_the_table_has_one_row_per_invariant() -> None:
    assert set(table()) == INVARIANTS


def test_every_traced_invariant_has_a_marked_test() -> None:
    marked = {number for number, _ in markers()}
    untraced = [n for n, tests in sorted(table().items()) if tests and n not in marked]
    assert not untraced, f"the table traces invariants {untraced}, but no test is marked so"


def test_markers_name_one_invariant_each() -> None:
    bad = sorted((str(n), test) for n, test in markers() if n not in INVARIANTS)
    assert not bad, f"invariant(n) takes one number out of 1..11: {bad}"


def test_the_table_and_the_markers_agree() -> None:
    listed = {(n, test) for n, tests in table().items() for test in tests}
    marked = {(n, test) for n, test in markers() if n in INVARIANTS}
    problems = [f"listed under {n}, but not marked invariant({n}): {t}" for n, t in listed - marked]
    problems += [
        f"marked invariant({n}), but not listed under {n}: {t}" for n, t in marked - listed
    ]
    assert not problems, "\n".join(sorted(problems))
