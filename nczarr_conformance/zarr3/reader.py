"""A pure Zarr v3 store → the canonical model, through the same chunk reader as v2.

Decisions (issue #25, first slice):

* groups and arrays are ``zarr.json`` objects; a directory without one that holds some
  ``zarr.json`` below it is an *implicit group* (the v3 drafts' notion; no attributes);
* ``consolidated_metadata`` inside the root ``zarr.json`` is used when present and is then
  authoritative, as ``.zmetadata`` is for v2 here and as zarr-python and xarray use it: one
  GET serves every node; a stale copy is for nczarr-check to report (a later slice);
* ``dimension_names`` are shared by name within the array's group, as xarray means them (its
  Dataset is one group): the first array to use a name defines that group's dimension, and an
  array giving the same name another length is refused in one line naming both lengths (xarray
  refuses it too: "conflicting sizes for dimension"); a null name is an anonymous root
  dimension ``_Anonymous_Dim_<n>``, as netcdf-c reads a pure-Zarr array without names;
* attributes are typed from their JSON values as the v2 pure-Zarr path types them
  (``nczarr/attrs.py``); ``_FillValue`` takes the variable's type;
* variable-length ``bytes`` read as netCDF ``string`` (netCDF has no opaque vlen type in this
  model); bytes that are not UTF-8 are kept through surrogate escapes, so nothing is lost;
* the model's ``chunks`` is the read unit: the inner chunk of a sharded array (zarr-python's
  ``Array.chunks``), and its ``filters`` the v3 codecs after ``bytes`` as ``{"id": name, …}``.
"""
from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nczarr_conformance import keys, limits
from nczarr_conformance.codecs import Pipeline
from nczarr_conformance.errors import NO_DATASET, FormatError, NoDatasetError, UnsupportedError
from nczarr_conformance.model import (
    Attribute,
    Dataset,
    Group,
    Variable,
    is_internal_attribute,
)
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import attr_type_string
from nczarr_conformance.nczarr.flavors import load_json
from nczarr_conformance.nczarr.reader import (
    ANONYMOUS_DIM,
    MAX_NDIM,
    ArrayInfo,
    ChunkReader,
    DatasetReader,
    ReadScope,
    dim_placeholder,
)
from nczarr_conformance.stores.base import Store, slice_range
from nczarr_conformance.zarr3 import nz
from nczarr_conformance.zarr3.chain import Chain, build_chain
from nczarr_conformance.zarr3.metadata import (
    FLAVOR,
    ZARR_JSON,
    KeyEncoding,
    int_tuple,
    node_type,
    parse_data_type,
    parse_fill,
    parse_key_encoding,
    regular_chunk_shape,
)


class V3Pipeline(Pipeline):
    """Stands in ArrayInfo's ``pipeline`` slot for a v3 array (whose chain is :class:`Chain`)."""

    def __init__(self, chain: Chain | None) -> None:  # no super(): the v2 chain does not apply
        self.filters = []
        self.compressor = None
        self.chain = chain

    def encode(self, arr: np.ndarray) -> bytes:
        raise UnsupportedError("writing Zarr v3 is not supported yet")

    def decode(self, raw: bytes, limit: int | None = None) -> bytes:
        raise UnsupportedError("a Zarr v3 chunk is decoded by its Chain, not as bytes")

    def max_encoded(self, limit: int) -> int:
        return self.chain.max_encoded() if self.chain is not None else limit


