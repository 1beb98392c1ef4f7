"""Predictions: what other implementations will do with this dataset.

Each rule stands on a peer behaviour that a test in tests/check/test_interop.py
reproduces by running that peer on such a dataset.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

from nczarr_conformance import keys
from nczarr_conformance.checker.chunks import chunk_objects
from nczarr_conformance.checker.context import CheckContext, parse_array
from nczarr_conformance.checker.metadata import _refs
from nczarr_conformance.checker.rules import Finding, Severity, get, rule


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
    for node in sorted({*ctx.groups, *ctx.arrays}):
        zattrs = ctx.arrays[node].zattrs if node in ctx.arrays else ctx.groups[node].zattrs
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


@rule("NCZ-INTEROP-C410-UPPER", Severity.WARNING,
       source="netcdf-c 4.10.1 (netCDF4-python); tests/check/test_interop.py")
def c410_upper(ctx: CheckContext) -> Iterator[Finding]:
    """netcdf-c 4.10.1 ignores upper-case _NCZARR_ATTR types and sub-group _NCZARR_GROUP dimensions."""
    if ctx.flavor == "nczarr-2-upper":
        yield get("NCZ-INTEROP-C410-UPPER").finding("/.zgroup", "netcdf-c 4.10.1 re-infers attribute types and "
                                                    "makes sub-group dimensions anonymous in this upper-case dataset")


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
    """netcdf-c 4.10.1 cannot open a dataset holding a <U*, |b1, <f2 or complex array, in any flavor
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
