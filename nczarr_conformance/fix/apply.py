"""Carry a plan out: in place (with a backup beside the store) or into a fixed copy.

In place, the fix plans from the very snapshot it writes (:func:`open_session`), never from a
tree another writer may be replacing, and makes every edit visible at once, per kind of store:

* directory: the store is opened for writing as an append opens it (``DirectoryStore`` mode
  ``a``, the one writing open every command goes through): the tree is rebuilt aside from hard
  links in ``.NAME.partial-PID-RANDOM``, the plan is made from that tree, the edits are written
  into it (each object a new file renamed into place: a link to the live store is never written
  into; an edited object keeps its permissions, a new one gets its siblings'), and the tree is
  swapped in with one atomic exchange. If another writer (an append, a conversion) replaced the
  store after the snapshot was taken, the fix refuses before the exchange and that writer's
  dataset stays. SIGINT or any failure removes the aside tree; after SIGKILL the next run (fix,
  conversion or append) removes it;
* zip: opened for writing as a conversion or an append opens it (``ZipStore`` mode ``w``: a
  temporary file beside it), then planned from the zip as opened; every member is rewritten there
  (in their order, the same names, compression and dates, unedited members byte for byte) and the
  file renamed onto the zip, unless the zip was replaced meanwhile;
* S3 (no rename, no multi-object transaction): planned from the objects as they are; a prefix
  holding a writer's ``.nczarr-partial`` marker is refused; right before writing, every object to
  edit is read again and must still hold what the plan was made from; then the edits are PUT in
  one batch that a signal does not cut (deepest first, the root's objects and ``.zmetadata``
  last), and a failed PUT puts back the objects already written. What S3 cannot guarantee: a
  writer that changes an object between that last read and its PUT goes unseen, and a SIGKILL
  or a lost connection during the batch leaves some objects edited and the others not — each
  whole and readable (in place on S3 every edit is metadata only and stands alone; ``.zmetadata``
  is the last one), and running the fix again finishes it. Chunks are never rewritten in place.

The backup holds the stored bytes of every object the fix rewrites or removes (re-encoded chunks
included) under their keys, plus ``nczarr-fix-backup.json`` naming the objects the fix created (to
delete when restoring). It lies *beside* the store, never inside (the store's path is resolved
first, so ``nczarr-fix .`` inside a store works too): ``<store>.nczarr-fix-backup-<UTC time>``
(a directory next to a directory or zip store, built as ``.<store>.partial-PID-RANDOM`` and
renamed, a sibling prefix on S3).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import stat
import time
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from nczarr_conformance import keys, safety
from nczarr_conformance.errors import FormatError, StoreError, UsageError
from nczarr_conformance.fix.plan import ObjectEdit, Plan
from nczarr_conformance.limits import max_in_memory_bytes
from nczarr_conformance.stores import DirectoryStore, ZipStore, open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.urls import StoreSpec
from nczarr_conformance.zarr3.reader import object_limits

BACKUP_MANIFEST = "/nczarr-fix-backup.json"
_ROOT_LAST = {"/.zattrs": 1, "/.zarray": 2, "/.zgroup": 3, "/.zmetadata": 4, "/zarr.json": 5}


def write_order(plan: Plan) -> list[str]:
    """Edited metadata keys, deepest first, the root's last and ``/.zmetadata`` at the very end; a
    migration's removals (``--to-v3``: the v2 objects) after every ``zarr.json`` is written, so that
    on S3 a cut batch leaves the v2 dataset whole."""
    removed = {e.key for e in plan.edits if e.new is None and e.old is not None and "NCZ-FIX-TO-V3" in e.fixes}
    return sorted((e.key for e in plan.edits),
                  key=lambda k: (k in removed, _ROOT_LAST.get(k, 0), -len(keys.split(k)), k))


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


class PartlyWritten(StoreError):
    """Some edits of an S3 batch landed and could not be put back: the one case the store is neither."""


# ---- the backup -----------------------------------------------------------------------------
def backup_location(spec: StoreSpec) -> StoreSpec:
    """Where the backup of ``spec``'s store goes: a fresh sibling named after it (path resolved first:
    ``.`` names the directory it is, and its sibling is outside it)."""
    suffix = f".nczarr-fix-backup-{_stamp()}"
    if spec.kind == "s3":
        bucket, _, prefix = spec.path.partition("/")
        if not prefix.strip("/"):
            raise UsageError(f"{spec.url or spec.path}: a dataset at a bucket root has no place beside it for the "
                             "backup; use --out URL2 or --no-backup")
        return StoreSpec("s3", f"{bucket}/{prefix.strip('/')}{suffix}", (), spec.params, spec.endpoint)
    base = Path(os.path.realpath(spec.path))
    path = base.parent / (base.name + suffix)
    n = 1
    while os.path.lexists(path):
        n += 1
        path = base.parent / f"{base.name}{suffix}-{n}"
    return StoreSpec("file", str(path))


def _backup_items(source: Store, plan: Plan) -> Iterator[tuple[str, bytes]]:
    """(key, stored bytes) of every object the plan rewrites or removes; one chunk in memory at a time."""
    for edit in plan.edits:
        if edit.old is not None:
            yield edit.key, edit.old
    limit = object_limits(source)
    for key in sorted(plan.chunk_keys()):
        data = source.get(key, limit(key))
        if data is not None:
            yield key, data


def _manifest(spec: StoreSpec, plan: Plan) -> bytes:
    doc = {"store": spec.url or spec.path,
           "created": [e.key for e in plan.edits if e.old is None],
           "rewritten": [e.key for e in plan.edits if e.old is not None and e.new is not None]
           + sorted(plan.chunk_keys()),
           "removed": [e.key for e in plan.edits if e.old is not None and e.new is None],
           "fixes": sorted({f for e in plan.edits for f in e.fixes})}
    return json.dumps(doc, indent=1).encode()


def write_backup(spec: StoreSpec, source: Store, plan: Plan) -> str:
    """Save what the plan rewrites or removes; return where (a path or s3:// URL)."""
    where = backup_location(spec)
    if where.kind == "s3":
        with open_store(where, "w") as backup:
            for key, data in _backup_items(source, plan):
                backup.put(key, data)
            backup.put(BACKUP_MANIFEST, _manifest(spec, plan))
        return f"s3://{where.path}"
    store_path = Path(os.path.realpath(spec.path))
    tmp = safety.make_temp_dir(store_path)  # a dead run's is one of the store's leftovers: the next run removes it
    try:
        for key, data in itertools.chain(_backup_items(source, plan), [(BACKUP_MANIFEST, _manifest(spec, plan))]):
            path = tmp.joinpath(*keys.split(key))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        with safety.critical():
            safety.raise_if_interrupted()
            os.chmod(tmp, 0o777 & ~safety.umask())
            if os.path.lexists(where.path):
                raise StoreError(f"{where.path}: appeared while the backup was written; not replaced")
            safety.sync_tree(tmp)  # the originals on disk before the swap drops them from the store
            os.rename(tmp, where.path)
            safety.sync_directory(Path(where.path).parent)
    except OSError as exc:
        safety.remove_path(tmp)
        raise StoreError(f"{where.path}: cannot write the backup: {exc.strerror or exc}") from exc
    except BaseException:
        safety.remove_path(tmp)
        raise
    return where.path


def remove_backup(saved: str, spec: StoreSpec) -> None:
    """Remove a backup this run wrote, when the fix changed nothing after all (best effort)."""
    if not saved.startswith("s3://"):
        safety.remove_path(Path(saved))
        return
    where = StoreSpec("s3", saved[len("s3://"):], (), spec.params, spec.endpoint)
    try:
        with open_store(where, "u") as backup:
            for key in backup.list_prefix("/"):
                backup.delete(key)
    except StoreError:
        pass


def remove_dead_leftovers(spec: StoreSpec) -> list[Path]:
    """The temporaries a killed run left beside a directory or zip store (aside trees, temporary zips,
    unfinished backups: all named ``.<store>.partial-PID-RANDOM``), removed; S3 has none of the fix's."""
    if spec.kind == "s3":
        return []
    return safety.remove_leftovers(Path(os.path.realpath(spec.path)))


# ---- in place ----------------------------------------------------------------------------------
class Session(ABC):
    """One in-place fix: ``store`` is the snapshot to plan from and write; :meth:`apply` stages the
    edits there, :meth:`commit` makes them visible at once, leaving the context without it aborts."""

    store: Store
    where: str
    done = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self.done:
            with safety.critical():
                self.abort()

    @abstractmethod
    def apply(self, plan: Plan) -> None: ...

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def abort(self) -> None: ...


def open_session(spec: StoreSpec) -> Session:
    """The in-place fix of the store ``spec`` names (the fix's one writing open)."""
    if spec.kind == "file":
        return DirectorySession(spec)
    if spec.kind == "zip":
        return ZipSession(spec)
    if spec.kind == "s3":
        return S3Session(spec)
    raise UsageError(f"unknown storage kind {spec.kind!r}")


def _identity(path: Path, where: str) -> tuple[int, int]:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise StoreError(f"{where}: {exc.strerror or exc}") from exc
    return info.st_dev, info.st_ino


class DirectorySession(Session):
    """The store rebuilt aside from hard links (mode ``a``), edited there, exchanged in."""

    def __init__(self, spec: StoreSpec) -> None:
        self.where = spec.path
        self.real = Path(os.path.realpath(spec.path))
        self.identity = _identity(self.real, self.where)
        store = open_store(spec, "a")
        assert isinstance(store, DirectoryStore)
        self.store = self.directory = store
        if _identity(self.real, self.where) != self.identity:  # swapped while it was copied: a mixed snapshot
            store.abort()
            raise StoreError(f"{self.where}: replaced by another writer while the fix read it; not fixed")

    def apply(self, plan: Plan) -> None:
        edits = {e.key: e for e in plan.edits}
        limit = object_limits(self.store)
        for r in plan.recodes:
            for key in r.chunks:
                data = self.store.get(key, limit(key))
                if data is not None:
                    self._write(key, r.reencode(key, data))
        for key in write_order(plan):
            new = edits[key].new
            if new is None:
                self.store.delete(key)
            else:
                self._write(key, new)

    def _write(self, key: str, data: bytes) -> None:
        """Put one object into the aside tree with the permissions the store gives it: its own when it
        replaces one, else those of its nearest sibling object (never the process umask's)."""
        path = self.directory.root.joinpath(*keys.split(key))
        mode = mode_like(path, self.directory.root)
        self.store.put(key, data)
        if mode is not None:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)

    def commit(self) -> None:
        if _identity(self.real, self.where) != self.identity:
            raise StoreError(f"{self.where}: replaced by another writer (an append or a conversion) since the fix "
                             "read it: its dataset is kept; run nczarr-fix again")
        self.store.commit()
        self.done = True

    def abort(self) -> None:
        self.store.abort()


