"""Port of netcdf-c ``nczarr_test/run_interop.sh``: stores written by other Zarr implementations.

The script dumps ``ncdump -h`` of ``ref_power_901_constants_orig.zip`` (unzipped, ``mode=zarr,file``;
as a zip, ``mode=xarray,zip``) and of ``ref_quotes_orig.zip`` (``mode=zarr,zip``) and compares with
``ref_power_901_constants.cdl`` / ``ref_quotes.cdl`` (``diff -b``). Readers without zip support
(netcdf-bin 4.9.0 and netCDF4-python here are built without libzip) read the zip's content unzipped,
under the name the script gives it (``ref_<base>.file``); ours reads the zip itself too.
The S3 case (``ref_zarr_test_data``, netcdf-java's store on a remote bucket) is blocked: the data
is not in netcdf-c's tree (docs/netcdf-c-tests.md).
"""
from __future__ import annotations

import shutil

import pytest

from tests.netcdf_c.harness import (
    NCZARR_TEST,
    READERS,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    settle,
    unzip,
)

KNOWN = load_known("run_interop")
#: case → (archive, baseline, store name, mode, storage)
CASES = {
    "power_901_constants-file": ("ref_power_901_constants_orig.zip", "ref_power_901_constants.cdl",
                                 "ref_power_901_constants", "zarr", "file"),
    "power_901_constants-zip": ("ref_power_901_constants_orig.zip", "ref_power_901_constants.cdl",
                                "ref_power_901_constants", "xarray", "zip"),
    "quotes-zip": ("ref_quotes_orig.zip", "ref_quotes.cdl", "ref_quotes", "zarr", "zip"),
}


CELLS = [(case, reader) for case in CASES
         for reader in READERS + (("ours-unzipped",) if CASES[case][4] == "zip" else ())]


@pytest.mark.peer
@pytest.mark.parametrize(("case", "reader"), CELLS)
def test_interop(case, reader, tmp_path, request):
    """run_interop.sh testcasefile/testcasezip: the foreign store's header equals the baseline."""
    archive, baseline, name, mode, storage = CASES[case]
    expected = read_text(require(NCZARR_TEST / baseline))
    if storage == "zip" and reader == "ours":
        zipped = tmp_path / f"{name}.zip"
        shutil.copy(require(NCZARR_TEST / archive), zipped)
        url = nc_url(zipped, f"{mode},zip")
    else:
        unzip(require(NCZARR_TEST / archive), tmp_path)
        (tmp_path / name).rename(tmp_path / f"{name}.file")
        url = nc_url(tmp_path / f"{name}.file", f"{mode},file")
    settle(request, lambda: read_outcome(reader.removesuffix("-unzipped"), expected, url, ("-h",), ws="b"),
           KNOWN)
