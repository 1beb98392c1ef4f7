"""Port of netcdf-c ``nczarr_test/run_nczarr_fill.sh``: fill values (netcdf-c issues #2059, #2062, #2063).

- #2059: ``nccopy ref_groups.h5`` into ``mode=zarr,file``; ``ncdump -s -n tmp_groups_regular`` after
  ``sclean`` (``sed`` deleting ``:_IsNetcdf4``, ``:_Endianness``, ``_NCProperties``,
  ``_SuperblockVersion`` lines) equals ``ref_groups_regular.cdl`` (``diff -wb``). Writers: nccopy 4.9.0
  (the script's), ours (nc2nczarr of the same HDF5 file), netCDF4-python 4.10.1.
- #2062 / #2063: ``ref_byte.zarr.zip`` and ``ref_byte_fill_value_null.zarr.zip`` (zarr-python stores)
  unzipped, ``ncdump -s`` with ``mode=zarr,file`` after ``sclean`` equals ``ref_byte.cdl`` /
  ``ref_byte_fill_value_null.cdl`` (``diff -wb``).

``-s`` prints storage (``_Storage``, ``_ChunkSizes``, ``_NoFill``): the text readers are held to it;
netCDF4-python's model is compared on content with the storage the baseline states ignored
(tests/netcdf_c/harness.py). The script's ``zmapio -h`` output is printed, not compared.
"""
from __future__ import annotations

import pytest

from tests.conftest import require_tool
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    READERS,
    WriteFailed,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    run,
    sanitised,
    settle,
    unzip,
    write_netcdf4,
    write_ours,
)

KNOWN = load_known("run_nczarr_fill")
SCLEAN = (r":_IsNetcdf4", r":_Endianness", r"_NCProperties", r"_SuperblockVersion")
WRITERS = ("nccopy-4.9.0", "ours", "netcdf4-4.10.1")


def _copy(writer: str, tmp):
    store = tmp / "tmp_groups_regular.file"
    url = nc_url(store, "zarr,file")
    h5 = require(NCZARR_TEST / "ref_groups.h5")
    try:
        if writer == "nccopy-4.9.0":
            done = run([require_tool("nccopy"), str(h5), url])
            if done.rc:
                raise WriteFailed(("nccopy", *done.failure))
        elif writer == "ours":
            write_ours(h5, url)
        else:
            write_netcdf4(h5, url)
    except WriteFailed as exc:
        raise WriteFailed(sanitised(exc.args[0], url, str(tmp))) from exc
    return store


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_2059_groups(writer, reader, stores, request):
    """run_nczarr_fill.sh testcase2059(file): ref_groups.h5 copied to pure Zarr reads as ref_groups_regular.cdl."""
    expected = read_text(require(NCZARR_TEST / "ref_groups_regular.cdl"))
    store, failed = stores.get(f"nczarr_fill-2059-{writer}", lambda tmp: _copy(writer, tmp))

    def outcome():
        if failed is not None:
            return failed
        return read_outcome(reader, expected, nc_url(store, "zarr,file"), ("-s", "-n", "tmp_groups_regular"),
                            ws="w", drop=SCLEAN)

    settle(request, outcome, KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("case", ["2062-ref_byte", "2063-ref_byte_fill_value_null"])
def test_206x_byte(case, reader, tmp_path, request):
    """run_nczarr_fill.sh testcase2062/2063(file): zarr-python's store, unzipped, reads as its baseline."""
    name = case.split("-", 1)[1]
    expected = read_text(require(NCZARR_TEST / f"{name}.cdl"))
    unzip(require(NCZARR_TEST / f"{name}.zarr.zip"), tmp_path)
    url = nc_url(tmp_path / f"{name}.zarr", "zarr,file")
    settle(request, lambda: read_outcome(reader, expected, url, ("-s",), ws="w", drop=SCLEAN),
           KNOWN)
