"""docs/netcdf-c-tests.md lists every netcdf-c NCZarr test, and every ported test node it names exists."""
from __future__ import annotations

import re

from tests.conftest import REPO
from tests.netcdf_c.harness import NETCDF_C

DOC = REPO / "docs" / "netcdf-c-tests.md"


def _names() -> list[str]:
    lines = (NETCDF_C / "netcdf-c-tests.tsv").read_text().splitlines()
    return [line.split("\t")[0] for line in lines if line and not line.startswith("#")]


def test_every_netcdf_c_test_is_in_the_table():
    rows = [line.split("|")[1] for line in DOC.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    listed = {name for row in rows for name in re.findall(r"[\w.+-]+\.(?:sh|c|cpp)\b", row)}
    names = _names()
    assert len(names) > 60
    assert sorted(set(names) - listed) == []


def test_ported_nodes_exist():
    for path, func in re.findall(r"`(tests/[\w/]+\.py)::(\w+)", DOC.read_text()):
        assert re.search(rf"^def {func}\(", (REPO / path).read_text(), flags=re.M), f"{path}::{func}"
