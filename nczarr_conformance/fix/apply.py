"""Carry a plan out: in place (with a backup beside the store) or into a fixed copy.

In place, per kind of store:

* directory: each edited metadata object is written to a temporary file beside it and renamed
  over it (atomic per object; deepest first, the root's objects and ``.zmetadata`` last; an
  interrupted run leaves every object whole, and running again finishes the fix). When chunks
  are re-encoded, they and their ``.zarray`` must change together: the store is then rebuilt
  aside from hard links (``DirectoryStore`` mode ``a``) and swapped in with one atomic exchange;
* zip: the zip is rewritten to a temporary file beside it (members in their order, the same
  names, compression and dates; unedited members byte for byte) and renamed onto it;
* S3: each edited object is one PUT (atomic per object), deepest first, the root's objects
  and ``.zmetadata`` last; chunks are never rewritten in place on S3 (no rename there).

The backup holds the stored bytes of every object the fix rewrites (re-encoded chunks
included) under their keys, plus ``nczarr-fix-backup.json`` naming the objects the fix
created (to delete when restoring). It lies *beside* the store, never inside, so no reader
lists it as part of the dataset: ``<store>.nczarr-fix-backup-<UTC time>`` (a directory next
to a directory or zip store, a sibling prefix on S3).
"""
from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

from .. import keys, safety
from ..errors import FormatError, StoreError, UsageError
from ..stores import DirectoryStore, ZipStore, open_store
from ..stores.base import Store
from ..urls import StoreSpec
from .plan import Plan

BACKUP_MANIFEST = "/nczarr-fix-backup.json"
_ROOT_LAST = {"/.zattrs": 1, "/.zarray": 2, "/.zgroup": 3, "/.zmetadata": 4}


def write_order(plan: Plan) -> list[str]:
    """Edited metadata keys, deepest first, the root's last and ``/.zmetadata`` at the very end."""
    return sorted((e.key for e in plan.edits), key=lambda k: (_ROOT_LAST.get(k, 0), -len(keys.split(k)), k))


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def backup_location(spec: StoreSpec) -> StoreSpec:
    """Where the backup of ``spec``'s store goes: a fresh sibling named after it."""
    suffix = f".nczarr-fix-backup-{_stamp()}"
    if spec.kind == "s3":
        bucket, _, prefix = spec.path.partition("/")
        if not prefix.strip("/"):
            raise UsageError(f"{spec.url or spec.path}: a dataset at a bucket root has no place beside it for the "
                             "backup; use --out URL2 or --no-backup")
        return StoreSpec("s3", f"{bucket}/{prefix.strip('/')}{suffix}", (), spec.params, spec.endpoint)
    base = Path(spec.path)
    path = base.parent / (base.name + suffix)
    n = 1
    while os.path.lexists(path):
        n += 1
        path = base.parent / f"{base.name}{suffix}-{n}"
    return StoreSpec("file", str(path))


def write_backup(spec: StoreSpec, source: Store, plan: Plan) -> str:
    """Save what the plan rewrites; return where (a path or s3:// URL)."""
    where = backup_location(spec)
    created = [e.key for e in plan.edits if e.old is None]
    manifest = {"store": spec.url or spec.path, "created": created,
                "rewritten": [e.key for e in plan.edits if e.old is not None] + sorted(plan.chunk_keys()),
                "fixes": sorted({f for e in plan.edits for f in e.fixes})}
    with open_store(where, "w") as backup:
        for edit in plan.edits:
            if edit.old is not None:
                backup.put(edit.key, edit.old)
        for key in sorted(plan.chunk_keys()):
            data = source.get(key, sys.maxsize)
            if data is not None:
                backup.put(key, data)
        backup.put(BACKUP_MANIFEST, json.dumps(manifest, indent=1).encode())
    return f"s3://{where.path}" if where.kind == "s3" else where.path


