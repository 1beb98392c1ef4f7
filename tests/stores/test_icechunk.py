"""Icechunk repositories read by our reader (stores/icechunk_store.py, issue 36): ``open``, the xarray engine,
``nczarr-dump`` and ``nczarr-check``, through the icechunk library.

The repositories are real: VirtualiZarr 2.8.0 and icechunk 2.3.0 write them (spec version 1, which icechunk
1.x reads) from VirtualiZarr's own venv (tests/stores/icechunk_write.py), each chunk a virtual reference into
a netCDF-4 file netCDF4-python wrote. Expected values and storage come from that file through netCDF4-python
and h5py, never from our reader.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nczarr_conformance
from nczarr_conformance.errors import MissingDependencyError, StoreError, UsageError
from nczarr_conformance.limits import LimitError
from nczarr_conformance.stores import open_store
from nczarr_conformance.urls import parse
from tests.cf_sources import write_cf
from tests.conftest import missing_peer

pytest.importorskip("icechunk")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")

VIRTUALIZARR_PYTHON = Path(os.path.expanduser("~/.cache/nczarr-virtualizarr/bin/python"))
WRITE = Path(__file__).with_name("icechunk_write.py")
REPO = Path(__file__).resolve().parents[2]
#: the variables whose chunks are virtual: VirtualiZarr loads the coordinates (``time``, ``lat``) and writes
#: them as native chunks, through xarray's encoding (a NaN ``_FillValue`` the file does not have)
VIRTUAL = ("tas",)


def _write_source(path: Path) -> None:
    """A small CF-like netCDF-4 file (tests/cf_sources.py): 8 fixed time steps, titled "first"."""
    write_cf(path, record=False, title="first")


def _icechunk_write(source: Path, repo: Path, spec_version: int = 1) -> dict[str, str]:
    if not VIRTUALIZARR_PYTHON.exists():
        missing_peer(f"{VIRTUALIZARR_PYTHON} missing (scripts/test makes it: VirtualiZarr 2.8.0, icechunk 2.3.0)")
    done = subprocess.run([str(VIRTUALIZARR_PYTHON), str(WRITE), str(source), str(repo), str(spec_version)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ids: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return ids


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(source.nc, its Icechunk repository (spec v1), the two snapshots on main)."""
    where = tmp_path_factory.mktemp("icechunk")
    source, repo = where / "source.nc", where / "repo"
    _write_source(source)
    return source, repo, _icechunk_write(source, repo)


def _netcdf4(source: Path) -> dict[str, tuple[np.ndarray, Any, tuple[int, ...] | str]]:
    """Each variable as netCDF4-python reads the file: raw values, _FillValue, chunking."""
    with netCDF4.Dataset(source) as ds:
        ds.set_auto_maskandscale(False)
        return {name: (v[...], v.__dict__.get("_FillValue"), tuple(v.chunking()) if v.chunking() != "contiguous"
                       else v.shape) for name, v in ds.variables.items()}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.smoke  # the smoke run's case for this store kind (docs/testing.md)
@pytest.mark.parametrize("form", ["dir", "icechunk", "file"])
def test_open_reads_the_repository_as_netcdf4_reads_the_source(written: tuple[Path, Path, dict[str, str]],
                                                               form: str) -> None:
    source, repo, _ = written
    url = {"dir": str(repo), "icechunk": f"icechunk://{repo}", "file": repo.as_uri()}[form]
    expected = _netcdf4(source)
    with nczarr_conformance.open(url) as ds:
        assert sorted(ds.variables) == sorted(expected)
        for name, (values, fill, chunks) in expected.items():
            var = ds[name]
            got = var[...]
            assert got.dtype == values.dtype, name
            np.testing.assert_array_equal(got, values, err_msg=name)
            if name in VIRTUAL:
                assert var.attrs.get("_FillValue") == fill, name
                assert var.chunks == chunks, name
        assert ds.attrs["title"] == "second"  # main's head: the second commit


