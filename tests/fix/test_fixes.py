"""Each fix, proven on the reader it is for: the reader fails or misreads netcdf-c 4.10.1's store before the fix
and reads, after it, the values netCDF4-python (netcdf-c 4.10.1) reads from the original; netcdf-c itself reads
the fixed store exactly as the original (storage included), except what the fix names."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nczarr_conformance.fix import fix_store
from nczarr_conformance.fix.registry import FIXES, fix
from tests.conftest import require_module
from tests.fix.helpers import (
    c410,
    copy,
    nc_read,
    ours_without_dims,
    same_to_netcdf_c,
    url,
    zarray,
)

pytestmark = pytest.mark.peer


def _values(path, name: str, mode: str = "nczarr"):
    return nc_read(path, mode).root.variables[name].data


def _zarr(path, name: str, group: str = ""):
    zarr = require_module("zarr")
    return zarr.open_group(str(path), path=group, mode="r", zarr_format=2)[name]


def _ts(path, array: str):
    ts = require_module("tensorstore")
    return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}, "path": array},
                   read=True).result()


def _ids(result) -> set[str]:
    return {c.fix for c in result.plan.changes}


def test_byte_dtype(tmp_path):
    store = c410(tmp_path / "n.file", byte=True)
    orig = copy(store, "orig")
    with pytest.raises(ValueError, match=r"No Zarr data type found that matches \{'name': '<i1'"):
        _zarr(store, "b")[...]
    result = fix_store(str(store), targets="zarr-python", backup=False)
    assert _ids(result) == {"NCZ-FIX-BYTE-DTYPE", "NCZ-FIX-CONSOLIDATE"}
    assert zarray(store, "b")["dtype"] == "|i1" and zarray(store, "ub")["dtype"] == "|u1"
    for name in ("b", "ub"):
        assert _zarr(store, name)[...].tolist() == _values(orig, name).tolist()
    assert same_to_netcdf_c(orig, store) == []


def test_shuffle_elementsize_is_metadata_only(tmp_path):
    store = c410(tmp_path / "n.file", shuffle=True)
    orig = copy(store, "orig")
    expected = _values(orig, "i").tolist()
    assert expected == [0, 1000, -2000, 3000]
    assert _zarr(store, "i")[...].tolist() != expected  # numcodecs takes elementsize 0 as "no shuffle"
    fix_store(str(store), targets="zarr-python", backup=False)
    assert zarray(store, "i")["filters"] == [{"id": "shuffle", "elementsize": 4}]
    assert _zarr(store, "i")[...].tolist() == expected
    for chunk in ("0", "1"):
        assert (store / "i" / chunk).read_bytes() == (orig / "i" / chunk).read_bytes()
    assert same_to_netcdf_c(orig, store) == []


def test_no_filters_reencodes_for_tensorstore(tmp_path):
    store = c410(tmp_path / "n.file", shuffle=True)
    orig = copy(store, "orig")
    with pytest.raises(ValueError, match="filters are not supported"):
        _ts(store, "i")
    result = fix_store(str(store), targets="tensorstore", backup=False)
    assert _ids(result) == {"NCZ-FIX-NO-FILTERS"} and len(result.plan.chunk_keys()) == 2
    assert zarray(store, "i")["filters"] is None and zarray(store, "i")["compressor"]["id"] == "zlib"
    assert _ts(store, "i").read().result().tolist() == _values(orig, "i").tolist()
    differences = same_to_netcdf_c(orig, store)
    assert differences and all("/filters" in d for d in differences), differences  # the shuffle, and nothing else


def test_string_fill_for_tensorstore(tmp_path):
    store = c410(tmp_path / "n.file", char=True, string=True)
    orig = copy(store, "orig")
    assert zarray(store, "c")["fill_value"] == "" and zarray(store, "s")["fill_value"] == ""
    for name, width in (("c", 1), ("s", 128)):
        with pytest.raises(ValueError, match=f"Expected {width} base64-encoded bytes"):
            _ts(store, name)
    fix_store(str(store), targets="tensorstore", backup=False)
    assert zarray(store, "c")["fill_value"] is None and zarray(store, "s")["fill_value"] is None
    assert _ts(store, "c").shape == (4, 3, 1) and _ts(store, "s").shape == (4, 128)  # |Sn as n bytes
    # the never-written rows read the same empty fill; netcdf-c reports a null fill_value as NOFILL, though
    # (no fill_value netcdf-c and TensorStore both read as "" exists: TensorStore wants base64, which
    # netcdf-c takes as the text "AA==" for char): the trade-off docs/nczarr-fix.md states
    assert same_to_netcdf_c(orig, store) == ["/root/variables/c/no_fill: false != true",
                                             "/root/variables/s/no_fill: false != true"]
    assert _values(store, "c").tolist() == _values(orig, "c").tolist()


def test_fill_exact_from_the_default(tmp_path):
    netCDF4 = require_module("netCDF4")
    store = c410(tmp_path / "n.file", partial_double=True)
    orig = copy(store, "orig")
    default = float(netCDF4.default_fillvals["f8"])
    assert _zarr(store, "d")[...].tolist() == [1.5, 9.96921e36, 9.96921e36, 9.96921e36]
    result = fix_store(str(store), targets="zarr-python", backup=False)
    assert "NCZ-FIX-FILL-EXACT" in _ids(result)
    assert _zarr(store, "d")[...].tolist() == [1.5, default, default, default]
    with netCDF4.Dataset(url(orig)) as nc:  # before: netcdf-c does not take its own rounded fill for the fill
        assert np.ma.count_masked(nc["d"][:]) == 0
    with netCDF4.Dataset(url(store)) as nc:  # after: the unwritten cells are fill
        assert nc["d"][:].mask.tolist() == [False, True, True, True]


def test_fill_exact_from_the_fill_value_attribute(tmp_path):
    store = c410(tmp_path / "n.file", partial_double=True)
    doc = zarray(store, "d")
    attrs = json.loads((store / "d" / ".zattrs").read_text())
    attrs["_FillValue"] = -1.25
    attrs["_nczarr_attr"]["types"]["_FillValue"] = "<f8"
    (store / "d" / ".zattrs").write_text(json.dumps(attrs))
    assert doc["fill_value"] == 9.96921e36
    fix_store(str(store), targets="zarr-python", backup=False)
    assert zarray(store, "d")["fill_value"] == -1.25
    assert _zarr(store, "d")[...].tolist() == [1.5, -1.25, -1.25, -1.25]
    assert _values(store, "d").tolist() == [1.5, -1.25, -1.25, -1.25]  # netcdf-c reads the same


def test_char_attribute_text(tmp_path):
    store = c410(tmp_path / "n.file", answer=True)
    zarr = require_module("zarr")
    assert zarr.open_group(str(store), mode="r", zarr_format=2).attrs["answer"] == 42
    assert nc_read(store).root.attributes["answer"].value == "4"  # netcdf-c's own misreading
    fix_store(str(store), targets="zarr-python", backup=False)
    assert zarr.open_group(str(store), mode="r", zarr_format=2).attrs["answer"] == "42"
    assert nc_read(store).root.attributes["answer"].value == "42"  # what was written


def test_array_dimensions_in_every_group(tmp_path):
    xr = require_module("xarray")
    store = ours_without_dims(tmp_path / "o.file")
    orig = copy(store, "orig")
    for group in (None, "g"):
        with pytest.raises(KeyError, match="_ARRAY_DIMENSIONS"):
            xr.open_zarr(str(store), group=group, consolidated=False, zarr_format=2)
    fix_store(str(store), targets="xarray", backup=False)
    root = xr.open_zarr(str(store), consolidated=True, zarr_format=2)
    sub = xr.open_zarr(str(store), group="g", consolidated=True, zarr_format=2)
    assert root["v"].dims == ("x",) and sub["w"].dims == ("y", "x")
    assert root["v"].values.tolist() == _values(orig, "v").tolist()
    assert sub["w"].values.tolist() == nc_read(orig).root.groups["g"].variables["w"].data.tolist()
    assert same_to_netcdf_c(orig, store) == []


def test_array_dimensions_pure_zarr_as_netcdf_c_names_them(tmp_path):
    zarr = require_module("zarr")
    xr = require_module("xarray")
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w", zarr_format=2)
    g.create_array("a", shape=(3,), dtype="<i4", fill_value=0)[...] = [4, 5, 6]
    orig = copy(tmp_path / "z.zarr", "orig")
    with pytest.raises(KeyError, match="_ARRAY_DIMENSIONS"):
        xr.open_zarr(str(tmp_path / "z.zarr"), consolidated=False, zarr_format=2)
    fix_store(str(tmp_path / "z.zarr"), targets="xarray", backup=False)
    ds = xr.open_zarr(str(tmp_path / "z.zarr"), zarr_format=2)
    before, after = nc_read(orig, "zarr"), nc_read(tmp_path / "z.zarr", "zarr")
    assert ds["a"].dims == tuple(before.root.variables["a"].dimensions[0].split("/")[-1:]) == ("_Anonymous_Dim_3",)
    assert ds["a"].values.tolist() == before.root.variables["a"].data.tolist() == [4, 5, 6]
    assert after.root.variables["a"].dimensions == before.root.variables["a"].dimensions


def test_stale_zmetadata_is_rebuilt(tmp_path):
    zarr = require_module("zarr")
    store = c410(tmp_path / "n.file", byte=True)
    fix_store(str(store), backup=False)
    # a later writer that knows nothing of .zmetadata (netcdf-c) changes .zattrs: .zmetadata is stale
    attrs = json.loads((store / "b" / ".zattrs").read_text())
    attrs["units"] = "m"
    (store / "b" / ".zattrs").write_text(json.dumps(attrs))
    from nczarr_conformance.checker import check

    findings = [f for f in check(str(store)).findings if f.rule == "NCZ-CONSOLIDATED-MATCH"]
    assert findings and findings[0].fix == "NCZ-FIX-CONSOLIDATE"
    assert "units" not in zarr.open_consolidated(str(store), zarr_format=2)["b"].attrs  # the stale view
    result = fix_store(str(store), targets="tensorstore", backup=False)  # a stale one goes whatever --for says
    assert "NCZ-FIX-CONSOLIDATE" in _ids(result)
    assert zarr.open_consolidated(str(store), zarr_format=2)["b"].attrs["units"] == "m"
    assert not [f for f in check(str(store)).findings if f.rule == "NCZ-CONSOLIDATED-MATCH"]


def test_upper_case_layout_netcdf_c_490_reads_the_same(tmp_path):
    import subprocess

    from nczarr_conformance.model import Dataset, Dimension, Group, Variable
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores import DirectoryStore
    from tests.conftest import require_tool

    ncdump = require_tool("ncdump")
    root = Group({"x": Dimension(3)})
    root.variables["v"] = Variable("int", ["/x"], (3,), {}, np.array([1, 2, 3], "i4"))
    with DirectoryStore(tmp_path / "u.file", "w") as st:
        write_dataset(Dataset(root), st, flavor="nczarr-2-upper", xarray=False)
    before = subprocess.run([ncdump, url(tmp_path / "u.file")], capture_output=True, text=True).stdout
    result = fix_store(str(tmp_path / "u.file"), backup=False)
    assert "NCZ-FIX-ARRAY-DIMENSIONS" in _ids(result)
    after = subprocess.run([ncdump, url(tmp_path / "u.file")], capture_output=True, text=True).stdout
    assert after == before and "v = 1, 2, 3" in after


def test_registry_refuses_duplicates_and_unknown_readers():
    with pytest.raises(ValueError, match="registered twice"):
        fix("NCZ-FIX-BYTE-DTYPE", readers=("zarr-python",))(lambda ctx: iter(()))
    with pytest.raises(ValueError, match="readers must be"):
        fix("NCZ-FIX-NEW-ONE", readers=("netcdf-java",))(_documented)
    with pytest.raises(ValueError, match="docstring"):
        fix("NCZ-FIX-NEW-TWO", readers=("xarray",))(lambda ctx: iter(()))
    assert "NCZ-FIX-NEW-ONE" not in FIXES and "NCZ-FIX-NEW-TWO" not in FIXES



def test_registry_takes_readers_and_cures_by_name_only():
    """readers and cures are both tuples of names: given by position they could be swapped unnoticed, so @fix takes
    everything after the id by name (registry.py's documented form ``@fix("NCZ-FIX-…", readers=…, cures=…)``)."""
    with pytest.raises(TypeError):
        fix("NCZ-FIX-NEW-THREE", ("xarray",))  # type: ignore[misc]
    assert "NCZ-FIX-NEW-THREE" not in FIXES

def _documented(ctx):
    """Documented."""
    return iter(())


def test_every_fix_cures_a_rule_nczarr_check_has():
    from nczarr_conformance.checker import RULES

    for f in FIXES.values():
        assert f.cures and set(f.cures) <= set(RULES), f.id


def test_ncgen_490_output(tmp_path):
    """netcdf-c 4.9.0's own output (upper-case keys, no _ARRAY_DIMENSIONS in sub-groups, %g fill): ncdump 4.9.0
    prints the same after the fix, and xarray reads the sub-group as before (it falls back on _NCZARR_ARRAY's
    dimrefs there), now from its own _ARRAY_DIMENSIONS."""
    import subprocess

    from tests.conftest import require_tool

    xr = require_module("xarray")
    ncgen, ncdump = require_tool("ncgen"), require_tool("ncdump")
    cdl = tmp_path / "t.cdl"
    cdl.write_text("netcdf t {\ndimensions: x = 3 ;\nvariables: int v(x) ;\ndata: v = 1, 2, 3 ;\n"
                   "group: g {\n dimensions: y = 2 ;\n variables: double w(y, x) ;\n"
                   " data: w = 1, 2, 3, 4, 5, 6 ;\n}\n}\n")
    store = tmp_path / "g.file"
    subprocess.run([ncgen, "-4", "-b", "-o", url(store), str(cdl)], check=True, capture_output=True)
    before = subprocess.run([ncdump, url(store)], capture_output=True, text=True, check=True).stdout
    seen = xr.open_zarr(str(store), group="g", consolidated=False, zarr_format=2, mask_and_scale=False)["w"]
    zattrs = store / "g" / "w" / ".zattrs"
    assert not zattrs.exists() or "_ARRAY_DIMENSIONS" not in zattrs.read_text()
    result = fix_store(str(store), backup=False)
    assert {"NCZ-FIX-ARRAY-DIMENSIONS", "NCZ-FIX-FILL-EXACT"} <= _ids(result)
    assert subprocess.run([ncdump, url(store)], capture_output=True, text=True, check=True).stdout == before
    w = xr.open_zarr(str(store), group="g", zarr_format=2, mask_and_scale=False)["w"]
    assert w.dims == seen.dims == ("y", "x") and w.values.tolist() == seen.values.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert json.loads((store / "g" / "w" / ".zattrs").read_text())["_ARRAY_DIMENSIONS"] == ["y", "x"]


def test_docs_list_every_fix_in_run_order():
    import re

    from tests.conftest import REPO

    page = (REPO / "docs" / "nczarr-fix.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(NCZ-FIX-[A-Z0-9-]+)` \| ([^|]+) \|", page, flags=re.M)
    assert [fid for fid, _ in listed] == list(FIXES)
