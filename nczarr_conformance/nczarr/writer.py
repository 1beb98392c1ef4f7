"""Canonical model → store, in one of four layouts.

``nczarr-4.10`` (default) puts every NCZarr key in ``.zattrs`` as netcdf-c 4.10.1
does; ``nczarr-2`` writes what netcdf-c 4.9.1–4.9.2 write (libnczarr/zsync.c at v4.9.1 and
v4.9.2, identical there): ``_nczarr_superblock`` and ``_nczarr_group`` (``dims``, ``vars``,
``groups``) in ``.zgroup``, ``_nczarr_array`` (``dimrefs``, ``storage``) in ``.zarray``,
``_nczarr_attr`` (the user attributes' ``types``) in ``.zattrs``, the root's ``_NCProperties``;
it refuses unlimited dimensions (4.9.1–4.9.2 have none in NCZarr: ``nc_def_dim`` returns
NC_EDIMSIZE). Where netcdf-c 4.9.2's own output trips a reader, the form every reader takes, which
4.9.2 reads too: a ``.zattrs`` on every group and variable and ``"scalar": 1`` beside ``"storage":
"scalar"`` (netcdf-c 4.10.1 needs both), ``_ARRAY_DIMENSIONS`` on every variable (xarray knows
NCZarr's ``dimrefs`` only under 4.9.0's ``_NCZARR_ARRAY``; 4.9.2 writes it in the root group only);
``nczarr-2-upper`` writes what netcdf-c 4.9.0 reads (``_NCZARR_*`` keys,
``<U1`` char, little-endian data because 4.9.0 ignores the byte order on read,
uncompressed chunks because 4.9.0 returns compressed bytes as data;
it refuses strings, scalars and unlimited dimensions, on which 4.9.0 fails);
``zarr`` writes pure Zarr v2 with xarray's ``_ARRAY_DIMENSIONS``.

``nczarr-4.10`` and ``zarr`` put ``_ARRAY_DIMENSIONS`` on the variables of every group,
as netcdf-c 4.10.1 does (nczarr.md names only the root group, but xarray, its datatree
and GDAL need it in every group they open); ``xarray=False`` (``noxarray``) leaves it out.
Char is ``>S1`` in NCZarr (Appendix E; netcdf-c needs it, zarr-python 3 refuses it) and
``|S1`` in pure Zarr (what zarr-python and xarray read; netcdf-c then sees strings);
``char_as`` picks the other one.

Chunks come from a :data:`ChunkSource` so a converter can stream them; all data
chunks are put before any metadata object, the root metadata after the rest, and the
consolidated ``.zmetadata`` last of all, so a reader never sees metadata pointing at chunks
that are not there yet, nor a ``.zmetadata`` that disagrees with the objects it summarises.
``consolidate=None`` (the default) writes it unless an array is ``>S1`` or a string variable
has a non-empty fill (netcdf-c's text, not Zarr's base64): zarr-python 3 parses every entry of
a ``.zmetadata`` when it opens the group, so one such array would make it refuse the whole
dataset, where without ``.zmetadata`` it reads every other array (``True`` writes it anyway,
``False`` never). The rule is :func:`.consolidated.refused_by_zarr_python`, which nczarr-fix applies too.
"""
from __future__ import annotations

import base64
import itertools
import json
import math
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.codecs import Pipeline, shuffle_config
from nczarr_conformance.errors import UnsupportedError, UsageError
from nczarr_conformance.flavor_names import CHAR_AS_CHOICES
from nczarr_conformance.flavor_names import FLAVOR_ALIASES as FLAVOR_ALIASES
from nczarr_conformance.flavor_names import WRITE_FLAVORS as WRITE_FLAVORS
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Group,
    Variable,
    is_internal_attribute,
)
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.consolidated import (
    CONSOLIDATED_KEY,
    consolidated_bytes,
    refused_by_zarr_python,
)
from nczarr_conformance.nczarr.dtypes import (
    DEFAULT_FILL,
    DEFAULT_MAXSTRLEN,
    dtype_string,
    numpy_dtype,
)
from nczarr_conformance.stores.base import Store

SUPERBLOCK = {"version": "2.0.0"}