def test_a_virtual_chunk_is_the_hdf5_chunk_h5py_indexes_and_its_codecs_are_hdf5s(
        written: tuple[Path, Path, dict[str, str]]) -> None:
    """The store hands back each chunk's bytes as they lie in the file (icechunk fetched the byte range), with
    the HDF5 dataset's filters as the codecs: the storage is the source's, not a copy re-encoded."""
    source, repo, _ = written
    store = open_store(str(repo))
    meta = json.loads(store.get("/tas/zarr.json") or b"{}")
    names = [c["name"] for c in meta["codecs"]]
    with h5py.File(source, "r") as f:
        tas = f["tas"]
        assert tas.shuffle and tas.compression == "gzip"
        assert names[-2:] == ["numcodecs.shuffle", "numcodecs.zlib"]
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == list(tas.chunks)
        _, raw = tas.id.read_direct_chunk((3, 2, 0))
    assert store.get("/tas/c/1/1/0", limit=len(raw)) == raw
    assert store.get_range("/tas/c/1/1/0", 2, 5) == (raw[2:7], len(raw))
    assert store.get_range("/tas/c/1/1/0", -4, 4) == (raw[-4:], len(raw))
    # what is not there reads as missing, as on every store: a chunk outside the grid, a key of another format
    assert store.get("/tas/c/9/9/9") is None and store.get("/.zgroup") is None and store.get("/nope") is None


def test_reads_are_bounded_before_anything_is_fetched(written: tuple[Path, Path, dict[str, str]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    source, repo, _ = written
    store = open_store(str(repo))
    with h5py.File(source, "r") as f:
        _, raw = f["tas"].id.read_direct_chunk((0, 0, 0))
    fetched: list[str] = []
    monkeypatch.setattr(store, "_fetch", lambda key, byte_range=None: fetched.append(key))
    with pytest.raises(LimitError, match=f"{len(raw)} bytes"):
        store.get("/tas/c/0/0/0", limit=len(raw) - 1)
    assert fetched == []  # refused on the size its reference declares, nothing fetched


def test_a_snapshot_or_tag_of_the_url_reads_that_version(written: tuple[Path, Path, dict[str, str]]) -> None:
    _, repo, ids = written
    with nczarr_conformance.open(f"icechunk://{repo}#snapshot={ids['first']}") as ds:
        assert ds.attrs["title"] == "first"
    with nczarr_conformance.open(f"icechunk://{repo}#branch=main") as ds:
        assert ds.attrs["title"] == "second"


def test_a_worker_reopening_the_repository_reads_the_snapshot_the_client_pinned(
        written: tuple[Path, Path, dict[str, str]]) -> None:
    """A dask worker opens the URL again: held to the client's snapshot, it reads that one, not main's head."""
    from nczarr_conformance.stores import reopen

    _, repo, ids = written
    client = open_store(f"icechunk://{repo}#snapshot={ids['first']}")
    worker = reopen(f"icechunk://{repo}", client.pin())
    assert json.loads(worker.get("/zarr.json") or b"{}")["attributes"]["title"] == "first"


def test_the_xarray_engine_reads_what_xarray_reads_from_the_source(written: tuple[Path, Path, dict[str, str]]) -> None:
    xr = pytest.importorskip("xarray")
    source, repo, _ = written
    with xr.open_dataset(source, engine="netcdf4") as want, xr.open_dataset(repo, engine="nczarr") as got:
        for name in ("tas", "lat", "time"):
            xr.testing.assert_identical(got[name], want[name])


def test_dump_and_check_read_it(written: tuple[Path, Path, dict[str, str]]) -> None:
    source, repo, _ = written
    dump = _run("nczarr_conformance.cli.dump", "-v", "lat", str(repo))
    assert (dump.returncode, dump.stderr) == (0, "")  # icechunk's warning about concurrent commits is not shown
    with netCDF4.Dataset(source) as ds:
        lat = ds["lat"][:]
    shown = dump.stdout.split("lat =")[-1].split(";")[0]
    np.testing.assert_array_equal(np.array([float(x) for x in shown.replace(",", " ").split()], "f4"), lat)
    check = _run("nczarr_conformance.cli.check", f"icechunk://{repo}")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "flavor zarr-v3; 0 errors" in check.stdout


def test_a_missing_target_is_one_line_naming_it(tmp_path: Path) -> None:
    source, repo = tmp_path / "gone.nc", tmp_path / "repo"
    _write_source(source)
    _icechunk_write(source, repo)
    source.unlink()
    done = _run("nczarr_conformance.cli.dump", str(repo))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(source) in done.stderr and "not found" in done.stderr


def test_a_spec_v2_repository_is_refused_in_one_line_naming_icechunks_reason(tmp_path: Path) -> None:
    import icechunk

    if not icechunk.__version__.startswith("1."):
        pytest.skip(f"icechunk {icechunk.__version__} reads spec v2 repositories")
    source, repo = tmp_path / "s.nc", tmp_path / "repo2"
    _write_source(source)
    _icechunk_write(source, repo, spec_version=2)
    done = _run("nczarr_conformance.cli.dump", "-h", str(repo))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"nczarr-dump: {repo}: cannot open the Icechunk repository with icechunk "
                                   f"{icechunk.__version__}: this repository uses Icechunk v2 format, please upgrade "
                                   "the icechunk library")


def test_without_icechunk_one_line_names_the_package(written: tuple[Path, Path, dict[str, str]],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "icechunk", None)  # import icechunk raises ImportError
    with pytest.raises(MissingDependencyError, match=r"needs icechunk: pip install 'nczarr-conformance\[icechunk\]'"):
        open_store(f"icechunk://{written[1]}")


def test_the_url_names_a_repository_and_one_version_of_it(tmp_path: Path) -> None:
    assert parse("icechunk:///data/r#snapshot=ABC").kind == "icechunk"
    assert parse("icechunk:///data/r").path == "/data/r"
    with pytest.raises(UsageError, match="name one of #branch=, #tag=, #snapshot="):
        open_store("icechunk:///data/r#branch=main&tag=v1")
    with pytest.raises(UsageError, match="read-only"):
        open_store("icechunk:///data/r", "w")
    with pytest.raises(StoreError, match="no such directory"):
        open_store(f"icechunk://{tmp_path}/none")



# ---- nczarr-check's NCZ-REF-* rules on virtual chunks (checker/references.py) -------------------------------------
def _ours(where: Path) -> tuple[Path, Path]:
    """(source.nc, an Icechunk repository nc2nczarr --reference made of it: each reference records the file's
    modification time)."""
    source, repo = where / "source.nc", where / "repo"
    _write_source(source)
    done = _run("nczarr_conformance.cli.convert", str(source), f"icechunk://{repo}", "--reference")
    assert done.returncode == 0, done.stderr
    return source, repo


def _errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("error ")]


