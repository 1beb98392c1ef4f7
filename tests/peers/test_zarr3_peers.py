"""Zarr v3 in the conformance matrix (issue #25, "Grade"): which cells run is chosen by the capabilities
``zarr-v3`` (reads v3) and ``writes-zarr-v3`` (writes v3), never by an id; the v3 writers write what their
library writes; and each fault a peer shows on v3 is pinned as a strict xfail that only the peer can fix,
its precondition (another reader reads the same store right) asserted outside the xfail."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.conformance import gate
from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import Cell, MatrixRun, one_cell, undeclared
from nczarr_conformance.model import Dataset, Group
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.capabilities import ALL, parse
from tests.conftest import require_module, require_tool
from tests.peers.known import PeerStillWrong, still_wrong

V3_WRITERS = ("ours-zarr-v3", "zarr-python-v3", "xarray-v3", "tensorstore-v3")


def _store(tmp_path, case, writer):
    """The store ``writer`` writes for ``case``, and its root directory."""
    target = tmp_path / case / writer
    target.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PEERS[writer].write(BY_ID[case].model(), target, dict(BY_ID[case].options))


# ---- capabilities choose the v3 cells ----------------------------------------------------------------------

def test_all_claims_reading_v3_but_not_writing_it():
    """An implementation that says nothing writes v2 (every one did before v3); ``writes-zarr-v3`` is named."""
    assert "zarr-v3" in parse("all") and "writes-zarr-v3" not in parse("all") and "writes-zarr-v3" not in ALL
    assert "writes-zarr-v3" in parse("all,writes-zarr-v3")
    assert "zarr-v3" not in parse("all,-zarr-v3")


@pytest.mark.parametrize("writer", V3_WRITERS)
def test_a_v3_writer_is_one_by_its_capabilities(writer):
    peer = PEERS[writer]
    assert peer.writes and not peer.reads and {"writes-zarr-v3", "zarr-v3"} <= peer.capabilities


def test_a_v3_writers_cells_need_zarr_v3_of_the_reader_whatever_the_ids(tmp_path):
    """netcdf-c 4.10 lacks zarr-v3, so a v3 writer's cell is skipped naming it; its v2 cells still run; and a
    writer under any id is a v3 writer by declaring writes-zarr-v3."""
    case, nc = BY_ID["scalar"], PEERS["netcdf-c-4.10"]
    assert undeclared(case, nc, PEERS["ours-zarr-v3"]) == "netcdf-c-4.10 does not declare zarr-v3 (its capabilities)"
    assert undeclared(case, nc, PEERS["ours-zarr"]) == ""
    assert undeclared(case, PEERS["zarr-python"], PEERS["ours-zarr-v3"]) == ""

    class Renamed(type(PEERS["ours-zarr"])):  # type: ignore[misc]
        pass

    anyone = Renamed("zarr", "someone-elses-writer")
    assert undeclared(case, nc, anyone) == ""
    anyone.capabilities = anyone.capabilities | {"writes-zarr-v3"}
    assert undeclared(case, nc, anyone) == "netcdf-c-4.10 does not declare zarr-v3 (its capabilities)"
    cell = one_cell(case, PEERS["ours-zarr-v3"], nc, tmp_path)
    assert (cell.status, cell.message) == ("skipped", "netcdf-c-4.10 does not declare zarr-v3 (its capabilities)")


def test_no_released_netcdf_c_reads_zarr_v3(tmp_path):
    """Why netcdf-c 4.10 (netCDF4-python) and Debian's ncdump 4.9.0 do not declare zarr-v3: 4.10.1 refuses a v3
    store as an unknown format, 4.9.0 prints it as an empty dataset and exits 0."""
    netcdf4 = require_module("netCDF4")
    url = _store(tmp_path, "scalar", "ours-zarr-v3")
    with pytest.raises(OSError, match="NetCDF: Unknown file format"):
        netcdf4.Dataset(f"file://{url}#mode=zarr,file")
    import subprocess

    done = subprocess.run([require_tool("ncdump"), f"file://{url}#mode=zarr,file"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert (done.returncode, done.stdout.split("{", 1)[1].split()) == (0, ["}"])


def _run(cells: list[Cell], seen: dict[tuple[str, str, str], Dataset]) -> MatrixRun:
    """A run holding only ``cells`` (what ``gate.violations`` looks at)."""
    return MatrixRun([], cells, {}, Path("/nonexistent"), seen)


def test_writer_gate_compares_writers_of_the_same_zarr_format():
    """Our v3 output failing in a reader is held against ours only where another v3 writer's output passes
    there: a v2 writer's pass says nothing of a reader's v3 (GDAL 3.6 reads v2 but no final-spec v3)."""
    case = "scalar"
    failing = Cell(case, "ours-zarr-v3", "gdal", "deviates", ["/arrays//d: only in first"])
    v2_pass = Cell(case, "zarr-python", "gdal", "pass")
    seen = {(case, "ours-zarr-v3", "gdal"): Dataset(Group())}
    assert gate.violations(_run([failing, v2_pass], seen)) == []
    v3_pass = Cell(case, "zarr-python-v3", "gdal", "pass")
    (found,) = gate.violations(_run([failing, v2_pass, v3_pass], seen))
    assert (found.side, found.writer, found.passing) == ("writer", "ours-zarr-v3", ("zarr-python-v3",))


# ---- what the v3 writers write, and that the v3 readers read it -------------------------------------------

@pytest.mark.parametrize("writer", V3_WRITERS)
@pytest.mark.parametrize("reader", ["ours", "zarr-python", "xarray", "tensorstore"])
def test_v3_writers_output_reads_right(writer, reader, tmp_path):
    cell = one_cell(BY_ID["numeric-types"], PEERS[writer], PEERS[reader], tmp_path)
    assert (cell.status, cell.differences, cell.message) == ("pass", [], "")


def test_zarr_python_v3_writer_writes_v3_as_zarr_python_does(tmp_path):
    """dimension_names rather than _ARRAY_DIMENSIONS, v3's string type, F order as a transpose codec."""
    url = _store(tmp_path, "string-var", "zarr-python-v3")
    doc = json.loads((tmp_path / "string-var" / "zarr-python-v3" / "s" / "zarr.json").read_text())
    assert (doc["zarr_format"], doc["data_type"], doc["dimension_names"]) == (3, "string", ["x"])
    assert "_ARRAY_DIMENSIONS" not in doc["attributes"] and url.endswith("zarr-python-v3")
    _store(tmp_path, "f-order", "zarr-python-v3")
    doc = json.loads((tmp_path / "f-order" / "zarr-python-v3" / "a" / "zarr.json").read_text())
    assert doc["codecs"][0] == {"name": "transpose", "configuration": {"order": [1, 0]}}
    cell = one_cell(BY_ID["f-order"], PEERS["zarr-python-v3"], PEERS["ours"], tmp_path / "again")
    assert cell.status == "pass", cell


