"""netcdf-c's *draft* NCZarr v3 layout (netcdf-c PR #3068, unmerged) → the canonical model.

Source of truth: ``libnczarr/zformat3.c`` of DennisHeimbigner/netcdf-c, branch ``v3plug.dmh``
(tip 48cd8da, 2025-02-11; the file's last change is 8da0d36, 2025-01-15, and the branches
insert1.dmh, shard1.tmp and clean1.dmh hold an identical blob 718d69c). No released netcdf-c writes
this layout, so it is read as that code writes it, and where the PR's ``docs/nczarr.md`` appendix E
says otherwise, the documented spelling is accepted too and the difference is recorded in
:attr:`DraftReader.spellings` (checker/draft.py turns each into an NCZ-V3-DRAFT-* finding):

* root attribute ``_nczarr_superblock`` marks the layout (zformat3.c ZF3_encode_superblock);
* ``_nczarr_group.dimensions``: code ``{name: {"size", "unlimited": 0|1}}`` (ZF3_encode_nczarr_group),
  document ``[{"name", "size", "unlimited"}]``; subgroups under ``groups`` (code) or ``subgroups`` (document);
* ``_nczarr_array.dimension_references``: FQNs of the dimensions (ZF3_encode_nczarr_array);
  ``scalar: 1`` for a 0-d variable; the netCDF type under ``nczarr_type`` (code) or ``type_alias`` (document);
* char is stored as ``uint8`` and string as raw bits ``r<8*maxstrlen>`` (nctype2dtype), NUL padded;
* ``_nczarr_attrs.attribute_types``: code ``{name: type}`` (ZF3_encode_attributes via ncz_insert_attr),
  document ``[{"name", "configuration": {"type"}}]``; type ``json`` for JSON-valued attributes;
* ``_nczarr_*`` keys are bookkeeping, not shown as user attributes (model.is_internal_attribute).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import FormatError, UnsupportedError
from nczarr_conformance.model import Attribute, Dimension, Group, Variable, is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import StorageType, attr_type_string
from nczarr_conformance.nczarr.flavors import load_json
from nczarr_conformance.stores.base import Store
from nczarr_conformance.zarr3.chain import build_chain
from nczarr_conformance.zarr3.metadata import (
    NUMERIC_TYPES,
    ZARR_JSON,
    DataType,
    parse_fill,
    regular_chunk_shape,
)
from nczarr_conformance.zarr3.reader import V3ArrayInfo, V3Pipeline, V3Reader, register_v3_layout

#: the flavor name nczarr-dump -k and nczarr-check show for this layout
DRAFT_FLAVOR = "nczarr-v3-draft"
SUPERBLOCK, GROUP, ARRAY, ATTRS = "_nczarr_superblock", "_nczarr_group", "_nczarr_array", "_nczarr_attrs"
#: where the per-array netCDF type is: zformat3.c writes ``nczarr_type``; docs/nczarr.md says ``type_alias``
TYPE_KEYS = ("nczarr_type", "type_alias")
#: a string longer than this (bytes) is refused: the raw-bits type would make every element this wide
MAX_STRLEN = 1 << 20
RAW_BITS = re.compile(r"^r([0-9]+)$")


def is_draft(root: dict[str, Any]) -> bool:
    """The root ``zarr.json`` carries ``_nczarr_superblock`` in its attributes (zinfer.c's test)."""
    attrs = root.get("attributes")
    return isinstance(attrs, dict) and SUPERBLOCK in attrs


def draft_data_type(data_type: Any, alias: Any, where: str) -> DataType:
    """The netCDF reading of ``data_type`` with the draft's type alias (zformat3.c dtype2nctype)."""
    if alias is not None and not isinstance(alias, str):
        raise FormatError(f"{where}: _nczarr_array type alias {alias!r} is not a string")
    if not isinstance(data_type, str):
        raise FormatError(f"{where}: data_type {data_type!r} is not a name")
    raw = RAW_BITS.match(data_type)
    if alias == "char":
        if data_type != "uint8":
            raise FormatError(f"{where}: type alias 'char' on data_type {data_type!r}; 'uint8' expected")
        return DataType(data_type, StorageType("char", np.dtype("S1")))
    if alias == "string" or (raw is not None and alias is None):
        if raw is None:
            raise FormatError(f"{where}: type alias 'string' on data_type {data_type!r}; 'r<bits>' expected")
        bits = int(raw.group(1))
        if bits == 0 or bits % 8:
            raise FormatError(f"{where}: data_type {data_type}: {bits} bits is not a whole number of bytes")
        if bits // 8 > MAX_STRLEN:
            raise FormatError(f"{where}: data_type {data_type}: a maxstrlen of {bits // 8} bytes is more than "
                              f"{MAX_STRLEN} this reader holds per string")
        return DataType(data_type, StorageType("string", np.dtype(f"S{bits // 8}"), bits // 8))
    if alias is not None and alias not in NUMERIC_TYPES:
        raise UnsupportedError(f"{where}: _nczarr_array type alias {alias!r} has no netCDF type")
    if data_type not in NUMERIC_TYPES:
        raise UnsupportedError(f"{where}: data_type {data_type!r} has no netCDF type")
    nctype = NUMERIC_TYPES[data_type]
    return DataType(data_type, StorageType(nctype, np.dtype(attr_type_string(nctype)[1:]).newbyteorder("=")))


def draft_fill(value: Any, dt: DataType, where: str) -> Any:
    """``fill_value`` of a draft array. zformat3.c writes a char or string fill as a JSON string
    (NCZ_stringconvert), where the v3 spec wants an integer (uint8) or a list of bytes (raw bits);
    both spellings are read."""
    nctype = dt.storage.nctype
    if nctype == "char":
        if isinstance(value, str):
            return value.encode("latin-1", errors="replace")[:1] or b"\x00"
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 256:
            return bytes([value])
        raise FormatError(f"{where}: fill_value {value!r} of a char array is neither a byte nor a string")
    if nctype == "string":
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 256
                                           for v in value):
            return bytes(value).rstrip(b"\x00")
        raise FormatError(f"{where}: fill_value {value!r} of a string array is neither a string nor a byte list")
    return parse_fill(value, dt, where)


def attribute_types(node: str, attrs: dict[str, Any], found: set[str]) -> dict[str, str]:
    """``_nczarr_attrs.attribute_types`` as {name: type}; records which encoding was found."""
    where = keys.join(node, ZARR_JSON)
    block = attrs.get(ATTRS)
    if block is None:
        return {}
    table = block.get("attribute_types") if isinstance(block, dict) else None
    if isinstance(table, dict):
        found.add("attribute_types:object")
        if not all(isinstance(v, str) for v in table.values()):
            raise FormatError(f"{where}: _nczarr_attrs.attribute_types values must be type names")
        return dict(table)
    if isinstance(table, list):
        found.add("attribute_types:list")
        out: dict[str, str] = {}
        for entry in table:
            config = entry.get("configuration") if isinstance(entry, dict) else None
            kind = config.get("type") if isinstance(config, dict) else None
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(kind, str):
                raise FormatError(f"{where}: _nczarr_attrs.attribute_types entry {entry!r} is not "
                                  "{name, configuration: {type}}")
            out[entry["name"]] = kind
        return out
    raise FormatError(f"{where}: _nczarr_attrs.attribute_types must be an object or a list, not {table!r}")


def decode_attribute(value: Any, kind: str | None) -> Attribute:
    """One attribute from its JSON value and draft type name (int8…float64, char, string, json, r<bits>)."""
    if kind is None:
        return attr_codec.decode(value, None)
    if kind in ("char", "json"):
        return attr_codec.decode(value, ">S1")
    if kind == "string" or RAW_BITS.match(kind):
        return attr_codec.decode(value, "|S1")
    if kind in NUMERIC_TYPES:
        return attr_codec.decode(value, attr_type_string(NUMERIC_TYPES[kind]))
    raise FormatError(f"attribute type {kind!r} is not a draft NCZarr v3 type")


def parse_dimensions(gkey: str, info: dict[str, Any], found: set[str]) -> dict[str, tuple[int, bool]]:
    """``_nczarr_group.dimensions`` as {name: (size, unlimited)}, either encoding."""
    where = keys.join(gkey, ZARR_JSON)
    raw = info.get("dimensions", {})
    items: list[tuple[Any, Any]]
    if isinstance(raw, dict):
        found.add("dimensions:object")
        items = list(raw.items())
    elif isinstance(raw, list):
        found.add("dimensions:list")
        items = [(d.get("name") if isinstance(d, dict) else None, d) for d in raw]
    else:
        raise FormatError(f"{where}: _nczarr_group.dimensions must be an object or a list, not {raw!r}")
    out: dict[str, tuple[int, bool]] = {}
    for name, spec in items:
        size = spec.get("size") if isinstance(spec, dict) else spec
        unlim = spec.get("unlimited", 0) if isinstance(spec, dict) else 0
        if not isinstance(name, str) or not name:
            raise FormatError(f"{where}: _nczarr_group dimension {spec!r} has no name")
        keys.validate(name)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise FormatError(f"{where}: _nczarr_group dimension {name!r} has no valid size ({spec!r})")
        if unlim not in (0, 1, True, False):
            raise FormatError(f"{where}: _nczarr_group dimension {name!r}: unlimited {unlim!r}, 0 or 1 expected")
        out[name] = (size, bool(unlim))
    return out



def _in_order(found: dict[str, Any], listed: Any) -> dict[str, Any]:
    """``found`` (children by store listing) in the order ``_nczarr_group`` lists them, which is netCDF's
    creation order (ncdump's); children it does not list follow in listing order."""
    names = [n for n in listed if isinstance(n, str) and n in found] if isinstance(listed, list) else []
    return {**{n: found[n] for n in names}, **{n: v for n, v in found.items() if n not in names}}

class DraftReader(V3Reader):
    """Reads a draft NCZarr v3 store: the v3 reader's chunks, the draft's netCDF metadata."""

    def __init__(self, store: Store, *, xarray: bool = True, max_bytes: int | None = None) -> None:
        #: which of the code's/document's spellings this store uses ("type:nczarr_type", "dimensions:list", ...)
        self.spellings: set[str] = set()
        super().__init__(store, xarray=xarray, max_bytes=max_bytes)
        self.flavor = DRAFT_FLAVOR
        root_attrs = self._doc("/") or {}
        self.superblock = (root_attrs.get("attributes") or {}).get(SUPERBLOCK)

    def _place_pure_zarr_dims(self) -> None:  # called by V3Reader.__init__: dimensions are declared, not inferred
        self._check_dimrefs()

    def _read_group(self, gkey: str, doc: dict[str, Any] | None) -> Group:  # type: ignore[override]
        group = super()._read_group(gkey, doc)
        attrs = (doc or {}).get("attributes") or {}
        info = attrs.get(GROUP) if isinstance(attrs, dict) else None
        if info is None:
            info = {}
        if not isinstance(info, dict):
            raise FormatError(f"{keys.join(gkey, ZARR_JSON)}: _nczarr_group must be an object")
        if "subgroups" in info:
            self.spellings.add("subgroups")
        group.dimensions = {n: Dimension(s, u) for n, (s, u) in parse_dimensions(gkey, info, self.spellings).items()}
        group.variables = _in_order(group.variables, info.get("arrays"))
        group.groups = _in_order(group.groups, info.get("groups", info.get("subgroups")))
        return group

    def _attributes(self, node: str, doc: dict[str, Any]) -> dict[str, Attribute]:
        raw = doc.get("attributes") or {}
        where = keys.join(node, ZARR_JSON)
        if not isinstance(raw, dict):
            raise FormatError(f"{where}: attributes must be an object")
        types = attribute_types(node, raw, self.spellings)
        out: dict[str, Attribute] = {}
        for name, value in raw.items():
            if is_internal_attribute(name):
                continue
            try:
                out[name] = decode_attribute(value, types.get(name))
            except (FormatError, UnsupportedError) as exc:
                raise FormatError(f"{where}: attribute {name!r}: {exc}") from exc
        return out

    def _read_array(self, akey: str, doc: dict[str, Any]) -> Variable:
        where = keys.join(akey, ZARR_JSON)
        attrs = doc.get("attributes") or {}
        info = attrs.get(ARRAY, {}) if isinstance(attrs, dict) else {}
        if not isinstance(info, dict):
            raise FormatError(f"{where}: _nczarr_array must be an object")
        alias = None
        for key in TYPE_KEYS:
            if key in info:
                self.spellings.add(f"type:{key}")
                alias = info[key] if alias is None else alias
        dt = draft_data_type(doc.get("data_type"), alias, where)
        fill_json = doc.get("fill_value")
        # V3Reader's machinery on a copy typed as plain uint8 for char/string (what it can parse), then
        # the storage type, chain, fill and attributes of the draft put in place
        plain = {k: v for k, v in attrs.items() if k != "_FillValue"} if isinstance(attrs, dict) else {}
        patched = dict(doc, attributes=plain, fill_value=0 if fill_json is None else fill_json)
        if dt.storage.nctype in ("char", "string"):
            patched.update(data_type="uint8", fill_value=0)
        var = super()._read_array(akey, patched)
        rec = self.arrays[akey]
        assert isinstance(rec, V3ArrayInfo)
        rec.storage, rec.zarray = dt.storage, doc
        if dt.storage.nctype in ("char", "string"):
            self._rebuild_chain(rec, doc, dt, len(var.shape), where)
        var.type = dt.storage.nctype
        var.attributes = self._attributes(akey, doc)
        var.no_fill = fill_json is None
        fill_attr = var.attributes.get("_FillValue")
        if fill_attr is not None and fill_attr.type != var.type:
            raise FormatError(f"{where}: _FillValue is {fill_attr.type}, variable is {var.type}")
        rec.fill = self._fill_from_attr(fill_attr, dt.storage) if fill_json is None else draft_fill(fill_json, dt,
                                                                                                    where)
        if info.get("scalar") not in (None, 0, 1):
            raise FormatError(f"{where}: _nczarr_array.scalar {info.get('scalar')!r}, 0 or 1 expected")
        var.dimensions = self._dimension_refs(akey, info, var.shape)
        if var.type in ("char", "string"):
            var.endianness = None
        return var

    @staticmethod
    def _rebuild_chain(rec: V3ArrayInfo, doc: dict[str, Any], dt: DataType, ndim: int, where: str) -> None:
        """The codec chain for the draft's storage dtype (S1 for char, S<n> for string)."""
        grid = regular_chunk_shape(doc.get("chunk_grid"), ndim, where)
        try:
            chain = build_chain(doc.get("codecs"), dt, grid, where)
        except UnsupportedError as exc:
            rec.unavailable = f"{rec.key}: data cannot be read: {exc}"
        else:
            rec.chain, rec.pipeline, rec.unavailable = chain, V3Pipeline(chain), None

    def _dimension_refs(self, akey: str, info: dict[str, Any], shape: tuple[int, ...]) -> list[str]:
        where = keys.join(akey, ZARR_JSON)
        refs = info.get("dimension_references")
        if refs is None:
            if shape:
                raise FormatError(f"{where}: _nczarr_array.dimension_references missing")
            return []
        if not isinstance(refs, list) or not all(isinstance(r, str) and r for r in refs):
            raise FormatError(f"{where}: _nczarr_array.dimension_references must be a list of names, not {refs!r}")
        if len(refs) != len(shape):
            raise FormatError(f"{where}: _nczarr_array.dimension_references has {len(refs)} names for a "
                              f"{len(shape)}-d array")
        return [r if r.startswith("/") else "/" + r for r in refs]



def draft_reader(store: Store, *, xarray: bool = True, max_bytes: int | None = None,
                 root: bytes | None = None) -> DraftReader | None:
    """:class:`DraftReader` when the root ``zarr.json`` carries ``_nczarr_superblock``, else None."""
    raw = store.get("/" + ZARR_JSON) if root is None else root
    doc = load_json(raw, "/" + ZARR_JSON) if raw is not None and SUPERBLOCK.encode() in raw else None
    if isinstance(doc, dict) and is_draft(doc):
        return DraftReader(store, xarray=xarray, max_bytes=max_bytes)
    return None


def open_v3(store: Store, *, xarray: bool = True, max_bytes: int | None = None, root: bytes | None = None) -> V3Reader:
    """The reader for a v3 store: :class:`DraftReader` when the root carries ``_nczarr_superblock``."""
    draft = draft_reader(store, xarray=xarray, max_bytes=max_bytes, root=root)
    return draft if draft is not None else V3Reader(store, xarray=xarray, max_bytes=max_bytes)


register_v3_layout(draft_reader)  # open_reader reads a draft store as such
