"""``--flavor nczarr-2``: the layout netcdf-c 4.9.1–4.9.2 write (issue 23, "Traps").

Held to netcdf-c itself: our output of netcdf-c's own 4.9.2 store (``ref_oldkeys.file.zip``,
``_NCProperties`` ``netcdf=4.9.2``) is that store's JSON object by object, and netCDF4-python
(netcdf-c 4.10.1) reads our output of a file as it reads the file. The two places where we write
more than 4.9.2 does are pinned by the 4.10.1 failures they avoid.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import diff
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.stores import DirectoryStore, MemoryStore
from nczarr_conformance.testing.ignores import CONTIGUOUS
from tests.conftest import NETCDF_C_CORPUS, require_module
from tests.nczarr.test_roundtrip import write_then_read
from tests.test_convert_valid import differences, nczarr_url, run_cli

netCDF4 = require_module("netCDF4")


def _objects(members: dict[str, bytes]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in members.items() if k.rsplit("/", 1)[-1].startswith(".z")}


def test_our_nczarr_2_is_netcdf_c_4_9_2s_own_store_object_by_object(tmp_path: Path) -> None:
    from nczarr_conformance.access.dataset import open_dataset

    source = NETCDF_C_CORPUS / "ref_oldkeys.file.zip"
    with zipfile.ZipFile(source) as z:
        theirs = _objects({n.split("/", 1)[1]: z.read(n) for n in z.namelist() if not n.endswith("/")})
    assert theirs[".zattrs"]["_NCProperties"] == "version=2,netcdf=4.9.2,nczarr=2.0.0"  # who wrote it
    with DirectoryStore(tmp_path / "ours.file", "w") as store:
        write_dataset(open_dataset(str(source)), store, flavor="nczarr-2", consolidate=False)
        store.commit()
    ours = _objects({str(p.relative_to(tmp_path / "ours.file")): p.read_bytes()
                     for p in (tmp_path / "ours.file").rglob(".z*")})
    assert ours[".zattrs"]["_NCProperties"].startswith("version=2,nczarr_conformance=")
    ours[".zattrs"]["_NCProperties"] = theirs[".zattrs"]["_NCProperties"]  # the provenance is ours, not 4.9.2's
    assert ours == theirs


def _source(path: Path, *, text: bool = True) -> Path:
    """Every kind of variable 4.9.2 can write, in groups, some without any attribute (``text``: char and string
    variables too)."""
    with netCDF4.Dataset(str(path), "w") as nc:
        nc.title = "nczarr-2"
        nc.shorts = np.array([1, 2], dtype="i2")
        nc.createDimension("x", 3)
        nc.createDimension("y", 2)
        v = nc.createVariable("v", "f4", ("x", "y"), zlib=True, chunksizes=(2, 2))
        v[:] = np.arange(6).reshape(3, 2)
        v.units = "m"
        nc.createVariable("be", "i4", ("x",), endian="big")[:] = [1, -2, 3]
        if text:
            nc.createVariable("c", "S1", ("x",))[:] = np.array([b"a", b"b", b"c"])
            nc.createVariable("s", str, ("y",))[:] = np.array(["hello", "a longer string"], dtype=object)
        nc.createVariable("sc", "f8").assignValue(6.5)
        g = nc.createGroup("g")
        g.createDimension("z", 2)
        g.createVariable("w", "u1", ("z",))[:] = [5, 6]  # no attribute, outside the root
        g.createVariable("onroot", "i2", ("x",))[:] = [7, 8, 9]
        g.createGroup("empty")
    return path


def test_netcdf_c_410_reads_our_nczarr_2_as_it_reads_the_source(tmp_path: Path) -> None:
    src = _source(tmp_path / "in.nc")
    out = tmp_path / "out.file"
    done = run_cli("--quiet", "--flavor", "nczarr-2", str(src), str(out))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads((out / ".zgroup").read_text())["_nczarr_superblock"] == {"version": "2.0.0"}
    assert differences(src, out) == []


def test_nczarr_2_is_detected_and_read_back_by_ours(small: Any, tmp_path: Path) -> None:
    small.root.dimensions["t"].unlimited = False
    store = MemoryStore()
    write_dataset(small, store, flavor="nczarr-2")
    from nczarr_conformance.nczarr.flavors import MetadataSource, detect

    assert detect(MetadataSource(store))[0] == "nczarr-2"
    assert diff(small, write_then_read(small, "file", tmp_path, "nczarr-2"), ignore=CONTIGUOUS) == []


def test_nczarr_2_refuses_unlimited_dimensions_in_one_line(tmp_path: Path) -> None:
    """netcdf-c 4.9.1–4.9.2 have no unlimited dimension in NCZarr (nc_def_dim: NC_EDIMSIZE); -u makes them fixed."""
    src = tmp_path / "in.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("t", None)
        nc.createVariable("v", "i4", ("t",))[:] = [1, 2]
    done = run_cli("--quiet", "--flavor", "nczarr-2", str(src), str(tmp_path / "out.file"))
    assert done.returncode == 2
    assert done.stderr == ("nc2nczarr: /t: unlimited dimensions cannot be written as nczarr-2 (netcdf-c before 4.9.3 "
                           "has none in NCZarr); -u makes them fixed, or use --flavor nczarr\n")
    assert not (tmp_path / "out.file").exists()
    done = run_cli("--quiet", "--flavor", "nczarr-2", "-u", str(src), str(tmp_path / "out.file"))
    assert done.returncode == 0, done.stderr
    with pytest.raises(UnsupportedError, match="unlimited"):
        from nczarr_conformance.model import Dataset, Dimension, Group

        write_dataset(Dataset(Group(dimensions={"t": Dimension(1, True)})), MemoryStore(), flavor="nczarr-2")


def _open_in_410(url: str) -> subprocess.CompletedProcess[str]:
    """netCDF4-python opening ``url`` and reading every variable, in a child (a segfault is an exit code)."""
    code = ("import netCDF4, sys\nnc = netCDF4.Dataset(sys.argv[1])\n"
            "def walk(g):\n    [v[...] for v in g.variables.values()]\n    [walk(s) for s in g.groups.values()]\n"
            "walk(nc)\nprint('read')\n")
    return subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))


def _open_in_datatree(path: Path) -> subprocess.CompletedProcess[str]:
    """xarray's open_datatree (zarr engine) opening every group of ``path``, in a child."""
    code = ("import sys, warnings\nwarnings.simplefilter('ignore')\nimport xarray as xr\n"
            "tree = xr.open_datatree(sys.argv[1], engine='zarr', consolidated=False)\n"
            "[node.to_dataset().load() for node in tree.subtree]\nprint('read')\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize("as_492", ["no .zattrs outside the root", "a scalar known by storage only",
                                    "_ARRAY_DIMENSIONS in the root only"])
