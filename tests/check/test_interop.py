"""Each interop prediction of nczarr-check, backed by running that peer on such a dataset."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.check import RULES, check
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.nczarr.attrs import json_attributes
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.urls import to_file_url
from tests.conftest import need_tool

pytestmark = pytest.mark.peer


def _upper(tmp_path: Path, name: str = "u.file") -> Path:
    """A dataset netcdf-c 4.9.0 reads, to break in exactly one way."""
    root = Group({"x": Dimension(4)})
    root.variables["v"] = Variable("int", ["/x"], (4,), {}, np.arange(4, dtype="i4"))
    root.variables["c"] = Variable("char", ["/x"], (4,), {}, np.array([b"a", b"b", b"c", b"d"], dtype="S1"))
    path = tmp_path / name
    with DirectoryStore(path, "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    return path


def _edit(path: Path, key: str, change) -> None:
    doc = json.loads((path / key).read_text())
    change(doc)
    (path / key).write_text(json.dumps(doc))


def _ncdump(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([need_tool("ncdump"), to_file_url(str(path), "file")], capture_output=True, text=True,
                          timeout=60)


def _rules(path: Path) -> set[str]:
    return {f.rule for f in check(str(path), deep=True).findings}


def test_the_base_is_read_by_490(tmp_path):
    out = _ncdump(_upper(tmp_path))
    assert out.returncode == 0 and " v = 0, 1, 2, 3 ;" in out.stdout
    assert not {r for r in _rules(_upper(tmp_path, "b.file")) if r.startswith("NCZ-INTEROP-C490")}


def test_c490_unlimited(tmp_path):
    path = _upper(tmp_path)
    _edit(path, ".zgroup", lambda d: d["_NCZARR_GROUP"]["dims"].update(x={"size": 4, "unlimited": 1}))
    assert "NCZ-INTEROP-C490-UNLIMITED" in _rules(path)
    out = _ncdump(path)
    assert out.returncode != 0 or " v = 0, 1, 2, 3 ;" not in out.stdout


def test_c490_string(tmp_path):
    path = _upper(tmp_path)
    _edit(path, "c/.zarray", lambda d: d.update(dtype="|S4", chunks=[4]))
    (path / "c" / "0").write_bytes(b"abcd" * 4)
    assert "NCZ-INTEROP-C490-STRING" in _rules(path)
    assert _ncdump(path).returncode != 0


def test_c490_scalar(tmp_path):
    ncgen = need_tool("ncgen")
    (tmp_path / "s.cdl").write_text("netcdf s { variables: double sc ; data: sc = 2.5 ; }")
    url = to_file_url(str(tmp_path / "s.file"), "file")
    subprocess.run([ncgen, "-4", "-b", "-o", url, str(tmp_path / "s.cdl")], check=True, capture_output=True)
    assert "NCZ-INTEROP-C490-SCALAR" in _rules(tmp_path / "s.file")
    assert _ncdump(tmp_path / "s.file").returncode != 0


def test_c490_codec(tmp_path):
    import zlib

    path = _upper(tmp_path)
    _edit(path, "v/.zarray", lambda d: d.update(compressor={"id": "zlib", "level": 1}))
    (path / "v" / "0").write_bytes(zlib.compress((path / "v" / "0").read_bytes(), 1))
    assert "NCZ-INTEROP-C490-CODEC" in _rules(path)
    out = _ncdump(path)
    assert " v = 0, 1, 2, 3 ;" not in out.stdout  # compressed bytes shown as data, or a failure


def test_c490_char(tmp_path):
    path = _upper(tmp_path)
    _edit(path, "c/.zarray", lambda d: d.update(dtype=">S1"))
    assert "NCZ-INTEROP-C490-CHAR" in _rules(path)
    assert _ncdump(path).returncode != 0


def test_c410_u1char(tmp_path):
    path = _upper(tmp_path)
    assert "NCZ-INTEROP-C410-U1CHAR" in _rules(path)
    with pytest.raises(Exception):
        netcdf4.read(to_file_url(str(path), "file"))


def test_c410_upper(tmp_path):
    root = Group({"x": Dimension(2)}, attributes={"s": Attribute("short", np.array([1]))})
    root.groups["g"] = Group({"y": Dimension(3)})
    root.groups["g"].variables["w"] = Variable("int", ["/g/y"], (3,), {}, np.arange(3, dtype="i4"))
    with DirectoryStore(tmp_path / "up.file", "w") as store:
        write_dataset(Dataset(root), store, flavor="nczarr-2-upper")
    assert "NCZ-INTEROP-C410-UPPER" in _rules(tmp_path / "up.file")
    theirs = netcdf4.read(to_file_url(str(tmp_path / "up.file"), "file"))
    assert theirs.root.attributes["s"].type != "short" or theirs.root.groups["g"].dimensions == {}


def test_c410_jsonchar(tmp_path):
    model = Dataset(Group(attributes={"answer": Attribute("char", "42")}))
    with DirectoryStore(tmp_path / "j.file", "w") as store, json_attributes("spec"):  # the default writes "42"
        write_dataset(model, store)
    assert "NCZ-INTEROP-C410-JSONCHAR" in _rules(tmp_path / "j.file")
    assert netcdf4.read(to_file_url(str(tmp_path / "j.file"), "file")).root.attributes["answer"].value == "4"


def test_c410_zarrscalar(tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=2)
    g.create_array("s", shape=(), dtype="<f8", fill_value=0.0)[...] = 1.25
    assert "NCZ-INTEROP-C410-ZARRSCALAR" in _rules(tmp_path / "s.zarr")
    assert "s" not in netcdf4.read(to_file_url(str(tmp_path / "s.zarr"), "file", "zarr")).root.variables


def test_c410_bigendian(tmp_path):
    root = Group({"x": Dimension(4)})
    root.variables["v"] = Variable("double", ["/x"], (4,), {"_FillValue": Attribute("double", np.array([1.5]))},
                                   np.full(4, 1.5), chunks=[2], endianness="big")
    with DirectoryStore(tmp_path / "be.file", "w") as store:
        write_dataset(Dataset(root), store)
    assert "NCZ-INTEROP-C410-BIGENDIAN" not in _rules(tmp_path / "be.file")  # we write every chunk
    (tmp_path / "be.file" / "v" / "1").unlink()
    assert "NCZ-INTEROP-C410-BIGENDIAN" in _rules(tmp_path / "be.file")
    data = netcdf4.read(to_file_url(str(tmp_path / "be.file"), "file")).root.variables["v"].data
    assert data.tolist()[2:] != [1.5, 1.5]


def test_zarr_char_and_i1(tmp_path):
    zarr = pytest.importorskip("zarr")
    root = Group({"x": Dimension(2)})
    root.variables["c"] = Variable("char", ["/x"], (2,), {}, np.array([b"a", b"b"], dtype="S1"))
    root.variables["b"] = Variable("byte", ["/x"], (2,), {}, np.array([1, -1], dtype="i1"))
    netcdf4.write(Dataset(root), to_file_url(str(tmp_path / "n.file"), "file"))
    rules = _rules(tmp_path / "n.file")
    assert {"NCZ-INTEROP-ZARR-CHAR", "NCZ-INTEROP-ZARR-I1"} <= rules
    group = zarr.open_group(str(tmp_path / "n.file"), mode="r", zarr_format=2)
    for name in ("c", "b"):
        with pytest.raises(ValueError):
            group[name][...]


def test_shuffle0(tmp_path):
    zarr = pytest.importorskip("zarr")
    root = Group({"x": Dimension(8)})
    root.variables["i"] = Variable("int", ["/x"], (8,), {}, np.arange(8, dtype="i4") * 1000,
                                   filters=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1}])
    netcdf4.write(Dataset(root), to_file_url(str(tmp_path / "s.file"), "file"))
    assert "NCZ-INTEROP-SHUFFLE0" in _rules(tmp_path / "s.file")
    values = zarr.open_group(str(tmp_path / "s.file"), mode="r", zarr_format=2)["i"][...]
    assert values.tolist() != (np.arange(8) * 1000).tolist()


def test_xarray_nodims(tmp_path):
    zarr = pytest.importorskip("zarr")
    xr = pytest.importorskip("xarray")
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w", zarr_format=2)
    g.create_array("a", shape=(3,), dtype="<i4", fill_value=0)[...] = 1
    assert "NCZ-INTEROP-XARRAY-NODIMS" in _rules(tmp_path / "z.zarr")
    with pytest.raises(Exception):
        xr.open_zarr(str(tmp_path / "z.zarr"), consolidated=False, zarr_format=2)


def test_every_interop_rule_is_backed_here():
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    interop = {rid for rid in RULES if rid.startswith("NCZ-INTEROP-")}
    assert {rid for rid in interop if f'"{rid}"' in source} == interop
