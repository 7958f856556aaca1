"""Every example of docs/guide.md runs, section by section, on the tiny files of ``guide_files``.

A section is a ``## `` heading; its ```python blocks run in order in one namespace, its ```sh blocks in bash
(``set -euo pipefail``), all in a fresh folder holding the guide's files, with ``layerwise`` on the PATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guide_files import write_guide_files

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```", re.S | re.M)


def _sections() -> list[tuple[str, list[tuple[str, str]]]]:
    if not GUIDE.is_file():
        return []
    parts = re.split(r"^## (.+)$", GUIDE.read_text(), flags=re.M)
    sections = []
    for title, body in zip(parts[1::2], parts[2::2]):
        blocks = BLOCK.findall(body)
        if blocks:
            sections.append((title.strip(), blocks))
    return sections


SECTIONS = _sections()


def test_the_guide_has_examples():
    assert GUIDE.is_file(), "docs/guide.md is missing"
    assert SECTIONS, "docs/guide.md has no ```python or ```sh example"


@pytest.mark.parametrize("title,blocks", SECTIONS, ids=[t for t, _ in SECTIONS])
def test_guide_section_runs(title, blocks, tmp_path, monkeypatch):
    work = write_guide_files(tmp_path / "work")
    monkeypatch.chdir(work)
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LAYERWISE_DATA", raising=False)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    namespace: dict = {"__name__": "__guide__"}
    for i, (lang, code) in enumerate(blocks):
        if lang == "python":
            exec(compile(code, f"docs/guide.md [{title}] block {i}", "exec"), namespace)
        else:
            run = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=work, env=env,
                                 capture_output=True, text=True)
            assert run.returncode == 0, f"[{title}] block {i} failed:\n{code}\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
