"""Port of netcdf-c ``nczarr_test/run_fillonlyz.sh``: a variable with a fill value that is never written.

The script builds ``ref_fillonly.cdl`` (``f`` has ``_FillValue = -9999.f`` and no data) into
``mode=nczarr,file`` and runs ``test_fillonlyz``, which reads ``f`` as int and as float and requires
the two to agree (both the fill, -9999). Here each writer builds the store and each reader must
give ``f`` as six fills: ``f = _, _, _, _, _, _ ;`` in the dump (ncdump prints a fill as ``_``), and
-9999 six times through netCDF4-python unmasked.
"""
from __future__ import annotations

import re

import pytest

from tests.conftest import require_module
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    READERS,
    WRITERS,
    build,
    dump,
    load_known,
    nc_url,
    require,
    sanitised,
    settle,
)

KNOWN = load_known("run_fillonlyz")


def _read(reader: str, url: str):
    if reader == "netcdf4-4.10.1":
        netCDF4 = require_module("netCDF4")
        with netCDF4.Dataset(url) as nc:
            v = nc["f"]
            v.set_auto_mask(False)
            got = v[:].tolist()
        return PASS if got == [-9999.0] * 6 else got
    done = dump(reader, url, "-v", "f")
    if done.rc:
        return sanitised(done.failure, url)
    m = re.search(r"^\s*f = (.*?) ;", done.out, flags=re.M)
    return PASS if m and m.group(1) == "_, _, _, _, _, _" else (m.group(0) if m else done.out)


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_fillonly(writer, reader, stores, request):
    """run_fillonlyz.sh: the never-written ``f`` reads as its fill everywhere."""
    cdl = require(NCZARR_TEST / "ref_fillonly.cdl")
    store, failed = stores.get(f"fillonlyz-{writer}",
                               lambda tmp: build(writer, cdl, tmp, "nczarr", name="tmp_fillonly"))
    settle(request, lambda: failed if failed is not None else _read(reader, nc_url(store, "nczarr,file")), KNOWN)
