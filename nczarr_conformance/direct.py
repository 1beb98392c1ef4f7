"""Copy compressed HDF5 chunks into Zarr without decompressing them (h5py ``read_direct_chunk``).

HDF5's deflate filter writes a zlib stream, its shuffle filter is numcodecs'
Shuffle, both store edge chunks at full size and in the dataset's byte order:
when a variable's HDF5 filters are exactly [shuffle?, deflate?] and the Zarr
plan asks for the same codecs, chunk shape and byte order, a stored HDF5 chunk
*is* the Zarr chunk. Anything else (fletcher32, whose HDF5 place is first and
NCZarr's last; szip; a chunk whose filter mask says a filter was skipped) goes
through decode/encode.

The HDF5 chunk index also says which chunks were never written (a declared
``crs`` variable, records not yet written): those are reported as
:data:`NOT_STORED`, read as fill, and never asked of ``read_direct_chunk``,
which raises MemoryError on them. The index is used even when copying is off,
so a NOFILL variable's unwritten chunks stay unwritten on both paths.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .nczarr.writer import NOT_STORED, ArrayPlan

H5Z_FILTER_DEFLATE = 1
H5Z_FILTER_SHUFFLE = 2


class DirectChunks:
    """A RawSource for the writer, over one HDF5 file opened with h5py.

    ``copy`` False: only report chunks the file never stored; every stored chunk is re-encoded.
    """

    def __init__(self, path: str, *, copy: bool = True) -> None:
        import h5py

        from .peers.netcdf4 import LOCK

        # One lock for both HDF5 libraries in this process (netCDF4's and h5py's): HDF5
        # is not thread-safe, and two copies reading one file at once crash.
        self.lock = LOCK
        self.copy = copy
        with self.lock:
            self.file = h5py.File(path, "r")

    def close(self) -> None:
        with self.lock:
            self.file.close()

    def _filters(self, dataset: Any) -> list[int]:
        plist = dataset.id.get_create_plist()
        return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]

    @staticmethod
    def _stored(dataset: Any) -> dict[tuple[int, ...], int]:
        """Offset of every chunk the file holds → its filter mask (HDF5 ≥ 1.12.3: one pass over the index)."""
        stored: dict[tuple[int, ...], int] = {}
        if dataset.id.get_num_chunks() == 0:
            return stored
        try:
            dataset.id.chunk_iter(lambda info: stored.__setitem__(tuple(info.chunk_offset), info.filter_mask))
        except AttributeError:  # older HDF5: one call per stored chunk
            for i in range(dataset.id.get_num_chunks()):
                info = dataset.id.get_chunk_info(i)
                stored[tuple(info.chunk_offset)] = info.filter_mask
        return stored

    @staticmethod
    def _never_allocated(dataset: Any) -> bool:
        """A contiguous dataset with no storage in the file (nothing was ever written to it)."""
        import h5py

        plist = dataset.id.get_create_plist()
        return bool(plist.get_layout() == h5py.h5d.CONTIGUOUS and plist.get_external_count() == 0
                    and dataset.id.get_storage_size() == 0)

    def _copyable(self, plan: ArrayPlan, dataset: Any) -> bool:
        """Whether a stored chunk's bytes are exactly the Zarr chunk the plan would encode."""
        if not self.copy or dataset.dtype != plan.storage:
            return False
        if plan.var.type == "string" or dataset.dtype.kind not in "iuf":
            return False
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
            if self._never_allocated(dataset):
                return lambda index: NOT_STORED  # declared, never written: all fill (NOFILL: undefined)
            chunks = dataset.chunks
            if chunks is None or not plan.zshape or tuple(chunks) != tuple(plan.chunks):
                return None  # contiguous, compact, scalar, or rechunked: no chunk maps onto a Zarr chunk
            stored = self._stored(dataset)
            copyable = self._copyable(plan, dataset)

        def read(index: tuple[int, ...]) -> bytes | None:
            offset = tuple(i * c for i, c in zip(index, plan.chunks))
            mask = stored.get(offset)
            if mask is None:
                return NOT_STORED
            if not copyable or mask != 0:
                return None  # re-encode it (a nonzero mask: a filter was skipped for this chunk)
            with self.lock:
                _, payload = dataset.id.read_direct_chunk(offset)
            return bytes(payload)

        return read
