"""The matrix sees a reserved NCZarr name that a reader shows as a user attribute (issue 34).

No intended model holds a ``_nczarr*`` attribute, so the matrix's netcdf-c reader keeps what netcdf-c 4.10.1 shows
and the cell's comparison names the leak. The store is our writer's output of the long-string case with the
``_nczarr_maxstrlen`` our writer wrote before issue 34 put back; netCDF4-python itself shows it (asserted raw).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import _write_one, compare, view_params
from nczarr_conformance.peers.base import PEERS

pytestmark = pytest.mark.peer


def _cell_differences(url: str) -> list[str]:
    ours, netcdf_c = PEERS["ours"], PEERS["netcdf-c-4.10"]
    return compare(BY_ID["long-string"].model(), netcdf_c.read(url), view_params(ours, netcdf_c))


def test_a_reserved_name_netcdf_c_shows_is_a_difference_of_the_cell(tmp_path: Path) -> None:
    netCDF4 = pytest.importorskip("netCDF4")
    if PEERS["netcdf-c-4.10"].available():
        pytest.skip(str(PEERS["netcdf-c-4.10"].available()))
    written = _write_one(BY_ID["long-string"], PEERS["ours"], None, tmp_path)
    assert written.status == "ok" and written.url is not None
    assert _cell_differences(written.url) == []  # our output leaks nothing
    zattrs = Path(written.url) / "s" / ".zattrs"
    doc = json.loads(zattrs.read_text())
    doc["_nczarr_maxstrlen"] = 200
    doc["_nczarr_attr"]["types"]["_nczarr_maxstrlen"] = "<i4"
    zattrs.write_text(json.dumps(doc))
    (Path(written.url) / ".zmetadata").unlink(missing_ok=True)
    with netCDF4.Dataset(f"file://{written.url}#mode=nczarr,file") as nc:
        assert nc["s"].ncattrs() == ["_nczarr_maxstrlen"]  # what netcdf-c shows the user
    assert _cell_differences(written.url) == ["/root/variables/s/attributes/_nczarr_maxstrlen: only in second"]
