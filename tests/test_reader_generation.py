"""Readers see one dataset: a store replaced while it is open is never read as a mix of two.

Issue #20 item 3: a dataset opened before an ``nc2nczarr --overwrite`` read the new tree's
chunks under the old metadata (values from two datasets, no error). Our reader now pins the
generation it opened: a directory reader holds the root by descriptor and reads relative to
it, an S3 reader checks the root metadata's identity when a chunk is newer than the open or
missing, a zip reader holds the old file open. Each read then returns the old dataset whole
or raises one clear ``StoreError``, never a mix. Expected values come from the source files
(built here with netCDF4-python), never from the reader under test.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import StoreError

N_TIME = 40  # 10 time chunks of 4: a whole read takes 10 chunk reads, room for a writer to cut in


def make_nc(path: Path, offset: float) -> Path:
    """v[t, x] = offset + t * 3 + x, chunked (4, 3): each file's values are told apart by ``offset``."""
    import netCDF4

    with netCDF4.Dataset(str(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        t = nc.createVariable("time", "f8", ("time",), chunksizes=(4,))
        t[:] = np.arange(N_TIME, dtype="f8")
        v = nc.createVariable("v", "f4", ("time", "x"), chunksizes=(4, 3))
        v[:] = expected(offset)
    return path


def expected(offset: float) -> np.ndarray:
    return (offset + np.arange(N_TIME * 3, dtype="f4")).reshape(N_TIME, 3)


def convert(src: Path, out: str) -> subprocess.CompletedProcess[str]:
    """Another process replaces the store, as an operator's job would."""
    result = subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", "-q", "--overwrite",
                             str(src), out], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    return make_nc(tmp_path / "old.nc", 0.0), make_nc(tmp_path / "new.nc", 1000.0)


def read_or_refuse(ds: ncz.lazy.LazyDataset, rows: slice) -> np.ndarray | None:
    """The rows read, or None when the reader raised its one clear error."""
    try:
        return np.asarray(ds["v"][rows])
    except StoreError as exc:
        assert "replaced by another writer while being read" in str(exc), exc
        assert "\n" not in str(exc)
        return None


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_a_reader_opened_before_an_overwrite_never_reads_the_new_chunks(tmp_path, two_files, kind):
    old, new = two_files
    out = str(tmp_path / ("store.zip" if kind == "zip" else "store"))
    ncz.convert(str(old), out)
    with ncz.open(out) as ds:
        first = np.asarray(ds["v"][0:4])  # chunk 0 read before the overwrite
        np.testing.assert_array_equal(first, expected(0.0)[0:4])
        convert(new, out)
        rest = read_or_refuse(ds, slice(4, N_TIME))
    if kind == "zip":  # the reader holds the old zip file open: it keeps reading the old dataset
        assert rest is not None
    if rest is not None:
        np.testing.assert_array_equal(rest, expected(0.0)[4:], err_msg="the old dataset's chunks, not the new one's")
    with ncz.open(out) as ds:  # a reader opened after it reads the new dataset whole
        np.testing.assert_array_equal(np.asarray(ds["v"][:]), expected(1000.0))


def test_a_directory_reader_keeps_old_chunks_it_can_still_reach_and_refuses_deleted_ones(tmp_path, two_files):
    """After the swap the old tree is deleted: a chunk gone with it is an error, never fill."""
    old, new = two_files
    out = str(tmp_path / "store")
    ncz.convert(str(old), out)
    with ncz.open(out) as ds:
        convert(new, out)
        with pytest.raises(StoreError, match="replaced by another writer while being read"):
            ds["v"][8:12]


def test_an_unwritten_chunk_of_the_opened_dataset_still_reads_as_fill(tmp_path):
    """The generation check fires only when the tree really changed: a missing chunk of a live
    dataset is fill, as before (no false alarm)."""
    import netCDF4

    src = tmp_path / "sparse.nc"
    with netCDF4.Dataset(str(src), "w") as nc:
        nc.createDimension("x", 8)
        v = nc.createVariable("v", "i4", ("x",), chunksizes=(4,), fill_value=-7)
        v[0:4] = np.arange(4)
    out = str(tmp_path / "store")
    ncz.convert(str(src), out)
    with ncz.open(out) as ds:
        np.testing.assert_array_equal(np.asarray(ds["v"][:]), [0, 1, 2, 3, -7, -7, -7, -7])


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_readers_racing_overwrites_see_one_dataset_each_time(tmp_path, two_files, kind):
    """A writer alternates the two datasets while readers open and read: every read (bounded:
    until 6 overwrites are done) is all old, all new, or the one clear error."""
    old, new = two_files
    out = str(tmp_path / ("store.zip" if kind == "zip" else "store"))
    ncz.convert(str(old), out)
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(6):
                convert(new if i % 2 == 0 else old, out)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    reads = mixed = 0
    try:
        while not done.is_set():
            try:
                ds = ncz.open(out)
            except StoreError:
                continue  # a moment without a dataset (no renameat2) is "no dataset", never a mix
            with ds:
                rows = []
                for start in range(0, N_TIME, 4):  # chunk by chunk, as a slow reader would
                    part = read_or_refuse(ds, slice(start, start + 4))
                    if part is None:
                        rows = []
                        break
                    rows.append(part)
                    time.sleep(0.002)
            if rows:
                reads += 1
                got = np.concatenate(rows)
                if not (np.array_equal(got, expected(0.0)) or np.array_equal(got, expected(1000.0))):
                    mixed += 1
    finally:
        thread.join()
    assert mixed == 0, f"{mixed} of {reads} whole reads mixed two datasets"
    assert reads > 0


def test_an_s3_reader_opened_before_an_overwrite_never_reads_the_new_chunks(s3_bucket, two_files):
    old, new = two_files
    url = f"s3://{s3_bucket}/store#mode=nczarr,s3"
    ncz.convert(str(old), url)
    time.sleep(1.1)  # S3's Last-Modified has one-second resolution: the open is after the old write
    with ncz.open(url) as ds:
        np.testing.assert_array_equal(np.asarray(ds["v"][0:4]), expected(0.0)[0:4])
        convert(new, url)
        rest = read_or_refuse(ds, slice(4, N_TIME))
        assert rest is None, "the overwrite rewrote every chunk: the old dataset cannot be read whole any more"


def test_an_s3_reader_during_an_overwrite_refuses_rather_than_reads_fill(s3_bucket, two_files):
    """Old chunks already deleted (here: all of them, the overwrite finished) read as an error,
    not as fill holes in the old dataset."""
    import boto3

    old, _new = two_files
    url = f"s3://{s3_bucket}/store#mode=nczarr,s3"
    ncz.convert(str(old), url)
    time.sleep(1.1)
    with ncz.open(url) as ds:
        client = boto3.client("s3")
        listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="store/v/")["Contents"]
        client.delete_objects(Bucket=s3_bucket, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})
        client.delete_object(Bucket=s3_bucket, Key="store/.zmetadata")  # what an overwrite does first
        with pytest.raises(StoreError, match="replaced by another writer while being read"):
            ds["v"][0:4]


