"""CDL parsing cases met in netcdf-c's baselines (tests/netcdf_c/)."""
from __future__ import annotations

from nczarr_conformance.cdl_parse import parse_cdl


def test_global_attributes_right_after_dimensions():
    # ncdump/expected/ref_tst_solar_1.dmp: a root with dimensions, no variables, then global attributes
    text = "netcdf x {\ndimensions:\n\td = 2 ;\n\n// global attributes:\n\t\t:n = 2UB, 23UB ;\n\t\tubyte :m = 1 ;\n}\n"
    root = parse_cdl(text)[1].root
    assert root.dimensions["d"].size == 2
    assert (root.attributes["n"].type, root.attributes["n"].value.tolist()) == ("ubyte", [2, 23])
    assert root.attributes["m"].type == "ubyte"
