"""Port of netcdf-c ``nczarr_test/run_newformat.sh``: the old NCZarr layout, copied to the new one, consolidated.

The script runs on the zip ``ref_oldformat.zip`` (netcdf-c ≥ 4.9.3 keys, dims shared across groups):
- ``old``: ``ncdump -n ref_oldformat`` equals ``ref_oldformat.cdl`` (``diff -w``);
- ``cvt``: ``nccopy`` to ``mode=nczarr,file``, dumped, equals ``ref_oldformat.cdl``;
- ``pure``: that copy dumped with ``mode=zarr`` equals ``ref_newformatpure.cdl``;
- ``consolidated``: ``NCZARR_CONSOLIDATED=TRUE nccopy`` writes ``.zmetadata``; the copy dumped with and
  without ``NCZARR_CONSOLIDATED`` equals ``ref_oldformat.cdl``; with ``mode=zarr`` (and
  ``mode=zarr,file,consolidated``) both dumps are equal.

Readers without zip support read the zip unzipped (``ref_oldformat.file``); ours reads the zip.
Copiers: nccopy 4.9.0 (the script's) and netCDF4-python 4.10.1 (reads the old store, writes the new
one); ours converts netCDF files only, so it is a reader here.
"""
from __future__ import annotations

import pytest

from tests.conftest import require_tool
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    READERS,
    WriteFailed,
    dump,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    run,
    sanitised,
    settle,
    text_diff,
    unzip,
    write_netcdf4,
)

KNOWN = load_known("run_newformat")
COPIERS = ("nccopy-4.9.0", "netcdf4-4.10.1")
BASELINE = NCZARR_TEST / "ref_oldformat.cdl"


def _old(tmp):
    unzip(require(NCZARR_TEST / "ref_oldformat.zip"), tmp)
    (tmp / "ref_oldformat").rename(tmp / "ref_oldformat.file")
    return tmp / "ref_oldformat.file"


def _copy(copier: str, tmp, consolidated: bool):
    old = nc_url(_old(tmp), "nczarr,file")
    store = tmp / ("tmp_newformat_consolidated.file" if consolidated else "tmp_newformat.file")
    url = nc_url(store, "nczarr,file")
    env = {"NCZARR_CONSOLIDATED": "TRUE"} if consolidated else None
    try:
        if copier == "nccopy-4.9.0":
            import os

            done = run([require_tool("nccopy"), old, url], env={**os.environ, **(env or {})})
            if done.rc:
                raise WriteFailed(("nccopy", *done.failure))
        else:
            write_netcdf4(old, url, env=env or {})
    except WriteFailed as exc:
        raise WriteFailed(sanitised(exc.args[0], url, old, str(tmp))) from exc
    return store


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
def test_old(reader, tmp_path, request):
    """run_newformat.sh testcaseold(zip): the old layout reads as ref_oldformat.cdl."""
    expected = read_text(require(BASELINE))
    if reader == "ours":
        url = nc_url(require(NCZARR_TEST / "ref_oldformat.zip"), "nczarr,zip")
    else:
        url = nc_url(_old(tmp_path), "nczarr,file")
    settle(request, lambda: read_outcome(reader, expected, url, ("-n", "ref_oldformat"), ws="w"),
           KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("copier", COPIERS)
@pytest.mark.parametrize("step", ["cvt", "pure"])
def test_copy(step, copier, reader, stores, request):
    """run_newformat.sh testcasecvt/testcasepure(zip): the copy reads as ref_oldformat.cdl (nczarr) and as
    ref_newformatpure.cdl (zarr)."""
    expected = read_text(require(BASELINE if step == "cvt" else NCZARR_TEST / "ref_newformatpure.cdl"))
    store, failed = stores.get(f"newformat-{copier}", lambda tmp: _copy(copier, tmp, False))
    mode = "nczarr,file" if step == "cvt" else "zarr,file"
    settle(request, lambda: failed if failed is not None else
           read_outcome(reader, expected, nc_url(store, mode), ("-n", "ref_oldformat"), ws="w"),
           KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("reader", ("ncdump-4.9.0", "ours"))
@pytest.mark.parametrize("copier", COPIERS)
def test_consolidated(copier, reader, stores, request):
    """run_newformat.sh testcaseconsolidated(zip): .zmetadata written; every dump the script compares agrees."""
    expected = read_text(require(BASELINE))
    store, failed = stores.get(f"newformat-consolidated-{copier}", lambda tmp: _copy(copier, tmp, True))

    def outcome():
        if failed is not None:
            return failed
        if not (store / ".zmetadata").is_file():
            return "no .zmetadata"
        seen = []
        for mode, env in (("nczarr,file", "TRUE"), ("nczarr,file", "FALSE")):
            import os

            done = dump(reader, nc_url(store, mode), "-n", "ref_oldformat",
                        env={**os.environ, "NCZARR_CONSOLIDATED": env})
            seen.append(sanitised(done.failure, nc_url(store, mode)) if done.rc else text_diff(expected, done.out,
                                                                                                 ws="w"))
        pure = {}
        for mode, env in (("zarr,file", "TRUE"), ("zarr,file", "FALSE"), ("zarr,file,consolidated", None),
                          ("zarr,file", None)):
            import os

            environ = {k: v for k, v in os.environ.items() if k != "NCZARR_CONSOLIDATED"}
            if env:
                environ["NCZARR_CONSOLIDATED"] = env
            done = dump(reader, nc_url(store, mode), "-n", "ref_oldformat", env=environ)
            pure[(mode, env)] = done.failure if done.rc else done.out
        seen.append(text_diff(pure[("zarr,file", "TRUE")], pure[("zarr,file", "FALSE")], ws="w"))
        seen.append(text_diff(pure[("zarr,file,consolidated", None)], pure[("zarr,file", None)], ws="w"))
        return PASS if not any(seen) else seen

    settle(request, outcome, KNOWN)
