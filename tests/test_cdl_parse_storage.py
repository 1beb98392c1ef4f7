"""CDL parsing: ncdump -s storage facts as netCDF4-python reports them, and CDL met in netcdf-c's baselines.

The expected storage comes from netCDF4-python (netcdf-c 4.10.1) reading the same file; the CDL is
Debian's ncdump 4.9.0 ``-s`` output for it.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from nczarr_conformance.cdl.parse import parse_cdl, storage_stated
from nczarr_conformance.model import STORAGE_FIELDS, diff
from nczarr_conformance.peers import netcdf4
from tests.conftest import require_module, require_tool

netCDF4 = require_module("netCDF4")
pytestmark = pytest.mark.peer


@pytest.fixture(scope="module")
def storage_nc(tmp_path_factory):
    """Every storage fact ncdump -s prints for a netCDF-4 file."""
    path = tmp_path_factory.mktemp("cdl") / "storage.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 8)
        nc.createDimension("y", 4)
        grid = np.arange(32, dtype="i4").reshape(8, 4)
        nc.createVariable("all", ">i4", ("x", "y"), zlib=True, complevel=3, shuffle=True, chunksizes=(4, 2),
                          fletcher32=True, endian="big")[:] = grid
        nc.createVariable("contig", "f8", ("x",), contiguous=True)[:] = np.arange(8.0)
        nc.createVariable("nofill", "i2", ("x",), fill_value=False, chunksizes=(4,))[:] = np.arange(8)
        nc.createVariable("zstd", "i4", ("x",), compression="zstd", complevel=2)[:] = np.arange(8)
        nc.createVariable("bz2", "f4", ("x",), compression="bzip2", complevel=9, shuffle=True)[:] = np.arange(8)
        nc.createVariable("bytes", "u1", ("x",), chunksizes=(2,))[:] = np.arange(8)
        nc.createVariable("text", "S1", ("y",))[:] = np.array([b"a", b"b", b"c", b"d"])
    return path


def test_ncdump_s_storage_equals_netcdf4_python(storage_nc):
    text = subprocess.run([require_tool("ncdump"), "-s", "-p", "9,17", str(storage_nc)], capture_output=True,
                          text=True, check=True, timeout=60).stdout
    assert storage_stated(text) == {"chunks", "no_fill", "endianness", "filters"}
    _, parsed = parse_cdl(text)
    expected = netcdf4.read(str(storage_nc))
    assert expected.root.variables["all"].filters == [{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 3},
                                                      {"id": "fletcher32"}]  # the peer states what we compare
    assert diff(parsed, expected, ignore={"order": "netCDF-4 has no Zarr order",
                                          "dimension_separator": "netCDF-4 has no Zarr chunk keys"}) == []


def test_without_s_no_storage_is_stated():
    text = "netcdf x { dimensions: x = 2 ; variables: int v(x) ; data: v = 1, 2 ; }"
    assert storage_stated(text) == frozenset()
    var = parse_cdl(text)[1].root.variables["v"]
    assert (var.chunks, var.filters, var.endianness, var.no_fill) == (None, None, None, False)


def test_codecs_list_wins_over_the_flags():
    text = ('netcdf x { dimensions: x = 4 ; variables: float v(x) ; v:_Storage = "chunked" ; v:_ChunkSizes = 2 ; '
            'v:_Shuffle = "true" ; v:_DeflateLevel = 1 ; '
            'v:_Codecs = "[{\\"id\\": \\"shuffle\\", \\"elementsize\\": 4},'
            '{\\"id\\": \\"zlib\\", \\"level\\": 1}]" ; }')
    var = parse_cdl(text)[1].root.variables["v"]
    assert var.filters == [{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 1}]
    assert var.chunks == [2]
    assert storage_stated(text) == STORAGE_FIELDS - {"endianness", "order", "dimension_separator"}


def test_global_attribute_right_after_dimensions():
    """ncdump -s of a root group with dimensions and no variables: ``:_NCProperties`` follows the dimensions."""
    text = ('netcdf b {\ndimensions:\n\td = 20 ;\n\n'
            '// global attributes:\n\t\t:_Format = "netCDF-4" ;\n\t\t:t = "x" ;\n}\n')
    _, model = parse_cdl(text)
    assert (list(model.root.dimensions), model.root.attributes["t"].value) == (["d"], "x")


# ---- CDL met in netcdf-c's baselines (tests/netcdf_c/) ----


def test_global_attributes_right_after_dimensions():
    # ncdump/expected/ref_tst_solar_1.dmp: a root with dimensions, no variables, then global attributes
    text = "netcdf x {\ndimensions:\n\td = 2 ;\n\n// global attributes:\n\t\t:n = 2UB, 23UB ;\n\t\tubyte :m = 1 ;\n}\n"
    root = parse_cdl(text)[1].root
    assert root.dimensions["d"].size == 2
    assert (root.attributes["n"].type, root.attributes["n"].value.tolist()) == ("ubyte", [2, 23])
    assert root.attributes["m"].type == "ubyte"


RAGGED = """netcdf r {
dimensions:
\ta = UNLIMITED ; // (2 currently)
\tb = UNLIMITED ; // (3 currently)
\tc = 2 ;
variables:
\tint v(a, b) ;
\tchar w(a, c, b) ;
data:

 v = {1}, {4, 5, 6} ;

 w = {"ab", "c"}, {"xyz"} ;
}
"""


def test_braces_of_several_unlimited_dimensions_read_as_ncgen_reads_them():
    # what ncgen 4.9.0 builds from RAGGED, read back by netCDF4-python (checked against the peer below)
    root = parse_cdl(RAGGED)[1].root
    assert root.variables["v"].data.tolist() == [[1, -2147483647, -2147483647], [4, 5, 6]]
    assert root.variables["w"].data.tolist() == [[[b"a", b"b", b"c"], [b"x", b"y", b"z"]],
                                                 [[b"", b"", b""], [b"", b"", b""]]]


@pytest.mark.peer
def test_braces_match_ncgen(tmp_path):
    netCDF4 = require_module("netCDF4")
    from tests.conftest import require_tool

    (tmp_path / "r.cdl").write_text(RAGGED)
    subprocess.run([require_tool("ncgen"), "-4", "-b", "-o", str(tmp_path / "r.nc"), str(tmp_path / "r.cdl")],
                   check=True)
    root = parse_cdl(RAGGED)[1].root
    with netCDF4.Dataset(tmp_path / "r.nc") as nc:
        for name in ("v", "w"):
            var = nc[name]
            var.set_auto_mask(False)
            if name == "w":
                var.set_auto_chartostring(False)
            assert var[:].tolist() == root.variables[name].data.tolist()
