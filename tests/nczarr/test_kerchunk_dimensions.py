"""kerchunk names a nested group's dimension by its HDF5 path from the root (``_ARRAY_DIMENSIONS: ["g1/y"]``): our
reader takes it for the netCDF dimension it names (``/g1/y``), which netCDF4-python reads in the source file.

The source is netCDF4-python's file; the references are kerchunk's own ``SingleHdf5ToZarr``; the expected
dimensions are netCDF4-python's, never our reader's.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nczarr_conformance.checker import check
from nczarr_conformance.errors import FormatError
from nczarr_conformance.nczarr.reader import read_dataset, scale_path
from nczarr_conformance.stores import open_store
from tests.conftest import require_module


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """A netCDF-4 file: /x, /g1/y, a variable /g1/g2/deep(y) on its grandparent's dimension."""
    netCDF4 = require_module("netCDF4")
    path = tmp_path / "nested.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 2)
        g1 = nc.createGroup("g1")
        g1.createDimension("y", 3)
        g1.createVariable("w", "i2", ("x", "y"))[...] = [[1, 2, 3], [4, 5, 6]]
        g1.createGroup("g2").createVariable("deep", "f8", ("y",))[...] = [0.5, 1.5, 2.5]
    return path


def _kerchunk(source: Path, out: Path) -> dict[str, str]:
    """kerchunk's references of ``source`` as JSON at ``out``; the refs themselves."""
    require_module("kerchunk")
    from kerchunk.hdf import SingleHdf5ToZarr

    refs = SingleHdf5ToZarr(str(source)).translate()
    out.write_text(json.dumps(refs))
    return refs["refs"]


def test_a_path_named_dimension_is_the_dimension_of_that_group(nested: Path, tmp_path: Path):
    netCDF4 = require_module("netCDF4")
    refs = _kerchunk(nested, tmp_path / "r.json")
    assert json.loads(refs["g1/g2/deep/.zattrs"])["_ARRAY_DIMENSIONS"] == ["g1/y"]  # kerchunk's spelling
    with netCDF4.Dataset(nested) as nc:
        deep = nc["g1/g2/deep"]
        want = [f"{d.group().path.rstrip('/')}/{d.name}" for d in deep.get_dims()]
        values = deep[...].tolist()
    ds = read_dataset(open_store(str(tmp_path / "r.json")))
    var = ds.root.groups["g1"].groups["g2"].variables["deep"]
    assert var.dimensions == want == ["/g1/y"]
    assert var.data.tolist() == values
    assert ds.root.groups["g1"].dimensions["y"].size == 3
    assert "y" not in ds.root.groups["g1"].groups["g2"].dimensions
    assert not check(str(tmp_path / "r.json")).findings


def _edited(tmp_path: Path, nested: Path, names: list[str]) -> Path:
    out = tmp_path / "e.json"
    doc = {"version": 1, "refs": _kerchunk(nested, tmp_path / "r.json")}
    doc["refs"]["g1/g2/deep/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": names})
    out.write_text(json.dumps(doc))
    return out


@pytest.mark.parametrize("names,message", [
    (["g1//y"], r"^/g1/g2/deep: dimension name 'g1//y' is not a valid netCDF name$"),
    (["top/y"], r"^/g1/g2/deep: dimension 'top/y' names group /top, which is neither the array's group /g1/g2 "
                r"nor one of its ancestors$"),
])
def test_a_path_named_dimension_outside_the_ancestors_is_one_line(nested: Path, tmp_path: Path, names, message):
    store = _edited(tmp_path, nested, names)
    with pytest.raises(FormatError, match=message):
        read_dataset(open_store(str(store)))
    found = [(f.rule, f.message) for f in check(str(store)).findings]  # nczarr-check says what the reader refuses
    assert [rule for rule, _ in found] == ["NCZ-XARRAY-DIMSIZE"]
    assert found[0][1].startswith("/g1/g2/deep: dimension ") and repr(names[0]) in found[0][1]


def test_scale_path():
    assert scale_path("g1/y") == ("/g1", "y")
    assert scale_path("/g1/g2/z") == ("/g1/g2", "z")
    with pytest.raises(FormatError):
        scale_path("g1/")
