"""Chunks are read several at a time, each once per selection, and placed where they belong (issue 35).

Expected values come from zarr-python 3 reading the same store (its fill value where a chunk was never
written); the storage (dtype, compressor, chunks) is zarr-python's own. Concurrency is shown without a
clock: a store that lets a chunk's read finish only once a second read has started (a barrier) would
wait forever on a reader that reads one chunk after the other; the barrier's timeout turns that into a
failure, never a slow pass.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nczarr_conformance as ncz
from nczarr_conformance.errors import FormatError

SHAPE, CHUNKS, FILL = (40, 30), (7, 8), -5.0
KEYS: list[Any] = [
    ..., (slice(None), 3), (slice(2, 39, 3), slice(1, None, 4)), ([0, 3, 35, 1, 3], [29, 0, 8]),
    (np.arange(40) % 3 == 0, slice(5, 6)), (17, 11),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A zarr-python v2 array (zlib + shuffle filter) with two chunks never written (deleted)."""
    import numcodecs
    import zarr

    path = tmp_path_factory.mktemp("par") / "s.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=2)
    arr = root.create_array("v", shape=SHAPE, chunks=CHUNKS, dtype="<f8", fill_value=FILL,
                            compressors=numcodecs.Zlib(level=1), filters=[numcodecs.Shuffle(elementsize=8)],
                            dimension_names=None)
    arr[...] = np.arange(np.prod(SHAPE), dtype="<f8").reshape(SHAPE) / 7
    arr.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    (path / "v" / "0.0").unlink()
    (path / "v" / "2.3").unlink()
    return path


def _zarr(path: Path) -> Any:
    import zarr

    arr = zarr.open_array(path / "v", mode="r")
    assert arr.dtype == np.dtype("<f8") and arr.chunks == CHUNKS and arr.fill_value == FILL
    return arr


