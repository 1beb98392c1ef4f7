"""The wings import downward only (docs/architecture.md), and the package's public names are functions.

The order lives in pyproject.toml's ``[tool.importlinter]`` contract; import-linter checks it over
every import in the package (TYPE_CHECKING imports included), so the layout cannot rot quietly.
"""
from __future__ import annotations

import ast
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


def _imported_modules(path: Path, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """Every package module ``path`` imports, anywhere in it: at the top, inside a function, under
    TYPE_CHECKING. ``from P import N`` counts as importing ``P.N`` when that is a module, else ``P``."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
    return (found & modules) - {name}


def two_way_imports(package_dir: Path) -> list[str]:
    """``A <-> B`` for each pair of the package's modules that import each other (local imports included)."""
    paths: dict[str, tuple[Path, bool]] = {}
    for path in package_dir.rglob("*.py"):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        paths[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    edges = {name: _imported_modules(path, name, is_package, set(paths))
             for name, (path, is_package) in paths.items()}
    return sorted({" <-> ".join(sorted((a, b))) for a, targets in edges.items() for b in targets
                   if a in edges.get(b, set())})


def test_no_two_modules_import_each_other() -> None:
    """One room, one job (issue #37): a module that needs its importer's code means the code shared by both
    belongs in a lower module (or a registry both sides use), even when one side imports inside a function."""
    pairs = two_way_imports(REPO / "nczarr_conformance")
    assert not pairs, "modules that import each other:\n" + "\n".join(pairs)


def test_a_planted_two_way_import_is_found(tmp_path: Path) -> None:
    """The finder sees a function-local import closing a cycle (what the test above would miss if it only
    read top-level imports)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f() -> None:\n    from pkg.high import g\n")
    (package / "high.py").write_text("from pkg import low\n")
    (package / "alone.py").write_text("from . import low\n")

    assert two_way_imports(package) == ["pkg.high <-> pkg.low"]
