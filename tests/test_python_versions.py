"""Every Python the package claims runs the suite: noxfile.py has a session per version, and scripts/test (so CI)
runs the 3.13 one on the cells it names, which must name what exists.

A skip list naming a moved file or a renamed test would silently run more, or the -k expression would match
nothing it meant to; either way the list and docs/testing.md would no longer say what CI runs.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO, require_module


def _skip_list() -> list[str]:
    script = (REPO / "scripts" / "test").read_text(encoding="utf-8")
    block = re.search(r"^PY313_SKIP=\((.*?)^\)", script, flags=re.S | re.M)
    assert block, "scripts/test names the cells Python 3.13 skips in PY313_SKIP=( … )"
    items = (re.sub(r"(^|\s+)#.*", "", line).strip() for line in block.group(1).splitlines())
    return [item for item in items if item]  # a line that is only a comment names nothing


def test_nox_has_a_session_per_claimed_python():
    require_module("nox")
    listed = subprocess.run([sys.executable, "-m", "nox", "--list", "--json"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert {s["session"] for s in json.loads(listed.stdout)} == {"tests-3.11", "tests-3.13"}
    requires = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert requires == ">=3.11"


def test_the_313_skip_list_names_what_exists():
    ignored, expressions = [], []
    for item in _skip_list():
        if item.startswith("--ignore="):
            ignored.append(item.removeprefix("--ignore="))
        elif item.startswith("-k "):
            expressions.append(item[3:].strip('"'))
        else:
            raise AssertionError(f"unexpected PY313_SKIP item {item!r}")
    assert ignored and all((REPO / path).exists() for path in ignored), ignored
    # pytest keeps the last -k it is given: a second one would silently run what the first left out
    assert len(expressions) <= 1, expressions
    names = {node.name for path in (REPO / "tests").rglob("test_*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.FunctionDef)}
    for expression in expressions:
        wanted = re.findall(r"\btest_\w+", expression)
        assert wanted and set(wanted) <= names, expression


def test_the_nox_venvs_live_outside_the_checkout(tmp_path):
    """A session's venv is about 900 MB: nox's default (.nox/ in the checkout) made every clone that big."""
    require_module("nox")
    probe = ("import nox, runpy, sys; runpy.run_path(sys.argv[1]); print(nox.options.envdir)")
    env = {k: v for k, v in os.environ.items() if k != "NCZ_NOX_DIR"}
    default = subprocess.run([sys.executable, "-c", probe, str(REPO / "noxfile.py")], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
    assert default.returncode == 0, default.stderr
    envdir = Path(default.stdout.strip())
    assert envdir.is_absolute() and not envdir.resolve().is_relative_to(REPO.resolve()), envdir
    assert envdir == Path.home() / ".cache" / "nczarr-nox"
    moved = subprocess.run([sys.executable, "-c", probe, str(REPO / "noxfile.py")], cwd=REPO,
                           env={**env, "NCZ_NOX_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert moved.stdout.strip() == str(tmp_path), moved.stderr
