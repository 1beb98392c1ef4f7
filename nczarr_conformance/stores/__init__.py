"""Store backends and ``open_store``, which picks one from a URL or path.

Directory, zip and signed S3 (botocore) read and write; plain HTTP(S), unsigned S3, gs:// and az://
are read through obstore (remote.py), and so is signed S3 when obstore can be handed the credentials
botocore would use (s3_signed_read.py); urls.py says which URL names which.

May import only the ground floor (errors, keys, limits, safety, urls); every wing above reads
and writes through them.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nczarr_conformance import safety
from nczarr_conformance.errors import StoreError, UsageError
from nczarr_conformance.stores.base import Pin, Store
from nczarr_conformance.stores.directory import DirectoryStore
from nczarr_conformance.stores.memory import MemoryStore
from nczarr_conformance.stores.zip import ZipStore
from nczarr_conformance.urls import REMOTE_KINDS, StoreSpec, parse

__all__ = ["DirectoryStore", "MemoryStore", "Store", "ZipStore", "lock_for_writing", "open_store", "reopen"]


def open_store(url: str | os.PathLike[str] | StoreSpec, mode: str = "r", overwrite: bool = False) -> Store:
    """Open the store a netcdf-c URL or plain path names (mode 'r', 'w' or 'a').

    A store opened for writing makes its private temporary (directory, zip file) while
    opening: a SIGINT/SIGTERM arriving then is held until the store exists, and the store
    is aborted at once, so an interrupt can never leave that temporary behind unowned.
    """
    if mode == "r":
        return _open(url, mode, overwrite)
    with safety.critical():
        store = _open(url, mode, overwrite)
    if safety.received() is not None:
        store.abort()
        safety.raise_if_interrupted()
    return store


def reopen(url: str, pin: Pin | None, storage_options: Mapping[str, Any] | None = None) -> Store:
    """The store ``url`` names, opened for reading in this process and held to the dataset another
    process's reader opened there (its ``Store.pin()``): a dask worker reading the client's arrays.

    A directory or zip that is no longer the one pinned is refused at once (the one-line
    :class:`StoreError` of a store replaced while being read); an S3 store checks each object it
    reads against the pinned root, as the reader that pinned it does. Nothing is re-pinned.
    """
    spec = parse(url, storage_options)
    if spec.kind == "s3" and not spec.anonymous:
        from nczarr_conformance.stores.s3 import at_pinned_place

        spec = at_pinned_place(spec, pin)  # the endpoint and region the other reader used
    store = _open(spec, "r", False)
    try:
        store.hold_to(pin)
    except BaseException:
        store.close()
        raise
    return store


def lock_for_writing(url: str | os.PathLike[str] | StoreSpec) -> safety.WriterLock:
    """Hold the writer lock of the store ``url`` names, or raise the one-line refusal (exit 2).

    Every store opened for writing takes this lock itself; a command that first reads the
    store it will write (an append's checks, a fix's plan) takes it before reading, so no
    other writer changes the store between the reading and the writing: the store it then
    opens for writing shares the hold. Directory and zip: ``.NAME.lock`` beside the store
    (:func:`safety.hold_writer_lock`); S3: the prefix's ``.nczarr-partial`` marker, claimed as
    an update claims it (:func:`stores.s3.hold_prefix`). Release it, or use it as a context manager.
    """
    spec = url if isinstance(url, StoreSpec) else parse(url)
    if spec.kind in ("file", "zip"):
        real = os.path.realpath(spec.path)
        if not os.path.isdir(os.path.dirname(real)):
            raise StoreError(f"{spec.path}: no such file or directory")  # (a store to update must exist)
        return safety.hold_writer_lock(real, spec.path)
    if spec.kind == "s3" and not spec.anonymous:
        from nczarr_conformance.stores.s3 import hold_prefix

        return hold_prefix(spec)
    raise _read_only(spec)


def _read_only(spec: StoreSpec) -> UsageError:
    """The refusal to write where only reading is possible (see stores/remote.py)."""
    if spec.kind == "s3":
        return UsageError(f"{spec.url}: an anonymous (unsigned) S3 store is read-only; drop aws.profile=no / --anon "
                          "/ anon to write with credentials")
    if spec.kind in REMOTE_KINDS:
        what = "a plain HTTP store" if spec.kind == "http" else f"a {spec.kind}:// store"
        return UsageError(f"{spec.url}: {what} is read-only here (the writer's protocol is S3's); write to a "
                          "directory, zip or s3:// and copy it there")
    if spec.kind == "icechunk":
        return UsageError(f"{spec.path}: an Icechunk repository is read-only here (icechunk writes it: VirtualiZarr's "
                          "vz.to_icechunk); write to a directory, zip or s3:// store")
    return UsageError(f"unknown storage kind {spec.kind!r}")


def _open(url: str | os.PathLike[str] | StoreSpec, mode: str, overwrite: bool) -> Store:
    spec = url if isinstance(url, StoreSpec) else parse(url)
    if spec.kind == "file":
        return DirectoryStore(spec.path, mode, overwrite)
    if spec.kind == "zip":
        if mode == "a":
            raise UsageError(f"{spec.path}: zip stores are write-once; rewrite instead of appending")
        return ZipStore(spec.path, mode, overwrite)
    if spec.kind == "reference":
        if mode != "r":
            raise UsageError(f"{spec.path}: a .json or .parq output holds kerchunk references: write it with "
                             "nc2nczarr --reference (or name a directory or .zip store)")
        from nczarr_conformance.stores.references import ReferenceStore

        return ReferenceStore(spec.path)
    if spec.kind == "icechunk":
        if mode != "r":
            raise _read_only(spec)
        from nczarr_conformance.stores.icechunk_store import IcechunkStore  # icechunk is imported only when used

        return IcechunkStore(spec.path, spec.params)
    if spec.kind in REMOTE_KINDS or (spec.kind == "s3" and (spec.anonymous or _obstore_signs(spec, mode))):
        if mode != "r":
            raise _read_only(spec)
        from nczarr_conformance.stores.remote import (
            RemoteStore,  # obstore is imported only when used
        )

        return RemoteStore.from_spec(spec)
    if spec.kind == "s3":
        from nczarr_conformance.stores.s3 import (
            S3Store,  # boto3 is imported only when S3 is used
        )

        return S3Store.from_spec(spec, mode, overwrite)
    raise UsageError(f"unknown storage kind {spec.kind!r}")


def _obstore_signs(spec: StoreSpec, mode: str) -> bool:
    """A signed S3 read obstore can make with the credentials botocore would use (s3_signed_read.py)."""
    from nczarr_conformance.stores.remote import s3_endpoint
    from nczarr_conformance.stores.s3_signed_read import obstore_credentials

    return mode == "r" and obstore_credentials(spec, s3_endpoint(spec)) is not None
