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
* Interrupts — the CLIs install :func:`install_signal_handlers`: SIGINT and SIGTERM raise
  :class:`Interrupted` (a KeyboardInterrupt carrying exit code 130/143) *and* set a flag.
  Stores check the flag before every put and at commit, so a signal whose exception was
  swallowed somewhere (a finalizer, a C callback) still aborts the write: never a commit
  after a signal. Commit and abort run in :func:`critical` sections, where a signal is
  recorded instead of raised, so a second Ctrl-C cannot cut a cleanup in half.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from . import keys
from .errors import StoreError, UsageError

META_NAMES = frozenset({".zgroup", ".zattrs", ".zarray", ".zmetadata", ".nczarr"})
ROOT_META = ("/.zmetadata", "/.zgroup", "/.zarray", "/.nczarr", "/.zattrs")  # deleted in this order
S3_MARKER = "/.nczarr-partial"  # an S3 write in progress: {"host": …, "pid": …}
_CHUNK_SEGMENT = re.compile(r"^\d+(\.\d+)*$")
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
        try:
            same = os.path.samefile(src_real, out_real)
        except OSError:
            pass
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
    """(objects of the Zarr v2 dataset rooted at '/', every other object).

    A node is a group (``.zgroup``) or an array (``.zarray``) whose ancestors are all
    groups up to a root group; its objects are its metadata objects and, for an array,
    keys below it made of chunk-index segments (``0.1`` or nested ``0/1``).
    """
    keyset = sorted(set(all_keys))
    groups = {keys.parent(k) for k in keyset if keys.basename(k) == ".zgroup"}
    arrays = {keys.parent(k) for k in keyset if keys.basename(k) == ".zarray"}

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
                    ok = all(_CHUNK_SEGMENT.match(s) for s in segs[i:]) and linked(candidate)
                    break
        (owned if ok else foreign).append(key)
    return owned, foreign


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
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


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


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap the entries ``a`` and ``b``; False when the system cannot."""
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


def swap_in(new: Path, target: Path) -> None:
    """Put the tree ``new`` at ``target`` and remove the old one.

    With RENAME_EXCHANGE a reader sees the old tree or the new one; without it there is
    a moment between two renames when ``target`` is absent (never a mix).
    """
    if exchange(new, target):
        remove_path(new)  # now the old tree
        return
    aside = make_temp_dir(target)
    os.rename(target, aside)  # a directory renamed onto an empty directory replaces it
    os.rename(new, target)
    remove_path(aside)


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
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread and are remembered."""
    global _received
    _received = None
    if threading.current_thread() is not threading.main_thread():
        return
    sys.unraisablehook = _quiet_unraisable
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _handler)


def received() -> int | None:
    """The first signal received since the handlers were installed, if any."""
    return _received


def raise_if_interrupted() -> None:
    if _received is not None:
        raise Interrupted(_received)


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
