"""ruff, configured in pyproject.toml ([tool.ruff]), finds nothing in the files it holds clean.

Everything with Python in it is held: the package, the adapters, tests/, benchmarks/, scripts/ and noxfile.py.
"""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, require_module

#: scripts/' Python scripts have no .py suffix: pyproject's extend-include names them
LINTED = ["nczarr_conformance", "adapters", "tests", "benchmarks", "scripts", "noxfile.py"]


def test_ruff_finds_nothing():
    require_module("ruff")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           *LINTED], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
