"""Icechunk repositories read through the icechunk library: a Zarr v3 store, versioned, whose chunks may be
*virtual* (byte ranges of other files, as VirtualiZarr writes them into the original netCDF files).

Reading goes through icechunk itself (``Repository.open``, a read-only session, its ``IcechunkStore``), not
a parser of ours, so what we read is what zarr-python and xarray read from that repository. The
library is an optional dependency, imported only when a repository is opened (one line naming it when it is
missing). Which version of the repository is read: branch ``main``, or the ``#branch=NAME``,
``#tag=NAME`` or ``#snapshot=ID`` of the URL.

Virtual chunks are fetched by icechunk from the repository's *virtual chunk containers* (its config), and
only from containers the reader authorizes. Local ones (``file://`` prefixes) are authorized here: the
repository names files on this machine, as kerchunk references do. A chunk in any other container (S3,
HTTP) is refused by icechunk in one line: it needs credentials we do not guess.

Every read is bounded like every store's: the object's size (for a virtual chunk, the length its reference
declares) is asked before anything is fetched, and an object over the limit is refused unread.

Writing (:class:`IcechunkCollector`, behind ``nc2nczarr IN.nc icechunk://PATH --reference``) gathers what a
writer puts as :class:`~nczarr_conformance.stores.references.ReferenceCollector` does, and makes it one commit
of a new repository, published only once committed.
"""
from __future__ import annotations

import base64
import os
import re
import shutil
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from nczarr_conformance import safety
from nczarr_conformance.errors import MissingDependencyError, StoreError, UsageError
from nczarr_conformance.limits import too_big
from nczarr_conformance.stores.base import Pin, Store, replaced, resolve_range
from nczarr_conformance.stores.references import V3ReferenceCollector, refuse_output_path

#: the fragment parameters naming one version of a repository (at most one of them)
VERSION_PARAMS = ("branch", "tag", "snapshot")
_T = TypeVar("_T")


#: virtual chunks probed at once (one ``asyncio.gather``): icechunk answers them in parallel
PROBE_BATCH = 1000
#: icechunk 1.1.21's words for a virtual chunk it refuses (tests/stores/test_icechunk.py holds each)
_CHANGED = re.compile(r"checksum of the object owning the virtual chunk has changed \((?P<url>[^)]+)\)")
_MISSING = re.compile(r"Object at location (?P<path>.+?) not found")
_OUTSIDE = re.compile(r"Wanted range starting at (?P<start>\d+), but object was only (?P<size>\d+) bytes long")


@dataclass(frozen=True)
class VirtualFault:
    """Why icechunk refused a virtual chunk's last byte: ``kind`` is ``missing`` (no target file), ``changed``
    (modified after the time its reference records), ``outside`` (the chunk ends past its target's end: ``end``
    is the byte after it in the target, ``size`` the target's size) or ``other`` (``detail`` says)."""

    key: str
    kind: str
    detail: str
    target: str | None = None
    end: int | None = None
    size: int | None = None


def virtual_fault(key: str, exc: BaseException) -> VirtualFault:
    """icechunk's refusal of ``key``'s virtual chunk, sorted by cause (its text is the one place it says)."""
    text = str(exc)
    if (m := _CHANGED.search(text)) is not None:
        return VirtualFault(key, "changed", _first_line(exc), target=m["url"])
    if (m := _MISSING.search(text)) is not None:
        return VirtualFault(key, "missing", _first_line(exc), target=Path(m["path"]).as_uri())
    if (m := _OUTSIDE.search(text)) is not None:
        return VirtualFault(key, "outside", _first_line(exc), end=int(m["start"]) + 1, size=int(m["size"]))
    return VirtualFault(key, "other", _first_line(exc))


#: icechunk warns on every local repository opened that its file system storage is unsafe for concurrent
#: commits: true, and nothing to a reader, which commits nothing. Its other warnings stay.
QUIET_LOGS = "warn,icechunk::storage::object_store=error,icechunk_arrow_object_store=error"


