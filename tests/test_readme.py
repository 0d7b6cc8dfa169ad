"""The README's quick start works when pasted: it is run as a real child process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_code() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"## Quick start\n\n```python\n(.*?)```", readme, re.S)
    assert found is not None, "the README lost its quick start"
    return found.group(1)


def test_the_example_file_is_the_readme_quick_start() -> None:
    example = (ROOT / "examples" / "quickstart.py").read_text()
    docstring, _, body = example.partition("\n\n")
    assert docstring.startswith('"""')
    assert body == quick_start_code()


def test_the_quick_start_runs_as_pasted(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quick_start_code())
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['add', 'countdown']",
        "{'result': 5}",
        "progress 1 3 step 1",
        "progress 2 3 step 2",
        "progress 3 3 step 3",
        "liftoff",
        "cancelled; the server was told",
    ]
