"""nczarr_conformance.open: a context-managed lazy dataset; selections read only the chunks they touch.

Expected values come from netCDF4-python reading the source netCDF file with the same
(orthogonal) key, and from numpy applied to the eagerly read model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import UsageError
from nczarr_conformance.limits import LimitError
from nczarr_conformance.model import Dimension
from nczarr_conformance.stores.base import Store
from tests.conftest import CORPUS


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """g/v(t=7, y=5, x=6) int16 in chunks (2, 3, 4), fill -1 with one chunk never written; a root char var."""
    import netCDF4

    path = tmp_path_factory.mktemp("lazy") / "src.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "lazy"
        nc.createDimension("t", None)
        nc.createDimension("n", 3)
        g = nc.createGroup("g")
        g.createDimension("y", 5)
        g.createDimension("x", 6)
        v = g.createVariable("v", "i2", ("t", "y", "x"), chunksizes=(2, 3, 4), zlib=True, fill_value=-1)
        v.units = "m"
        v[0:6] = np.arange(180, dtype="i2").reshape(6, 5, 6)  # t=6 is a chunk row never written
        v[6, 0:3, 0:4] = 7  # ... except this one chunk
        nc.createVariable("c", "S1", ("n",))[:] = np.array([b"a", b"b", b"c"])
    return path


@pytest.fixture(scope="module")
def store(source, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("lazy") / "out.zip")
    ncz.convert(source, out)
    return out


def netcdf4_read(src: Path, path: str, key: Any) -> np.ndarray:
    import netCDF4

    with netCDF4.Dataset(src) as nc:
        var = nc[path]
        var.set_auto_maskandscale(False)
        var.set_auto_chartostring(False)
        return np.asarray(var[key])


KEYS = [
    (slice(0, 2), slice(None, None, 3)),
    (0,),
    (-1, 2),
    (slice(None, None, 2), slice(1, 4), slice(None, None, -1)),
    (slice(5, 1, -2), 4, [0, 5, 2]),
    ([6, 0], [True, False, True, False, True], slice(2, 3)),
    (slice(3, 3),),
    (Ellipsis, 1),
    (2, Ellipsis),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_selection_equals_netcdf4_python(source, store, key):
    with ncz.open(store) as ds:
        got = ds["g/v"][key]
    want = netcdf4_read(source, "g/v", key)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_selection_reads_only_touched_chunks(store, monkeypatch):
    fetched: list[str] = []
    original = Store.get
    monkeypatch.setattr(Store, "get",
                        lambda self, key, limit=None: (fetched.append(key), original(self, key, limit))[1])

    def chunks() -> list[str]:
        return sorted(k for k in fetched if k.startswith("/g/v/") and ".z" not in k)
    with ncz.open(store) as ds:
        assert [k for k in fetched if not k.rsplit("/", 1)[-1].startswith(".")] == []  # opening: metadata only
        part = ds["g/v"][0:2, ::3]  # t 0-1: chunk 0; y 0 and 3: chunks 0 and 1; x whole: chunks 0 and 1
        assert part.shape == (2, 2, 6)
        assert chunks() == ["/g/v/0.0.0", "/g/v/0.0.1", "/g/v/0.1.0", "/g/v/0.1.1"]
        fetched.clear()
        ds["g/v"][2:4, ::4, 5]  # t 2-3: chunk 1; y 0 and 4: chunks 0 and 1; x 5: chunk 1 (chunk 0 skipped)
        assert chunks() == ["/g/v/1.0.1", "/g/v/1.1.1"]


def test_unwritten_chunk_reads_as_fill(source, store):
    with ncz.open(store) as ds:
        row = ds["/g/v"][6]
    np.testing.assert_array_equal(row, netcdf4_read(source, "g/v", 6))
    assert (row[0:3, 0:4] == 7).all() and (row[3:] == -1).all()


def test_metadata_views(store):
    with ncz.open(Path(store)) as ds:
        assert ds.flavor == "nczarr-4.10"
        assert ds.attrs == {"title": "lazy"}
        assert ds.dimensions == {"t": Dimension(7, True), "n": Dimension(3)}
        assert list(ds.groups) == ["g"] and list(ds.variables) == ["c"]
        v = ds["g/v"]
        assert (v.dimensions, v.shape, v.dtype, v.nctype, v.chunks) == (("t", "y", "x"), (7, 5, 6),
                                                                          np.dtype("<i2"), "short", (2, 3, 4))
        assert v.attrs == {"_FillValue": np.int16(-1), "units": "m"}
        assert type(v.attrs["_FillValue"]) is np.int16  # as netCDF4-python's getncattr gives it
        assert ds["g"]["v"].path == "/g/v" and ds["g"]["/c"].path == "/c"
        assert "g/v" in ds and "g/w" not in ds
        np.testing.assert_array_equal(ds["c"][:], np.array([b"a", b"b", b"c"], dtype="S1"))
        np.testing.assert_array_equal(np.asarray(ds["c"]), ds["c"][...])


def test_closed_dataset_refuses_reads(store):
    with ncz.open(store) as ds:
        v = ds["g/v"]
    with pytest.raises(ValueError, match="closed"):
        v[0]


def test_bad_keys_and_paths(store, source):
    with ncz.open(f"file://{store}#mode=nczarr,zip") as ds:
        with pytest.raises(IndexError, match="out of bounds"):
            ds["g/v"][7]
        with pytest.raises(IndexError, match="4 indices for 3 dimensions"):
            ds["g/v"][0, 0, 0, 0]
        with pytest.raises(KeyError, match="/g/nope"):
            ds["g/nope"]
    with pytest.raises(UsageError, match="is a netCDF file"):
        ncz.open(source)


def test_selection_over_the_budget_is_refused_before_reading(store):
    with ncz.open(store, max_bytes=64) as ds:
        assert ds["g/v"][0, 0].shape == (6,)
        with pytest.raises(LimitError, match="selection of shape"):
            ds["g/v"][0:2]


def test_scalars_and_strings(tmp_path):
    out = tmp_path / "rich.file"
    ncz.convert(CORPUS / "rich.nc", out)
    with ncz.open(out) as ds:
        assert ds["scalar_d"][()] == -0.0 and ds["scalar_s"][...].item() == "lonely string"
        assert ds["strings"][1:3].tolist() == ["ascii", "ünïcødé"]
        assert ds.attrs["s_attr"] == ["alpha", "βeta", ""] and ds.attrs["s_one"] == "only"


def test_s3_url(store, s3_bucket, source):
    url = f"s3://{s3_bucket}/lazy#mode=nczarr,s3"
    ncz.convert(source, url)
    with ncz.open(url) as ds:
        np.testing.assert_array_equal(ds["g/v"][1, ::2, -1], netcdf4_read(source, "g/v", (1, slice(None, None, 2), -1)))


# ---- any key, any chunking: equal to numpy's orthogonal indexing of the source array ------------------------

def _orthogonal(values: np.ndarray, key: tuple[Any, ...]) -> np.ndarray:
    """numpy applied one dimension at a time (outer indexing), integers dropping their dimension."""
    out = values
    for axis in reversed(range(len(key))):
        item = key[axis]
        index = np.arange(values.shape[axis])[item]
        out = np.take(out, index, axis=axis)
    return out


def _axis_key(size: int) -> Any:
    from hypothesis import strategies as st

    ints = st.integers(-size, size - 1)
    bound = st.none() | st.integers(-size - 2, size + 2)
    slices = st.builds(slice, bound, bound, st.none() | st.integers(-3, 3).filter(bool))
    lists = st.lists(st.integers(-size, size - 1), max_size=5)
    return ints | slices | lists


def test_any_selection_equals_numpy():
    from hypothesis import given
    from hypothesis import strategies as st

    from nczarr_conformance.model import Dataset, Group, Variable
    from nczarr_conformance.nczarr.reader import DatasetReader
    from nczarr_conformance.nczarr.selection import read_selection
    from nczarr_conformance.nczarr.writer import write_dataset
    from nczarr_conformance.stores import MemoryStore

    @st.composite
    def cases(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[Any, ...]]:
        shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
        chunks = tuple(draw(st.integers(1, n)) for n in shape)
        key = tuple(draw(_axis_key(n)) for n in shape)
        return shape, chunks, key

    @given(cases())
    def check(case: tuple[tuple[int, ...], tuple[int, ...], tuple[Any, ...]]) -> None:
        shape, chunks, key = case
        values = np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)
        dims = {f"d{i}": Dimension(n) for i, n in enumerate(shape)}
        var = Variable("int", [f"/d{i}" for i in range(len(shape))], shape, data=values, chunks=list(chunks))
        store = MemoryStore()
        write_dataset(Dataset(Group(dims, {}, {"v": var})), store)
        got = read_selection(DatasetReader(store), "/v", key)
        want = _orthogonal(values, key)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)

    check()


def test_a_slice_is_split_by_chunk_by_arithmetic_as_numpy_slices_it() -> None:
    """An ascending slice's parts per chunk (nczarr.selection._range_by_chunk: no vector of positions, which cost a
    whole 1-d variable of 80 M values 4.5 GB; tests/test_memory_policy.py) put together give what numpy's slicing
    gives, for every start, stop, step and chunk size drawn, steps past the chunk size included."""
    import random

    from nczarr_conformance.nczarr.selection import _range_by_chunk

    rng = random.Random(35)
    for _ in range(3000):
        size, chunk = rng.randint(1, 60), rng.randint(1, 12)
        key = slice(rng.randint(0, size), rng.randint(0, size), rng.randint(1, 15))
        values = np.arange(size) * 10
        expected = values[key]
        got = np.full(expected.shape, -1)
        touched = []
        for c, out, inside in _range_by_chunk(range(*key.indices(size)), chunk):
            assert isinstance(out, slice) and isinstance(inside, slice)
            got[out] = values[c * chunk:(c + 1) * chunk][inside]
            touched.append(c)
        assert np.array_equal(got, expected), (size, chunk, key)
        assert touched == sorted({int(p) // chunk for p in range(*key.indices(size))}), (size, chunk, key)
