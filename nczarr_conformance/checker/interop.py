"""Predictions: what other implementations will do with this dataset.

Each rule stands on a peer behaviour that a test in tests/check/test_interop.py
reproduces by running that peer on such a dataset.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker.chunks import chunk_objects
from nczarr_conformance.checker.context import CheckContext, parse_array
from nczarr_conformance.checker.metadata import _refs
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.stores.zip import ZipStore


def _node_attributes(ctx: CheckContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """(node, its .zattrs) of every group and array, in key order."""
    for node in sorted({*ctx.groups, *ctx.arrays}):
        yield node, ctx.arrays[node].zattrs if node in ctx.arrays else ctx.groups[node].zattrs


def _dtype(ctx: CheckContext, akey: str) -> str:
    z = ctx.arrays[akey].zarray or {}
    return str(z.get("dtype"))


@rule("NCZ-INTEROP-C490-UNLIMITED", Severity.WARNING,
       source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_unlimited(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 crashes (SIGSEGV) on an unlimited dimension in the upper-case layout it reads as NCZarr.

    4.9.0 knows only the upper-case keys: it reads the 4.9.1+ and 4.10 layouts as pure Zarr (the dimension
    is fixed-size there, and it reads the data), so the rule fires on the upper-case layout only.
    """
    if ctx.flavor != "nczarr-2-upper":
        return
    for gkey, rec in sorted(ctx.groups.items()):
        for name, (_, unlimited) in rec.dims.items():
            if unlimited:
                yield get("NCZ-INTEROP-C490-UNLIMITED").finding(
                    keys.join(gkey, ".zgroup"), f"netcdf-c 4.9.0 crashes (SIGSEGV) on unlimited dimension {name!r}")