@pytest.mark.parametrize("client", ["botocore", "obstore"])
def test_an_s3_reader_of_a_stable_store_makes_no_extra_requests(s3_bucket, two_files, monkeypatch, client):
    """The check costs nothing on a store nobody writes: chunks older than the open are read as they are.

    botocore's reader pins the server's clock (``Date``) at open; obstore gives none, so its reader pins the
    root's Last-Modified, and a chunk written in the root's own second (all of this small store's) costs one
    HEAD of the root besides its GET (stores/remote.py)."""
    if client == "botocore":
        monkeypatch.setenv("AWS_RETRY_MODE", "standard")  # botocore's alone: the read stays there
    old, _ = two_files
    url = f"s3://{s3_bucket}/{client}#mode=nczarr,s3"  # (one bucket for both: the test's name, cut short)
    ncz.convert(str(old), url)
    time.sleep(1.1)
    with ncz.open(url) as ds:
        assert type(ds.store).__name__ == ("S3Store" if client == "botocore" else "RemoteStore")
        before = len(ds.store.requests)
        np.testing.assert_array_equal(np.asarray(ds["v"][:]), expected(0.0))
        sent = ds.store.requests[before:]
    ops = [op for op, _ in sent]
    if client == "botocore":
        assert ops == ["GetObject"] * (N_TIME // 4), ops
    else:
        assert ops.count("GetObject") == N_TIME // 4 and ops.count("HeadObject") <= N_TIME // 4, ops
        assert {key for op, key in sent if op == "HeadObject"} <= {"obstore/.zmetadata"}, sent


def test_an_s3_open_racing_an_overwrite_refuses_metadata_from_two_datasets(s3_bucket, two_files):
    """A store without .zmetadata is opened object by object; an overwrite that starts between
    two of them (root first, then every metadata object, deleted) must not leave the reader
    with a structure missing arrays or with the next dataset's metadata."""
    import boto3

    from nczarr_conformance.nczarr.reader import read_dataset
    from nczarr_conformance.stores.s3 import S3Store

    old, _ = two_files
    ncz.convert(str(old), f"s3://{s3_bucket}/store#mode=nczarr,s3", consolidate=False)
    client = boto3.client("s3")

    class OverwrittenAfterTheRoot(S3Store):
        def _get(self, key: str, limit: int | None = None) -> bytes | None:
            data = super()._get(key, limit)
            if key == "/.zgroup":  # the overwrite begins: old root metadata first, then the arrays'
                for name in ("store/.zgroup", "store/.zattrs", "store/v/.zarray", "store/v/.zattrs"):
                    client.delete_object(Bucket=s3_bucket, Key=name)
            return data

    store = OverwrittenAfterTheRoot(s3_bucket, "store")
    with pytest.raises(StoreError, match="replaced by another writer while being read"):
        read_dataset(store, data=False)


def test_s3_generation_asks_the_root_again_and_reads_on_while_it_is_unchanged():
    """stores/s3_generation.py with a scripted HEAD: a chunk newer than the open (an append still under way)
    makes it ask the pinned root once; unchanged, the chunk is read and the clock moves on to that HEAD's
    Date, so a later chunk older than it is read without asking again. A missing chunk asks too: fill while
    the root is unchanged, the one clear error once it changed."""
    import datetime as dt
    from email.utils import format_datetime

    from nczarr_conformance.stores.s3_generation import Generation

    opened = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)

    def response(etag: str, date: dt.datetime) -> dict[str, object]:
        return {"ETag": etag, "LastModified": opened - dt.timedelta(hours=1),
                "ResponseMetadata": {"HTTPHeaders": {"date": format_datetime(date, usegmt=True)}}}

    root = {"now": response('"r1"', opened)}
    asked: list[str] = []

    def head(key: str) -> dict[str, object]:
        asked.append(key)
        return root["now"]

    def chunk(seconds: int) -> dict[str, object]:
        return {"LastModified": opened + dt.timedelta(seconds=seconds)}

    generation = Generation("s3://b/p", head)
    generation.seen("/.zmetadata", root["now"])
    generation.seen("/v/0", chunk(-10))  # older than the open: the opened dataset's
    assert asked == []
    root["now"] = response('"r1"', opened + dt.timedelta(seconds=60))  # the same root, asked a minute later
    generation.seen("/v/5", chunk(30))
    assert asked == ["/.zmetadata"]
    generation.seen("/v/6", chunk(45))  # older than the last answer's clock: not asked again
    assert asked == ["/.zmetadata"]
    generation.missing("/v/7")  # fill of the dataset opened
    assert asked == ["/.zmetadata"] * 2
    root["now"] = response('"r2"', opened + dt.timedelta(seconds=90))  # an overwrite put its new root
    with pytest.raises(StoreError, match="replaced by another writer while being read"):
        generation.missing("/v/8")


