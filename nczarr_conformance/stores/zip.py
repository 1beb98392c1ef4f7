"""Zip file backend (netcdf-c's ``mode=…,zip``), read or write-once.

netcdf-c puts the dataset under a top-level folder named after the zip file
without its ``.zip`` suffix (``x.zip`` holds ``x/.zgroup``); zarr-python's
ZipStore puts it at the top. Reading finds either; writing uses netcdf-c's
layout so that netcdf-c built with libzip reads what we write. Nothing is ever
extracted: members are read into memory one at a time, and member names with
``..``, absolute paths or backslashes are never served.

Writing goes to a private temporary file next to the target,
``.<name>.partial-<pid>-<random>`` (``mkstemp``: ``O_EXCL``, never through a symlink),
renamed onto the target at ``commit()``: a reader sees the old zip or the new one.
``--overwrite`` replaces only a zip file. Leftovers of dead writers are removed on open.
One writer at a time: a writer holds the store's writer lock (``.NAME.lock`` beside it,
:func:`safety.hold_writer_lock`) from opening until commit or abort; an append (a rewrite)
takes it before reading the old zip (``stores.lock_for_writing``).
"""
from __future__ import annotations

import os
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import FormatError, StoreError
from nczarr_conformance.stores.base import Pin, Store, replaced, resolve_range

ROOT_MARKERS = (".zgroup", ".zarray", ".zmetadata", ".nczarr", "zarr.json")


def dataset_folder(path: str | os.PathLike[str]) -> str:
    """The folder netcdf-c uses inside a zip: the file name minus ``.zip``."""
    name = Path(path).name
    return name[:-4] if name.lower().endswith(".zip") else name


