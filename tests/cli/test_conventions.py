"""What every command shares: --version, help in plain words, usage errors in one line."""
from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

MODULES = {
    "nc2nczarr": "nczarr_conformance.cli.convert",
    "nczarr-dump": "nczarr_conformance.cli.dump",
    "nczarr-check": "nczarr_conformance.cli.check",
    "nczarr-conformance": "nczarr_conformance.cli.report",
    "nczarr-fix": "nczarr_conformance.cli.fix",
}


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("prog", sorted(MODULES))
def test_version_names_the_installed_distribution(prog: str) -> None:
    result = _run(MODULES[prog], "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{prog} {version('nczarr-conformance')}\n"


@pytest.mark.parametrize("prog", sorted(MODULES))
def test_help_is_plain_words(prog: str) -> None:
    result = _run(MODULES[prog], "--help")
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout, result.stdout
    assert "--version" in result.stdout


@pytest.mark.parametrize("prog", sorted(MODULES))
def test_usage_error_is_one_line_exit_2(prog: str) -> None:
    result = _run(MODULES[prog], "--no-such-flag")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"{prog}: ") and "Traceback" not in result.stderr
