"""Copy compressed HDF5 chunks into Zarr without decompressing them (h5py ``read_direct_chunk``).

HDF5's deflate filter writes a zlib stream, its shuffle filter is numcodecs'
Shuffle, both store edge chunks at full size and in the dataset's byte order:
when a variable's HDF5 filters are exactly [shuffle?, deflate?] and the Zarr
plan asks for the same codecs, chunk shape and byte order, a stored HDF5 chunk
*is* the Zarr chunk. Anything else (fletcher32, szip, a chunk whose filter mask
says a filter was skipped, a chunk never written) goes through decode/encode.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .nczarr.writer import ArrayPlan

H5Z_FILTER_DEFLATE = 1
H5Z_FILTER_SHUFFLE = 2


class DirectChunks:
    """A RawSource for the writer, over one HDF5 file opened with h5py."""

    def __init__(self, path: str) -> None:
        import h5py

        from .peers.netcdf4 import LOCK

        # One lock for both HDF5 libraries in this process (netCDF4's and h5py's): HDF5
        # is not thread-safe, and two copies reading one file at once crash.
        self.lock = LOCK
        with self.lock:
            self.file = h5py.File(path, "r")

    def close(self) -> None:
        with self.lock:
            self.file.close()

    def _filters(self, dataset: Any) -> list[int]:
        plist = dataset.id.get_create_plist()
        return [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]

    def __call__(self, plan: ArrayPlan) -> Callable[[tuple[int, ...]], bytes | None] | None:
        with self.lock:
            dataset = self.file.get(plan.key.lstrip("/"))
            chunks = getattr(dataset, "chunks", None) if dataset is not None else None
            if chunks is None:
                return None
            dtype = dataset.dtype
            filters = self._filters(dataset)
        if not plan.zshape or tuple(chunks) != tuple(plan.chunks) or dtype != plan.storage:
            return None
        if plan.var.type == "string" or dtype.kind not in "iuf":
            return None
        wanted = ([H5Z_FILTER_SHUFFLE] if plan.filters else []) + ([H5Z_FILTER_DEFLATE] if plan.compressor else [])
        if plan.filters and plan.filters != [{"id": "shuffle", "elementsize": plan.storage.itemsize}]:
            return None
        if plan.compressor and plan.compressor.get("id") != "zlib":
            return None
        if filters != wanted:
            return None

        def read(index: tuple[int, ...]) -> bytes | None:
            offset = tuple(i * c for i, c in zip(index, plan.chunks))
            with self.lock:
                try:
                    mask, payload = dataset.id.read_direct_chunk(offset)
                except (KeyError, OSError, ValueError, RuntimeError):
                    return None  # never written: the writer encodes the fill
            if mask != 0:
                return None  # a filter was skipped for this chunk: re-encode it
            return bytes(payload)

        return read
