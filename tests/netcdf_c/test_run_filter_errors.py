"""Port of netcdf-c ``nczarr_test/run_filter_errors.sh``: an unknown codec is named when the data is read.

The script copies ``ref_data.zarr``, replaces ``blosc`` by ``faultycodecname`` in ``data/.zarray`` (its
``sed``) and expects ``ncdump -v data -L0 file://ref_data.zarr#mode=zarr`` to print
``Variable .* has unsupported codec: (faultycodecname)``. netcdf-c 4.10.1 (netCDF4-python) prints that
line on stderr and fails reading the data. The store's ``.zmetadata`` still names blosc (the ``sed``
leaves it); netcdf-c ignores it unless asked, ours reads it when present (docs/reader.md, What the
reader reads), so on the script's store ours reads the data with blosc (by design; ``nczarr-check`` reports
the stale ``.zmetadata``); where what ours reads names the faulty codec, ours lists the variable
(``-h`` works) and fails the data read in one line naming the variable and the codec (exit 2).
ncdump 4.9.0 predates codec support.
"""
from __future__ import annotations

import shutil

import pytest

from tests.conftest import require_module
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    dump,
    load_known,
    nc_url,
    require,
    sanitised,
    settle,
)

KNOWN = load_known("run_filter_errors")
CODEC = "faultycodecname"


@pytest.fixture
def faulty(tmp_path):
    store = tmp_path / "ref_data.zarr"
    shutil.copytree(require(NCZARR_TEST / "ref_data.zarr"), store)
    zarray = store / "data" / ".zarray"
    zarray.write_text(zarray.read_text().replace("blosc", CODEC))
    # the .zmetadata copy keeps "blosc": the script does not touch it, and netcdf-c reads it only when asked
    return store


def _ours_outcome(url: str):
    """PASS when ours lists the variable and fails its data read in one line naming it and the codec."""
    header = dump("ours", url, "-h")
    if header.rc or "data(" not in header.out:
        return ("header", header.rc, header.err)
    done = dump("ours", url, "-v", "data")
    lines = done.err.strip().splitlines()
    ok = done.rc == 2 and len(lines) == 1 and "data" in lines[0] and CODEC in lines[0]
    return PASS if ok else sanitised(("data", done.rc, done.err), url)


def test_ours_names_the_codec(faulty, request):
    """The script's store: ours reads its stale ``.zmetadata`` (still naming blosc), by design."""
    settle(request, lambda: _ours_outcome(nc_url(faulty, "zarr")), KNOWN)


def test_ours_names_the_codec_it_reads(faulty):
    """With the ``sed`` applied to ``.zmetadata`` too, ours names the faulty codec; the script's store (stale
    ``.zmetadata``) is an error finding of ``nczarr-check``, beside the unknown codec of ``data/.zarray``."""
    from nczarr_conformance.checker import check

    errors = sorted(f.rule for f in check(str(faulty)).findings if f.severity == "error")
    assert errors == ["NCZ-ARRAY-CODEC", "NCZ-CONSOLIDATED-MATCH"], errors
    zmetadata = faulty / ".zmetadata"
    zmetadata.write_text(zmetadata.read_text().replace("blosc", CODEC))
    assert _ours_outcome(nc_url(faulty, "zarr")) == PASS


@pytest.mark.peer
def test_netcdf_c_410_names_the_codec(faulty, capfd, request):
    netCDF4 = require_module("netCDF4")

    def outcome():
        with netCDF4.Dataset(nc_url(faulty, "zarr")) as nc:
            assert "data" in nc.variables
            try:
                nc["data"][:]
            except RuntimeError as exc:
                err = capfd.readouterr().err
                return PASS if f"has unsupported codec: ({CODEC})" in err else ("stderr", err, str(exc))
        return "data read"

    settle(request, outcome, KNOWN)


@pytest.mark.peer
def test_ncdump_490(faulty, request):
    def outcome():
        done = dump("ncdump-4.9.0", nc_url(faulty, "zarr"), "-v", "data", "-L0", timeout=5)
        text = done.out + done.err
        return PASS if f"has unsupported codec: ({CODEC})" in text else sanitised(done.failure, nc_url(faulty, "zarr"))

    settle(request, outcome, KNOWN)
