"""Store → canonical model, for every flavor (see flavors.py).

Opening an NCZarr dataset reads only the metadata objects its group lists name
(no LIST); pure Zarr groups are discovered with ``list_dir``.

Data are read lazily, so memory is bounded by what the metadata declares for a
chunk, never by a variable's declared shape:

* ``iter_chunks(akey)`` yields each chunk's region and values, one chunk at a time;
* ``iter_slabs(akey, max_bytes)`` yields pieces that, concatenated, are the variable
  in C order (what a printer needs), each at most ``max_bytes``;
* ``read_region(akey, selection)`` reads one hyperslab, touching only its chunks;
* ``read_variable`` / ``load_data`` materialise whole variables, but only under the
  in-memory budget (``limits.max_in_memory_bytes``); above it they refuse with one
  line before allocating.

Every chunk is read with the byte bound its codecs allow for its declared size and
decoded no further than that size (see codecs.py).
"""
from __future__ import annotations

import base64
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nczarr_conformance import keys, limits
from nczarr_conformance.codecs import (
    InflateError,
    Pipeline,
    StreamFailed,
    check_chain,
    decode_vlen,
    deflate_wbits,
    unshuffled_slabs,
)
from nczarr_conformance.codecs import build as build_codec
from nczarr_conformance.errors import FormatError, UnsupportedError
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    char_fill_byte,
    is_internal_attribute,
)
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import (
    DEFAULT_FILL,
    DEFAULT_MAXSTRLEN,
    StorageType,
    array_storage,
    attr_type_string,
    vlen_codec,
)
from nczarr_conformance.nczarr.flavors import MetadataSource, detect, find_piece
from nczarr_conformance.nczarr.streamed import PIECE_BYTES, copy_streamed
from nczarr_conformance.stores.base import RestartRead, Store

if TYPE_CHECKING:
    from concurrent.futures import Future

#: Slabs handed to consumers are at most this big (bytes, decoded) unless they ask otherwise.
SLAB_BYTES = 16 * 1024**2
#: Stored bytes accepted for a Zarr scalar's chunk, which netcdf-c reads even when over-long.
OVERLONG_SCALAR_BYTES = 1024**2
#: a read whose output is under this share of the chunks it touches (a point's time series, a window) is
#: budgeted a piece per read in flight, not a chunk (:meth:`ArrayInfo.held_per_read`): more reads at once
SPARSE_SHARE = 0.5
ANONYMOUS_DIM = "_Anonymous_Dim_{}"


def dim_placeholder(group: str, name: str) -> str:
    """A pure-Zarr dimension name awaiting its shared dimension: NUL, the group's key, NUL, the name.

    NUL, because keys.validate refuses it in a group key while a netCDF name may hold any other
    character: with '@' a group named ``g@1`` split at the wrong '@' (KeyError, a traceback line)."""
    return f"\x00{group}\x00{name}"


def scale_path(name: str) -> tuple[str, str]:
    """(group key, netCDF name) of a pure-Zarr dimension name holding ``/``: a path from the root group.

    kerchunk's ``SingleHdf5ToZarr`` writes each axis's HDF5 dimension scale by its full path without the
    leading ``/`` (``g1/y`` for the dimension ``y`` of group ``/g1``; a root dimension stays ``x``), where
    xarray keeps the text as a name of its own (``"g1/y"``, which no netCDF name may be). Read as the
    netCDF dimension it names; a leading ``/`` is taken too. FormatError for an empty or invalid segment."""
    parts = name.removeprefix("/").split("/")
    for part in parts:
        if not part:
            raise FormatError(f"empty segment in {name!r}")
        keys.validate(part)
    return keys.join("/", *parts[:-1]), parts[-1]


def dimension_home(where: str, name: str, groups: Iterable[str], vkey: str) -> tuple[str, str]:
    """(group key, netCDF name) of the dimension an ``_ARRAY_DIMENSIONS`` name of an array of group ``where``
    means, among the dataset's ``groups``: a plain name is ``where``'s own; one holding ``/`` a path from the
    root (:func:`scale_path`) to ``where`` or an ancestor, the groups a netCDF variable sees dimensions in.
    One FormatError line naming ``vkey`` otherwise (the reader's and ``nczarr-check``'s alike)."""
    home, base = where, name
    try:
        if "/" in name:
            home, base = scale_path(name)
        keys.validate(base)
    except FormatError:
        raise FormatError(f"{vkey}: dimension name {name!r} is not a valid netCDF name") from None
    if home != where and (home not in groups or not where.startswith(home.rstrip("/") + "/")):
        raise FormatError(f"{vkey}: dimension {name!r} names group {home}, which is neither the array's group "
                          f"{where} nor one of its ancestors")
    return home, base


_T = TypeVar("_T")


#: bytes one read may hold in chunks on their way to its output (fetched, being decoded), beyond the output
#: itself: a quarter of the output, and at least this much, so a small read of big chunks still overlaps a few
IN_FLIGHT_FLOOR = 64 << 20


#: a local read of chunks smaller than this decodes them one after another on the calling thread: the Python
#: around each chunk (its open, read, selection and copy) then outweighs the decode that threads overlap, and
#: two threads taking the interpreter lock in turn were slower than one (1200 chunks of 64 KiB, zlib and
#: shuffle: 0.28 s on two threads, 0.175 s on one; even at 128 KiB, 0.26 s both; 0.18 s against 0.22 s at 256 KiB)
SMALL_CHUNK_BYTES = 128 << 10


