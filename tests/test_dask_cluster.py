"""xarray engine "nczarr" on dask.distributed: arrays that pickle and compute in other processes (issue 23).

``xr.open_dataset(url, engine="nczarr", chunks={})`` used to build arrays holding the open store (its locks,
descriptors, boto3 clients): "cannot pickle '_thread.lock'", so no process-based cluster could compute them.
Each array now pickles as the URL, the generation of the store the client opened and its own metadata; a
worker reopens the store lazily (xarray's ``CachingFileManager``) and is held to that generation.

Expected values come from xarray's ``netcdf4`` engine on the source file (netCDF4-python) and from the
eager read of the same store in this process, never from the pickled path under test. One LocalCluster of
two single-threaded worker processes serves the module (started after moto, so workers inherit its env).
"""
from __future__ import annotations

import logging
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import StoreError
from tests.conftest import CORPUS, REPO, require_module
from tests.test_xarray_backend import ENGINE, assert_same, reference

xr = require_module("xarray")
require_module("distributed")

RICH = CORPUS / "rich.nc"
#: a real file (GOES-16 ABI cloud top height, corpus/real/README.md): scaled, _Unsigned, fill, 150 000 values
REAL = REPO / "corpus" / "real" / "netcdf4-python" / "20171025_2056.Cloud_Top_Height.nc"
KINDS = ["dir", "zip", "s3"]
REPLACED = "replaced by another writer while being read"


@pytest.fixture(scope="module")
def client(moto_server: str) -> Any:
    """LocalCluster(processes=True, n_workers=2, threads_per_worker=1), shared by the module, closed cleanly."""
    import distributed

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    try:
        with distributed.Client(cluster, set_as_default=False) as c:
            yield c
    finally:
        cluster.close()


def store_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest, name: str = "store") -> str:
    if kind == "dir":
        return str(tmp_path / f"{name}.file")
    if kind == "zip":
        return str(tmp_path / f"{name}.zip")
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/{name}#mode=nczarr,s3"


def eager(url: str, opener: Any = None) -> Any:
    """The same store read in this process, loaded at once (no dask, no pickling)."""
    ds = (opener or xr.open_dataset)(url, engine=ENGINE)
    try:
        return ds.load()
    finally:
        ds.close()


def round_trip(obj: Any) -> Any:
    return pickle.loads(pickle.dumps(obj))


# ---- pickling, in this process ----------------------------------------------------------------------------

@pytest.mark.parametrize("chunks", [{}, None], ids=["dask", "lazy"])
@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_every_array_kind_pickles_and_reads_back_equal(tmp_path, request, kind, chunks):
    """Numeric (every netCDF integer and float type, big-endian, compressed, with fill), char, string and
    scalar variables, dask-backed or xarray's lazy wrappers: a pickled copy reads what the eager read
    and the netcdf4 engine on the source read."""
    url = store_url(kind, tmp_path, request)
    ncz.convert(str(RICH), url)
    ds = xr.open_dataset(url, engine=ENGINE, chunks=chunks)
    kinds = {ds[name].dtype.kind for name in ds.variables}
    assert {"i", "u", "f", "S"} <= kinds and kinds & {"O", "U"}, kinds  # numbers, char joined into S, strings
    assert any(ds[name].ndim == 0 for name in ds.variables)
    copy = round_trip(ds)
    ds.close()
    assert_same(copy, eager(url))
    assert_same(round_trip(xr.open_dataset(url, engine=ENGINE, chunks=chunks)), reference(RICH))


def test_a_datatree_pickles_every_group(tmp_path):
    url = str(tmp_path / "rich.zip")
    ncz.convert(str(RICH), url)
    tree = xr.open_datatree(url, engine=ENGINE, chunks={})
    assert [node.path for node in tree.subtree] == ["/", "/g1", "/g1/g2", "/g1/g2/empty"]
    copy = round_trip(tree)
    tree.close()
    assert_same(copy, reference(RICH, xr.open_datatree))


def test_arrays_of_a_dataset_the_caller_opened_pickle_too(tmp_path):
    """``xr.open_dataset(ncz.open(url), engine=...)``: the caller's LazyDataset stays the caller's."""
    url = str(tmp_path / "rich.file")
    ncz.convert(str(RICH), url)
    expected = reference(RICH)
    with ncz.open(url) as lazy:
        ds = xr.open_dataset(lazy, engine=ENGINE, chunks={})
        assert_same(round_trip(ds), expected)
        # still open: pickling, and closing the copy, left it alone
        np.testing.assert_array_equal(lazy["v_i4"][:], expected["v_i4"].values)


def test_a_closed_dataset_does_not_pickle_into_a_reopened_one(tmp_path):
    """After close the client's reads raise ValueError; a pickled copy must not quietly read on."""
    url = str(tmp_path / "rich.file")
    ncz.convert(str(RICH), url)
    ds = xr.open_dataset(url, engine=ENGINE, chunks={})
    ds.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(ds)


