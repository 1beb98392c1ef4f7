"""The implementations nobody here wrote (nczarr-conformance.toml, adapters/): declared by the config only,
their wrapper's tool named when missing, and their findings pinned as strict xfails that only the peer can fix."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from nczarr_conformance.conformance import gate
from nczarr_conformance.conformance.cases import BY_ID
from nczarr_conformance.conformance.matrix import one_cell, run_matrix
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers.base import PEERS
from nczarr_conformance.peers.command import (
    CONFIG_NAME,
    CommandPeer,
    build,
    load_config,
)
from nczarr_conformance.stores import DirectoryStore
from tests.conftest import REPO, require_tool
from tests.peers.known import PeerStillWrong, still_wrong
from tests.peers.test_netcdf_c_490 import upper_compatible_model


def configured(peer_id):
    return {p.id: p for p in build(load_config(REPO / CONFIG_NAME))}[peer_id]


def test_the_committed_config_declares_the_outside_implementations():
    ids = {p.id for p in build(load_config(REPO / CONFIG_NAME))}
    assert ids == {"netcdf-c-4.9", "ncks", "zarr-python-2.18", "zarr-python-3.4", "zarrita", "virtualizarr-json",
                   "virtualizarr-parquet", "virtualizarr-icechunk", "kerchunk-hdf5"}


#: the configured Python adapters whose imports cost more than a call's work, each loaded once in a fork server
PRELOADED = ["netcdf-c-4.9", "virtualizarr-json", "virtualizarr-parquet", "virtualizarr-icechunk", "kerchunk-hdf5"]


@pytest.mark.parametrize("peer_id", PRELOADED)
def test_each_configured_preload_imports_in_its_own_interpreter(peer_id):
    """A preload that does not import falls back to a process per call without a word (docs/plugins.md), and the
    report takes its old time again: the reference writers' 96 writes cost 131 s of the matrix's 88 s wall on two
    threads as processes, 15 s as forks (VirtualiZarr's imports: about 1 s of CPU a call)."""
    peer = configured(peer_id)
    assert peer.available() is None, f"{peer_id} cannot run: {peer.available()} (scripts/test installs it)"
    assert peer.preload, f"{peer_id} declares no preload"
    template = peer.writer or peer.reader
    assert template is not None
    interpreter = template.expand({f: "x" for f in template.fields})[0]
    server = peer._server(interpreter)
    try:
        assert server is not None, f"{peer_id}'s preload {peer.preload} does not import in {interpreter}"
    finally:
        if server is not None:
            server.close()


def test_requires_names_the_tool_a_wrapper_script_runs(tmp_path):
    """A wrapper (python3 wrap.py) is always on PATH; the tool it runs is what may be missing."""
    (tmp_path / CONFIG_NAME).write_text('[implementations.w]\nreader = "python3 wrap.py {path}"\n'
                                        'requires = ["no-such-tool-4711"]\n', encoding="utf-8")
    (peer,) = build(load_config(tmp_path / CONFIG_NAME))
    assert peer.available() == "no-such-tool-4711 not installed"


def test_a_program_under_the_home_directory_is_found_without_a_shell(tmp_path, monkeypatch):
    tool = tmp_path / "venv" / "bin" / "tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n", encoding="utf-8")
    tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path))
    peer = CommandPeer("t", reader="~/venv/bin/tool {path}")
    assert peer.available() is None
    assert peer.reader is not None and peer.reader.expand({"path": "/s"}) == [str(tool), "/s"]
    assert CommandPeer("t", reader="~/venv/bin/none {path}").available() == f"{os.path.expanduser('~/venv/bin/none')}" \
        " not installed"


@pytest.mark.skipif(shutil.which("ncks") is None, reason="ncks (Debian nco) not installed")
@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="ncks reads through Debian's netcdf-c 4.9.0, built "
                   "without codecs: a zlib chunk's compressed bytes come back as the data")
def test_ncks_reads_zlib_chunks_as_their_compressed_bytes(tmp_path):
    cell = one_cell(BY_ID["shuffle-zlib"], PEERS["ours-zarr"], configured("ncks"), tmp_path)
    first = [d for d in cell.differences if d.startswith("/arrays//i[0]: ")]
    still_wrong(first, wrong=["/arrays//i[0]: 0 != 2019778168"], right=[])


@pytest.mark.skipif(configured("zarrita").available() is not None,
                    reason="zarrita (npm, scripts/test) not installed")
