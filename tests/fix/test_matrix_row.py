"""The matrix row netcdf-c-4.10+nczarr-fix: every reader reads netcdf-c 4.10.1's output, once fixed, as netcdf-c
does, except the cells no metadata can cure (listed with why); and it passes where the unfixed row fails.

One test per reader, so that a reader whose peer is not installed (gdal, tensorstore) skips only its own
cells (and fails them under CI=true, tests/conftest.py ``missing_peer``), never the other readers' cells.
"""
from __future__ import annotations

import pytest

from nczarr_conformance.conformance.cases import CASES
from nczarr_conformance.conformance.matrix import run_matrix
from nczarr_conformance.peers.base import PEERS
from tests.conftest import missing_peer

pytestmark = pytest.mark.peer

FIXED, RAW, NETCDF_C = "netcdf-c-4.10+nczarr-fix", "netcdf-c-4.10", "netcdf-c-4.10"
READERS = ["ours", "netcdf-c-4.10", "zarr-python", "xarray", "gdal", "tensorstore"]
CASE_IDS = ["numeric-types", "char-var", "string-var", "shuffle-zlib", "char-attr-json-number", "char-attr-text",
            "default-fill", "groups-nested", "typed-attrs"]

#: (case, reader) → why no fix makes it pass
NOT_CURABLE = {
    ("char-var", "zarr-python"): "zarr-python 3.1 rejects >S1, the only dtype netcdf-c reads as char",
    ("char-var", "xarray"): "xarray opens through zarr-python",
    ("char-var", "gdal"): 'GDAL shows NUL padding as "\\u0000" (every writer\'s row deviates there)',
    ("char-var", "tensorstore"): "TensorStore's Python binding returns |S data as S0 (every writer's row)",
    ("string-var", "tensorstore"): "same",
    ("typed-attrs", "gdal"): "GDAL reads JSON integers beyond 2^53 as doubles (every writer's row)",
}

#: (case, reader): cells that fail or deviate without nczarr-fix and pass (or are NOT_CURABLE) with it
CURED = [("numeric-types", "zarr-python"), ("numeric-types", "xarray"), ("char-var", "tensorstore"),
         ("string-var", "tensorstore"), ("shuffle-zlib", "zarr-python"), ("shuffle-zlib", "xarray"),
         ("shuffle-zlib", "gdal"), ("shuffle-zlib", "tensorstore"), ("char-attr-json-number", "zarr-python"),
         ("char-attr-json-number", "netcdf-c-4.10")]


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    run = run_matrix(tmp_path_factory.mktemp("matrix"), [c for c in CASES if c.id in CASE_IDS],
                     [RAW, FIXED, *[r for r in READERS if r != RAW]])
    return {(c.case, c.writer, c.reader): c for c in run.cells}


def _row_of(cells, reader: str):
    """The reader's cells of the raw and the fixed rows; a peer they need that is absent skips (fails in CI)."""
    for peer in (RAW, FIXED, reader):
        reason = PEERS[peer].available()
        if reason:
            missing_peer(f"{reason} (peer {peer}, needed by the {reader} column)")
    row = {(case, writer): cell for (case, writer, r), cell in cells.items() if r == reader and writer in (RAW, FIXED)}
    assert {case for case, _ in row} == set(CASE_IDS), sorted(row)
    return row


@pytest.mark.parametrize("reader", READERS)
def test_fixed_row_passes_everywhere_but_where_no_metadata_can_help(cells, reader):
    row = _row_of(cells, reader)
    failing = {(case, reader) for (case, writer), cell in row.items() if writer == FIXED and cell.status != "pass"}
    assert failing == {k for k in NOT_CURABLE if k[1] == reader}, sorted(failing)
    assert all(cells[(case, FIXED, NETCDF_C)].status == "pass" for case in CASE_IDS)


@pytest.mark.parametrize("reader", sorted({r for _, r in CURED}))
def test_unfixed_row_fails_where_the_fixed_one_passes(cells, reader):
    """The evidence the fixes cure something: these cells fail or deviate without nczarr-fix."""
    row = _row_of(cells, reader)
    for case in [c for c, r in CURED if r == reader]:
        assert row[(case, RAW)].status != "pass", (case, reader)
        assert (case, reader) in NOT_CURABLE or row[(case, FIXED)].status == "pass", (case, reader)
    if reader == "tensorstore":
        assert row[("char-var", RAW)].status == "fails"  # cannot open it at all
        assert row[("char-var", FIXED)].status == "deviates"  # opens; the binding's S0 values