def _icechunk() -> Any:
    try:
        import icechunk
    except ImportError:
        raise MissingDependencyError("reading an Icechunk repository needs icechunk: pip install "
                                     "'nczarr-conformance[icechunk]'") from None
    if "ICECHUNK_LOG" not in os.environ:  # the user's own filter wins
        icechunk.set_logs_filter(QUIET_LOGS)
    return icechunk


def _sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run one of the icechunk store's coroutines on zarr-python's event loop thread (what zarr's own
    synchronous API does), so reads work from any of our threads."""
    from zarr.core.sync import sync

    return sync(coro)


def _first_line(exc: BaseException) -> str:
    """icechunk's error (a boxed, multi-line report: the error, its context, then its causes) in one line:
    the error and its first cause that says more (``error fetching virtual reference: Object at location
    /data/x.nc not found: …``)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    head = next((line[2:].strip() for line in lines if line.startswith("x ")), "")
    causes = [line.split("->", 1)[1].strip() for line in lines if line.startswith(("|->", "`->"))]
    cause = next((c for c in causes if c and c != head), "")
    text = f"{head}: {cause}" if head and cause else head or cause
    return " ".join(text.split()) or type(exc).__name__


def _invalid_key(exc: BaseException) -> bool:
    """icechunk refuses a key that is no Zarr v3 key (``.zgroup``, ``.nczarr``): for a reader probing for a
    format, such a key is simply missing."""
    return "invalid zarr key format" in str(exc)


