"""``nc2nczarr --concat DIM --reference FILES... icechunk://PATH``: one Icechunk repository, one commit, its chunks
virtual references into every daily file, concatenated along DIM (conversion/reference_concat.py with
conversion/icechunk_references.py's writer and stores/icechunk_store.py's IcechunkCollector).

Expected values come from each source file through netCDF4-python, concatenated here; expected storage from
h5py's chunk index of each file and its filters. What is checked is read through icechunk's own session (its
store, under zarr-python and xarray), and through our reader: never from the writer under test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nczarr_conformance
from nczarr_conformance.conversion import reference_concat
from nczarr_conformance.conversion.reference_concat import concat_references
from nczarr_conformance.errors import UnsupportedError, UsageError
from tests.test_reference_concat import DAYS, WIDE, _day, _netcdf4, in_process_and_on_a_cluster

icechunk = pytest.importorskip("icechunk")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")

REPO = Path(__file__).resolve().parent.parent
#: every variable of _day(default_time=True, wide=WIDE): those along time, and lat (the first file's)
VARIABLES = ("time", "time_bnds", "tas", "label", "wide", "lat")


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", f"nczarr_conformance.cli.{module}", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _open(repo: Path) -> tuple[Any, Any]:
    """(the repository, a read-only session on main), opened as icechunk's documentation opens one whose virtual
    chunks are local files."""
    storage = icechunk.local_filesystem_storage(str(repo))
    prefixes = list(icechunk.Repository.fetch_config(storage).virtual_chunk_containers)
    opened = icechunk.Repository.open(storage, authorize_virtual_chunk_access=dict.fromkeys(prefixes))
    return opened, opened.readonly_session(branch="main")


def _get(session: Any, key: str) -> bytes:
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    got = sync(session.store.get(key, default_buffer_prototype()))
    assert got is not None, key
    return bytes(got.to_bytes())


def _everything(session: Any) -> dict[str, bytes]:
    """Every key of the repository and its bytes (a virtual chunk's read from its target by icechunk)."""
    from zarr.core.sync import sync

    async def listed() -> list[str]:
        return [name async for name in session.store.list_prefix("")]

    return {key: _get(session, key) for key in sorted(sync(listed()))}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path, str]:
    """Daily files of one record (time chunked by netCDF4-python's default: it straddles files; wide chunked by 2
    records: it straddles too), concatenated by the command with a quoted glob; (files, repository, its stderr)."""
    where = tmp_path_factory.mktemp("ice-concat")
    files = [_day(where / f"day{d}.nc", d, default_time=True, wide=WIDE) for d in range(DAYS)]
    repo = where / "repo"
    done = _run("convert", "--concat", "time", "--reference", str(where / "day*.nc"), f"icechunk://{repo}")
    assert done.returncode == 0, done.stderr
    return files, repo, done.stderr


