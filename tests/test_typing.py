"""The package stays clean under mypy --strict (house rule 5)."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_mypy_strict():
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports",
                             "nczarr_conformance"],
                            cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
