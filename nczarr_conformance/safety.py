"""Output safety in one place: what a writer may replace, temporary names, leftovers, interrupts.

Why each piece exists:

* :func:`check_output_is_safe` — ``--overwrite`` removes the old output, so an output that
  equals, contains or lies inside the input would delete the input (symlinks resolved).
* :func:`split_dataset_keys` — a writer replaces only objects that belong to a Zarr v2
  dataset (metadata objects and chunk keys of groups/arrays linked to the root); anything
  else under the target is someone else's and makes ``--overwrite`` refuse.
* :func:`make_temp_dir` / :func:`make_temp_file` — temporary names are random, created
  exclusively (``mkdtemp``/``mkstemp``: ``O_EXCL``, never through a symlink) in the target's
  directory, and carry the writer's PID (``.NAME.partial-PID-RANDOM``) so that the next run
  on the same target can tell a dead run's leftovers (:func:`find_leftovers`) from a live one.
* :func:`exchange` — swaps two directories atomically (Linux ``renameat2(RENAME_EXCHANGE)``)
  so a reader of a directory store sees the old tree or the new one, never neither.
* :func:`hold_writer_lock` — one writer at a time on a directory or zip store: an OS lock
  (``flock``) on ``.NAME.lock`` beside the store, taken before the writer's first byte and
  refused at once (never waited for) with one line naming the holder's PID and command. The
  S3 backend's marker object plays the same part there (stores/s3.py); both go through
  :func:`hold`, which counts holds per store in this process, so a command that locks a store
  before reading it (an append's checks) and the store it then opens for writing share one lock.
* Interrupts — the CLIs install :func:`install_signal_handlers`: SIGINT and SIGTERM raise
  :class:`Interrupted` (a KeyboardInterrupt carrying exit code 130/143) *and* set a flag.
  Stores check the flag before every put and at commit, so a signal whose exception was
  swallowed somewhere (a finalizer, a C callback) still aborts the write: never a commit
  after a signal. Commit and abort run in :func:`critical` sections, where a signal is
  recorded instead of raised, so a second Ctrl-C cannot cut a cleanup in half.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, Self

from nczarr_conformance import keys
from nczarr_conformance.errors import StoreError, UsageError

META_NAMES = frozenset({".zgroup", ".zattrs", ".zarray", ".zmetadata", ".nczarr", "zarr.json"})
ROOT_META = ("/zarr.json", "/.zmetadata", "/.zgroup", "/.zarray", "/.nczarr", "/.zattrs")  # deleted in this order
S3_MARKER = "/.nczarr-partial"  # an S3 writer holds the prefix: {"host", "pid", "command", "mode"}
_CHUNK_SEGMENT = re.compile(r"^\d+(\.\d+)*$")
#: a Zarr v3 chunk key's first segment under its array: ``c`` (``c/0/1``, a scalar's ``c``) or ``c.0.1``
_V3_CHUNK_HEAD = re.compile(r"^c(\.\d+)*$")
_PARTIAL = re.compile(r"\.partial-(\d+)(-[^/]*)?$")


# ---- what an output may replace --------------------------------------------------------
def check_output_is_safe(src: str, dst_kind: str, dst_path: str) -> None:
    """Refuse an output that equals, contains or is inside the input (symlinks resolved)."""
    if dst_kind == "s3":
        return
    src_real = os.path.realpath(src)
    out_real = os.path.realpath(dst_path)
    same = src_real == out_real
    if not same and os.path.exists(out_real):
        with suppress(OSError):
            same = os.path.samefile(src_real, out_real)
    if same:
        raise UsageError(f"{dst_path}: is the input {src}; not written")
    if src_real.startswith(out_real.rstrip(os.sep) + os.sep):
        raise UsageError(f"{dst_path}: holds the input {src}; not replaced")
    if out_real.startswith(src_real.rstrip(os.sep) + os.sep):
        raise UsageError(f"{dst_path}: is inside the input {src}; not written")


def is_dataset_shaped(key: str) -> bool:
    """A metadata object or a chunk key, wherever it is (for a dead writer's leftovers)."""
    segs = keys.split(key)
    return bool(segs) and (segs[-1] in META_NAMES or bool(_CHUNK_SEGMENT.match(segs[-1])) or key == S3_MARKER)


def split_dataset_keys(all_keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """(objects of the Zarr dataset rooted at '/', every other object).

    A node is a group (``.zgroup``) or an array (``.zarray``) whose ancestors are all
    groups up to a root group; its objects are its metadata objects and, for an array,
    keys below it made of chunk-index segments (``0.1`` or nested ``0/1``). A Zarr v3 node
    (``zarr.json``) may be either, which its key does not say: below it, chunk keys of the
    ``default`` encoding (``c/0/1``, ``c.0.1``, a scalar's ``c``) or the ``v2`` one are its own.
    """
    keyset = sorted(set(all_keys))
    v3_nodes = {keys.parent(k) for k in keyset if keys.basename(k) == "zarr.json"}
    groups = {keys.parent(k) for k in keyset if keys.basename(k) == ".zgroup"} | v3_nodes
    arrays = {keys.parent(k) for k in keyset if keys.basename(k) == ".zarray"} | v3_nodes

    def linked(node: str) -> bool:
        while node != "/":
            node = keys.parent(node)
            if node not in groups:
                return False
        return True

    owned: list[str] = []
    foreign: list[str] = []
    for key in keyset:
        segs = keys.split(key)
        node = keys.parent(key)
        ok = False
        if segs and segs[-1] in META_NAMES and (node in groups or node in arrays) and linked(node):
            ok = True
        else:
            for i in range(len(segs) - 1, -1, -1):
                candidate = keys.join(*segs[:i])
                if candidate in arrays:
                    tail = segs[i:]
                    chunk = all(_CHUNK_SEGMENT.match(s) for s in tail) or (
                        candidate in v3_nodes and bool(tail) and bool(_V3_CHUNK_HEAD.match(tail[0]))
                        and all(_CHUNK_SEGMENT.match(s) for s in tail[1:]))
                    ok = chunk and linked(candidate)
                    break
        (owned if ok else foreign).append(key)
    return owned, foreign


def orphan_chunks(all_keys: Iterable[str], zarrays: Mapping[str, Any]) -> list[str]:
    """Chunk objects of the dataset's arrays that lie outside their array's chunk grid.

    ``zarrays`` maps each array (its key) to its parsed ``.zarray`` (or Zarr v3 ``zarr.json``). No reader reads a chunk
    whose index is past ``ceil(shape / chunks)`` along some axis, so such objects (the new
    chunks of an append killed before its metadata went in) are provably not part of the
    dataset. A key this cannot parse against its ``.zarray`` is never called an orphan.
    """
    owned, _ = split_dataset_keys(all_keys)
    out: list[str] = []
    for key in owned:
        segs = keys.split(key)
        for i in range(len(segs) - 1, -1, -1):
            zarray = zarrays.get(keys.join(*segs[:i]))
            if zarray is not None:
                if segs[-1] not in META_NAMES and _outside_grid(segs[i:], zarray):
                    out.append(key)
                break
    return out


def _outside_grid(tail: list[str], zarray: Any) -> bool:
    try:
        if zarray.get("zarr_format") == 3:
            shape, chunks, index = _v3_grid_index(tail, zarray)
        else:
            shape = [int(n) for n in zarray["shape"]]
            chunks = [int(n) for n in zarray["chunks"]]
            separator = zarray.get("dimension_separator") or "."
            parts = tail if separator == "/" else tail[0].split(".") if len(tail) == 1 else []
            index = [int(p) for p in parts]
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    if not shape or len(index) != len(shape) or len(chunks) != len(shape) or min(chunks) <= 0:
        return False
    return any(i >= -(-n // c) for i, n, c in zip(index, shape, chunks, strict=True))


def _v3_grid_index(tail: list[str], meta: Any) -> tuple[list[int], list[int], list[int]]:
    """(shape, chunk shape, the key's chunk index) of a Zarr v3 array's chunk key below it.

    Only the ``regular`` grid and the two chunk key encodings of the v3 core spec: ``default``
    (``c`` then the indices, separator ``/`` unless configured) and ``v2`` (the indices, ``.``
    unless configured). A sharded array's keys name shards: the grid is the outer one. Anything
    else raises ValueError, so the key is never called an orphan.
    """
    if meta.get("node_type") != "array" or meta["chunk_grid"]["name"] != "regular":
        raise ValueError("not a regular v3 grid")
    shape = [int(n) for n in meta["shape"]]
    chunks = [int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"]]
    encoding = meta.get("chunk_key_encoding") or {"name": "default"}
    name = encoding["name"]
    separator = (encoding.get("configuration") or {}).get("separator", "/" if name == "default" else ".")
    parts = tail if separator == "/" else tail[0].split(".") if len(tail) == 1 else []
    if name == "default":
        if not parts or parts[0] != "c":
            raise ValueError("not a default-encoded chunk key")
        parts = parts[1:]
    elif name != "v2":
        raise ValueError(f"chunk key encoding {name!r}")
    return shape, chunks, [int(p) for p in parts]


def refuse_foreign(where: str, all_keys: Iterable[str]) -> list[str]:
    """The dataset's objects under ``where``; refuse when anything else is there."""
    owned, foreign = split_dataset_keys(all_keys)
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise StoreError(f"{where}: holds {foreign[0].lstrip('/')}{more}, which is not part of a Zarr dataset; "
                         "--overwrite replaces only a dataset, not replaced")
    return owned


def directory_keys(root: Path) -> list[str]:
    """Every non-directory entry under ``root`` as a key (symlinks are entries, never followed)."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root).parts
        out.extend(keys.join(*rel, n) for n in filenames)
        out.extend(keys.join(*rel, n) for n in dirnames if os.path.islink(os.path.join(dirpath, n)))
    return out


# ---- temporary names and leftovers ---------------------------------------------------------
def temp_prefix(target: Path) -> str:
    return f".{target.name}.partial-{os.getpid()}-"


def make_temp_dir(target: Path) -> Path:
    """A fresh private directory next to ``target`` (``mkdtemp``: exclusive, random)."""
    try:
        return Path(tempfile.mkdtemp(prefix=temp_prefix(target), dir=target.parent))
    except OSError as exc:
        raise StoreError(f"{target}: cannot create a temporary directory in {target.parent}: {exc.strerror}") from exc


def make_temp_file(target: Path) -> tuple[int, Path]:
    """A fresh file next to ``target`` (``mkstemp``: ``O_EXCL``, never through a symlink)."""
    try:
        fd, name = tempfile.mkstemp(prefix=temp_prefix(target), dir=target.parent)
    except OSError as exc:
        raise StoreError(f"{target}: cannot create a temporary file in {target.parent}: {exc.strerror}") from exc
    return fd, Path(name)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_leftovers(target: str | os.PathLike[str]) -> list[Path]:
    """Temporary siblings of ``target`` left by writers that are no longer running.

    They are named ``.NAME.partial-PID-RANDOM`` (or ``.NAME.partial-PID`` / ``.NAME.old-PID``
    by older versions) in the target's directory; a PID that is alive is a live writer.
    """
    path = Path(os.path.realpath(target))
    parent = path.parent
    if not parent.is_dir():
        return []
    out = []
    pattern = re.compile(re.escape(f".{path.name}.") + r"(?:partial|old)-(\d+)(?:-[^/]*)?$")
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    for name in names:
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            out.append(parent / name)
    return out


def remove_path(path: Path) -> None:
    """Remove a file, a symlink (never what it points to) or a directory tree."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(FileNotFoundError):
            os.unlink(path)


def remove_leftovers(target: str | os.PathLike[str]) -> list[Path]:
    """Remove the leftovers of dead writers on ``target``; return what was removed."""
    found = find_leftovers(target)
    for path in found:
        remove_path(path)
    return found


def umask() -> int:
    """The process umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---- atomic directory swap -----------------------------------------------------------------
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _hostname() -> str:
    """This machine's name, as a lock records it (socket imported here: most commands take no lock)."""
    import socket

    return socket.gethostname()


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the entries ``a`` and ``b``; False when the system cannot."""
    import ctypes  # here: only a replace needs it, and it costs every command's start-up

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (38, 22, 95):  # ENOSYS, EINVAL (filesystem cannot), EOPNOTSUPP
        return False
    raise OSError(err, os.strerror(err), str(b))


def sync_file(path: Path) -> None:
    """Put ``path``'s bytes on disk (fsync) before something that relies on them: a rename over the old
    version, the removal of the old tree. Without it a power cut after the rename can leave the new name
    with an empty or partial file (delayed allocation) and the old one gone."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_directory(path: Path) -> None:
    """Put a directory's entries on disk (fsync of the directory): a rename into it, a file made in it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: files fsynced at once by :func:`sync_tree` where the system has no syncfs (fsync waits on the disk, not the GIL)
SYNC_THREADS = 8


def syncfs(path: Path) -> bool:
    """Linux's syncfs(2) of the file system holding ``path``: all its written data and metadata on disk, at the
    cost of the data not yet written (not of the number of files); False where the system has no syncfs."""
    import ctypes  # here: only a replace needs it, and it costs every command's start-up

    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))  # a write-back error: the new copy is not safe
    finally:
        os.close(fd)
    return True


def sync_tree(root: Path) -> None:
    """Every file and directory below ``root`` on disk, before the old copy it replaces goes.

    One :func:`syncfs` where there is one: an append's tree holds thousands of links to chunks already on
    disk, and an fsync of each cost 0.5 s for 7,300 files here where syncfs took 2 ms. Elsewhere each file
    is fsynced (on :data:`SYNC_THREADS` threads), then each directory after what it holds. Symlinks are not
    followed (a store holds none)."""
    if syncfs(root):
        return
    from concurrent.futures import ThreadPoolExecutor

    files: list[Path] = []
    directories: list[Path] = []
    for dirpath, _, filenames in os.walk(root, topdown=False):
        here = Path(dirpath)
        files += [here / name for name in filenames if not os.path.islink(here / name)]
        directories.append(here)
    if len(files) > 1:
        with ThreadPoolExecutor(min(SYNC_THREADS, len(files))) as pool:
            list(pool.map(sync_file, files))
    elif files:
        sync_file(files[0])
    for directory in directories:
        sync_directory(directory)


def swap_in(new: Path, target: Path) -> None:
    """Put the tree ``new`` at ``target`` and remove the old one.

    With RENAME_EXCHANGE a reader sees the old tree or the new one; without it there is
    a moment between two renames when ``target`` is absent (never a mix). The new tree is on
    disk (:func:`sync_tree`) before the swap, and the swap before the old tree is removed: a
    power cut at any moment leaves one whole tree at ``target``, the old one or the new one.
    """
    sync_tree(new)
    if exchange(new, target):
        sync_directory(target.parent)
        remove_path(new)  # now the old tree
        return
    aside = make_temp_dir(target)
    os.rename(target, aside)  # a directory renamed onto an empty directory replaces it
    os.rename(new, target)
    sync_directory(target.parent)
    remove_path(aside)


def replace_file(new: Path, target: Path) -> None:
    """``os.replace(new, target)`` with ``new`` on disk first and the rename after: the old file is gone
    only once the new one can take its place through a power cut."""
    sync_file(new)
    os.replace(new, target)
    sync_directory(target.parent)


# ---- one writer at a time ----------------------------------------------------------------------
program: str | None = None  # the CLI's name (cli/common.run sets it), for the lock's record of its holder
_HOLDER_WAIT = 0.5  # seconds a refused writer waits for the holder to have written its record


def command_line() -> str:
    """This process's command as a lock record names it: one printable line, at most 300 characters."""
    argv = list(sys.argv) or [""]
    words = [program or os.path.basename(argv[0]) or "python", *(shlex.quote(a) for a in argv[1:])]
    text = "".join(c if c.isprintable() else "?" for c in " ".join(words))
    return text if len(text) <= 300 else text[:297] + "..."


def holder_record(mode: str | None = None) -> dict[str, Any]:
    """What a writer records about itself in its lock file or S3 marker."""
    record: dict[str, Any] = {"host": _hostname(), "pid": os.getpid(), "command": command_line()}
    if mode is not None:
        record["mode"] = mode
    return record


def describe_holder(record: Any) -> str:
    """'PID 1234: nc2nczarr --append …' ('PID 1234 on HOST: …' from another host; 'PID unknown')."""
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return "PID unknown"
    host = record.get("host")
    where = "" if host in (None, _hostname()) else f" on {host}"
    command = record.get("command")
    return f"PID {record['pid']}{where}" + (f": {command}" if isinstance(command, str) and command else "")


def record_is_live(record: Any) -> bool:
    """Whether the writer a record names may still run: another host's always may; one of this host's if
    its PID lives and is not this process (whose own holds :func:`hold` counts); a record without a PID, no."""
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return False
    if record.get("host") != _hostname():
        return True
    return record["pid"] != os.getpid() and pid_alive(record["pid"])


def another_writer(where: str, record: Any, marker: str | None = None) -> StoreError:
    """The refusal a second writer prints: one line naming the first one (and the S3 marker
    object that says so, which a writer on another host left behind must be deleted by hand)."""
    via = f"; its marker {marker}" if marker else ""
    return StoreError(f"{where}: another writer holds it ({describe_holder(record)}{via}); not written")


class WriterLock:
    """One hold on a store's writer lock: ``release()`` it (idempotent), or use it as a context manager.

    Holds are counted per store in this process (see :func:`hold`); the lock itself (the
    OS lock, the S3 marker) goes when the last hold is released.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            _drop(self.key)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


Release = Callable[[], None]  # what lets a taken lock go (unlock and remove the file, delete the marker)


class _Hold:
    def __init__(self, free: Release) -> None:
        self.free = free
        self.count = 0
        self.pid = os.getpid()
        self.thread = threading.get_ident()


_HOLDS: dict[str, _Hold] = {}
_HOLDS_LOCK = threading.RLock()


def hold(key: str, where: str, take: Callable[[], Release]) -> WriterLock:
    """A hold on the lock ``key`` names; the first one in this process calls ``take``.

    ``take`` locks (or raises the refusal) and returns what lets the lock go. Counting holds
    lets a command lock a store before reading it and the store it opens for writing take
    the same lock again, instead of meeting itself as "another writer". Only the thread that
    took the lock shares it: another thread of this process is another writer, refused.
    """
    with _HOLDS_LOCK:
        entry = _HOLDS.get(key)
        if entry is None:
            entry = _Hold(take())
            _HOLDS[key] = entry
        elif entry.thread != threading.get_ident():
            raise another_writer(where, holder_record())
        entry.count += 1
        return WriterLock(key)


def holding(key: str) -> bool:
    """Whether this process holds the lock ``key`` names."""
    with _HOLDS_LOCK:
        return key in _HOLDS


def _drop(key: str) -> None:
    with _HOLDS_LOCK:
        entry = _HOLDS.get(key)
        if entry is None or entry.pid != os.getpid():
            return
        entry.count -= 1
        if entry.count == 0:
            del _HOLDS[key]
            entry.free()


def _forget_holds() -> None:
    """In a forked child: the parent's holds are the parent's to release (the child never unlinks
    the lock file nor deletes the marker); the inherited descriptors are closed, which does not
    unlock (flock belongs to the open file the parent still has)."""
    for entry in _HOLDS.values():
        entry.pid = -1
    _HOLDS.clear()


os.register_at_fork(after_in_child=_forget_holds)


def lock_path(target: str | os.PathLike[str]) -> Path:
    """``.NAME.lock`` beside the store (symlinks resolved): never inside it, where readers list."""
    real = Path(os.path.realpath(target))
    return real.parent / f".{real.name}.lock"


def hold_writer_lock(target: str | os.PathLike[str], where: str) -> WriterLock:
    """Hold the writer lock of the directory or zip store at ``target``, or raise its refusal.

    An exclusive ``flock`` on :func:`lock_path`, tried once (a second writer is refused at
    once, never made to wait), then the holder's host, PID and command written into the file
    for that refusal to name. The kernel lets go of the lock when the holder exits however it
    exits (SIGKILL included), so a dead writer never blocks the next one. The file is removed
    on release while still locked: a writer that opened it meanwhile then finds, once it
    holds the lock, that the path no longer names its file, and tries again on the new one
    (removing it without that check would let two writers lock two different files). A
    killed holder leaves the file; the next writer locks and removes it. Linux and other
    POSIX systems (``flock``; on NFS as far as the server honours locks).
    """
    path = lock_path(target)
    return hold(f"file:{path}", where, lambda: _flock(path, where))


def _flock(path: Path, where: str) -> Release:
    for _ in range(20):  # each retry means a holder released between our open and our lock
        fd = _open_lock_file(path, where)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = _read_record(fd)
            os.close(fd)
            raise another_writer(where, record) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"{where}: cannot lock {path}: {exc.strerror or exc}; not written") from exc
        if _names(path, fd):
            _write_record(fd)
            return lambda: _unlock(path, fd)
        os.close(fd)
    raise StoreError(f"{where}: cannot lock {path}: it keeps being replaced; not written")


def _open_lock_file(path: Path, where: str) -> int:
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        except PermissionError:  # another user's lock file: reading is enough to lock it
            return os.open(path, os.O_RDONLY | flags)
    except OSError as exc:
        reason = "is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise StoreError(f"{where}: cannot open its writer lock {path}: {reason}; not written") from exc


def _names(path: Path, fd: int) -> bool:
    try:
        here, mine = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)


def _write_record(fd: int) -> None:
    data = json.dumps(holder_record()).encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:
        pass  # a lock file opened read-only: the lock holds, the refusal says "PID unknown"


def _read_record(fd: int) -> Any:
    """The holder's record. It writes it just after locking, so an empty one (or a killed
    writer's, still in the file) is waited for a moment, then not named at all."""
    deadline = time.monotonic() + _HOLDER_WAIT
    while True:
        try:
            record = json.loads(os.pread(fd, 4096, 0) or b"null")
        except (OSError, ValueError):
            record = None
        if record_is_live(record):
            return record
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def _unlock(path: Path, fd: int) -> None:
    try:
        if _names(path, fd):  # never another writer's file (ours removed by hand and made anew)
            os.unlink(path)
    except OSError:
        pass  # a lock file left is harmless: the next writer locks it and removes it
    finally:
        os.close(fd)  # the lock goes with the last descriptor


# ---- interrupts ------------------------------------------------------------------------------
class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM: the CLI exits 128 + signal number (130, 143)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum

    def __str__(self) -> str:
        return "interrupted" if self.signum == signal.SIGINT else f"terminated by {signal.Signals(self.signum).name}"


_received: int | None = None
_defer = 0


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum
    if _defer == 0:
        raise Interrupted(signum)


def _quiet_unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """An :class:`Interrupted` raised where Python cannot propagate it (a weakref callback or
    ``__del__`` running when the signal arrived) is dropped silently: the signal is remembered
    and :func:`raise_if_interrupted` (every store put, the CLI's exit) raises it again, so the
    user still sees one line, not "Exception ignored in ..." plus a traceback."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    sys.__unraisablehook__(unraisable)


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread and are remembered.

    A command starts raising again even if an earlier one in this process (a test calling
    ``main()``) ended with :func:`stop_raising`.
    """
    global _received, _defer
    _received = None
    if threading.current_thread() is not threading.main_thread():
        return
    _defer = 0
    sys.unraisablehook = _quiet_unraisable
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _handler)


_IGNORE_AT_EXIT = False


def _ignore_signals_at_exit() -> None:
    """At interpreter exit, SIGINT and SIGTERM are ignored: a command's outcome is decided and printed, and
    Python's finalization puts a handler it installed back to the default action, so a Ctrl-C landing then
    killed the process by the signal (exit -2, nothing printed) after it had reported success. An ignored
    signal is left ignored by finalization."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def ignore_signals_at_exit() -> None:
    """Register :func:`_ignore_signals_at_exit` once per process (every command calls this as it starts)."""
    global _IGNORE_AT_EXIT
    if not _IGNORE_AT_EXIT:
        import atexit

        atexit.register(_ignore_signals_at_exit)
        _IGNORE_AT_EXIT = True


def stop_raising() -> None:
    """From now on a signal is only recorded (a command's outcome is decided and being reported)."""
    global _defer
    if threading.current_thread() is threading.main_thread():
        _defer += 1


def received() -> int | None:
    """The first signal received since the handlers were installed, if any."""
    return _received


def raise_if_interrupted() -> None:
    if _received is not None:
        raise Interrupted(_received)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside a :func:`critical` block, a stretch a signal may end after all (the main thread only).

    Opening a store for writing is critical (its temporary must not be left unowned), but an S3
    writer first lists the prefix and reads a marker: nothing is owned yet, and a stalled endpoint held
    Ctrl-C for botocore's timeouts and retries (minutes). A signal recorded meanwhile is raised on entry.
    """
    global _defer
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held, _defer = _defer, 0
    try:
        raise_if_interrupted()
        yield
    finally:
        _defer = held


@contextmanager
def critical() -> Iterator[None]:
    """A signal during the block is recorded, not raised (the main thread runs handlers)."""
    global _defer
    main = threading.current_thread() is threading.main_thread()
    if main:
        _defer += 1
    try:
        yield
    finally:
        if main:
            _defer -= 1