@rule("NCZ-INTEROP-C490-STRING", Severity.WARNING, source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_string(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 crashes (SIGSEGV) on string variables stored as |Sn, in every layout."""
    for akey, rec in sorted(ctx.arrays.items()):
        st = parse_array(ctx, rec).storage
        if st is not None and st.nctype == "string":
            yield get("NCZ-INTEROP-C490-STRING").finding(keys.join(akey, ".zarray"),
                                                         "netcdf-c 4.9.0 crashes (SIGSEGV) on this string variable")


@rule("NCZ-INTEROP-C490-SCALAR", Severity.WARNING, source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_scalar(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 crashes (SIGSEGV) on a scalar in the upper-case layout (even one it wrote) and on any Zarr
    array of shape []; the 4.10 layout's shape-[1] scalar it reads (as a 1-element variable)."""
    for akey, rec in sorted(ctx.arrays.items()):
        upper_scalar = ctx.flavor == "nczarr-2-upper" and _refs(rec)[1]
        if upper_scalar or parse_array(ctx, rec).shape == ():
            what = "upper-case NCZarr scalar" if upper_scalar else "Zarr array of shape []"
            yield get("NCZ-INTEROP-C490-SCALAR").finding(keys.join(akey, ".zarray"),
                                                         f"netcdf-c 4.9.0 crashes (SIGSEGV) on this {what}")


@rule("NCZ-INTEROP-C490-CODEC", Severity.WARNING, source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_codec(ctx: CheckContext) -> Iterator[Finding]:
    """Debian's netcdf-c 4.9.0 has no Zarr codecs: it returns compressed or filtered chunk bytes as data, silently
    (exit 0), in every layout."""
    for akey, rec in sorted(ctx.arrays.items()):
        z = rec.zarray or {}
        if z.get("compressor") is not None or z.get("filters"):
            yield get("NCZ-INTEROP-C490-CODEC").finding(keys.join(akey, ".zarray"),
                                                        "netcdf-c 4.9.0 (Debian) reads wrong values: compressed chunks")


@rule("NCZ-INTEROP-C490-CHAR", Severity.WARNING, source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_char(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 crashes (SIGSEGV) on a >S1 array in every layout (it wrote and reads char as <U1)."""
    for akey in sorted(ctx.arrays):
        if _dtype(ctx, akey) == ">S1":
            yield get("NCZ-INTEROP-C490-CHAR").finding(keys.join(akey, ".zarray"),
                                                       "netcdf-c 4.9.0 crashes (SIGSEGV) on this char variable (>S1)")


@rule("NCZ-INTEROP-C410-U1CHAR", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_u1char(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 cannot open a dataset with a char variable stored as <U1 (as netcdf-c 4.9.0 wrote it)."""
    for akey in sorted(ctx.arrays):
        if ctx.nczarr and _dtype(ctx, akey) in ("<U1", ">U1", "|U1"):
            yield get("NCZ-INTEROP-C410-U1CHAR").finding(keys.join(akey, ".zarray"),
                                                         "netcdf-c 4.10.1 cannot open this dataset: char stored as <U1")


@rule("NCZ-INTEROP-C410-JSONCHAR", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_json_char(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 reads a char attribute stored as a JSON number or boolean (App. D case 3) as one character."""
    if not ctx.nczarr:
        return
    for node, zattrs in _node_attributes(ctx):
        types = ctx.attr_types_of(node) or {}
        for name, value in zattrs.items():
            if types.get(name) == ">S1" and isinstance(value, (int, float, bool)):
                yield get("NCZ-INTEROP-C410-JSONCHAR").finding(
                    keys.join(node, ".zattrs"), f"netcdf-c 4.10.1 reads char attribute {name!r} = {value!r} as one "
                    "character")


@rule("NCZ-INTEROP-C410-ZARRSCALAR", Severity.WARNING,
       source="netcdf-c 4.10.1, netcdf-c issue #3108; tests/check/test_interop.py")
def c410_zarr_scalar(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 does not show a Zarr array of shape [] (zarr-python's scalars; netcdf-c issue #3108)."""
    for akey, rec in sorted(ctx.arrays.items()):
        if parse_array(ctx, rec).shape == ():
            yield get("NCZ-INTEROP-C410-ZARRSCALAR").finding(keys.join(akey, ".zarray"),
                                                             "netcdf-c 4.10.1 does not show this shape-[] array")


#: attribute types netcdf-c infers back from a JSON value alone (a number without a point, one with, text)
JSON_INFERRED = frozenset({"<i4", "<f8", ">S1", "<U1", "|S1"})


def _typed_attributes(ctx: CheckContext) -> list[str]:
    """Nodes with an attribute whose declared type JSON does not give back (short, float, int64, string, …)."""
    out = []
    for node in sorted({*ctx.groups, *ctx.arrays}):
        types = ctx.attr_types_of(node) or {}
        if any(isinstance(t, str) and t not in JSON_INFERRED and not t.startswith("|J") and not name.startswith("_")
               for name, t in types.items()):
            out.append(node)
    return out


@rule("NCZ-INTEROP-C410-UPPER", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_upper(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 ignores upper-case _NCZARR_ATTR types and sub-group _NCZARR_GROUP dimensions: where an
    attribute's type is not what its JSON suggests, or a sub-group has dimensions."""
    if ctx.flavor != "nczarr-2-upper":
        return
    typed = _typed_attributes(ctx)
    subdims = [g for g, rec in sorted(ctx.groups.items()) if g != "/" and rec.dims]
    if typed or subdims:
        yield get("NCZ-INTEROP-C410-UPPER").finding(
            "/.zgroup", "netcdf-c 4.10.1 re-infers attribute types and makes sub-group dimensions anonymous in this "
            f"upper-case dataset ({', '.join([*(f'attributes of {n}' for n in typed), *subdims][:4])})")


#: the reserved names netcdf-c 4.10.1 keeps to itself in a .zattrs (the 4.9.1+ and 4.10 layouts' own keys): it
#: shows every other _nczarr*/_NCZARR* key there as a user attribute, _nczarr_maxstrlen, _nczarr_default_maxstrlen
#: and the 4.8–4.9.0 layout's _NCZARR_ATTR included (tests/check/test_interop.py::test_c410_reserved)
C410_HIDDEN_RESERVED = frozenset({"_nczarr_group", "_nczarr_array", "_nczarr_attr", "_nczarr_superblock"})


@rule("NCZ-INTEROP-C410-RESERVED", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_reserved(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 shows a reserved _nczarr*/_NCZARR* .zattrs key as a user attribute (_nczarr_maxstrlen, ...).

    It hides only the four keys of its own layouts (_nczarr_group, _nczarr_array, _nczarr_attr,
    _nczarr_superblock); compliance-checker then flags the name ("should begin with a letter").
    """
    for node, zattrs in _node_attributes(ctx):
        shown = [n for n in zattrs if n.lower().startswith("_nczarr") and n not in C410_HIDDEN_RESERVED]
        if shown:
            yield get("NCZ-INTEROP-C410-RESERVED").finding(
                keys.join(node, ".zattrs"), f"netcdf-c 4.10.1 shows {', '.join(shown)} as user attribute"
                f"{'s' if len(shown) > 1 else ''}")


@rule("NCZ-INTEROP-C410-BIGENDIAN", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_bigendian(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 reads a never-written chunk of a big-endian array as byte-swapped fill."""
    for akey, rec in sorted(ctx.arrays.items()):
        parsed = parse_array(ctx, rec)
        if parsed.storage is None or parsed.shape is None or parsed.chunks is None:
            continue
        if parsed.storage.numpy.byteorder != ">":
            continue
        total = math.prod(math.ceil(s / c) for s, c in zip(parsed.shape, parsed.chunks, strict=True))
        if len(chunk_objects(ctx, akey)) < total:
            yield get("NCZ-INTEROP-C410-BIGENDIAN").finding(
                keys.join(akey, ".zarray"),
                "netcdf-c 4.10.1 reads wrong values: big-endian array with unwritten chunks")


# dtypes netcdf-c 4.10.1 has no type for: opening the dataset fails (NC_ENCZARR), whatever the flavor
C410_REFUSED_KINDS = {"U": "unicode string", "b": "boolean", "c": "complex"}
# codec ids netcdf-c 4.10.1's plugins decode (netCDF4-python's wheel: lib__nczhdf5filters, lib__nczstdfilters)
C410_CODECS = frozenset({"zlib", "shuffle", "fletcher32", "szip", "zstd", "blosc", "bz2"})


def _refused_by_c410(dtype: str, ctx: CheckContext) -> str | None:
    """Why netcdf-c 4.10.1 cannot open a dataset holding this dtype, or None."""
    if dtype == "|O":  # zarr-python's, kerchunk's and VirtualiZarr's variable-length strings
        return "object, variable-length strings"
    if len(dtype) < 3 or dtype[0] not in "<>|":
        return None
    kind, size = dtype[1], dtype[2:]
    if kind == "U" and size == "1" and ctx.nczarr:
        return None  # NCZ-INTEROP-C410-U1CHAR: netcdf-c 4.9.0's char
    if kind in C410_REFUSED_KINDS:
        return C410_REFUSED_KINDS[kind]
    if kind == "f" and size == "2":
        return "half-precision float"
    return None


@rule("NCZ-INTEROP-C410-DTYPE", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_dtype(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 cannot open a dataset holding a <U*, |b1, <f2, complex or |O array, in any flavor
    ("NetCDF: NCZarr error"): one such array hides every other variable."""
    for akey in sorted(ctx.arrays):
        why = _refused_by_c410(_dtype(ctx, akey), ctx)
        if why is not None:
            yield get("NCZ-INTEROP-C410-DTYPE").finding(
                keys.join(akey, ".zarray"), f"netcdf-c 4.10.1 cannot open this dataset: dtype {_dtype(ctx, akey)} "
                f"({why}) has no netCDF type")


@rule("NCZ-INTEROP-C410-CODEC", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python's plugins); tests/check/test_interop.py")
def c410_codec(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 lists a variable whose codec it lacks (gzip, lz4, lzma, delta, ...) but fails reading its
    data ("NetCDF: Filter error: undefined filter encountered")."""
    for akey, rec in sorted(ctx.arrays.items()):
        z = rec.zarray or {}
        codecs = [*(z.get("filters") or []), z.get("compressor")]
        missing = sorted({str(c.get("id")) for c in codecs if isinstance(c, dict) and c.get("id") not in C410_CODECS})
        if missing:
            yield get("NCZ-INTEROP-C410-CODEC").finding(
                keys.join(akey, ".zarray"), f"netcdf-c 4.10.1 cannot read this variable's data: no codec "
                f"{', '.join(missing)} (undefined filter)")


@rule("NCZ-INTEROP-C410-FORDER", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_forder(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 ignores order "F": an array of two or more dimensions reads with its chunks' values
    in Fortran order taken as C order (wrong values, silently)."""
    for akey, rec in sorted(ctx.arrays.items()):
        z = rec.zarray or {}
        chunks = z.get("chunks")
        if z.get("order") == "F" and isinstance(chunks, list) and sum(1 for c in chunks if c != 1) >= 2:
            yield get("NCZ-INTEROP-C410-FORDER").finding(
                keys.join(akey, ".zarray"), "netcdf-c 4.10.1 reads wrong values: order F is read as C")


@rule("NCZ-INTEROP-C410-PURECHAR", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); nczarr.md App. E; tests/check/test_interop.py")
def c410_purechar(ctx: CheckContext) -> Iterator[Finding]:
    """In pure Zarr, netcdf-c 4.10.1 reads a >S1 or |S1 array as string, even one it wrote for char; we read char
    (>S1 is App. E's char, |S1 numpy's: what zarr-python, xarray and nc2nczarr --flavor zarr store)."""
    if ctx.nczarr:
        return
    for akey in sorted(ctx.arrays):
        dtype = _dtype(ctx, akey)
        if dtype in (">S1", "|S1"):
            yield get("NCZ-INTEROP-C410-PURECHAR").finding(
                keys.join(akey, ".zarray"), f"netcdf-c 4.10.1 reads this {dtype} array as string, we as char")


@rule("NCZ-INTEROP-ZARR-CHAR", Severity.WARNING, source="zarr-python 3.1, xarray; tests/check/test_interop.py")
def zarr_char(ctx: CheckContext) -> Iterator[Finding]:
    """zarr-python 3.1 rejects >S1 (nczarr.md's char), so xarray's open_zarr and open_datatree refuse the dataset.

    A warning: no single char dtype serves both netcdf-c and the Zarr readers; ``nczarr-fix --for xarray``
    (NCZ-FIX-CHAR-S1) or ``nc2nczarr --char-as=S1`` stores |S1, which the Zarr readers take and netcdf-c reads
    as strings."""
    for akey in sorted(ctx.arrays):
        if _dtype(ctx, akey) == ">S1":
            yield get("NCZ-INTEROP-ZARR-CHAR").finding(
                keys.join(akey, ".zarray"),
                "zarr-python 3.1 cannot read this char array (>S1), so xarray (open_zarr, open_datatree) cannot open "
                "the dataset; netcdf-c needs >S1: for Zarr readers, nczarr-fix --for xarray,zarr-python STORE "
                "stores it as |S1 (or convert with nc2nczarr --char-as=S1), which netcdf-c then reads as strings")


@rule("NCZ-INTEROP-ZARR-I1", Severity.WARNING, source="zarr-python 3.1; tests/check/test_interop.py")
def zarr_i1(ctx: CheckContext) -> Iterator[Finding]:
    """zarr-python 3.1 rejects one-byte dtypes with a byte order (<i1, >i1, <u1, >u1) that netcdf-c writes; |i1 works."""  # noqa: E501  (one line: --list-rules prints the first)
    for akey in sorted(ctx.arrays):
        if _dtype(ctx, akey) in ("<i1", ">i1", "<u1", ">u1"):
            yield get("NCZ-INTEROP-ZARR-I1").finding(keys.join(akey, ".zarray"),
                                                     f"zarr-python 3.1 cannot read dtype {_dtype(ctx, akey)}")


@rule("NCZ-INTEROP-SHUFFLE0", Severity.WARNING,
       source="numcodecs Shuffle, zarr-python, xarray; tests/check/test_interop.py")
def shuffle0(ctx: CheckContext) -> Iterator[Finding]:
    """A shuffle filter with elementsize 0 (netcdf-c's) is a no-op in numcodecs: zarr-python and xarray read wrong values."""  # noqa: E501  (one line: --list-rules prints the first)
    for akey, rec in sorted(ctx.arrays.items()):
        for f in (rec.zarray or {}).get("filters") or []:
            if isinstance(f, dict) and f.get("id") == "shuffle" and not f.get("elementsize"):
                st = parse_array(ctx, rec).storage
                if st is not None and st.numpy.itemsize > 1:
                    yield get("NCZ-INTEROP-SHUFFLE0").finding(keys.join(akey, ".zarray"),
                                                              "zarr-python/xarray read wrong values: shuffle "
                                                              "elementsize 0 is a no-op in numcodecs")


@rule("NCZ-INTEROP-XARRAY-NODIMS", Severity.INFO, source="xarray open_zarr; tests/check/test_interop.py")
def xarray_nodims(ctx: CheckContext) -> Iterator[Finding]:
    """xarray's open_zarr needs _ARRAY_DIMENSIONS on every array of a group it opens."""
    for akey, rec in sorted(ctx.arrays.items()):
        if rec.zarray is not None and "_ARRAY_DIMENSIONS" not in rec.zattrs:
            yield get("NCZ-INTEROP-XARRAY-NODIMS").finding(
                keys.join(akey, ".zattrs"), "xarray cannot open this array's group: no _ARRAY_DIMENSIONS")


def _zip(ctx: CheckContext) -> ZipStore | None:
    return ctx.store if isinstance(ctx.store, ZipStore) else None


@rule("NCZ-INTEROP-ZIP-LIBZIP", Severity.WARNING,
       source="netCDF4-python's wheels (netcdf-c 4.10.1), Debian's netcdf-c 4.9.0; tests/check/test_interop.py")
def zip_libzip(ctx: CheckContext) -> Iterator[Finding]:
    """netCDF4-python's netcdf-c 4.10.1 and Debian's 4.9.0 are built without libzip: neither opens an NCZarr zip
    ("Attempt to use feature that was not turned on"); a directory or S3 serves them."""
    if _zip(ctx) is not None:
        yield get("NCZ-INTEROP-ZIP-LIBZIP").finding(
            "/", "netCDF4-python's netcdf-c and Debian's netcdf-c 4.9.0 cannot open a zip (built without libzip): "
                 "write a directory for them (nc2nczarr --for netcdf-c-4.10)")


@rule("NCZ-INTEROP-ZIP-NESTED", Severity.WARNING, source="zarr-python ZipStore, xarray; tests/check/test_interop.py")
def zip_nested(ctx: CheckContext) -> Iterator[Finding]:
    """The dataset sits in a folder inside the zip (netcdf-c's zip layout): zarr-python's ZipStore, so xarray,
    opens a zip's top and finds no group there."""
    store = _zip(ctx)
    if store is not None and store.prefix.strip("/"):
        yield get("NCZ-INTEROP-ZIP-NESTED").finding(
            "/", f"zarr-python and xarray cannot open this zip: the dataset sits in the folder {store.prefix!r} "
                 "(netcdf-c's layout); nc2nczarr --for xarray writes it at the top")


@rule("NCZ-INTEROP-GDAL-SHUFFLE", Severity.WARNING, source="GDAL 3.6 Zarr driver; tests/check/test_interop.py")
def gdal_shuffle(ctx: CheckContext) -> Iterator[Finding]:
    """GDAL 3.6's Zarr driver has no shuffle filter: it leaves such an array out ("Filter shuffle not handled")."""
    for akey, rec in sorted(ctx.arrays.items()):
        if any(isinstance(f, dict) and f.get("id") == "shuffle" for f in (rec.zarray or {}).get("filters") or []):
            yield get("NCZ-INTEROP-GDAL-SHUFFLE").finding(keys.join(akey, ".zarray"),
                                                          "GDAL 3.6 leaves this array out: no shuffle filter")


@rule("NCZ-INTEROP-C490-KEYS", Severity.WARNING, source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_keys(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 predates the 4.9.1+ layouts: it reads them as pure Zarr and shows their _nczarr_* keys as
    attributes."""
    if ctx.flavor in ("nczarr-4.10", "nczarr-2"):
        yield get("NCZ-INTEROP-C490-KEYS").finding(
            "/.zgroup", f"netcdf-c 4.9.0 reads this {ctx.flavor} dataset as pure Zarr and shows its _nczarr_* keys "
                        "as attributes")


@rule("NCZ-INTEROP-C490-CHUNKOVER", Severity.WARNING,
       source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_chunk_over(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 cannot open a dataset holding an array whose chunk is longer than its shape ("NCZarr
    error"): netCDF's unlimited dimensions are chunked 512 long from the first record."""
    for akey, rec in sorted(ctx.arrays.items()):
        parsed = parse_array(ctx, rec)
        if parsed.shape and parsed.chunks and any(c > s > 0 for c, s in zip(parsed.chunks, parsed.shape,
                                                                            strict=False)):
            yield get("NCZ-INTEROP-C490-CHUNKOVER").finding(
                keys.join(akey, ".zarray"), f"netcdf-c 4.9.0 cannot open this dataset: chunks {list(parsed.chunks)} "
                f"are longer than shape {list(parsed.shape)} (nc2nczarr --for netcdf-c-4.9 caps them)")



@rule("NCZ-INTEROP-U1CHAR-ZARR", Severity.WARNING,
       source="zarr-python 3.1, xarray, GDAL 3.6, TensorStore; tests/check/test_interop.py")
def u1char_zarr(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0's char (<U1 holding one byte per item, not four): zarr-python, xarray, GDAL and TensorStore
    cannot read it."""
    for akey in sorted(ctx.arrays):
        if ctx.nczarr and _dtype(ctx, akey) in ("<U1", ">U1", "|U1"):
            yield get("NCZ-INTEROP-U1CHAR-ZARR").finding(
                keys.join(akey, ".zarray"), "zarr-python, xarray, GDAL and TensorStore cannot read this char array: "
                "<U1 holding one byte per item (netcdf-c 4.9.0's)")


def _char(ctx: CheckContext, akey: str) -> bool:
    """A char array: >S1 (nczarr.md's), or |S1 in pure Zarr (numpy's; in NCZarr |S1 is App. E's string)."""
    dtype = _dtype(ctx, akey)
    return dtype == ">S1" or (dtype == "|S1" and not ctx.nczarr)


@rule("NCZ-INTEROP-GDAL-CHARNUL", Severity.WARNING, source="GDAL 3.6 Zarr driver; tests/check/test_interop.py")
def gdal_char_nul(ctx: CheckContext) -> Iterator[Finding]:
    """GDAL 3.6 reads a char array's NUL bytes as empty strings (its strings end at a NUL)."""
    for akey in sorted(ctx.arrays):
        if _char(ctx, akey):
            yield get("NCZ-INTEROP-GDAL-CHARNUL").finding(keys.join(akey, ".zarray"),
                                                          "GDAL 3.6 reads this char array's NUL bytes as empty strings")


@rule("NCZ-INTEROP-TS-CHAR", Severity.WARNING, source="TensorStore zarr driver; tests/check/test_interop.py")
def ts_char(ctx: CheckContext) -> Iterator[Finding]:
    """TensorStore reads a |S1 char array (zarr-python's and xarray's char) as empty strings."""
    for akey in sorted(ctx.arrays):
        fill = (ctx.arrays[akey].zarray or {}).get("fill_value")
        if _char(ctx, akey) and _dtype(ctx, akey) == "|S1" and fill != "":
            yield get("NCZ-INTEROP-TS-CHAR").finding(keys.join(akey, ".zarray"),
                                                     "TensorStore reads this |S1 char array as empty strings")


#: integers a double holds exactly: GDAL's attributes are doubles
EXACT_IN_DOUBLE = 2**53


@rule("NCZ-INTEROP-GDAL-INT64ATTR", Severity.WARNING, source="GDAL 3.6 Zarr driver; tests/check/test_interop.py")
def gdal_int64_attr(ctx: CheckContext) -> Iterator[Finding]:
    """GDAL 3.6 reads integer attributes as doubles: a value past 2**53 comes back rounded."""
    for node, zattrs in _node_attributes(ctx):
        for name, value in zattrs.items():
            values = value if isinstance(value, list) else [value]
            if any(isinstance(v, int) and not isinstance(v, bool) and abs(v) > EXACT_IN_DOUBLE for v in values):
                yield get("NCZ-INTEROP-GDAL-INT64ATTR").finding(
                    keys.join(node, ".zattrs"), f"GDAL 3.6 reads attribute {name!r} rounded: integers past 2**53")


@rule("NCZ-INTEROP-C490-BYTEORDER", Severity.WARNING,
       source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_byteorder(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 ignores a pure-Zarr dtype's byte order: a big-endian array reads byte-swapped."""
    if ctx.nczarr:
        return
    for akey in sorted(ctx.arrays):
        dtype = _dtype(ctx, akey)
        if dtype.startswith(">") and dtype[1:2] in "iuf" and dtype[2:] != "1":
            yield get("NCZ-INTEROP-C490-BYTEORDER").finding(
                keys.join(akey, ".zarray"), f"netcdf-c 4.9.0 reads this {dtype} array byte-swapped (wrong values)")


@rule("NCZ-INTEROP-C490-STRATTR", Severity.WARNING,
       source="netcdf-c 4.9.0 (Debian ncdump); tests/check/test_interop.py")
def c490_string_attr(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.9.0 cannot open a pure-Zarr dataset with an attribute that is a list of texts ("Invalid
    argument")."""
    if ctx.nczarr:
        return
    for node, zattrs in _node_attributes(ctx):
        for name, value in zattrs.items():
            if name != "_ARRAY_DIMENSIONS" and isinstance(value, list) and value and \
                    all(isinstance(v, str) for v in value):
                yield get("NCZ-INTEROP-C490-STRATTR").finding(
                    keys.join(node, ".zattrs"), f"netcdf-c 4.9.0 cannot open this dataset: attribute {name!r} is a "
                    "list of texts")


#: the integer dtypes of Zarr v2 (xarray decodes them to float where it masks a fill value)
_INTEGER_KINDS = ("i", "u")


@rule("NCZ-INTEROP-XARRAY-FILL", Severity.WARNING, source="xarray open_zarr (decode_cf); tests/test_reader_needs.py")
def xarray_fill(ctx: CheckContext) -> Iterator[Finding]:
    """xarray masks a Zarr v2 array's fill_value: an integer array without a _FillValue attribute (netCDF's default
    fill written as fill_value) decodes to float64, values at that fill as NaN, and a char array's empty rows as NaN;
    its netCDF4 engine keeps them."""
    for akey, rec in sorted(ctx.arrays.items()):
        z = rec.zarray or {}
        dtype = z.get("dtype")
        if not isinstance(dtype, str) or z.get("fill_value") is None or "_FillValue" in rec.zattrs:
            continue
        if dtype[1:2] in _INTEGER_KINDS:
            yield get("NCZ-INTEROP-XARRAY-FILL").finding(
                keys.join(akey, ".zarray"), f"xarray decodes this {dtype} array to float64 (fill_value "
                f"{z.get('fill_value')!r} masked as NaN): nc2nczarr --for xarray writes fill_value null")
        elif dtype[1:2] == "f":
            yield get("NCZ-INTEROP-XARRAY-FILL").finding(
                keys.join(akey, ".zarray"), f"xarray reads values equal to fill_value {z.get('fill_value')!r} of this "
                f"{dtype} array as NaN (no _FillValue says so): nc2nczarr --for xarray writes fill_value null")
        elif _char(ctx, akey):
            yield get("NCZ-INTEROP-XARRAY-FILL").finding(
                keys.join(akey, ".zarray"), "xarray decodes an all-NUL (empty) row of this char array as NaN "
                "(fill_value masked): nc2nczarr --for xarray writes fill_value null")


@rule("NCZ-INTEROP-XARRAY-SCALAR", Severity.WARNING, source="xarray open_zarr; tests/test_reader_needs.py")
def xarray_scalar(ctx: CheckContext) -> Iterator[Finding]:
    """xarray reads an NCZarr scalar (shape [1], dimension _scalar_) as a 1-element array, not a scalar."""
    if not ctx.nczarr:
        return
    for akey, rec in sorted(ctx.arrays.items()):
        if _refs(rec)[1] or rec.zattrs.get("_ARRAY_DIMENSIONS") == ["_scalar_"]:
            yield get("NCZ-INTEROP-XARRAY-SCALAR").finding(
                keys.join(akey, ".zattrs"), "xarray reads this scalar as a 1-element array along _scalar_")



@rule("NCZ-INTEROP-XARRAY-STRINGS", Severity.WARNING, source="xarray open_zarr; tests/test_reader_needs.py")
def xarray_strings(ctx: CheckContext) -> Iterator[Finding]:
    """xarray reads a Zarr v2 |Sn string array (netCDF strings as NCZarr stores them) as bytes, not text, and its
    empty strings as NaN (the fill_value "" masked); Zarr v3's string data type it reads as text."""
    for akey in sorted(ctx.arrays):
        dtype = _dtype(ctx, akey)
        if dtype.startswith("|S") and dtype != "|S1":
            yield get("NCZ-INTEROP-XARRAY-STRINGS").finding(
                keys.join(akey, ".zarray"), f"xarray reads this {dtype} string array as bytes, empty strings as NaN "
                "(nc2nczarr --zarr-format 3 --for xarray writes Zarr v3 strings)")



@rule("NCZ-INTEROP-XARRAY-NANATTR", Severity.WARNING, source="xarray open_zarr; tests/check/test_interop.py")
def xarray_nan_attr(ctx: CheckContext) -> Iterator[Finding]:
    """A float attribute holding NaN or an infinity is stored as the text "NaN"/"Infinity" (JSON has no such
    number): xarray (and zarr-python) give the text back, not the float; netCDF readers read the float."""
    if not ctx.nczarr:
        return
    for node, zattrs in _node_attributes(ctx):
        types = ctx.attr_types_of(node) or {}
        for name, value in zattrs.items():
            values = value if isinstance(value, list) else [value]
            if str(types.get(name, ""))[1:2] == "f" and any(v in ("NaN", "Infinity", "-Infinity") for v in values):
                yield get("NCZ-INTEROP-XARRAY-NANATTR").finding(
                    keys.join(node, ".zattrs"), f"xarray reads float attribute {name!r} as text: {value!r}")



@rule("NCZ-INTEROP-XARRAY-FLOATATTR", Severity.WARNING, source="xarray open_zarr; tests/check/test_interop.py")
def xarray_float_attr(ctx: CheckContext) -> Iterator[Finding]:
    """A 32-bit float attribute (NCZarr's <f4 type) is a JSON number: xarray reads it as a 64-bit float, so a packed
    variable's scale_factor makes its data float64 where xarray's netCDF4 engine gives float32."""
    if not ctx.nczarr:
        return
    for node in sorted({*ctx.groups, *ctx.arrays}):
        types = ctx.attr_types_of(node) or {}
        for name, kind in sorted(types.items()):
            if kind in ("<f4", ">f4"):
                yield get("NCZ-INTEROP-XARRAY-FLOATATTR").finding(
                    keys.join(node, ".zattrs"), f"xarray reads float attribute {name!r} as a 64-bit float")
