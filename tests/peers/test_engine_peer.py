"""Our xarray engine is a reader of the matrix (``nczarr-engine``): an engine-only failure shows in its column.

Each cell is graded as the matrix grades it (``one_cell``: the case's own model is the expected value, the
writer a peer or ours), so these tests fail when the engine reads a store differently from the case: the v3
blosc codec the engine could not describe (issue 34) failed every cell of ``ours-zarr-v3`` × ``shuffle-zlib``,
where our writer turns HDF5's shuffle + zlib into v3's blosc.
"""
from __future__ import annotations

import json

import pytest

from nczarr_conformance.conformance.cases import BY_ID, CASES
from nczarr_conformance.conformance.matrix import one_cell
from nczarr_conformance.peers.base import PEERS
from tests.conftest import require_module

require_module("xarray")

ENGINE = "nczarr-engine"


def test_the_engine_is_a_reader_of_every_case_v2_and_v3():
    """Registered as a reader with every capability: no case, v2 or v3, is left out of its column."""
    engine = PEERS[ENGINE]
    assert engine.reads and not engine.writes and engine.model == "netcdf"
    assert all(case.requires <= engine.capabilities for case in CASES)
    assert "zarr-v3" in engine.capabilities


@pytest.mark.parametrize(("case", "writer"), [
    ("shuffle-zlib", "ours-zarr-v3"),  # v3 blosc (zlib, "shuffle" by name): the engine's own failure, fixed
    ("shuffle-zlib", "zarr-python-v3"),
    ("groups-nested", "ours"),  # netCDF model: dimensions from ancestors, typed attributes
    ("char-var", "ours"),
    ("unlimited-dim", "ours"),
    ("typed-attrs", "ours"),
    ("string-var", "ours-zarr-v3"),
])
def test_engine_cells_pass(tmp_path, case, writer):
    cell = one_cell(BY_ID[case], PEERS[writer], PEERS[ENGINE], tmp_path)
    assert (cell.status, cell.differences, cell.message) == ("pass", [], ""), cell


def test_the_v3_blosc_cell_holds_blosc(tmp_path):
    """The precondition of the first cell above: our v3 writer really writes shuffle + zlib as blosc."""
    store = PEERS["ours-zarr-v3"].write(BY_ID["shuffle-zlib"].model(), tmp_path / "s", {})
    [var] = [p for p in (tmp_path / "s").glob("*/zarr.json")]
    codecs = json.loads(var.read_text())["codecs"]
    assert [c["name"] for c in codecs][-1] == "blosc" and codecs[-1]["configuration"]["shuffle"] == "shuffle", store