def test_zarr_python_reads_every_variable_as_netcdf4_reads_the_files_concatenated(
        converted: tuple[list[Path], Path, str]) -> None:
    files, repo, _ = converted
    _, session = _open(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs codecs are outside the v3 spec: zarr-python says so
        group = zarr.open_group(session.store, mode="r")
        assert sorted(group.array_keys()) == sorted(VARIABLES)
        for name in VARIABLES:
            expected = _netcdf4(files, name) if name != "lat" else _netcdf4(files[:1], name)
            got = group[name][...]
            assert got.dtype == expected.dtype and got.shape == expected.shape, (name, got.dtype, got.shape)
            np.testing.assert_array_equal(got, expected, err_msg=name)
        assert group.attrs["title"] == "daily means"


def test_xarray_reads_the_repository_as_open_mfdataset_reads_the_files(
        converted: tuple[list[Path], Path, str]) -> None:
    xr = pytest.importorskip("xarray")
    files, repo, _ = converted
    _, session = _open(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_zarr(session.store, consolidated=False) as got, \
                xr.open_mfdataset(files, engine="netcdf4", combine="nested", concat_dim="time") as want:
            xr.testing.assert_identical(got.load(), want.load())
            assert got["time"].dt.calendar == "noleap"
            assert int(got["tas"].isnull().sum()) == int(want["tas"].isnull().sum()) > 0


def test_our_reader_reads_the_repository_as_netcdf4_reads_the_files(converted: tuple[list[Path], Path, str]) -> None:
    files, repo, _ = converted
    with nczarr_conformance.open(f"icechunk://{repo}") as ds:
        assert sorted(ds.variables) == sorted(VARIABLES)
        for name in VARIABLES:
            expected = _netcdf4(files, name) if name != "lat" else _netcdf4(files[:1], name)
            got = ds[name][...]
            assert got.dtype == expected.dtype and got.shape == expected.shape, name
            np.testing.assert_array_equal(got, expected, err_msg=name)
        assert ds.attrs["title"] == "daily means"


def test_tas_is_virtual_chunks_of_every_file_with_hdf5s_codecs_and_time_is_inline(
        converted: tuple[list[Path], Path, str]) -> None:
    """Storage: ``tas``'s chunk k is file k's HDF5 chunk (h5py's bytes), virtual, its codecs the file's filters;
    ``time`` and ``wide`` straddle files, so each is one chunk written into the repository, the whole array; one
    commit."""
    files, repo, stderr = converted
    opened, session = _open(repo)
    assert set(session.all_virtual_chunk_locations()) == {p.as_uri() for p in files}
    virtual = icechunk.ChunkType.VIRTUAL
    # written into the repository: icechunk keeps a small chunk inline in its manifest, a larger one as its own object
    written = {"time": icechunk.ChunkType.INLINE, "wide": icechunk.ChunkType.NATIVE}
    meta = json.loads(_get(session, "tas/zarr.json"))
    with h5py.File(files[0], "r") as f:
        h5 = f["tas"]
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == list(h5.chunks)
        assert [c["name"] for c in meta["codecs"]] == ["bytes", "numcodecs.shuffle", "numcodecs.zlib"]
        assert h5.shuffle and meta["codecs"][2]["configuration"]["level"] == h5.compression_opts
    assert meta["shape"] == [DAYS, 3, 4]
    for k, path in enumerate(files):
        assert session.chunk_type("/tas", [k, 0, 0]) == virtual, k
        assert session.chunk_type("/time_bnds", [k, 0]) == virtual, k
        with h5py.File(path, "r") as f:
            _, raw = f["tas"].id.read_direct_chunk((0, 0, 0))
        assert _get(session, f"tas/c/{k}/0/0") == raw, path
    for name, shape in (("time", [DAYS]), ("wide", [DAYS, WIDE])):
        doc = json.loads(_get(session, f"{name}/zarr.json"))
        assert doc["shape"] == shape and doc["chunk_grid"]["configuration"]["chunk_shape"] == shape, doc
        assert session.chunk_type(f"/{name}", [0] * len(shape)) == written[name], name
    assert [s.message for s in opened.ancestry(branch="main")] == [
        f"nc2nczarr --concat time --reference ({DAYS} files)", "Repository initialized"]
    # the warnings: each straddling variable once, naming why; what v3 does not keep once, not once a file
    assert f"{files[0]}: /time: written inline, {DAYS * 8} bytes: its chunk size" in stderr, stderr
    assert f"{files[0]}: /wide: written inline, {DAYS * WIDE * 8} bytes" in stderr, stderr
    assert stderr.count("Zarr v3 does not keep unlimited dimensions") == 1, stderr


def test_nczarr_check_passes(converted: tuple[list[Path], Path, str]) -> None:
    _, repo, _ = converted
    done = _run("check", f"icechunk://{repo}")
    assert done.returncode == 0 and " 0 errors" in done.stdout, done.stdout + done.stderr


def test_each_virtual_chunk_records_its_own_files_modification_time(tmp_path: Path) -> None:
    """A file modified after the run is refused by icechunk on its chunks only: each reference carries its own
    target's time, as one file's references do."""
    files = [_day(tmp_path / f"d{d}.nc", d) for d in range(2)]
    repo = tmp_path / "repo"
    concat_references([str(p) for p in files], f"icechunk://{repo}", "time", workers=1)
    st = files[1].stat()
    os.utime(files[1], ns=(st.st_atime_ns, st.st_mtime_ns + 10 * 10**9))
    _, session = _open(repo)
    with h5py.File(files[0], "r") as f:
        assert _get(session, "tas/c/0/0/0") == f["tas"].id.read_direct_chunk((0, 0, 0))[1]
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        _get(session, "tas/c/1/0/0")


# ---- a refused or interrupted run commits nothing -------------------------------------------------------------
def _head(repo: Path) -> tuple[str, list[str]]:
    opened, session = _open(repo)
    return str(session.snapshot_id), [s.id for s in opened.ancestry(branch="main")]


def _interrupted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Path]:
    files = [_day(tmp_path / f"b{d}.nc", d + 5) for d in range(3)]
    real = reference_concat.reference_file

    def interrupted(job: reference_concat.FileJob) -> reference_concat.FileRefs:
        if job.path == str(files[1]):
            raise KeyboardInterrupt
        return real(job)

    monkeypatch.setattr(reference_concat, "reference_file", interrupted)
    return files


@pytest.mark.parametrize("why", ["gap", "other codecs", "interrupt"])
def test_a_refused_run_leaves_the_existing_repository_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                why: str) -> None:
    first = [_day(tmp_path / f"a{d}.nc", d) for d in range(2)]
    repo = tmp_path / "repo"
    concat_references([str(p) for p in first], f"icechunk://{repo}", "time", workers=1)
    before, listed = _head(repo), sorted(os.listdir(tmp_path))
    expected: tuple[type[BaseException], str]
    if why == "gap":  # days 5, 6, 7 and 10: a step of 3 where the usual one is 1
        files = [_day(tmp_path / f"b{d}.nc", d) for d in (5, 6, 7, 10)]
        expected = (UsageError, f"{tmp_path / 'b10.nc'}: gap in coordinate /time")
    elif why == "other codecs":
        files = [_day(tmp_path / "b5.nc", 5), _day(tmp_path / "b6.nc", 6, complevel=6)]
        expected = (UnsupportedError, f"{tmp_path / 'b6.nc'}: /tas: codecs")
    else:
        files = _interrupted(monkeypatch, tmp_path)
        expected = (KeyboardInterrupt, "^$")
    with pytest.raises(expected[0], match=expected[1]):
        concat_references([str(p) for p in files], f"icechunk://{repo}", "time", workers=1, overwrite=True)
    assert _head(repo) == before
    assert sorted(os.listdir(tmp_path)) == sorted({*listed, *(p.name for p in files)})  # no temporary left
    _, session = _open(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = zarr.open_array(session.store, path="tas", mode="r")[...]
    np.testing.assert_array_equal(got, _netcdf4(first, "tas"))


def test_an_existing_repository_is_refused_without_overwrite_and_nczarr_options_are_refused(tmp_path: Path) -> None:
    files = [_day(tmp_path / f"a{d}.nc", d) for d in range(2)]
    repo = tmp_path / "repo"
    repo.mkdir()
    done = _run("convert", "--concat", "time", "--reference", *map(str, files), f"icechunk://{repo}")
    assert (done.returncode, done.stderr.strip()) == (2, f"nc2nczarr: {repo}: already exists (give --overwrite to "
                                                         "replace it)"), done.stderr
    assert os.listdir(repo) == []
    with pytest.raises(UsageError, match="Zarr v3: no flavor"):
        concat_references([str(p) for p in files], f"icechunk://{tmp_path / 'other'}", "time", flavor="nczarr")
    assert not (tmp_path / "other").exists()


def test_on_a_dask_cluster_the_repository_holds_what_the_in_process_run_writes(tmp_path: Path) -> None:
    """The per-file tasks on a distributed.Client (worker processes, as --workers runs them), time inline there
    too: every key of the repository holds the bytes the in-process run's does."""
    distributed = pytest.importorskip("distributed")
    files = [_day(tmp_path / f"day{d}.nc", d, default_time=True) for d in range(3)]
    here, there = tmp_path / "here", tmp_path / "there"
    in_process_and_on_a_cluster(distributed, files, f"icechunk://{here}", f"icechunk://{there}")
    (_, mine), (_, theirs) = _open(here), _open(there)
    assert _everything(theirs) == _everything(mine)
    assert theirs.chunk_type("/time", [0]) == icechunk.ChunkType.INLINE
    assert set(theirs.all_virtual_chunk_locations()) == {p.as_uri() for p in files}


@pytest.mark.parametrize(("key", "split"), [
    ("tas/c/3/0/0", ("tas", [3, 0, 0])),
    ("g/c/c/0/1", ("g/c", [0, 1])),  # an array named c in group g
    ("c/7/c/2", ("c/7", [2])),  # an array named 7 in a group named c
    ("g/x/c", ("g/x", [])),  # a scalar
    ("tas/zarr.json", None), ("tas/0.0.0", None), ("c/0", None)])
def test_a_v3_chunk_key_splits_into_its_array_and_index(key: str, split: tuple[str, list[int]] | None) -> None:
    """The Zarr v3 spec's ``default`` chunk key encoding with ``/``: the array's path, ``c``, the index."""
    from nczarr_conformance.keys import split_v3_chunk

    assert split_v3_chunk(key) == split
