"""Port of netcdf-c ``nczarr_test/run_nccopyz.sh``: nccopy's chunking options with NCZarr output.

The script makes ``tmp_chunks3.nc`` with its C program ``test_zchunks3`` (``ivar`` int over
``dim0..dim6`` = 7,4,2,3,5,6,9 holding 0…45359, ``fvar`` float over the reversed dims holding
45360…1; re-done here with netCDF4-python), copies it with ``nccopy -M0`` (and ``-c`` specs) to
``mode=nczarr,file`` and checks ``ncdump -sh``: the ``_ChunkSizes`` it names (``verifychunking``, on
the text without whitespace) and that copies differ only in chunking (``chunkclean``: ``sed`` deleting
``:_Storage`` and ``:_ChunkSizes`` lines, then ``diff``). Then ``ref_perdimspecs.cdl`` copied with
``-c time/10,lat/15,lon/20`` must give ``tas:_Storage = "chunked"`` and ``_ChunkSizes = 10,15,20``.
Copiers: nccopy 4.9.0 and ours (``nc2nczarr`` has nccopy's ``-M`` and ``-c``; it reads netCDF files,
so where nccopy copies from an NCZarr store, ours copies from the same netCDF-4 content).
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.conftest import require_module, require_tool
from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    dump,
    load_known,
    nc_url,
    netcdf4_file,
    ours_env,
    require,
    run,
    sanitised,
    settle,
    text_diff,
)

KNOWN = load_known("run_nccopyz")
LENS = (7, 4, 2, 3, 5, 6, 9)
#: copy → (-c spec or None, expected ivar and fvar _ChunkSizes)
COPIES = {
    "tmp": (None, "ivar:_ChunkSizes=7,4,2,3,5,6,9;", "fvar:_ChunkSizes=9,6,5,3,2,4,7;"),
    "tmp_chunked": ("dim0/,dim1/1,dim2/,dim3/1,dim4/,dim5/1,dim6/", "ivar:_ChunkSizes=7,1,2,1,5,1,9;",
                    "fvar:_ChunkSizes=9,1,5,1,2,1,7;"),
    "tmp_unchunked": ("dim0/,dim1/,dim2/,dim3/,dim4/,dim5/,dim6/", "ivar:_ChunkSizes=7,4,2,3,5,6,9;",
                      "fvar:_ChunkSizes=9,6,5,3,2,4,7;"),
    "tmp_unchunked2": ("//", "ivar:_ChunkSizes=7,4,2,3,5,6,9;", "fvar:_ChunkSizes=9,6,5,3,2,4,7;"),
}
CHUNKCLEAN = (r":_Storage", r":_ChunkSizes")


def chunks3(path) -> None:
    """test_zchunks3.c, with netCDF4-python."""
    netCDF4 = require_module("netCDF4")
    n = int(np.prod(LENS))
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        names = [f"dim{i}" for i in range(len(LENS))]
        for name, size in zip(names, LENS, strict=True):
            nc.createDimension(name, size)
        nc.createVariable("ivar", "i4", names)[:] = np.arange(n, dtype="i4").reshape(LENS)
        nc.createVariable("fvar", "f4", names[::-1])[:] = (n - np.arange(n)).astype("f4").reshape(LENS[::-1])


def copy(copier: str, src, url: str, *options: str):
    if copier == "nccopy-4.9.0":
        done = run([require_tool("nccopy"), "-M0", *options, str(src), url])
    else:
        done = run([sys.executable, "-m", "nczarr_conformance.cli.convert", "--quiet", "-M", "0", *options, str(src),
                    url], env=ours_env())
    return None if done.rc == 0 else (copier, *done.failure)


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours"])
@pytest.mark.parametrize("copier", ["nccopy-4.9.0", "ours"])
def test_nccopy_chunks(copier, reader, tmp_path, request):
    """run_nccopyz.sh testcase(file), first part: -c specs give the chunks named, and nothing else changes."""
    src = tmp_path / "tmp_chunks3.nc"
    chunks3(src)

    def outcome():
        seen, texts = [], {}
        for name, (spec, *expected) in COPIES.items():
            url = nc_url(tmp_path / f"{name}.file", "nczarr,file")
            failed = copy(copier, src, url, *(("-c", spec) if spec else ()))
            if failed:
                return sanitised(failed, url, str(tmp_path))
            done = dump(reader, url, "-sh", "-n", "tmp")
            if done.rc:
                return sanitised(done.failure, url)
            flat = "".join(done.out.split())
            seen += [f"{name}: {t} not found" for t in expected if t not in flat]
            texts[name] = done.out
        for name in ("tmp_chunked", "tmp_unchunked", "tmp_unchunked2"):
            seen += list(text_diff(texts["tmp"], texts[name], ws="none", drop=CHUNKCLEAN))
        return seen or PASS

    settle(request, outcome, KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("reader", ["ncdump-4.9.0", "ours"])
@pytest.mark.parametrize("copier", ["nccopy-4.9.0", "ours"])
def test_perdimspecs(copier, reader, tmp_path, request):
    """run_nccopyz.sh testcase(file), second part: ``-c time/10,lat/15,lon/20`` chunks ``tas`` so."""
    cdl = require(NCZARR_TEST / "ref_perdimspecs.cdl")

    def outcome():
        if copier == "nccopy-4.9.0":
            src = nc_url(tmp_path / "tmp_perdimspecs.file", "nczarr,file")
            built = run([require_tool("ncgen"), "-4", "-b", "-o", src, str(cdl)])
            if built.rc:
                return sanitised(("ncgen", *built.failure), src)
        else:
            src = netcdf4_file(cdl, tmp_path)
        url = nc_url(tmp_path / "tmp_pds.file", "nczarr,file")
        failed = copy(copier, src, url, "-4", "-c", "time/10,lat/15,lon/20") if copier == "nccopy-4.9.0" else \
            copy(copier, src, url, "-c", "time/10,lat/15,lon/20")
        if failed:
            return sanitised(failed, url, str(tmp_path))
        done = dump(reader, url, "-hs", "-n", "tmp_pds")
        if done.rc:
            return sanitised(done.failure, url)
        lines = ["".join(line.split()) for line in done.out.splitlines()]
        storage = [x for x in lines if x.startswith("tas:_Storage")]
        chunks = [x for x in lines if x.startswith("tas:_ChunkSizes")]
        ok = storage in (["tas:_Storage='chunked';"], ['tas:_Storage="chunked";']) and \
            chunks == ["tas:_ChunkSizes=10,15,20;"]
        return PASS if ok else [storage, chunks]

    settle(request, outcome, KNOWN)
