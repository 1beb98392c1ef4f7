"""The wings import downward only (docs/architecture.md), and the package's public names are functions.

The order lives in pyproject.toml's ``[tool.importlinter]`` contract; import-linter checks it over
every import in the package (TYPE_CHECKING imports included), so the layout cannot rot quietly.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_the_wings_import_downward_only() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wings import downward only KEPT" in result.stdout


@pytest.mark.parametrize(("module", "planted", "lower", "higher"), [
    ("nczarr/reader.py", "import nczarr_conformance.conversion.append", "nczarr", "conversion"),
    ("sources/netcdf4.py", "from nczarr_conformance.peers import netcdf4 as _peer", "sources", "peers"),
    ("peers/base.py", "import nczarr_conformance.conformance.matrix", "peers", "conformance"),
    ("keys.py", "import nczarr_conformance.stores", "keys", "stores"),
])
def test_a_lower_wing_importing_a_higher_one_fails(tmp_path: Path, module: str, planted: str, lower: str,
                                                    higher: str) -> None:
    shutil.copytree(REPO / "nczarr_conformance", tmp_path / "nczarr_conformance",
                    ignore=shutil.ignore_patterns("__pycache__", "corpus"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "nczarr_conformance" / module
    text = target.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    assert sep, module
    target.write_text(head + sep + planted + "\n" + rest)

    result = _lint(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    wing = f"nczarr_conformance.{lower}"
    assert (f"{wing} is not allowed to import nczarr_conformance.{higher}" in result.stdout
            or f"is not allowed to import nczarr_conformance.{higher}" in result.stdout), result.stdout


def test_sources_and_conversion_never_name_the_graded_peers() -> None:
    """The converter reads its input through sources/, never through a graded peer (issue #22's grep)."""
    hits = [f"{p.relative_to(REPO)}:{n}" for wing in ("sources", "conversion")
            for p in sorted((REPO / "nczarr_conformance" / wing).rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1) if "peers" in line]
    assert hits == []


def test_public_names_stay_functions_whatever_is_imported() -> None:
    """No module shares a public function's name, so importing every wing leaves the functions bound."""
    code = ("import importlib, pkgutil, types, nczarr_conformance as n\n"
            "for m in pkgutil.walk_packages(n.__path__, 'nczarr_conformance.'):\n"
            "    if not m.name.startswith('nczarr_conformance.testing'):\n"
            "        importlib.import_module(m.name)\n"
            "print(*(type(getattr(n, k)).__name__ for k in ('open', 'write', 'convert', 'check')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            check=False, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["function"] * 4
