"""A chunk whose last decoding stage is shuffle is unshuffled a slab at a time straight into the read's output
(nczarr/reader.py ``ArrayInfo.copy_chunk``, codecs.py ``unshuffled_slabs``): the values are netCDF4's."""
from __future__ import annotations

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance import codecs
from nczarr_conformance.nczarr import reader


@pytest.mark.parametrize("shape,dtype", [((7, 5, 3), "<f4"), ((11,), ">i8"), ((4, 6), "<f8"), ((5, 2), "<i2")])
def test_unshuffled_slabs_are_numcodecs_unshuffle(monkeypatch, shape, dtype):
    import numcodecs

    monkeypatch.setattr(codecs, "SLAB_BYTES", 2 * np.dtype(dtype).itemsize * int(np.prod(shape[1:])))  # 2 rows
    values = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
    shuffle = numcodecs.Shuffle(np.dtype(dtype).itemsize)
    stored = bytes(shuffle.encode(values))
    expected = np.frombuffer(bytes(shuffle.decode(stored)), dtype=dtype).reshape(shape)
    rows = range(1, shape[0])
    got = np.concatenate([slab.view(dtype).reshape(-1, *shape[1:]).copy()
                          for _, slab in codecs.unshuffled_slabs(stored, np.dtype(dtype).itemsize,
                                                                 int(np.prod(shape[1:])), rows)])
    np.testing.assert_array_equal(got, expected[1:])


@pytest.fixture
def shuffled(tmp_path):
    """A netCDF-4 variable with zlib + shuffle (netCDF4's default chain), chunks (4, 6, 5) over (10, 13, 11)."""
    import netCDF4

    path = tmp_path / "s.nc"
    with netCDF4.Dataset(path, "w") as nc:
        for name, n in (("t", 10), ("y", 13), ("x", 11)):
            nc.createDimension(name, n)
        v = nc.createVariable("v", "f4", ("t", "y", "x"), zlib=True, shuffle=True, chunksizes=(4, 6, 5))
        v[:] = np.random.default_rng(35).random((10, 13, 11), dtype=np.float32)
        w = nc.createVariable("w", "i2", ("x",), zlib=True, shuffle=True, chunksizes=(3,))
        w[:] = np.arange(11, dtype="i2") * 300
    store = tmp_path / "s.ncz"
    ncz.convert(str(path), str(store))
    return path, store


KEYS = [np.s_[...], np.s_[:, 7, 3], np.s_[2:9, 1:12, 4:10], np.s_[9, 12, 10], np.s_[[0, 5, 9], 2:8, 4],
        np.s_[1:9:3, 2:12:4, ::2]]


def test_shuffled_chunks_read_as_netcdf4_reads_them_a_slab_at_a_time(shuffled, monkeypatch):
    import netCDF4

    path, store = shuffled
    monkeypatch.setattr(codecs, "SLAB_BYTES", 64)  # several slabs a chunk, a short one last
    slabs: list[int] = []

    def counted(*args, **kwargs):
        for r0, slab in codecs.unshuffled_slabs(*args, **kwargs):
            slabs.append(r0)
            yield r0, slab

    monkeypatch.setattr(reader, "unshuffled_slabs", counted)
    with netCDF4.Dataset(path) as nc, ncz.open(str(store)) as ds:
        assert ds.store.get("/v/.zarray") is not None
        for name in ("v", "w"):
            for key in KEYS if name == "v" else [np.s_[...], np.s_[2:10], np.s_[4]]:
                got = np.asarray(ds[name][key])
                want = nc[name][key].data
                assert got.dtype == want.dtype and got.shape == want.shape, (name, key)
                np.testing.assert_array_equal(got, want, err_msg=f"{name}{key}")
    assert slabs  # the slab path read them, not a chunk-sized unshuffle
