"""No NCZarr bookkeeping name reaches a user attribute through netCDF4-python (issue 34).

netcdf-c 4.10.1 hides ``_nczarr_group``, ``_nczarr_array``, ``_nczarr_attr``, ``_nczarr_superblock``,
``_NCProperties`` and ``_ARRAY_DIMENSIONS``; every other ``.zattrs`` key, ``_nczarr_maxstrlen`` included,
is shown by ``ncattrs()``. Its own string variables carry no ``_nczarr_maxstrlen``: the ``|Sn`` dtype holds
the length, and netcdf-c reads it from there. Expected values come from netCDF4-python, never our reader.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.model import Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore

netCDF4 = pytest.importorskip("netCDF4")

RICH = Path(__file__).resolve().parents[2] / "corpus" / "rich.nc"
LONG = "ü" * 150  # 300 UTF-8 bytes: past netcdf-c's default maxstrlen of 128


def _shown(nc: Any, path: str = "/") -> dict[str, list[str]]:
    """Every object's ``ncattrs()`` as netCDF4-python lists them, by path."""
    out = {path: list(nc.ncattrs())}
    for name, var in nc.variables.items():
        out[f"{path.rstrip('/')}/{name}"] = list(var.ncattrs())
    for name, sub in nc.groups.items():
        out.update(_shown(sub, f"{path.rstrip('/')}/{name}"))
    return out


def _reserved(shown: dict[str, list[str]]) -> dict[str, list[str]]:
    return {p: [n for n in names if n.lower().startswith("_nczarr")] for p, names in shown.items()
            if any(n.lower().startswith("_nczarr") for n in names)}


def _open(store: Path) -> Any:
    return netCDF4.Dataset(f"file://{store}#mode=nczarr,file")


def test_default_output_of_rich_nc_shows_no_nczarr_name_in_netcdf4_python(tmp_path: Path) -> None:
    out = tmp_path / "o"
    subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(RICH), str(out), "-q"],
                   check=True, capture_output=True)
    with _open(out) as nc, netCDF4.Dataset(str(RICH)) as src:
        assert _reserved(_shown(nc)) == {}
        assert _shown(nc) == _shown(src)  # the user attributes are exactly the source's
        assert list(nc["strings"][:]) == list(src["strings"][:])  # its 200-byte string whole


def _strings_in_groups() -> Dataset:
    root = Group({"x": Dimension(2)})
    root.variables["top"] = Variable("string", ["/x"], (2,), {}, np.array(["a", LONG], dtype=object))
    g = root.groups["g"] = Group({"y": Dimension(3)})
    g.variables["s"] = Variable("string", ["/g/y"], (3,), {}, np.array(["", "bb", LONG + "!"], dtype=object))
    g.groups["h"] = Group()
    g.groups["h"].variables["sc"] = Variable("string", [], (), {}, np.array(LONG, dtype=object))
    return Dataset(root)


@pytest.mark.parametrize("flavor", ["nczarr-4.10", "nczarr-2"])
def test_strings_in_groups_show_no_nczarr_name_and_read_back_whole(tmp_path: Path, flavor: str) -> None:
    out = tmp_path / "s"
    with DirectoryStore(out, "w") as store:
        write_dataset(_strings_in_groups(), store, flavor=flavor)
    with _open(out) as nc:
        assert _reserved(_shown(nc)) == {}
        assert list(nc["top"][:]) == ["a", LONG]
        assert list(nc["g/s"][:]) == ["", "bb", LONG + "!"]
        assert nc["g/h/sc"][...] == LONG
    # storage: the length is the dtype's, the longest value's UTF-8 bytes
    assert json.loads((out / "top/.zarray").read_text())["dtype"] == "|S300"
    assert json.loads((out / "g/s/.zarray").read_text())["dtype"] == "|S301"


def test_char_as_s1_shows_no_nczarr_name(tmp_path: Path) -> None:
    root = Group({"n": Dimension(3)})
    root.variables["c"] = Variable("char", ["/n"], (3,), {}, np.array([b"a", b"b", b"c"], dtype="S1"))
    out = tmp_path / "c"
    with DirectoryStore(out, "w") as store:
        write_dataset(Dataset(root), store, char_as="S1")
    assert json.loads((out / "c/.zarray").read_text())["dtype"] == "|S1"
    with _open(out) as nc:
        assert _reserved(_shown(nc)) == {}
        assert list(nc["c"][:]) == ["a", "b", "c"]  # netcdf-c 4.10.1 reads |S1 as strings of length 1