def mode_like(path: Path, root: Path) -> int | None:
    """The permission bits ``path`` has, or (a new object) those of the first regular file in its
    directory or the nearest one above it inside ``root``; None when there is none."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            return stat.S_IMODE(info.st_mode)
    except FileNotFoundError:
        pass
    folder = path.parent
    while True:
        try:
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    if entry.is_file(follow_symlinks=False) and ".partial" not in entry.name:
                        return stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            pass
        if folder == root or root not in folder.parents:
            return None
        folder = folder.parent


class ZipSession(Session):
    """The zip rewritten through a zip writer (``ZipStore`` mode ``w``, the writers' own open: a
    temporary file beside it, renamed onto it at commit) from the zip as opened after it."""

    def __init__(self, spec: StoreSpec) -> None:
        self.where = spec.path
        writer = open_store(spec, "w", overwrite=True)
        assert isinstance(writer, ZipStore)
        self.writer = writer
        try:
            store = open_store(spec)
        except BaseException:
            with safety.critical():
                writer.abort()
            raise
        assert isinstance(store, ZipStore)
        self.store = self.zip = store
        self.real = Path(os.path.realpath(store.target))
        self.identity = self._opened()
        self.mode = stat.S_IMODE(os.fstat(self._fileno()).st_mode)

    def _fileno(self) -> int:
        fp = self.zip.zf.fp
        assert fp is not None
        return fp.fileno()

    def _opened(self) -> tuple[int, int, int, int]:
        info = os.fstat(self._fileno())
        return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns

    def apply(self, plan: Plan) -> None:
        try:
            _rewrite_zip(self.zip, self.writer.zf, plan)
        except OSError as exc:
            raise StoreError(f"{self.where}: cannot write the fixed zip beside it: {exc.strerror or exc}") from exc

    def commit(self) -> None:
        try:
            info = os.stat(self.real)
        except OSError as exc:
            raise StoreError(f"{self.where}: {exc.strerror or exc}") from exc
        if (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns) != self.identity:
            raise StoreError(f"{self.where}: replaced by another writer since the fix read it: its zip is kept; "
                             "run nczarr-fix again")
        self.writer.commit()
        self.done = True
        self.zip.close()
        with contextlib.suppress(OSError):
            os.chmod(self.real, self.mode)  # the zip keeps its permissions (the writer gives the umask's)

    def abort(self) -> None:
        self.writer.abort()
        self.zip.close()


def _rewrite_zip(source: ZipStore, out: zipfile.ZipFile, plan: Plan) -> None:
    """Every member of ``source`` into ``out`` in its order (entry 0 decides netcdf-c's root): edited
    ones replaced, removed ones left out, unedited ones byte for byte with their names, dates and
    compression; new ones with the permissions of the root's ``.zgroup`` member, last, or (a plan that
    removes members: ``--to-v3``) where the first removed one was, the root's ``zarr.json`` first, so
    that entry 0 still names the dataset's root."""
    new = {e.key: e.new for e in plan.edits}
    recode = {k: r for r in plan.recodes for k in r.chunks}
    prefix = source.prefix.lstrip("/")
    sibling = source.members.get("/.zgroup")
    created = sorted((k for k in write_order(plan) if k not in source.members and new[k] is not None),
                     key=lambda k: k != "/zarr.json")

    def add_created() -> None:
        for key in created:
            member = zipfile.ZipInfo(prefix + key.lstrip("/"), date_time=(1980, 1, 1, 0, 0, 0))
            member.external_attr = sibling.external_attr if sibling is not None else 0o644 << 16
            payload = new[key]
            assert payload is not None  # created holds only keys with new content
            out.writestr(member, payload)
        created.clear()

    limit, other = object_limits(source), max_in_memory_bytes()  # the reader's size rule for each member
    for info in source.zf.infolist():
        key = _member_key(source, info)
        if key is not None:
            if key in new:
                data = new[key]
                if data is not None:
                    out.writestr(_like(info), data)
                else:
                    add_created()
                continue
            if key in recode:
                out.writestr(_like(info), recode[key].reencode(key, source.read_member(info, limit(key))))
                continue
        out.writestr(info, source.read_member(info, limit(key) if key is not None else other))
    add_created()