@pytest.mark.parametrize("threads", ["1", "4"])
@pytest.mark.parametrize("key", KEYS, ids=[f"key{i}" for i in range(len(KEYS))])
def test_values_equal_zarr_pythons_whatever_the_threads(store: Path, key: Any, threads: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCZARR_READ_THREADS", threads)
    expected = np.asarray(_zarr(store).oindex[key] if isinstance(key, tuple) and any(
        isinstance(k, (list, np.ndarray)) for k in key) else _zarr(store)[key])
    with ncz.open(store) as ds:
        got = ds["v"][key]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_each_chunk_is_read_once_per_selection(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCZARR_READ_THREADS", "4")
    with ncz.open(store) as ds:
        var = ds["v"]
        before = ds.store.reads
        var[[0, 6, 1, 5, 0], [7, 0, 3]]  # ten picks, all in chunk (0, 0) (unwritten: a read that finds nothing)
        assert ds.store.reads - before == 1
        before = ds.store.reads
        var[[0, 13, 7, 8], :]  # rows in chunk rows 0, 1, 1, 1 (two chunk rows) × 4 chunk columns
        assert ds.store.reads - before == 2 * 4


def test_chunks_are_read_concurrently(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCZARR_READ_THREADS", "2")
    barrier = threading.Barrier(2, timeout=10)
    with ncz.open(store) as ds:
        original = ds.store._get

        def get(key: str, limit: int | None = None) -> bytes | None:
            if key.rsplit("/", 1)[-1] in ("1.0", "1.1"):
                barrier.wait()  # returns only once the other chunk's read has started too
            return original(key, limit)

        monkeypatch.setattr(ds.store, "_get", get)
        got = ds["v"][7:14, 0:16]  # chunks (1, 0) and (1, 1)
    np.testing.assert_array_equal(got, np.asarray(_zarr(store)[7:14, 0:16]))


def test_a_corrupt_chunk_fails_the_read_in_one_line(tmp_path: Path, store: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.setenv("NCZARR_READ_THREADS", "4")
    copy = tmp_path / "c.zarr"
    shutil.copytree(store, copy)
    (copy / "v" / "3.2").write_bytes(b"not zlib at all")
    with ncz.open(copy) as ds, pytest.raises(FormatError, match=r"^/v/3\.2: chunk does not decode") as caught:
        ds["v"][...]
    assert "\n" not in str(caught.value)


def test_the_earliest_chunks_failure_is_the_one_raised() -> None:
    """Two chunks fail, the later one first (item 1 at once, item 0 once item 1 has failed): the read reports
    item 0's error, as a read one chunk after the other would, whichever thread finishes first; items not
    started by then never start."""
    from nczarr_conformance.nczarr.reader import run_each

    second_failed = threading.Event()
    started: list[int] = []

    def work(item: int) -> None:
        started.append(item)
        if item == 0:
            assert second_failed.wait(10)
            raise ValueError("chunk 0")
        if item == 1:
            second_failed.set()
            raise KeyError("chunk 1")
        assert second_failed.wait(10)

    with pytest.raises(ValueError, match="chunk 0"):
        run_each(work, range(1000), 2)
    assert len(started) < 10


class _Remote:
    """A store that asks for 16 reads at once, as the S3 and HTTP stores do (latency, not decoding, is their cost)."""

    read_concurrency = 16
    waits_on_network = True


@pytest.mark.parametrize(("chunk_mb", "output_mb", "expected"), [
    (25, 398, 2),   # a whole variable of 25 MB chunks: 16 in flight would hold 800 MB beside a 398 MB output
    (25, 0, 2),     # a point's series through such chunks: the floor, 64 MiB, holds one: one per core
    (1, 398, 16),   # 1 MB chunks: 16 in flight hold 32 MB, within a quarter of the output
    (4, 0, 8),      # the floor alone: 64 MiB / (2 × 4 MiB)
    (8, 400, 6),    # a quarter of the output: 100 MiB / (2 × 8 MiB)
])
def test_a_remote_reads_concurrency_is_cut_to_the_bytes_it_may_hold(
        chunk_mb: int, output_mb: int, expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from nczarr_conformance.nczarr.reader import read_threads

    monkeypatch.delenv("NCZARR_READ_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert read_threads(_Remote(), chunk_mb << 20, output_mb << 20) == expected  # type: ignore[arg-type]


def test_a_local_store_and_the_variable_set_threads_are_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from nczarr_conformance.nczarr.reader import read_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.delenv("NCZARR_READ_THREADS", raising=False)
    local = type("Local", (), {"read_concurrency": 0, "waits_on_network": False})()
    assert read_threads(local, 25 << 20, 0) == 3
    monkeypatch.setenv("NCZARR_READ_THREADS", "16")
    assert read_threads(_Remote(), 25 << 20, 0) == 16  # type: ignore[arg-type]


def test_small_chunks_of_a_local_store_are_read_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under reader.SMALL_CHUNK_BYTES (128 KiB) a local read takes its chunks one by one (two threads taking the
    interpreter lock in turn were slower: benchmarks/read.py's 50 small variables); a store that waits on a network
    still fetches them several at a time, and NCZARR_READ_THREADS still says how many."""
    from nczarr_conformance.nczarr.reader import read_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("NCZARR_READ_THREADS", raising=False)
    local = type("Local", (), {"read_concurrency": 0, "waits_on_network": False})()
    assert [read_threads(local, size, 400 << 20) for size in (64 << 10, (128 << 10) - 1, 128 << 10, 0)] == [1, 1, 2, 2]
    assert read_threads(_Remote(), 64 << 10, 400 << 20) == 16  # type: ignore[arg-type]
    monkeypatch.setenv("NCZARR_READ_THREADS", "2")
    assert read_threads(local, 64 << 10, 400 << 20) == 2


def test_stores_that_wait_on_a_network_say_so(tmp_path: Path) -> None:
    """What the small-chunk rule asks of each store: the remote kinds and references into remote objects wait on
    a network; a directory, a zip and references into local files do not (references read as users make them,
    with nc2nczarr --reference, then pointed at an HTTP server's copy of the same file)."""
    import json
    import subprocess
    import sys

    from nczarr_conformance.stores.base import Store
    from nczarr_conformance.stores.directory import DirectoryStore
    from nczarr_conformance.stores.references import ReferenceStore
    from nczarr_conformance.stores.remote import RemoteStore
    from nczarr_conformance.stores.s3 import S3Store
    from nczarr_conformance.stores.zip import ZipStore

    assert not Store.waits_on_network and not DirectoryStore.waits_on_network and not ZipStore.waits_on_network
    assert S3Store.waits_on_network and RemoteStore.waits_on_network
    source = Path(__file__).resolve().parents[1] / "corpus" / "rich.nc"
    local = tmp_path / "local.json"
    subprocess.run([sys.executable, "-m", "nczarr_conformance.cli.convert", str(source), str(local), "--reference",
                    "-q"], check=True, capture_output=True)
    assert not ReferenceStore(str(local)).waits_on_network
    text = local.read_text().replace(json.dumps(str(source))[1:-1], "http://127.0.0.1:9/rich.nc")
    remote = tmp_path / "remote.json"
    remote.write_text(text)
    assert "http://127.0.0.1:9/rich.nc" in json.loads(text)["nczarr:targets"]
    assert ReferenceStore(str(remote)).waits_on_network


def test_a_read_asks_for_threads_with_its_chunk_and_output_bytes(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both read paths (a selection, a hyperslab) hand read_threads the array's chunk bytes and their output's."""
    from nczarr_conformance.nczarr import reader, selection

    asked: list[tuple[int, int]] = []
    real = reader.read_threads

    def spy(store_: Any, chunk_bytes: int = 0, output_bytes: int = 0) -> int:
        asked.append((chunk_bytes, output_bytes))
        return real(store_, chunk_bytes, output_bytes)

    monkeypatch.setattr(selection, "read_threads", spy)
    monkeypatch.setattr(reader, "read_threads", spy)
    with ncz.open(store) as ds:
        ds["v"][2:9, :]
        ds.reader.read_region("/v", (slice(0, 40), slice(0, 30)))
    assert asked == [(7 * 8 * 8, 7 * 30 * 8), (7 * 8 * 8, 40 * 30 * 8)]