def _provenance() -> str:
    """The root's _NCProperties in the nczarr-2 layout: who wrote it, in netcdf-c's syntax
    (``version=2,netcdf=4.9.2,nczarr=2.0.0`` in a 4.9.2 store)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("nczarr-conformance")
    except PackageNotFoundError:
        ours = "unknown"
    return f"version=2,nczarr_conformance={ours},nczarr=2.0.0"


#: codecs written as the .zarray "compressor" when last in the chain; fletcher32 too, as netcdf-c's
#: NCZarr writes the last filter there ({"id": "fletcher32"} after shuffle and zlib)
COMPRESSOR_IDS = frozenset({"zlib", "gzip", "blosc", "zstd", "bz2", "lzma", "lz4", "fletcher32"})
AUTO_CHUNK_BYTES = 4 * 1024**2
SCALAR_DIM = "_scalar_"
#: ``char_as`` values → the char dtype written
CHAR_DTYPES = dict(zip(CHAR_AS_CHOICES, ("|S1", ">S1"), strict=True))
#: the ``_nczarr_array`` key that says a ``|S1`` array is char (``char_as="S1"``, nc2nczarr --reference's default):
#: without it, |S1 is nczarr.md Appendix E's string of length 1. The name is the NCZarr v3 draft's (netcdf-c PR
#: #3068, zformat3.c: ``nczarr_type``, ``char`` or ``string``); netcdf-c 4.10.1 ignores it (reads string, as before)
NCZARR_TYPE_KEY = "nczarr_type"
#: the char dtype each flavor writes unless told otherwise
DEFAULT_CHAR_AS = {"nczarr-4.10": ">S1", "nczarr-2": ">S1", "zarr": "S1"}
#: the layouts of netcdf-c before 4.9.3 (``_nczarr_*``/``_NCZARR_*`` keys in .zgroup and .zarray, ``dims``,
#: ``vars``, ``dimrefs``), with no unlimited dimension
PRE_410 = ("nczarr-2", "nczarr-2-upper")

#: (variable key, variable, region) → the region's values in model dtype.
ChunkSource = Callable[[str, Variable, tuple[slice, ...]], np.ndarray]
Progress = Callable[[int, int, int], None]  # increments: (chunks, bytes before encoding, bytes written)
#: (array plan) → None, or a function giving a chunk's stored bytes ready to copy (None: encode it;
#: NOT_STORED: the source never wrote this chunk, so it reads as fill and need not be read nor written)
RawSource = Callable[["ArrayPlan"], Callable[[tuple[int, ...]], bytes | None] | None]
NOT_STORED = b""
IN_FLIGHT_BYTES = 64 * 1024**2
#: chunks smaller than this (unencoded) that are copied into a directory store are copied on one thread
SERIAL_COPY_BYTES = 1024**2
#: chunks of at least this many bytes are verified on one sample chunk, smaller ones on two
VERIFY_BYTES = 4 * 1024**2
#: the slab of a sample chunk compared with the source: leading rows holding at least this many bytes
VERIFY_SLAB_BYTES = 1024**2
STRING_SCAN_ELEMENTS = 1_000_000


def model_source(akey: str, var: Variable, region: tuple[slice, ...]) -> np.ndarray:
    """The default source: slices of ``var.data`` (fill where there is none)."""
    if var.data is None:
        raise UsageError(f"{akey}: no data to write")
    return np.asarray(var.data)[region] if region else np.asarray(var.data)


class ChunkEncoder(Protocol):
    """What encodes a chunk for the store and decodes a copied one to check it (:class:`Pipeline` for v2)."""

    def encode(self, arr: np.ndarray) -> bytes: ...

    def decode(self, raw: bytes, limit: int | None = None) -> bytes: ...


@dataclass
class ArrayPlan:
    """What will be written for one variable."""

    key: str
    var: Variable
    zshape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype_text: str
    storage: np.dtype
    fill_json: Any
    fill_storage: Any
    compressor: dict[str, Any] | None
    filters: list[dict[str, Any]] | None
    maxstrlen: int = 0
    #: fill_value null without NOFILL (``default_fill=False``): every chunk is written, unstored ones as the fill
    write_every_chunk: bool = False

    @property
    def chunk_count(self) -> int:
        """How many chunks the grid has (1 for a scalar)."""
        return math.prod(math.ceil(s / c) for s, c in zip(self.zshape, self.chunks, strict=True))

    def regions(self) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
        if not self.zshape:
            yield (), ()
            return
        grid = [math.ceil(s / c) for s, c in zip(self.zshape, self.chunks, strict=True)]
        for index in itertools.product(*(range(n) for n in grid)):
            yield index, tuple(slice(i * c, min((i + 1) * c, s))
                               for i, c, s in zip(index, self.chunks, self.zshape, strict=True))


def auto_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunks for a contiguous variable: the whole shape, split along leading dims to ≤ 4 MiB."""
    chunks = [max(1, s) for s in shape]
    i = 0
    while math.prod(chunks) * itemsize > AUTO_CHUNK_BYTES and i < len(chunks):
        rest = math.prod(chunks[i + 1:]) * itemsize
        chunks[i] = max(1, AUTO_CHUNK_BYTES // max(1, rest))
        if chunks[i] > 1 or rest <= AUTO_CHUNK_BYTES:
            break
        i += 1
    return tuple(chunks)


class DatasetWriter:
    def __init__(self, dataset: Dataset, store: Store, *, flavor: str = "nczarr-4.10", xarray: bool = True,
                 source: ChunkSource = model_source, progress: Progress | None = None, threads: int = 4,
                 raw: RawSource | None = None, consolidate: bool | None = None, char_as: str | None = None,
                 default_fill: bool = True) -> None:
        if flavor not in FLAVOR_ALIASES:
            raise UsageError(f"unknown flavor {flavor!r}; choose one of {', '.join(WRITE_FLAVORS)}")
        self.ds = dataset
        self.store = store
        self.flavor = FLAVOR_ALIASES[flavor]
        self.xarray = xarray
        self.consolidate = consolidate
        if char_as is not None and char_as not in CHAR_DTYPES:
            raise UsageError(f"char_as {char_as!r}: choose one of {', '.join(CHAR_DTYPES)}")
        if char_as is not None and self.flavor not in DEFAULT_CHAR_AS:
            raise UsageError(f"{self.flavor} writes char as <U1 (what netcdf-c 4.9.0 reads); it takes no char_as")
        self.char_dtype = CHAR_DTYPES[char_as or DEFAULT_CHAR_AS.get(self.flavor, ">S1")]
        #: False: a numeric or char variable without _FillValue gets fill_value null, not netCDF's default fill, so
        #: xarray does not mask its values (reader_needs: xarray-default-fill, xarray-char-fill); its chunks are all
        #: written
        self.default_fill = default_fill
        self.metadata: dict[str, Any] = {}  # every metadata object put, as JSON: the .zmetadata entries
        self.source = source
        self.progress = progress
        self.threads = max(1, threads)
        self.raw = raw
        self.copied = 0  # chunks copied as the source stored them
        self._count = threading.Lock()
        self.plans: dict[str, ArrayPlan] = {}
        # codec chain -> whether its sample decoded to the source's values (see _raw_copy_verified)
        self.proven: dict[Hashable, bool] = {}

    # ---- planning ------------------------------------------------------------------------
    def validate(self) -> None:
        # a key named .zarray, .zattrs, .zgroup or .zmetadata (or any .z…) would be, or shadow, Zarr metadata
        clashes = [keys.join(gkey, name) for gkey, group in self.ds.root.walk()
                   for name in [*group.variables, *group.groups] if name.startswith(".z")]
        if clashes:
            raise UnsupportedError(f"{', '.join(clashes)}: variable or group names starting with '.z' collide "
                                   "with Zarr's metadata keys")
        for gkey, group in self.ds.root.walk():
            for name in [*group.dimensions, *group.variables, *group.groups]:
                _check_name(name, gkey)

            clash = set(group.variables) & set(group.groups)
            if clash:
                raise UnsupportedError(f"{gkey}: {sorted(clash)} name both a variable and a group")
            for name, dim in group.dimensions.items():
                if dim.unlimited and self.flavor in PRE_410:
                    raise UnsupportedError(f"{keys.join(gkey, name)}: unlimited dimensions cannot be written as "
                                           f"{self.flavor} (netcdf-c before 4.9.3 has none in NCZarr); -u makes "
                                           "them fixed, or use --flavor nczarr")
            for vname, var in group.variables.items():
                vkey = keys.join(gkey, vname)
                if len(var.dimensions) != len(var.shape):
                    raise UnsupportedError(f"{vkey}: {len(var.dimensions)} dimensions but shape {list(var.shape)}")
                for ref, size in zip(var.dimensions, var.shape, strict=True):
                    try:
                        dim = self.ds.find_dimension(ref)
                    except KeyError:
                        raise UnsupportedError(f"{vkey}: dimension {ref} is not defined") from None
                    if dim.size != size:
                        raise UnsupportedError(f"{vkey}: shape {list(var.shape)} disagrees with {ref} = {dim.size}")
                if self.flavor == "nczarr-2-upper" and var.type == "string":
                    raise UnsupportedError(f"{vkey}: string variables cannot be written as nczarr-2-upper "
                                           "(netcdf-c 4.9.0 crashes on them); use --flavor nczarr")
                if self.flavor == "nczarr-2-upper" and var.is_scalar:
                    raise UnsupportedError(f"{vkey}: scalar variables cannot be written as nczarr-2-upper "
                                           "(netcdf-c 4.9.0 crashes on every NCZarr scalar); use --flavor nczarr")
            if self.flavor == "nczarr-2-upper":
                for _, attrs in self._all_attribute_sets(gkey, group):
                    bad = [n for n, a in attrs.items() if a.type == "string"]
                    if bad:
                        raise UnsupportedError(f"{gkey}: string attributes {bad} cannot be written as nczarr-2-upper")

    @staticmethod
    def _all_attribute_sets(gkey: str, group: Group) -> Iterator[tuple[str, dict[str, Attribute]]]:
        yield gkey, group.attributes
        for vname, var in group.variables.items():
            yield keys.join(gkey, vname), var.attributes

    def plan(self) -> None:
        for gkey, group in self.ds.root.walk():
            for vname, var in group.variables.items():
                akey = keys.join(gkey, vname)
                self.plans[akey] = self._plan_array(akey, var)

    def _plan_array(self, akey: str, var: Variable) -> ArrayPlan:
        scalar_as_1 = var.is_scalar and self.flavor != "zarr"
        zshape = (1,) if scalar_as_1 else tuple(var.shape)
        endianness = var.endianness if self.flavor != "nczarr-2-upper" else "little"
        maxstrlen = 0
        if var.type == "string":
            maxstrlen = max(DEFAULT_MAXSTRLEN, self._longest_string(akey, var))
            dtype_text = dtype_string("string", maxstrlen=maxstrlen)
        elif var.type == "char" and self.flavor == "nczarr-2-upper":
            dtype_text = "<U1"
        elif var.type == "char":
            dtype_text = self.char_dtype
        else:
            dtype_text = dtype_string(var.type, endianness)
        storage = np.dtype(f"S{maxstrlen}") if var.type == "string" else (
            np.dtype("S1") if var.type == "char" else numpy_dtype(var.type, endianness))
        if var.is_scalar:
            chunks: tuple[int, ...] = (1,) if scalar_as_1 else ()
        elif var.chunks:
            if len(var.chunks) != len(zshape) or any(int(c) < 1 for c in var.chunks):
                raise UnsupportedError(f"{akey}: chunks {var.chunks} do not fit shape {list(zshape)}")
            chunks = tuple(int(c) for c in var.chunks)
        else:
            chunks = auto_chunks(zshape, storage.itemsize)
        fill = var.fill_value if var.fill_value is not None else var.storage_fill
        if fill is None or var.no_fill:
            fill = DEFAULT_FILL[var.type]
            if var.type == "char":
                fill = b"\x00"
        compressor, filters = self._codecs(akey, var, storage.itemsize)
        if self.flavor == "nczarr-2-upper":
            # Debian's netcdf-c 4.9.0 has no NCZarr codecs: it hands back compressed or
            # shuffled chunk bytes as data, silently. Uncompressed is the only safe form.
            compressor, filters = None, None
        # NOFILL: netcdf-c writes fill_value null (and reads it back as NOFILL); the default fill
        # still pads edge chunks, where no value is ever read
        unfilled = (not self.default_fill and not var.no_fill and var.fill_value is None
                    and (var.storage_fill is None or var.storage_fill == DEFAULT_FILL[var.type])
                    and var.type != "string")
        fill_json = None if var.no_fill or unfilled else self._fill_json(var.type, fill, dtype_text)
        return ArrayPlan(akey, var, zshape, chunks, dtype_text, storage, fill_json,
                         _to_storage(np.array(fill, dtype=numpy_dtype(var.type)), var.type, storage),
                         compressor, filters, maxstrlen, write_every_chunk=unfilled)

    def _longest_string(self, akey: str, var: Variable) -> int:
        """Longest UTF-8 string, read in slabs along the first axis so memory stays bounded."""
        longest = 1
        if var.is_scalar:
            return max(longest, len(str(np.asarray(self.source(akey, var, ()))[()]).encode("utf-8")))
        rows_per_slab = max(1, STRING_SCAN_ELEMENTS // max(1, math.prod(var.shape[1:])))
        for start in range(0, var.shape[0], rows_per_slab):
            region = (slice(start, min(start + rows_per_slab, var.shape[0])), *(slice(0, s) for s in var.shape[1:]))
            for v in np.asarray(self.source(akey, var, region)).ravel().tolist():
                longest = max(longest, len(str(v).encode("utf-8")))
        return longest

    def _fill_json(self, nctype: str, fill: Any, dtype_text: str) -> Any:
        if nctype == "char":
            raw = (fill if isinstance(fill, bytes) else str(fill).encode("latin-1")) or b"\x00"
            if self.flavor == "zarr" and dtype_text == "|S1":
                # a Zarr v2 bytes fill is base64 of exactly one byte (TensorStore refuses "" for |S1)
                return base64.b64encode(raw).decode("ascii")
            return "" if raw == b"\x00" else raw.decode("latin-1")  # netcdf-c writes a NUL char fill as ""
        if nctype == "string":
            text = str(fill)
            if self.flavor == "zarr" and text:
                return base64.b64encode(text.encode("utf-8")).decode("ascii")
            return text
        if nctype in ("float", "double"):
            return attr_codec.float_json(float(fill), nctype)
        return int(fill)

    @staticmethod
    def _codecs(akey: str, var: Variable, itemsize: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
        configs = [dict(c) for c in (var.filters or [])]
        compressor = None
        if configs and configs[-1].get("id") in COMPRESSOR_IDS:
            compressor = configs.pop()
        filters = [shuffle_config(itemsize) if c.get("id") == "shuffle" else c for c in configs]
        Pipeline(compressor, filters, itemsize)  # fail now, before any byte is written
        return compressor, (filters or None)

    # ---- writing ---------------------------------------------------------------------------
    def write(self) -> None:
        self.validate()
        self.plan()
        for plan in self.plans.values():
            self._write_chunks(plan)
        self.write_metadata()

    def write_metadata(self) -> None:
        """Every metadata object after the chunks: arrays, then groups children first and the root
        last, then ``.zmetadata`` (``--concat`` calls this on the client once the workers are done)."""
        for akey, plan in self.plans.items():
            self._write_array_metadata(akey, plan)
        groups = list(self.ds.root.walk())
        for gkey, group in reversed(groups):  # children first, root last
            self._write_group_metadata(gkey, group)
        if self.consolidated:  # last of all: never a .zmetadata ahead of the objects it summarises
            self.store.put(CONSOLIDATED_KEY, consolidated_bytes(self.metadata))

    @property
    def consolidated(self) -> bool:
        """Whether ``.zmetadata`` is written (after :meth:`plan`): see the module docstring."""
        if self.consolidate is not None:
            return self.consolidate
        return not any(refused_by_zarr_python(p.dtype_text, p.fill_json, fill_is_text=self._text_fill(p))
                       for p in self.plans.values())

    def _text_fill(self, plan: ArrayPlan) -> bool:
        """A string variable's fill is written as text, as netcdf-c writes and reads it; Zarr v2 says a
        bytes fill is base64, so zarr-python refuses it (or decodes it to other bytes), and through a
        ``.zmetadata`` it then refuses the whole group. Pure Zarr writes base64 (netcdf-c does not read
        those variables' fill anyway: it sees pure Zarr without _FillValue types)."""
        return plan.var.type == "string" and self.flavor != "zarr"

    def _put_metadata(self, key: str, doc: dict[str, Any]) -> None:
        payload = _dumps(doc)
        self.metadata[key] = json.loads(payload)  # exactly what the object holds
        self.store.put(key, payload)

    def _write_chunks(self, plan: ArrayPlan,
                      select: Callable[[tuple[int, ...]], tuple[int, ...] | None] | None = None) -> None:
        """Encode (or copy) and put every chunk of ``plan``.

        ``select`` maps a chunk index of ``plan`` to the index it is put at, or None to leave
        it out (``--concat``: one file's chunks at their place in the target, see conversion/concat.py).
        """
        pipeline = self._pipeline(plan)
        fill_chunk = np.full(plan.chunks or (1,), plan.fill_storage, dtype=plan.storage)
        # netcdf-c 4.10.1 reads a missing chunk of a big-endian variable as byte-swapped
        # fill, so such chunks are written out; elsewhere an all-fill chunk is left out.
        # A NOFILL variable has no fill to leave out: every chunk the source stored is written.
        skip_fill = plan.storage.byteorder != ">" and not plan.var.no_fill and not plan.write_every_chunk
        raw_copy = self.raw(plan) if self.raw is not None else None
        if raw_copy is not None and not self._raw_copy_verified(plan, pipeline, raw_copy, fill_chunk):
            raw_copy = None
        # (fd, offset, size) of a chunk copied as-is (sources/hdf5_chunks.py): the store copies the file
        # range itself (a directory store in the kernel), so the bytes need not pass through Python
        locate: Callable[[tuple[int, ...]], tuple[int, int, int] | None] | None = getattr(raw_copy, "extent", None)

        def encode(item: tuple[tuple[int, ...], tuple[slice, ...]]) -> tuple[int, int]:
            index, region = item
            at = index if select is None else select(index)
            assert at is not None
            ckey = self._chunk_key(plan, at)
            if raw_copy is not None:
                where = locate(index) if locate is not None else None
                if where is not None:  # the source's compressed chunk, copied file to file
                    self.store.put_extent(ckey, *where)
                    with self._count:
                        self.copied += 1
                    return fill_chunk.nbytes, where[2]
                payload = raw_copy(index)
                if payload == NOT_STORED:  # all fill (NOFILL: undefined) in the source; nothing to read
                    if skip_fill or plan.var.no_fill:
                        return fill_chunk.nbytes, 0
                    payload = pipeline.encode(fill_chunk)
                    self.store.put(ckey, payload)
                    return fill_chunk.nbytes, len(payload)
                if payload is not None:  # the source's compressed chunk, byte for byte
                    self.store.put(ckey, payload)
                    with self._count:
                        self.copied += 1
                    return fill_chunk.nbytes, len(payload)
            block = self._block(plan, region)
            if block.shape == fill_chunk.shape:
                chunk = np.ascontiguousarray(block)  # an interior chunk: no padding, no copy
            else:
                chunk = fill_chunk.copy()
                chunk[tuple(slice(0, n) for n in block.shape)] = block
            if skip_fill and _all_fill(chunk, fill_chunk):
                return chunk.nbytes, 0
            payload = pipeline.encode(chunk)
            self.store.put(ckey, payload)  # in the worker: S3 PUTs and file writes overlap
            return chunk.nbytes, len(payload)

        # no pool: starting a thread per variable costs more than it overlaps on small files (a variable of one
        # chunk has nothing to overlap: a file of 2,000 such variables started 2,000 pools); and small chunks
        # copied file to file are file creations in one directory, which threads only contend on in the kernel
        # (7,300 chunks of 64 KiB: 0.8-1.0 s on one thread, 2.0-2.9 s on 2 or 4, measured on 2 cores)
        if self.threads == 1 or plan.chunk_count < 2 or (
                locate is not None and fill_chunk.nbytes < SERIAL_COPY_BYTES
                and getattr(self.store, "kind", "") == "file"):
            for item in plan.regions():
                if select is None or select(item[0]) is not None:
                    self._done(encode(item))
            return
        # A sliding window of chunks in flight, bounded in bytes as well as in number, so
        # memory stays flat whatever the variable's size.
        window = max(1, min(self.threads * 2, IN_FLIGHT_BYTES // max(1, fill_chunk.nbytes)))
        pending: deque[Future[tuple[int, int]]] = deque()
        with ThreadPoolExecutor(self.threads) as pool:
            try:
                for item in plan.regions():
                    if select is not None and select(item[0]) is None:
                        continue
                    pending.append(pool.submit(encode, item))
                    if len(pending) >= window:
                        self._done(pending.popleft().result())
                while pending:
                    self._done(pending.popleft().result())
            except BaseException:
                for future in pending:  # queued chunks are not started; the pool waits for running ones
                    future.cancel()
                raise

    def _pipeline(self, plan: ArrayPlan) -> ChunkEncoder:
        """What encodes a chunk of ``plan`` (and decodes a copied one to check it): the v2 chain here;
        the Zarr v3 writer (zarr3/writer.py) puts its codec chain in this place."""
        return Pipeline(plan.compressor, plan.filters, plan.storage.itemsize)

    def _chunk_key(self, plan: ArrayPlan, at: tuple[int, ...]) -> str:
        """The key of chunk ``at``: Zarr v2's ``.``-separated indices (``0`` for a scalar)."""
        return keys.join(plan.key, ".".join(str(i) for i in at) if at else "0")

    def _block(self, plan: ArrayPlan, region: tuple[slice, ...]) -> np.ndarray:
        """The source's values for one chunk region, in the chunk dtype."""
        values = np.asarray(self.source(plan.key, plan.var, () if plan.var.is_scalar else region))
        if plan.var.is_scalar:
            values = values.reshape(plan.chunks)
            region = tuple(slice(0, 1) for _ in plan.chunks)
        block = _to_storage(values, plan.var.type, plan.storage, plan.key)
        if block.shape != tuple(s.stop - s.start for s in region):
            raise UsageError(f"{plan.key}: source gave shape {block.shape} for region {region}")
        return block

    def _raw_copy_verified(self, plan: ArrayPlan, pipeline: ChunkEncoder,
                           raw_copy: Callable[[tuple[int, ...]], bytes | None], fill_chunk: np.ndarray) -> bool:
        """Decode one copied chunk per codec chain and compare it with the source's values there.

        A copied chunk is only as right as the assumption that the source's codecs are ours.
        When the raw source names its codec chain (``raw_copy.chain()``: the HDF5 filters with
        their parameters, the stored type with its byte order) and its stored chunks smallest
        first (``raw_copy.by_size()``), the smallest is decoded whole with the plan's codecs and
        compared with the source on a slab of leading rows. A sample whose compared bytes are all
        one value (a chunk of zeros compresses best) tells no byte permutation (shuffle, byte
        order) from another, so the next smallest is taken, until one tells or one differs. The
        verdict holds for every variable of this writer with the same source chain and plan
        codecs: a mismatch re-encodes all of them. Other raw sources are sampled per variable
        (:meth:`_first_and_last_verified`).
        """
        chain = getattr(raw_copy, "chain", None)
        by_size = getattr(raw_copy, "by_size", None)
        if chain is None or by_size is None:
            return self._first_and_last_verified(plan, pipeline, raw_copy, fill_chunk)
        key = (chain(), json.dumps(plan.compressor, sort_keys=True), json.dumps(plan.filters, sort_keys=True),
               plan.storage.str, type(pipeline).__name__)
        if key in self.proven:
            return self.proven[key]
        for index in by_size():
            region = tuple(slice(i * c, min((i + 1) * c, s))
                           for i, c, s in zip(index, plan.chunks, plan.zshape, strict=True))
            telling: list[bool] = []
            verdict = self._sample_matches(plan, pipeline, raw_copy(index), fill_chunk, region, last=False,
                                           telling=telling)
            if verdict is False or (verdict and telling and telling[0]):
                self.proven[key] = verdict
                return verdict
        return True  # every copied chunk is one byte value throughout: it reads the same under any permutation

    def _first_and_last_verified(self, plan: ArrayPlan, pipeline: ChunkEncoder,
                                 raw_copy: Callable[[tuple[int, ...]], bytes | None], fill_chunk: np.ndarray) -> bool:
        """The per-variable sample, for a raw source that names no codec chain (the Zarr v3 rewrap).

        The sample is the first copied chunk and, when chunks are smaller than :data:`VERIFY_BYTES`,
        the last one (often an edge chunk, padded in the source); each payload is decoded whole (a
        codec mismatch garbles all of it) and compared with the source on a slab of leading
        rows, so a big chunk's values are not read, converted and compared in full.
        """
        first: tuple[int, ...] | None = None
        for index, region in plan.regions():
            verdict = self._sample_matches(plan, pipeline, raw_copy(index), fill_chunk, region, last=False)
            if verdict is None:
                continue  # not copied (re-encoded or never stored): nothing to prove here
            if not verdict:
                return False
            first = index
            break
        if first is None or not plan.zshape or fill_chunk.nbytes >= VERIFY_BYTES:
            return True
        grid = [math.ceil(s / c) for s, c in zip(plan.zshape, plan.chunks, strict=True)]
        for flat in range(math.prod(grid) - 1, -1, -1):
            index = tuple(int(i) for i in np.unravel_index(flat, grid))
            if index == first:
                break
            region = tuple(slice(i * c, min((i + 1) * c, s))
                           for i, c, s in zip(index, plan.chunks, plan.zshape, strict=True))
            verdict = self._sample_matches(plan, pipeline, raw_copy(index), fill_chunk, region, last=True)
            if verdict is not None:
                return verdict
        return True

    def _sample_matches(self, plan: ArrayPlan, pipeline: ChunkEncoder, payload: bytes | None, fill_chunk: np.ndarray,
                        region: tuple[slice, ...], *, last: bool, telling: list[bool] | None = None) -> bool | None:
        """Whether a copied chunk decodes to the source's values (None: no copied chunk here).

        ``telling``, when given, gets whether the compared bytes were not all one value.
        """
        if payload is None or payload == NOT_STORED:
            return None
        slab = _slab(region, plan.storage.itemsize, last=last)
        if self.threads > 1 and fill_chunk.nbytes >= VERIFY_BYTES:
            # a big chunk is decompressed twice, by us and by HDF5 for the slab: both release the GIL, so
            # they overlap (a 22 MB chunk: 0.21 s + 0.19 s one after the other)
            outcome: list[bytes | BaseException] = []
            decoding = threading.Thread(target=_decode_into, args=(pipeline, payload, fill_chunk.nbytes, outcome),
                                        daemon=True)
            decoding.start()
            try:
                block = self._block(plan, slab)
            finally:
                decoding.join()
            if isinstance(outcome[0], BaseException):
                return False  # any codec failure means the assumption is wrong
            raw = outcome[0]
        else:
            try:
                # bounded by the chunk's size: a longer output is wrong anyway, and netCDF-4's usual chain
                # (shuffle, zlib) is then decoded without importing numcodecs (codecs.DeferredCodec)
                raw = pipeline.decode(payload, limit=fill_chunk.nbytes)
            except Exception:  # any codec failure means the assumption is wrong
                return False
            block = self._block(plan, slab)
        try:
            decoded = np.frombuffer(raw, dtype=plan.storage).reshape(fill_chunk.shape)
        except ValueError:  # decoded to another size than the chunk's
            return False
        within = tuple(slice(s.start - r.start, s.stop - r.start) for s, r in zip(slab, region, strict=True))
        expected = np.ascontiguousarray(block).tobytes()
        if telling is not None:
            telling.append(expected.count(expected[:1]) != len(expected))
        return bool(decoded[within].tobytes() == expected)

    def _done(self, sizes: tuple[int, int]) -> None:
        if self.progress is not None:
            self.progress(1, sizes[0], sizes[1])

    def _write_array_metadata(self, akey: str, plan: ArrayPlan) -> None:
        var = plan.var
        zarray: dict[str, Any] = {
            "zarr_format": 2, "shape": list(plan.zshape), "dtype": plan.dtype_text, "chunks": list(plan.chunks),
            "fill_value": plan.fill_json, "order": "C", "compressor": plan.compressor, "filters": plan.filters,
        }
        zattrs, types = self._user_attributes(var.attributes)
        if var.type == "char" and zattrs.get("_FillValue") == "\x00":
            zattrs["_FillValue"] = ""  # as netcdf-c writes NUL; its parser misreads "\u0000" as "u"
        # No _nczarr_maxstrlen: the |Sn dtype carries the length, which netcdf-c (4.9's and 4.10.1's zsync.c)
        # takes when that attribute is absent; present, netcdf-c 4.10.1 shows it as a user attribute
        # (compliance-checker flags it) and sizes chunks by it even where it disagrees with the dtype.
        dims_basenames = [keys.basename(d) for d in var.dimensions]
        # nczarr.md "XArray" names root-group variables whose dimensions are all in the root group; netcdf-c
        # 4.10.1 writes it in every group, and xarray (open_datatree, a sub-group's open_zarr) needs it there.
        # The 4.9.0 layout keeps the nczarr.md rule: it is what netcdf-c 4.9.0 wrote.
        in_root = keys.parent(akey) == "/" and all(keys.parent(d) == "/" for d in var.dimensions)
        array_info: dict[str, Any] = {}
        if self.flavor == "nczarr-4.10":
            if self.xarray:
                zattrs["_ARRAY_DIMENSIONS"] = [SCALAR_DIM] if var.is_scalar else dims_basenames
            array_info = {"dimension_references": list(var.dimensions), "storage": "chunked"}
            if var.is_scalar:
                array_info["scalar"] = 1
            if var.type == "char" and plan.dtype_text == "|S1":  # |S1 alone is App. E's string of length 1
                array_info[NCZARR_TYPE_KEY] = "char"
            zattrs["_nczarr_array"] = array_info
            types.update({"_nczarr_array": "|J0", "_nczarr_attr": "|J0"})
            zattrs["_nczarr_attr"] = {"types": types}
        elif self.flavor == "nczarr-2-upper":
            if self.xarray and in_root:
                zattrs["_ARRAY_DIMENSIONS"] = dims_basenames
            zarray["_NCZARR_ARRAY"] = {"dimrefs": list(var.dimensions),
                                       "storage": "scalar" if var.is_scalar else "chunked"}
            if types:  # as netcdf-c 4.9.0 writes it: 4.10.1 shows this key as a user attribute (issue 34)
                zattrs["_NCZARR_ATTR"] = {"types": types}
        elif self.flavor == "nczarr-2":
            zarray["_nczarr_array"] = {"dimrefs": list(var.dimensions),
                                       "storage": "scalar" if var.is_scalar else "chunked"}
            if var.is_scalar:  # netcdf-c ≥ 4.9.3 knows a scalar by this key only (4.9.2 by "storage")
                zarray["_nczarr_array"]["scalar"] = 1
            if self.xarray:  # every group, as nczarr-4.10: xarray finds NCZarr's dimrefs only under _NCZARR_ARRAY
                zattrs["_ARRAY_DIMENSIONS"] = [SCALAR_DIM] if var.is_scalar else dims_basenames
            self._put_metadata(keys.join(akey, ".zarray"), zarray)
            self._put_zattrs_as_492(keys.join(akey, ".zattrs"), zattrs, types)
            return
        elif self.xarray:
            zattrs["_ARRAY_DIMENSIONS"] = dims_basenames
        self._put_metadata(keys.join(akey, ".zarray"), zarray)
        self._put_metadata(keys.join(akey, ".zattrs"), zattrs)

    def _put_zattrs_as_492(self, key: str, zattrs: dict[str, Any], types: dict[str, str]) -> None:
        """netcdf-c 4.9.1–4.9.2 (ncz_sync_atts): ``_nczarr_attr`` last, naming the user attributes' types.

        netcdf-c 4.9.2 writes no ``.zattrs`` where there is nothing to put (an attribute-less variable
        outside the root, a sub-group without attributes); netcdf-c 4.10.1 then refuses the variable
        (NC_ENCZARR: no .zattrs) and reads the group as pure Zarr, so it cannot open that output.
        Written everywhere (``"types": {}`` when empty), which 4.9.2 reads too: ``_nczarr_attr`` is
        one of its hidden reserved attributes (libsrc4/nc4internal.c ``NC_reserved``)."""
        zattrs["_nczarr_attr"] = {"types": types}
        self._put_metadata(key, zattrs)

    def _user_attributes(self, attributes: dict[str, Attribute]) -> tuple[dict[str, Any], dict[str, str]]:
        zattrs: dict[str, Any] = {}
        types: dict[str, str] = {}
        for name, attr in attributes.items():
            if is_internal_attribute(name):
                continue
            # Appendix D needs the recorded type to undo case 3: pure Zarr and the pre-2022
            # upper-case layout keep char text as a JSON string.
            value, type_text = attr_codec.encode(attr, json_convention=self.flavor in ("nczarr-4.10", "nczarr-2"))
            if self.flavor == "nczarr-2-upper" and attr.type == "char":
                type_text = "<U1"
            zattrs[name] = value
            types[name] = type_text
        return zattrs, types

    def _write_group_metadata(self, gkey: str, group: Group) -> None:
        zgroup: dict[str, Any] = {"zarr_format": 2}
        zattrs, types = self._user_attributes(group.attributes)
        dims: dict[str, Any] = {}
        for name, dim in group.dimensions.items():
            dims[name] = {"size": dim.size, "unlimited": 1} if dim.unlimited else dim.size
        if self.flavor == "nczarr-4.10":
            zattrs["_nczarr_group"] = {"dimensions": dims, "arrays": list(group.variables),
                                       "groups": list(group.groups)}
            internal = {"_nczarr_group": "|J0"}
            if gkey == "/":
                zattrs["_nczarr_superblock"] = dict(SUPERBLOCK)
                internal["_nczarr_superblock"] = "|J0"
            types.update({**internal, "_nczarr_attr": "|J0"})
            zattrs["_nczarr_attr"] = {"types": types}
        elif self.flavor == "nczarr-2-upper":
            if gkey == "/":
                zgroup["_NCZARR_SUPERBLOCK"] = dict(SUPERBLOCK)
            zgroup["_NCZARR_GROUP"] = {"dims": dims, "vars": list(group.variables), "groups": list(group.groups)}
            if types:  # as netcdf-c 4.9.0 writes it: 4.10.1 shows this key as a user attribute (issue 34)
                zattrs["_NCZARR_ATTR"] = {"types": types}
        elif self.flavor == "nczarr-2":  # ncz_sync_grp: the superblock, then the group, in .zgroup
            if gkey == "/":
                zgroup["_nczarr_superblock"] = dict(SUPERBLOCK)
                # netcdf-c 4.9.x puts its provenance first in the root .zattrs, so it always has one
                # (netcdf-c 4.10.1 segfaults opening this layout without it); ours, in its syntax
                zattrs = {"_NCProperties": _provenance(), **zattrs}
                types = {"_NCProperties": ">S1", **types}
            zgroup["_nczarr_group"] = {"dims": dims, "vars": list(group.variables), "groups": list(group.groups)}
            self._put_zattrs_as_492(keys.join(gkey, ".zattrs"), zattrs, types)
            self._put_metadata(keys.join(gkey, ".zgroup"), zgroup)
            return
        self._put_metadata(keys.join(gkey, ".zattrs"), zattrs)
        self._put_metadata(keys.join(gkey, ".zgroup"), zgroup)


def _all_fill(chunk: np.ndarray, fill_chunk: np.ndarray) -> bool:
    """Bytewise equality (NaN payloads and -0.0 count), without copying the chunk."""
    if chunk.dtype.kind == "O":
        return False
    a = chunk.reshape(-1).view(np.uint8)
    b = fill_chunk.reshape(-1).view(np.uint8)
    return bool(a[: b.itemsize * 64].tobytes() == b[: b.itemsize * 64].tobytes()) and np.array_equal(a, b)


def _decode_into(pipeline: ChunkEncoder, payload: bytes, limit: int, outcome: list[bytes | BaseException]) -> None:
    """``pipeline.decode(payload, limit)`` on a thread of its own: the bytes, or the exception, into ``outcome``."""
    try:
        outcome.append(pipeline.decode(payload, limit=limit))
    except BaseException as exc:  # handed back to the thread that verifies
        outcome.append(exc)


def _slab(region: tuple[slice, ...], itemsize: int, *, last: bool) -> tuple[slice, ...]:
    """The first (or ``last``) rows of ``region`` along its leading axis, ≥ VERIFY_SLAB_BYTES of values."""
    if not region:
        return region
    row = itemsize * math.prod(s.stop - s.start for s in region[1:])
    rows = min(region[0].stop - region[0].start, max(1, math.ceil(VERIFY_SLAB_BYTES / max(1, row))))
    lead = slice(region[0].stop - rows, region[0].stop) if last else slice(region[0].start, region[0].start + rows)
    return (lead, *region[1:])


def _check_name(name: str, where: str) -> None:
    if not name or "/" in name or name in (".", "..") or any(ord(c) < 32 for c in name):
        raise UnsupportedError(f"{where}: {name!r} is not a valid netCDF name")


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _to_storage(values: np.ndarray, nctype: str, storage: np.dtype, where: str = "") -> np.ndarray:
    """Model values → the chunk dtype (UTF-8 bytes for strings, S1 for char)."""
    if nctype == "string" and storage.kind == "O":  # Zarr v3's variable-length strings: str objects
        return np.array([str(v) for v in np.asarray(values, dtype=object).ravel().tolist()],
                        dtype=object).reshape(np.shape(values))
    if nctype == "string":
        flat = [str(v).encode("utf-8") for v in np.asarray(values, dtype=object).ravel().tolist()]
        if any(len(b) > storage.itemsize for b in flat):
            raise UnsupportedError(f"{where}: string longer than {storage.itemsize} bytes")
        if any(b.endswith(b"\x00") for b in flat):
            raise UnsupportedError(f"{where}: strings ending in NUL cannot be stored as Zarr |S")
        return np.array(flat, dtype=storage).reshape(np.shape(values))
    if nctype == "char":
        return np.asarray(values, dtype="S1")
    return np.asarray(values).astype(storage, copy=False)


def write_dataset(dataset: Dataset, store: Store, *, flavor: str = "nczarr-4.10", xarray: bool = True,
                  source: ChunkSource = model_source, progress: Progress | None = None, threads: int = 4,
                  raw: RawSource | None = None, consolidate: bool | None = None, char_as: str | None = None,
                  default_fill: bool = True) -> int:
    """Write ``dataset`` into ``store`` (the caller commits or aborts the store); return the chunks copied raw.

    ``consolidate``: write ``.zmetadata`` (last) always, never, or (None) unless an array is ``>S1``;
    ``char_as`` ("S1" or ">S1") overrides the flavor's char dtype; ``default_fill=False`` writes fill_value
    null for numeric variables without a _FillValue (what xarray needs not to mask them).
    """
    writer = DatasetWriter(dataset, store, flavor=flavor, xarray=xarray, source=source, progress=progress,
                           threads=threads, raw=raw, consolidate=consolidate, char_as=char_as,
                           default_fill=default_fill)
    writer.write()
    return writer.copied