def test_zarr_python_says_what_of_its_v3_is_outside_the_spec(tmp_path):
    """The warnings the v3 writer peers silence: zarr-python 3.1.6 warns that numcodecs' codecs are not in the v3
    spec (our writer uses blosc for netCDF's shuffle instead) and that null_terminated_bytes (char) has no v3
    spec yet. Pinned so that a change in what zarr-python says is seen."""
    zarr = require_module("zarr")
    from zarr.codecs import numcodecs as v3_numcodecs

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        root = zarr.open_group(str(tmp_path / "w"), mode="w", zarr_format=3)
        root.create_array("i", shape=(4,), dtype="i4", compressors=[v3_numcodecs.Shuffle(elementsize=4)])
        root.create_array("c", shape=(4,), dtype="S1")
    texts = {f"{w.category.__name__}: {str(w.message).split('.')[0]}" for w in said}
    assert "ZarrUserWarning: Numcodecs codecs are not in the Zarr version 3 specification and may not be supported " \
           "by other zarr implementations" in texts
    assert "UnstableSpecificationWarning: The data type (NullTerminatedBytes(length=1)) does not have a Zarr V3 " \
           "specification" in texts


# ---- peer faults on v3, each as a strict xfail -----------------------------------------------------------

def _read_right(case, writer, reader, tmp_path):
    """The precondition of a peer's fault: another reader reads the very store right."""
    cell = one_cell(BY_ID[case], PEERS[writer], PEERS[reader], tmp_path / "pre")
    assert (cell.status, cell.differences) == ("pass", []), cell


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="TensorStore's zarr3 driver refuses numcodecs.* "
                   "codecs, which zarr-python 3 writes for numcodecs' Shuffle and Zlib in v3")
def test_tensorstore_refuses_numcodecs_codecs_in_v3(tmp_path):
    require_module("tensorstore")
    _read_right("shuffle-zlib", "zarr-python-v3", "zarr-python", tmp_path)
    cell = one_cell(BY_ID["shuffle-zlib"], PEERS["zarr-python-v3"], PEERS["tensorstore"], tmp_path)
    seen = (cell.status, re.findall(r'"([\w.]+)" is not registered', cell.message))
    still_wrong(seen, wrong=("fails", ["numcodecs.shuffle"]), right=("pass", []))


