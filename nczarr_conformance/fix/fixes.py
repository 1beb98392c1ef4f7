"""The fixes, in the order they run (the consolidation last: it records what the others left).

Each one edits the metadata in a :class:`FixContext` and yields a Change per object it edits;
every one of them leaves a store netcdf-c 4.10.1 reads as before (or more exactly: the fill,
the char attributes) and the readers it names read equal to netcdf-c. Evidence for each, a
reader failing before and passing after: tests/fix/test_fixes.py.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import UnsupportedError
from nczarr_conformance.fix.context import FixContext, dumps
from nczarr_conformance.fix.registry import FIXES, Change, fix
from nczarr_conformance.nczarr.attrs import float_json, unparse
from nczarr_conformance.nczarr.consolidated import refused_by_zarr_python
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL, parse_dtype
from nczarr_conformance.nczarr.reader import ANONYMOUS_DIM
from nczarr_conformance.nczarr.writer import NCZARR_TYPE_KEY

_ONE_BYTE_ORDERED = {"<i1": "|i1", ">i1": "|i1", "<u1": "|u1", ">u1": "|u1"}


def _itemsize(dtype: Any) -> int | None:
    try:
        return int(parse_dtype(dtype, u1_is_char=True).numpy.itemsize)
    except UnsupportedError:
        return None


@fix("NCZ-FIX-SHUFFLE-ELEMENTSIZE", readers=("zarr-python", "xarray", "gdal"), cures=("NCZ-INTEROP-SHUFFLE0",))
def shuffle_elementsize(ctx: FixContext) -> Iterator[Change]:
    """A shuffle filter with elementsize 0 (netcdf-c's) gets the array's element size: numcodecs reads 0 as "no shuffle". Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-SHUFFLE-ELEMENTSIZE"]
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        filters = doc.get("filters")
        size = _itemsize(doc.get("dtype"))
        if not isinstance(filters, list) or size is None:
            continue
        for cfg in filters:
            if (isinstance(cfg, dict) and cfg.get("id") == "shuffle"
                    and str(cfg.get("elementsize", 0)).strip() in ("0", "")):
                cfg["elementsize"] = size
                yield me.change(keys.join(node, ".zarray"), f"shuffle elementsize 0 → {size} (the element size)")


@fix("NCZ-FIX-BYTE-DTYPE", readers=("zarr-python", "xarray"), cures=("NCZ-INTEROP-ZARR-I1",))
def byte_dtype(ctx: FixContext) -> Iterator[Change]:
    """A one-byte integer dtype with a byte order (netcdf-c's <i1, <u1) is spelled |i1, |u1: zarr-python 3 rejects the ordered form. Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-BYTE-DTYPE"]
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        dtype = doc.get("dtype")
        new = _ONE_BYTE_ORDERED.get(dtype) if isinstance(dtype, str) else None
        if new is not None:
            yield me.change(keys.join(node, ".zarray"), f"dtype {doc['dtype']} → {new}")
            doc["dtype"] = new


#: the readers that refuse >S1 and read |S1 as char (xarray reads through zarr-python); TensorStore reads both
_S1_READERS = ("zarr-python", "xarray")


@fix("NCZ-FIX-CHAR-S1", readers=_S1_READERS, cures=("NCZ-INTEROP-ZARR-CHAR",))
def char_s1(ctx: FixContext) -> Iterator[Change]:
    """A char array stored as >S1 (App. E's char) is stored as |S1, one byte per character as before, marked char for our reader (_nczarr_array.nczarr_type, the nczarr-4.10 layout): zarr-python and xarray refuse >S1. netcdf-c then reads it as string (printed as a loss); not with netcdf-c-4.9 among the readers. Metadata only: the chunk bytes stay."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-CHAR-S1"]
    nodes = [node for node in ctx.arrays() if ctx.zarray(node).get("dtype") == ">S1"]
    if not nodes:
        return
    if "netcdf-c-4.9" in ctx.targets:  # it reads char only as >S1: no char dtype serves both
        wanted = ",".join(r for r in _S1_READERS if r in ctx.targets)
        for node in nodes:
            why = "netcdf-c 4.9 reads char only as >S1, which zarr-python (and so xarray) refuses"
            if ctx.named:
                ctx.unmet.append(f"{wanted} cannot read {node} (>S1) and no char dtype serves netcdf-c-4.9 too: "
                                 f"{why}; run nczarr-fix --for {wanted} alone (netcdf-c then reads strings), or "
                                 "keep a store for each (nc2nczarr --char-as S1 writes the Zarr readers' one)")
            else:
                ctx.notes.append(f"{me.id} {node}: not applied: {why}; nczarr-fix --for xarray,zarr-python "
                                 "applies it (netcdf-c then reads strings, as nc2nczarr --char-as S1 writes)")
        return
    for node in nodes:
        ctx.zarray(node)["dtype"] = "|S1"
        yield me.change(keys.join(node, ".zarray"), "dtype >S1 → |S1 (one byte per character either way: "
                                                    "the chunks are not rewritten)")
        piece = ctx.nczarr_array(node) if ctx.flavor == "nczarr-4.10" else None
        if piece is not None:  # as nc2nczarr --char-as S1 marks it: our reader keeps reading char
            piece[NCZARR_TYPE_KEY] = "char"
            yield me.change(keys.join(node, ".zattrs"), f"_nczarr_array.{NCZARR_TYPE_KEY} = \"char\" (|S1 alone is "
                                                        "NCZarr's string of length 1)")
        if ctx.flavor != "zarr":  # in pure Zarr netcdf-c reads both as string already, we both as char
            who = "netcdf-c (4.10.1, 4.9)" if piece is not None else "netcdf-c (4.10.1, 4.9) and nczarr-conformance"
            ctx.losses[node] = (f"{who} now read this char variable as string, one string per character (NCZarr's "
                                "|S1 is a string of length 1); the text is the same. nc2nczarr --char-as S1 writes "
                                "the same dtype")


def _fill_attribute(ctx: FixContext, node: str) -> Any:
    """The _FillValue attribute's single value, or None."""
    attrs = ctx.zattrs(node) or {}
    value = attrs.get("_FillValue")
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def _as_dtype(value: Any, dtype: np.dtype) -> Any:
    """``value`` held in ``dtype`` (NaN/±Infinity spelled as Zarr strings), or None if it does not fit."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity") and dtype.kind == "f":
        value = float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        with np.errstate(over="raise", invalid="raise"):
            held = np.array(value).astype(dtype)
        if dtype.kind in "iu" and int(held) != value:
            return None
    except (OverflowError, FloatingPointError, ValueError):
        return None
    return held.item()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@fix("NCZ-FIX-FILL-EXACT", readers=("zarr-python", "xarray", "gdal", "tensorstore"),
     cures=("NCZ-FILL-ATTR", "NCZ-FILL-ROUNDED"))
def fill_exact(ctx: FixContext) -> Iterator[Change]:
    """A fill_value that is not the variable's fill gets it exactly: from the _FillValue attribute, else the netCDF default (netcdf-c 4.10.1 writes %g: 9.96921e+36). Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-FILL-EXACT"]
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        try:
            storage = parse_dtype(doc.get("dtype"), u1_is_char=True)
        except UnsupportedError:
            continue
        if storage.nctype in ("char", "string"):
            continue
        dtype = storage.numpy
        stored = _as_dtype(doc.get("fill_value"), dtype)
        if stored is None:
            continue
        wanted = _as_dtype(_fill_attribute(ctx, node), dtype)
        why = "the _FillValue attribute"
        if wanted is None and storage.nctype in ("float", "double"):
            default = _as_dtype(DEFAULT_FILL[storage.nctype], dtype)
            rounded = _as_dtype(float(f"{DEFAULT_FILL[storage.nctype]:g}"), dtype)
            if _same(stored, rounded):  # netcdf-c's %g of its own default: nothing else rounds so
                wanted, why = default, "the netCDF default fill"
        if wanted is None or _same(stored, wanted):
            continue
        new = float_json(wanted, storage.nctype) if dtype.kind == "f" else int(wanted)
        yield me.change(keys.join(node, ".zarray"), f"fill_value {unparse(doc['fill_value'])} → {unparse(new)} ({why})")
        doc["fill_value"] = new


@fix("NCZ-FIX-STRING-FILL", readers=("tensorstore",), cures=("NCZ-INTEROP-TS-STRINGFILL",))
def string_fill(ctx: FixContext) -> Iterator[Change]:
    """A char or string array's fill_value "" (netcdf-c's) becomes null: TensorStore wants base64 bytes there, and netcdf-c reads null as the same empty fill. Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-STRING-FILL"]
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        dtype = doc.get("dtype")
        if isinstance(dtype, str) and dtype[1:2] == "S" and doc.get("fill_value") == "":
            doc["fill_value"] = None
            yield me.change(keys.join(node, ".zarray"), 'fill_value "" → null')


@fix("NCZ-FIX-NO-FILTERS", readers=("tensorstore",), cures=("NCZ-INTEROP-TS-FILTERS",), rewrites_chunks=True)
def no_filters(ctx: FixContext) -> Iterator[Change]:
    """An array with filters (netcdf-c's shuffle) is re-encoded with its compressor alone: TensorStore refuses every filter. Rewrites that array's chunks."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-NO-FILTERS"]
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        filters = doc.get("filters")
        if not isinstance(filters, list) or not filters:  # anything else is not ours to interpret
            continue
        if not ctx.can_rewrite_chunks:
            ctx.notes.append(f"{me.id} {node}: not applied: its chunks would be rewritten in place on S3, where "
                             "nothing is atomic; write a fixed copy with --out instead")
            continue
        ctx.recode[node] = doc
        names = ", ".join(str(f.get("id")) if isinstance(f, dict) else repr(f) for f in filters)
        doc["filters"] = None
        yield me.change(keys.join(node, ".zarray"),
                        f"filters [{names}] → null; chunks re-encoded with the compressor alone")


@fix("NCZ-FIX-CHAR-ATTR", readers=("zarr-python", "xarray", "gdal"), cures=("NCZ-INTEROP-C410-JSONCHAR",))
def char_attr(ctx: FixContext) -> Iterator[Change]:
    """A char attribute stored as JSON that is not a string (App. D case 3: 42, true, [1,2]) is stored as its text: Zarr readers then read text, and netcdf-c 4.10.1 reads all of it (not one character). Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-CHAR-ATTR"]
    for node in sorted({keys.parent(k) for k in ctx.docs if keys.basename(k) == ".zattrs"}):
        attrs = ctx.zattrs(node)
        if attrs is None:
            continue
        for name, type_text in ctx.attr_types(node).items():
            if type_text in (">S1", "<U1", "|U1", ">U1") and name in attrs and not isinstance(attrs[name], str):
                text = unparse(attrs[name])
                yield me.change(keys.join(node, ".zattrs"), f"{name}: JSON {text} → the char text {unparse(text)}")
                attrs[name] = text


@fix("NCZ-FIX-ARRAY-DIMENSIONS", readers=("xarray", "gdal"), cures=("NCZ-INTEROP-XARRAY-NODIMS",))
def array_dimensions(ctx: FixContext) -> Iterator[Change]:
    """Every array gets _ARRAY_DIMENSIONS: its NCZarr dimension names (as netcdf-c 4.10.1 writes them), or in pure Zarr the _Anonymous_Dim_<size> names netcdf-c reads; xarray opens no group without them (it falls back only on 4.8-4.9.0's _NCZARR_ARRAY). Metadata only."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-ARRAY-DIMENSIONS"]
    if ctx.flavor == "nczarr-v1":
        return
    for node in ctx.arrays():
        attrs = ctx.zattrs(node)
        if attrs is not None and "_ARRAY_DIMENSIONS" in attrs:
            continue
        shape = ctx.zarray(node).get("shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
            continue
        names = _dimension_names(ctx, node, shape)
        if names is None:
            continue
        key = keys.join(node, ".zattrs")
        if attrs is None:
            attrs = ctx.docs[key] = {}
        attrs["_ARRAY_DIMENSIONS"] = names
        yield me.change(key, f"_ARRAY_DIMENSIONS {unparse(names)} added")


def _dimension_names(ctx: FixContext, node: str, shape: list[int]) -> list[str] | None:
    """The names netcdf-c reads for the array's axes: its dimension references' names, or, in pure Zarr,
    ``_Anonymous_Dim_<size>`` (root-group arrays only: netcdf-c puts those dimensions in the root)."""
    if ctx.flavor == "zarr":
        if keys.parent(node) != "/" or len(set(shape)) != len(shape):
            ctx.notes.append(f"NCZ-FIX-ARRAY-DIMENSIONS {node}: not applied: a pure Zarr array "
                             + ("outside the root group" if keys.parent(node) != "/" else "with two axes of one size")
                             + " has no dimension names netcdf-c would read the same")
            return None
        return [ANONYMOUS_DIM.format(n) for n in shape]
    piece = ctx.nczarr_array(node)
    refs = None if piece is None else piece.get("dimension_references", piece.get("dimrefs"))
    if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
        return None
    names = [keys.basename(r) for r in refs]
    if not names and shape == [1]:
        names = ["_scalar_"]  # a netCDF scalar stored as shape [1], as netcdf-c 4.10.1 names it
    return names if len(names) == len(shape) else None


def consolidated(ctx: FixContext) -> dict[str, Any]:
    """zarr-python's consolidated document of the metadata as the fixes leave it."""
    meta = {k.lstrip("/"): ctx.docs[k] for k in sorted(ctx.docs)
            if keys.basename(k) in (".zgroup", ".zarray", ".zattrs")}
    return {"metadata": meta, "zarr_consolidated_format": 1}


def _canonical(meta: dict[str, Any]) -> bytes:
    return dumps({keys.join(k): meta[k] for k in sorted(meta, key=keys.join)})


def refused_entry(ctx: FixContext) -> str | None:
    """The first array whose ``.zarray`` zarr-python refuses, by the writer's own rule
    (:func:`~nczarr_conformance.nczarr.consolidated.refused_by_zarr_python`), with why; else None."""
    for node in ctx.arrays():
        doc = ctx.zarray(node)
        dtype, fill = doc.get("dtype"), doc.get("fill_value")
        try:
            is_string = parse_dtype(dtype, u1_is_char=True).nctype == "string"
        except UnsupportedError:
            is_string = False
        if refused_by_zarr_python(dtype, fill, fill_is_text=is_string and ctx.flavor != "zarr"):
            return f"{node} (dtype {unparse(dtype)}, fill_value {unparse(fill)})"
    return None


@fix("NCZ-FIX-CONSOLIDATE", readers=("zarr-python", "xarray"), cures=("NCZ-CONSOLIDATED-MATCH",), always=True)
def consolidate(ctx: FixContext) -> Iterator[Change]:
    """/.zmetadata holds every metadata object as the other fixes leave it: a stale one is always replaced, a missing one written for zarr-python and xarray (one GET opens the dataset; xarray warns without it); none where zarr-python would then refuse the whole group (the writer's rule: a >S1 array, a text string fill, a NaN fill on integers), and a stale one there is removed. Runs last."""  # noqa: E501  (one line: --list-fixes prints the first)
    me = FIXES["NCZ-FIX-CONSOLIDATE"]
    if "/.zgroup" not in ctx.docs:
        return
    new = consolidated(ctx)
    old = ctx.docs.get("/.zmetadata")
    if old is not None:
        old_meta = old.get("metadata")
        if isinstance(old_meta, dict) and old.get("zarr_consolidated_format") == 1 and \
                _canonical(old_meta) == _canonical(new["metadata"]):
            return
    refused = refused_entry(ctx)
    if refused is not None:
        if old is not None:
            del ctx.docs["/.zmetadata"]
            yield me.change("/.zmetadata",
                            f"stale, and zarr-python would refuse the whole group through it ({refused}): removed; "
                            "without it zarr-python reads every other array, netcdf-c ignores it")
        elif ctx.targets & set(me.readers):
            ctx.notes.append(f"{me.id} /.zmetadata: not written: zarr-python would refuse the whole group through it "
                             f"({refused}); without it, it reads every other array (the writer's rule)")
        return
    if old is not None:
        yield me.change("/.zmetadata", "stale: rebuilt from every .zgroup, .zarray and .zattrs")
    elif ctx.targets & set(me.readers):
        yield me.change("/.zmetadata", "written: every .zgroup, .zarray and .zattrs in one object")
    else:
        return
    ctx.docs["/.zmetadata"] = new
