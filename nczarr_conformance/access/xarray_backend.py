"""xarray engine ``"nczarr"``: ``xarray.open_dataset(url, engine="nczarr")`` and ``open_datatree``.

Registered under the entry point group ``xarray.backends`` (pyproject.toml); the class can
also be passed directly (``engine=NCZarrBackendEntrypoint``). It reads every flavor our
reader reads (netcdf-c 4.10 layout, nczarr-2 in either case, v1, pure Zarr) from directory,
zip, S3, HTTP(S), GCS and Azure, by path or netcdf-c URL; ``storage_options=`` go to a remote
store's client (``{"anon": True}``: unsigned), as for xarray's zarr engine.

The store is presented to xarray exactly as netCDF4-python presents the same netCDF file
to xarray's ``netcdf4`` engine: raw values (no masking or scaling: xarray's CF decoding
does that), char as ``S1`` (xarray joins the last dimension), strings as variable-length
``str``, attributes as ``getncattr`` returns them, netCDF4's encoding keys (``chunksizes``,
``zlib``, ``shuffle``, ``complevel``, ``unlimited_dims``, ...). So ``engine="nczarr"`` on a
converted file and ``engine="netcdf4"`` on the file give the same Dataset.

Data are lazy: each variable is a ``BackendArray`` whose reads go through
nczarr/selection.py, fetching and decoding only the chunks a selection touches.

Arrays and data stores pickle, so ``chunks={}`` datasets compute on a process-based dask
cluster: an array pickles as its variable's metadata (``ArrayInfo``), the in-memory budget
and a ``CachingFileManager`` (xarray's own, as its netcdf4 engine uses) whose opener is
``stores.reopen(url, pin)``. A worker opens the store lazily, once per process, and holds
it to the pin: the dataset the client opened, or the one-line ``StoreError`` of a store
replaced while being read (a directory or zip no longer the one opened is refused at once;
on S3 each object is checked against the pinned root, as the client's reader checks it).
Nothing is re-pinned: the worker reads under the client's metadata, so reading a newer
dataset's chunks would mix two. In the client the arrays keep reading through the store it
opened. No lock is needed: every store reads safely from several threads.

xarray imports every registered engine's module whenever it opens anything, so this one
imports our reader (numcodecs and all) only when it is asked to open something.
"""
from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint, CachingFileManager
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing

if TYPE_CHECKING:
    from nczarr_conformance.access.lazy import LazyDataset, LazyGroup, LazyVariable
    from nczarr_conformance.stores.base import Pin, Store

__all__ = ["NCZarrArray", "NCZarrBackendEntrypoint", "NCZarrDataStore"]

#: Root objects whose presence makes a local path one of ours to guess (NCZarr in any flavor).
_NCZARR_MARKERS = (b"_nczarr_superblock", b"_NCZARR_SUPERBLOCK", b"_nczarr_group", b"_NCZARR_GROUP")


