"""Port of netcdf-c ``nczarr_test/run_unlim_io.sh``: writes into unlimited dimensions, netCDF-4 vs NCZarr.

Each case runs the script's C driver ``test_unlim_io -d D -c C -s S -e E [-v V] -Ocw`` twice, into a
netCDF-4 file and into ``mode=nczarr,file``, and compares ``ncdump -n tmp_unlim_ioN`` of both
(``diff -b``); there is no baseline file. The driver is C API: here netCDF4-python (netcdf-c 4.10.1)
does what it does (``test_utils.c``: dims ``d0…`` with 0 meaning unlimited, ``int v`` with
``_FillValue = -1``, chunks C, one ``nc_put_vars`` of E values at S: ``i`` or the constant V). The
expected text is ``ncdump`` 4.9.0 of the netCDF-4 file; the NCZarr store is written by netCDF4-python
(the script's path) and by ours from the netCDF-4 file, and read by ncdump 4.9.0 and ours.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_module, require_tool
from tests.netcdf_c.harness import (
    WriteFailed,
    load_known,
    nc_url,
    read_outcome,
    run,
    settle,
    write_ours,
)

KNOWN = load_known("run_unlim_io")
#: testcase → (-d, -c, -s, -e, -v, the script's -n name)
CASES = {
    "1": ((0,), (2,), (0,), (1,), None, "tmp_unlim_io1"),
    "2": ((0, 0), (2, 2), (0, 0), (2, 2), 17, "tmp_unlim_io2"),
    "3": ((0, 0), (2, 2), (6, 6), (2, 2), 17, "tmp_unlim_io3"),
    "4": ((8, 0), (2, 2), (6, 6), (2, 2), 17, "tmp_unlim_io3"),
}


def drive(path: str, case: str) -> None:
    """test_unlim_io -Ocw with the case's options, through netCDF4-python."""
    netCDF4 = require_module("netCDF4")
    dims, chunks, start, edges, value, _ = CASES[case]
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        names = [f"d{i}" for i in range(len(dims))]
        for name, size in zip(names, dims, strict=True):
            nc.createDimension(name, size or None)
        v = nc.createVariable("v", "i4", names, fill_value=np.int32(-1), chunksizes=chunks)
        count = int(np.prod(edges))
        data = np.full(count, value, dtype="i4") if value is not None else np.arange(count, dtype="i4")
        v[tuple(slice(s, s + e) for s, e in zip(start, edges, strict=True))] = data.reshape(edges)


def _stores(tmp, case: str) -> dict[str, object]:
    nc = tmp / f"tmp_unlim_io{case}.nc"
    drive(str(nc), case)
    out: dict[str, object] = {"nc": nc}
    store = tmp / "netcdf4" / f"tmp_unlim_io{case}.file"
    store.parent.mkdir()
    try:
        drive(nc_url(store, "nczarr,file"), case)
        out["netcdf4-4.10.1"] = store
    except Exception as exc:  # netcdf-c's error, pinned as the outcome
        out["netcdf4-4.10.1"] = ("netCDF4", type(exc).__name__, str(exc))
    ours = tmp / "ours" / f"tmp_unlim_io{case}.file"
    ours.parent.mkdir()
    try:
        write_ours(nc, nc_url(ours, "nczarr,file"))
        out["ours"] = ours
    except WriteFailed as exc:
        out["ours"] = exc.args[0]
    return out


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours"])
@pytest.mark.parametrize("writer", ["netcdf4-4.10.1", "ours"])
@pytest.mark.parametrize("case", CASES)
def test_unlim_io(case, writer, reader, stores, request):
    """run_unlim_io.sh testcaseN(file): the NCZarr store dumps as the netCDF-4 file does."""
    built, _ = stores.get(f"unlim_io-{case}", lambda tmp: _stores(tmp, case))
    name = CASES[case][5]
    expected = run([require_tool("ncdump"), "-n", name, str(built["nc"])])
    assert expected.rc == 0, expected.err
    store = built[writer]

    def outcome():
        if isinstance(store, tuple):
            return list(store)
        return read_outcome(reader, expected.out, nc_url(store, "nczarr,file"), ("-n", name), ws="b")

    settle(request, outcome, KNOWN)