class IcechunkStore(Store):
    """An Icechunk repository on the local file system, one version of it, read-only."""

    kind = "icechunk"

    def __init__(self, path: str, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.path = os.path.abspath(path)
        self.where = path
        self.version = _version(path, params or {})
        ice = _icechunk()
        if not os.path.isdir(self.path):
            raise StoreError(f"{path}: no such directory (an Icechunk repository is one)")
        self._error: type[BaseException] = ice.IcechunkError
        try:
            storage = ice.local_filesystem_storage(self.path)
            config = ice.Repository.fetch_config(storage)
            containers = dict(config.virtual_chunk_containers or {}) if config is not None else {}
            local = {prefix: None for prefix in containers if prefix.startswith("file://")}
            self._repo = ice.Repository.open(storage, authorize_virtual_chunk_access=local or None)
            session = self._session(self.version)
        except (ice.IcechunkError, ValueError) as exc:
            raise StoreError(f"{path}: cannot open the Icechunk repository with icechunk {ice.__version__}: "
                             f"{_first_line(exc)}") from None
        self._take(session)

    def _session(self, version: tuple[str, str]) -> Any:
        what, name = version
        if what == "snapshot":
            return self._repo.readonly_session(snapshot_id=name)
        if what == "tag":
            return self._repo.readonly_session(tag=name)
        return self._repo.readonly_session(branch=name)

    def _take(self, session: Any) -> None:
        from zarr.core.buffer import default_buffer_prototype

        self.snapshot_id = str(session.snapshot_id)
        self._read = session
        self._ice = session.store
        self._prototype = default_buffer_prototype()

    def __repr__(self) -> str:
        return f"IcechunkStore({self.where!r}, {self.version[0]}={self.version[1]!r})"

    @staticmethod
    def _key(key: str) -> str:
        return key.strip("/")

    def _fail(self, key: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.where}: {key}: {_first_line(exc)}")

    def _ask(self, key: str, request: Callable[[], Any]) -> Any:
        """icechunk's answer to ``request()`` (a coroutine about ``key``); None where the key does not exist."""
        try:
            return _sync(request())
        except (FileNotFoundError, KeyError):  # icechunk's missing key: KeyError naming it
            return None
        except self._error as exc:
            if _invalid_key(exc):
                return None
            raise self._fail(key, exc) from None

    def _size(self, key: str) -> int | None:
        """The bytes ``key`` holds, asked before fetching (a virtual chunk's declared length); None: no such key."""
        size = self._ask(key, lambda: self._ice.getsize(self._key(key)))
        return None if size is None else int(size)

    def _fetch(self, key: str, byte_range: Any = None) -> bytes | None:
        buf = self._ask(key, lambda: self._ice.get(self._key(key), self._prototype, byte_range))
        return None if buf is None else bytes(buf.to_bytes())

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        size = self._size(key)
        if size is None:
            return None
        if limit is not None and size > limit:
            raise too_big(key, size, limit)
        data = self._fetch(key)
        if data is not None and limit is not None and len(data) > limit:
            raise too_big(key, len(data), limit)
        return data

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        from zarr.abc.store import RangeByteRequest

        size = self._size(key)
        if size is None:
            return None
        first, count = resolve_range(size, start, length)
        if count == 0:
            return b"", size
        data = self._fetch(key, RangeByteRequest(first, first + count))
        return None if data is None else (data[:count], size)

    def _put(self, key: str, data: bytes) -> None:
        raise StoreError(f"{self!r} is read-only")

    def _delete(self, key: str) -> None:
        raise StoreError(f"{self!r} is read-only")

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = self._key(prefix)

        async def listed() -> list[str]:
            return [name async for name in self._ice.list_prefix(f"{p}/" if p else "")]

        try:
            names = _sync(listed())
        except self._error as exc:
            raise self._fail(prefix, exc) from None
        return iter(["/" + name for name in names])

    def virtual_targets(self) -> list[str]:
        """The URL of every file the snapshot's virtual chunks lie in (icechunk's own list, each once)."""
        try:
            return sorted(set(self._read.all_virtual_chunk_locations()))
        except self._error as exc:
            raise self._fail("/", exc) from None

    def virtual_chunks(self, array: str) -> list[tuple[int, ...]]:
        """The grid index of every chunk of the array at node ``array`` that is a virtual reference, in order."""
        path = "/" + self._key(array)
        virtual = _icechunk().ChunkType.VIRTUAL

        async def initialized() -> list[tuple[int, ...]]:
            return [tuple(c) async for c in self._read.chunk_coordinates(path, PROBE_BATCH)]

        try:
            return sorted(c for c in _sync(initialized()) if self._read.chunk_type(path, list(c)) == virtual)
        except self._error as exc:
            raise self._fail(array, exc) from None

    def probe_virtual(self, chunk_keys: Sequence[str]) -> list[VirtualFault]:
        """Each virtual chunk's last byte, fetched through icechunk (one byte, however large the chunk), and
        what icechunk refused: it opens the target, compares the target's modification time with the one the
        reference records (when it records one) and reads at the chunk's offset + length - 1, so a target gone,
        changed since, or too short for the chunk is found without reading the chunk."""
        import asyncio  # here, not at the top: nczarr-check imports this module for every store it checks

        from zarr.abc.store import SuffixByteRequest

        async def last_bytes(batch: Sequence[str]) -> list[Any]:
            return await asyncio.gather(*(self._ice.get(self._key(k), self._prototype, SuffixByteRequest(1))
                                          for k in batch), return_exceptions=True)

        faults: list[VirtualFault] = []
        for first in range(0, len(chunk_keys), PROBE_BATCH):
            batch = chunk_keys[first:first + PROBE_BATCH]
            for key, answer in zip(batch, _sync(last_bytes(batch)), strict=True):
                if isinstance(answer, self._error):
                    faults.append(virtual_fault(key, answer))
                elif isinstance(answer, BaseException):
                    faults.append(VirtualFault(key, "other", str(answer) or type(answer).__name__))
        return faults

    def pin(self) -> Pin | None:
        """The snapshot read: a dask worker reopening the repository reads that very snapshot."""
        return ("icechunk", self.snapshot_id)

    def hold_to(self, pin: Pin | None) -> None:
        """Read the snapshot another process pinned, whatever the branch points at now (a snapshot is
        immutable); one that is gone (expired) is refused in one line."""
        if pin is None or pin == self.pin():
            return
        if len(pin) != 2 or pin[0] != "icechunk":
            raise replaced(self.where, "not the Icechunk repository another process opened")
        try:
            self._take(self._session(("snapshot", str(pin[1]))))
        except self._error:
            raise replaced(self.where, f"snapshot {pin[1]} is gone") from None


def _version(path: str, params: dict[str, str]) -> tuple[str, str]:
    """Which version of the repository the URL names: ("branch", "main") unless its fragment says otherwise."""
    given = [(name, params[name]) for name in VERSION_PARAMS if name in params]
    if len(given) > 1:
        raise UsageError(f"{path}: name one of #branch=, #tag=, #snapshot= (the URL names "
                         f"{', '.join(name for name, _ in given)})")
    if given and not given[0][1]:
        raise UsageError(f"{path}: #{given[0][0]}= names nothing")
    return given[0] if given else ("branch", "main")


class IcechunkCollector(V3ReferenceCollector):
    """A writable store that becomes a new Icechunk repository at ``dst`` on :meth:`commit`: one commit on
    ``main`` holding every metadata object and inline chunk put, and every chunk put from a registered file
    (:meth:`ReferenceCollector.register`) as a virtual reference ``file://PATH`` at (offset, length), each
    target's directory one of the repository's virtual chunk containers.

    Nothing exists at ``dst`` until the commit has succeeded: the repository is written into a temporary
    directory beside it, committed, then renamed into place; a failure removes it (no commit survives).
    """

    kind = "icechunk-writer"

    def __init__(self, dst: str, *, overwrite: bool = False, inline_limit: int = sys.maxsize,
                 refuse: Callable[[str, int], Exception] | None = None,
                 message: str = "nc2nczarr --reference") -> None:
        super().__init__(None, inline_limit=inline_limit, refuse=refuse)
        self.repository = dst
        self.message = message  # the commit's, in the repository's history
        self.ice = _icechunk()
        self._modified: dict[str, datetime] = {}
        refuse_output_path(dst, overwrite)

    def __repr__(self) -> str:
        return f"IcechunkCollector({self.repository!r})"

    def commit(self) -> None:
        """The repository, written and committed under a temporary name, then renamed to ``dst``."""
        from zarr.core.buffer import default_buffer_prototype

        self._quiesce()
        safety.raise_if_interrupted()
        self.check_targets_unchanged()
        ice = self.ice
        target = Path(self.repository)
        temp = safety.make_temp_dir(target)
        try:
            config = ice.RepositoryConfig.default()
            containers: dict[str, Any] = {}
            for directory in sorted({os.path.dirname(path) for path in self.targets}):
                prefix = Path(directory).as_uri().rstrip("/") + "/"
                config.set_virtual_chunk_container(ice.VirtualChunkContainer(
                    prefix, ice.local_filesystem_store(directory)))
                containers[prefix] = None
            # each reference carries its target's modification time: icechunk refuses a chunk of a target
            # modified after it. icechunk keeps whole seconds: the time is rounded up to the next one, so a
            # change within that second goes unnoticed there
            self._modified = {path: datetime.fromtimestamp(-(-(t.mtime_ns or 0) // 10**9), tz=UTC)
                              for path, t in self.targets.items()}
            repo = ice.Repository.create(ice.local_filesystem_storage(str(temp)), config,
                                         authorize_virtual_chunk_access=containers or None)
            session = repo.writable_session("main")
            store = session.store
            prototype = default_buffer_prototype()
            # icechunk takes a chunk only of an array it holds: every node's metadata first, parents first
            for key, ref in sorted(self.refs.items(), key=lambda item: (not self._is_metadata(item[0]),
                                                                        item[0].count("/"), item[0])):
                if isinstance(ref, list):
                    path, offset, length = ref
                    store.set_virtual_ref(key, Path(path).as_uri(), offset=offset, length=length,
                                          checksum=self._modified[path])
                    continue
                data = base64.b64decode(ref[7:]) if ref.startswith("base64:") else ref.encode("utf-8")
                _sync(store.set(key, prototype.buffer.from_bytes(data)))
            safety.raise_if_interrupted()
            session.commit(self.message)
            os.chmod(temp, 0o777 & ~safety.umask())
            if os.path.lexists(target):
                safety.swap_in(temp, target)
            else:
                os.rename(temp, target)
        except ice.IcechunkError as exc:
            raise StoreError(f"{self.repository}: icechunk {ice.__version__} refused the repository: "
                             f"{_first_line(exc)}; nothing written") from None
        finally:
            if temp.exists():
                shutil.rmtree(temp, ignore_errors=True)
