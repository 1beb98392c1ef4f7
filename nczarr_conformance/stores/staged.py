"""One staged write, shared by the three writers of a dataset from netCDF: ``convert``, ``--append``, ``--concat``.

A dataset is written aside and published at once, so a reader sees the old dataset or the new one and a
failure or a signal leaves the old one (or nothing): :func:`stage_write` opens the write, the caller puts
objects into it, then commits or aborts. What "aside" means is each store's own transaction:

* directory: the tree built beside the store (an append's from hard links to the old files, replaced, not written
  into) and swapped in (``DirectoryStore``);
* zip: write-once, so a new zip under a temporary name renamed over the old one; an update copies the old
  entries as stored (:func:`rewrite_zip`), but those it replaces;
* S3: the prefix's ``.nczarr-partial`` marker, the metadata held until the chunks are up (``S3Store``).

``workers=True`` (``--concat`` on dask.distributed): chunks are put by other processes through
:attr:`StagedWrite.part` (``stores/part.py``), the client putting only the metadata, last. A directory's
workers write into its tree built aside; a zip cannot take writes from several processes, so its tree is
a directory beside it, zipped at commit; S3's marker is put before any worker's PUT.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nczarr_conformance import safety
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.stores import open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.directory import DirectoryStore
from nczarr_conformance.stores.part import DirectoryPart, PartSpec
from nczarr_conformance.stores.zip import ZipStore
from nczarr_conformance.urls import StoreSpec

#: what an abort may be told: the keys workers may have put without reporting them (a task cut short)
Planned = Callable[[], Iterable[str]]


class StagedWrite:
    """A write in progress: the client's puts, the workers' view (``part``), commit, abort."""

    store: Store  # what a writer in this process writes into (its put, get and list_prefix)
    metadata_written = 0

    @property
    def part(self) -> PartSpec:
        """Where worker processes put chunks; only a write opened with ``workers=True`` has one."""
        raise StoreError(f"{self.store!r}: opened without workers, so no worker may write into it")

    def put(self, key: str, data: bytes) -> None:
        """A metadata object (the writer's ``store.put``), written by the client only."""
        self.metadata_written += 1
        self._put(key, data)

    def _put(self, key: str, data: bytes) -> None:
        self.store.put(key, data)

    def adopt(self, written: list[str]) -> None:
        """Keys workers put (S3 must know them to keep them at commit and remove them on abort)."""

    def commit(self) -> None:
        self.store.commit()

    def abort(self, planned: Planned | None = None) -> None:
        """Throw the write away (an abort after a commit or an abort does nothing)."""
        self.store.abort()


class InStore(StagedWrite):
    """Everything written by this process into one store opened for writing: the store's transaction."""

    def __init__(self, store: Store) -> None:
        self.store = store


class DirectoryStaging(StagedWrite):
    """A tree built aside (an append's from hard links to the old files, which are never written into)."""

    def __init__(self, spec: StoreSpec, overwrite: bool, append: bool = False) -> None:
        self.store = DirectoryStore(spec.path, "a" if append else "w", overwrite)
        self._part = PartSpec("file", str(self.store.root), in_place=not append, umask=safety.umask())

    @property
    def part(self) -> PartSpec:
        return self._part


class ZipStaging(StagedWrite):
    """Built aside as a directory next to the zip, then zipped under a temporary name and renamed."""

    def __init__(self, spec: StoreSpec, overwrite: bool, append: bool = False) -> None:
        self.spec = spec
        self.overwrite = overwrite
        self.old = ZipStore(spec.path, "r") if append else None  # an append rewrites the zip (write-once)
        real = Path(os.path.realpath(spec.path))
        self.store = self.zip = ZipStore(spec.path, "w", overwrite or append)  # locks, removes leftovers, refuses
        try:                                                                     # an existing output
            self.aside = safety.make_temp_dir(real)
        except BaseException:
            self.zip.abort()
            raise
        self._part = PartSpec("file", str(self.aside), umask=0o077)
        self.meta: dict[str, bytes] = {}

    @property
    def part(self) -> PartSpec:
        return self._part

    def _put(self, key: str, data: bytes) -> None:
        self.meta[key] = data

    def commit(self) -> None:
        try:
            tree = DirectoryPart(self._part)
            new = sorted(tree.list_prefix("/"))
            if self.old is not None:  # the old members as stored, but those replaced
                replaced = set(new) | set(self.meta)
                for key in self.old.list_prefix("/"):
                    if key not in replaced:
                        data = self.old.get(key, limit=2**62)
                        if data is not None:
                            self.zip.put(key, data)
            for key in new:
                data = tree.get(key, limit=2**62)
                if data is not None:
                    self.zip.put(key, data)
            for key, data in self.meta.items():
                self.zip.put(key, data)
            self.zip.commit()
        except BaseException:
            self.zip.abort()
            raise
        finally:
            self._close_old()
            safety.remove_path(self.aside)

    def _close_old(self) -> None:
        if self.old is not None:
            self.old.close()
            self.old = None

    def abort(self, planned: Planned | None = None) -> None:
        self.zip.abort()
        self._close_old()
        safety.remove_path(self.aside)


class S3Staging(StagedWrite):
    """Chunks PUT by the workers under the store's marker; metadata held by the store until commit."""

    def __init__(self, spec: StoreSpec, overwrite: bool, append: bool = False) -> None:
        from nczarr_conformance.stores.s3 import S3Store  # boto3 is imported only when S3 is used

        self.store = self.s3 = S3Store.from_spec(spec, "a" if append else "w", overwrite)
        self.s3._begin()  # the marker first (and an overwrite's old metadata gone) before any worker PUT
        self._part = PartSpec("s3", f"{self.s3.bucket}/{self.s3.prefix}", endpoint=_s3_endpoint(spec),
                              profile=spec.params.get("aws.profile") or spec.params.get("awsprofile"),
                              region=spec.params.get("aws.region"))

    @property
    def part(self) -> PartSpec:
        return self._part

    def adopt(self, written: list[str]) -> None:
        with self.s3._lock:
            self.s3._put_keys.extend(written)

    def abort(self, planned: Planned | None = None) -> None:
        if planned is not None:
            self.adopt(list(planned()))  # a task cut short put keys nobody reported: remove every planned one
        self.s3.abort()


def _s3_endpoint(spec: StoreSpec) -> str | None:
    endpoint = spec.endpoint
    if endpoint and endpoint.split("://")[-1].split(":")[0].endswith("amazonaws.com"):
        return None
    return endpoint


def stage_write(spec: StoreSpec, *, overwrite: bool = False, append: bool = False,
                workers: bool = False) -> StagedWrite:
    """Open the write of a new store (``append``: of the store there, grown), under its writer lock.

    ``workers``: chunks will also be put by other processes, through :attr:`StagedWrite.part`. Without,
    the store :func:`~nczarr_conformance.stores.open_store` opens is the whole stage (a zip to update
    is rewritten by :func:`rewrite_zip` instead, which needs the entries it keeps)."""
    if not workers:
        return InStore(open_store(spec, "a" if append else "w", overwrite=overwrite))
    if spec.kind == "file":
        return DirectoryStaging(spec, overwrite, append)
    if spec.kind == "zip":
        return ZipStaging(spec, overwrite, append)
    if spec.kind == "s3":
        return S3Staging(spec, overwrite, append)
    raise UsageError(f"unknown storage kind {spec.kind!r}")


def rewrite_zip(spec: StoreSpec, source: Store, replaced: set[str], limit: Callable[[str], int], *,
                at_top: bool = False) -> InStore:
    """An update of a zip store, which is write-once: a new zip under a temporary name holding every entry
    of ``source`` (the zip as read) but ``replaced`` (the objects about to be written), copied as stored and
    each bounded by ``limit`` (the reader's size rule: a zip bomb is refused, not inflated whole);
    ``at_top``: entries at the top of the zip (Zarr v3, as zarr-python reads them), else in the dataset's
    folder as netcdf-c names it."""
    target = ZipStore(spec.path, "w", overwrite=True)
    try:
        if at_top:
            target.entries_at_top()
        for key in source.list_prefix("/"):
            if key not in replaced:
                data = source.get(key, limit=limit(key))  # copied as stored, never decoded
                if data is not None:
                    target.put(key, data)
    except BaseException:
        target.abort()
        raise
    return InStore(target)


def publish(stage: Store, target: StagedWrite, last: Callable[[str], tuple[Any, ...]]) -> int:
    """Every object of the store ``stage`` (a whole dataset built elsewhere) into ``target``, in the order
    of ``last`` (the key a writer puts last sorts last: a format's root metadata), then committed, or
    aborted on any error. Returns the objects written."""
    try:
        found = stage.list_prefix("/")
        for key in sorted(found, key=last):
            data = stage.get(key, limit=sys.maxsize)  # copied as stored, never decoded
            if data is not None:
                target.store.put(key, data)
        target.commit()
    except BaseException:
        target.abort()
        raise
    return len(found)
