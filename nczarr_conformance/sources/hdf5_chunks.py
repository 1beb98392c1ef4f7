"""Copy compressed HDF5 chunks into Zarr without decompressing them (h5py ``read_direct_chunk``).

HDF5's deflate filter writes a zlib stream, its shuffle filter is numcodecs'
Shuffle, both store edge chunks at full size and in the dataset's byte order:
when a variable's HDF5 filters are exactly [shuffle?, deflate?] and the Zarr
plan asks for the same codecs, chunk shape and byte order, a stored HDF5 chunk
*is* the Zarr chunk. Anything else (fletcher32, whose HDF5 place is first and
NCZarr's last; szip; a chunk whose filter mask says a filter was skipped) goes
through decode/encode.

Each variable's chunk index (offset in the file, size, filter mask of every stored
chunk) is read once, in one pass (h5py ``chunk_iter``); a chunk is then copied with one
``os.pread`` on a file descriptor of its own: no HDF5 call and no lock per chunk, so the
writer's threads copy in parallel at the speed of the disk. (A file with an HDF5 user
block, where index addresses are not file offsets, goes through ``read_direct_chunk``.)

A copied chunk is checked before it is written, since a damaged one would otherwise be copied as it is
and no reader could decode it (issue 39: ``nc2nczarr`` exited 0 on a file with a corrupt zlib chunk that
``--no-direct-copy`` and ncdump refuse): its zlib stream is inflated into a buffer of the chunk's declared
size, which checks the stream, its Adler-32 checksum and its length (an uncompressed chunk: its length),
and the conversion stops (FormatError: exit 2) naming the variable and the chunk. It costs the inflation
that copying saved (measured in docs/guarantees.md), still no re-encoding.

The HDF5 chunk index also says which chunks were never written (a declared
``crs`` variable, records not yet written): those are reported as
:data:`NOT_STORED`, read as fill, and never asked of ``read_direct_chunk``,
which raises MemoryError on them. The index is used even when copying is off,
so a NOFILL variable's unwritten chunks stay unwritten on both paths. An unwritten
chunk HDF5 reads as a value the store's fill would not give (an HDF5 fill of zero
under netCDF's default fill, or under a different _FillValue) is read and written
out instead, so every reader gets what netCDF-4 reads from the source.
"""
from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from nczarr_conformance import codecs
from nczarr_conformance.errors import FormatError, StoreError
from nczarr_conformance.nczarr.writer import NOT_STORED, ArrayPlan
from nczarr_conformance.sources import hdf5_types
from nczarr_conformance.stores.base import read_extent

H5Z_FILTER_DEFLATE = 1
H5Z_FILTER_SHUFFLE = 2


class Stored(NamedTuple):
    """Where one chunk lies in the file, as the HDF5 chunk index says."""

    address: int
    size: int
    filter_mask: int