@dataclass
class V3ArrayInfo(ArrayInfo):
    """A v3 array: chunks (inner chunks when sharded) are found by its key encoding and decoded by its chain."""

    chain: Chain | None = None
    encoding: KeyEncoding = field(default_factory=lambda: KeyEncoding("default", "/"))
    unavailable: str | None = None

    def max_stored_bytes(self) -> int:
        """The most bytes one stored chunk (a whole shard, when sharded) may hold."""
        return self.chain.max_encoded() if self.chain is not None else limits.max_in_memory_bytes()

    def load_chunk(self, store: Store, index: tuple[int, ...], max_bytes: int,
                   scope: ReadScope | None = None) -> np.ndarray | None:
        if self.unavailable is not None or self.chain is None:
            raise UnsupportedError(self.unavailable or f"{self.key}: no codec chain")
        nbytes = self.chunk_nbytes
        if nbytes > max_bytes:
            raise limits.LimitError(f"{self.key}: declared chunk {list(self.chunks)} needs {nbytes} bytes; "
                                    f"refusing to hold more than {max_bytes} in memory (NCZARR_MAX_IN_MEMORY)")
        sharding = self.chain.sharding
        if sharding is None:
            ckey = self.encoding.key(self.key, index)
            raw = store.get(ckey, limit=self.chain.max_encoded())
            chain = self.chain
        else:
            shard, position = self.chain.locate(index)
            ckey = self.encoding.key(self.key, shard)
            if self.chain.compressors:  # a compressed shard: read whole (within its bound), then indexed
                whole = store.get(ckey, limit=self.chain.max_encoded())
                data = None if whole is None else self.chain.decompress(whole, ckey, sharding.max_shard_nbytes)
                raw = None if data is None else sharding.inner_from(
                    lambda start, length: (slice_range(data, start, length), len(data)), ckey, position,
                    None if scope is None else scope.once)
            else:
                raw = sharding.read_inner(store, ckey, position, None if scope is None else scope.once)
            chain = sharding.inner
        if raw is None:
            return None
        values = chain.decode(raw, ckey)
        if sharding is not None:  # an inner chunk comes in the shard's (possibly transposed) axis order
            values = self.chain.untranspose(values)
        return values.reshape(self.chunks or (1,))


