"""Adapters around the implementations the matrix grades from this package (ids per
docs/contracts/interop-report.md); the ones nobody here wrote, Debian's netcdf-c 4.9.0 tools among them,
join through command adapters in nczarr-conformance.toml (peers/command.py, adapters/)."""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance import __version__, keys
from nczarr_conformance.access.dataset import open_dataset
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Dimension,
    Group,
    Variable,
    attribute_from_python,
    is_internal_attribute,
)
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import nctype_of_numpy
from nczarr_conformance.nczarr.writer import write_dataset
from nczarr_conformance.peers import netcdf4 as nc4
from nczarr_conformance.peers.base import CannotExpress, Peer, register, reject_options
from nczarr_conformance.peers.capabilities import ALL, PURE_ZARR, PURE_ZARR_V3
from nczarr_conformance.stores import DirectoryStore
from nczarr_conformance.stores.references import is_reference_path
from nczarr_conformance.urls import to_file_url
from nczarr_conformance.workers import WorkerPool, WorkerProtocolError


def _tool(name: str) -> str | None:
    return None if shutil.which(name) else f"{name} not installed"


def _writes_v3(peer: Peer) -> bool:
    """The peer writes Zarr v3: what its capabilities say (``writes-zarr-v3``), never its id."""
    return "writes-zarr-v3" in peer.capabilities


#: the last segment of a Zarr v3 node's metadata object
ZARR_JSON = "zarr.json"


