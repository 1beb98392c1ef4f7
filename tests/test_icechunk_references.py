"""``nc2nczarr IN.nc icechunk://PATH --reference``: a new Icechunk repository, one commit, its chunks virtual
references into IN.nc (conversion/icechunk_references.py, stores/icechunk_store.py's IcechunkCollector).

What is checked is read by icechunk itself, zarr-python and xarray (through ``icechunk.Repository.open`` and its
session's store, not our reader), and compared with netCDF4-python and h5py reading the source.
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

from tests.stores.test_icechunk import _write_source

icechunk = pytest.importorskip("icechunk")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")

REPO = Path(__file__).resolve().parent.parent


def _nc2nczarr(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _session(repo: Path) -> Any:
    """Branch main, read-only, as icechunk's documentation opens a repository of local virtual chunks."""
    storage = icechunk.local_filesystem_storage(str(repo))
    prefixes = list(icechunk.Repository.fetch_config(storage).virtual_chunk_containers)
    opened = icechunk.Repository.open(storage, authorize_virtual_chunk_access=dict.fromkeys(prefixes))
    return opened, opened.readonly_session(branch="main")


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("ice-refs")
    source, repo = where / "source.nc", where / "repo"
    _write_source(source)
    done = _nc2nczarr(str(source), f"icechunk://{repo}", "--reference")
    assert done.returncode == 0, done.stderr
    # every chunk of this file is an HDF5 chunk or a contiguous extent: nothing inline, metadata is no chunk; the
    # one warning names the codecs outside the v3 spec
    assert "written inline" not in done.stderr and "0 bytes of chunks inline" in done.stderr, done.stderr
    assert "warning: codecs outside the Zarr v3 spec written as numcodecs.shuffle, numcodecs.zlib" in done.stderr
    return source, repo


