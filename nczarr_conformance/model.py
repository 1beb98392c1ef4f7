"""The canonical model (docs/contracts/model.md): one in-memory and one JSON form.

In memory, data and attribute values are numpy arrays (char as ``S1``, string
as ``object`` holding ``str``); a char attribute is a ``str``. ``to_json``
produces exactly the contract's JSON; ``canonical_text`` is the byte-exact form
comparisons use (so ``-0.0`` and ``0.0`` differ, as they do on disk).

Comparisons include storage by default (chunk shape, codec chain with its parameters,
byte order, NOFILL, Zarr order and dimension separator): a writer that drops a codec or
flips the byte order writes a different dataset, even when every value reads back equal.
A comparison that must look past one storage field names it, with the reason, in
``diff(..., ignore={field: reason})``.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nczarr_conformance.nctypes import NC_TYPES, nctype_of_numpy, numpy_dtype

MODEL_ID = "nczarr-model/1"
STORAGE_INTERNAL_PREFIXES = ("_nczarr", "_NCZARR")
STORAGE_INTERNAL = frozenset({"_NCProperties", "_ARRAY_DIMENSIONS", "_nczarr_maxstrlen",
                              "_nczarr_default_maxstrlen"})


def is_internal_attribute(name: str) -> bool:
    """Attributes the model never shows (storage bookkeeping, not user data)."""
    return name in STORAGE_INTERNAL or name.startswith(STORAGE_INTERNAL_PREFIXES)


def char_fill_byte(text: str) -> bytes:
    """The byte a char _FillValue attribute stands for (its first character; NUL if empty)."""
    if not text:
        return b"\x00"
    first = text[0]
    return first.encode("latin-1") if ord(first) < 256 else first.encode("utf-8")[:1]


@dataclass
class Attribute:
    type: str
    value: Any  # str for char, 1-D numpy array otherwise

    def __post_init__(self) -> None:
        if self.type not in NC_TYPES:
            raise ValueError(f"unknown netCDF type {self.type!r}")
        if self.type == "char":
            if not isinstance(self.value, str):
                raise TypeError("a char attribute holds a str")
        else:
            self.value = np.atleast_1d(np.asarray(self.value, dtype=numpy_dtype(self.type)))
            if self.value.ndim != 1 or self.value.size == 0:
                raise ValueError("an attribute is a vector of length >= 1")


@dataclass
class Dimension:
    size: int
    unlimited: bool = False


@dataclass
class Variable:
    type: str
    dimensions: list[str]
    shape: tuple[int, ...]
    attributes: dict[str, Attribute] = field(default_factory=dict)
    data: np.ndarray | None = None
    chunks: list[int] | None = None
    endianness: str | None = None
    filters: list[dict[str, Any]] | None = None
    #: netCDF NOFILL mode (ncdump -s: ``_NoFill = "true"``): unwritten values are undefined, Zarr ``fill_value: null``
    no_fill: bool = False
    #: Zarr ``order`` ("C" or "F"); None: not a Zarr array, or the Zarr default "C"
    order: str | None = None
    #: Zarr ``dimension_separator`` ("." or "/"); None: not a Zarr array, or the Zarr default "."
    dimension_separator: str | None = None
    #: what unwritten elements read as when no _FillValue attribute says it (an HDF5 dataset's own fill
    #: value, which writers other than netcdf-c set without the attribute); None: netCDF's default fill
    storage_fill: Any = None

    @property
    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    @property
    def fill_value(self) -> Any:
        """The defined _FillValue as a Python scalar, or None."""
        attr = self.attributes.get("_FillValue")
        if attr is None:
            return None
        if attr.type == "char":
            return char_fill_byte(attr.value)
        return attr.value[0]


@dataclass
class Group:
    dimensions: dict[str, Dimension] = field(default_factory=dict)
    attributes: dict[str, Attribute] = field(default_factory=dict)
    variables: dict[str, Variable] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)

    def walk(self, path: str = "/") -> Any:
        """Yield (path, group) for this group and every descendant, parents first."""
        yield path, self
        for name, child in self.groups.items():
            yield from child.walk(path.rstrip("/") + "/" + name)


@dataclass
class Dataset:
    root: Group = field(default_factory=Group)

    def find_dimension(self, fqn: str) -> Dimension:
        *gpath, name = [s for s in fqn.split("/") if s]
        group = self.root
        for g in gpath:
            group = group.groups[g]
        return group.dimensions[name]

    def to_json(self, *, data: bool = True, storage: bool = True, resolve_defaults: bool = False) -> dict[str, Any]:
        """The contract's JSON. ``resolve_defaults`` spells out every storage default (native byte
        order is little-endian, no filters, fill mode on, Zarr order "C" and separator ".") so
        that an unstated default and the same value stated compare equal."""
        return {"model": MODEL_ID, "root": _group_json(self.root, data, storage, resolve_defaults)}

    def canonical_text(self, *, data: bool = True, storage: bool = True) -> str:
        """The byte-exact comparison form, storage included (defaults resolved) unless ``storage=False``."""
        return json.dumps(self.to_json(data=data, storage=storage, resolve_defaults=storage), sort_keys=True,
                          ensure_ascii=False, indent=1)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Dataset:
        if doc.get("model") != MODEL_ID:
            raise ValueError(f"not a {MODEL_ID} document")
        return cls(_group_from_json(doc["root"]))


# ---- values -------------------------------------------------------------------

def _float_json(text: str) -> float | str:
    if text == "nan" or text == "-nan":
        return "NaN"
    if text == "inf":
        return "Infinity"
    if text == "-inf":
        return "-Infinity"
    return float(text)


def values_to_json(values: np.ndarray, nctype: str) -> Any:
    """Nested lists of JSON values per the contract's value rules."""
    arr = np.asarray(values)
    if nctype in ("float", "double"):
        np_t = np.float32 if nctype == "float" else np.float64
        flat = [_float_json(s) for s in np.char.lower(np.asarray(arr, dtype=np_t).ravel().astype(str))]
        return _reshape(flat, arr.shape)
    if nctype == "char":
        flat = [(b.decode("latin-1") if b else "\x00") for b in np.asarray(arr, dtype="S1").ravel().tolist()]
        return _reshape(flat, arr.shape)
    if nctype == "string":
        flat = [_as_text(v) for v in arr.ravel().tolist()]
        return _reshape(flat, arr.shape)
    return np.asarray(arr).tolist() if arr.ndim else arr.item()


