"""Port of netcdf-c ``nczarr_test/run_purezarr.sh``: pure Zarr write then read, xarray and not.

Three steps of the script, each with every writer and reader (tests/netcdf_c/harness.py):
``ref_purezarr_base.cdl`` written with ``mode=zarr,noxarray`` and dumped equals ``ref_purezarr.cdl``;
written with ``mode=zarr`` equals ``ref_purezarr_xarray.cdl``; ``ref_whole.cdl`` written with
``mode=nczarr,noxarray`` and dumped with ``mode=zarr -n nczarr2zarr`` equals ``ref_nczarr2zarr.cdl``.
Comparison: ``diff -b``, as the script.
"""
from __future__ import annotations

import pytest

from tests.netcdf_c.harness import (
    NCZARR_TEST,
    READERS,
    WRITERS,
    build,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    settle,
)

KNOWN = load_known("run_purezarr")
#: step → (source CDL, store name, write mode, read mode, ncdump args, baseline)
STEPS = {
    "noxarray": ("ref_purezarr_base.cdl", "tmp_purezarr", "zarr,noxarray", "zarr,noxarray", (), "ref_purezarr.cdl"),
    "xarray": ("ref_purezarr_base.cdl", "tmp_purezarr_xarray", "zarr", "zarr", (), "ref_purezarr_xarray.cdl"),
    "nczarr2zarr": ("ref_whole.cdl", "tmp_nczarr", "nczarr,noxarray", "zarr", ("-n", "nczarr2zarr"),
                    "ref_nczarr2zarr.cdl"),
}


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("step", STEPS)
def test_purezarr(step, writer, reader, stores, request):
    """run_purezarr.sh testcase(file), one step: ``writer`` writes, ``reader`` reads, the baseline matches."""
    source, name, wmode, rmode, args, baseline = STEPS[step]
    cdl = require(NCZARR_TEST / source)
    expected = read_text(require(NCZARR_TEST / baseline))
    store, failed = stores.get(f"purezarr-{step}-{writer}", lambda tmp: build(writer, cdl, tmp, wmode, name=name))

    def outcome():
        if failed is not None:
            return failed
        return read_outcome(reader, expected, nc_url(store, f"{rmode},file"), args, ws="b")

    settle(request, outcome, KNOWN)
