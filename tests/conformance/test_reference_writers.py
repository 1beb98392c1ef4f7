"""The reference writers in the matrix (issue 36): VirtualiZarr (kerchunk JSON and Parquet, and an Icechunk
repository of virtual chunks) and kerchunk's SingleHdf5ToZarr through their adapters (nczarr-conformance.toml,
adapters/virtualizarr, adapters/kerchunk), and ours (``nc2nczarr --reference``), each read by the readers that
declare ``references`` (``icechunk`` for the repositories, VirtualiZarr's and ``ours-icechunk``'s): xarray,
zarr-python 3 and ours.

Each cell is the matrix's own (``run_matrix``: written once, read by each reader, compared with the case's
model). The expected values are the case's: netCDF4-python writes the file every writer starts from, and reads
it back equal to the case (asserted here, so a cell's comparison with the case is one with netCDF4-python
reading the source). A peer's fault is a strict xfail recorded as data beside its adapter
(``adapters/*/faults.toml``, conformance/peer_faults.py): the exact status and differences, or the exact
message; ours has none.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import Cell, MatrixRun, compare, run_matrix, undeclared
from nczarr_conformance.conformance.peer_faults import PeerFault, load_all
from nczarr_conformance.peers import netcdf4 as nc4
from nczarr_conformance.peers.base import PEERS, registered
from nczarr_conformance.peers.capabilities import ALL, parse, requirements
from nczarr_conformance.peers.command import CONFIG_NAME, build, load_config
from tests.conftest import REPO, missing_peer
from tests.peers.known import PeerStillWrong, still_wrong

VIRTUALIZARR_PYTHON = Path(os.path.expanduser("~/.cache/nczarr-virtualizarr/bin/python"))
WRITERS = ("virtualizarr-json", "virtualizarr-parquet", "virtualizarr-icechunk", "kerchunk-hdf5", "ours-references",
           "ours-icechunk")
READERS = ("ours", "zarr-python", "xarray")
#: few and small: a scalar (VirtualiZarr's faults), float attributes (every peer's), fill and a zlib chunk; a
#: variable-length string (|O + vlen-utf8 from kerchunk and VirtualiZarr) and a char variable (our |S1, marked char)
CASES = ("scalar", "double-attr-precision", "fill-partial", "shuffle-zlib", "string-var", "char-var")
KNOWN = load_all(sorted(REPO.glob("adapters/*/faults.toml")))
PASS = ("pass", (), "")


def configured() -> list:
    return [p for p in build(load_config(REPO / CONFIG_NAME)) if p.id in WRITERS]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> MatrixRun:
    if not VIRTUALIZARR_PYTHON.exists():
        missing_peer(f"{VIRTUALIZARR_PYTHON} missing (scripts/test makes VirtualiZarr 2.8.0's venv)")
    with registered(configured()):
        return run_matrix(tmp_path_factory.mktemp("refs"), [BY_ID[c] for c in CASES], [*WRITERS, *READERS], jobs=2)


def cell_of(run: MatrixRun, case: str, writer: str, reader: str) -> Cell:
    (cell,) = [c for c in run.cells if (c.case, c.writer, c.reader) == (case, writer, reader)]
    return cell


def outcome(cell: Cell) -> tuple[str, tuple[str, ...], str]:
    return cell.status, tuple(cell.differences), cell.message


def _params() -> list:
    out = []
    for writer in WRITERS:
        for reader in READERS:
            for case in CASES:
                fault = KNOWN.get((case, writer, reader))
                marks = [pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason=fault.why)] if fault else []
                out.append(pytest.param(case, writer, reader, fault, marks=marks, id=f"{case}[{writer}->{reader}]"))
    return out


@pytest.mark.parametrize(("case", "writer", "reader", "fault"), _params())
def test_reference_cell(run: MatrixRun, case: str, writer: str, reader: str, fault: PeerFault | None) -> None:
    """Every cell passes, or shows exactly the peer's recorded fault (a fixed peer turns its xfail red)."""
    cell = cell_of(run, case, writer, reader)
    assert cell.status != "skipped", cell.message  # the precondition: the cell ran
    if fault is None:
        assert outcome(cell) == PASS, cell
        return
    assert not writer.startswith("ours"), "our own code has no known faults"
    still_wrong(outcome(cell), wrong=(fault.status, fault.differences, fault.message), right=PASS)


