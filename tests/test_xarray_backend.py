"""xarray engine "nczarr": equal to xarray's netcdf4 engine on the same data, lazy, every flavor and store.

The expected Dataset always comes from xarray's own ``netcdf4`` engine (netCDF4-python,
netcdf-c 4.10.1) reading a netCDF-4 file: the source file itself where the store was
converted from one (rich.nc, corpus/real/), otherwise the file netCDF4-python writes from
the model our eager reader gives (netcdf-c's corpus stores, the flavors netcdf-c wrote;
tests/test_corpus.py proves those models equal netcdf-c's CDL). So types, attributes, fill,
char and strings are as netCDF4-python + xarray present them, never as our code says.
"""
from __future__ import annotations

import importlib.metadata
import json
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.conversion.from_netcdf import convert
from nczarr_conformance.model import Attribute, Dataset, Dimension, Group, Variable
from nczarr_conformance.peers import netcdf4
from nczarr_conformance.stores.base import Store
from tests.conftest import CORPUS, NETCDF_C_CORPUS, REPO, require_module
from tests.real_files import REAL, REAL_IDS, UNDEFINED
from tests.test_corpus import STORES as CORPUS_STORES

xr = require_module("xarray")
from nczarr_conformance.access.xarray_backend import NCZarrArray, NCZarrBackendEntrypoint  # noqa: E402  (needs xarray)

ENGINE = NCZarrBackendEntrypoint
#: Encoding keys that describe storage; compared wherever the netCDF file itself is chunked.
STORAGE_KEYS = ("chunksizes", "zlib", "complevel", "shuffle", "fletcher32", "zstd", "bzip2", "blosc", "szip")