class NCZarrArray(BackendArray):
    """One variable's data for xarray: outer indexing, read chunk by chunk on demand.

    In the process that opened the store it reads through the open dataset; a pickled copy
    (a dask worker's) reads the same chunks, under the same metadata, through the store its
    process opens again from the shared manager (see the module docstring).
    """

    def __init__(self, variable: LazyVariable, shared: _Shared) -> None:
        self.variable: LazyVariable | None = variable
        self.shared: _Shared | None = shared
        self.manager = shared.manager
        self.path = variable.path
        self.info = variable.info
        self.max_bytes = shared.dataset.reader.max_bytes
        self.shape = variable.shape
        # netCDF4-python's dtype for a string variable is ``str``; xarray's netcdf4 engine
        # turns it into object with vlen metadata, and so do we
        vlen = create_vlen_dtype(str)  # type: ignore[no-untyped-call]
        self.dtype = vlen if variable.nctype == "string" else variable.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        """``__getitem__`` on a thread of its own: ``await ds.load_async()`` reads every variable at once
        (each read decodes its chunks on threads too, and inflate, our reads' main cost, frees the GIL)."""
        return await asyncio.to_thread(self.__getitem__, key)

    def _read(self, key: tuple[Any, ...]) -> np.ndarray:
        if self.variable is not None:
            return self.variable[key]
        from nczarr_conformance.nczarr.reader import ChunkReader
        from nczarr_conformance.nczarr.selection import read_selection

        with self.manager.acquire_context() as store:
            return read_selection(ChunkReader(store, {self.path: self.info}, self.max_bytes), self.path, key)

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the open dataset; refused (ValueError) once it is closed, as its reads are."""
        if self.shared is not None:
            self.shared.dataset.live_reader()
        return {**self.__dict__, "variable": None, "shared": None}


#: Zarr v3's blosc ``shuffle`` names → the numbers numcodecs (Zarr v2) and netCDF4-python's ``filters()`` use
_BLOSC_SHUFFLE_NUMBERS = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _blosc_shuffle(value: Any) -> Any:
    """A blosc codec's shuffle as a number, from either spelling: v2's numcodecs writes 0/1/2 (or -1,
    numcodecs' AUTOSHUFFLE), v3's ``zarr.json`` writes "noshuffle"/"shuffle"/"bitshuffle". A name
    neither spelling knows is passed on as written: the encoding reports, the chunk reader refuses."""
    if isinstance(value, str):
        return _BLOSC_SHUFFLE_NUMBERS.get(value, value)
    return int(value)


def _filters(variable: LazyVariable) -> dict[str, Any]:
    """netCDF4-python's ``Variable.filters()`` for the variable's codec chain (v2 numcodecs or v3 codec configs)."""
    out: dict[str, Any] = {"zlib": False, "szip": False, "zstd": False, "bzip2": False, "blosc": False,
                           "shuffle": False, "complevel": 0, "fletcher32": False}
    for config in variable.model.filters or []:
        codec = str(config.get("id", "")).removeprefix("numcodecs.")  # v3 names numcodecs' own codecs so
        if codec in ("zlib", "gzip"):
            out.update(zlib=True, complevel=int(config.get("level", 0)))
        elif codec == "zstd":
            out.update(zstd=True, complevel=int(config.get("level", 0)))
        elif codec == "bz2":
            out.update(bzip2=True, complevel=int(config.get("level", 0)))
        elif codec == "blosc":
            out.update(blosc={"compressor": f"blosc_{config.get('cname', 'lz4')}",
                              "shuffle": _blosc_shuffle(config.get("shuffle", 1))},
                       complevel=int(config.get("clevel", 0)))
        elif codec == "shuffle":
            out["shuffle"] = True
        elif codec == "fletcher32":
            out["fletcher32"] = True
        elif codec == "szip":
            out["szip"] = True
    return out


class _HashableOptions(dict[str, Any]):
    """A store's ``storage_options`` as an argument of xarray's CachingFileManager, which hashes its
    arguments into the key of the open store it caches per process (a plain dict does not hash)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(repr(sorted(self.items())))


def _reopen(url: str, pin: Pin | None, storage_options: dict[str, Any], mode: str) -> Store:
    """The manager's opener: the store opened again in this process, held to the pin (stores.reopen).

    The mode is always given (``"r"``): a manager that omits it passes its "omitted" marker
    after a pickle round trip (the marker object is not the unpickled one).
    """
    from nczarr_conformance.stores import reopen

    if mode != "r":
        raise ValueError(f"{url}: the nczarr engine reads; mode {mode!r}")
    return reopen(url, pin, storage_options)


class _Shared:
    """One open LazyDataset behind several group stores (a datatree); closed with the last of them.

    ``manager`` reopens the store in another process (stores.reopen, held to this one's pin),
    cached there once per process by xarray's file cache; every array of the dataset shares it.
    Nothing closes it explicitly: the store a process opened again is closed when the last
    copy of the manager there is gone (xarray's reference count), so no copy can close it
    while another one is reading through it.
    """

    def __init__(self, dataset: LazyDataset, owned: bool) -> None:
        self.dataset = dataset
        self.owned = owned
        self.users = 0
        self.lock = threading.Lock()
        url, pin, options = dataset.reopen_args()
        self.manager: CachingFileManager[Store] = CachingFileManager(_reopen, url, pin, _HashableOptions(options),
                                                                     mode="r")

    def acquire(self) -> None:
        with self.lock:
            self.users += 1

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            last = self.users == 0
        if last and self.owned:
            self.dataset.close()


class NCZarrDataStore(AbstractDataStore):
    """One group of an open store, as xarray's decoding pipeline (StoreBackendEntrypoint) wants it."""

    def __init__(self, shared: _Shared, group: LazyGroup) -> None:
        self.shared = shared
        self.group = group
        self._closed = False
        shared.acquire()

    def __reduce__(self) -> tuple[Any, ...]:
        """A Dataset pickles its store (its ``close``): the copy is a :class:`_Copy`."""
        return _Copy, ()

    @classmethod
    def open(cls, filename_or_obj: str | os.PathLike[str] | LazyDataset, group: str | None = None,
             max_bytes: int | None = None, storage_options: Mapping[str, Any] | None = None) -> NCZarrDataStore:
        from nczarr_conformance.access.lazy import LazyDataset, LazyGroup

        dataset = filename_or_obj if isinstance(filename_or_obj, LazyDataset) else \
            LazyDataset(filename_or_obj, max_bytes=max_bytes, storage_options=storage_options)
        owned = dataset is not filename_or_obj
        try:
            shared = _Shared(dataset, owned)
            node = shared.dataset["/" + (group or "").strip("/")]
            if not isinstance(node, LazyGroup):
                raise KeyError(f"{group}: is a variable, not a group")
        except BaseException:
            if owned:
                dataset.close()
            raise
        return cls(shared, node)

    def child(self, group: LazyGroup) -> NCZarrDataStore:
        return NCZarrDataStore(self.shared, group)

    def _variable(self, var: LazyVariable) -> xr.Variable:
        data = indexing.LazilyIndexedArray(NCZarrArray(var, self.shared))
        attrs = var.attrs
        if var.dtype.kind == "S" and "_FillValue" in attrs:  # as xarray's netcdf4 engine does
            attrs["_FillValue"] = np.bytes_(attrs["_FillValue"])
        encoding: dict[str, Any] = {"dtype": str if var.nctype == "string" else var.dtype}
        encoding.update(_filters(var))
        # netCDF4-python on an NCZarr store reports a scalar as chunked with chunk shape ()
        chunks = var.chunks or ()
        encoding.update(contiguous=False, chunksizes=chunks,
                        preferred_chunks=dict(zip(var.dimensions, chunks, strict=False)))
        encoding["source"] = self.shared.dataset.url
        encoding["original_shape"] = var.shape
        return xr.Variable(var.dimensions, data, attrs, encoding)

    def get_variables(self) -> dict[str, xr.Variable]:
        return {name: self._variable(var) for name, var in self.group.variables.items()}

    def get_attrs(self) -> dict[str, Any]:
        return self.group.attrs

    def get_dimensions(self) -> dict[str, int]:
        return {name: dim.size for name, dim in self.group.dimensions.items()}

    def get_parent_dimensions(self) -> dict[str, int]:
        dims: dict[str, int] = {}
        path = self.group.path
        while path != "/":
            path = path.rsplit("/", 1)[0] or "/"
            for name, dim in self.shared.dataset[path].dimensions.items():
                dims.setdefault(name, dim.size)
        return dims

    def get_encoding(self) -> dict[str, Any]:
        return {"unlimited_dims": {name for name, dim in self.group.dimensions.items() if dim.unlimited}}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.shared.release()


class _Copy(AbstractDataStore):
    """A pickled NCZarrDataStore: the ``close`` of a copied Dataset, which releases nothing itself.

    The copy's arrays read through the store their process opened again, shared with every
    other copy there and closed when the last of them is gone (see :class:`_Shared`).
    """

    def close(self) -> None:
        """Nothing to release here (see the class docstring)."""


def _is_lazy_dataset(obj: Any) -> bool:
    lazy = sys.modules.get("nczarr_conformance.access.lazy")  # not imported: obj cannot be one
    return lazy is not None and isinstance(obj, lazy.LazyDataset)


def _looks_like_nczarr(path: str) -> bool:
    """A local directory or zip whose root metadata name NCZarr (netcdf-c's or our layout)."""
    import zipfile

    if os.path.isdir(path):
        heads = []
        for name in (".zattrs", ".zgroup", ".nczarr"):
            try:
                with open(os.path.join(path, name), "rb") as fh:
                    heads.append(fh.read(65536))
            except OSError:
                continue
        return any(m in h for h in heads for m in _NCZARR_MARKERS) or os.path.isfile(os.path.join(path, ".nczarr"))
    if path.endswith(".zip") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:  # the root is "" or netcdf-c's "<name>/"
            roots = [n for n in zf.namelist() if n.count("/") <= 1 and n.rsplit("/", 1)[-1] in
                     (".zattrs", ".zgroup", ".nczarr")]
            for name in roots:
                with zf.open(name) as fh:  # a bounded read, however large the member
                    head = fh.read(65536)
                if name.endswith(".nczarr") or any(m in head for m in _NCZARR_MARKERS):
                    return True
            return False
    return False


class NCZarrBackendEntrypoint(BackendEntrypoint):
    """Open NCZarr and Zarr v2 stores (directory, zip, S3) with nczarr-conformance's reader, lazily.

    Every read goes through the reader that nczarr-check and nczarr-dump use, so xarray
    sees what netcdf-c means by the store, for every flavor netcdf-c has written.
    """

    description = "NCZarr / Zarr v2 (directory, zip, S3; every netcdf-c flavor), read lazily by nczarr-conformance"
    url = "https://github.com/nczarr-conformance/nczarr-conformance/blob/main/docs/api.md"
    supports_groups = True
    open_dataset_parameters = ("filename_or_obj", "mask_and_scale", "decode_times", "concat_characters",
                               "decode_coords", "drop_variables", "use_cftime", "decode_timedelta", "group",
                               "max_bytes", "storage_options")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """netcdf-c URLs naming ``mode=nczarr`` or ``mode=zarr``, and local NCZarr directories or zips."""
        if _is_lazy_dataset(filename_or_obj):
            return True
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        text = os.fspath(filename_or_obj)
        if not isinstance(text, str):
            return False
        fragment = text.partition("#")[2].lower().replace(" ", "")
        if "mode=nczarr" in fragment or "mode=zarr" in fragment:
            return True
        try:
            return "://" not in text and _looks_like_nczarr(text)
        except (OSError, ValueError):
            return False

    def open_dataset(  # type: ignore[override]  # xarray's signature is **kwargs-free but typed loosely
        self,
        filename_or_obj: str | os.PathLike[str] | LazyDataset,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        max_bytes: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> xr.Dataset:
        return _decoded(NCZarrDataStore.open(filename_or_obj, group, max_bytes, storage_options), {
            "mask_and_scale": mask_and_scale, "decode_times": decode_times, "concat_characters": concat_characters,
            "decode_coords": decode_coords, "drop_variables": drop_variables, "use_cftime": use_cftime,
            "decode_timedelta": decode_timedelta})

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str] | LazyDataset,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        max_bytes: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> dict[str, xr.Dataset]:
        """Every group under ``group`` (default the root) as a Dataset, keyed by its path from there."""
        decoding: dict[str, Any] = {
            "mask_and_scale": mask_and_scale, "decode_times": decode_times, "concat_characters": concat_characters,
            "decode_coords": decode_coords, "drop_variables": drop_variables, "use_cftime": use_cftime,
            "decode_timedelta": decode_timedelta}
        top = NCZarrDataStore.open(filename_or_obj, group, max_bytes, storage_options)
        out: dict[str, xr.Dataset] = {}
        try:
            for node in top.group.walk():
                relative = node.path[len(top.group.path):].strip("/")
                out["/" + relative] = _decoded(top.child(node), decoding)
        except BaseException:
            for ds in out.values():
                ds.close()
            raise
        finally:
            top.close()  # each group's Dataset holds the store open; the last close releases it
        return out

    def open_datatree(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str] | LazyDataset,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        max_bytes: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> xr.DataTree:
        from xarray.backends.common import datatree_from_dict_with_io_cleanup

        groups = self.open_groups_as_dict(
            filename_or_obj, mask_and_scale=mask_and_scale, decode_times=decode_times,
            concat_characters=concat_characters, decode_coords=decode_coords, drop_variables=drop_variables,
            use_cftime=use_cftime, decode_timedelta=decode_timedelta, group=group, max_bytes=max_bytes,
            storage_options=storage_options)
        return datatree_from_dict_with_io_cleanup(groups)


def _decoded(store: NCZarrDataStore, decoding: dict[str, Any]) -> xr.Dataset:
    """xarray's CF decoding of one group's store (closed again if decoding fails)."""
    try:
        return StoreBackendEntrypoint().open_dataset(store, **decoding)
    except BaseException:
        store.close()
        raise
