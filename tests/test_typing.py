"""The package stays clean under mypy --strict (house rule 5).

mypy keeps its incremental cache outside the checkout, shared by every clone and run on this machine
(``~/.cache/nczarr-mypy``, ``NCZ_MYPY_CACHE`` overrides; a subdirectory per Python version, mypy's own), as the
suite's other caches are (docs/testing.md): a warm check takes about 1 s where a cold one takes 15 s of CPU, on
each of the 3.11 and 3.13 runs. mypy checks a cached module again when its contents change, wherever the clone
is: the second test holds that, on a copy.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

CACHE = Path(os.environ.get("NCZ_MYPY_CACHE", Path.home() / ".cache" / "nczarr-mypy"))


def _mypy(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports", "--cache-dir",
                           str(CACHE), "nczarr_conformance"], cwd=root, capture_output=True, text=True, timeout=600)


def _all_but_sources(folder: str, names: list[str]) -> list[str]:
    """What the copy leaves out: bytecode and data; Python files, py.typed and folders are kept."""
    return [n for n in names
            if n == "__pycache__" or not ((Path(folder) / n).is_dir() or n.endswith((".py", ".typed")))]


def test_mypy_strict():
    result = _mypy(REPO)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_shared_cache_hides_no_error(tmp_path):
    """A copy of the package elsewhere (another clone), one error planted in a module nothing imports (so only it
    is checked again), checked with the cache the test above left warm: mypy names the error."""
    shutil.copytree(REPO / "nczarr_conformance", tmp_path / "nczarr_conformance", ignore=_all_but_sources)
    with (tmp_path / "nczarr_conformance" / "__main__.py").open("a", encoding="utf-8") as out:
        out.write('\n_planted: int = "not an int"\n')
    result = _mypy(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    assert result.stdout.startswith("nczarr_conformance/__main__.py:") and "[assignment]" in result.stdout, \
        result.stdout[-3000:]