@pytest.mark.parametrize("case", CASES)
def test_the_source_file_reads_as_the_case_in_netcdf4_python(run: MatrixRun, case: str) -> None:
    """The cells compare with the case; netCDF4-python reads the file the writers start from as that case, so
    that is a comparison with netCDF4-python reading the source file."""
    source = Path(run.stores[(case, "kerchunk-hdf5")] + ".nc")
    with nc4.LOCK:
        seen = nc4.read(str(source))
    assert compare(BY_ID[case].model(), seen, ("netcdf", False, True)) == []  # the whole netCDF model's view


def test_only_readers_that_declare_references_read_reference_stores() -> None:
    """A reference writer's cells need ``references`` of the reader, which ``all`` does not claim: readers of
    directories and zips are skipped (named), and no store writer's cell needs it."""
    case = BY_ID["fill-partial"]
    assert "references" not in ALL and "references" in parse("all,references")
    assert undeclared(case, PEERS["netcdf-c-4.10"], PEERS["ours-references"]) == \
        "netcdf-c-4.10 does not declare references (its capabilities)"
    assert undeclared(case, PEERS["xarray"], PEERS["ours-references"]) == ""
    for peer in PEERS.values():
        if "writes-references" not in peer.capabilities:
            assert "references" not in requirements(case.requires, peer.capabilities)


def test_only_readers_that_declare_icechunk_read_icechunk_repositories() -> None:
    """VirtualiZarr's Icechunk writer needs ``icechunk`` of the reader (not in ``all``), and ``zarr-v3``: netcdf-c's
    cells are skipped, named; xarray, zarr-python and ours declare it."""
    case = BY_ID["fill-partial"]
    with registered(configured()):
        writer = PEERS["virtualizarr-icechunk"]
        assert "icechunk" not in ALL and {"icechunk", "zarr-v3"} <= requirements(case.requires, writer.capabilities)
        assert undeclared(case, PEERS["netcdf-c-4.10"], writer).startswith("netcdf-c-4.10 does not declare ")
        for reader in READERS:
            assert undeclared(case, PEERS[reader], writer) == "", reader
    for peer in PEERS.values():
        if "writes-icechunk" not in peer.capabilities:
            assert "icechunk" not in requirements(case.requires, peer.capabilities)


def test_the_icechunk_writer_writes_a_repository_of_virtual_chunks_icechunk_1_reads(run: MatrixRun) -> None:
    """What its cells read is an Icechunk repository (spec v1, read by the icechunk of this interpreter) whose
    data chunk is a virtual reference into the case's netCDF-4 file: not a copy."""
    icechunk = pytest.importorskip("icechunk")
    repo = run.stores[("shuffle-zlib", "virtualizarr-icechunk")]
    source = Path(repo + ".nc")
    session = icechunk.Repository.open(icechunk.local_filesystem_storage(repo)).readonly_session(branch="main")
    assert set(session.all_virtual_chunk_locations()) == {source.as_uri()}


SEEDED = """
import json, subprocess, sys
out = sys.argv[2]
done = subprocess.run([sys.executable, {adapter!r}, sys.argv[1], out])
refs = json.loads(open(out).read())
for key in [k for k in refs["refs"] if k.endswith(".zattrs")]:
    attrs = json.loads(refs["refs"][key])
    refs["refs"][key] = json.dumps({{k: v for k, v in attrs.items() if k == "_ARRAY_DIMENSIONS"}})
open(out, "w").write(json.dumps(refs))
sys.exit(done.returncode)
"""


def test_a_writer_that_drops_attributes_turns_its_cells_red(tmp_path: Path) -> None:
    """The seeded defect: kerchunk's adapter with every attribute dropped from its references deviates, naming
    the attribute, where the adapter as committed passes the same case."""
    script = tmp_path / "seeded.py"
    script.write_text(SEEDED.format(adapter=str(REPO / "adapters/kerchunk/write.py")), encoding="utf-8")
    (tmp_path / CONFIG_NAME).write_text(
        f'[implementations.seeded]\nwriter = "{sys.executable} {script} {{model_json}} {{json}}"\n'
        'caps = "all,-nczarr,-appendix-d,-netcdf-fill,references,writes-references"\n', encoding="utf-8")
    with registered([*build(load_config(tmp_path / CONFIG_NAME)), *configured()]):
        cells = run_matrix(tmp_path / "work", [BY_ID["char-attr-text"]], ["seeded", "kerchunk-hdf5", "xarray"]).cells
    by_writer = {c.writer: c for c in cells}
    assert outcome(by_writer["kerchunk-hdf5"]) == PASS
    assert by_writer["seeded"].status == "deviates"
    assert any("/attributes/" in d and "only in first" in d for d in by_writer["seeded"].differences), \
        json.dumps(by_writer["seeded"].differences)