def read_threads(store: Store, chunk_bytes: int = 0, output_bytes: int = 0) -> int:
    """How many chunks one read decodes at once: ``NCZARR_READ_THREADS`` when set (1: one after the
    other), else what the store asks (``Store.read_concurrency``; 0, local stores: one per core,
    as zlib, zstd and blosc release the GIL while they decode; one for chunks under :data:`SMALL_CHUNK_BYTES`
    unless the store waits on a network).

    A remote store asks for more reads than cores (its cost is latency), but each read in flight
    holds a chunk fetched and one decoded (``2 * chunk_bytes``): that extra concurrency is cut to
    what fits in :data:`IN_FLIGHT_FLOOR` or a quarter of the output (``output_bytes``), whichever is
    more, so a whole-variable read of 25 MB chunks from S3 peaks near its output's size, not 16
    chunks above it; it never goes below one per core.
    """
    text = os.environ.get("NCZARR_READ_THREADS", "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    cores = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if not store.waits_on_network and 0 < chunk_bytes < SMALL_CHUNK_BYTES:
        return 1
    wanted = store.read_concurrency or cores
    if wanted > cores and chunk_bytes > 0:
        fits = max(IN_FLIGHT_FLOOR, output_bytes // 4) // (2 * chunk_bytes)
        wanted = max(cores, min(wanted, fits))
    return wanted


def run_each(work: Callable[[_T], None], items: Iterable[_T], threads: int) -> None:
    """``work(item)`` for every item, on up to ``threads`` threads; once one fails the rest are not
    started, the calls already running return, and the failure of the earliest item among them is
    raised: the error a read reports follows the order of its chunks, not which thread came first.

    Memory stays bounded whatever the number of items: they are drawn lazily, at most ``2 * threads``
    submitted and not yet done, and each thread holds one chunk at a time, so a read holds at most
    ``threads`` decoded chunks besides its output.
    """
    items = iter(items)
    first = list(itertools.islice(items, 2))
    if threads <= 1 or len(first) < 2:
        for item in itertools.chain(first, items):
            work(item)
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait  # a one-chunk read starts no pool

    pending: set[Future[None]] = set()
    order: dict[Future[None], int] = {}
    failed: list[tuple[int, BaseException]] = []

    def collect(done: Iterable[Future[None]]) -> None:
        for future in done:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                failed.append((order[future], error))

    pool = ThreadPoolExecutor(threads, thread_name_prefix="nczarr-read")
    try:
        for n, item in enumerate(itertools.chain(first, items)):
            future = pool.submit(work, item)
            order[future] = n
            pending.add(future)
            if len(pending) >= 2 * threads:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                collect(done)
                if failed:
                    break
        if failed:
            for future in pending:
                future.cancel()  # not started: never will be; the running ones are waited for below
        collect(wait(pending).done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failed:
        raise min(failed, key=lambda pair: pair[0])[1]


class ReadScope:
    """What the chunks of one read request share, dropped when the request ends: the index of each v3
    shard the request touches, read once however many of its inner chunks the request reads, on
    whichever thread comes first (the others wait for it). Per request, not per dataset, so a shard
    rewritten between two reads is indexed afresh by the second."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def once(self, key: str, load: Callable[[], _T]) -> _T:
        """``load()`` the first time ``key`` is asked for in this request; its value ever after."""
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = load()
            value: _T = self._values[key]
            return value


#: numpy's limit on array dimensions (netcdf-c allows 1024: such a variable is refused, not misread).
MAX_NDIM = 64

@dataclass
class ArrayInfo:
    """Everything needed to read one variable's chunks."""

    key: str
    zshape: tuple[int, ...]
    chunks: tuple[int, ...]
    storage: StorageType
    order: str
    separator: str
    pipeline: Pipeline
    fill: Any
    scalar: bool
    zarray: dict[str, Any] = field(default_factory=dict)

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(math.ceil(s / c) if s else 0 for s, c in zip(self.zshape, self.chunks, strict=True))

    def chunk_key(self, index: tuple[int, ...]) -> str:
        if not index:
            return keys.join(self.key, "0")
        return keys.join(self.key, self.separator.join(str(i) for i in index))

    def chunk_indices(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.grid))

    @property
    def chunk_nbytes(self) -> int:
        return math.prod(self.chunks) * self.storage.numpy.itemsize

    def max_stored_bytes(self) -> int:
        """The most bytes one stored chunk of this array may hold: what :meth:`load_chunk` reads at most,
        and what a writer copying the chunk as stored takes (a zip bomb is refused there as here)."""
        if isinstance(resolved(self.pipeline), UnavailablePipeline):  # a codec we lack: no bound of its own
            return limits.max_in_memory_bytes()
        bound = self.pipeline.max_encoded(self.chunk_nbytes)
        return bound if self.zshape else max(bound, OVERLONG_SCALAR_BYTES)

    def load_chunk(self, store: Store, index: tuple[int, ...], max_bytes: int,
                   scope: ReadScope | None = None) -> np.ndarray | None:
        """One decoded chunk in C order of the chunk shape, or None when it was never written.

        The stored object is read with the most bytes an honest encoding of the declared
        chunk could take, and decoding stops at the declared chunk size.
        """
        decoded = self._decoded(store, index, max_bytes)
        if decoded is None:
            return None
        arr = np.frombuffer(decoded, dtype=self.storage.numpy)
        chunk_shape = self.chunks or (1,)
        return arr.reshape(chunk_shape, order="F" if self.order == "F" else "C")

    def copy_chunk(self, store: Store, index: tuple[int, ...], max_bytes: int, scope: ReadScope | None,
                   out: np.ndarray, dst: tuple[Any, ...], src: tuple[Any, ...]) -> bool:
        """``out[dst] = chunk[src]`` for one chunk; False (nothing copied) when it was never written.

        A Zarr v2 chunk in C order whose last decoding stage is shuffle (netCDF-4's default chain) is
        unshuffled a slab of rows at a time straight into ``out`` (:func:`codecs.unshuffled_slabs`): a
        read then holds, besides its output, the chunk's inflated bytes alone on each thread, not a second
        chunk-sized array as well (a whole variable with shuffle grew the process 32 % past its output).
        Every other chunk is read whole (:meth:`load_chunk`, which each format overrides) and copied.
        """
        pipeline = resolved(self.pipeline)
        if self._streams(pipeline, dst, src):
            done = self._copy_streamed(store, index, max_bytes, pipeline, out, dst, src)
            if done is not None:
                return done
        elementsize = None if isinstance(pipeline, UnavailablePipeline) else pipeline.last_shuffle
        if (type(self).load_chunk is not ArrayInfo.load_chunk or elementsize != self.storage.numpy.itemsize
                or self.order == "F" or not self.zshape or not all(isinstance(s, slice) for s in (*dst, *src))
                or src[0].step not in (None, 1)):  # (rows one after another: a strided first axis reads whole)
            block = self.load_chunk(store, index, max_bytes, scope)
            if block is None:
                return False
            out[dst] = block[src]
            return True
        shuffled = self._decoded(store, index, max_bytes, keep_shuffled=True)
        if shuffled is None:
            return False
        target = out[dst]  # basic slices: a view of the output
        rows = range(*src[0].indices(self.chunks[0]))
        tail = self.chunks[1:]
        for r0, slab in unshuffled_slabs(shuffled, elementsize, math.prod(tail), rows):
            values = slab.view(self.storage.numpy).reshape(-1, *tail)
            target[r0 - rows.start:r0 - rows.start + len(values)] = values[(slice(None), *src[1:])]
        return True

    def held_per_read(self, chunks: int, output_bytes: int) -> int:
        """The bytes one chunk read in flight is budgeted, for :func:`read_threads`: a sparse read of streamed
        chunks (:meth:`_streams`, the output under :data:`SPARSE_SHARE` of the chunks it touches) holds a piece
        of stored and one of inflated bytes, not the chunk; anything else the chunk (a read of whole chunks
        keeps the budget it had: its output, against which the budget is measured, is as large)."""
        pipeline = resolved(self.pipeline)
        sparse = output_bytes < SPARSE_SHARE * chunks * self.chunk_nbytes
        if sparse and self._streamable(pipeline):
            return min(self.chunk_nbytes, PIECE_BYTES)
        return self.chunk_nbytes

    def _streamable(self, pipeline: Pipeline) -> bool:
        """A chunk this reader could inflate in pieces: a Zarr v2 chunk in C order whose chain is a deflate codec
        alone, of fixed-size values."""
        return (type(self).load_chunk is ArrayInfo.load_chunk and not isinstance(pipeline, UnavailablePipeline)
                and deflate_wbits(pipeline) is not None and self.order == "C" and bool(self.zshape)
                and self.storage.numpy.kind != "O")

    def _streams(self, pipeline: Pipeline, dst: tuple[Any, ...], src: tuple[Any, ...]) -> bool:
        """Whether a chunk's share is copied out as its bytes inflate (:mod:`nczarr.streamed`): a Zarr v2
        chunk in C order whose chain is a deflate codec alone, a selection of slices, a chunk this reader
        would hold whole (a larger one is refused as before). A share of the whole chunk streams too: its
        pieces go straight to the output, where a whole decode holds the chunk besides it (a whole variable
        from S3 grew 1.29x its output decoded whole, 1.21x streamed), its stored bytes fetched in one request
        (:data:`streamed.WHOLE_SHARE`)."""
        return self._streamable(pipeline) and all(isinstance(s, slice) for s in (*dst, *src))

    def _copy_streamed(self, store: Store, index: tuple[int, ...], max_bytes: int, pipeline: Pipeline,
                       out: np.ndarray, dst: tuple[Any, ...], src: tuple[Any, ...]) -> bool | None:
        """:func:`streamed.copy_streamed` for one chunk; None when the stream failed (damaged, truncated,
        over-long, cut short): the chunk is then decoded whole, which says why in the words of every read."""
        if self.chunk_nbytes > max_bytes:
            return None  # refused by the whole decode, with its one line
        wbits = deflate_wbits(pipeline)
        assert wbits is not None
        try:
            return copy_streamed(store, self.chunk_key(index), self.max_stored_bytes(), wbits, self.storage.numpy,
                                 self.chunks, out[dst], src)
        except (StreamFailed, RestartRead):
            return None

    def _decoded(self, store: Store, index: tuple[int, ...], max_bytes: int,
                 keep_shuffled: bool = False) -> bytes | np.ndarray | None:
        """The chunk's decoded bytes (still shuffled with ``keep_shuffled``), None when never written."""
        ckey = self.chunk_key(index)
        pipeline = resolved(self.pipeline)
        if isinstance(pipeline, UnavailablePipeline):
            raise UnsupportedError(pipeline.message)
        if self.chunk_nbytes > max_bytes:
            raise limits.LimitError(f"{ckey}: declared chunk {list(self.chunks)} needs {self.chunk_nbytes} bytes; "
                                    f"refusing to hold more than {max_bytes} in memory (NCZARR_MAX_IN_MEMORY)")
        # an over-long zarr-scalar chunk is read (its first element), within reason
        raw = store.get(ckey, limit=self.max_stored_bytes())
        if raw is None:
            return None
        stored = [raw]
        del raw  # handed over, not kept: a read holds a chunk's stored and decoded bytes at once only while inflating
        try:
            decoded = pipeline.decode_buffer(stored.pop(), self.chunk_nbytes, keep_shuffled)
        except InflateError as exc:
            if self.zshape or exc.head is None:
                raise FormatError(f"{ckey}: chunk {exc}") from exc
            # netcdf-c reads the first element of an over-long zarr-scalar chunk
            # (corpus ref_noshape); nczarr-check reports it as NCZ-CHUNK-SIZE.
            decoded = exc.head
        except Exception as exc:  # codecs raise many types; each is a corrupt chunk here
            raise FormatError(f"{ckey}: chunk does not decode: {exc}") from exc
        if len(decoded) != self.chunk_nbytes:
            raise FormatError(f"{ckey}: chunk holds {len(decoded)} bytes after decoding; "
                              f"{self.chunk_nbytes} expected")
        return decoded


@dataclass
class VlenArrayInfo(ArrayInfo):
    """An ``|O`` array whose first filter is ``vlen-utf8``/``vlen-bytes`` (netCDF string, as kerchunk and
    VirtualiZarr write it): ``pipeline`` is the rest of its chain (the later filters and the compressor), undone
    within the in-memory budget (variable-length items have no declared size), then the vlen codec's items,
    their count held to the chunk's (:func:`nczarr_conformance.codecs.decode_vlen`)."""

    vlen: str = "vlen-utf8"

    def max_stored_bytes(self) -> int:
        pipeline = resolved(self.pipeline)
        if isinstance(pipeline, UnavailablePipeline):
            return limits.max_in_memory_bytes()
        return pipeline.max_encoded(limits.max_in_memory_bytes())

    def load_chunk(self, store: Store, index: tuple[int, ...], max_bytes: int,
                   scope: ReadScope | None = None) -> np.ndarray | None:
        ckey = self.chunk_key(index)
        pipeline = resolved(self.pipeline)
        if isinstance(pipeline, UnavailablePipeline):
            raise UnsupportedError(pipeline.message)
        raw = store.get(ckey, limit=self.max_stored_bytes())
        if raw is None:
            return None
        try:
            encoded = pipeline.decode(raw, max_bytes)
        except InflateError as exc:
            raise FormatError(f"{ckey}: chunk {exc}") from exc
        except Exception as exc:  # codecs raise many types; each is a corrupt chunk here
            raise FormatError(f"{ckey}: chunk does not decode: {exc}") from exc
        chunk_shape = self.chunks or (1,)
        values = decode_vlen(self.vlen, encoded, math.prod(chunk_shape), ckey)
        return values.reshape(chunk_shape, order="F" if self.order == "F" else "C")


class UnavailablePipeline(Pipeline):
    """The codec chain of a variable whose codec this machine lacks (unknown id, or szip).

    netcdf-c opens such a dataset, lists the variable, and fails only when its data are
    read (``nczarr_test/run_filter_errors.sh``); so do we: the header reads, and every
    data access of this variable raises one line naming the variable and the codec.
    """

    def __init__(self, akey: str, codec_id: str) -> None:  # no super(): nothing can be built
        self.filters = []
        self.compressor = None
        self.message = f"{akey}: data cannot be read: codec {codec_id!r} is not available (numcodecs lacks it)"

    def _refuse(self) -> UnsupportedError:
        return UnsupportedError(self.message)

    def encode(self, arr: np.ndarray) -> bytes:
        raise self._refuse()

    def decode(self, raw: bytes, limit: int | None = None) -> bytes:
        raise self._refuse()

    def decode_buffer(self, raw: bytes, limit: int, keep_shuffled: bool = False) -> bytes | np.ndarray:
        raise self._refuse()

    def max_encoded(self, limit: int) -> int:
        raise self._refuse()


class DeferredPipeline(Pipeline):
    """A ``.zarray``'s codec chain, built when a chunk is first encoded or decoded.

    Why: building asks numcodecs, whose import costs about half of numpy's, and a header
    (``nczarr-dump -h``, ``open`` without reading data) decodes nothing. The chain's shape is checked
    when the array is opened (``check_chain``: a FormatError there, as before); a codec this machine
    lacks makes the chain an :class:`UnavailablePipeline` when built, which fails the variable's data
    and not the dataset, as it did when built at open.
    """

    def __init__(self, akey: str, zarray: dict[str, Any], itemsize: int) -> None:  # no super(): built later
        self.akey, self.zarray, self.itemsize = akey, zarray, itemsize
        self._built: Pipeline | None = None

    def resolve(self) -> Pipeline:
        if self._built is None:
            try:
                self._built = Pipeline(self.zarray.get("compressor"), self.zarray.get("filters"), self.itemsize)
            except UnsupportedError:  # a codec we lack fails the variable's data, not the dataset
                self._built = UnavailablePipeline(self.akey, _missing_codec(self.zarray))
        return self._built

    @property
    def filters(self) -> list[Any]:  # type: ignore[override]
        return self.resolve().filters

    @property
    def compressor(self) -> Any:  # type: ignore[override]
        return self.resolve().compressor

    def encode(self, arr: np.ndarray) -> bytes:
        return self.resolve().encode(arr)

    def decode(self, raw: bytes, limit: int | None = None) -> bytes:
        return self.resolve().decode(raw, limit)

    def decode_buffer(self, raw: bytes, limit: int, keep_shuffled: bool = False) -> bytes | np.ndarray:
        return self.resolve().decode_buffer(raw, limit, keep_shuffled)

    def max_encoded(self, limit: int) -> int:
        return self.resolve().max_encoded(limit)


def resolved(pipeline: Pipeline) -> Pipeline:
    """The built chain behind ``pipeline`` (itself unless deferred)."""
    return pipeline.resolve() if isinstance(pipeline, DeferredPipeline) else pipeline


def _missing_codec(zarray: dict[str, Any]) -> str:
    """The id of the first codec of ``zarray``'s chain that cannot be built here."""
    configs = [*(zarray.get("filters") or []), zarray.get("compressor")]
    for config in configs:
        try:
            build_codec(config, 1)
        except UnsupportedError:
            return str(config.get("id"))
    return "?"


def _int_list(value: Any, what: str, key: str, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                                              for v in value):
        raise FormatError(f"{key}: {what} must be a list of integers >= {minimum}, not {value!r}")
    return tuple(value)


def decode_fill(value: Any, st: StorageType, *, base64_strings: bool) -> Any:
    """The .zarray fill_value as a value of the chunk dtype (None stays None)."""
    if value is None:
        return None
    if st.nctype in ("char", "string"):
        if not isinstance(value, str):
            raise FormatError(f"fill_value {value!r} is not a string")
        if base64_strings and value:
            try:
                return base64.b64decode(value, validate=True)
            except ValueError:
                return value.encode("utf-8")
        return value.encode("utf-8") if st.numpy.kind == "S" else value
    if st.nctype in ("float", "double"):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if isinstance(value, str) and value in special:
            return special[value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise FormatError(f"fill_value {value!r} is not a {st.nctype}")
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not value.is_integer())):
        raise FormatError(f"fill_value {value!r} is not an integer")
    info = np.iinfo(st.numpy)
    if not info.min <= int(value) <= info.max:
        raise FormatError(f"fill_value {value!r} is out of range for {st.nctype}")
    return int(value)


class ChunkReader:
    """Reads and decodes the chunks of arrays whose metadata are known: the data half of a reader.

    :class:`DatasetReader` is one that read those metadata from its store. A reader in another
    process (a dask worker computing a client's arrays) is one of these alone: the client's
    ``ArrayInfo`` of the arrays it reads, over the store opened again there, so it reads the
    chunks exactly as the client would, under the metadata the client read.
    """

    def __init__(self, store: Store, arrays: dict[str, ArrayInfo], max_bytes: int | None = None) -> None:
        self.store = store
        self.arrays = arrays
        self.max_bytes = limits.max_in_memory_bytes() if max_bytes is None else max_bytes

    # ---- data ------------------------------------------------------------------------------
    def read_chunk(self, info: ArrayInfo, index: tuple[int, ...], scope: ReadScope | None = None) -> np.ndarray | None:
        """One decoded chunk in C order of the chunk shape, or None when it was never written
        (:meth:`ArrayInfo.load_chunk`: each format reads its own chunks); ``scope``: what one request
        shares among its chunks (:class:`ReadScope`)."""
        return info.load_chunk(self.store, index, self.max_bytes, scope)

    def copy_chunk(self, info: ArrayInfo, index: tuple[int, ...], scope: ReadScope | None, out: np.ndarray,
                   dst: tuple[Any, ...], src: tuple[Any, ...]) -> bool:
        """``out[dst] = chunk[src]`` for one chunk of a read request (:meth:`ArrayInfo.copy_chunk`); False
        when the chunk was never written (the caller fills ``out[dst]``)."""
        return info.copy_chunk(self.store, index, self.max_bytes, scope, out, dst, src)

    def _storage_selection(self, info: ArrayInfo, selection: tuple[slice, ...]) -> tuple[slice, ...]:
        zshape = info.zshape or (1,)
        if len(selection) != len(zshape):
            raise ValueError(f"{info.key}: {len(selection)}-d selection of a {len(zshape)}-d array")
        out = []
        for sel, size in zip(selection, zshape, strict=True):
            start, stop, step = sel.indices(size)
            if step != 1:
                raise ValueError(f"{info.key}: strided selections are not supported")
            out.append(slice(start, max(start, stop)))
        return tuple(out)

    def _region_raw(self, info: ArrayInfo, selection: tuple[slice, ...]) -> np.ndarray:
        """The stored values (chunk dtype) of a hyperslab, reading only the chunks it overlaps, each
        once, several at a time (:func:`run_each`); only the parts no chunk holds get the fill value."""
        chunks = info.chunks or (1,)
        shape = tuple(s.stop - s.start for s in selection)
        out = np.empty(shape, dtype=info.storage.numpy)
        if not all(shape):
            return out
        ranges = [range(s.start // c, (s.stop - 1) // c + 1) for s, c in zip(selection, chunks, strict=True)]

        def place(index: tuple[int, ...]) -> None:
            src, dst = [], []
            for i, c, s in zip(index, chunks, selection, strict=True):
                lo, hi = max(s.start, i * c), min(s.stop, (i + 1) * c)
                src.append(slice(lo - i * c, hi - i * c))
                dst.append(slice(lo - s.start, hi - s.start))
            if not self.copy_chunk(info, index if info.zshape else (), scope, out, tuple(dst), tuple(src)):
                out[tuple(dst)] = info.fill

        scope = ReadScope()
        held = info.held_per_read(math.prod(len(r) for r in ranges), out.nbytes)
        run_each(place, itertools.product(*ranges), read_threads(self.store, held, out.nbytes))
        return out

    def _budget(self, akey: str, count: int, info: ArrayInfo, what: str) -> None:
        nbytes = count * (info.storage.numpy.itemsize + (64 if info.storage.nctype == "string" else 0))
        if nbytes > self.max_bytes:
            raise limits.LimitError(f"{akey}: {what} needs about {nbytes} bytes; refusing to hold more than "
                                    f"{self.max_bytes} in memory (NCZARR_MAX_IN_MEMORY)")

    def read_region(self, akey: str, selection: tuple[slice, ...]) -> np.ndarray:
        """The values (as the model holds them) of one hyperslab of a variable.

        ``selection`` has one unit-step slice per stored dimension (scalars: one slice over
        their single element, or ``()``). Only the chunks the slab overlaps are read.
        """
        info = self.arrays[akey]
        if info.scalar and selection == ():
            selection = (slice(0, 1),)
        sel = self._storage_selection(info, selection)
        self._budget(akey, math.prod(s.stop - s.start for s in sel), info, f"selection {sel}")
        return self._to_model_values(self._region_raw(info, sel), info)

    def iter_chunks(self, akey: str) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        """(region, values) for each chunk of a variable in grid order; one chunk in memory at a time.

        The region is the part of the variable's index space the chunk covers (edge chunks
        are trimmed to the shape); unwritten chunks come as the fill value. A scalar yields
        once, with region ``()`` and a 0-d array.
        """
        info = self.arrays[akey]
        if info.scalar or not info.zshape:
            yield (), self.read_region(akey, ())
            return
        for index in info.chunk_indices():
            region = tuple(slice(i * c, min((i + 1) * c, s))
                           for i, c, s in zip(index, info.chunks, info.zshape, strict=True))
            yield region, self._to_model_values(self._region_raw(info, region), info)

    def iter_slabs(self, akey: str, max_bytes: int = SLAB_BYTES) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        """(region, values) pieces that, concatenated in order, are the variable in C order.

        Each piece is a run of one dimension with every later dimension whole and every
        earlier one fixed, at most ``max_bytes`` of stored values (at least one element per
        piece), so a printer streams a variable of any declared shape in bounded memory.
        """
        info = self.arrays[akey]
        if info.scalar or not info.zshape:
            yield (), self.read_region(akey, ())
            return
        shape = info.zshape
        if not all(shape):
            yield tuple(slice(0, s) for s in shape), self.read_region(akey, tuple(slice(0, s) for s in shape))
            return
        itemsize = info.storage.numpy.itemsize
        k = 0  # the dimension that is split: every later one fits whole in a piece
        while k < len(shape) - 1 and math.prod(shape[k + 1:]) * itemsize > max_bytes:
            k += 1
        row = math.prod(shape[k + 1:]) * itemsize
        step = max(1, max_bytes // row)
        for outer in itertools.product(*(range(n) for n in shape[:k])):
            for start in range(0, shape[k], step):
                region = (*(slice(i, i + 1) for i in outer), slice(start, min(start + step, shape[k])),
                          *(slice(0, n) for n in shape[k + 1:]))
                yield region, self.read_region(akey, region)

    def read_variable(self, akey: str) -> np.ndarray:
        """A whole variable, if it fits the in-memory budget (else LimitError, nothing allocated)."""
        info = self.arrays[akey]
        zshape = info.zshape or (1,)
        self._budget(akey, math.prod(zshape), info, f"declared shape {list(info.zshape)}")
        return self.read_region(akey, tuple(slice(0, s) for s in zshape))

    @staticmethod
    def _to_model_values(arr: np.ndarray, info: ArrayInfo) -> np.ndarray:
        if info.scalar:
            arr = arr.reshape(())
        st = info.storage
        if st.nctype == "string":
            flat = [v.decode("utf-8", errors="surrogateescape") if isinstance(v, bytes) else str(v)
                    for v in arr.ravel().tolist()]
            out = np.empty(arr.shape, dtype=object)
            out.ravel()[:] = flat
            if out.ndim == 0:
                out[()] = flat[0]
            return out
        if st.nctype == "char":
            return arr.astype("S1")
        return arr


class DatasetReader(ChunkReader):
    """Reads one dataset's metadata on construction; data on demand."""

    def __init__(self, store: Store, *, pure_zarr: bool = False, xarray: bool = True,
                 max_bytes: int | None = None) -> None:
        super().__init__(store, {}, max_bytes)
        self.meta = MetadataSource(store)
        self.flavor, self.superblock = detect(self.meta)
        if pure_zarr:
            self.flavor = "zarr"
        self.xarray = xarray
        self.default_maxstrlen = DEFAULT_MAXSTRLEN
        self.dataset = Dataset(self._read_group("/"))
        if self.flavor == "zarr":
            self._place_pure_zarr_dims()
        else:
            self._check_dimrefs()
        store.metadata_read()  # every metadata object read: one dataset's (see Store.metadata_read)

    @property
    def nczarr(self) -> bool:
        return self.flavor != "zarr"

    # ---- groups -------------------------------------------------------------------
    def _read_group(self, gkey: str) -> Group:
        if self.meta.get(keys.join(gkey, ".zgroup")) is None:
            if gkey == "/" and self.meta.get("/.zarray") is not None:
                raise UnsupportedError("the root is a bare Zarr array, not a group; netCDF needs a root group")
            raise FormatError(f"{keys.join(gkey, '.zgroup')}: {self.meta.missing(keys.join(gkey, '.zgroup'))}")
        group = Group()
        zattrs = self.meta.get(keys.join(gkey, ".zattrs")) or {}
        if gkey == "/" and isinstance(zattrs.get("_nczarr_default_maxstrlen"), int):
            self.default_maxstrlen = zattrs["_nczarr_default_maxstrlen"]
        group.attributes = self._read_attributes(gkey, zattrs)
        if self.nczarr:
            info = find_piece(self.meta, gkey, "group", with_v1=self.flavor == "nczarr-v1")
            if info is None:
                raise FormatError(f"{keys.join(gkey, '.zattrs')}: NCZarr group metadata (_nczarr_group) missing")
            group.dimensions = self._parse_dims(info, gkey)
            arrays = info.get("arrays", info.get("vars", []))
            subgroups = info.get("groups", [])
            for what, names in (("arrays", arrays), ("groups", subgroups)):
                if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
                    raise FormatError(f"{gkey}: _nczarr_group {what} must be a list of names")
        elif self.meta.consolidated is not None:
            arrays, subgroups = self._consolidated_children(gkey)
        else:
            arrays, subgroups = [], []
            for name in self.store.list_dir(gkey):
                child = keys.join(gkey, name)
                if self.meta.get(keys.join(child, ".zarray")) is not None:
                    arrays.append(name)
                elif self.meta.get(keys.join(child, ".zgroup")) is not None:
                    subgroups.append(name)
        for name, key in keys.members(gkey, arrays):
            group.variables[name] = self._read_variable(key)
        for name, key in keys.members(gkey, subgroups):
            group.groups[name] = self._read_group(key)
        return group

    def _consolidated_children(self, gkey: str) -> tuple[list[str], list[str]]:
        assert self.meta.consolidated is not None
        depth = len(keys.split(gkey))
        arrays, groups = [], []
        for key in self.meta.consolidated:
            segs = keys.split(key)
            if len(segs) == depth + 2 and keys.join(*segs[:depth]) == gkey:
                if segs[-1] == ".zarray":
                    arrays.append(segs[depth])
                elif segs[-1] == ".zgroup":
                    groups.append(segs[depth])
        return sorted(arrays), sorted(groups)

    @staticmethod
    def _parse_dims(info: dict[str, Any], gkey: str) -> dict[str, Dimension]:
        raw = info.get("dimensions", info.get("dims", {}))
        if not isinstance(raw, dict):
            raise FormatError(f"{gkey}: _nczarr_group dimensions must be an object")
        dims: dict[str, Dimension] = {}
        for name, spec in raw.items():
            if isinstance(spec, str) and spec.isdigit():
                spec = int(spec)  # v1 and early v2 wrote sizes as strings
            if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
                dims[name] = Dimension(spec, False)
            elif isinstance(spec, dict) and isinstance(spec.get("size"), int) and spec["size"] >= 0:
                dims[name] = Dimension(spec["size"], bool(spec.get("unlimited", 0)))
            else:
                raise FormatError(f"{gkey}: dimension {name!r} has no valid size ({spec!r})")
        return dims

    # ---- attributes --------------------------------------------------------------------
    def _read_attributes(self, node: str, zattrs: dict[str, Any]) -> dict[str, Attribute]:
        types: dict[str, Any] = {}
        if self.nczarr:
            piece = find_piece(self.meta, node, "attr", with_v1=self.flavor == "nczarr-v1")
            if piece is not None:
                types = piece.get("types", {}) or {}
                if not isinstance(types, dict):
                    raise FormatError(f"{keys.join(node, '.zattrs')}: _nczarr_attr types must be an object")
        attr_codec.refuse_empty_names(zattrs, keys.join(node, ".zattrs"))
        out: dict[str, Attribute] = {}
        for name, value in zattrs.items():
            if is_internal_attribute(name) or types.get(name) == "|J0":
                continue
            try:
                out[name] = attr_codec.decode(value, types.get(name))
            except (FormatError, UnsupportedError) as exc:
                raise FormatError(f"{keys.join(node, '.zattrs')}: attribute {name!r}: {exc}") from exc
        return out

    # ---- variables ---------------------------------------------------------------------
    def _read_variable(self, akey: str) -> Variable:
        zkey = keys.join(akey, ".zarray")
        zarray = self.meta.get(zkey)
        if zarray is None:
            raise FormatError(f"{zkey}: {self.meta.missing(zkey)} (listed in its group)")
        if zarray.get("zarr_format") != 2:
            raise UnsupportedError(f"{zkey}: zarr_format {zarray.get('zarr_format')!r}, only 2 is supported")
        zshape = _int_list(zarray.get("shape"), "shape", zkey, 0)
        chunks = _int_list(zarray.get("chunks"), "chunks", zkey, 1)
        if len(zshape) > MAX_NDIM:
            raise UnsupportedError(f"{zkey}: {len(zshape)} dimensions; numpy, and so this reader, zarr-python and "
                                   f"xarray, hold at most {MAX_NDIM}")
        if len(chunks) != len(zshape):
            raise FormatError(f"{zkey}: chunks {list(chunks)} do not match shape {list(zshape)}")
        # pure Zarr has no netCDF types: |S1 is numpy's char (zarr-python, xarray, our zarr flavor); in NCZarr it is
        # Appendix E's string of length 1, as netcdf-c reads it
        st = array_storage(zarray, u1_is_char=self.nczarr, s1_is_char=not self.nczarr)
        vlen = vlen_codec(zarray) if st.numpy.kind == "O" else None
        beyond = limits.int64_overflow(zshape, chunks, st.numpy.itemsize)
        if beyond is not None:  # refused here, before numpy meets an extent it cannot hold
            raise UnsupportedError(f"{zkey}: {beyond}, more than int64 ({limits.INT64_MAX}) holds; numpy, and so "
                                   "this reader and xarray, cannot address it")
        order = zarray.get("order", "C")
        if order not in ("C", "F"):
            raise FormatError(f"{zkey}: order must be 'C' or 'F', not {order!r}")
        sep = zarray.get("dimension_separator", ".")
        if sep not in (".", "/"):
            raise FormatError(f"{zkey}: dimension_separator must be '.' or '/', not {sep!r}")
        zattrs = self.meta.get(keys.join(akey, ".zattrs")) or {}
        check_chain(zarray.get("compressor"), zarray.get("filters"))
        # an |O array's first filter (vlen-*) is undone by VlenArrayInfo, after the rest of the chain
        chain = {**zarray, "filters": (zarray.get("filters") or [])[1:]} if vlen else zarray
        pipeline = DeferredPipeline(akey, chain, 1 if vlen else st.numpy.itemsize)
        attributes = self._read_attributes(akey, zattrs)
        scalar = not zshape
        dimensions: list[str] = []
        if self.nczarr:
            info = find_piece(self.meta, akey, "array", with_v1=self.flavor == "nczarr-v1") or {}
            refs = info.get("dimension_references", info.get("dimrefs", info.get("dimensions")))
            scalar = scalar or bool(info.get("scalar")) or info.get("storage") == "scalar"
            if refs is None:
                refs = []
                if not scalar:
                    raise FormatError(f"{keys.join(akey, '.zattrs')}: _nczarr_array dimension references missing")
            if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                raise FormatError(f"{akey}: dimension references must be a list of names")
            if scalar and zshape not in ((), (1,)):
                raise FormatError(f"{zkey}: scalar variable with shape {list(zshape)}; [1] expected")
            if not scalar and len(refs) != len(zshape):
                raise FormatError(f"{akey}: {len(refs)} dimension references for a {len(zshape)}-d array")
            dimensions = [r if r.startswith("/") else "/" + r for r in ([] if scalar else refs)]
            if st.nctype == "string" and st.maxstrlen == 1 and info.get("nczarr_type") == "char":
                st = StorageType("char", np.dtype("S1"))  # our |S1 char (nczarr/writer.py NCZARR_TYPE_KEY)
        shape = () if scalar else zshape
        fill_attr = attributes.get("_FillValue")
        if fill_attr is not None and st.nctype == "char" and fill_attr.type == "char" and fill_attr.value == "":
            fill_attr.value = "\x00"  # netcdf-c writes a NUL char fill as the C string ""
        if fill_attr is not None and fill_attr.type != st.nctype and not self.nczarr:
            # untyped Zarr attribute: netCDF gives _FillValue the variable's type
            fill_attr = attributes["_FillValue"] = attr_codec.decode(zattrs["_FillValue"], attr_type_string(st.nctype))
        if fill_attr is not None and fill_attr.type != st.nctype:
            raise FormatError(f"{akey}: _FillValue is {fill_attr.type}, variable is {st.nctype}")
        # Unwritten chunks hold the .zarray fill_value, as every reader (netcdf-c included) fills
        # them; only a null fill_value falls back to _FillValue, then to the netCDF default.
        fill = decode_fill(zarray.get("fill_value"), st, base64_strings=not self.nczarr)
        if fill is None or (st.nctype == "char" and fill == b""):
            fill = self._fill_from_attr(fill_attr, st)
        info_rec = (VlenArrayInfo(akey, zshape, chunks, st, order, sep, pipeline, fill, scalar, zarray, vlen=vlen)
                    if vlen else ArrayInfo(akey, zshape, chunks, st, order, sep, pipeline, fill, scalar, zarray))
        self.arrays[akey] = info_rec
        filters = list(zarray.get("filters") or [])
        if zarray.get("compressor") is not None:
            filters.append(zarray["compressor"])
        var = Variable(st.nctype, dimensions, shape, attributes, chunks=list(chunks) if not scalar else None,
                       endianness=st.endianness, filters=filters, no_fill=zarray.get("fill_value") is None,
                       order=order, dimension_separator=sep)
        if not self.nczarr:
            var.dimensions = self._xarray_names(akey, zattrs, zshape)
        return var

    @staticmethod
    def _fill_from_attr(attr: Attribute | None, st: StorageType) -> Any:
        if attr is None:
            value = DEFAULT_FILL[st.nctype]
            return str(value).encode("latin-1") if st.nctype == "char" else value
        if attr.type == "char":
            return char_fill_byte(attr.value)
        return attr.value[0]

    def _xarray_names(self, akey: str, zattrs: dict[str, Any], zshape: tuple[int, ...]) -> list[str]:
        names = zattrs.get("_ARRAY_DIMENSIONS") if self.xarray else None
        if isinstance(names, list) and len(names) == len(zshape) and all(isinstance(n, str) and n for n in names):
            return [dim_placeholder(keys.parent(akey), n) for n in names]
        return [dim_placeholder("/", ANONYMOUS_DIM.format(n)) for n in zshape]

    # ---- dimensions ----------------------------------------------------------------------
    def _groups_by_key(self) -> dict[str, Group]:
        return {key: g for key, g in self.dataset.root.walk()}

    def _check_dimrefs(self) -> None:
        """Every dimension reference is defined, and no array is longer than a dimension it uses.

        A longer array (NCZ-DIM-SIZE; an unlimited dimension's size is its current length) has
        values beyond what the dimension says there are: netcdf-c refuses the dataset (NC_EDIMSIZE),
        and a model holding both would make the next ``--append`` write over the extra records.
        """
        groups = self._groups_by_key()
        for gkey, group in groups.items():
            for vname, var in group.variables.items():
                for ref, size in zip(var.dimensions, var.shape, strict=True):
                    owner, name = keys.parent(ref), keys.basename(ref)
                    dim = groups.get(owner, Group()).dimensions.get(name)
                    if dim is None:
                        raise FormatError(f"{keys.join(gkey, vname)}: dimension {ref} is not defined")
                    if size > dim.size:
                        kind = "unlimited dimension" if dim.unlimited else "dimension"
                        raise FormatError(f"{keys.join(gkey, vname, '.zarray')}: extent {size} along {ref}, longer "
                                          f"than the {kind}'s size {dim.size} (NCZ-DIM-SIZE)")

    def _place_pure_zarr_dims(self) -> None:
        """Turn pure-Zarr dimension names into shared dimensions (xarray rules, netcdf-c names)."""
        groups = self._groups_by_key()
        for gkey, group in groups.items():
            for vname, var in group.variables.items():
                resolved = []
                for placeholder, size in zip(var.dimensions, var.shape, strict=True):
                    _, where, name = placeholder.split("\x00", 2)
                    resolved.append(self._define_dim(groups, where, name, size, keys.join(gkey, vname)))
                var.dimensions = resolved

    @staticmethod
    def _define_dim(groups: dict[str, Group], where: str, name: str, size: int, vkey: str) -> str:
        """The dimension ``name`` of group ``where``, defined there on first use.

        A name from ``_ARRAY_DIMENSIONS`` is local to the array's group, as netcdf-c 4.10
        reads it (``/g/x`` even when the root has an ``x`` of the same size; netcdf-c PR
        #3218); anonymous dimensions live in the root group. A name holding ``/`` is a path
        from the root (:func:`scale_path`: kerchunk's ``g1/y`` for the dimension ``y`` of ``/g1``),
        of the array's group or an ancestor, the groups a netCDF variable sees dimensions in.
        """
        home, base = dimension_home(where, name, groups, vkey)
        dim = groups[home].dimensions.get(base)
        if dim is None:
            groups[home].dimensions[base] = Dimension(size, False)
        elif dim.size != size:
            raise FormatError(f"{vkey}: dimension {base!r} has size {size} here but {dim.size} elsewhere in {home}")
        return keys.join(home, base)

    def load_data(self) -> Dataset:
        """Every variable's values, refused up front if together they exceed the in-memory budget."""
        total = 0
        for gkey, group in self.dataset.root.walk():
            for vname in group.variables:
                info = self.arrays[keys.join(gkey, vname)]
                count = math.prod(info.zshape or (1,))
                total += count * (info.storage.numpy.itemsize + (64 if info.storage.nctype == "string" else 0))
        if total > self.max_bytes:
            raise limits.LimitError(f"the variables' data need about {total} bytes; refusing to hold more than "
                                    f"{self.max_bytes} in memory (NCZARR_MAX_IN_MEMORY)")
        for gkey, group in self.dataset.root.walk():
            for vname, var in group.variables.items():
                var.data = self.read_variable(keys.join(gkey, vname))
        return self.dataset


def read_dataset(store: Store, *, data: bool = True, pure_zarr: bool = False, xarray: bool = True) -> Dataset:
    """The canonical model of the dataset in ``store``."""
    reader = DatasetReader(store, pure_zarr=pure_zarr, xarray=xarray)
    return reader.load_data() if data else reader.dataset
