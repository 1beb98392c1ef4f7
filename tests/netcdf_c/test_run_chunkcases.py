"""Port of netcdf-c ``nczarr_test/run_chunkcases.sh``: chunking cases, dumped and listed chunk by chunk.

The script writes ``v`` with its C driver ``test_chunkcases`` (``-d`` dims, ``-c`` chunks) into
``mode=nczarr,file``, compares ``ncdump`` with ``ref_<case>.cdl`` (``diff -b``) and, for ``rem``,
``ndims`` and ``misc1``, the raw chunks listed by ``ncdumpchunks -v v`` with ``ref_<case>.dmp``
(``diff -b``). The baselines hold every value the driver wrote (the driver writes whole chunks with
their fill, so the ``.dmp`` files list no missing chunk); the port builds the same variable from the
baseline CDL with the script's ``-c`` as ``v:_ChunkSizes``, with each writer, and lists the chunks of
the store the way ``ncdumpchunks`` prints them (``chunk_listing``). The driver's own read-back
printouts (``ref_whole.txt``, ``ref_skip.txt``) are C-API output, not ported.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.netcdf_c.harness import (
    NCZARR_TEST,
    PASS,
    READERS,
    WRITERS,
    build,
    load_known,
    nc_url,
    read_outcome,
    read_text,
    require,
    settle,
    text_diff,
)

KNOWN = load_known("run_chunkcases")
#: case → the script's -c (chunk sizes); ``dmp``: the case's chunk listing is compared too
CASES = {"whole": (4, 4), "skip": (2, 2), "skipw": (2, 2), "rem": (3, 3), "ndims": (3, 3, 4, 4), "misc1": (2, 3, 1)}
DMP = ("rem", "ndims", "misc1")
HOLE = -2  # ncdumpchunks' value for a chunk that is not stored


def source_cdl(case: str, tmp: Path) -> Path:
    """ref_<case>.cdl with the script's chunking as ``v:_ChunkSizes``."""
    text = read_text(require(NCZARR_TEST / f"ref_{case}.cdl"))
    sizes = ", ".join(map(str, CASES[case]))
    text, n = re.subn(r"(\n\s*int v\([^)]*\) ;\n)", rf"\1\t\tv:_ChunkSizes = {sizes} ;\n", text)
    assert n == 1
    path = tmp / f"ref_{case}.cdl"
    path.write_text(text)
    return path


def _chunk(store: Path, zarray: dict, index: tuple[int, ...]) -> np.ndarray:
    import numcodecs

    sep = zarray.get("dimension_separator", ".")
    raw = (store / "v" / sep.join(map(str, index)))
    dtype = np.dtype(zarray["dtype"])
    if not raw.is_file():
        return np.full(zarray["chunks"], HOLE, dtype=np.int64)
    data = raw.read_bytes()
    if zarray.get("compressor"):
        data = numcodecs.get_codec(zarray["compressor"]).decode(data)
    for f in reversed(zarray.get("filters") or []):
        data = numcodecs.get_codec(f).decode(data)
    return np.frombuffer(bytes(data), dtype=dtype).reshape(zarray["chunks"]).astype(np.int64)


def chunk_listing(store: Path, fill: int) -> str:
    """``ncdumpchunks -v v`` (nczarr_test/ncdumpchunks.c) of an int variable ``v``: each stored chunk, row-major."""
    zarray = json.loads((store / "v" / ".zarray").read_text())
    dims, chunks = zarray["shape"], zarray["chunks"]
    counts = [-(-d // c) for d in zip(dims, chunks, strict=True) for d, c in [d]]
    lines = [f"rank={len(dims)} dims=({','.join(map(str, dims))}) chunks=({','.join(map(str, chunks))})"]
    cell = lambda x: " _" if x == fill else f" {x:02d}"  # noqa: E731 - printf(" %02d") / " _"
    for index in np.ndindex(*counts):
        head = "".join(f"[{i}/{i * c}]" for i, c in zip(index, chunks, strict=True)) + " ="
        data = _chunk(store, zarray, index)
        pad = " " * len(head)
        if len(dims) == 2:
            rows = ["".join(cell(x) for x in row) for row in data]
        elif len(dims) == 3:
            rows = [" |".join("".join(cell(x) for x in group) for group in plane) for plane in data]
        else:
            rows = ["".join(cell(x) for x in data.ravel())]
        lines.append(head + rows[0])
        lines.extend(pad + row for row in rows[1:])
    return "\n".join(lines) + "\n"


def _store(stores, case: str, writer: str):
    return stores.get(f"chunkcases-{case}-{writer}",
                      lambda tmp: build(writer, source_cdl(case, tmp), tmp, "nczarr", name=f"tmp_{case}"))


@pytest.mark.peer
@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("case", CASES)
def test_chunkcases_dump(case, writer, reader, stores, request):
    """run_chunkcases.sh testcasespass(file): ``ncdump`` of the chunked ``v`` equals ref_<case>.cdl."""
    expected = read_text(require(NCZARR_TEST / f"ref_{case}.cdl"))
    store, failed = _store(stores, case, writer)
    settle(request, lambda: failed if failed is not None else
           read_outcome(reader, expected, nc_url(store, "nczarr,file"), ws="b"), KNOWN)


@pytest.mark.peer
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("case", DMP)
def test_chunkcases_chunks(case, writer, stores, request):
    """run_chunkcases.sh: the raw chunks of ``v`` list as ref_<case>.dmp (``ncdumpchunks -v v``, ``diff -b``)."""
    expected = read_text(require(NCZARR_TEST / f"ref_{case}.dmp"))
    store, failed = _store(stores, case, writer)
    settle(request, lambda: failed if failed is not None else
           (text_diff(expected, chunk_listing(store, fill=-1), ws="b") or PASS), KNOWN)
