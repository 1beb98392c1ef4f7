"""ruff, configured in pyproject.toml ([tool.ruff]), finds nothing in the files it holds clean.

The paths are those already clean; a path joins LINTED once it is, and then stays clean, since a finding fails
here. The package itself joins once its remaining findings are fixed (CONTRIBUTING.md).
"""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, require_module

#: tests/, benchmarks/, scripts/ (its Python scripts have no .py suffix: pyproject's extend-include names them)
LINTED = ["tests", "benchmarks", "scripts", "noxfile.py"]


def test_ruff_finds_nothing():
    require_module("ruff")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           *LINTED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
