"""CDL parsing cases met in netcdf-c's baselines (tests/netcdf_c/)."""
from __future__ import annotations

import subprocess

import pytest

from nczarr_conformance.cdl_parse import parse_cdl


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
    netCDF4 = pytest.importorskip("netCDF4")
    from tests.conftest import need_tool

    (tmp_path / "r.cdl").write_text(RAGGED)
    subprocess.run([need_tool("ncgen"), "-4", "-b", "-o", str(tmp_path / "r.nc"), str(tmp_path / "r.cdl")], check=True)
    root = parse_cdl(RAGGED)[1].root
    with netCDF4.Dataset(tmp_path / "r.nc") as nc:
        for name in ("v", "w"):
            var = nc[name]
            var.set_auto_mask(False)
            if name == "w":
                var.set_auto_chartostring(False)
            assert var[:].tolist() == root.variables[name].data.tolist()