def fix_in_place(spec: StoreSpec, source: Store, plan: Plan) -> None:
    """Apply ``plan`` to the store ``source`` reads (opened from ``spec``)."""
    new = {e.key: e.new for e in plan.edits}
    if spec.kind == "file" and not plan.recodes:
        with DirectoryStore(spec.path, "u") as store:  # metadata only: one rename per edited object
            for key in write_order(plan):
                store.put(key, new[key])
    elif spec.kind == "file":
        # re-encoded chunks and their .zarray must change together: the tree is rebuilt aside from hard
        # links and swapped in whole
        with DirectoryStore(spec.path, "a") as store:
            for r in plan.recodes:
                for key in r.chunks:
                    data = source.get(key, sys.maxsize)
                    if data is not None:
                        store.put(key, r.reencode(key, data))
            for key in write_order(plan):
                store.put(key, new[key])
    elif spec.kind == "zip":
        assert isinstance(source, ZipStore)
        _rewrite_zip(source, plan)
    elif spec.kind == "s3":
        if plan.recodes:
            raise UsageError("chunks are never rewritten in place on S3; write a fixed copy with --out")
        from ..stores.s3 import S3Store

        with S3Store.from_spec(spec, "u") as store:
            for key in write_order(plan):
                store.put(key, new[key])
    else:
        raise UsageError(f"unknown storage kind {spec.kind!r}")


def _rewrite_zip(source: ZipStore, plan: Plan) -> None:
    """Every member in its order (entry 0 decides netcdf-c's root), edited ones replaced, new ones last."""
    new = {e.key: e.new for e in plan.edits}
    recode = {k: r for r in plan.recodes for k in r.chunks}
    target = source.target
    real = Path(os.path.realpath(target))
    mode = os.stat(real).st_mode & 0o7777
    fd, tmp = safety.make_temp_file(real)
    try:
        with os.fdopen(fd, "w+b") as fh, zipfile.ZipFile(fh, "w", allowZip64=True) as out:
            seen: set[str] = set()
            for info in source.zf.infolist():
                key = None
                if not info.is_dir() and info.filename.startswith(source.prefix.lstrip("/")):
                    try:
                        key = keys.join(info.filename[len(source.prefix.lstrip("/")):])
                    except FormatError:  # a name no reader is served (nczarr-check: NCZ-STORE-UNSAFE): kept as is
                        key = None
                if key is not None and source.members.get(key) is info:
                    seen.add(key)
                    if key in new:
                        out.writestr(_like(info), new[key])
                        continue
                    if key in recode:
                        out.writestr(_like(info), recode[key].reencode(key, source.zf.read(info)))
                        continue
                out.writestr(info, source.zf.read(info))
            for key in write_order(plan):
                if key not in seen:
                    info = zipfile.ZipInfo(source.prefix.lstrip("/") + key.lstrip("/"), date_time=(1980, 1, 1, 0, 0, 0))
                    info.external_attr = 0o644 << 16
                    out.writestr(info, new[key])
            fh.flush()
            os.fsync(fh.fileno())
        with safety.critical():
            safety.raise_if_interrupted()
            os.chmod(tmp, mode)
            os.replace(tmp, real)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _like(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh member header with ``info``'s name, date, permissions and compression (sizes recomputed)."""
    out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    out.external_attr = info.external_attr
    out.compress_type = info.compress_type
    return out


def write_copy(source: Store, out: StoreSpec, plan: Plan) -> None:
    """Write the fixed dataset to a new store ``out``; the input is only read."""
    new = {e.key: e.new for e in plan.edits}
    recode = {k: r for r in plan.recodes for k in r.chunks}
    with open_store(out, "w") as store:
        for key in source.list_prefix("/"):
            if key in new:
                continue
            data = source.get(key, sys.maxsize)
            if data is None:
                continue
            store.put(key, recode[key].reencode(key, data) if key in recode else data)
        for key in write_order(plan):
            store.put(key, new[key])


def refuse_unsafe_output(spec: StoreSpec, out: StoreSpec) -> None:
    if spec.kind == "s3" or out.kind == "s3":
        if spec.kind == out.kind == "s3":
            a, b = spec.path.rstrip("/") + "/", out.path.rstrip("/") + "/"
            if a.startswith(b) or b.startswith(a):
                raise UsageError(f"s3://{out.path}: overlaps the input s3://{spec.path}; not written")
        return
    safety.check_output_is_safe(spec.path, out.kind, out.path)
    if os.path.lexists(out.path):
        raise StoreError(f"{out.path}: exists; nczarr-fix --out writes a new store only")