class DirectChunks:
    """A RawSource for the writer, over one HDF5 file opened with h5py.

    ``copy`` False: only report chunks the file never stored; every stored chunk is re-encoded.
    """

    def __init__(self, path: str | BinaryIO, *, copy: bool = True) -> None:
        import h5py

        from nczarr_conformance.sources.netcdf4 import LOCK

        # One lock for both HDF5 libraries in this process (netCDF4's and h5py's): HDF5
        # is not thread-safe, and two copies reading one file at once crash.
        self.lock = LOCK
        self.copy = copy
        with self.lock:
            self.file = h5py.File(path, "r")
            self.userblock = int(self.file.userblock_size)
        # pread needs no lock and no seek position shared between threads; the index
        # addresses are file offsets only when there is no user block before the superblock
        # (a file object, an S3 object's ranged reads, has no descriptor: chunks through h5py)
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC) if self.userblock == 0 and isinstance(path, str) else -1

    def close(self) -> None:
        with self.lock:
            self.file.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _filters(self, dataset: Any) -> list[int]:
        plist = dataset.id.get_create_plist()
        return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]

    @staticmethod
    def _stored(dataset: Any) -> dict[tuple[int, ...], Stored]:
        """Every chunk the file holds, by its element offset (HDF5 ≥ 1.12.3: one pass over the index)."""
        stored: dict[tuple[int, ...], Stored] = {}
        if dataset.id.get_num_chunks() == 0:
            return stored

        def add(info: Any) -> None:
            stored[tuple(info.chunk_offset)] = Stored(int(info.byte_offset), int(info.size), int(info.filter_mask))

        try:
            dataset.id.chunk_iter(add)
        except AttributeError:  # older HDF5: one call per stored chunk, still once per variable
            for i in range(dataset.id.get_num_chunks()):
                add(dataset.id.get_chunk_info(i))
        return stored

    @staticmethod
    def _never_allocated(dataset: Any) -> bool:
        """A contiguous dataset with no storage in the file (nothing was ever written to it)."""
        import h5py

        plist = dataset.id.get_create_plist()
        return bool(plist.get_layout() == h5py.h5d.CONTIGUOUS and plist.get_external_count() == 0
                    and dataset.id.get_storage_size() == 0)

    @staticmethod
    def _reads_as_fill(plan: ArrayPlan, dataset: Any) -> bool:
        """Whether a chunk the file never stored reads, through HDF5, as the store's fill reads it.

        HDF5 gives an unwritten element the dataset's fill value (hdf5_types.unwritten_value);
        when the plan's fill differs (a _FillValue attribute other than the HDF5 fill value), or
        the plan is NOFILL, such chunks are read through netCDF-4 and written out. Undefined in
        the file (netcdf-c's NOFILL): left unwritten, as the source left them.
        """
        try:
            value = hdf5_types.unwritten_value(dataset)
        except (TypeError, ValueError, OSError):
            return True
        if value is None:
            return True
        if plan.var.no_fill or plan.storage.kind not in "iuf":
            return False
        return bool(np.asarray(value).astype(plan.storage).tobytes() == np.asarray(plan.fill_storage).tobytes())

    def _copyable(self, plan: ArrayPlan, dataset: Any) -> bool:
        """Whether a stored chunk's bytes are exactly the Zarr chunk the plan would encode.

        Only for a standard integer or IEEE float (hdf5_types.is_standard): a 20-bit integer in
        4 bytes has numpy's dtype but not its bytes (no sign extension), a 3-byte one no dtype.
        """
        if not self.copy or not hdf5_types.is_standard(dataset.id.get_type()) or dataset.dtype != plan.storage:
            return False
        if plan.var.type == "string" or dataset.dtype.kind not in "iuf":
            return False
        return self._codecs_match(plan, dataset)

    def _codecs_match(self, plan: ArrayPlan, dataset: Any) -> bool:
        """Whether the HDF5 filters are exactly the plan's codecs: [shuffle?, deflate?] as [shuffle?] + zlib?."""
        if plan.filters and plan.filters != [{"id": "shuffle", "elementsize": plan.storage.itemsize}]:
            return False
        if plan.compressor and plan.compressor.get("id") != "zlib":
            return False
        wanted = ([H5Z_FILTER_SHUFFLE] if plan.filters else []) + ([H5Z_FILTER_DEFLATE] if plan.compressor else [])
        return self._filters(dataset) == wanted

    def __call__(self, plan: ArrayPlan) -> Callable[[tuple[int, ...]], bytes | None] | None:
        with self.lock:
            dataset = self.file.get(plan.key.lstrip("/"))
            if dataset is None:
                return None
            unstored = NOT_STORED if self._reads_as_fill(plan, dataset) else None
            if self._never_allocated(dataset):
                return lambda index: unstored  # declared, never written: all fill (NOFILL: undefined)
            chunks = dataset.chunks
            if chunks is None or not plan.zshape or tuple(chunks) != tuple(plan.chunks):
                return None  # contiguous, compact, scalar, or rechunked: no chunk maps onto a Zarr chunk
            stored = self._stored(dataset)
            copyable = self._copyable(plan, dataset)

        return _Reader(self, dataset, plan, stored, unstored, copyable)


#: how much of a chunk's check is inflated at a time, out of how much input: the output is counted and
#: dropped, so small pieces stay in the CPU's cache and cost no page faults, and the input is fed in slices
#: (zlib copies what it has not consumed at every call: a whole 11 MB stream fed at once was copied per piece)
INFLATE_PIECE = 256 * 1024
INFLATE_INPUT = 64 * 1024


def _inflated_size(payload: bytes, expected: int) -> tuple[int, bool]:
    """(bytes the zlib stream inflates to, at most ``expected`` + one piece; whether it ended, its Adler-32
    checked). zlib.error where the stream is damaged: a stream the fast inflater (codecs.inflate_module)
    refuses is inflated again by zlib, whose verdict and message stand."""
    try:
        return _inflated_size_by(codecs.inflate_module, payload, expected)
    except codecs.inflater_error():
        return _inflated_size_by(zlib, payload, expected)


def _inflated_size_by(module: Any, payload: bytes, expected: int) -> tuple[int, bool]:
    inflate = module.decompressobj()
    view, at, size = memoryview(payload), 0, 0
    rest: bytes | memoryview = b""
    while not inflate.eof and size <= expected:
        if not rest:
            rest, at = view[at:at + INFLATE_INPUT], at + INFLATE_INPUT
            if not rest:
                break  # all input taken and no end of stream: cut short
        size += len(inflate.decompress(rest, INFLATE_PIECE))
        rest = inflate.unconsumed_tail
    return size, inflate.eof


