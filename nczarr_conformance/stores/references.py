"""Kerchunk references: a Zarr store whose chunks are byte ranges of other files (JSON or Parquet).

Reading goes through fsspec's reference filesystem (``fsspec.implementations.reference``),
never a parser of our own, so what we read is what xarray and zarr-python read from the same
references. Writing (:class:`ReferenceCollector`) gathers what a writer puts, metadata and
inline chunks as they are and chunks that lie in a file as ``[path, offset, length]``, and
writes kerchunk's JSON (version 1) or Parquet on :meth:`~ReferenceCollector.commit`, under a
temporary name renamed into place: a failed run leaves nothing.

Each target file is recorded with its size and modification time under the top-level key
:data:`TARGETS_KEY` (of the JSON, or of the Parquet directory's ``.zmetadata``), which fsspec
ignores: a target changed, truncated or missing since is then refused in one line on the first
chunk read from it (:class:`ReferenceStore`), never read as wrong values. A target on S3
(``s3://BUCKET/KEY``, references made by ``nc2nczarr s3://… --reference``) is recorded with its size
and ETag instead (S3 keeps no modification time a reader can trust to the nanosecond, and changes the
ETag on every overwrite), checked with one HEAD through the signed S3 store's endpoint and credentials,
and read through fsspec's ``s3`` filesystem (s3fs) told that endpoint and region. References
written by other tools carry no such record: their ranges are checked against the target's size only.
"""
from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance import keys, safety
from nczarr_conformance.errors import (
    FormatError,
    MissingDependencyError,
    NczarrError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from nczarr_conformance.limits import too_big
from nczarr_conformance.stores.base import Store, fd_name, read_extent, resolve_range
from nczarr_conformance.stores.s3_object import Stamp, is_s3_url
from nczarr_conformance.stores.sniff import special_kind
from nczarr_conformance.urls import REFERENCE_SUFFIXES

#: top-level key recording each target's size and mtime: ``{path: {"size": n, "mtime_ns": t}}``; an S3 object's
#: size and ETag: ``{"s3://b/k.nc": {"size": n, "etag": "\"…\""}}``
TARGETS_KEY = "nczarr:targets"
JSON_SUFFIXES = REFERENCE_SUFFIXES[:1]
PARQUET_SUFFIXES = REFERENCE_SUFFIXES[1:]
#: rows per Parquet file (kerchunk's ``record_size``)
PARQUET_RECORD_SIZE = 100_000


def is_reference_path(path: str) -> bool:
    """Whether ``path`` names kerchunk references by its suffix (``.json``, ``.parq``, ``.parquet``)."""
    return path.lower().rstrip("/").endswith(JSON_SUFFIXES + PARQUET_SUFFIXES)


@dataclass(frozen=True)
class Target:
    """A referenced file as it was when the references were made: a local file's size and mtime, an S3
    object's size and ETag."""

    size: int
    mtime_ns: int | None = None
    etag: str | None = None
    #: an S3 object of a public bucket, read unsigned (``"anon": true``): so are its HEADs and GETs here
    anonymous: bool = False

    @classmethod
    def of(cls, path: str) -> Target:
        st = os.stat(path)
        return cls(st.st_size, st.st_mtime_ns)

    def as_json(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {"size": self.size}
        if self.mtime_ns is not None:
            out["mtime_ns"] = self.mtime_ns
        if self.etag is not None:
            out["etag"] = self.etag
        if self.anonymous:
            out["anon"] = True
        return out


class TargetLooks:
    """What each S3 target was when first asked, one HEAD per target for as long as this lives: a store opened,
    an ``nczarr-check`` run. Its questions (missing? changed? how big? its HDF5 bytes) are then all answered
    from that one HEAD, the HDF5 reads held to its ETag, instead of a HEAD per question and per array.

    Not shared between runs: a later one must see the target as it is then."""

    def __init__(self) -> None:
        self._heads: dict[tuple[str, bool], Stamp | NczarrError | None] = {}

    def head(self, url: str, anonymous: bool) -> Stamp | None:
        """:func:`_s3_head` of ``url``, asked the first time only (its NczarrError raised again each time)."""
        key = (url, anonymous)
        if key not in self._heads:
            try:
                self._heads[key] = _s3_head(url, anonymous)
            except NczarrError as exc:
                self._heads[key] = exc
        found = self._heads[key]
        if isinstance(found, NczarrError):
            raise found
        return found


def _head_of(looks: TargetLooks | None) -> Callable[[str, bool], Stamp | None]:
    """How an S3 target is HEADed: through ``looks`` (once per target), or anew without it."""
    return looks.head if looks is not None else _s3_head


def target_problem(path: str, recorded: Target | None, looks: TargetLooks | None = None) -> str | None:
    """Why the target ``path`` cannot be read as the references expect, or None.

    Missing or unreadable: named. Recorded: its size and mtime (an S3 object: its size and ETag, one
    HEAD, asked of ``looks`` when given) must be the ones recorded. Other remote targets are not checked here
    (fsspec's to fetch).
    """
    if is_s3_url(path):
        return _s3_target_problem(path, recorded, looks)
    local = local_path(path)
    if local is None:
        return None
    try:
        mode = os.stat(local).st_mode
        now = Target.of(local)
    except OSError as exc:
        return f"target {path} is not reachable ({exc.strerror or exc})"
    if not stat.S_ISREG(mode):  # /dev/zero never ends; a FIFO's open waits for a writer
        kind = "directory" if stat.S_ISDIR(mode) else special_kind(mode)
        return f"target {path} is a {kind}, not a regular file: refused"
    if recorded is None or now == recorded:
        return None
    what = (f"size {recorded.size} -> {now.size}" if now.size != recorded.size
            else f"modified at {(now.mtime_ns or 0) / 1e9:.3f}, recorded {(recorded.mtime_ns or 0) / 1e9:.3f}")
    return f"target {path} changed since the references were made ({what})"


def _well_formed(ref: Any) -> bool:
    """``[url]`` or ``[url, offset, length]``: a text url, whole numbers of bytes ≥ 0 (numpy's from Parquet)."""
    if not isinstance(ref, (list, tuple)) or len(ref) not in (1, 3) or not isinstance(ref[0], str) or not ref[0]:
        return False
    return all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in ref[1:])


def _s3_target_problem(url: str, recorded: Target | None, looks: TargetLooks | None) -> str | None:
    """:func:`target_problem` of an S3 object: one HEAD, its size and ETag against the recorded ones."""
    try:
        now = _head_of(looks)(url, recorded is not None and recorded.anonymous)
    except NczarrError as exc:
        return f"target {url} is not reachable ({exc})"
    if now is None:
        return f"target {url} is not reachable (no such object)"
    if recorded is None or (now.size == recorded.size and (recorded.etag is None or now.etag == recorded.etag)):
        return None
    what = (f"size {recorded.size} -> {now.size}" if now.size != recorded.size
            else f"ETag {recorded.etag} -> {now.etag}: overwritten")
    return f"target {url} changed since the references were made ({what})"


def _unsigned(anonymous: bool) -> dict[str, Any] | None:
    """The storage options of an S3 target read unsigned (recorded ``"anon": true``), else None."""
    return {"anon": True} if anonymous else None


def _s3_head(url: str, anonymous: bool) -> Stamp | None:
    """The S3 object ``url``'s size and ETag now (one HEAD, unsigned where ``anonymous``), None when missing;
    NczarrError when it cannot be asked."""
    from nczarr_conformance.stores.s3_object import S3Object

    obj = None
    try:
        obj = S3Object(url, _unsigned(anonymous))
        return obj.head()
    finally:
        if obj is not None:
            obj.close()


def target_size(url: str, anonymous: bool = False, looks: TargetLooks | None = None) -> int | None:
    """The size in bytes of the target ``url``: a local file's (stat), an S3 object's (one HEAD, asked of ``looks``
    when given; unsigned where ``anonymous``); None where it cannot be had (missing, unreachable:
    :func:`target_problem` names it) or for another remote scheme."""
    if is_s3_url(url):
        try:
            now = _head_of(looks)(url, anonymous)
        except NczarrError:
            return None
        return None if now is None else now.size
    local = local_path(url)
    try:
        return os.stat(local).st_size if local is not None else None
    except OSError:
        return None


@contextmanager
def opened_target(url: str, anonymous: bool = False, looks: TargetLooks | None = None) -> Iterator[Any]:
    """The target ``url`` for h5py: a local path, or an S3 object's file object read by byte range (not
    fetched whole; unsigned where ``anonymous``; held to the version ``looks`` saw, with no HEAD of its own, when
    given); None for another remote scheme."""
    if not is_s3_url(url):
        yield local_path(url)
        return
    from nczarr_conformance.stores.s3_object import S3Object

    seen = looks.head(url, anonymous) if looks is not None else None
    obj = S3Object(url, _unsigned(anonymous), stamp=seen)
    try:
        yield obj.open()
    finally:
        obj.close()


def local_path(url: str) -> str | None:
    """The local path ``url`` names (a path, or a file:// URL); None for a remote URL."""
    if "://" in url and not url.startswith("file://"):
        return None
    return url.removeprefix("file://")


def read_targets(path: str) -> dict[str, Target]:
    """The targets recorded in the references at ``path`` (empty for references of other tools)."""
    doc = _top_level(path)
    found = doc.get(TARGETS_KEY) if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        return {}
    out: dict[str, Target] = {}
    for name, rec in found.items():
        if not isinstance(rec, dict) or not isinstance(rec.get("size"), int):
            continue
        mtime, etag = rec.get("mtime_ns"), rec.get("etag")
        if isinstance(mtime, int) or isinstance(etag, str):
            out[str(name)] = Target(rec["size"], mtime if isinstance(mtime, int) else None,
                                    etag if isinstance(etag, str) else None, rec.get("anon") is True)
    return out


def _top_level(path: str) -> Any:
    """The JSON document at ``path`` (a JSON references file), or the ``.zmetadata`` of a Parquet directory."""
    where = os.path.join(path, ".zmetadata") if os.path.isdir(path) else path
    try:
        with open(where, "rb") as fh:
            return json.loads(fh.read())
    except OSError as exc:
        raise StoreError(f"{path}: cannot read references: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise StoreError(f"{path}: not kerchunk references (not JSON: {exc})") from None


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise MissingDependencyError("reading kerchunk references needs fsspec: pip install "
                                     "'nczarr-conformance[references]'") from None
    return fsspec


class ReferenceStore(Store):
    """Kerchunk references (JSON file or Parquet directory) read through fsspec's reference filesystem.

    Read-only. Every read is bounded by the size the reference declares before anything is
    fetched; a chunk of a target that is missing, changed since the references were made
    (:data:`TARGETS_KEY`) or shorter than the range is refused in one line.
    """

    kind = "reference"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        if not os.path.exists(path):
            raise StoreError(f"{path}: no such file or directory")
        self.targets = read_targets(path)
        fsspec = _fsspec()
        # fsspec guesses the targets' protocol by walking the references' values, which on Parquet with nested
        # groups raises KeyError on a group's .zarray, in an order set by hashing: told, it walks nothing
        local = bool(self.targets) and all(local_path(url) is not None for url in self.targets)
        on_s3 = bool(self.targets) and all(is_s3_url(url) for url in self.targets)
        remote: dict[str, Any] = {"remote_protocol": "file"} if local else {}
        self.waits_on_network = not local
        if on_s3:
            first = sorted(self.targets)[0]
            remote = {"remote_protocol": "s3",
                      "remote_options": s3_remote_options(first, self.targets[first].anonymous)}
        try:
            self.fs = fsspec.filesystem("reference", fo=path, skip_instance_cache=True, **remote)
        except (ValueError, KeyError, TypeError, IndexError, OSError) as exc:  # IndexError: a reference []
            raise StoreError(f"{path}: not kerchunk references ({' '.join(str(exc).split())})") from None
        self._checked: dict[str, str | None] = {}
        #: each S3 target HEADed once while this store is open (nczarr-check's rules ask through it too)
        self.looks = TargetLooks()

    def __repr__(self) -> str:
        return f"ReferenceStore({self.path!r})"

    def reference(self, key: str) -> Any:
        """The raw reference of ``key`` (inline text/bytes, or ``[url]``/``[url, offset, length]``), None if missing."""
        try:
            ref = self.fs.references[key.lstrip("/")]
        except (KeyError, FileNotFoundError):
            return None
        if ref is None or isinstance(ref, (bytes, str)) or _well_formed(ref):
            return ref
        shown = json.dumps(ref, default=str)
        raise FormatError(f"{self.path}: {key}: malformed reference {shown[:200]} (kerchunk's forms: inline text, "
                          "[url], [url, offset, length] with offset and length whole numbers of bytes)")

    def metadata_read(self) -> None:
        """A reader has its metadata and will read chunks: refuse now, before any value is shown, when a
        recorded target is missing or changed (the checker, which reads no chunk, reports it instead)."""
        for url in sorted(self.targets):
            problem = self.problem(url)
            if problem is not None:
                raise StoreError(f"{self.path}: {problem}; nothing read from it")

    def problem(self, url: str) -> str | None:
        """Why the target ``url`` cannot be read (missing, changed), once per target; None: fine."""
        if url not in self._checked:
            self._checked[url] = target_problem(url, self.targets.get(url), self.looks)
        return self._checked[url]

    def _size(self, key: str, ref: Any) -> int:
        """The bytes ``key`` holds, known before fetching anything (refusing a target that cannot be read)."""
        if isinstance(ref, (bytes, str)):
            if isinstance(ref, str) and ref.startswith("base64:"):
                return len(ref[7:].rstrip("=")) * 3 // 4
            return len(ref)
        url = str(ref[0])
        problem = self.problem(url)
        if problem is not None:
            raise StoreError(f"{self.path}: {problem}; nothing read from it")
        if len(ref) == 1:  # the whole file, as big as its target says: fetched to that size (_fetch)
            return int(self.fs.info(key.lstrip("/"))["size"])
        offset, length = int(ref[1]), int(ref[2])
        recorded = self.targets.get(url)
        if recorded is not None and offset + length > recorded.size:
            raise StoreError(f"{self.path}: {key} reads bytes {offset}-{offset + length} of {url}, which has "
                             f"{recorded.size}")
        return length

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        ref = self.reference(key)
        if ref is None:
            return None
        size = self._size(key, ref)
        if limit is not None and size > limit:
            raise too_big(key, size, limit)
        if isinstance(ref, (list, tuple)) and len(ref) == 1:  # no more than its size said (_fetch: nor fewer)
            return self._fetch(key, ref, 0, size)
        return self._fetch(key, ref, None, None)

    def _get_range(self, key: str, start: int, length: int) -> tuple[bytes, int] | None:
        ref = self.reference(key)
        if ref is None:
            return None
        size = self._size(key, ref)
        first, count = resolve_range(size, start, length)
        if isinstance(ref, (bytes, str)):
            data = self._fetch(key, ref, None, None)
            return data[first:first + count], len(data)
        return self._fetch(key, ref, first, first + count), size

    def _fetch(self, key: str, ref: Any, start: int | None, end: int | None) -> bytes:
        try:
            data = bytes(self.fs.cat_file(key.lstrip("/"), start=start, end=end))
        except FileNotFoundError as exc:
            raise StoreError(f"{self.path}: {key}: target not reachable ({exc})") from None
        except NczarrError:
            raise
        except Exception as exc:  # fsspec's ReferenceNotReachable and the protocol's own error beneath it
            cause = exc.__cause__ or exc
            why = " ".join(f"{type(cause).__name__}: {cause}".split())[:300]
            raise StoreUnavailableError(f"{self.path}: {key}: target {ref[0] if isinstance(ref, (list, tuple)) else ''}"
                                        f" not reachable ({why})") from None
        if not isinstance(ref, (bytes, str)):
            want = (end or 0) - (start or 0) if start is not None else (int(ref[2]) if len(ref) == 3 else None)
            if want is not None and len(data) != want:
                raise StoreError(f"{self.path}: {key}: {ref[0]} is truncated ({len(data)} of {want} bytes)")
        return data

    def _put(self, key: str, data: bytes) -> None:
        raise StoreError(f"{self!r} is read-only")

    def _delete(self, key: str) -> None:
        raise StoreError(f"{self!r} is read-only")

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = prefix.strip("/")
        names = self._lazy_keys() if hasattr(self.fs.references, "zmetadata") else self.fs.find("")
        for name in names:
            name = name.lstrip("/")
            if not p or name.startswith(p + "/"):
                yield "/" + name

    def _lazy_keys(self) -> Iterator[str]:
        """The keys of Parquet references: fsspec's listing takes a nested group for an array (KeyError on its
        .zarray), so each array's chunk keys come from its own .zarray here, each asked of the references."""
        mapper = self.fs.references
        metadata: dict[str, Any] = dict(mapper.zmetadata)
        yield from metadata
        for key, zarray in metadata.items():
            if not key.endswith("/.zarray") or not isinstance(zarray, dict):
                continue
            field = key.rsplit("/", 1)[0]
            shape, chunks = list(zarray.get("shape") or []), list(zarray.get("chunks") or [])
            sep = str(zarray.get("dimension_separator") or ".")
            if not shape:
                candidates: Iterator[str] = iter([f"{field}/0"])
            else:
                grid = [range(-(-int(s) // max(1, int(c)))) for s, c in zip(shape, chunks, strict=False)]
                candidates = (f"{field}/{sep.join(map(str, index))}" for index in itertools.product(*grid))
            for name in candidates:
                if self.reference(name) is not None:
                    yield name


def s3_remote_options(url: str, anonymous: bool = False) -> dict[str, Any]:
    """fsspec's ``remote_options`` reading the S3 object ``url`` (s3fs) through the endpoint and region the
    signed S3 store resolves (``AWS_ENDPOINT_URL``, the profile, ``~/.aws/config``): the object our
    HEAD checked, wherever the references are read; ``anonymous``: unsigned, as s3fs's ``anon``."""
    from nczarr_conformance.stores.s3_object import S3Object

    obj = S3Object(url, _unsigned(anonymous))
    try:
        options: dict[str, Any] = {"endpoint_url": obj.endpoint,
                                   "client_kwargs": {"region_name": obj.store.client.meta.region_name}}
        return {**options, "anon": True} if anonymous else options
    finally:
        obj.close()


def refuse_output_path(dst: str, overwrite: bool) -> None:
    """StoreError unless ``dst`` can be created: absent (or ``overwrite``), in a directory that exists."""
    if os.path.lexists(dst) and not overwrite:
        raise StoreError(f"{dst}: already exists (give --overwrite to replace it)")
    parent = os.path.dirname(os.path.abspath(dst))
    if not os.path.isdir(parent):
        raise StoreError(f"{dst}: no such directory {parent}")


class ReferenceCollector(Store):
    """A writable store that becomes kerchunk references at ``dst`` on :meth:`commit`.

    What a writer puts is kept inline (metadata as JSON text, chunks as ``base64:``); a chunk put
    with :meth:`put_extent` from a file descriptor registered with :meth:`register` becomes the
    reference ``[path, offset, length]`` (nothing is read). Inline chunks of one array are
    bounded (``inline_limit`` bytes): past it, ``refuse(array_key, bytes)`` names why they
    could not be references and the write stops.
    """

    kind = "reference-writer"
    writable = True

    def __init__(self, dst: str | None, *, overwrite: bool = False, inline_limit: int = sys.maxsize,
                 refuse: Callable[[str, int], Exception] | None = None) -> None:
        super().__init__()
        self.dst = dst  # None: gathered in memory only (one file's share of ``--concat --reference``), never committed
        self.refs: dict[str, Any] = {}
        self.fds: dict[int, str] = {}
        self.targets: dict[str, Target] = {}
        #: how a chunk reference into a remote target is read back (``url`` → ``read(offset, length)``)
        self.remote: dict[str, Callable[[int, int], bytes]] = {}
        self.inline_limit = inline_limit
        self.refuse = refuse
        self.inlined: dict[str, int] = {}
        self.referenced = 0
        if dst is None:
            return
        if not is_reference_path(dst):
            raise UsageError(f"{dst}: references are written to a .json file (kerchunk JSON) or a .parq directory "
                             "(kerchunk Parquet)")
        refuse_output_path(dst, overwrite)

    def __repr__(self) -> str:
        return f"ReferenceCollector({self.dst!r})"

    def register(self, fd: int, path: str) -> None:
        """Chunks put from ``fd`` become references into ``path`` (recorded with its size and mtime now)."""
        real = os.path.abspath(path)
        self.fds[fd] = real
        self.targets[real] = Target.of(real)

    def register_remote(self, url: str, target: Target, read: Callable[[int, int], bytes]) -> int:
        """Chunks put with the returned handle (in place of a file descriptor) become references into the
        remote object ``url`` (an S3 object recorded with its size and ETag); ``read`` reads one back."""
        handle = -2 - len(self.remote)  # never a file descriptor
        self.fds[handle] = url
        self.targets[url] = target
        self.remote[url] = read
        return handle

    @staticmethod
    def _is_metadata(key: str) -> bool:
        return keys.split(key)[-1].startswith(".")

    def _put(self, key: str, data: bytes) -> None:
        name = key.lstrip("/")
        if self._is_metadata(key):
            self.refs[name] = data.decode("utf-8")
            return
        array = self._array_of(key)
        self.inlined[array] = self.inlined.get(array, 0) + len(data)
        if self.inlined[array] > self.inline_limit and self.refuse is not None:
            raise self.refuse(array, self.inlined[array])
        self.refs[name] = "base64:" + base64.b64encode(data).decode("ascii")

    @staticmethod
    def _array_of(key: str) -> str:
        """The array a chunk key is of (``/g/tas`` of ``g/tas/0.1``): inline bytes are bounded per array."""
        return "/" + "/".join(keys.split(key)[:-1])

    def _put_extent(self, key: str, fd: int, offset: int, size: int) -> None:
        path = self.fds.get(fd)
        if path is None:  # not a registered target: its bytes inline
            self._put(key, read_extent(fd, offset, size))
            return
        if offset + size > self.targets[path].size:
            raise StoreError(f"{fd_name(fd)}: chunk at {offset} of {size} bytes runs past the file's end")
        self.refs[key.lstrip("/")] = [path, offset, size]
        self.referenced += 1

    def _get(self, key: str, limit: int | None = None) -> bytes | None:
        ref = self.refs.get(key.lstrip("/"))
        if ref is None:
            return None
        if isinstance(ref, str):
            data = base64.b64decode(ref[7:]) if ref.startswith("base64:") else ref.encode("utf-8")
        elif ref[0] in self.remote:
            data = self.remote[ref[0]](int(ref[1]), int(ref[2]))
        else:
            with open(ref[0], "rb") as fh:
                fh.seek(ref[1])
                data = fh.read(ref[2])
        if limit is not None and len(data) > limit:
            raise too_big(key, len(data), limit)
        return data

    def _delete(self, key: str) -> None:
        self.refs.pop(key.lstrip("/"), None)

    def _list_prefix(self, prefix: str) -> Iterator[str]:
        p = prefix.strip("/")
        return ("/" + k for k in list(self.refs) if not p or k.startswith(p + "/"))

    def document(self) -> dict[str, Any]:
        """The kerchunk JSON document (version 1) with the targets recorded."""
        return {"version": 1, TARGETS_KEY: {p: t.as_json() for p, t in sorted(self.targets.items())},
                "refs": dict(sorted(self.refs.items()))}

    def commit(self) -> None:
        """Write the references at ``dst`` under a temporary name, then rename it into place."""
        if self.dst is None:
            raise StoreError("references gathered in memory have no output to commit to")
        self._quiesce()
        safety.raise_if_interrupted()
        self.check_targets_unchanged()
        target = Path(self.dst)
        parquet = self.dst.lower().rstrip("/").endswith(PARQUET_SUFFIXES)
        temp = safety.make_temp_dir(target) if parquet else None
        tmp_file: Path | None = None
        try:
            if temp is not None:
                write_parquet(self.document(), temp)
                os.chmod(temp, 0o777 & ~safety.umask())  # mkdtemp's 0700 is for the temporary only
                if os.path.lexists(target):
                    safety.swap_in(temp, target)
                else:
                    os.rename(temp, target)
            else:
                fd, tmp_file = safety.make_temp_file(target)
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(self.document(), fh, separators=(",", ":"))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp_file, 0o666 & ~safety.umask())
                if os.path.isdir(target):
                    raise StoreError(f"{target}: is a directory; a .json references output is a file")
                os.replace(tmp_file, target)  # (its bytes fsynced above)
                safety.sync_directory(target.parent)
                tmp_file = None
        finally:
            if temp is not None and temp.exists():
                shutil.rmtree(temp, ignore_errors=True)
            if tmp_file is not None:
                tmp_file.unlink(missing_ok=True)

    def check_targets_unchanged(self) -> None:
        """Refuse to publish references into a target that changed while they were being made."""
        for path, was in self.targets.items():
            problem = target_problem(path, was)
            if problem is not None:
                raise StoreError(f"{self.dst}: {problem} while writing; nothing written")

    def abort(self) -> None:
        self._quiesce()
        self.refs.clear()


class V3ReferenceCollector(ReferenceCollector):
    """A :class:`ReferenceCollector` of a Zarr v3 writer: ``zarr.json`` is its metadata (kept as text, not an
    inline chunk counted against the bound). Held in memory (``dst`` None): one file's share of
    ``--concat --reference`` into an Icechunk repository, which that repository's collector commits."""

    kind = "v3-reference-writer"

    @staticmethod
    def _is_metadata(key: str) -> bool:
        return keys.split(key)[-1] == "zarr.json"

    @staticmethod
    def _array_of(key: str) -> str:
        """``/g/tas`` of ``g/tas/c/0/1``: its bytes counted against the bound of its array, not of ``/g/tas/c/0``."""
        found = keys.split_v3_chunk(key)
        return "/" + found[0] if found is not None else "/" + "/".join(keys.split(key)[:-1])


def write_parquet(document: Mapping[str, Any], directory: Path) -> None:
    """kerchunk's Parquet layout of ``document`` in ``directory`` (with the targets in its ``.zmetadata``)."""
    try:
        from kerchunk.df import refs_to_dataframe
    except ImportError:
        raise MissingDependencyError("writing kerchunk Parquet needs kerchunk and fastparquet: pip install "
                                     "'nczarr-conformance[references]'") from None
    # kerchunk writes into a directory it creates: one inside ours, moved up
    inner = directory / "refs"
    refs_to_dataframe({"version": 1, "refs": dict(document["refs"])}, str(inner), record_size=PARQUET_RECORD_SIZE)
    meta_path = inner / ".zmetadata"
    meta = json.loads(meta_path.read_text("utf-8"))
    meta[TARGETS_KEY] = document[TARGETS_KEY]
    meta_path.write_text(json.dumps(meta), "utf-8")
    for entry in inner.iterdir():
        os.rename(entry, directory / entry.name)
    inner.rmdir()
