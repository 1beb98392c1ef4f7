"""Worker-side views of a write another process owns (``--concat`` on dask.distributed).

The client opens the real transaction (a directory built aside, a zip built aside as a
directory, or an S3 prefix carrying its ``.nczarr-partial`` marker) and alone commits or
aborts it; workers only put chunk objects into it through these views, which refuse
metadata (the client writes it last) and never create the transaction themselves: a
directory view writes below a root that must already exist, so a worker still running
after the client aborted cannot bring a removed tree back. Each view is described by a
small picklable :class:`PartSpec` sent with the task.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from nczarr_conformance import keys, safety
from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.directory import Extent, write_object


@dataclass(frozen=True, slots=True)
class PartSpec:
    """Where a worker puts chunks: ``kind`` "file" (a directory root) or "s3" (bucket and prefix)."""

    kind: str
    root: str = ""  # file: the private tree being built; s3: "bucket/prefix"
    in_place: bool = True  # file: a fresh tree (write in place) or an append's hard-linked one (never in place)
    endpoint: str | None = None
    profile: str | None = None
    region: str | None = None
    umask: int = 0o022


def open_part(spec: PartSpec) -> Store:
    if spec.kind == "file":
        return DirectoryPart(spec)
    if spec.kind == "s3":
        return S3Part(spec)
    raise StoreError(f"no worker view for {spec.kind!r} stores")


class _Part(Store):
    writable = True
    supports_deletes = False

    def _check_chunk(self, key: str) -> None:
        if keys.basename(key) in safety.META_NAMES:
            raise StoreError(f"{key}: metadata is written by the client, last, never by a worker")

    def _delete(self, key: str) -> None:
        raise StoreError(f"{self!r} cannot delete objects")


class DirectoryPart(_Part):
    """Chunk files below an existing private tree (see DirectoryStore for why in place is safe there)."""

    kind = "file"

    def __init__(self, spec: PartSpec) -> None:
        super().__init__()
        self.root = Path(spec.root)
        self.in_place = spec.in_place
        self.umask = spec.umask
        if not self.root.is_dir():
            raise StoreError(f"{self.root}: the tree being written is gone (the run was aborted)")

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        path = self.root.joinpath(*keys.split(key))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) > (sys.maxsize if limit is None else limit):
            raise StoreError(f"{path}: larger than {limit} bytes")
        return data

    def _put(self, key: str, data: bytes) -> None:
        self._write(key, data)

    def _put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        """A chunk copied file to file in the kernel, as DirectoryStore does."""
        self._write(key, Extent(fd, offset, size))

    def _write(self, key: str, data: bytes | Extent) -> None:
        self._check_chunk(key)
        parts = keys.split(key)
        path = self.root.joinpath(*parts)
        try:
            where = self.root
            for part in parts[:-1]:  # never parents=True: the root must still be there
                where = where / part
                with contextlib.suppress(FileExistsError):
                    where.mkdir()
            # an append's tree holds hard links to the old store's files: replaced, never written into
            write_object(path, data, 0o666 & ~self.umask, in_place=self.in_place)
        except FileNotFoundError as exc:
            raise StoreError(f"{self.root}: the tree being written is gone (the run was aborted)") from exc
        except OSError as exc:
            raise StoreError(f"{self.root}: cannot write {key.lstrip('/')}: {exc.strerror or exc}") from exc

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        base = self.root.joinpath(*keys.split(prefix))
        for dirpath, _, filenames in os.walk(base):
            rel = Path(dirpath).relative_to(self.root)
            yield from (keys.join(*rel.parts, n) for n in filenames if not n.endswith(".partial"))

    def __repr__(self) -> str:
        return f"DirectoryPart('file://{self.root}')"


class S3Part(_Part):
    """Chunk PUTs under an S3 prefix whose transaction (marker, metadata, abort) the client owns."""

    kind = "s3"

    def __init__(self, spec: PartSpec) -> None:
        super().__init__()
        from nczarr_conformance.stores.s3 import S3Store

        bucket, _, prefix = spec.root.partition("/")
        # a read view: no listing, no marker; its client and error mapping are the backend's own
        self.reader = S3Store(bucket, prefix, mode="r", endpoint=spec.endpoint, profile=spec.profile,
                              region=spec.region)
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    def _name(self, key: str) -> str:
        rel = key.lstrip("/")
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        return self.reader.get(key, limit=sys.maxsize if limit is None else limit)

    def _put(self, key: str, data: bytes) -> None:
        import botocore.exceptions as bx

        self._check_chunk(key)
        try:
            self.reader.write_client.put_object(Bucket=self.bucket, Key=self._name(key), Body=data)  # 8 attempts
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise StoreError(f"s3://{self.bucket}/{self._name(key)}: cannot put: {exc}") from exc

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        return iter(self.reader.list_prefix(prefix))

    def close(self) -> None:
        self.reader.close()

    def __repr__(self) -> str:
        return f"S3Part('s3://{self.bucket}/{self.prefix}')"