# ---- a process-based LocalCluster -------------------------------------------------------------------------

@pytest.mark.parametrize("src", [RICH, REAL], ids=["rich", "real"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_process_cluster_computes_what_the_eager_read_and_netcdf4_read(client, tmp_path, request, kind, src):
    url = store_url(kind, tmp_path, request, name=src.stem)
    ncz.convert(str(src), url)
    ds = xr.open_dataset(url, engine=ENGINE, chunks={})
    assert any(v.chunks for v in ds.variables.values())  # dask-backed
    (computed,) = __import__("dask").compute(ds, scheduler=client)
    ds.close()
    assert_same(computed, eager(url))
    assert_same(computed.copy(), reference(src))


def test_a_process_cluster_computes_a_datatree(client, tmp_path):
    url = str(tmp_path / "rich.zip")
    ncz.convert(str(RICH), url)
    tree = xr.open_datatree(url, engine=ENGINE, chunks={})
    deep = tree["g1/g2/deep"]
    got = deep.data.compute(scheduler=client)
    expected = reference(RICH, xr.open_datatree)["g1/g2/deep"]
    np.testing.assert_array_equal(got, expected.values)
    tree.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_worker_refuses_a_store_replaced_since_the_open(client, tmp_path, request, kind):
    """The client pinned one generation; the store at the URL is now another. A worker cannot reach the old
    tree (directory), file (zip) or objects (S3), so it refuses with the reader's one-line StoreError rather
    than read the new chunks under the old metadata."""
    import netCDF4

    url = store_url(kind, tmp_path, request)
    old, new = tmp_path / "old.nc", tmp_path / "new.nc"
    for path, offset in ((old, 0.0), (new, 1000.0)):
        with netCDF4.Dataset(str(path), "w") as nc:
            nc.createDimension("x", 12)
            nc.createVariable("v", "f4", ("x",), chunksizes=(4,))[:] = offset + np.arange(12)
    ncz.convert(str(old), url)
    if kind == "s3":
        time.sleep(1.1)  # S3's Last-Modified has one-second resolution: the open is after the old write
    ds = xr.open_dataset(url, engine=ENGINE, chunks={})
    ncz.convert(str(new), url, overwrite=True)
    with pytest.raises(StoreError, match=REPLACED) as caught:
        ds["v"].data.compute(scheduler=client)
    assert "\n" not in str(caught.value)
    if kind != "s3":  # refused by the worker as it opened the path again, before any read
        assert "another process opened is no longer the one at this path" in str(caught.value)
    if kind == "zip":  # the client still holds the old zip open: in this process it reads the old dataset whole
        np.testing.assert_array_equal(ds["v"].data.compute(scheduler="threads"), np.arange(12, dtype="f4"))
    ds.close()
    np.testing.assert_array_equal(eager(url)["v"].values, 1000.0 + np.arange(12))  # a new open reads the new one



def test_a_reopened_s3_store_asks_what_the_clients_reader_asks(s3_bucket):
    """What a worker does, in this process: the store opened again from the client's pin sends the requests
    the client's own reader sends for the same reads: one GET per chunk older than the open, no HEAD for a
    written chunk (the generation check costs nothing on a stable store), a HEAD of the pinned root for an
    unwritten one (fill, or deleted by an overwrite: asked, as in the client)."""
    import netCDF4

    from nczarr_conformance.nczarr.reader import ChunkReader
    from nczarr_conformance.nczarr.selection import read_selection
    from nczarr_conformance.stores import reopen

    url = f"s3://{s3_bucket}/store#mode=nczarr,s3"
    ncz.convert(str(RICH), url)
    time.sleep(1.1)  # S3's Last-Modified has one-second resolution: the open is after the write
    names = ["/v_f8", "/partial"]  # every chunk written; chunks never written (fill)
    with ncz.open(url) as ds:
        where, pin, _options = ds.reopen_args()
        infos = {name: ds[name].info for name in names}
        before = len(ds.store.requests)
        for name in names:
            ds[name][...]
        client_ops = [op for op, _ in ds.store.requests[before:]]
    with netCDF4.Dataset(str(RICH)) as nc:
        nc.set_auto_mask(False)
        expected = {name: nc[name][:] for name in names}
    store = reopen(where, pin)
    try:
        reader = ChunkReader(store, infos)
        for name in names:
            np.testing.assert_array_equal(read_selection(reader, name, ...), expected[name])
        ops = [op for op, _ in store.requests]
    finally:
        store.close()
    assert sorted(ops) == sorted(client_ops)  # the same requests; a chunk's GET and another's HEAD race in threads
    written = int(np.prod(infos["/v_f8"].grid))
    assert ops[:written] == ["GetObject"] * written and "HeadObject" in ops[written:], ops