def _member_key(source: ZipStore, info: zipfile.ZipInfo) -> str | None:
    """The dataset key a member is served under, or None (a folder, a name outside the root, an unsafe name)."""
    prefix = source.prefix.lstrip("/")
    if info.is_dir() or not info.filename.startswith(prefix):
        return None
    try:
        key = keys.join(info.filename[len(prefix):])
    except FormatError:  # a name no reader is served (nczarr-check: NCZ-STORE-UNSAFE): kept as is
        return None
    return key if source.members.get(key) is info else None


def _like(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """A fresh member header with ``info``'s name, date, permissions and compression (sizes recomputed)."""
    out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    out.external_attr = info.external_attr
    out.compress_type = info.compress_type
    return out


class S3Session(Session):
    """The prefix as it is; the edits checked against it again, then PUT in one batch (see the module)."""

    def __init__(self, spec: StoreSpec) -> None:
        self.where = f"s3://{spec.path}"
        self.store = open_store(spec, "u")
        self.plan: Plan | None = None  # (mode u claims the prefix's marker: a live writer's refused there)

    def apply(self, plan: Plan) -> None:
        if plan.recodes:
            raise UsageError("chunks are never rewritten in place on S3; write a fixed copy with --out")
        self.plan = plan

    def commit(self) -> None:
        assert self.plan is not None
        edits = {e.key: e for e in self.plan.edits}
        for edit in self.plan.edits:
            if self.store.get(edit.key) != edit.old:
                raise StoreError(f"{self.where}: {edit.key.lstrip('/')} changed since the fix read it (another "
                                 "writer): kept; run nczarr-fix again")
        done: list[ObjectEdit] = []
        with safety.critical():  # a batch of small PUTs: a signal is honoured after it, never inside
            try:
                for key in write_order(self.plan):
                    _set(self.store, key, edits[key].new)
                    done.append(edits[key])
            except StoreError as exc:
                self._put_back(done, exc)
            self.done = True
        self.store.close()  # the claim goes with the batch in

    def _put_back(self, done: list[ObjectEdit], exc: StoreError) -> None:
        try:
            for edit in reversed(done):
                _set(self.store, edit.key, edit.old)
        except StoreError as again:
            raise PartlyWritten(f"{exc}; {len(done)} of {len(self.plan.edits) if self.plan else 0} objects were "
                                f"rewritten and putting them back failed too ({again})") from exc
        raise StoreError(f"{exc}; nothing was changed (the {len(done)} object(s) already rewritten were put back)") \
            from exc

    def abort(self) -> None:
        self.store.close()


def _set(store: Store, key: str, data: bytes | None) -> None:
    """Write or remove one object now, even after a signal: the commit batch finishes what it began
    (``Store.put`` refuses to write once a signal arrived, which is right everywhere else)."""
    if data is None:
        store._delete(key)
    else:
        store._put(key, data)


# ---- a fixed copy ------------------------------------------------------------------------------
def write_copy(source: Store, out: StoreSpec, plan: Plan) -> None:
    """Write the fixed dataset to a new store ``out``; the input is only read."""
    new = {e.key: e.new for e in plan.edits}
    recode = {k: r for r in plan.recodes for k in r.chunks}
    limit = object_limits(source)  # the reader's size rule: a zip bomb is refused, not inflated whole
    with open_store(out, "w") as store:
        for key in source.list_prefix("/"):
            if key in new:
                continue
            data = source.get(key, limit(key))
            if data is None:
                continue
            store.put(key, recode[key].reencode(key, data) if key in recode else data)
        for key in write_order(plan):
            data = new[key]
            if data is not None:
                store.put(key, data)


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