@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="zarrita 0.7.5 reverses the bytes of a >S1 array")
def test_zarrita_reverses_big_endian_char_bytes(tmp_path):
    cell = one_cell(BY_ID["char-var"], PEERS["ours"], configured("zarrita"), tmp_path)
    first = [d for d in cell.differences if d.startswith("/arrays//c[0]: ")]
    still_wrong(first, wrong=['/arrays//c[0]: "a" != "\\u0000"'], right=[])


@pytest.mark.skipif(configured("zarrita").available() is not None,
                    reason="zarrita (npm, scripts/test) not installed")
@pytest.mark.parametrize("writer", ["zarr-python", "zarr-python-v3"])
def test_zarrita_adapter_reads_fortran_order_in_c_order(writer, tmp_path):
    """zarrita hands back an F-ordered chunk (v2 "order": "F", a v3 transpose codec) with Fortran strides, not
    transposed; the adapter once listed its items as they lay, so the f-order cells deviated (1 != 4)."""
    cell = one_cell(BY_ID["f-order"], PEERS[writer], configured("zarrita"), tmp_path)
    assert (cell.status, cell.differences) == ("pass", [])


@pytest.mark.skipif(configured("zarrita").available() is not None,
                    reason="zarrita (npm, scripts/test) not installed")
@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="zarrita 0.7.5 fails on a v3 data_type given as an "
                   "object (null_terminated_bytes, the char type zarr-python and xarray write): dataType.match")
def test_zarrita_fails_on_a_v3_data_type_object(tmp_path):
    pre = one_cell(BY_ID["char-var"], PEERS["ours-zarr-v3"], configured("zarr-python-3.4"), tmp_path / "pre")
    assert (pre.status, pre.differences) == ("pass", []), pre  # zarr-python 3.4 reads the very store right
    cell = one_cell(BY_ID["char-var"], PEERS["ours-zarr-v3"], configured("zarrita"), tmp_path)
    still_wrong((cell.status, cell.message),
                wrong=("fails", "reader exit 1: zarrita: dataType.match is not a function"), right=("pass", ""))


# ---- Debian's netcdf-c 4.9.0 (ncdump/ncgen), adapters/netcdf-c-4.9: its faults as the matrix meets them ------------

def netcdf_c_490():
    require_tool("ncdump")
    require_tool("ncgen")
    return configured("netcdf-c-4.9")


def test_490_adapter_reads_the_layout_it_knows_as_written(tmp_path):
    """The 4.8-4.9.0 layout (our nczarr-2-upper flavor) read by ncdump 4.9.0 through the adapter: every type at
    its extremes, char with NUL padding, typed attributes, a group with its own dimension: the source model,
    exactly (storage is not what a reader returns)."""
    model = upper_compatible_model()
    with DirectoryStore(tmp_path / "up.file", "w") as store:
        write_dataset(model, store, flavor="nczarr-2-upper")
    seen = netcdf_c_490().read(str(tmp_path / "up.file"))
    assert seen.canonical_text(storage=False) == model.canonical_text(storage=False)


def test_490_adapter_writes_what_ncgen_writes(tmp_path):
    """A case written through the adapter is ncgen 4.9.0's store: the 4.8-4.9.0 layout's upper-case keys."""
    import json

    netcdf_c_490().write(BY_ID["groups-nested"].model(), tmp_path / "s", {})
    assert set(json.loads((tmp_path / "s" / ".zattrs").read_text())) >= {"_NCZARR_ATTR"}
    assert "_NCZARR_SUPERBLOCK" in json.loads((tmp_path / "s" / ".zgroup").read_text())


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="Debian's netcdf-c 4.9.0 has no NCZarr codecs: ncdump "
                   "shows a zlib chunk's compressed bytes as the data, exit 0")
def test_490_adapter_reads_zlib_chunks_as_their_compressed_bytes(tmp_path):
    cell = one_cell(BY_ID["shuffle-zlib"], PEERS["ours-zarr"], netcdf_c_490(), tmp_path)
    first = [d for d in cell.differences if d.startswith("/arrays//i[0]: ")]
    still_wrong(first, wrong=["/arrays//i[0]: 0 != 2019778168"], right=[])


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="netcdf-c 4.9.0 ignores a pure-Zarr dtype's byte "
                   "order: >f4 chunks read as little-endian")