def _quiet(opener: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate dimension names (bad_missing_data.nc) warn in both engines
        return opener(*args, **kwargs)


def reference(path: Any, opener: Any = None, **kwargs: Any) -> Any:
    """xarray's netcdf4 engine on ``path``, loaded and closed at once: an open netCDF4 handle left
    to the garbage collector is closed from whichever thread collects it (the moto server's), and
    netcdf-c is not thread-safe (segfaults seen here)."""
    ds = _quiet(opener or xr.open_dataset, path, engine="netcdf4", **kwargs)
    try:
        return ds.load()
    finally:
        ds.close()


def _pairs(a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    """(path, ours, expected) Datasets of two Datasets or every node of two DataTrees."""
    if isinstance(a, xr.DataTree):
        assert sorted(n.path for n in a.subtree) == sorted(n.path for n in b.subtree)
        return [(n.path, n.to_dataset(inherit=False), b[n.path].to_dataset(inherit=False)) for n in a.subtree]
    return [("/", a, b)]


def assert_same(ours: Any, expected: Any, *, storage: bool = True) -> None:
    """Identical values, dims, coords, attributes; equal dtypes (assert_identical ignores them),
    netCDF dtype and unlimited dims; storage encoding where the netCDF file is chunked."""
    ours, expected = ours.load(), expected.load()
    ours.close()
    xr.testing.assert_identical(ours, expected)
    for path, a, b in _pairs(ours, expected):
        assert a.encoding.get("unlimited_dims") == b.encoding.get("unlimited_dims"), path
        for name, var in b.variables.items():
            got = a.variables[name]  # its dtype and encoding (a[name] builds a DataArray: quadratic in variables)
            assert got.dtype == var.dtype, (path, name, got.dtype, var.dtype)
            assert got.encoding.get("dtype") == var.encoding.get("dtype"), (path, name)
            if storage and var.encoding.get("contiguous") is False:
                # a contiguous netCDF variable has no chunks to compare: nc2nczarr picks them
                for key in STORAGE_KEYS:
                    assert got.encoding.get(key) == var.encoding.get(key), (path, name, key)


def model_oracle(model: Dataset, tmp_path: Path, opener: Any = None) -> Any:
    """xarray's netcdf4 engine on the netCDF-4 file netCDF4-python writes from ``model``."""
    nc = tmp_path / "oracle.nc"
    netcdf4.write(model, str(nc))
    return reference(nc, opener)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``converted(src, name)``: the path of ``src`` converted into a store named ``name`` (its suffix says
    the kind), made once per module: the tests given it only read it."""
    made: dict[tuple[str, str], str] = {}

    def get(src: Path, name: str) -> str:
        if (str(src), name) not in made:
            out = tmp_path_factory.mktemp("converted") / name
            convert(str(src), str(out))
            made[(str(src), name)] = str(out)
        return made[(str(src), name)]

    return get


# ---- (a) the bundled sample and real files: equal to the netcdf4 engine on the source --------------------

@pytest.mark.parametrize("kind", ["out.zip", "out.file", "file://{}#mode=nczarr,file"])
def test_rich_sample_equals_netcdf4_engine(tmp_path, kind):
    out = str(tmp_path / "out.file") if "{}" in kind else str(tmp_path / kind)
    url = kind.format(out) if "{}" in kind else out
    convert(str(CORPUS / "rich.nc"), url)
    assert_same(xr.open_dataset(url, engine=ENGINE), reference(CORPUS / "rich.nc"))


#: variable → netCDF4-python createVariable compression keywords: every codec whose encoding the engine reports
COMPRESSED = {
    "blosc_lz4": {"compression": "blosc_lz4", "complevel": 5, "blosc_shuffle": 1},
    "blosc_zstd_bitshuffle": {"compression": "blosc_zstd", "complevel": 3, "blosc_shuffle": 2},
    "blosc_lz4_noshuffle": {"compression": "blosc_lz4", "complevel": 7, "blosc_shuffle": 0},
    "zstd": {"compression": "zstd", "complevel": 4},
    "bzip2": {"compression": "bzip2", "complevel": 6},
    "zlib_shuffle": {"compression": "zlib", "complevel": 2, "shuffle": True},
}


@pytest.mark.parametrize("kind", ["out.zip", "out.file"])
def test_compression_encoding_equals_netcdf4_engine(tmp_path, kind):
    """blosc (its level is ``clevel``, its shuffle its own), zstd, bzip2 and zlib with shuffle: the engine reports
    each variable's complevel, codec and shuffle exactly as xarray's netcdf4 engine reports the source's."""
    import netCDF4

    src = tmp_path / "compressed.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 4096)
        for name, codec in COMPRESSED.items():
            nc.createVariable(name, "i4", ("x",), chunksizes=(1024,), **codec)[:] = np.arange(4096) % 7
    expected = reference(src)
    assert {name: expected[name].encoding["complevel"] for name in COMPRESSED} == \
        {name: codec["complevel"] for name, codec in COMPRESSED.items()}  # the oracle saw what was written
    out = tmp_path / kind
    convert(str(src), str(out))
    assert_same(xr.open_dataset(out, engine=ENGINE), expected)


def _row_by_row(src: Path, name: str) -> np.ndarray:
    import netCDF4

    with netCDF4.Dataset(src) as nc:
        var = nc[name]
        var.set_auto_maskandscale(False)
        return np.stack([var[i] for i in range(var.shape[0])])


def _without(ds: Any, path: str) -> Any:
    """``ds`` (Dataset or DataTree) without the variable at ``path``, which must be there."""
    group, _, name = path.rpartition("/")
    if isinstance(ds, xr.Dataset):
        assert group == "" and name in ds.variables, path
        return ds.drop_vars(name)
    tree = ds.copy()
    node = tree[group or "/"]
    assert name in node.variables, path
    node.dataset = node.dataset.drop_vars(name)
    return tree


@pytest.mark.parametrize("opener", ["open_dataset", "open_datatree"])
@pytest.mark.parametrize("src", REAL, ids=REAL_IDS)
def test_real_files_equal_netcdf4_engine(src, opener, converted):
    out = converted(src, "real.zip")  # one conversion read by both openers
    expected = reference(src, getattr(xr, opener))
    actual = _quiet(getattr(xr, opener), out, engine=ENGINE)
    for path in UNDEFINED.get(src.name, ()):
        # never written and NOFILL: netcdf-c returns whatever memory held (tests/real_files.py), so
        # there is no source value to compare it with
        expected, actual = _without(expected, path), _without(actual, path)
    if src.name == "bad_missing_data.nc":
        # temp(time, time): its HDF5 extent is 2 rows of the 3 the unlimited dimension has. netcdf-c
        # 4.10.1 reading the whole variable fills only the first missing value and returns undefined
        # memory for the rest (different on every read); row by row it fills every missing value.
        # Both engines then mask _FillValue, so the expected values are netcdf-c's row-by-row read.
        raw = _row_by_row(src, "temp")
        node = expected if opener == "open_dataset" else expected.dataset
        fill = node["temp"].encoding["_FillValue"]
        node["temp"].values[...] = np.where(raw == fill, np.nan, raw)
        assert np.isnan(node["temp"].values[2]).all()
    assert_same(actual, expected)


# ---- (b) lazy: only the chunks a selection touches are fetched -------------------------------------------

@pytest.fixture(scope="module")
def chunked(tmp_path_factory) -> Path:
    """v(t=10, x=6) in chunks (2, 3): a 5 × 2 chunk grid; zlib and shuffle; a `t` coordinate."""
    import netCDF4

    path = tmp_path_factory.mktemp("lazy") / "chunked.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", 10)
        nc.createDimension("x", 6)
        nc.createVariable("t", "f8", ("t",))[:] = np.arange(10)
        v = nc.createVariable("v", "i4", ("t", "x"), chunksizes=(2, 3), zlib=True, shuffle=True, fill_value=-7)
        v[:] = np.arange(60).reshape(10, 6)
        v[9, :] = np.ma.masked  # written as the fill value
        g = nc.createGroup("g")
        g.createVariable("w", "f4", ("t", "x"), chunksizes=(5, 6))[:] = np.ones((10, 6))
    return path


class GetSpy:
    """Records every key a Store.get fetches (any backend), so a test names the chunks read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        original = Store.get

        def get(store: Store, key: str, limit: int | None = None) -> bytes | None:
            self.keys.append(key)
            return original(store, key, limit)

        monkeypatch.setattr(Store, "get", get)

    def chunks(self, prefix: str) -> list[str]:
        return sorted(k for k in self.keys if k.startswith(prefix) and not k.rsplit("/", 1)[-1].startswith("."))


@pytest.mark.parametrize("name", ["c.zip", "c.file"])
def test_selection_fetches_only_touched_chunks(chunked, converted, monkeypatch, name):
    out = converted(chunked, name)
    spy = GetSpy(monkeypatch)
    ds = xr.open_dataset(out, engine=ENGINE)
    assert spy.chunks("/v/") == [] and spy.chunks("/g/") == []  # opening reads metadata (and the index `t`)
    assert spy.chunks("/t/") == ["/t/0"]
    first = ds.v[0:2].values
    assert spy.chunks("/v/") == ["/v/0.0", "/v/0.1"]
    np.testing.assert_array_equal(first, np.arange(12).reshape(2, 6))
    spy.keys.clear()
    strided = ds.v[3:6, ::4].values  # rows 3-5: chunk rows 1, 2; columns 0, 4: chunk columns 0, 1
    assert spy.chunks("/v/") == ["/v/1.0", "/v/1.1", "/v/2.0", "/v/2.1"]
    np.testing.assert_array_equal(strided, np.arange(60).reshape(10, 6)[3:6, ::4])
    spy.keys.clear()
    assert np.isnan(ds.v[9, 5].values)  # the masked fill, through xarray's CF decoding
    assert spy.chunks("/v/") == ["/v/4.1"]
    ds.close()


def test_dask_chunks_follow_the_store_chunks(chunked, converted):
    """``chunks={}``: one dask chunk per stored chunk, the chunk shapes netCDF4-python reads from the source."""
    import netCDF4

    out = converted(chunked, "c.file")
    with netCDF4.Dataset(chunked) as nc:
        expected = {"v": tuple(nc["v"].chunking())}
    with xr.open_dataset(out, engine=ENGINE, chunks={}) as ds:
        assert ds.v.data.chunksize == expected["v"] == (2, 3)
        assert ds.v.data.numblocks == (5, 2)
        np.testing.assert_array_equal(ds.v[:8].values, np.arange(48).reshape(8, 6))


def test_load_async_reads_the_variables_at_once(tmp_path, monkeypatch):
    """``await ds.load_async()``: every variable's read runs at the same time (async_getitem on threads)."""
    import asyncio
    import threading

    import netCDF4

    src = tmp_path / "four.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 8)
        for i in range(4):
            nc.createVariable(f"v{i}", "i4", ("x",))[:] = np.arange(8) * (i + 1)
    out = str(tmp_path / "four.file")
    convert(str(src), out)
    barrier = threading.Barrier(4, timeout=30)  # passes only when four reads are in flight together
    original = NCZarrArray._read

    def read(self: Any, key: Any) -> Any:
        barrier.wait()
        return original(self, key)

    monkeypatch.setattr(NCZarrArray, "_read", read)
    with xr.open_dataset(out, engine=ENGINE) as ds:
        loaded = asyncio.run(ds.load_async())
        for i in range(4):
            np.testing.assert_array_equal(loaded[f"v{i}"].values, np.arange(8) * (i + 1))


def test_selection_through_an_s3_url(chunked, s3_bucket, monkeypatch):
    url = f"s3://{s3_bucket}/lazy#mode=nczarr,s3"
    convert(str(chunked), url)
    spy = GetSpy(monkeypatch)
    with xr.open_dataset(url, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds.v[0:2].values, np.arange(12).reshape(2, 6))
    assert spy.chunks("/v/") == ["/v/0.0", "/v/0.1"]


def test_datatree_is_lazy_too(chunked, converted, monkeypatch):
    out = converted(chunked, "c.zip")
    spy = GetSpy(monkeypatch)
    tree = xr.open_datatree(out, engine=ENGINE)
    assert spy.chunks("/g/") == []
    assert float(tree["g"]["w"][7, 0]) == 1.0
    assert spy.chunks("/g/") == ["/g/w/1.0"]
    tree.close()


# ---- (c) every netcdf-c corpus store, every flavor, every storage ------------------------------------------

@pytest.mark.filterwarnings("ignore:Duplicate dimension names")  # ref_byte: v(_Anonymous_Dim_20, same)
@pytest.mark.parametrize("name", sorted(CORPUS_STORES))
def test_netcdf_c_corpus_store(name, tmp_path):
    path = NETCDF_C_CORPUS / name
    model = open_dataset(str(path))
    assert_same(xr.open_dataset(path, engine=ENGINE), model_oracle(model, tmp_path), storage=False)
    assert_same(xr.open_datatree(path, engine=ENGINE), model_oracle(model, tmp_path, xr.open_datatree),
                storage=False)


@pytest.mark.peer
@pytest.mark.parametrize("opener", ["open_dataset", "open_datatree"])
def test_netcdf_c_410_store_equals_netcdf4_engine_on_the_same_store(opener, tmp_path):
    """netcdf-c 4.10.1 (netCDF4-python) writes rich.nc's content as NCZarr; both engines read that one store."""
    url = f"file://{tmp_path}/c410.file#mode=nczarr,file"
    netcdf4.write(open_dataset(str(CORPUS / "rich.nc")), url)
    expected = reference(url, getattr(xr, opener))
    root = expected if opener == "open_dataset" else expected.dataset
    # netcdf-c writes these char attributes as JSON 42 and true (App. D case 3) and reads them back as
    # one character (docs/deviations.md; strict xfail test_known_deviation_netcdf_c_reads_json_
    # atomic_char_as_one_character): our reader gives the text written. A fixed netcdf-c fails here first.
    assert (root.attrs["j_int"], root.attrs["j_true"]) == ("4", "1")
    root.attrs.update(j_int="42", j_true="true")
    if opener == "open_datatree":
        expected.dataset = root
    assert_same(_quiet(getattr(xr, opener), url, engine=ENGINE), expected)


def _v1_dir(tmp_path: Path) -> Path:
    """netcdf-c 4.8 pre-release layout (separate .nczarr/.nczgroup/.nczarray/.nczattr objects)."""
    from tests.nczarr.test_roundtrip import _v1_store

    root = tmp_path / "v1.file"
    for key, data in _v1_store().objects.items():
        (root / key.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / key.lstrip("/")).write_bytes(data)
    return root


def _upper_model() -> Dataset:
    """What nczarr-2-upper (Debian netcdf-c 4.9.0's layout) can hold: no strings, scalars, unlimited."""
    root = Group({"x": Dimension(3)}, {"title": Attribute("char", "upper")})
    root.variables = {"v": Variable("int", ["/x"], (3,), {"_FillValue": Attribute("int", np.array([-1]))},
                                    np.array([1, -1, 3], dtype="i4"), chunks=[2]),
                      "c": Variable("char", ["/x"], (3,), {"_FillValue": Attribute("char", "-")},
                                    np.array([b"a", b"-", b"c"], dtype="S1"))}
    root.groups = {"g": Group({"y": Dimension(2)}, {"n": Attribute("short", np.array([1, 2]))},
                              {"w": Variable("double", ["/x", "/g/y"], (3, 2), {},
                                             np.arange(6.0).reshape(3, 2), chunks=[3, 1])})}
    return Dataset(root)


def _store_url(where: str, tmp_path: Path, bucket: str | None, name: str) -> str:
    if where == "s3":
        return f"s3://{bucket}/{name}#mode=nczarr,s3"
    return str(tmp_path / (name + (".zip" if where == "zip" else ".file")))


@pytest.mark.parametrize("where", ["dir", "zip", "s3"])
@pytest.mark.parametrize("flavor", ["nczarr", "zarr", "nczarr-2-upper"])
def test_our_outputs_every_flavor_and_storage(flavor, where, tmp_path, request):
    from nczarr_conformance.access.api import write

    bucket = request.getfixturevalue("s3_bucket") if where == "s3" else None
    url = _store_url(where, tmp_path, bucket, f"out-{flavor}")
    if flavor == "nczarr-2-upper":
        write(_upper_model(), url, flavor=flavor)
    else:
        convert(str(CORPUS / "rich.nc"), url, flavor=flavor)
    model = open_dataset(url)
    # pure Zarr keeps no attribute types (netcdf-c reads them back as text, and so does our reader), so
    # the oracle is the model as read; for NCZarr flavors it must also equal the source file itself
    assert_same(xr.open_dataset(url, engine=ENGINE), model_oracle(model, tmp_path), storage=False)
    assert_same(xr.open_datatree(url, engine=ENGINE), model_oracle(model, tmp_path, xr.open_datatree),
                storage=False)
    if flavor == "nczarr":
        assert_same(xr.open_datatree(url, engine=ENGINE),
                    reference(CORPUS / "rich.nc", xr.open_datatree))


def test_nczarr_v1_store(tmp_path):
    path = _v1_dir(tmp_path)
    model = open_dataset(str(path))
    assert_same(xr.open_datatree(path, engine=ENGINE), model_oracle(model, tmp_path, xr.open_datatree),
                storage=False)


@pytest.mark.peer
def test_netcdf_c_490_upper_case_store_equals_its_source(tmp_path):
    """Debian's nccopy 4.9.0 writes the upper-case nczarr-2 layout (numbers only: it fails on char)."""
    import subprocess

    import netCDF4

    from tests.conftest import require_tool

    nccopy = require_tool("nccopy")
    src = tmp_path / "s.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.title = "4.9.0"
        nc.createDimension("x", 5)
        nc.createDimension("y", 4)
        v = nc.createVariable("v", "i4", ("x", "y"), chunksizes=(2, 2), fill_value=-5)
        v[:4] = np.arange(16).reshape(4, 4)  # row 4 unwritten: fill
        v.units = "m"
        g = nc.createGroup("g")
        g.createDimension("z", 3)
        g.createVariable("w", "f8", ("x", "z"))[:] = np.ones((5, 3))
        g.n = np.int16([1, 2])
    out = tmp_path / "s.file"
    subprocess.run([nccopy, str(src), f"file://{out}#mode=nczarr,file"], check=True, capture_output=True)
    assert "_NCZARR_SUPERBLOCK" in (out / ".zgroup").read_text()
    ours = xr.open_datatree(out, engine=ENGINE)
    # nccopy 4.9.0 chooses its own chunks (v: one chunk of 5 x 4), so storage is compared with the store
    assert_same(ours, reference(src, xr.open_datatree), storage=False)
    assert ours["v"].encoding["chunksizes"] == tuple(json.loads((out / "v" / ".zarray").read_text())["chunks"])


# ---- (d) datatree with nested groups ------------------------------------------------------------------------

def test_datatree_nested_groups(converted):
    out = converted(CORPUS / "rich.nc", "rich.zip")
    tree = xr.open_datatree(out, engine=ENGINE)
    assert [n.path for n in tree.subtree] == ["/", "/g1", "/g1/g2", "/g1/g2/empty"]
    assert tree["g1/g2/deep"].dims == ("time", "y", "z")
    assert_same(tree, reference(CORPUS / "rich.nc", xr.open_datatree))
    sub = xr.open_datatree(out, engine=ENGINE, group="g1")
    assert_same(sub, reference(CORPUS / "rich.nc", xr.open_datatree, group="g1"))
    groups = ENGINE().open_groups_as_dict(out, group="/g1/g2")
    assert sorted(groups) == ["/", "/empty"]
    one = xr.open_dataset(out, engine=ENGINE, group="g1/g2")
    assert_same(one, reference(CORPUS / "rich.nc", group="g1/g2"))


def test_missing_group_names_it(converted):
    out = converted(CORPUS / "rich.nc", "rich.zip")
    with pytest.raises(KeyError, match="/nope"):
        xr.open_dataset(out, engine=ENGINE, group="nope")


# ---- registration ---------------------------------------------------------------------------------------------

ENTRY = "nczarr_conformance.access.xarray_backend:NCZarrBackendEntrypoint"


def test_pyproject_declares_the_entry_point():
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert doc["project"]["entry-points"]["xarray.backends"] == {"nczarr": ENTRY}


def test_installed_entry_point_is_registered_with_xarray(converted):
    found = [ep for ep in importlib.metadata.entry_points(group="xarray.backends") if ep.name == "nczarr"]
    dist = importlib.metadata.distribution("nczarr-conformance")
    if not found and not (dist.entry_points.select(group="xarray.backends")):
        pytest.skip("the installed package metadata predates the entry point: `pip install -e .` refreshes it")
    assert [ep.value for ep in found] == [ENTRY]
    assert found[0].load() is NCZarrBackendEntrypoint
    assert isinstance(xr.backends.list_engines()["nczarr"], NCZarrBackendEntrypoint)
    out = converted(CORPUS / "rich.nc", "rich.zip")
    assert int(xr.open_dataset(out, engine="nczarr")["v_i4"][1]) == 2147483647
    # netcdf-c URLs are guessed without naming the engine
    assert int(xr.open_dataset(f"file://{out}#mode=nczarr,zip")["v_i4"][1]) == 2147483647


def test_guess_can_open(tmp_path, converted):
    out = converted(CORPUS / "rich.nc", "rich.zip")
    engine = ENGINE()
    assert engine.guess_can_open(f"file://{out}#mode=nczarr,zip")
    assert engine.guess_can_open("s3://bucket/key#mode=zarr,s3")
    assert engine.guess_can_open(str(out))
    assert engine.guess_can_open(NETCDF_C_CORPUS / "ref_oldkeys.file.zip")
    assert not engine.guess_can_open(str(CORPUS / "rich.nc"))
    assert not engine.guess_can_open(str(tmp_path / "missing"))


def test_our_attributes_are_netcdf4_pythons():
    """netcdf4_value is what getncattr returns: checked on the source file, attribute by attribute."""
    import netCDF4

    from nczarr_conformance.access.lazy import netcdf4_value

    model = netcdf4.read(str(CORPUS / "rich.nc"), data=False)
    with netCDF4.Dataset(CORPUS / "rich.nc") as nc:
        for name, attr in model.root.attributes.items():
            want, got = nc.getncattr(name), netcdf4_value(attr)
            assert type(got) is type(want), name
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            assert json.dumps(np.asarray(got).tolist()) == json.dumps(np.asarray(want).tolist())


def test_engine_module_is_light_until_used():
    """xarray imports every registered engine on each open_dataset; ours must not load our reader then."""
    import subprocess
    import sys

    code = ("import sys, xarray; import nczarr_conformance.access.xarray_backend as b; "
            "b.NCZarrBackendEntrypoint().guess_can_open('x.nc'); "
            "print(sorted(m for m in ('numcodecs', 'netCDF4', 'h5py', 'boto3', 'nczarr_conformance.access.lazy', "
            "'nczarr_conformance.nczarr.reader') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_open_lazy_dataset_is_shared_not_closed(chunked, converted):
    import nczarr_conformance as ncz

    out = converted(chunked, "c.zip")
    with ncz.open(out) as lazy:
        ds = xr.open_dataset(lazy, engine=ENGINE)
        assert int(ds.v[1, 1]) == 7
        ds.close()
        assert lazy["v"][1, 1] == 7  # xarray closing its view leaves the caller's dataset open
    with pytest.raises(ValueError, match="closed"):
        lazy["v"][0]
