"""Stores in netcdf-c's DRAFT NCZarr v3 layout, built as ``libnczarr/zformat3.c`` writes them.

No released netcdf-c writes this layout (netcdf-c PR #3068 is unmerged), so the tests synthesise it.
Source: DennisHeimbigner/netcdf-c branch ``v3plug.dmh`` (tip 48cd8da; zformat3.c blob 718d69c, last
changed by 8da0d36 "Fix some bugs in zformat3.c", 2025-01-15). Where each key comes from (line numbers
of that zformat3.c):

* group ``zarr.json``: ``node_type``, ``zarr_format`` (ZF3_encode_group, 764-779), ``attributes`` appended
  last (ZF3_upload_grp, 640-662);
* ``_nczarr_superblock`` = ``{"version": "3.0.0"}`` only (ZF3_encode_superblock, 686-702; template
  ``"%d.0.0"``, zinternal.h:37) — the document's ``format: 3`` is not written;
* ``_nczarr_group`` = ``{"dimensions": {name: {"size", "unlimited": 0|1}}, "arrays": [...], "groups": [...]}``
  (ZF3_encode_nczarr_group, 704-760);
* array ``zarr.json`` keys in order ``node_type, zarr_format, data_type, fill_value, shape, chunk_grid,
  chunk_key_encoding, dimension_names, codecs`` (ZF3_encode_var, 838-958), ``attributes`` last (ZF3_upload_var);
  ``fill_value`` null in NOFILL mode, else the fill (890-901); the ``bytes`` codec always first (941-949);
  key encoding ``default`` with separator ``/`` (918-925, DFALT_DIM_SEPARATOR_V3);
* ``_nczarr_array`` = ``{"dimension_references": [FQN...], "scalar": 1 (0-d only), "storage": "chunked",
  "nczarr_type": "char"|"string" (only those)}`` (ZF3_encode_nczarr_array, 781-836; nctype2dtype 1546-1583);
* char as ``uint8``, string as ``r<8*maxstrlen>`` (nctype2dtype), maxstrlen default 128 (zinternal.h:225
  NCZ_MAXSTR_DFALT), recorded in the variable attribute ``_nczarr_maxstrlen`` (a dual attribute, zformat3.c 426);
* ``_nczarr_attrs`` = ``{"attribute_types": {name: type}}`` with one entry per attribute including the
  ``_nczarr_*`` ones (typed ``json``) and ``_nczarr_attrs`` itself (ZF3_encode_attributes, 962-1090;
  ncz_insert_attr, zsync.c:780);
* a char fill or attribute is a JSON string (NCZ_stringconvert, zcvt.c:495-498).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ZARR_TYPES = {"byte": "int8", "ubyte": "uint8", "short": "int16", "ushort": "uint16", "int": "int32",
              "uint": "uint32", "int64": "int64", "uint64": "uint64", "float": "float32", "double": "float64",
              "char": "uint8"}
NUMPY = {"byte": "<i1", "ubyte": "<u1", "short": "<i2", "ushort": "<u2", "int": "<i4", "uint": "<u4",
         "int64": "<i8", "uint64": "<u8", "float": "<f4", "double": "<f8"}
DEFAULT_FILL: dict[str, Any] = {"byte": -127, "ubyte": 255, "short": -32767, "ushort": 65535, "int": -2147483647,
                                "uint": 4294967295, "int64": -9223372036854775806,
                                "uint64": 18446744073709551614, "float": 9.969209968386869e36,
                                "double": 9.969209968386869e36, "char": "\u0000", "string": ""}


@dataclass
class DVar:
    """One variable: netCDF type, dimension FQNs, values (numpy; str list for string), attributes."""

    type: str
    dims: list[str]
    values: Any
    attrs: dict[str, tuple[str, Any]] = field(default_factory=dict)
    maxstrlen: int = 128
    chunks: list[int] | None = None
    no_fill: bool = False


@dataclass
class DGroup:
    dims: dict[str, tuple[int, bool]] = field(default_factory=dict)
    attrs: dict[str, tuple[str, Any]] = field(default_factory=dict)
    vars: dict[str, DVar] = field(default_factory=dict)
    groups: dict[str, DGroup] = field(default_factory=dict)


def attr_type(nctype: str) -> str:
    """The attribute type netcdf-c records (nctype2dtype's alias over its dtype, zformat3.c 1037-1041)."""
    return nctype if nctype in ("char", "string") else ZARR_TYPES[nctype]


def attr_json(nctype: str, value: Any) -> Any:
    if nctype == "char":
        return str(value)
    items = [value] if np.ndim(value) == 0 else list(value)
    items = [v if isinstance(v, str) else np.asarray(v).item() for v in items]
    return items[0] if len(items) == 1 else items


def encode_attributes(attrs: dict[str, tuple[str, Any]], extra: dict[str, Any], *,
                      type_key: str = "attribute_types") -> dict[str, Any]:
    """User attributes, then ``_nczarr_*`` entries (typed json), then ``_nczarr_attrs`` typing itself."""
    out: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, (nctype, value) in attrs.items():
        out[name] = attr_json(nctype, value)
        types[name] = attr_type(nctype)
    for name, value in extra.items():
        out[name] = value
        types[name] = "json"
    block: dict[str, Any] = {type_key: types}
    out["_nczarr_attrs"] = block
    types["_nczarr_attrs"] = "json"
    return out


def _fill_json(var: DVar) -> Any:
    if var.no_fill:
        return None
    if "_FillValue" in var.attrs:
        return attr_json(var.type, var.attrs["_FillValue"][1])
    return DEFAULT_FILL[var.type]


def _chunk_bytes(var: DVar) -> bytes:
    if var.type == "string":
        width = var.maxstrlen
        flat = [s.encode("utf-8")[:width].ljust(width, b"\0") for s in np.asarray(var.values, dtype=object).ravel()]
        return b"".join(flat)
    if var.type == "char":
        return np.asarray(var.values, dtype="S1").tobytes()
    return np.ascontiguousarray(np.asarray(var.values, dtype=NUMPY[var.type])).tobytes()


def array_doc(var: DVar, dims: dict[str, int], *, alias_key: str = "nczarr_type") -> dict[str, Any]:
    shape = [dims[d] for d in var.dims]
    dtype = f"r{8 * var.maxstrlen}" if var.type == "string" else ZARR_TYPES[var.type]
    nczarr_array: dict[str, Any] = {"dimension_references": list(var.dims)}
    if not var.dims:
        nczarr_array["scalar"] = 1
    nczarr_array["storage"] = "chunked"
    if var.type in ("char", "string"):
        nczarr_array[alias_key] = var.type
    attrs = dict(var.attrs)
    if var.type == "string":
        attrs["_nczarr_maxstrlen"] = ("int", var.maxstrlen)
    return {
        "node_type": "array", "zarr_format": 3, "data_type": dtype, "fill_value": _fill_json(var), "shape": shape,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": var.chunks or shape}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "dimension_names": [d.rsplit("/", 1)[-1] for d in var.dims],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": encode_attributes(attrs, {"_nczarr_array": nczarr_array}),
    }


def write_store(root: Path, tree: DGroup, *, alias_key: str = "nczarr_type",
                edit: Any = None) -> Path:
    """Writes ``tree`` under directory ``root`` as zformat3.c would (one chunk per variable).

    ``edit(path, doc)`` may change any zarr.json document before it is written (hostile cases)."""
    sizes: dict[str, int] = {}

    def collect(g: DGroup, path: str) -> None:
        for name, (size, _) in g.dims.items():
            sizes[f"{path.rstrip('/')}/{name}"] = size
        for name, child in g.groups.items():
            collect(child, f"{path.rstrip('/')}/{name}")

    collect(tree, "/")

    def emit(g: DGroup, path: str, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        nczarr_group = {"dimensions": {n: {"size": s, "unlimited": 1 if u else 0} for n, (s, u) in g.dims.items()},
                        "arrays": list(g.vars), "groups": list(g.groups)}
        extra: dict[str, Any] = {"_nczarr_group": nczarr_group}
        if path == "/":
            extra["_nczarr_superblock"] = {"version": "3.0.0"}
        doc = {"node_type": "group", "zarr_format": 3, "attributes": encode_attributes(g.attrs, extra)}
        _put(directory, path, doc, edit)
        for name, var in g.vars.items():
            vdir = directory / name
            vdir.mkdir()
            vpath = f"{path.rstrip('/')}/{name}"
            _put(vdir, vpath, array_doc(var, sizes, alias_key=alias_key), edit)
            if var.values is not None and all(sizes[d] for d in var.dims):
                key = vdir / "c" if not var.dims else vdir.joinpath("c", *["0"] * len(var.dims))
                key.parent.mkdir(parents=True, exist_ok=True)
                key.write_bytes(_chunk_bytes(var))
        for name, child in g.groups.items():
            emit(child, f"{path.rstrip('/')}/{name}", directory / name)

    emit(tree, "/", root)
    return root


def _put(directory: Path, path: str, doc: dict[str, Any], edit: Any) -> None:
    if edit is not None:
        edit(path, doc)
    (directory / "zarr.json").write_text(json.dumps(doc, indent=2))


def sample() -> DGroup:
    """One of each case the brief names: dims (one unlimited), char, string, scalar, subgroup, typed attrs."""
    root = DGroup(dims={"time": (2, True), "x": (3, False), "nchar": (4, False)},
                  attrs={"title": ("char", "draft sample"), "version": ("int", np.array([3], "i4")),
                         "scales": ("double", np.array([0.5, 2.0]))})
    root.vars["t"] = DVar("double", ["/time"], np.array([0.0, 1.0]), {"units": ("char", "days")})
    root.vars["v"] = DVar("int", ["/time", "/x"], np.arange(6, dtype="i4").reshape(2, 3),
                          {"_FillValue": ("int", np.array([-1], "i4")), "valid": ("short", np.array([0, 9], "i2"))})
    root.vars["name"] = DVar("char", ["/x", "/nchar"], np.array([list(b"abcd"), list(b"ef\0\0"), list(b"ghij")],
                                                                 dtype="u1").view("S1"))
    root.vars["label"] = DVar("string", ["/x"], ["one", "", "three"], {"kinds": ("string", ["a", "bc"])},
                              maxstrlen=8)
    root.vars["s"] = DVar("float", [], np.array(1.5, dtype="f4"))
    sub = DGroup(dims={"y": (2, False)}, attrs={"note": ("char", "in g")})
    sub.vars["w"] = DVar("ushort", ["/x", "/g/y"], np.array([[1, 2], [3, 4], [5, 6]], dtype="u2"))
    root.groups["g"] = sub
    return root
