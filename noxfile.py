"""The suite on each Python the package claims (pyproject: requires-python >= 3.11), each in a fresh venv.

    nox -s tests-3.11                 # the whole suite on 3.11
    nox -s tests-3.13 -- -x tests/check   # arguments after -- go to pytest
    nox -R -s tests-3.13              # reuse the venv, skip the install (-R: --reuse-venv=yes --no-install)

nox finds ``python3.11`` / ``python3.13`` on PATH; with pyenv, put the version's bin directory first
(``PATH=$(pyenv root)/versions/3.13.0/bin:$PATH``). scripts/test (so CI) runs the 3.13 session on the cells it
names, alongside the 3.11 suite; docs/testing.md says which cells and why. The venvs are kept in ~/.cache/nczarr-nox
(``NCZ_NOX_DIR``), never inside the checkout.
"""
from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"  # the interpreter's own venv and pip: nothing else to install
# The session venvs (about 900 MB each) live outside the checkout, beside the other peer caches of scripts/test, so a
# clone stays small, `git clean` keeps them and a fresh clone reuses them: $NCZ_NOX_DIR, else ~/.cache/nczarr-nox.
nox.options.envdir = os.environ.get("NCZ_NOX_DIR") or str(Path.home() / ".cache" / "nczarr-nox")
nox.options.sessions = ["tests-3.11", "tests-3.13"]


@nox.session(python=["3.11", "3.13"])
def tests(session: nox.Session) -> None:
    """pip install -e '.[test]' (the pinned peers), then pytest -q with the arguments given after --."""
    session.install("--disable-pip-version-check", "-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *session.posargs)