def _v3_node_type(path: Path) -> str | None:
    """``"array"`` or ``"group"``: the ``node_type`` of the Zarr v3 node at ``path`` (a directory), or None
    when there is no readable ``zarr.json`` there. How a reader of a directory store finds v3 nodes."""
    try:
        doc = json.loads((path / ZARR_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    kind = doc.get("node_type") if isinstance(doc, dict) else None
    return kind if kind in ("array", "group") else None


class Ours(Peer):
    reads = writes = True

    def __init__(self, flavor: str, peer_id: str, zarr_format: int = 2) -> None:
        self.flavor = flavor
        self.id = peer_id
        self.name = f"nczarr_conformance ({flavor}{', Zarr v3' if zarr_format == 3 else ''})"
        # the 4.8-4.9.0 layout predates Appendices D and E; the pure-Zarr flavor still writes netCDF's fills
        # (in v3 too, but rule Z.fill reads v2's .zarray: the v3 writer claims no v2 convention)
        self.capabilities = PURE_ZARR_V3 if zarr_format == 3 else {
            "zarr": PURE_ZARR | {"netcdf-fill"}, "nczarr-2-upper": ALL - {"appendix-d"}}.get(flavor, ALL)
        self.reads = flavor == "nczarr-4.10" and zarr_format == 2
        if self.reads:  # our reader opens kerchunk references too (stores/references.py)
            self.capabilities = self.capabilities | {"references"}

    def version(self) -> str:
        return __version__

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        if _writes_v3(self) and options.get("separator") == "/":  # v3's default key encoding: c/0/0
            options = {k: v for k, v in options.items() if k != "separator"}
        reject_options(options, self.id)
        try:
            with DirectoryStore(target, "w") as store:
                if _writes_v3(self):
                    from nczarr_conformance.zarr3.writer import write_dataset as write_v3

                    write_v3(dataset, store, flavor=self.flavor)
                else:
                    write_dataset(dataset, store, flavor=self.flavor)
        except UnsupportedError as exc:
            raise CannotExpress(str(exc)) from exc
        return str(target)

    def read(self, url: str) -> Dataset:
        return open_dataset(url)


class NetCDFC410(Peer):
    id, name, reads, writes = "netcdf-c-4.10", "netcdf-c via netCDF4-python", True, True
    #: no released netcdf-c reads Zarr v3 (4.10.1: "Unknown file format"; tests/peers/test_zarr3_peers.py)
    capabilities = ALL - {"zarr-v3"}

    def available(self) -> str | None:
        return None if nc4.available() else "netCDF4-python not installed"

    def version(self) -> str:
        import netCDF4

        return str(netCDF4.__netcdf4libversion__)

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        reject_options(options, self.id)
        nc4.write(dataset, to_file_url(str(target), "file"))
        return str(target)

    def read(self, url: str) -> Dataset:
        """What netcdf-c shows, a reserved ``_nczarr*`` name it shows as a user attribute included: no model
        holds one, so the matrix's comparison reports such a leak as a difference (issue 34)."""
        with nc4.LOCK:  # netcdf-c is not thread-safe: open and close too (the matrix runs cells in threads)
            return nc4.read(url if "#" in url else to_file_url(url, "zip" if url.endswith(".zip") else "file"),
                            shown_reserved=True)


class NetCDFC410Fixed(NetCDFC410):
    """netcdf-c 4.10.1's output after ``nczarr-fix`` (in place, every reader): the store users have today, repaired."""

    id, name, reads = "netcdf-c-4.10+nczarr-fix", "netcdf-c via netCDF4-python, then nczarr-fix", False

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        from nczarr_conformance.fix import fix_store

        url = super().write(dataset, target, options)
        # not under netCDF4-python's lock: the fix's verification runs netcdf-c in a child process (fix/verify.py)
        fix_store(url, backup=False)
        return url


#: numpy dtype of a JSON number list → the netCDF type it names (for the zarr view, which compares values)
_JSON_NUMBER_TYPES = {"int64": "int64", "uint64": "uint64", "float64": "double"}


def _untyped_attribute(value: Any) -> Attribute:
    """A pure-Zarr attribute exactly as the peer's API handed it back: text as char, a list of texts as
    string, a number or a list of numbers by numpy's own typing; anything else (objects, nested lists,
    booleans, null) as its JSON text. Deliberately not our Appendix D decoder: a reader graded by the
    matrix must not be typed by the code under test."""
    if isinstance(value, str):
        return Attribute("char", value)
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and items and all(isinstance(v, str) for v in items):
        return Attribute("string", np.array(items, dtype=object))
    if items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        arr = np.asarray(items)
        if arr.dtype.name in _JSON_NUMBER_TYPES:
            return Attribute(_JSON_NUMBER_TYPES[arr.dtype.name], arr)
    return Attribute("char", json.dumps(value))


def _untyped_attributes(raw: dict[str, Any]) -> dict[str, Attribute]:
    out: dict[str, Attribute] = {}
    for name, value in raw.items():
        if is_internal_attribute(name) or name == "_FillValue":
            continue
        out[name] = _untyped_attribute(value.tolist() if isinstance(value, np.ndarray) else value)
    return out


def _variable_from_values(values: np.ndarray, attrs: dict[str, Attribute]) -> Variable:
    arr = np.asarray(values)
    if arr.dtype.kind == "S" and arr.dtype.itemsize > 1:
        flat = [b.decode("utf-8", "replace") for b in arr.ravel().tolist()]
        obj = np.empty(arr.shape, dtype=object)
        obj.ravel()[:] = flat if obj.ndim else None
        if obj.ndim == 0:
            obj[()] = flat[0]
        arr, nctype = obj, "string"
    elif arr.dtype.kind in ("U", "O", "T"):  # T: numpy 2's StringDType, zarr-python 3's Zarr v3 "string"
        obj = np.empty(arr.shape, dtype=object)
        obj[...] = arr
        arr, nctype = obj, "string"
    else:
        nctype = nctype_of_numpy(arr.dtype)
    return Variable(nctype, [], arr.shape, attrs, arr)


def _with_zarr_storage(var: Variable, arr: Any) -> Variable:
    """``var`` with the storage zarr-python's own array metadata reports (``arr.metadata``): chunks,
    codec chain (filters, then the compressor), byte order, fill mode, order and separator."""
    meta = arr.metadata.to_dict()
    var.chunks = [int(c) for c in meta["chunks"]] if var.shape else None
    var.filters = [dict(c) for c in meta.get("filters") or []]
    if meta.get("compressor") is not None:
        var.filters.append(dict(meta["compressor"]))
    byteorder = np.dtype(meta["dtype"]).str[0] if isinstance(meta["dtype"], str) else "|"  # "=" spelled out
    var.endianness = {">": "big", "<": "little"}.get(byteorder)
    var.no_fill = meta.get("fill_value") is None
    var.order = str(meta.get("order", "C"))
    var.dimension_separator = str(meta.get("dimension_separator") or ".")
    return var


def zarr_store(url: str) -> Any:
    """What a zarr-python user opens ``url`` with: a ``.zip`` file through ``zarr.storage.ZipStore`` (zarr-python
    takes a path as a directory), kerchunk references (``.json``, ``.parq``) through ``zarr.storage.FsspecStore``
    over fsspec's reference filesystem (what xarray's and zarr-python's documentation open them with), anything
    else as it is."""
    if url.endswith(".zip") and Path(url).is_file():
        import zarr.storage

        return zarr.storage.ZipStore(url, mode="r")
    if is_reference_path(url) and Path(url).exists():
        import zarr.storage

        return zarr.storage.FsspecStore.from_url("reference://", read_only=True,
                                                 storage_options={"fo": url, "remote_protocol": "file"})
    return url


class PythonPackagePeer(Peer):
    """A peer that is a Python package: available when it imports, versioned by its distribution."""

    package = ""

    def available(self) -> str | None:
        import importlib

        try:
            importlib.import_module(self.package)
        except ImportError:
            return f"{self.package} not installed"
        return None

    def version(self) -> str:
        from importlib.metadata import version

        return version(self.package)


def _fixed_width_bytes(values: np.ndarray) -> np.ndarray:
    """Strings as UTF-8 in the narrowest |Sn that holds them: how a pure-Zarr writer stores text."""
    encoded = [str(v).encode("utf-8") for v in values.ravel()]
    width = max([len(b) for b in encoded] + [1])
    return np.array(encoded, dtype=f"S{width}").reshape(values.shape)


def _v3_codecs(var: Variable, itemsize: int) -> dict[str, Any]:
    """The ``create_array`` codec arguments a zarr-python 3 user gives for the variable's netCDF filters in
    Zarr v3: numcodecs' own shuffle and zlib (``zarr.codecs.numcodecs``), the same codecs as in v2 (v3 has no
    shuffle of its own outside blosc), and zarr-python's defaults otherwise."""
    from zarr.codecs import numcodecs as v3_numcodecs

    chain: list[Any] = []
    for cfg in var.filters or []:
        if cfg["id"] == "shuffle":
            chain.append(v3_numcodecs.Shuffle(elementsize=itemsize))
        elif cfg["id"] == "zlib":
            chain.append(v3_numcodecs.Zlib(level=cfg.get("level", 1)))
    return {"compressors": chain} if chain else {}


class ZarrPython(PythonPackagePeer):
    """zarr-python 3 in this process: a Zarr v2 writer, and a reader of v2 and v3 (``ZarrPythonV3`` is its
    v3 writer). The format it writes follows its capabilities (``writes-zarr-v3``)."""

    id, name, reads, writes, package = "zarr-python", "zarr-python", True, True, "zarr"
    capabilities = PURE_ZARR | {"references"}  # references through FsspecStore (zarr_store)

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        import warnings

        import zarr

        with warnings.catch_warnings():
            # "Numcodecs codecs are not in the Zarr version 3 specification", "unstable specification" of
            # null_terminated_bytes: what zarr-python says of the v3 it writes, tested in tests/peers
            warnings.simplefilter("ignore")
            root = zarr.open_group(str(target), mode="w", zarr_format=3 if _writes_v3(self) else 2)
            self._write_group(root, dataset.root, options)
        return str(target)

    def _array_arguments(self, var: Variable, data: np.ndarray, options: dict[str, str]) -> dict[str, Any]:
        """``create_array``'s arguments for ``var`` in the format this peer writes."""
        import numcodecs

        fill = var.fill_value
        kwargs: dict[str, Any] = {"shape": data.shape, "dtype": data.dtype,
                                  "chunks": tuple(var.chunks) if var.chunks else data.shape or (),
                                  "fill_value": (fill if fill is not None and var.type not in ("char", "string")
                                                 else None)}
        if _writes_v3(self):
            from zarr.codecs import TransposeCodec

            kwargs.update(_v3_codecs(var, data.dtype.itemsize),
                          dimension_names=[d.rsplit("/", 1)[-1] for d in var.dimensions] or None)
            if var.type == "string":
                kwargs["dtype"] = str  # v3's "string" (vlen-utf8), which zarr-python 3 writes for text
            if options.get("order") == "F":  # v3 keeps the order of a chunk's items in a transpose codec
                kwargs["filters"] = [TransposeCodec(order=tuple(reversed(range(data.ndim))))]
            if options.get("separator"):
                kwargs["chunk_key_encoding"] = {"name": "default", "separator": options["separator"]}
            return kwargs
        compressor, filters = None, None
        for cfg in var.filters or []:
            if cfg["id"] == "zlib":
                compressor = numcodecs.Zlib(level=cfg.get("level", 1))
            elif cfg["id"] == "shuffle":
                filters = [numcodecs.Shuffle(elementsize=data.dtype.itemsize)]
        kwargs.update(order=options.get("order", "C"), compressors=compressor, filters=filters)
        if options.get("separator"):
            kwargs["chunk_key_encoding"] = {"name": "v2", "separator": options["separator"]}
        return kwargs

    def _write_group(self, zgroup: Any, group: Group, options: dict[str, str]) -> None:
        zgroup.attrs.update({n: _plain(a) for n, a in group.attributes.items()})
        for name, var in group.variables.items():
            data = np.asarray(var.data)
            if var.type == "string" and not _writes_v3(self):
                data = _fixed_width_bytes(data)
            arr = zgroup.create_array(name, **self._array_arguments(var, data, options))
            arr[...] = data
            attrs = {n: _plain(a) for n, a in var.attributes.items() if n != "_FillValue"}
            if not _writes_v3(self):  # v3 names them in dimension_names
                attrs["_ARRAY_DIMENSIONS"] = [d.rsplit("/", 1)[-1] for d in var.dimensions]
            arr.attrs.update(attrs)
        for name, sub in group.groups.items():
            self._write_group(zgroup.create_group(name), sub, options)

    def read(self, url: str) -> Dataset:
        """The whole read as one coroutine on zarr-python's event loop (``zarr.core.sync.sync``), through its
        asynchronous API, which its synchronous one wraps call by call: one hand-over to the loop's thread per
        store, where there were about ten (each open, listing, existence test and read), which cost several
        times the read itself while other threads held the interpreter lock (the report's --jobs)."""
        from zarr.core.sync import sync

        return Dataset(sync(self._read_group(zarr_store(url), "")))

    async def _read_group(self, root: Any, path: str) -> Group:
        """One node at a time, in name order, listed by zarr-python's own store (``Store.list_dir``,
        ``Store.exists``): ``Group.members()`` fails the whole group on one array it cannot type
        (``>S1``), and reports the first of several failures in completion order, which would make
        the report irreproducible. Zarr v2 and v3 alike: zarr-python finds which (``zarr_format=None``)."""
        import zarr.api.asynchronous as zarr_async

        zgroup = await zarr_async.open_group(root, path=path, mode="r")
        store = zgroup.store
        v3 = zgroup.metadata.zarr_format == 3
        group = Group(attributes=_untyped_attributes(dict(zgroup.attrs)))
        for name in sorted([name async for name in store.list_dir(path)]):
            child = f"{path}/{name}".strip("/")
            kind = await self._v3_kind(store, child) if v3 else (
                "array" if await store.exists(f"{child}/.zarray") else
                "group" if await store.exists(f"{child}/.zgroup") else None)
            if kind == "array":
                arr = await zarr_async.open_array(store=root, path=child, mode="r",
                                                  zarr_format=zgroup.metadata.zarr_format)
                values = np.asarray(await arr.getitem(...))
                var = _variable_from_values(values, _untyped_attributes(dict(arr.attrs)))
                group.variables[name] = var if v3 else _with_zarr_storage(var, arr)
            elif kind == "group":
                group.groups[name] = await self._read_group(root, child)
        return group

    @staticmethod
    async def _v3_kind(store: Any, key: str) -> str | None:
        """The ``node_type`` of the v3 node ``key`` as zarr-python's store holds it, or None."""
        from zarr.core.buffer import default_buffer_prototype

        found = await store.get(f"{key}/{ZARR_JSON}", prototype=default_buffer_prototype())
        if found is None:
            return None
        try:
            doc = json.loads(found.to_bytes())
        except ValueError:
            return None
        kind = doc.get("node_type") if isinstance(doc, dict) else None
        return kind if kind in ("array", "group") else None


class OursReferences(Peer):
    """``nc2nczarr IN.nc OUT.json --reference``: the case written as a netCDF-4 file by netCDF4-python (as every
    reference writer of nczarr-conformance.toml gets it), then our NCZarr store of it as kerchunk JSON, every
    chunk a byte range of that file (conversion/references.py)."""

    id, name, writes = "ours-references", "nczarr_conformance (nc2nczarr --reference, kerchunk JSON)", True
    capabilities = ALL | {"references", "writes-references"}

    def available(self) -> str | None:
        return None if nc4.available() else "netCDF4-python not installed"

    def version(self) -> str:
        return __version__

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        from nczarr_conformance.conversion.references import convert_references

        reject_options(options, self.id)
        target.mkdir(parents=True)
        source, refs = target / "case.nc", target.parent / f"{target.name}.json"
        nc4.write(dataset, str(source))
        try:
            convert_references(str(source), str(refs))
        except UnsupportedError as exc:
            raise CannotExpress(str(exc)) from exc
        return str(refs)

    def read(self, url: str) -> Dataset:
        raise NotImplementedError("ours-references writes only")


class ZarrPythonV3(ZarrPython):
    """zarr-python 3's Zarr v3 writer (``zarr_format=3``): ``dimension_names``, zarr-python's default codecs
    (``bytes`` + ``zstd``), ``string`` for text, numcodecs' shuffle and zlib for netCDF's filters. Its
    stores are read by the readers that declare ``zarr-v3``, zarr-python itself among them."""

    id, name, reads, capabilities = "zarr-python-v3", "zarr-python (zarr_format=3)", False, PURE_ZARR_V3


def _plain(attr: Attribute) -> Any:
    """An attribute as a pure-Zarr writer stores it: plain JSON, no type."""
    if attr.type == "char":
        return attr.value
    values = json.loads(json.dumps(attr_codec.encode(attr)[0]))
    return values


class Xarray(PythonPackagePeer):
    id, name, reads, writes, root_only, package = "xarray", "xarray", True, True, True, "xarray"
    capabilities = PURE_ZARR | {"references"}  # references: the zarr engine over fsspec's reference filesystem

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        import xarray as xr

        reject_options(options, self.id)
        if dataset.root.groups:
            raise CannotExpress("xarray.Dataset.to_zarr writes one group")
        data_vars, encoding = {}, {}
        for name, var in dataset.root.variables.items():
            values = np.asarray(var.data)
            enc: dict[str, Any] = {"chunks": tuple(var.chunks) if var.chunks else None}
            if var.type == "string" and not _writes_v3(self):  # v3: text as it is, written as v3's "string"
                values = _fixed_width_bytes(values)
            attrs = {n: _plain(a) for n, a in var.attributes.items() if n != "_FillValue"}
            if var.fill_value is not None and var.type not in ("char", "string"):
                enc["_FillValue"] = var.fill_value
            data_vars[name] = xr.Variable([d.rsplit("/", 1)[-1] for d in var.dimensions], values, attrs)
            encoding[name] = {k: v for k, v in enc.items() if v is not None}
        ds = xr.Dataset(data_vars, attrs={n: _plain(a) for n, a in dataset.root.attributes.items()})
        ds.to_zarr(str(target), zarr_format=3 if _writes_v3(self) else 2, consolidated=True, encoding=encoding)
        return str(target)

    def read(self, url: str) -> Dataset:
        import warnings

        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no consolidated metadata": expected for most writers
            try:
                # chunks=None: xarray's own lazy arrays, not dask's; the same zarr-python reads, without a
                # dask graph and scheduler run per variable (a third of this peer's time in a report)
                ds = xr.open_zarr(zarr_store(url), consolidated=None, chunks=None, decode_cf=False,
                                  mask_and_scale=False, decode_times=False)
            except Exception as exc:
                # xarray opens arrays concurrently and reports whichever failed first; name the
                # first failing array in name order instead, so the report is reproducible
                try:
                    ZarrPython().read(url)
                except Exception as first:  # any failure: its text names the array
                    raise type(exc)(f"{first}") from exc
                raise
        group = Group(attributes=_untyped_attributes(dict(ds.attrs)))
        for name, var in {**ds.coords, **ds.data_vars}.items():
            group.variables[str(name)] = _variable_from_values(var.values, _untyped_attributes(dict(var.attrs)))
        return Dataset(group)


class XarrayV3(Xarray):
    """``xarray.Dataset.to_zarr(zarr_format=3)``: the v3 layout xarray writes by default (one group,
    ``dimension_names``, consolidated metadata in the root ``zarr.json``)."""

    id, name, reads, capabilities = "xarray-v3", "xarray (to_zarr zarr_format=3)", False, PURE_ZARR_V3

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr-python's warnings on what xarray asks of v3: tests/peers
            return super().write(dataset, target, options)


class XarrayDatatree(PythonPackagePeer):
    """``xarray.open_datatree(engine="zarr")``: every group, where ``open_zarr`` reads one."""

    id, name, reads, capabilities, package = "xarray-datatree", "xarray open_datatree", True, PURE_ZARR, "xarray"

    def read(self, url: str) -> Dataset:
        import warnings

        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no consolidated metadata": expected for most writers
            try:
                tree = xr.open_datatree(zarr_store(url), engine="zarr", consolidated=None, decode_cf=False,
                                        mask_and_scale=False, decode_times=False)
            except Exception as exc:  # name the first failing array in name order, as Xarray.read does
                try:
                    ZarrPython().read(url)
                except Exception as first:  # any failure: its text names the array
                    raise type(exc)(f"{first}") from exc
                raise
        return Dataset(self._group(tree))

    def _group(self, node: Any) -> Group:
        ds = node.to_dataset(inherit=False)  # a child shows its ancestors' coordinates too: not its own
        group = Group(attributes=_untyped_attributes(dict(ds.attrs)))
        for name, var in {**ds.coords, **ds.data_vars}.items():
            group.variables[str(name)] = _variable_from_values(var.values, _untyped_attributes(dict(var.attrs)))
        for name, child in node.children.items():
            group.groups[str(name)] = self._group(child)
        return group


class NczarrEngine(PythonPackagePeer):
    """Our xarray engine as a user opens it: ``xarray.open_datatree(url, engine="nczarr")`` without CF decoding,
    read back into the netCDF model as far as an xarray Dataset carries it.

    The engine is a reader of its own (access/xarray_backend.py: the encoding, the attributes as
    netCDF4-python returns them, the lazy arrays), so it has its own column: a failure that is the
    engine's alone (a v3 blosc codec it could not describe) cannot hide behind our reader's pass. What
    an xarray Dataset cannot carry is taken as xarray gives it: a dimension belongs to the outermost
    group whose variables use it (no variable: it is not seen), and a one-valued string attribute reads
    as char text, as netCDF4-python hands both to xarray's netcdf4 engine.
    """

    id, name, reads, capabilities, package = ("nczarr-engine", 'xarray engine="nczarr" (open_datatree)', True, ALL,
                                              "xarray")

    def read(self, url: str) -> Dataset:
        import xarray as xr

        tree = xr.open_datatree(url, engine="nczarr", decode_cf=False, mask_and_scale=False, decode_times=False)
        try:
            return Dataset(self._group(tree, "/", {}))
        finally:
            tree.close()

    def _group(self, node: Any, path: str, outer: dict[str, str]) -> Group:
        """The group at ``path``; ``outer``: dimension name → the path of the ancestor group defining it."""
        ds = node.to_dataset(inherit=False)
        unlimited = set(ds.encoding.get("unlimited_dims") or ())
        group = Group(attributes={n: attribute_from_python(v) for n, v in ds.attrs.items()})
        visible = dict(outer)
        for name, size in ds.sizes.items():
            if str(name) not in outer:
                group.dimensions[str(name)] = Dimension(int(size), str(name) in unlimited)
                visible[str(name)] = keys.join(path, str(name))
        for name, var in ds.variables.items():
            group.variables[str(name)] = self._variable(var, visible)
        for name, child in node.children.items():
            group.groups[str(name)] = self._group(child, keys.join(path, str(name)), visible)
        return group

    @staticmethod
    def _variable(var: Any, visible: dict[str, str]) -> Variable:
        values = np.asarray(var.values)
        if values.dtype.kind == "S" and values.dtype.itemsize == 1:
            nctype = "char"
        elif values.dtype.kind in ("O", "U"):
            nctype, values = "string", values.astype(object)
        else:
            nctype = nctype_of_numpy(values.dtype)
        attrs = {n: attribute_from_python(v) for n, v in var.attrs.items()}
        if nctype == "char" and "_FillValue" in attrs:  # the engine gives a char fill as bytes, as netcdf4's does
            fill = var.attrs["_FillValue"]
            attrs["_FillValue"] = Attribute("char", fill.decode("latin-1") if isinstance(fill, bytes) else str(fill))
        return Variable(nctype, [visible[str(d)] for d in var.dims], tuple(values.shape), attrs, values)


GDAL_TYPES = {"Int8": "i1", "Byte": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4", "Int64": "i8",
              "UInt64": "u8", "Float32": "f4", "Float64": "f8"}


def _system_python_env() -> dict[str, str]:
    """Our environment without what points an interpreter at our packages (a venv's PYTHONPATH): the
    system Python that has GDAL's bindings imports its own, as gdalmdiminfo knows nothing of Python."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


class Gdal(Peer):
    id, name, reads, capabilities = "gdal", "GDAL Zarr driver (gdalmdiminfo)", True, PURE_ZARR

    def available(self) -> str | None:
        return _tool("gdalmdiminfo")

    def version(self) -> str:
        out = subprocess.run(["gdalmdiminfo", "--version"], check=False, capture_output=True, text=True).stdout.split()
        return out[1].rstrip(",") if len(out) > 1 else ""

    #: an interpreter with GDAL's Python bindings (Debian's python3-gdal) and the worker that makes it
    #: gdalmdiminfo (peers/gdal_serve.py): libgdal loaded once per worker, not once per store
    bindings = "/usr/bin/python3"
    worker = str(Path(__file__).with_name("gdal_serve.py"))
    timeout = 120.0

    def __init__(self) -> None:
        self._pool: WorkerPool | None = None
        self._checked = False
        self._lock = threading.Lock()

    def _workers(self) -> WorkerPool | None:
        """The bindings' workers, or None where the bindings do not import (then each read runs the tool)."""
        with self._lock:
            if not self._checked:
                self._checked = True
                try:
                    found = subprocess.run([self.bindings, "-c", "import osgeo.gdal"], check=False,
                                           capture_output=True, timeout=60, env=_system_python_env()).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    found = False
                if found:
                    self._pool = WorkerPool([self.bindings, self.worker], _system_python_env, None)
            return self._pool

    def mdiminfo(self, url: str) -> tuple[int | None, str, str]:
        """(exit status, or None on timeout; stdout; stderr) of ``gdalmdiminfo -detailed URL``: the tool's
        own calls in a bindings worker where the bindings are installed, else the tool itself."""
        pool = self._workers()
        if pool is None:
            try:
                done = subprocess.run(["gdalmdiminfo", "-detailed", url], check=False, capture_output=True,
                                      text=True, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return None, "", ""
            return done.returncode, done.stdout, done.stderr
        try:
            status, out, err = pool.call({"url": url}, self.timeout)
        except WorkerProtocolError as exc:  # the worker was replaced; this read fails, the next is clean
            return 1, "", f"{exc}\n{exc.stderr.decode('utf-8', 'replace')}"
        return status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def read(self, url: str) -> Dataset:
        status, stdout, stderr = self.mdiminfo(url)
        if status is None:
            raise RuntimeError(f"gdalmdiminfo timed out after {self.timeout:g} s")
        if status != 0 or not stdout.strip():
            said = stderr.strip()
            raise RuntimeError(f"gdalmdiminfo exit {status}: {said.splitlines()[0] if said else ''}")
        errors = [line for line in stderr.splitlines() if line.startswith("ERROR")]
        doc = json.loads(stdout)
        dataset = Dataset(self._group(doc))
        if errors:
            dataset.root.attributes["__gdal_errors__"] = Attribute("char", "; ".join(errors))
        return dataset

    def _group(self, doc: dict[str, Any]) -> Group:
        group = Group(attributes=self._attrs(doc.get("attributes", {})))
        for name, arr in (doc.get("arrays") or {}).items():
            dtype = arr.get("datatype")
            values = arr.get("values")
            if isinstance(dtype, str) and dtype in GDAL_TYPES and values is not None:
                data = np.array(values, dtype=GDAL_TYPES[dtype])
            elif values is not None:
                data = np.array([str(v) for v in np.ravel(values)], dtype=object)
            else:
                data = np.zeros(0)
            group.variables[name] = _variable_from_values(data, self._attrs(arr.get("attributes", {})))
        for name, sub in (doc.get("groups") or {}).items():
            group.groups[name] = self._group(sub)
        return group

    @staticmethod
    def _attrs(raw: dict[str, Any]) -> dict[str, Attribute]:
        return _untyped_attributes({n: a.get("value") if isinstance(a, dict) else a for n, a in raw.items()})


class TensorStore(PythonPackagePeer):
    """TensorStore's ``zarr`` driver on Zarr v2 arrays and its ``zarr3`` driver on v3 ones."""

    id, name, reads = "tensorstore", "TensorStore zarr and zarr3 drivers", True
    capabilities = PURE_ZARR - {"attributes"}  # arrays only: attributes are not compared
    package = "tensorstore"

    def read(self, url: str) -> Dataset:
        import tensorstore as ts

        store = DirectoryStore(url)
        root = Group()
        for key in store.list_prefix("/"):
            if key.endswith("/.zarray"):
                path, driver = key[1: -len("/.zarray")], "zarr"
            elif key.endswith(f"/{ZARR_JSON}") and _v3_node_type(Path(url) / key[1:].rsplit("/", 1)[0]) == "array":
                path, driver = key[1: -len(f"/{ZARR_JSON}")], "zarr3"
            else:
                continue
            array = ts.open({"driver": driver, "kvstore": {"driver": "file", "path": str(Path(url).resolve())},
                             "path": path}, read=True).result()
            values = array.read().result()
            group = root
            *parents, name = path.split("/")
            for part in parents:
                group = group.groups.setdefault(part, Group())
            group.variables[name] = _variable_from_values(np.asarray(values), {})
        return Dataset(root)


def _v3_fill_json(value: Any) -> Any:
    """A fill value in the v3 ``fill_value`` JSON forms: NaN and the infinities as their names."""
    number = np.asarray(value).ravel()[0].item()
    if isinstance(number, float) and not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    return number


class TensorStoreV3(TensorStore):
    """TensorStore's ``zarr3`` driver as a writer: every variable an array it creates and fills, with
    ``dimension_names``, plain JSON ``attributes``, the variable's fill, chunks, byte order (``bytes``),
    F order (``transpose``), key separator and filters (shuffle + zlib → ``blosc`` with zlib and byte
    shuffle, zlib alone → ``gzip``: TensorStore has no numcodecs codecs). TensorStore has no groups, so each
    group's ``zarr.json`` is written as JSON, as zarr-python writes it; it has no text data types, so a
    case with string or char data cannot be written (said, not failed)."""

    id, name, reads, writes = "tensorstore-v3", "TensorStore zarr3 driver (writer)", False, True
    capabilities = PURE_ZARR_V3

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        unknown = set(options) - {"order", "separator"}
        if unknown:
            reject_options({k: options[k] for k in unknown}, self.id)
        self._write_group(target, "", dataset.root, options)
        return str(target)

    def _write_group(self, root: Path, path: str, group: Group, options: dict[str, str]) -> None:
        node = root / path if path else root
        node.mkdir(parents=True, exist_ok=True)
        doc = {"zarr_format": 3, "node_type": "group",
               "attributes": {n: _plain(a) for n, a in group.attributes.items()}}
        (node / ZARR_JSON).write_text(json.dumps(doc))
        for name, var in group.variables.items():
            self._write_array(root, f"{path}/{name}".lstrip("/"), var, options)
        for name, sub in group.groups.items():
            self._write_group(root, f"{path}/{name}".lstrip("/"), sub, options)

    def _write_array(self, root: Path, path: str, var: Variable, options: dict[str, str]) -> None:
        import tensorstore as ts

        if var.type in ("string", "char"):
            raise CannotExpress(f"TensorStore's zarr3 driver has no data type for netCDF {var.type}")
        data = np.asarray(var.data)
        itemsize = data.dtype.itemsize
        codecs: list[dict[str, Any]] = []
        if options.get("order") == "F":
            codecs.append({"name": "transpose", "configuration": {"order": list(reversed(range(data.ndim)))}})
        serializer: dict[str, Any] = {"name": "bytes"}
        if itemsize > 1:
            serializer["configuration"] = {"endian": "big" if var.endianness == "big" else "little"}
        codecs.append(serializer)
        ids = [cfg["id"] for cfg in var.filters or []]
        level = next((cfg.get("level", 1) for cfg in var.filters or [] if cfg["id"] == "zlib"), 1)
        if "shuffle" in ids and "zlib" in ids:
            codecs.append({"name": "blosc", "configuration": {"cname": "zlib", "clevel": level, "shuffle": "shuffle",
                                                              "typesize": itemsize, "blocksize": 0}})
        elif "zlib" in ids:
            codecs.append({"name": "gzip", "configuration": {"level": level}})
        fill = var.fill_value
        metadata: dict[str, Any] = {
            "shape": list(data.shape), "data_type": data.dtype.name, "codecs": codecs,
            "chunk_grid": {"name": "regular", "configuration": {
                "chunk_shape": [int(c) for c in var.chunks] if var.chunks else [max(n, 1) for n in data.shape]}},
            "fill_value": _v3_fill_json(fill) if fill is not None else 0,
            "dimension_names": [d.rsplit("/", 1)[-1] for d in var.dimensions],
            "attributes": {n: _plain(a) for n, a in var.attributes.items() if n != "_FillValue"},
        }
        if options.get("separator"):
            metadata["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": options["separator"]}}
        array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root.resolve())}, "path": path,
                         "metadata": metadata, "create": True}).result()
        array.write(data).result()