class ZipStore(Store):
    kind = "zip"
    supports_deletes = False
    _hold: safety.WriterLock | None = None  # the writer lock, while open for writing

    def __init__(self, path: str | os.PathLike[str], mode: str = "r", overwrite: bool = False) -> None:
        super().__init__()
        self.target = Path(path)
        self.mode = mode
        self.overwrite = overwrite
        self._lock = threading.RLock()
        self.unsafe_members: list[str] = []
        if mode == "r":
            self._open_read()
        elif mode == "w":
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            if not self._real.parent.is_dir():
                raise StoreError(f"{self.target.parent}: no such directory")
            self._hold = safety.hold_writer_lock(self._real, str(self.target))
            try:  # leftovers are removed only under the lock
                self._open_write(overwrite)
            except BaseException:
                self._release()
                raise
        else:
            raise ValueError(f"bad mode {mode!r}")

    def _open_write(self, overwrite: bool) -> None:
        if os.path.lexists(self.target):
            if not overwrite:
                raise StoreError(f"{self.target}: exists (use --overwrite to replace it)")
            if not self._real.is_file() or not zipfile.is_zipfile(self._real):
                raise StoreError(f"{self.target}: not a zip file; --overwrite replaces only a zip store")
        safety.remove_leftovers(self._real)
        self._umask = safety.umask()
        self.prefix = dataset_folder(self.target) + "/"
        fd, self.tmp = safety.make_temp_file(self._real)
        self.zf = zipfile.ZipFile(os.fdopen(fd, "w+b"), "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._written: set[str] = set()

    def _release(self) -> None:
        """Let the writer lock go (once): after the commit or the abort, or a failed open."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    def _open_read(self) -> None:
        if not self.target.is_file():
            reason = "is a directory, not a zip file" if self.target.is_dir() else "no such file or directory"
            raise StoreError(f"{self.target}: {reason}")
        try:
            self.zf = zipfile.ZipFile(self.target, "r")
        except zipfile.BadZipFile as exc:
            raise FormatError(f"{self.target}: not a zip file ({exc})") from exc
        except OSError as exc:
            raise StoreError(f"{self.target}: {exc.strerror}") from exc
        assert self.zf.fp is not None  # opened by path: zipfile holds the file
        opened = os.fstat(self.zf.fp.fileno())
        self._pin: Pin = ("zip", opened.st_ino, opened.st_size, opened.st_mtime_ns)
        self.members: dict[str, zipfile.ZipInfo] = {}
        names = []
        for info in self.zf.infolist():
            if info.is_dir():
                continue
            name = info.filename
            try:
                key = keys.validate(name)
            except FormatError:
                self.unsafe_members.append(name)
                continue
            if name.startswith("/"):
                self.unsafe_members.append(name)
                continue
            names.append((key, info))
        infos = self.zf.infolist()
        root = self._root_of_entry0(infos[0].filename) if infos else None
        present = {key for key, _ in names}
        if "/zarr.json" in present:
            root = "/"  # a Zarr v3 root at the top: zarr-python's ZipStore opens it there, in any entry order
        elif root not in (None, "/") and f"{root}.zgroup" not in present and "/.zgroup" in present:
            # entry 0 in a folder that is no group (an array's chunk, as a zip written at the top by nc2nczarr --for
            # xarray may start): the group at the top is the root, where zarr-python's ZipStore finds it
            root = "/"
        self.prefix = root if root is not None else self._find_root([k for k, _ in names])
        for key, info in names:
            if key.startswith(self.prefix):
                self.members[keys.join(key[len(self.prefix):])] = info

    @staticmethod
    def _root_of_entry0(name: str) -> str | None:
        """netcdf-c's rule (``zmap_zip.c``): the dataset root is the first segment of entry 0.

        Entry 0 at the top level (``.zgroup``, as zarr-python's ZipStore writes) puts the root
        at the top, even when the zip also holds a folder; ``x/`` or ``x/.zgroup`` puts it in
        ``x/``. None when entry 0 is not a safe name (the marker rule then decides). The rule
        predates Zarr v3 (no released netcdf-c reads v3): a top-level ``zarr.json`` is the root
        wherever entry 0 is, since our v3 writer, like zarr-python's, writes the root last.
        """
        if name.startswith("/") or "\\" in name:
            return None
        segs = name.split("/")
        if any(s in ("", ".", "..") for s in segs[:-1]) or (len(segs) == 1 and segs[0] in ("", ".", "..")):
            return None
        return "/" if len(segs) == 1 else "/" + segs[0] + "/"

    @staticmethod
    def _find_root(all_keys: list[str]) -> str:
        """The shallowest folder holding a Zarr marker: the fallback when entry 0 cannot decide."""
        best: tuple[int, str] | None = None
        for key in all_keys:
            segs = keys.split(key)
            if segs and segs[-1] in ROOT_MARKERS:
                candidate = (len(segs), "/" + "/".join(segs[:-1]))
                if best is None or candidate < best:
                    best = candidate
        if best is None:
            return "/"
        return best[1].rstrip("/") + "/"

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        """A member's bytes, refused before inflating if its declared size is over ``limit``
        and stopped at ``limit`` if it inflates past what it declared."""
        limit = sys.maxsize if limit is None else limit
        if self.mode == "w":
            raise StoreError(f"{self!r} is write-only until committed")
        info = self.members.get(key)
        if info is None:
            return None
        return self.read_member(info, limit)

    def read_member(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        """Any member's bytes (one outside the dataset's folder too, for a rewrite that keeps it), refused
        before inflating if its declared size is over ``limit`` and stopped at ``limit`` if it inflates past
        what it declared."""
        where = f"{self.target}: member {info.filename}"
        if info.file_size > limit:
            raise limits.too_big(where, info.file_size, limit)
        with self._lock:
            try:
                with self.zf.open(info) as member:
                    pieces: list[bytes] = []
                    total = 0
                    while total <= limit:
                        piece = member.read(min(limit + 1 - total, 1 << 24))
                        if not piece:
                            break
                        pieces.append(piece)
                        total += len(piece)
            except (zipfile.BadZipFile, OSError, NotImplementedError, EOFError, RuntimeError) as exc:
                raise FormatError(f"{where}: {exc}") from exc
        if total > limit:
            raise limits.too_big(where, None, limit)
        return b"".join(pieces)

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """Ranged read of a member (a stored member seeks; a deflated one is inflated up to the range only)."""
        if self.mode == "w":
            raise StoreError(f"{self!r} is write-only until committed")
        info = self.members.get(key)
        if info is None:
            return None
        first, count = resolve_range(info.file_size, start, length)
        with self._lock:
            try:
                with self.zf.open(info) as member:
                    member.seek(first)
                    data = member.read(count)
            except (zipfile.BadZipFile, OSError, NotImplementedError, EOFError, RuntimeError) as exc:
                raise FormatError(f"{self.target}: member {info.filename}: {exc}") from exc
        return data, info.file_size

    def entries_at_top(self) -> None:
        """Write the dataset at the top of the zip, as zarr-python's ZipStore does (Zarr v3: no netcdf-c reads
        it, and zarr-python opens a zip's root only). Before any put."""
        if self._written:
            raise StoreError(f"{self!r}: the layout is chosen before the first entry")
        self.prefix = ""

    def _put(self, key: str, data: bytes) -> None:
        with self._lock:
            if key in self._written:
                raise StoreError(f"{self!r}: {key} written twice (zip is write-once)")
            self._written.add(key)
            info = zipfile.ZipInfo(self.prefix + key.lstrip("/"), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_STORED
            try:  # a signal inside writestr would leave zipfile's writing handle open: the abort could then
                with safety.critical():  # not close the zip and its __del__ printed a traceback at exit
                    self.zf.writestr(info, data)
            except OSError as exc:
                raise StoreError(f"{self.target}: cannot write {key.lstrip('/')}: {exc.strerror or exc}") from exc

    def _delete(self, key: str) -> None:
        raise StoreError(f"{self!r} cannot delete objects")

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = prefix.rstrip("/") + "/"
        source = self._written if self.mode == "w" else self.members
        return (k for k in list(source) if k.startswith(p))

    def commit(self) -> None:
        try:
            self._commit()
        finally:
            self._release()

    def _commit(self) -> None:
        if self.mode != "w":
            return
        self._quiesce()
        with safety.critical(), self._lock:
            try:
                safety.raise_if_interrupted()
                fh = self.zf.fp
                self.zf.close()
                if fh is not None:
                    fh.close()
                if os.path.lexists(self.target) and not self.overwrite:
                    raise StoreError(f"{self.target}: appeared while writing; not replaced")
                os.chmod(self.tmp, 0o666 & ~self._umask)
                if os.path.lexists(self._real):  # the old zip goes: the new one on disk first
                    safety.replace_file(self.tmp, self._real)
                else:
                    os.replace(self.tmp, self._real)
            except OSError as exc:
                self.tmp.unlink(missing_ok=True)
                self.mode = "done"
                raise StoreError(f"{self.target}: cannot write the zip file: {exc.strerror or exc}") from exc
            except BaseException:
                self.tmp.unlink(missing_ok=True)
                self.mode = "done"
                raise
            self.mode = "done"

    def abort(self) -> None:
        try:
            self._abort()
        finally:
            self._release()

    def _abort(self) -> None:
        if self.mode == "w":
            self._quiesce()
            with safety.critical(), self._lock:
                try:
                    fh = self.zf.fp
                    self.zf.close()
                    if fh is not None:
                        fh.close()
                except (OSError, ValueError):
                    pass
                finally:
                    self.tmp.unlink(missing_ok=True)
                    self.mode = "done"

    def pin(self) -> Pin | None:
        """The opened file's inode, size and modification time: a reader here keeps reading the file
        it holds open after a writer renamed a new one over it, but another process (a dask worker)
        opens the path again and must find this very file (:meth:`hold_to`). Not the device: a shared
        file system has another device number on every machine that mounts it.
        """
        return self._pin if self.mode == "r" else None

    def hold_to(self, pin: Pin | None) -> None:
        if pin is not None and pin != self.pin():
            raise replaced(str(self.target), "the zip file another process opened is no longer the one at this path")

    def close(self) -> None:
        if self.mode == "r":
            self.zf.close()

    def __repr__(self) -> str:
        return f"ZipStore('file://{self.target.resolve()}')"
