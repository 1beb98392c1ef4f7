"""The one small key→bytes interface every backend implements (netcdf-c's zmap).

Keys are zmap keys (absolute, '/'-separated, relative to the dataset root).
A missing key is ``None``, never an exception. Every read is bounded: ``get``
takes a byte limit (metadata objects are capped by default, see
:mod:`nczarr_conformance.limits`) and an object larger than it is a
:class:`~nczarr_conformance.limits.LimitError` raised before it is held in memory. Writes are transactional: a
store opened for writing becomes visible at its target only on ``commit()``;
``abort()`` leaves nothing behind. ``abort()`` first waits for puts in flight in
worker threads (and refuses new ones), so it never removes a tree while a worker
is still writing into it; a put after an interrupt signal raises instead of writing.
"""
from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, Self

from nczarr_conformance import keys, limits, safety
from nczarr_conformance.errors import StoreError

#: What names the dataset a read store opened, as another process can check it (:meth:`Store.pin`):
#: a tuple of plain values, small, picklable and hashable (xarray's file cache keys on it).
Pin = tuple[Hashable, ...]


#: bytes a local store reads at a time for :meth:`Store.read_pieces`
READ_PIECE = 1 << 20


class RestartRead(Exception):
    """:meth:`Store.read_pieces` stopped after handing over pieces that are now void (a remote body cut
    short): whatever the consumer did with them is to be undone by reading the object whole."""


def replaced(where: str, what: str) -> StoreError:
    """The one line every reader raises when the dataset it opened is no longer the one at ``where``."""
    return StoreError(f"{where}: replaced by another writer while being read ({what}); nothing mixed was returned, "
                      "open it again")


def resolve_range(size: int, start: int, length: int) -> tuple[int, int]:
    """(first byte, byte count) of ``length`` bytes from ``start`` (negative: from the end) in an
    object of ``size`` bytes, clipped to the object."""
    first = max(size + start, 0) if start < 0 else min(start, size)
    return first, max(0, min(length, size - first))


def slice_range(data: bytes, start: int, length: int) -> bytes:
    """The bytes :func:`resolve_range` names, out of an object held whole."""
    first, count = resolve_range(len(data), start, length)
    return data[first:first + count]