class _Reader:
    """One variable's chunks: :meth:`__call__` gives a chunk's bytes (RawSource), :meth:`extent` where
    they lie in the file, so a store that writes files copies them in the kernel (Store.put_extent)."""

    def __init__(self, owner: DirectChunks, dataset: Any, plan: ArrayPlan, stored: dict[tuple[int, ...], Stored],
                 unstored: bytes | None, copyable: bool) -> None:
        self.owner, self.dataset, self.plan, self.stored = owner, dataset, plan, stored
        self.unstored, self.copyable = unstored, copyable

    def _offset(self, index: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(i * c for i, c in zip(index, self.plan.chunks, strict=True))

    def chain(self) -> tuple[object, ...]:
        """What decides whether a stored chunk decodes as the plan's codecs: the HDF5 filters in order with
        their parameters, and the stored type with its byte order (the writer verifies once per chain)."""
        with self.owner.lock:
            plist = self.dataset.id.get_create_plist()
            filters = tuple((f[0], tuple(int(v) for v in f[2]))
                            for f in (plist.get_filter(i) for i in range(plist.get_nfilters())))
            try:
                stored: object = self.dataset.dtype.str
            except TypeError:  # a type numpy has no dtype for (a 3-byte integer): HDF5's own description
                htype = self.dataset.id.get_type()
                order = htype.get_order() if hasattr(htype, "get_order") else None
                stored = ("hdf5", htype.get_class(), htype.get_size(), order)
        return filters, stored

    def by_size(self) -> list[tuple[int, ...]]:
        """The chunk indices of the stored chunks copied as they are, smallest first (the cheapest to
        decode and compare)."""
        if not self.copyable:
            return []
        grid = [-(-s // c) for s, c in zip(self.plan.zshape, self.plan.chunks, strict=True)]
        found: list[tuple[int, tuple[int, ...]]] = []
        for offset, where in self.stored.items():
            index = tuple(o // c for o, c in zip(offset, self.plan.chunks, strict=True))
            if where.filter_mask == 0 and all(i < g for i, g in zip(index, grid, strict=True)):
                found.append((where.size, index))
        return [index for _, index in sorted(found)]

    def extent(self, index: tuple[int, ...]) -> tuple[int, int, int] | None:
        """(fd, offset, size) of a chunk copied as it is, checked first (:meth:`_checked`); None where
        :meth:`__call__` decides."""
        where = self.stored.get(self._offset(index))
        if where is None or not self.copyable or where.filter_mask != 0 or self.owner.fd < 0:
            return None
        self._checked(index, where, self._pread(where))
        return self.owner.fd, where.address, where.size

    def _pread(self, where: Stored) -> bytes:
        try:
            return read_extent(self.owner.fd, where.address, where.size)
        except StoreError:
            raise StoreError(f"{self.owner.file.filename}: truncated: chunk at {where.address} is "
                             f"shorter than its {where.size} bytes") from None

    def _checked(self, index: tuple[int, ...], where: Stored, payload: bytes) -> bytes:
        """``payload`` if it decodes to a chunk of the declared size; else FormatError naming the variable
        and the chunk. A zlib stream is inflated into a buffer of that size, never more (a bomb costs no
        more than a good chunk), which checks its Adler-32 checksum and its length; shuffle keeps lengths."""
        expected = math.prod(self.plan.chunks) * self.plan.storage.itemsize
        why = None
        if self.plan.compressor:
            try:
                size, ended = _inflated_size(payload, expected)
            except zlib.error as exc:
                why = f"its zlib stream is damaged ({exc})"
            else:
                if size > expected:
                    why = f"its zlib stream inflates past the chunk's {expected} bytes"
                elif not ended:
                    why = "its zlib stream is cut short"
                elif size != expected:
                    why = f"it inflates to {size} bytes, not the chunk's {expected}"
        elif len(payload) != expected:
            why = f"it holds {len(payload)} bytes, not the chunk's {expected}"
        if why is not None:
            at = ",".join(str(i) for i in index)
            raise FormatError(f"{self.owner.file.filename}: {self.plan.key}: chunk {at} (at byte {where.address} "
                              f"of the file) does not decode: {why}: the file is damaged")
        return payload

    def __call__(self, index: tuple[int, ...]) -> bytes | None:
        where = self.stored.get(self._offset(index))
        if where is None:
            return self.unstored
        if not self.copyable or where.filter_mask != 0:
            return None  # re-encode it (a nonzero mask: a filter was skipped for this chunk)
        if self.owner.fd >= 0:
            return self._checked(index, where, self._pread(where))
        with self.owner.lock:
            _, data = self.dataset.id.read_direct_chunk(self._offset(index))
        return self._checked(index, where, bytes(data))
