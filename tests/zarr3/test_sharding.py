"""Sharded v3 arrays read one inner chunk by byte range: its index, then its bytes; never the whole shard."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from nczarr_conformance.stores import DirectoryStore, open_store
from nczarr_conformance.zarr3.reader import V3Reader

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class CountingStore(DirectoryStore):
    """A directory store that counts the bytes every read hands back (whole objects and ranges)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "r", False)
        self.bytes_read = 0

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        data = super()._get(key, limit)
        self.bytes_read += len(data or b"")
        return data

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        got = super()._get_range(key, start, length)
        self.bytes_read += len(got[0]) if got else 0
        return got


def _sharded(path: Path, **kw: object) -> np.ndarray:
    values = (np.arange(64 * 64, dtype="float64") * 1.5).reshape(64, 64)
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    a = g.create_array("v", shape=(64, 64), dtype="float64", dimension_names=["y", "x"], **kw)
    a[:] = values
    return values


def test_one_inner_chunk_reads_its_index_and_its_bytes_only(tmp_path):
    path = tmp_path / "s.zarr"
    _sharded(path, chunks=(8, 8), shards=(32, 32))
    store = CountingStore(str(path))
    reader = V3Reader(store)
    store.bytes_read = 0
    got = reader.read_region("/v", (slice(8, 16), slice(16, 24)))
    theirs = zarr.open_array(str(path / "v"), mode="r")[8:16, 16:24]
    np.testing.assert_array_equal(got, theirs)
    shard = (path / "v" / "c" / "0" / "0").read_bytes()
    index_nbytes = 16 * 16 + 4  # 4 x 4 inner chunks, (offset, length) uint64 pairs, crc32c
    index = np.frombuffer(shard[-index_nbytes:-4], dtype="<u8").reshape(4, 4, 2)
    inner_len = int(index[1, 2, 1])
    assert store.bytes_read == index_nbytes + inner_len
    assert store.bytes_read < len(shard) / 4


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_index_at_start_and_compressed_shards_equal_zarr_python(tmp_path, kind):
    from zarr.codecs import ShardingCodec, ZstdCodec

    for name, kw in {"start": {"chunks": (32, 32), "compressors": None,
                               "serializer": ShardingCodec(chunk_shape=(8, 8), index_location="start")},
                     "outer": {"chunks": (32, 32), "compressors": [ZstdCodec()],
                               "serializer": ShardingCodec(chunk_shape=(8, 16))},
                     "partial": {"shape": (50, 45), "chunks": (8, 8), "shards": (16, 24)}}.items():
        path = tmp_path / f"{name}.zarr"
        g = zarr.open_group(str(path), mode="w", zarr_format=3)
        shape = kw.pop("shape", (64, 64))
        a = g.create_array("v", shape=shape, dtype="int32", dimension_names=["y", "x"], fill_value=-7, **kw)
        a[: shape[0] - 3, 5:] = np.arange((shape[0] - 3) * (shape[1] - 5)).reshape(shape[0] - 3, shape[1] - 5)
        url = str(path)
        if kind == "zip":
            url = str(tmp_path / f"{name}.zip")
            files = sorted((f for f in path.rglob("*") if f.is_file()), key=lambda f: (f != path / "zarr.json", f))
            with zipfile.ZipFile(url, "w") as zf:  # the root zarr.json first, as zarr-python's ZipStore writes it
                for file in files:
                    zf.write(file, file.relative_to(path).as_posix())
        theirs = zarr.open_array(str(path / "v"), mode="r")[...]
        with open_store(url) as store:
            reader = V3Reader(store)
            np.testing.assert_array_equal(reader.read_variable("/v"), theirs, err_msg=name)


def test_s3_ranged_reads(tmp_path, s3_bucket):
    """The S3 store's ranged GET (moto over HTTP) reads one inner chunk by range, equal to zarr-python."""
    import boto3

    from nczarr_conformance.stores.s3 import S3Store

    path = tmp_path / "s.zarr"
    _sharded(path, chunks=(8, 8), shards=(32, 32))
    client = boto3.client("s3")
    for file in path.rglob("*"):
        if file.is_file():
            client.put_object(Bucket=s3_bucket, Key="v3/" + file.relative_to(path).as_posix(), Body=file.read_bytes())
    store = S3Store(s3_bucket, "v3")
    sizes: list[int] = []
    original = store._get_range

    def counted(key: str, start: int, length: int) -> tuple[bytes, int] | None:
        got = original(key, start, length)
        sizes.append(len(got[0]) if got else 0)
        return got

    store._get_range = counted  # type: ignore[method-assign]
    reader = V3Reader(store)
    got = reader.read_region("/v", (slice(40, 48), slice(0, 8)))
    np.testing.assert_array_equal(got, zarr.open_array(str(path / "v"), mode="r")[40:48, 0:8])
    shard = (path / "v" / "c" / "1" / "0").read_bytes()
    assert sizes[0] == 16 * 16 + 4 and sum(sizes) < len(shard) / 4
    assert store._get_range("/v/c/1/0", -10, 10) == (shard[-10:], len(shard))
    assert store._get_range("/v/c/9/9", 0, 10) is None