@pytest.mark.parametrize("clock", ["date", "root-last-modified"])
def test_s3_a_chunk_modified_in_the_pinned_clocks_second_asks_the_root_again(clock):
    """issue 39: S3's Last-Modified and Date have one-second resolution, so a chunk whose Last-Modified equals
    the pinned clock to the second may have been written after the open (by an overwrite that started in that
    second): it is not "older than the open" and the root is asked again; changed, the read is refused. One
    second earlier is older and read without a question (the boundary on both sides). The clock is the server's
    Date (boto3), or where no Date is at hand (obstore) the pinned root's own Last-Modified."""
    import datetime as dt
    from email.utils import format_datetime

    from nczarr_conformance.stores.s3_generation import Generation

    opened = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
    root: dict[str, object] = (
        {"ETag": '"r1"', "LastModified": opened - dt.timedelta(hours=1),
         "ResponseMetadata": {"HTTPHeaders": {"date": format_datetime(opened, usegmt=True)}}} if clock == "date" else
        {"ETag": '"r1"', "LastModified": opened})
    answers = [dict(root, ETag='"r2"')]  # meanwhile an overwrite put its new root
    asked: list[str] = []

    def head(key: str) -> dict[str, object]:
        asked.append(key)
        return answers.pop(0)

    generation = Generation("s3://b/p", head)
    generation.seen("/.zmetadata", root)
    generation.seen("/v/0", {"LastModified": opened - dt.timedelta(seconds=1)})
    assert asked == []
    with pytest.raises(StoreError, match="replaced by another writer while being read"):
        generation.seen("/v/1", {"LastModified": opened})
    assert asked == ["/.zmetadata"]