class _V3Metadata:
    """The reader's ``meta``: v3 documents by key (v2 keys such as ``/.zattrs`` are None)."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.consolidated: dict[str, Any] | None = None

    def get(self, key: str) -> Any | None:
        return self.docs.get(keys.join(key))


class V3Reader(DatasetReader):
    """Reads a pure Zarr v3 dataset's metadata on construction; data on demand (the v2 reader's methods)."""

    def __init__(self, store: Store, *, xarray: bool = True, max_bytes: int | None = None) -> None:
        ChunkReader.__init__(self, store, {}, max_bytes)
        self.meta = _V3Metadata()  # type: ignore[assignment]
        self.flavor, self.superblock = FLAVOR, None
        self.xarray = xarray
        root = self._doc("/")
        if root is None:
            raise NoDatasetError("no dataset here: no /zarr.json")
        if node_type(root, "/zarr.json") == "array":
            raise UnsupportedError("/zarr.json: the root is a bare Zarr array, not a group; netCDF needs a root group")
        self.nz = nz.claims(root)  # NZ-1.0 (zarr3/nz.py): its bookkeeping hidden, its attribute types
        if self.nz:
            self.flavor = nz.FLAVOR
        self._consolidated = self._read_consolidated(root)
        self.dataset = Dataset(self._read_group("/", root))
        self._place_pure_zarr_dims()
        store.metadata_read()

    @property
    def nczarr(self) -> bool:
        return False

    # ---- metadata objects ----------------------------------------------------------------
    def _doc(self, node: str) -> dict[str, Any] | None:
        key = keys.join(node, ZARR_JSON)
        if self._consolidated_doc(node) is not None:
            return self._consolidated_doc(node)
        raw = self.store.get(key)
        if raw is None:
            return None
        doc = load_json(raw, key)
        if not isinstance(doc, dict):
            raise FormatError(f"{key}: JSON object expected, found {type(doc).__name__}")
        self.meta.docs[key] = doc  # type: ignore[attr-defined]
        return doc

    def _consolidated_doc(self, node: str) -> dict[str, Any] | None:
        table = getattr(self, "_consolidated", None)
        if not table or node == "/":
            return None
        doc = table.get(node.strip("/"))
        return doc if isinstance(doc, dict) else None

    @staticmethod
    def _read_consolidated(root: dict[str, Any]) -> dict[str, Any] | None:
        block = root.get("consolidated_metadata")
        if block is None:
            return None
        meta = block.get("metadata") if isinstance(block, dict) else None
        if not isinstance(meta, dict):
            raise FormatError("/zarr.json: consolidated_metadata has no 'metadata' object")
        return meta

    def _children(self, gkey: str) -> list[tuple[str, dict[str, Any] | None]]:
        """(name, zarr.json or None for an implicit group) of each child of a group, by name."""
        if self._consolidated is not None:
            prefix = gkey.strip("/")
            found = []
            for path, doc in self._consolidated.items():
                parent, _, name = path.strip("/").rpartition("/")
                if parent == prefix and isinstance(doc, dict):
                    found.append((name, doc))
            return sorted(found, key=lambda item: item[0])
        out: list[tuple[str, dict[str, Any] | None]] = []
        for name in self.store.list_dir(gkey):
            if name == ZARR_JSON:
                continue
            child = keys.join(gkey, name)
            doc = self._doc(child)
            if doc is not None:
                out.append((name, doc))
            elif any(keys.basename(k) == ZARR_JSON for k in self.store.list_prefix(child)):
                out.append((name, None))
        return out

    # ---- groups --------------------------------------------------------------------------
    def _read_group(self, gkey: str, doc: dict[str, Any] | None) -> Group:  # type: ignore[override]
        group = Group()
        if doc is not None:
            node_type(doc, keys.join(gkey, ZARR_JSON))
            group.attributes = self._attributes(gkey, doc)
        for name, child in self._children(gkey):
            keys.validate(name)
            ckey = keys.join(gkey, name)
            if child is not None and node_type(child, keys.join(ckey, ZARR_JSON)) == "array":
                group.variables[name] = self._read_array(ckey, child)
            else:
                group.groups[name] = self._read_group(ckey, child)
        return group

    def _attributes(self, node: str, doc: dict[str, Any]) -> dict[str, Attribute]:
        raw = doc.get("attributes") or {}
        if not isinstance(raw, dict):
            raise FormatError(f"{keys.join(node, ZARR_JSON)}: attributes must be an object")
        types = nz.attribute_types(raw) if self.nz else {}
        if self.nz:
            raw = nz.user_attributes(raw)
        attr_codec.refuse_empty_names(raw, keys.join(node, ZARR_JSON))
        out: dict[str, Attribute] = {}
        for name, value in raw.items():
            if is_internal_attribute(name):
                continue
            try:
                out[name] = (nz.decode_attribute(value, types.get(name)) if self.nz
                             else attr_codec.decode(value, None))
            except (FormatError, UnsupportedError) as exc:
                raise FormatError(f"{keys.join(node, ZARR_JSON)}: attribute {name!r}: {exc}") from exc
        return out

    # ---- arrays --------------------------------------------------------------------------
    def _read_array(self, akey: str, doc: dict[str, Any]) -> Variable:
        where = keys.join(akey, ZARR_JSON)
        shape = int_tuple(doc.get("shape"), "shape", where, 0)
        if len(shape) > MAX_NDIM:
            raise UnsupportedError(f"{where}: {len(shape)} dimensions; numpy holds at most {MAX_NDIM}")
        dtype = parse_data_type(doc.get("data_type"), where)
        grid_chunks = regular_chunk_shape(doc.get("chunk_grid"), len(shape), where)
        encoding = parse_key_encoding(doc.get("chunk_key_encoding"), where)
        if doc.get("storage_transformers"):
            raise UnsupportedError(f"{where}: storage_transformers are not read by this reader")
        fill = parse_fill(doc.get("fill_value"), dtype, where)
        chain: Chain | None = None
        unavailable = None
        try:
            chain = build_chain(doc.get("codecs"), dtype, grid_chunks, where)
        except UnsupportedError as exc:  # a codec we lack fails the variable's data, not the dataset
            unavailable = f"{akey}: data cannot be read: {exc}"
        chunks = chain.read_unit if chain is not None else grid_chunks
        beyond = limits.int64_overflow(shape, grid_chunks, max(dtype.storage.numpy.itemsize, 1))
        if beyond is not None:
            raise UnsupportedError(f"{where}: {beyond}, more than int64 ({limits.INT64_MAX}) holds")
        scalar = not shape
        info = V3ArrayInfo(akey, shape, chunks, dtype.storage, "C", "/", V3Pipeline(chain), fill, scalar, doc,
                           chain=chain, encoding=encoding, unavailable=unavailable)
        self.arrays[akey] = info
        attributes = self._attributes(akey, doc)
        raw_fill = (doc.get("attributes") or {}).get("_FillValue")
        if "_FillValue" in attributes:
            attributes["_FillValue"] = _fill_attribute(raw_fill, dtype.storage.nctype, where)
        var = Variable(dtype.storage.nctype, self._dimension_names(akey, doc, shape), shape, attributes,
                       chunks=None if scalar else list(chunks),
                       endianness=self._endianness(chain, dtype.storage.nctype),
                       filters=self._filters(doc))
        return var

    @staticmethod
    def _endianness(chain: Chain | None, nctype: str) -> str | None:
        if chain is None or nctype in ("char", "string", "byte", "ubyte"):
            return None
        endian = (chain.sharding.inner if chain.sharding else chain).endian
        return "big" if endian == "big" else "little"

    @staticmethod
    def _filters(doc: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for codec in doc.get("codecs") or []:
            if isinstance(codec, dict) and codec.get("name") != "bytes":
                config = codec.get("configuration") or {}
                out.append({"id": codec.get("name"), **(config if isinstance(config, dict) else {})})
        copied: list[dict[str, Any]] = json.loads(json.dumps(out))  # plain JSON values, nothing shared with doc
        return copied

    def _dimension_names(self, akey: str, doc: dict[str, Any], shape: tuple[int, ...]) -> list[str]:
        """Placeholders (``dim_placeholder``) that :meth:`_place_pure_zarr_dims` turns into shared dimensions."""
        names = doc.get("dimension_names")
        if names is None and self.xarray:
            names = ((doc.get("attributes") or {}).get("_ARRAY_DIMENSIONS"))
        if names is not None and (not isinstance(names, list) or len(names) != len(shape)):
            raise FormatError(f"{keys.join(akey, ZARR_JSON)}: dimension_names {names!r} do not match "
                              f"shape {list(shape)}")
        out = []
        for d, size in enumerate(shape):
            name = names[d] if names is not None else None
            if name is None or name == "":
                out.append(dim_placeholder("/", ANONYMOUS_DIM.format(size)))
            elif isinstance(name, str):
                out.append(dim_placeholder(keys.parent(akey), name))
            else:
                raise FormatError(f"{keys.join(akey, ZARR_JSON)}: dimension name {name!r} is not a string")
        return out


def _fill_attribute(raw: Any, nctype: str, where: str) -> Attribute:
    """``_FillValue`` in the variable's type. xarray writes it into a v3 array's attributes
    encoded (xarray/backends/zarr.py ``FillValueCoder``): a float as base64 of its 8 little-endian
    bytes, a byte string (char, numpy ``S1``) as base64 of its byte; anything else is typed as the
    v2 pure-Zarr path types it."""
    if isinstance(raw, str) and nctype in ("float", "double", "char"):
        try:
            packed = base64.b64decode(raw, validate=True)
        except ValueError:
            packed = b""
        if len(packed) == 8 and nctype != "char":
            return Attribute(nctype, np.array([struct.unpack("<d", packed)[0]]))
        if len(packed) == 1 and nctype == "char":
            return Attribute("char", packed.decode("latin-1"))
    try:
        return attr_codec.decode(raw, attr_type_string(nctype))
    except (FormatError, UnsupportedError) as exc:
        raise FormatError(f"{where}: attribute '_FillValue': {exc}") from exc


def is_v3(store: Store) -> bool:
    """A root ``zarr.json`` and no v2 root: the store is Zarr v3."""
    return store.get("/zarr.json") is not None and store.get("/.zgroup") is None and store.get("/.zarray") is None


def open_reader(store: Store, *, pure_zarr: bool = False, xarray: bool = True,
                max_bytes: int | None = None) -> DatasetReader:
    """The reader for whatever ``store`` holds: NCZarr/Zarr v2, else Zarr v3.

    v2 is tried first, so opening a v2 store costs no GET more than before (a consolidated one
    stays one GET); only when it finds no v2 root is a root ``zarr.json`` looked for. A store with
    neither says so naming what both versions looked for (:data:`~nczarr_conformance.errors.NO_DATASET`).
    """
    try:
        return DatasetReader(store, pure_zarr=pure_zarr, xarray=xarray, max_bytes=max_bytes)
    except NoDatasetError as exc:
        if not is_v3(store):
            raise NoDatasetError(NO_DATASET) from exc
    except FormatError:
        if not is_v3(store):
            raise
    for layout in V3_LAYOUTS:
        reader = layout(store, xarray=xarray, max_bytes=max_bytes)
        if reader is not None:
            return reader
    return V3Reader(store, xarray=xarray, max_bytes=max_bytes)


class V3Layout(Protocol):
    """A layout on top of plain Zarr v3: its reader when ``store`` holds that layout, else None."""

    def __call__(self, store: Store, *, xarray: bool, max_bytes: int | None) -> V3Reader | None: ...


#: the layouts :func:`open_reader` asks, in turn, before reading a v3 store as plain Zarr v3: draft.py adds
#: netcdf-c's draft NCZarr v3 when imported (``zarr3/__init__`` imports it). A registry, so this module,
#: which the layouts build on, never imports them.
V3_LAYOUTS: list[V3Layout] = []


def register_v3_layout(layout: V3Layout) -> None:
    """Add a layout :func:`open_reader` asks; one registered twice is refused, naming it."""
    if layout in V3_LAYOUTS:
        raise ValueError(f"v3 layout {getattr(layout, '__qualname__', layout)} is registered twice")
    V3_LAYOUTS.append(layout)


def object_limits(store: Store) -> Callable[[str], int]:
    """The byte limit a reader holds each object of ``store`` to, by key, for a writer that copies objects
    as stored (``nczarr-fix --out``, ``--to-v3``, ``--append`` to a zip): metadata objects the metadata cap,
    an array's chunks what an honest chunk of it takes (:meth:`ArrayInfo.max_stored_bytes`), anything else
    the in-memory budget. Issue 39: a 2 MB zip member holding 2 GiB of zeros was inflated whole by those
    writers, where ``nczarr-dump`` and ``nczarr-check`` refuse it by these very limits. A store our reader
    cannot open (a fix may be what it needs) gets the in-memory budget for every non-metadata object."""
    try:
        arrays = {info.key: info for info in open_reader(store).arrays.values()}
    except FormatError:
        arrays = {}
    metadata, other = limits.max_metadata_bytes(), limits.max_in_memory_bytes()

    def limit(key: str) -> int:
        name = keys.basename(key)
        if name.startswith(".") or name == ZARR_JSON:
            return metadata
        node = keys.parent(key)
        while node not in arrays and node != "/":
            node = keys.parent(node)
        info = arrays.get(node)
        return info.max_stored_bytes() if info is not None else other

    return limit


def read_any(store: Store, *, data: bool = True, pure_zarr: bool = False, xarray: bool = True) -> Dataset:
    """The canonical model of the dataset in ``store``, v2 or v3."""
    reader = open_reader(store, pure_zarr=pure_zarr, xarray=xarray)
    return reader.load_data() if data else reader.dataset
