"""Issue #26: an as-is HDF5 chunk reaches a directory store file to file (``os.copy_file_range``),
and every store where the kernel cannot copy (zip, another file system) gets the same bytes read
through Python. Expected bytes come from h5py's ``read_direct_chunk`` (the chunk HDF5 stored)."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import _header
from nczarr_conformance.errors import StoreError
from nczarr_conformance.model import Dataset, diff
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.sources import netcdf4
from nczarr_conformance.sources.hdf5_chunks import DirectChunks
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.zip import ZipStore


@pytest.fixture(scope="module")
def deflated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One float variable in 10 zlib + shuffle chunks (the last an edge chunk)."""
    import netCDF4

    path = tmp_path_factory.mktemp("extent") / "d.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("time", 19)
        nc.createDimension("x", 32)
        v = nc.createVariable("v", "f4", ("time", "x"), zlib=True, complevel=1, shuffle=True, chunksizes=(2, 32))
        v[:] = np.random.default_rng(5).random((19, 32), dtype="f4")
    return path


def _stored_chunks(path: Path) -> dict[str, bytes]:
    """Chunk key → the bytes HDF5 stored for it (h5py, the peer)."""
    with h5py.File(path, "r") as f:
        ds = f["v"]
        return {f"v/{i}.0": bytes(ds.id.read_direct_chunk((i * 2, 0))[1]) for i in range(10)}


class _Counting(DirectoryStore):
    extents = 0

    def put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        type(self).extents += 1
        super().put_extent(key, fd, offset, size)


def _convert(src: Path, store: Store) -> int:
    nc = netcdf4.open_nc(str(src))
    direct = DirectChunks(str(src))
    try:
        variables: dict = {}
        with store:
            return write_dataset(Dataset(_header(nc, "/", variables)), store, raw=direct, threads=2,
                                 source=lambda k, v, r: netcdf4.read_values(variables[k], r or None))
    finally:
        direct.close()
        netcdf4.close_nc(nc)


def test_a_directory_store_gets_each_copied_chunk_as_a_file_range(deflated, tmp_path):
    _Counting.extents = 0
    copied = _convert(deflated, _Counting(tmp_path / "o.file", "w"))
    assert copied == 10 and _Counting.extents == 10  # every chunk went through put_extent, none through put
    for key, payload in _stored_chunks(deflated).items():
        assert (tmp_path / "o.file" / key).read_bytes() == payload
    assert diff(open_dataset(str(deflated)), open_dataset(str(tmp_path / "o.file"))) == []


def test_a_zip_store_gets_the_same_chunks_through_python(deflated, tmp_path):
    with open(deflated, "rb") as fh, ZipStore(tmp_path / "z.zip", "w") as store:
        with h5py.File(deflated, "r") as f:
            info = f["v"].id.get_chunk_info(3)
        store.put_extent("/v/3.0", fh.fileno(), info.byte_offset, info.size)
    with ZipStore(tmp_path / "z.zip") as store:
        assert store.get("/v/3.0") == _stored_chunks(deflated)["v/3.0"]


def test_across_file_systems_the_kernel_refuses_and_the_bytes_are_read(tmp_path):
    """/dev/shm (tmpfs) into tmp_path: copy_file_range raises EXDEV there (checked first, on real files)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another file system than tmp_path")
    src = shm / f"ncz-extent-{os.getpid()}"
    src.write_bytes(b"head" + bytes(range(256)) * 40)
    try:
        with open(src, "rb") as fh:
            probe = tmp_path / "probe"
            with open(probe, "wb") as out:
                try:
                    os.copy_file_range(fh.fileno(), out.fileno(), 8, 0)
                except OSError as exc:
                    assert exc.errno in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP)
                else:
                    pytest.skip("this kernel copies across these file systems")
            with DirectoryStore(tmp_path / "x.file", "w") as store:
                store.put_extent("/a/0", fh.fileno(), 4, 256 * 40)
        assert (tmp_path / "x.file" / "a" / "0").read_bytes() == bytes(range(256)) * 40
    finally:
        src.unlink()


def test_a_chunk_past_the_end_of_the_file_is_one_store_error(deflated, tmp_path):
    size = deflated.stat().st_size
    with open(deflated, "rb") as fh, DirectoryStore(tmp_path / "t.file", "w") as store:
        with pytest.raises(StoreError, match=r"d\.nc: truncated: chunk at"):
            store.put_extent("/v/0.0", fh.fileno(), size - 10, 100)
        store.abort()