class Store(ABC):
    """Abstract store; subclasses implement the primitives, the base the rest."""

    kind: str = "abstract"
    writable: bool = False
    supports_deletes: bool = True
    #: How many chunks one read fetches at once: 0 is one per core (a local store is CPU-bound on
    #: decoding); a store that waits on a network says more, so the waits overlap.
    read_concurrency: int = 0
    #: True where a read waits on a network (remote stores, references into remote objects): its chunks are
    #: fetched several at a time however small, where a local read of small chunks takes them one by one
    waits_on_network: bool = False

    def __init__(self) -> None:
        self.reads = 0
        self.writes = 0
        self._count_lock = threading.Lock()
        self._idle = threading.Condition(self._count_lock)
        self._in_flight = 0
        self._closed = False

    # ---- primitives -------------------------------------------------------
    @abstractmethod
    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        """The object's bytes, None if missing; LimitError if it holds more than ``limit`` bytes.

        ``limit=None`` is unbounded: only for a writer re-reading what it trusts; every read
        of a store's content goes through :meth:`get`, which always passes a bound.
        """

    @abstractmethod
    def _put(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _delete(self, key: str) -> None: ...

    @abstractmethod
    def _list_prefix(self, prefix: str) -> Iterator[str]:
        """Every object key under ``prefix`` (a key, '/' for everything)."""

    # ---- derived operations --------------------------------------------------
    def get(self, key: str, limit: int | None = None) -> bytes | None:
        """An object's bytes, at most ``limit`` of them (default: the metadata cap).

        Callers reading chunks pass the bound their array's metadata declares
        (``Pipeline.max_encoded``); ``sys.maxsize`` means "no bound" and is for
        trusted copies only.
        """
        key = keys.validate(key)
        with self._count_lock:
            self.reads += 1
        return self._get(key, limits.max_metadata_bytes() if limit is None else limit)

    def get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """``length`` bytes of an object from byte ``start`` (a negative ``start``: that many bytes
        before its end), with the object's total size; None if missing.

        Bounded by construction: never more than ``length`` bytes are returned or held (a
        backend without ranged reads, the base default, holds the object only when it is no
        bigger than the in-memory budget). A range running past the end returns what is
        there; the caller, knowing the size, says what is wrong. Shards are read this way
        (zarr3/chain.py): their index, then one inner chunk, never the whole shard.
        """
        key = keys.validate(key)
        if length < 0:
            raise ValueError(f"{key}: negative range length {length}")
        with self._count_lock:
            self.reads += 1
        return self._get_range(key, start, length)

    def read_pieces(self, key: str, limit: int, consume: Callable[[Any], None], *, whole: bool = False) -> bool:
        """``consume(piece)`` for each piece of an object's bytes, in order, at most ``limit`` bytes in all
        (LimitError past it, as :meth:`get`); False, nothing consumed, when the object is missing.

        A reader that inflates a chunk as its bytes arrive holds one piece, not the object (a local file is
        read :data:`READ_PIECE` bytes at a time, a remote body as it streams); a backend without a stream
        hands the object over whole, as one piece. ``whole``: the caller takes most of what the object
        inflates to, so a remote store fetches it in one request and hands it over as one piece (a body
        streamed piece by piece from Python cost a whole variable over HTTP a fifth of its time; the bytes
        it holds are the compressed ones, not the inflated chunk). :class:`RestartRead` when the pieces
        already consumed are void (a body cut short): the caller reads the object again with :meth:`get`.
        """
        key = keys.validate(key)
        with self._count_lock:
            self.reads += 1
        return self._read_pieces(key, limit, consume, whole)

    def _read_pieces(self, key: str, limit: int, consume: Callable[[Any], None], whole: bool = False) -> bool:
        """Default: the object read whole (:meth:`_get`), one piece."""
        data = self._get(key, limit)
        if data is None:
            return False
        consume(data)
        return True

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        """Default for backends without a ranged read: the object read whole, under the in-memory budget."""
        data = self._get(key, limits.max_in_memory_bytes())
        if data is None:
            return None
        return slice_range(data, start, length), len(data)

    def put(self, key: str, data: bytes) -> None:
        with self._writing(key) as valid:
            self._put(valid, bytes(data))

    def put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        """Put ``size`` bytes of the open file ``fd`` from ``offset`` as object ``key`` (a chunk copied as-is).

        A backend that writes files copies them in the kernel (:class:`DirectoryStore`); the others, and
        that one where the kernel refuses, read the bytes (:func:`read_extent`) and :meth:`put` them.
        """
        with self._writing(key) as valid:
            self._put_extent(valid, fd, offset, size)

    @contextmanager
    def _writing(self, key: str) -> Iterator[str]:
        """One write of ``key`` (validated, yielded): refused once the store is closed or interrupted,
        counted, and in flight until it returns, so that a commit waits for it (:meth:`_quiesce`)."""
        self._check_writable()
        valid = keys.validate(key)
        safety.raise_if_interrupted()
        with self._count_lock:
            if self._closed:
                raise StoreError(f"{self!r}: written after it was committed or aborted")
            self.writes += 1
            self._in_flight += 1
        try:
            yield valid
        finally:
            with self._count_lock:
                self._in_flight -= 1
                self._idle.notify_all()

    def _put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        """Default for backends that are not files: the bytes through Python."""
        self._put(key, read_extent(fd, offset, size))

    def _quiesce(self) -> None:
        """Refuse new puts and wait for the ones in flight (before commit or abort touches files)."""
        with self._count_lock:
            self._closed = True
            while self._in_flight:
                self._idle.wait()

    def delete(self, key: str) -> None:
        self._check_writable()
        if not self.supports_deletes:
            raise StoreError(f"{self!r} cannot delete objects")
        self._delete(keys.validate(key))

    def exists(self, key: str) -> bool:
        return self.get(key) is not None

    def list_prefix(self, prefix: str = "/") -> list[str]:
        return sorted(self._list_prefix(keys.validate(prefix)))

    def list_dir(self, prefix: str = "/") -> list[str]:
        """Immediate child names under ``prefix`` (zmap ``search``)."""
        prefix = keys.validate(prefix)
        depth = len(keys.split(prefix))
        names = {keys.split(k)[depth] for k in self._list_prefix(prefix) if len(keys.split(k)) > depth}
        return sorted(names)

    def _check_writable(self) -> None:
        if not self.writable:
            raise StoreError(f"{self!r} is read-only")

    def metadata_read(self) -> None:  # noqa: B027  (optional hook: a no-op unless the store checks)
        """A reader has read every metadata object it needs (the dataset's structure).

        A store that cannot hold a reader to one tree (S3) checks here, once, that those
        objects all came from one dataset; local stores need nothing.
        """

    def why_no_dataset(self) -> str | None:
        """Why the root holds no metadata, in the store's own terms, when it knows better than "none of
        the root objects exists" (a web server that answers 404 for the URL itself, a zip file served
        over HTTP), worded to follow "no dataset here: "; None: that generic line says it. Asked only
        once a reader found no dataset."""
        return None

    def pin(self) -> Pin | None:
        """The dataset this read store opened, named so that a reader in another process (a dask
        worker) can be held to it (:meth:`hold_to`, :func:`stores.reopen`); None: nothing to hold to.

        That other reader cannot share this one's hold (a descriptor, an open file): it opens the
        URL again, and this says whether what it finds there is still the dataset opened here.
        """
        return None

    def hold_to(self, pin: Pin | None) -> None:
        """Hold this read store, just opened in this process, to the dataset another process's
        store pinned (its :meth:`pin`): refuse with the one-line :class:`StoreError` of a store
        replaced while being read when it is another one. Never re-pinned: what the other process
        read (the metadata) belongs to the dataset it opened, and a newer one would be read under it.
        """
        if pin is not None:
            raise StoreError(f"{self!r}: cannot tell whether it holds the dataset another process opened "
                             f"({pin[0]!r} pinned there)")

    def commit(self) -> None:  # noqa: B027  (optional hook: read stores have nothing to commit)
        """Make what was written visible at the target; a no-op for read stores."""

    def abort(self) -> None:  # noqa: B027  (optional hook: read stores have nothing to throw away)
        """Throw away everything written since opening."""

    def close(self) -> None:  # noqa: B027  (optional hook: a store without resources has nothing to release)
        """Release resources of a read store."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.writable:
            if exc_type is None:
                self.commit()
            else:
                self.abort()
        self.close()


def read_extent(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes of ``fd`` from ``offset`` (``os.pread``: no shared seek position); a short file is a
    StoreError naming the fd's file rather than a short object."""
    import os

    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise StoreError(f"{fd_name(fd)}: truncated: chunk at {offset} has {len(data)} of {size} bytes")
    return data


def fd_name(fd: int) -> str:
    """The path an open file descriptor names, for an error message."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"file descriptor {fd}"