for _peer in (Ours("nczarr-4.10", "ours"), Ours("nczarr-2", "ours-nczarr-2"),
              Ours("nczarr-2-upper", "ours-nczarr-2-upper"), Ours("zarr", "ours-zarr"),
              Ours("zarr", "ours-zarr-v3", zarr_format=3), OursReferences(), NetCDFC410(), NetCDFC410Fixed(),
              ZarrPython(), ZarrPythonV3(), Xarray(), XarrayV3(), XarrayDatatree(), NczarrEngine(), Gdal(),
              TensorStore(), TensorStoreV3()):
    register(_peer)


def write_v1_store(target: Path) -> None:
    """The 2020 NCZarr v1 layout, synthesised from nczarr.md Appendix C (separate .nczarr/.nczgroup/
    .nczarray/.nczattr objects): no released netcdf-c writes v1 and netcdf-c's corpus ships no v1 store."""
    objects: dict[str, Any] = {
        "/.nczarr": {"nczarr_version": "1.0.0"}, "/.zgroup": {"zarr_format": 2},
        "/.nczgroup": {"dims": {"x": "3", "y": 2}, "vars": ["v"], "groups": ["g"]},
        "/.zattrs": {"title": "v1", "n": [1, 2]}, "/.nczattr": {"types": {"title": "<U1", "n": "<i2"}},
        "/v/.zarray": {"zarr_format": 2, "shape": [3, 2], "dtype": "<i4", "chunks": [2, 2], "fill_value": -1,
                       "order": "C", "compressor": None, "filters": None},
        "/v/.nczarray": {"dimrefs": ["/x", "/y"], "storage": "chunked"},
        "/g/.zgroup": {"zarr_format": 2}, "/g/.nczgroup": {"dims": {}, "vars": ["s"], "groups": []},
        "/g/s/.zarray": {"zarr_format": 2, "shape": [1], "dtype": "<f8", "chunks": [1], "fill_value": 0,
                         "order": "C", "compressor": None, "filters": None},
        "/g/s/.nczvar": {"dimrefs": [], "storage": "scalar"},
    }
    with DirectoryStore(target, "w") as store:
        for key, doc in objects.items():
            store.put(key, json.dumps(doc).encode())
        store.put("/v/0.0", np.array([[0, 1], [2, 3]], "<i4").tobytes())
        store.put("/g/s/0", np.array([6.5], "<f8").tobytes())


