"""Port of netcdf-c ``nczarr_test/run_corrupt.sh``: stores netcdf-c once mis-read.

- ``test_numpy_scalars`` (netcdf-c #3108): a consolidated store of two Zarr scalars (``shape: []``),
  written by the script as ``numpy_scalars.zarr/.zmetadata``; ``ncdump -h`` with
  ``mode=zarr,file,consolidated`` equals the script's expected text (``diff -w``). Its nccopy-to-netCDF
  leg needs the store read first, so it is the same check.
- ``testnoshape1``: ``ref_noshape.file.zip`` unzipped, dumped with ``mode=zarr,file``: the script only
  requires the dump to succeed (``set -e``).
- ``testnoshape2`` reads a Google Cloud bucket: blocked (network).
"""
from __future__ import annotations

import json

import pytest

from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    dump,
    load_known,
    nc_url,
    read_outcome,
    require,
    sanitised,
    settle,
    unzip,
)

KNOWN = load_known("run_corrupt")
ZMETADATA = {
    "metadata": {
        ".zgroup": {"zarr_format": 2},
        "float_scalar/.zarray": {"chunks": [], "compressor": None, "dtype": "<f8", "fill_value": 0.0, "filters": None,
                                 "order": "C", "shape": [], "zarr_format": 2},
        "int_scalar/.zarray": {"chunks": [], "compressor": None, "dtype": "<i8", "fill_value": 0, "filters": None,
                               "order": "C", "shape": [], "zarr_format": 2},
    },
    "zarr_consolidated_format": 1,
}
EXPECTED = """netcdf numpy_scalars {
variables:
   double float_scalar ;
           float_scalar:_FillValue = 0. ;
   int64 int_scalar ;
           int_scalar:_FillValue = 0LL ;
}
"""


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours", "netcdf4-4.10.1"])
def test_numpy_scalars(reader, tmp_path, request):
    """run_corrupt.sh test_numpy_scalars: Zarr scalars in a consolidated store are listed as netCDF scalars."""
    store = tmp_path / "numpy_scalars.zarr"
    store.mkdir()
    (store / ".zmetadata").write_text(json.dumps(ZMETADATA, indent=4))  # the script writes only .zmetadata
    url = nc_url(store, "zarr,file,consolidated")
    settle(request, lambda: read_outcome(reader, EXPECTED, url, ("-h",), ws="w"), KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours"])
def test_noshape1(reader, tmp_path, request):
    """run_corrupt.sh testnoshape1: netcdf-c's malformed scalar store dumps without failing."""
    unzip(require(NCZARR_TEST / "ref_noshape.file.zip"), tmp_path)
    url = nc_url(tmp_path / "ref_noshape.file", "zarr,file")

    def outcome():
        done = dump(reader, url)
        return sanitised(done.failure, url) if done.rc else PASS

    settle(request, outcome, KNOWN)
