"""The import layering of pyproject's [tool.importlinter] contracts holds, and it can fail (`make lint` runs it)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

importlinter = pytest.importorskip("importlinter", reason="import-linter is in the dev extra (CI installs it); not installed here")

ROOT = Path(__file__).resolve().parents[1]


def _lint(tree: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the checkout (or copy) at ``tree``: its own src/ first on the path, no cache."""
    # the tree's own src/ first (a copy must not be read as the installed package), then where import-linter lives
    paths = [str(tree / "src"), str(Path(importlinter.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=120)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_real_tree_keeps_every_contract():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    # a method reaching up into the benchmarks
    ("methods/lc/search.py", "from layerwise.benchmarks import store", "cli above benchmarks above methods"),
    # export/ importing a method (the registry exists so that it never has to)
    ("export/card.py", "from layerwise.methods.truncated import model", "export/ imports no method"),
    # one method importing another
    ("methods/lattemix/train.py", "from layerwise.methods.truncated import tasks", "the methods do not import each other"),
    # a cycle between two floors (evaluation reads data; data must not read evaluation)
    ("data/sts.py", "from layerwise.evaluation import metrics", "no import cycle"),
])
def test_a_deliberate_back_import_breaks_its_contract(tmp_path, module, line, contract):
    tree = _copy(tmp_path)
    path = tree / "src" / "layerwise" / module
    text = path.read_text()
    path.write_text(text + f"\n{line}  # deliberate back-import (tests/test_layering.py)\n")
    out = _lint(tree)
    assert out.returncode != 0, out.stdout
    broken = [row for row in out.stdout.splitlines() if row.endswith("BROKEN")]
    assert any(contract in row for row in broken) or contract in out.stdout.split("Broken contracts")[-1], out.stdout