def test_490_adapter_ignores_a_big_endian_dtype(tmp_path):
    cell = one_cell(BY_ID["big-endian"], PEERS["ours-zarr"], netcdf_c_490(), tmp_path)
    still_wrong(cell.differences[:1], wrong=["/arrays//f[0]: 0.5 != 8.8e-44"], right=[])


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="ncdump 4.9.0 is killed by SIGSEGV reading a Zarr "
                   "array of shape []")
def test_490_adapter_reader_crashes_on_scalars(tmp_path):
    cell = one_cell(BY_ID["scalar"], PEERS["ours-zarr"], netcdf_c_490(), tmp_path)
    still_wrong((cell.status, cell.message), wrong=("fails", "reader exit 1: ncdump exit -11: killed by signal 11"),
                right=("pass", ""))


@pytest.mark.xfail(strict=True, raises=PeerStillWrong, reason="ncgen 4.9.0 refuses an unlimited dimension in NCZarr")
def test_490_adapter_writer_refuses_unlimited_dimensions(tmp_path):
    cell = one_cell(BY_ID["unlimited-dim"], netcdf_c_490(), PEERS["ours"], tmp_path)
    still_wrong((cell.status, cell.message), right=("pass", ""), wrong=(
        "fails", "writer failed: writer exit 1: ncgen exit 1: ncgen: NetCDF: Invalid dimension size"))


def test_gate_evidence_of_a_peer_the_run_does_not_have_is_not_held_against_ours(tmp_path):
    """netcdf-c 4.9.0 is declared in nczarr-conformance.toml, so a run without that config has no netcdf-c-4.9: a
    known fault whose evidence is netcdf-c 4.9.0's output (ours-nczarr-2-upper → netcdf-c-4.10, char-var) cannot
    be checked there, and is excused as for a peer not installed, not turned into an error of ours."""
    run = run_matrix(tmp_path / "m", cases=[BY_ID["char-var"]],
                     peer_ids=["ours", "ours-nczarr-2-upper", "netcdf-c-4.10"])
    assert "netcdf-c-4.9" not in {i["id"] for i in run.implementations}
    assert [v.key for v in gate.violations(run)] == [("writer", "char-var", "ours-nczarr-2-upper", "netcdf-c-4.10")]
    errors, excused = gate.explain(run)
    assert errors == [] and len(excused) == 1


def test_the_copied_netcdf_c_entry_grades_the_same_under_another_id_and_the_gate_says_so(tmp_path):
    """docs/plugins.md: the netcdf-c 4.9 entry copied under another id grades the same cells (the id picks no
    case); its pinned faults follow the entry (its ``known`` file), and without them the run exits 1 with the
    gate's line: nothing in the package names netcdf-c-4.9."""
    require_tool("ncdump")
    require_tool("ncgen")
    entry = (REPO / CONFIG_NAME).read_text(encoding="utf-8").split('[implementations."netcdf-c-4.9"]', 1)[1]
    entry = entry.split("\n[", 1)[0].replace("adapters/", f"{REPO}/adapters/")
    assert "\nknown = " in entry
    unpinned = "\n".join(line for line in entry.split("\n") if not line.startswith("known = "))
    runs = {}
    for peer_id, declared in (("netcdf-c-4.9", entry), ("my-netcdf-c", unpinned), ("my-pinned-netcdf-c", entry)):
        config = tmp_path / f"{peer_id}.toml"
        config.write_text(f'[implementations."{peer_id}"]{declared}', encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.report", "report", "--config",
                               str(config), "--out", str(tmp_path / peer_id), "--peers", f"ours,{peer_id}",
                               "--cases", "numeric-types"], capture_output=True, text=True, timeout=600,
                              check=False, cwd=tmp_path)
        cells = json.loads((tmp_path / peer_id / "interop.json").read_text(encoding="utf-8"))["cells"]
        runs[peer_id] = (done, [{k: (v.replace(peer_id, "ID") if isinstance(v, str) else v) for k, v in c.items()}
                                for c in cells])
    (same_id, same_cells), (other_id, other_cells) = runs["netcdf-c-4.9"], runs["my-netcdf-c"]
    pinned_id, pinned_cells = runs["my-pinned-netcdf-c"]
    assert same_cells == other_cells == pinned_cells and len(same_cells) == 4
    assert (same_id.returncode, other_id.returncode, pinned_id.returncode) == (0, 1, 0), other_id.stderr
    assert "ours → my-netcdf-c deviates where writer my-netcdf-c passes" in other_id.stderr
