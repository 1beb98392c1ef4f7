"""One S3 object read in byte ranges, held to the version first seen: ``nc2nczarr s3://B/K.nc OUT.json --reference``.

References into a file on S3 are made without downloading it: h5py reads the HDF5 header and chunk
index through :class:`RangeFile` (a read-only, seekable file object), netcdf-c reads the netCDF header
through :mod:`~nczarr_conformance.stores.http_bridge`, both from the ranged GETs here. The object is
HEADed once (:meth:`S3Object.stamp`: its size and ETag, what the references record) and every GET
after carries ``If-Match`` with that ETag, so an object overwritten while it is read is refused in one
line instead of mixing two versions' bytes. Endpoint, region and credentials are the signed S3 store's
(:meth:`S3Store.from_spec`: ``AWS_ENDPOINT_URL``, profiles, ``storage_options``).

Reads go through a block cache (:data:`BLOCK` bytes a block, at most :data:`CACHE_BLOCKS` kept): the
HDF5 header is many small reads near each other, one GET each would be thousands of requests.
"""
from __future__ import annotations

import dataclasses
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.urls import parse

#: bytes fetched per cache block (a GET covers every missing block of a read at once)
BLOCK = 256 * 1024
#: blocks kept (LRU): 16 MiB, enough for the header and chunk index of a large file
CACHE_BLOCKS = 64


@dataclass(frozen=True)
class Stamp:
    """What an S3 object was when it was read: its size and ETag (what S3 changes on every overwrite)."""

    size: int
    etag: str


def is_s3_url(text: str) -> bool:
    """Whether ``text`` is an ``s3://`` URL (the one remote kind references are made from)."""
    return text.lower().startswith("s3://")


class S3Object:
    """The object ``s3://BUCKET/KEY`` (the signed S3 store's endpoint and credentials), read by byte range."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None, stamp: Stamp | None = None) -> None:
        spec = parse(url, storage_options)
        if spec.kind != "s3":
            raise UsageError(f"{url}: not an s3:// URL")
        bucket, _, key = spec.path.partition("/")
        if not bucket or not key or key.endswith("/"):
            raise UsageError(f"{url}: name one object, s3://BUCKET/KEY")
        from nczarr_conformance.stores.s3 import S3Store

        self.store = S3Store.from_spec(dataclasses.replace(spec, path=bucket), "r")
        self.url = f"s3://{bucket}/{key}"
        self.anonymous = spec.anonymous  # unsigned requests (a public bucket): what a reader of the references needs
        self.bucket, self.key = bucket, key
        self._stamp: Stamp | None = stamp  # given: the version a HEAD already saw, every read held to it
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.gets = 0  # ranged GETs sent (tests hold the conversion to reading far less than the file)

    @property
    def endpoint(self) -> str:
        """The endpoint the object is read from (what fsspec's ``remote_options`` need to read the references)."""
        return str(self.store.client.meta.endpoint_url)

    def close(self) -> None:
        self.store.close()

    def head(self) -> Stamp | None:
        """The object's size and ETag now (one HEAD), None when it is missing."""
        import botocore.exceptions as bx

        try:
            found = self.store.client.head_object(Bucket=self.bucket, Key=self.key)
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self._fail(exc, "head it") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, "head it") from exc
        return Stamp(int(found.get("ContentLength", 0)), str(found.get("ETag", "")))

    def stamp(self) -> Stamp:
        """The size and ETag every read is held to (HEADed on first use)."""
        if self._stamp is None:
            found = self.head()
            if found is None:
                raise StoreError(f"{self.url}: no such object")
            self._stamp = found
        return self._stamp

    def _fail(self, exc: Exception, what: str) -> StoreError:
        return self.store._fail(exc, what)

    def _get(self, start: int, end: int) -> bytes:
        """Bytes ``start``..``end`` (exclusive) of the version stamped, one GET with ``If-Match``."""
        import botocore.exceptions as bx

        stamp = self.stamp()
        spec = f"bytes={start}-{end - 1}"
        try:
            response = self.store.client.get_object(Bucket=self.bucket, Key=self.key, Range=spec,
                                                     IfMatch=stamp.etag)
            body = bytes(response["Body"].read())
        except bx.ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            if code in ("PreconditionFailed", "412"):
                raise StoreError(f"{self.url}: changed while being read (ETag {stamp.etag} no longer matches); "
                                 "nothing written") from None
            if code in ("NoSuchKey", "404", "NotFound"):
                raise StoreError(f"{self.url}: deleted while being read; nothing written") from None
            raise self._fail(exc, f"get {spec}") from exc
        except bx.BotoCoreError as exc:
            raise self._fail(exc, f"get {spec}") from exc
        self.gets += 1
        if len(body) != end - start:
            raise StoreError(f"{self.url}: range {spec} cut short ({len(body)} of {end - start} bytes)")
        return body

    def read(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``start`` (fewer at the object's end), through the block cache."""
        size = self.stamp().size
        end = min(size, start + max(0, length))
        if start >= end:
            return b""
        first, last = start // BLOCK, (end - 1) // BLOCK
        with self._lock:
            have = {i: self._blocks[i] for i in range(first, last + 1) if i in self._blocks}
        missing = [i for i in range(first, last + 1) if i not in have]
        if missing:  # one GET over the missing blocks (holes between them too: fewer requests)
            lo, hi = missing[0] * BLOCK, min(size, (missing[-1] + 1) * BLOCK)
            data = self._get(lo, hi)
            for i in range(missing[0], missing[-1] + 1):
                if i not in have:
                    have[i] = data[(i - missing[0]) * BLOCK:(i - missing[0] + 1) * BLOCK]
            with self._lock:
                for i in missing:
                    self._blocks[i] = have[i]
                    self._blocks.move_to_end(i)
                while len(self._blocks) > CACHE_BLOCKS:
                    self._blocks.popitem(last=False)
        joined = b"".join(have[i] for i in range(first, last + 1))
        return joined[start - first * BLOCK:end - first * BLOCK]

    def open(self) -> RangeFile:
        """A new read-only file object over the object (h5py's ``File`` takes one)."""
        return RangeFile(self)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over an :class:`S3Object`: bounded by its size, every read a cached range."""

    def __init__(self, obj: S3Object) -> None:
        super().__init__()
        self.obj = obj
        self.pos = 0
        self.name = obj.url

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.obj.stamp().size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.obj.url}: seek before the start")
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.obj.read(self.pos, len(view))
        view[:len(data)] = data
        self.pos += len(data)
        return len(data)
