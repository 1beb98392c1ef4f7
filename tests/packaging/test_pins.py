"""What a user installs is ranges; only the [test] extra pins (reports/ record what exact peer versions do).

An exact pin in the runtime dependencies or a user-facing extra would make pip refuse to install this package
beside any other release of that library, for no reason the package has: it runs with any release in range.
"""
from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO

#: a requirement pinned to one release (== or ===; "==2026.*" is a range and passes)
EXACT = re.compile(r"===?\s*[\w.!+-]+\s*(?:;|$)")


def test_runtime_and_user_extras_are_ranges():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {"dependencies": project["dependencies"],
              **{f"[{extra}]": reqs for extra, reqs in project["optional-dependencies"].items() if extra != "test"}}
    assert "[dask]" in wanted and "[xarray]" in wanted
    pinned = [f"{where}: {req}" for where, reqs in wanted.items() for req in reqs if EXACT.search(req)]
    assert pinned == []