#: case id → the store it copies from nczarr_conformance/corpus/netcdf-c, or "v1" for the store
#: synthesised from nczarr.md Appendix C (write_v1_store); conformance/cases.py holds each case's model
CORPUS_CASES: dict[str, str] = {
    "corpus-ref_byte": "ref_byte.zarr.zip",
    "corpus-ref_byte_fill_value_null": "ref_byte_fill_value_null.zarr.zip",
    "corpus-ref_oldformat": "ref_oldformat.zip",
    "corpus-ref_oldkeys": "ref_oldkeys.file.zip",
    "nczarr-v1": "v1",
}


class Corpus(Peer):
    """Stores as netcdf-c's own tests hold them, and the NCZarr v1 store synthesised from nczarr.md
    Appendix C: a writer only of those cases."""

    id, name, writes = "netcdf-c-corpus", "netcdf-c test corpus (+ NCZarr v1 synthesised from nczarr.md)", True

    def version(self) -> str:
        return "nczarr_test"

    def write(self, dataset: Dataset, target: Path, options: dict[str, str]) -> str:
        raise CannotExpress("the corpus holds only its own stores")

    def copy_case(self, case_id: str, target: Path) -> str:
        from nczarr_conformance.resources import netcdf_c_corpus
        from nczarr_conformance.stores import open_store

        source = CORPUS_CASES[case_id]
        if source == "v1":
            write_v1_store(target)
            return str(target)
        with open_store(str(netcdf_c_corpus() / source)) as src, DirectoryStore(target, "w") as dst:
            for key in src.list_prefix("/"):
                data = src.get(key)
                if data is not None:
                    dst.put(key, data)
        return str(target)

    def read(self, url: str) -> Dataset:
        raise NotImplementedError


register(Corpus())