def test_zarr_python_reads_every_variable_as_netcdf4_reads_the_source(converted: tuple[Path, Path]) -> None:
    source, repo = converted
    _, session = _session(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs codecs are outside the v3 spec: zarr-python says so
        group = zarr.open_group(session.store, mode="r")
        with netCDF4.Dataset(source) as ds:
            ds.set_auto_maskandscale(False)
            assert sorted(group.array_keys()) == sorted(ds.variables)
            for name, var in ds.variables.items():
                got = group[name][...]
                assert got.dtype == var.dtype, name
                np.testing.assert_array_equal(got, var[...], err_msg=name)
            assert group.attrs["title"] == ds.title


def test_each_chunk_is_a_virtual_reference_to_the_hdf5_chunk_with_hdf5s_codecs(converted: tuple[Path, Path]) -> None:
    """Storage: the HDF5 chunk grid, its filters as the codecs, and every chunk of the compressed variable the
    byte range h5py indexes in the source (no copy)."""
    source, repo = converted
    _, session = _session(repo)
    assert set(session.all_virtual_chunk_locations()) == {source.as_uri()}
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    meta = json.loads(sync(session.store.get("tas/zarr.json", default_buffer_prototype())).to_bytes())
    with h5py.File(source, "r") as f:
        h5 = f["tas"]
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == list(h5.chunks)
        assert [c["name"] for c in meta["codecs"]] == ["bytes", "numcodecs.shuffle", "numcodecs.zlib"]
        assert meta["codecs"][2]["configuration"]["level"] == h5.compression_opts
        assert h5.shuffle
        _, raw = h5.id.read_direct_chunk((3, 2, 0))
    got = sync(session.store.get("tas/c/1/1/0", default_buffer_prototype()))
    assert got is not None and got.to_bytes() == raw


def test_xarray_reads_the_repository_as_it_reads_the_file(converted: tuple[Path, Path]) -> None:
    xr = pytest.importorskip("xarray")
    source, repo = converted
    _, session = _session(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_zarr(session.store, consolidated=False) as got, xr.open_dataset(source) as want:
            xr.testing.assert_identical(got.load(), want.load())


def test_one_commit_on_main(converted: tuple[Path, Path]) -> None:
    opened, _ = _session(converted[1])
    history = list(opened.ancestry(branch="main"))
    assert [s.message for s in history] == ["nc2nczarr --reference", "Repository initialized"]


def test_a_target_modified_after_is_refused_not_read(tmp_path: Path) -> None:
    """Each reference carries the target's modification time: a target modified later is refused by icechunk
    (our reader says so in one line, exit 2) rather than read as other values."""
    source, repo = tmp_path / "s.nc", tmp_path / "repo"
    _write_source(source)
    assert _nc2nczarr(str(source), f"icechunk://{repo}", "--reference").returncode == 0
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 10 * 10**9))
    _, session = _session(repo)
    with pytest.raises(icechunk.IcechunkError, match="checksum"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.open_array(session.store, path="tas", mode="r")[...]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    dump = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.dump", "-v", "tas", str(repo)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert dump.returncode == 2
    assert dump.stderr.count("\n") == 1 and "checksum" in dump.stderr and source.as_uri() in dump.stderr


def test_a_failed_commit_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nczarr_conformance.conversion.icechunk_references import convert_icechunk_references

    source, repo = tmp_path / "s.nc", tmp_path / "repo"
    _write_source(source)

    def broken(self: Any, message: str, **kwargs: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(icechunk.Session, "commit", broken)
    with pytest.raises(OSError, match="disk full"):
        convert_icechunk_references(str(source), f"icechunk://{repo}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.nc"]  # no repository, no temporary left


def test_an_existing_output_and_nczarr_options_are_refused(tmp_path: Path) -> None:
    source, repo = tmp_path / "s.nc", tmp_path / "repo"
    _write_source(source)
    repo.mkdir()
    done = _nc2nczarr(str(source), f"icechunk://{repo}", "--reference")
    assert (done.returncode, done.stderr.strip()) == (2, f"nc2nczarr: {repo}: already exists (give --overwrite to "
                                                          "replace it)")
    done = _nc2nczarr(str(source), f"icechunk://{tmp_path}/other", "--reference", "--flavor", "zarr")
    assert done.returncode == 2 and "writes Zarr v3: it takes no --flavor" in done.stderr
    assert not (tmp_path / "other").exists()


def test_rich_reads_in_zarr_python_as_in_netcdf4_and_what_v3_drops_is_said(tmp_path: Path) -> None:
    """corpus/rich.nc (groups, strings, char, scalars, an unlimited dimension, big-endian data): every variable's
    values through zarr-python equal netCDF4-python's; what Zarr v3 cannot hold is named on stderr, not dropped
    silently."""
    import shutil

    from tests.conftest import CORPUS

    source, repo = tmp_path / "rich.nc", tmp_path / "rich"
    shutil.copy(CORPUS / "rich.nc", source)
    done = _nc2nczarr(str(source), f"icechunk://{repo}", "--reference")
    assert done.returncode == 0, done.stderr
    assert "Zarr v3 does not keep unlimited dimensions (written at their current length): /time" in done.stderr
    _, session = _session(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = zarr.open_group(session.store, mode="r")
        with netCDF4.Dataset(source) as ds:
            ds.set_auto_maskandscale(False)
            seen = 0
            for group in [ds, *_subgroups(ds)]:
                for name, var in group.variables.items():
                    path = f"{group.path.strip('/')}/{name}".lstrip("/")
                    got, want = root[path][...], var[...]
                    if var.dtype is str:
                        assert [str(x) for x in np.ravel(got)] == [str(x) for x in np.ravel(want)], path
                    else:
                        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=path)
                    seen += 1
    assert seen > 10


def _subgroups(group: Any) -> list[Any]:
    out = []
    for child in group.groups.values():
        out += [child, *_subgroups(child)]
    return out