def _h5_chunks(source: Path, name: str) -> dict[str, tuple[int, int]]:
    """Each stored HDF5 chunk of ``name`` as h5py indexes it: its Zarr v3 key -> (byte offset, size)."""
    with h5py.File(source, "r") as f:
        ds = f[name]
        infos = [ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())]
        return {f"/{name}/c/" + "/".join(str(o // c) for o, c in zip(i.chunk_offset, ds.chunks, strict=True)):
                (i.byte_offset, i.size) for i in infos}


def test_check_finds_no_fault_in_intact_virtual_chunks(tmp_path: Path) -> None:
    _, repo = _ours(tmp_path)
    for deep in ([], ["--deep"]):
        done = _run("nczarr_conformance.cli.check", *deep, "--select", "NCZ-REF", f"icechunk://{repo}")
        assert done.returncode == 0 and " 0 errors" in done.stdout, done.stdout + done.stderr


def test_check_names_a_removed_target(tmp_path: Path) -> None:
    source, repo = _ours(tmp_path)
    source.unlink()
    errors = _errors(_run("nczarr_conformance.cli.check", f"icechunk://{repo}"))
    assert errors == [f"error NCZ-REF-TARGET -: target {source.as_uri()} is not reachable (No such file or "
                      "directory): its virtual chunks would fail"]


@pytest.mark.parametrize("how", ["rewritten", "truncated"])
def test_check_names_a_target_changed_since_the_references(tmp_path: Path, how: str) -> None:
    """A later modification time than the references record: icechunk refuses the chunks, the check says so."""
    source, repo = _ours(tmp_path)
    if how == "rewritten":
        with open(source, "r+b") as fh:
            fh.seek(-100, os.SEEK_END)
            fh.write(b"XXXX")
    else:
        os.truncate(source, source.stat().st_size // 2)
    later = source.stat().st_mtime + 5
    os.utime(source, (later, later))
    errors = _errors(_run("nczarr_conformance.cli.check", f"icechunk://{repo}"))
    assert errors == [f"error NCZ-REF-TARGET -: target {source.as_uri()} changed since the virtual references were "
                      f"made (modified at {later:.3f}, after the time they record): icechunk refuses its virtual "
                      "chunks"]


def test_check_deep_names_every_chunk_past_a_truncated_targets_end(tmp_path: Path) -> None:
    """Truncated with its modification time put back (``cp -p``, rsync): only the ranges tell, each chunk past the
    new end named with its bytes, as h5py's chunk index has them."""
    source, repo = _ours(tmp_path)
    chunks = _h5_chunks(source, "tas")
    ends = sorted(offset + size for offset, size in chunks.values())
    size = ends[len(ends) // 2] - 1  # half the chunks end past it
    before = source.stat()
    os.truncate(source, size)
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    past = {key: span for key, span in chunks.items() if span[0] + span[1] > size}
    assert 0 < len(past) < len(chunks)
    errors = _errors(_run("nczarr_conformance.cli.check", "--deep", "--select", "NCZ-REF", f"icechunk://{repo}"))
    assert sorted(errors) == sorted(f"error NCZ-REF-RANGE {key}: reads bytes {offset}-{offset + length} of "
                                    f"{source.as_uri()} ({size} bytes)" for key, (offset, length) in past.items())


@pytest.mark.parametrize("shuffle", [False, True])
def test_check_names_codecs_and_chunks_that_are_not_the_targets(tmp_path: Path, shuffle: bool) -> None:
    """The target replaced by another file, its modification time put back: without shuffle its filters are not the
    codecs; with the same filters and other values, each chunk's length is not the HDF5 chunk's (h5py's index)."""
    source, repo = _ours(tmp_path)
    was = _h5_chunks(source, "tas")
    before = source.stat()
    other = tmp_path / "other.nc"
    with netCDF4.Dataset(other, "w") as ds:
        for name, size in (("time", 8), ("lat", 4), ("lon", 6)):
            ds.createDimension(name, size)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(8.0)
        ds.createVariable("lat", "f4", ("lat",), contiguous=True)[:] = np.arange(4.0)
        tas = ds.createVariable("tas", "i2", ("time", "lat", "lon"), zlib=True, shuffle=shuffle, chunksizes=(3, 2, 6))
        tas[:] = np.random.default_rng(1).integers(-30000, 30000, (8, 4, 6))
    os.replace(other, source)
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    now = _h5_chunks(source, "tas")
    with h5py.File(source, "r") as f:
        assert f["tas"].compression == "gzip" and f["tas"].shuffle == shuffle
    errors = _errors(_run("nczarr_conformance.cli.check", "--deep", "--select", "NCZ-REF", f"icechunk://{repo}"))
    if not shuffle:
        assert errors == [f"error NCZ-REF-CODECS /tas: declares codecs ['shuffle', 'zlib'] but {source.as_uri()}/tas "
                          "is stored with ['zlib']"]
        return
    wrong = sorted(key for key in was if was[key][1] != now[key][1])
    assert len(wrong) > 3  # the first three named, the rest counted
    at = {key: [int(i) * c for i, c in zip(key.split("/")[3:], (3, 2, 6), strict=True)] for key in wrong}
    assert sorted(errors) == sorted([f"error NCZ-REF-CODECS {key}: {was[key][1]} bytes, but {source.as_uri()}/tas's "
                                     f"chunk at {at[key]} is {now[key][1]} bytes (at byte {now[key][0]})"
                                     for key in wrong[:3]]
                                    + [f"error NCZ-REF-CODECS /tas: and {len(wrong) - 3} more virtual chunks that are "
                                       "no chunk of /tas"])