def _as_text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="surrogateescape")
    return "" if v is None else str(v)


def _reshape(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = math.prod(shape[1:])
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def values_from_json(value: Any, nctype: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Inverse of :func:`values_to_json`."""
    dtype = numpy_dtype(nctype)
    if nctype in ("float", "double"):
        def conv(v: Any) -> Any:
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, str):
                return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v, v)
            return v
        arr = np.array(conv(value), dtype=dtype)
    elif nctype == "char":
        def enc(v: Any) -> Any:
            return [enc(x) for x in v] if isinstance(v, list) else v.encode("latin-1")
        arr = np.array(enc(value), dtype="S1")
    elif nctype == "string":
        arr = np.empty(np.shape(value) if shape is None else shape, dtype=object)
        if arr.ndim == 0:
            arr[()] = value
        else:
            arr[...] = np.array(value, dtype=object).reshape(arr.shape) if arr.size else arr
        return arr
    else:
        arr = np.array(value, dtype=dtype)
    if shape is not None:
        arr = arr.reshape(shape)
    return arr


def attribute_to_json(attr: Attribute) -> dict[str, Any]:
    if attr.type == "char":
        return {"type": "char", "value": attr.value}
    return {"type": attr.type, "value": values_to_json(attr.value, attr.type)}


def attribute_from_json(doc: dict[str, Any]) -> Attribute:
    if doc["type"] == "char":
        return Attribute("char", doc["value"])
    return Attribute(doc["type"], values_from_json(doc["value"], doc["type"]))


def attribute_from_python(value: Any) -> Attribute:
    """An attribute from a netCDF4-python-style value (str → char, arrays by dtype)."""
    if isinstance(value, str):
        return Attribute("char", value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return Attribute("string", np.array(value, dtype=object))
    arr = np.atleast_1d(np.asarray(value))
    return Attribute(nctype_of_numpy(arr.dtype), arr)


# ---- groups -----------------------------------------------------------------------

def _attrs_json(attrs: dict[str, Attribute]) -> dict[str, Any]:
    return {name: attribute_to_json(a) for name, a in attrs.items()}


def _resolved_endianness(var: Variable) -> str | None:
    """Byte order as stored: None for types without one (char, string, 1-byte), else little unless big."""
    if var.type in ("char", "string", "byte", "ubyte"):
        return None
    return "big" if var.endianness == "big" else "little"


def _variable_json(var: Variable, data: bool, storage: bool, resolve: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "type": var.type,
        "dimensions": list(var.dimensions),
        "shape": list(var.shape),
        "attributes": _attrs_json(var.attributes),
    }
    if data and var.data is not None:
        doc["data"] = values_to_json(var.data, var.type)
    if storage:
        doc["chunks"] = None if var.chunks is None else [int(c) for c in var.chunks]
        endianness = _resolved_endianness(var) if resolve else var.endianness
        if endianness:
            doc["endianness"] = endianness
        if var.filters is not None or resolve:
            doc["filters"] = [dict(f) for f in var.filters or []]
        if var.no_fill or resolve:
            doc["no_fill"] = bool(var.no_fill)
        if var.order is not None or resolve:
            doc["order"] = var.order or "C"
        if var.dimension_separator is not None or resolve:
            doc["dimension_separator"] = var.dimension_separator or "."
    return doc


def _group_json(group: Group, data: bool, storage: bool, resolve: bool = False) -> dict[str, Any]:
    return {
        "dimensions": {n: {"size": d.size, "unlimited": d.unlimited} for n, d in group.dimensions.items()},
        "attributes": _attrs_json(group.attributes),
        "variables": {n: _variable_json(v, data, storage, resolve) for n, v in group.variables.items()},
        "groups": {n: _group_json(g, data, storage, resolve) for n, g in group.groups.items()},
    }


def _group_from_json(doc: dict[str, Any]) -> Group:
    group = Group()
    for name, d in doc["dimensions"].items():
        group.dimensions[name] = Dimension(int(d["size"]), bool(d["unlimited"]))
    for name, a in doc["attributes"].items():
        group.attributes[name] = attribute_from_json(a)
    for name, v in doc["variables"].items():
        shape = tuple(v["shape"])
        data = values_from_json(v["data"], v["type"], shape) if "data" in v else None
        group.variables[name] = Variable(
            v["type"], list(v["dimensions"]), shape,
            {n: attribute_from_json(a) for n, a in v["attributes"].items()},
            data, v.get("chunks"), v.get("endianness"), v.get("filters"), bool(v.get("no_fill", False)),
            v.get("order"), v.get("dimension_separator"))
    for name, g in doc["groups"].items():
        group.groups[name] = _group_from_json(g)
    return group


#: the storage fields a comparison may be told to ignore (each with its reason)
STORAGE_FIELDS = frozenset({"chunks", "endianness", "filters", "no_fill", "order", "dimension_separator"})
#: ``contiguous``: ignore ``chunks`` only where one side is contiguous (null): Zarr has no contiguous
#: layout, so a Zarr writer must choose chunks for it, while every chunked variable still compares
IGNORABLE = STORAGE_FIELDS | {"contiguous"}


def diff(a: Dataset, b: Dataset, *, data: bool = True, ignore: Mapping[str, str] | None = None) -> list[str]:
    """Human-readable differences between two models (empty when equal), storage included.

    ``ignore`` maps a storage field (:data:`IGNORABLE`) to the reason this comparison cannot
    hold it to account, e.g. ``{"chunks": "netCDF4 rechunks contiguous input"}``; a field
    without a reason is refused, so no test ignores storage silently.
    """
    ignore = dict(ignore or {})
    unknown = sorted(set(ignore) - IGNORABLE)
    if unknown:
        raise ValueError(f"cannot ignore {unknown}: only storage fields {sorted(IGNORABLE)}")
    unexplained = sorted(k for k, why in ignore.items() if not str(why).strip())
    if unexplained:
        raise ValueError(f"ignoring {unexplained} needs a reason")
    first, second = json.loads(a.canonical_text(data=data)), json.loads(b.canonical_text(data=data))
    if ignore:
        _drop_ignored(first["root"], second["root"], set(ignore))
    return diff_json(first, second)


def _drop_ignored(x: dict[str, Any], y: dict[str, Any], fields: set[str]) -> None:
    """Remove the ignored storage fields from the variables of two group documents, recursively."""
    for name in set(x["variables"]) & set(y["variables"]):
        p, q = x["variables"][name], y["variables"][name]
        drop = fields & STORAGE_FIELDS
        if "contiguous" in fields and (p.get("chunks") is None or q.get("chunks") is None):
            drop = drop | {"chunks"}
        for key in drop:
            p.pop(key, None)
            q.pop(key, None)
    for name in set(x["groups"]) & set(y["groups"]):
        _drop_ignored(x["groups"][name], y["groups"][name], fields)


def diff_json(a: Any, b: Any, limit: int = 50) -> list[str]:
    """Differences between two JSON values as ``path: first != second`` lines."""
    out: list[str] = []
    _diff(a, b, "", out, limit)
    return out


def _diff(x: Any, y: Any, path: str, out: list[str], limit: int = 50) -> None:
    if len(out) >= limit:
        return
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if k not in x:
                out.append(f"{path}/{k}: only in second")
            elif k not in y:
                out.append(f"{path}/{k}: only in first")
            else:
                _diff(x[k], y[k], f"{path}/{k}", out, limit)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (p, q) in enumerate(zip(x, y, strict=True)):
            _diff(p, q, f"{path}[{i}]", out, limit)
    elif json.dumps(x) != json.dumps(y):
        out.append(f"{path}: {json.dumps(x)[:200]} != {json.dumps(y)[:200]}")