def test_what_we_write_beyond_4_9_2_is_what_a_reader_needs(as_492: str, tmp_path: Path) -> None:
    """Undo one of our additions, so the store is there exactly what netcdf-c 4.9.2 writes: netcdf-c 4.10.1, or
    xarray, cannot read it (their limits, pinned here: when this test fails, the reader reads 4.9.2's own layout
    and the addition can go). Ours as written reads in both."""
    src = _source(tmp_path / "in.nc", text=as_492 != "_ARRAY_DIMENSIONS in the root only")  # zarr-python: no >S1
    out = tmp_path / "out.file"
    assert run_cli("--quiet", "--flavor", "nczarr-2", str(src), str(out)).returncode == 0
    opened = _open_in_datatree if as_492 == "_ARRAY_DIMENSIONS in the root only" else (
        lambda path: _open_in_410(nczarr_url(path)))
    assert opened(out).stdout == "read\n"
    undone = tmp_path / "as492.file"
    shutil.copytree(out, undone)
    if as_492 == "no .zattrs outside the root":
        assert json.loads((undone / "g" / "w" / ".zattrs").read_text()) == {
            "_ARRAY_DIMENSIONS": ["z"], "_nczarr_attr": {"types": {}}}
        for path in (undone / "g" / "w" / ".zattrs", undone / "g" / ".zattrs", undone / "g" / "empty" / ".zattrs"):
            path.unlink()  # no attribute, not in the root: 4.9.2 writes no .zattrs
    elif as_492 == "a scalar known by storage only":
        zarray = json.loads((undone / "sc" / ".zarray").read_text())
        assert zarray["_nczarr_array"] == {"dimrefs": [], "storage": "scalar", "scalar": 1}
        del zarray["_nczarr_array"]["scalar"]
        (undone / "sc" / ".zarray").write_text(json.dumps(zarray))
    else:
        for path in (undone / "g").rglob(".zattrs"):
            attrs = json.loads(path.read_text())
            attrs.pop("_ARRAY_DIMENSIONS", None)
            path.write_text(json.dumps(attrs))
    (undone / ".zmetadata").unlink(missing_ok=True)
    assert opened(undone).stdout != "read\n"
