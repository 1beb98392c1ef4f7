"""Directory tree backend: one file per object, like netcdf-c's ``mode=…,file``.

A store opened for writing builds the tree aside, under a private hidden sibling
``.<name>.partial-<pid>-<random>`` (``mkdtemp``: created exclusively, never through a
symlink), and swaps it onto the target at ``commit()`` with one atomic exchange
(``renameat2``), so a reader sees the old dataset or the new one, never a half-written
one. Appending builds the new tree the same way from hard links to the old objects
(cheap, and the old files are never written: every put is a new file renamed into
place). ``--overwrite`` replaces only a directory that holds nothing but a dataset.
Leftovers of dead writers on the same target are removed when a writer opens.
One writer at a time: every writing mode holds the store's writer lock (``.NAME.lock``
beside it, :func:`safety.hold_writer_lock`) from opening until commit or abort; a second
writer is refused at once, naming the first one's PID and command.
Mode ``u`` (nczarr-fix's in-place metadata update) writes into the live tree, each object
through a temporary file renamed over it: atomic per object, no transaction.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import StoreError
from nczarr_conformance.stores.base import READ_PIECE, Pin, Store, fd_name, read_extent, replaced, resolve_range
from nczarr_conformance.stores.sniff import special_kind


class DirectoryStore(Store):
    kind = "file"
    _hold: safety.WriterLock | None = None  # the writer lock, while a writing mode is open

    def __init__(self, path: str | os.PathLike[str], mode: str = "r", overwrite: bool = False) -> None:
        super().__init__()
        self._made: set[Path] = set()  # directories already created under the tree being written
        self.target = Path(path)
        self.mode = mode
        self.overwrite = overwrite
        self._root_fd: int | None = None
        if mode == "r":
            if not self.target.is_dir():
                reason = "not a directory" if self.target.exists() else "no such file or directory"
                raise StoreError(f"{self.target}: {reason}")
            self.root = self.target
            self._pin_generation()
        elif mode == "w":
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            self._open_locked("w")
        elif mode == "a":
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            self._open_locked("a")
        elif mode == "u":  # update in place (nczarr-fix): each put replaces one object atomically; no transaction
            self.writable = True
            self._real = Path(os.path.realpath(self.target))
            self._open_locked("u")
        else:
            raise ValueError(f"bad mode {mode!r}")

    def _pin_generation(self) -> None:
        """Hold the tree this reader opened by a descriptor and read every object relative to it.

        A writer replaces a directory store by swapping a whole new tree in (``safety.swap_in``)
        and then deleting the old one. Reading by path would, after the swap, take the new
        tree's chunks under the old tree's metadata: two datasets mixed, no error. Reading
        relative to the opened root keeps every object of the old tree that still exists; an
        object found missing is checked against the target (:meth:`_check_generation`), so a
        chunk deleted with the old tree raises one clear error instead of reading as fill.
        """
        try:
            fd = os.open(self.target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise StoreError(f"{self.target}: {exc.strerror}") from exc
        self._root_fd = fd
        opened = os.fstat(fd)
        self._root_id = _identity(opened)
        self._pin: Pin = ("file", opened.st_ino, opened.st_ctime_ns)
        self._finalizer = weakref.finalize(self, os.close, fd)

    def pin(self) -> Pin | None:
        """The opened tree's inode and change time: another process (a dask worker) cannot share the
        descriptor, so it opens the path again and checks that the tree there is this one (:meth:`hold_to`).

        Not the device: a shared file system is mounted under another device number on every
        machine of a cluster, while its inode numbers and times are the server's. The change time
        tells apart a new tree that reuses a deleted one's inode; it also moves when something
        renames an object into the root in place (``nczarr-fix``), which a worker then refuses
        rather than read under metadata the client read before the fix.
        """
        return self._pin if self._root_fd is not None else None

    def hold_to(self, pin: Pin | None) -> None:
        if pin is not None and pin != self.pin():
            raise replaced(str(self.target), "the tree another process opened is no longer the one at this path")

    def _check_generation(self, key: str) -> None:
        """Raise when the tree this reader opened is no longer the one at the target.

        Called when an object is missing: in the dataset opened it may be a never-written
        chunk (read as fill), or one a writer that swapped a new tree in has deleted since.
        """
        if self._root_fd is None:
            return
        try:
            current = _identity(os.stat(self.target))
        except OSError:
            current = None
        if current != self._root_id:
            raise StoreError(f"{self.target}: replaced by another writer while being read ({key.lstrip('/')} of the "
                             "dataset opened is gone); nothing mixed was returned, open it again")

    def close(self) -> None:
        """Release the descriptor a reader holds on the tree it opened."""
        if self._root_fd is not None:
            self._finalizer()
            self._root_fd = None

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*keys.split(key))

    @contextlib.contextmanager
    def _regular_file(self, key: str) -> Iterator[tuple[int, os.stat_result] | None]:
        """The object's file descriptor and status, opened through no symlink and only if it is a regular file;
        None when there is no object (nothing there, or a directory: the key names a group's folder).

        Each path component is opened relative to the previous one with O_NOFOLLOW, so a symlink anywhere
        below the root (to a file outside the store, to /dev/zero) is refused rather than followed;
        O_NONBLOCK keeps a FIFO from blocking the open, and fstat refuses anything but a regular file before
        a byte is read. A missing object checks that the store was not replaced meanwhile."""
        try:
            fd = _open_inside(self.root, keys.split(key), root_fd=self._root_fd)
        except OSError as exc:
            raise StoreError(f"{self._path(key)}: {_why(exc)}") from exc
        if fd is None:
            self._check_generation(key)
            yield None
            return
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                self._check_generation(key)
                yield None
                return
            if not stat.S_ISREG(info.st_mode):
                raise StoreError(f"{self._path(key)}: {special_kind(info.st_mode)}, not a regular file; refused")
            yield fd, info
        except OSError as exc:
            raise StoreError(f"{self._path(key)}: {exc.strerror}") from exc
        finally:
            os.close(fd)

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        """Read from a regular file inside the store (:meth:`_regular_file`), at most ``limit`` bytes."""
        limit = sys.maxsize if limit is None else limit
        with self._regular_file(key) as opened:
            if opened is None:
                return None
            return b"".join(self._pieces(key, *opened, limit, 1 << 26))

    def _read_pieces(self, key: str, limit: int, consume: Callable[[Any], None], whole: bool = False) -> bool:
        """The file read :data:`READ_PIECE` bytes at a time through the same open as :meth:`_get`, each piece
        handed on before the next is read: a chunk inflated as it is read never sits whole in memory."""
        with self._regular_file(key) as opened:
            if opened is None:
                return False
            for piece in self._pieces(key, *opened, limit, READ_PIECE):
                consume(piece)
            return True

    def _pieces(self, key: str, fd: int, info: os.stat_result, limit: int, most: int) -> Iterator[bytes]:
        """The open file's bytes, ``most`` at a time, refused past ``limit`` by its size, or as it grows while
        read (one byte past the size is asked for, so growth is seen)."""
        if info.st_size > limit:
            raise limits.too_big(str(self._path(key)), info.st_size, limit)
        total = 0
        while piece := os.read(fd, min(most, limit + 1 - total, max(info.st_size - total, 0) + 1)):
            total += len(piece)
            if total > limit:  # it grew while we read
                raise limits.too_big(str(self._path(key)), None, limit)
            yield piece

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """Ranged read (pread) through the same no-symlink, regular-file-only open as :meth:`_get`."""
        with self._regular_file(key) as opened:
            if opened is None:
                return None
            fd, info = opened
            first, count = resolve_range(info.st_size, start, length)
            return os.pread(fd, count, first) if count else b"", info.st_size

    def _put(self, key: str, data: bytes) -> None:
        self._write(key, data)

    def _put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        """The chunk copied file to file in the kernel (``copy_file_range``), never through Python."""
        self._write(key, Extent(fd, offset, size))

    def _write(self, key: str, data: bytes | Extent) -> None:
        path = self._path(key)
        try:
            if path.parent not in self._made:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(path.parent)
            mode = 0o666 & ~self._umask
            if self.mode == "u" and os.path.isfile(path):  # a replaced object keeps its permissions
                mode = stat.S_IMODE(os.lstat(path).st_mode)
            # A fresh write builds a private tree (mkdtemp, mode 0700) that is swapped in whole at
            # commit and removed whole on abort, so an object is written in place: no temporary
            # file and rename per chunk (the cost of many small chunks).
            write_object(path, data, mode, in_place=self.mode == "w", durable=self.mode == "u")
        except OSError as exc:
            raise StoreError(f"{self.target}: cannot write {key.lstrip('/')}: {exc.strerror or exc}") from exc

    def _delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        """Objects under ``prefix``; a symlinked directory is never entered (a symlinked file is
        listed, and refused when read, so nczarr-check names it). A reader lists the tree it
        opened (relative to its root descriptor), as it reads it."""
        rel_parts = keys.split(prefix)
        try:
            fd = _open_inside(self.root, rel_parts, directory=True, root_fd=self._root_fd)
        except OSError:
            return  # a symlink or something else than a directory: nothing listed under it
        if fd is None:
            return
        try:
            for dirpath, _dirnames, filenames, _dirfd in os.fwalk(".", dir_fd=fd):
                rel = [*rel_parts, *Path(dirpath).parts]  # fwalk names them "./a/b"; Path drops the "."
                for name in filenames:
                    if name.endswith(".partial"):
                        continue
                    yield keys.join(*rel, name)
        finally:
            os.close(fd)

    def commit(self) -> None:
        try:
            self._commit()
        finally:
            self._release()

    def _commit(self) -> None:
        if self.mode not in ("w", "a"):
            return
        self._quiesce()
        with safety.critical():
            try:
                safety.raise_if_interrupted()
            except BaseException:
                self._remove_tree()
                raise
            try:
                if self.mode == "w":  # mkdtemp made it private; an append keeps the old tree's mode
                    os.chmod(self.root, 0o777 & ~self._umask)
                if self.mode == "a" or os.path.lexists(self._real):
                    if self.mode == "w" and not self.overwrite:
                        raise StoreError(f"{self.target}: appeared while writing; not replaced")
                    safety.swap_in(self.root, self._real)
                else:
                    os.rename(self.root, self._real)
            except OSError as exc:
                self._remove_tree()
                raise StoreError(f"{self.target}: cannot put the new dataset in place: {exc.strerror or exc}") from exc
            except BaseException:
                self._remove_tree()
                raise
            self.mode = "done"

    def _remove_tree(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.mode = "done"

    def abort(self) -> None:
        try:
            if self.mode in ("w", "a"):
                self._quiesce()
                with safety.critical():
                    self._remove_tree()
        finally:
            self._release()

    def _open_locked(self, mode: str) -> None:
        """Take the writer lock, then open (leftovers are removed, and the store read, only under it)."""
        if not self._real.parent.is_dir():
            raise StoreError(f"{self.target.parent}: no such directory")
        self._hold = safety.hold_writer_lock(self._real, str(self.target))
        try:
            {"w": self._open_new, "a": self._open_append, "u": self._open_update}[mode]()
        except BaseException:
            self._release()
            raise

    def _open_new(self) -> None:
        if os.path.lexists(self.target):
            if not self.overwrite:
                raise StoreError(f"{self.target}: exists (use --overwrite to replace it)")
            if not self._real.is_dir():
                raise StoreError(f"{self.target}: not a directory; --overwrite replaces only a dataset directory")
            safety.refuse_foreign(str(self.target), safety.directory_keys(self._real))
        safety.remove_leftovers(self._real)
        self._umask = safety.umask()
        self.root = safety.make_temp_dir(self._real)

    def _open_append(self) -> None:
        if not self._real.is_dir():
            raise StoreError(f"{self.target}: no such directory")
        safety.remove_leftovers(self._real)
        _refuse_symlinks(self._real, self.target)
        self._umask = safety.umask()
        self.root = safety.make_temp_dir(self._real)
        try:
            shutil.copytree(self._real, self.root, symlinks=True, copy_function=_link_or_copy, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            shutil.rmtree(self.root, ignore_errors=True)
            raise StoreError(f"{self.target}: cannot prepare the append: {exc}") from exc

    def _open_update(self) -> None:
        if not self.target.is_dir():
            raise StoreError(f"{self.target}: no such directory")
        self._umask = safety.umask()
        self.root = self.target

    def _release(self) -> None:
        """Let the writer lock go (once): after the commit or the abort, or a failed open."""
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    def __repr__(self) -> str:
        return f"DirectoryStore('file://{self.target.resolve()}')"


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _open_inside(root: Path, parts: list[str], *, directory: bool = False, root_fd: int | None = None) -> int | None:
    """A descriptor for ``root/parts…`` opened one component at a time with O_NOFOLLOW.

    None when a component is missing or is a file where a directory is needed (a missing
    key); OSError (ELOOP) when a component is a symlink. The root itself may be a symlink:
    the user named it. ``root_fd``, when given, is the root already opened (a reader's
    pinned tree), used instead of looking ``root`` up again.
    """
    current = (os.dup(root_fd) if root_fd is not None
               else os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = _DIR_FLAGS if (not last or directory) else _READ_FLAGS
            try:
                nxt = os.open(part, flags, dir_fd=current)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                # O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR: tell a symlink from a file
                if stat.S_ISLNK(os.lstat(part, dir_fd=current).st_mode):
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), part) from exc
                return None
            # swap before closing: a signal's exception raised as os.close returns must find ``current``
            # already the open ``nxt``, or the finally below closes the closed descriptor again (EBADF, which
            # replaced the Interrupted: "…/c/N: Bad file descriptor", exit 2, instead of exit 143)
            previous, current = current, nxt
            os.close(previous)
        result, current = current, -1
        return result
    finally:
        if current >= 0:
            os.close(current)


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return (f"{exc.filename or 'a path component'} is a symbolic link; "
                "objects must be regular files inside the store")
    return exc.strerror or str(exc)


def _refuse_symlinks(real: Path, named: Path) -> None:
    """StoreError naming the first symbolic link inside the store (``named`` is the path as the user gave it).

    Every reader here opens objects with O_NOFOLLOW and refuses a link, and a copy (``nczarr-fix --out``)
    refuses it too; an update built aside (in-place fix, ``--to-v3``, ``--append``) copied links as links, so
    it kept objects no reader of ours reads, or pointing out of the store. Refused before anything is written.
    """
    for dirpath, dirnames, filenames in os.walk(real):  # os.walk never descends into a linked directory
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                raise StoreError(f"{named / os.path.relpath(path, real)}: {name} is a symbolic link; objects must "
                                 "be regular files inside the store")


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link an old object into the new tree (a copy where links are impossible)."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


class Extent(NamedTuple):
    """``size`` bytes of the open file ``fd`` from ``offset``: an object copied from another file as-is."""

    fd: int
    offset: int
    size: int


#: errors of copy_file_range that mean "not here" (another file system on older kernels, a file system or
#: kernel without it, a seccomp filter): the bytes then go through read and write
_NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM, errno.ENOTSUP}


def copy_extent(src: Extent, out: int) -> None:
    """Copy ``src`` into the fresh file ``out`` in the kernel, or through Python where the kernel refuses.

    ``copy_file_range`` is what ``cp`` uses: no copy into user space, and a reflink where the file system
    shares blocks. It may copy less than asked (a signal, a length limit): it is called until done; 0
    before the end means the source is shorter than its chunk index says (StoreError, as ``read_extent``).
    """
    done = 0
    copy = getattr(os, "copy_file_range", None)
    while copy is not None and done < src.size:
        try:
            n = copy(src.fd, out, src.size - done, src.offset + done)
        except OSError as exc:
            if exc.errno not in _NO_KERNEL_COPY or done:
                raise
            break
        if n == 0:
            raise StoreError(f"{fd_name(src.fd)}: truncated: chunk at {src.offset} has {done} of {src.size} bytes")
        done += n
    if done < src.size:
        _write_all(out, read_extent(src.fd, src.offset, src.size))


def _write_all(out: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def _fill(out: int, data: bytes | Extent) -> None:
    if isinstance(data, Extent):
        copy_extent(data, out)
    else:
        _write_all(out, data)


def write_object(path: Path, data: bytes | Extent, mode: int, *, in_place: bool, durable: bool = False) -> None:
    """Write one object file, never through a symlink (O_NOFOLLOW, mkstemp).

    ``in_place`` inside a private tree nobody reads yet; otherwise (an append's or a fix's tree,
    whose files may be hard links to the live store's) into a temporary file renamed over the
    object, so a reader sees the old bytes or the new ones and a linked file is never written into.
    ``data`` an :class:`Extent`: the bytes are copied from that file (:func:`copy_extent`).
    ``durable`` (a fix in place, whose rename drops the user's only copy of the object): the new bytes
    are on disk (fsync) before the rename, and the rename before the call returns. A staged tree's
    objects are synced together when the tree is swapped in (safety.swap_in).
    """
    if in_place:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            _fill(fd, data)
        finally:
            os.close(fd)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        try:
            os.fchmod(fd, mode)
            _fill(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            safety.sync_directory(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
