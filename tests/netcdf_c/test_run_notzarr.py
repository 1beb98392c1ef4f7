"""Port of netcdf-c ``nczarr_test/run_notzarr.sh``: what is not a Zarr dataset is refused.

The script unpacks ``ref_notzarr.tar.gz`` and opens ``empty.file`` and ``notzarr.file`` with
``mode=zarr,file`` (and ``empty.zip``, ``notzarr.zip`` with ``mode=zarr,zip``) through
``test_notzarr``, which expects ``nc_open`` to fail with -51 (``NC_ENOTNC``, "Unknown file format").
Here: ncdump 4.9.0 and netCDF4-python 4.10.1 must fail to open them (ncdump exit 1; netCDF4 an
OSError); ours must refuse each in one stderr line naming the path, exit 2, no traceback (docs/commands.md).
The zips need libzip in netcdf-c: a reader's zip cells skip only when it fails to open netcdf-c's own
zip test store with netcdf-c's "not built" error (harness ``lacks_zip``).
"""
from __future__ import annotations

import pytest

from tests.conftest import require_module
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    dump,
    lacks_zip,
    load_known,
    nc_url,
    require,
    sanitised,
    settle,
    untar,
)

KNOWN = load_known("run_notzarr")
CASES = {"empty.file": "zarr,file", "notzarr.file": "zarr,file", "empty.zip": "zarr,zip", "notzarr.zip": "zarr,zip"}


def _refused(reader: str, url: str):
    if reader == "netcdf4-4.10.1":
        netCDF4 = require_module("netCDF4")
        try:
            netCDF4.Dataset(url).close()
        except OSError as exc:
            return PASS if exc.errno == -51 else sanitised(("errno", exc.errno, str(exc)), url)
        return "opened"
    done = dump(reader, url, "-h")
    if reader == "ncdump-4.9.0":
        return PASS if done.rc == 1 and "NetCDF: Unknown file format" in done.err else sanitised(done.failure, url)
    lines = done.err.strip().splitlines()
    path = url.split("#")[0].removeprefix("file://")
    ok = done.rc == 2 and len(lines) == 1 and path in lines[0] and "Traceback" not in done.err and not done.out
    return PASS if ok else sanitised((done.rc, done.err, done.out), url)


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours", "netcdf4-4.10.1"])
@pytest.mark.parametrize("case", CASES)
def test_notzarr(case, reader, tmp_path, request):
    """run_notzarr.sh: opening ``case`` fails as "not a netCDF/Zarr dataset"."""
    if case.endswith(".zip") and (why := lacks_zip(reader)):
        pytest.skip(why)  # the reader cannot open any zip store, so a refusal would say nothing
    untar(require(NCZARR_TEST / "ref_notzarr.tar.gz"), tmp_path)
    url = nc_url(tmp_path / case, CASES[case])
    settle(request, lambda: _refused(reader, url), KNOWN)