@pytest.mark.parametrize(("case", "data_type"), [("string-var", "string"), ("char-var", "null_terminated_bytes")])
@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="TensorStore's zarr3 driver has neither v3 string nor "
                   "null_terminated_bytes (zarr-extensions data types, which zarr-python and xarray write for text)")
def test_tensorstore_has_no_v3_text_data_types(case, data_type, tmp_path):
    require_module("tensorstore")
    _read_right(case, "ours-zarr-v3", "zarr-python", tmp_path)
    cell = one_cell(BY_ID[case], PEERS["ours-zarr-v3"], PEERS["tensorstore"], tmp_path)
    seen = (cell.status, re.findall(r"(\w+) data type is not one of the supported data types", cell.message))
    still_wrong(seen, wrong=("fails", [data_type]), right=("pass", []))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="GDAL 3.6's Zarr driver predates the final v3 spec: a "
                   "zarr.json store opens as an empty root group, exit 0")
def test_gdal_36_sees_nothing_in_a_final_spec_v3_store(tmp_path):
    require_tool("gdalmdiminfo")
    _read_right("scalar", "ours-zarr", "gdal", tmp_path)  # the same case in v2: GDAL reads it right
    _read_right("scalar", "ours-zarr-v3", "zarr-python", tmp_path / "v3")
    cell = one_cell(BY_ID["scalar"], PEERS["ours-zarr-v3"], PEERS["gdal"], tmp_path)
    still_wrong((cell.status, cell.differences),
                wrong=("deviates", ["/arrays//d: only in first", "/arrays//i: only in first"]), right=("pass", []))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="xarray 2026.9 writes a v3 char (|S1) variable's "
                   "_FillValue as base64 and then cannot read its own store: \"Failed to decode fill_value\"")
def test_xarray_cannot_read_its_own_v3_char_with_fill_value(tmp_path):
    xr = require_module("xarray")
    chars = np.array([b"ab\0\0", b"cdef", b"\0\0\0\0"]).view("S1").reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xr.Dataset({"c": (("x", "n"), chars)}).to_zarr(str(tmp_path / "x"), zarr_format=3, consolidated=True,
                                                        encoding={"c": {"_FillValue": b"\0"}})
    assert json.loads((tmp_path / "x" / "c" / "zarr.json").read_text())["attributes"] == {"_FillValue": "AA=="}
    # the precondition: zarr-python and our reader read the very store, values and all
    for reader in ("zarr-python", "ours"):
        got = np.asarray(PEERS[reader].read(str(tmp_path / "x")).root.variables["c"].data)
        assert got.tolist() == chars.tolist(), reader
    try:
        PEERS["xarray"].read(str(tmp_path / "x"))
        seen = None
    except ValueError as exc:
        seen = str(exc)
    still_wrong(seen, wrong="Failed to decode fill_value. Unsupported dtype |S1", right=None)


def test_tensorstore_v3_writer_writes_what_its_docs_say(tmp_path):
    """TensorStore's own zarr3 metadata: blosc (zlib, byte shuffle) for shuffle + zlib, transpose for F order,
    the bytes codec's byte order; and no text: a string case is 'cannot express', not a failure."""
    from nczarr_conformance.peers.base import CannotExpress

    _store(tmp_path, "shuffle-zlib", "tensorstore-v3")
    docs = [json.loads(p.read_text()) for p in (tmp_path / "shuffle-zlib" / "tensorstore-v3").rglob("zarr.json")]
    arrays = [d for d in docs if d["node_type"] == "array"]
    assert arrays and all([c["name"] for c in d["codecs"]] == ["bytes", "blosc"] for d in arrays)
    assert {(c["configuration"]["cname"], c["configuration"]["shuffle"]) for d in arrays
            for c in d["codecs"] if c["name"] == "blosc"} == {("zlib", "shuffle")}
    _store(tmp_path, "f-order", "tensorstore-v3")
    doc = json.loads((tmp_path / "f-order" / "tensorstore-v3" / "a" / "zarr.json").read_text())
    assert doc["codecs"][0] == {"name": "transpose", "configuration": {"order": [1, 0]}}
    _store(tmp_path, "big-endian", "tensorstore-v3")
    endians = {c["configuration"]["endian"] for p in (tmp_path / "big-endian" / "tensorstore-v3").rglob("zarr.json")
               for c in json.loads(p.read_text()).get("codecs", []) if c["name"] == "bytes" and "configuration" in c}
    assert endians == {"big"}
    with pytest.raises(CannotExpress, match="no data type for netCDF string"):
        _store(tmp_path, "string-var", "tensorstore-v3")
