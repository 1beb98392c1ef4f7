"""Rules about each array's .zarray and its NCZarr metadata."""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker.context import ArrayRecord, CheckContext, parse_array
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.codecs import build
from nczarr_conformance.errors import NczarrError
from nczarr_conformance.nczarr.dtypes import array_storage
from nczarr_conformance.nczarr.reader import decode_fill

REQUIRED = ("zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters")
HUGE_BYTES = 2**40  # 1 TiB declared: almost surely a corrupt shape


def _zkey(akey: str) -> str:
    return keys.join(akey, ".zarray")


def _arrays(ctx: CheckContext) -> Iterator[tuple[str, ArrayRecord, dict[str, Any]]]:
    for akey, rec in sorted(ctx.arrays.items()):
        if rec.zarray is not None:
            yield akey, rec, rec.zarray


@rule("NCZ-ARRAY-MEMBERS", Severity.ERROR, source='Zarr v2 spec "Arrays"')
def array_members(ctx: CheckContext) -> Iterator[Finding]:
    """A .zarray has every member Zarr v2 requires: zarr_format, shape, chunks, dtype, compressor, fill_value, order, filters."""  # noqa: E501  (one line: --list-rules prints the first)
    for akey, _, z in _arrays(ctx):
        missing = [m for m in REQUIRED if m not in z]
        if missing:
            yield get("NCZ-ARRAY-MEMBERS").finding(_zkey(akey), f"missing {', '.join(missing)}")


@rule("NCZ-ARRAY-FORMAT", Severity.ERROR, source='Zarr v2 spec "Arrays"')
def array_format(ctx: CheckContext) -> Iterator[Finding]:
    """A .zarray says "zarr_format": 2."""
    for akey, _, z in _arrays(ctx):
        if "zarr_format" in z and z["zarr_format"] != 2:
            yield get("NCZ-ARRAY-FORMAT").finding(_zkey(akey), f"zarr_format is {z['zarr_format']!r}; 2 expected")


@rule("NCZ-ARRAY-SHAPE", Severity.ERROR, source="Zarr v2 spec")
def array_shape(ctx: CheckContext) -> Iterator[Finding]:
    """shape is a list of integers >= 0."""
    for akey, rec, z in _arrays(ctx):
        if "shape" in z and parse_array(ctx, rec).shape is None:
            yield get("NCZ-ARRAY-SHAPE").finding(_zkey(akey), f"shape {z['shape']!r} is not a list of integers >= 0")


@rule("NCZ-ARRAY-NDIM", Severity.ERROR, source="numpy's 64-dimension limit (zarr-python, xarray, ours)")
def array_ndim(ctx: CheckContext) -> Iterator[Finding]:
    """An array has at most 64 dimensions: numpy-based readers (zarr-python, xarray, ours) cannot hold more."""
    from nczarr_conformance.nczarr.reader import MAX_NDIM

    for akey, _, z in _arrays(ctx):
        shape = z.get("shape")
        if isinstance(shape, list) and len(shape) > MAX_NDIM:
            yield get("NCZ-ARRAY-NDIM").finding(_zkey(akey), f"{len(shape)} dimensions; more than {MAX_NDIM}")


@rule("NCZ-ARRAY-INT64", Severity.ERROR, source="numpy's int64 positions and sizes (xarray, ours); netcdf-c 4.10.1 "
      "reads an extent past int64 as negative")
def array_int64(ctx: CheckContext) -> Iterator[Finding]:
    """Extents, chunk grid spans and byte sizes fit in int64: numpy-based readers (xarray, ours) cannot address more."""
    from nczarr_conformance.limits import INT64_MAX, int64_overflow

    for akey, rec, _ in _arrays(ctx):
        parsed = parse_array(ctx, rec)
        if parsed.shape is None:
            continue
        itemsize = parsed.storage.numpy.itemsize if parsed.storage is not None else 1
        beyond = int64_overflow(parsed.shape, parsed.chunks, itemsize)
        if beyond is not None:
            yield get("NCZ-ARRAY-INT64").finding(_zkey(akey), f"{beyond}, more than int64 ({INT64_MAX}) holds")


@rule("NCZ-ARRAY-CHUNKS", Severity.ERROR, source="Zarr v2 spec")
def array_chunks(ctx: CheckContext) -> Iterator[Finding]:
    """chunks is a list of integers >= 1, one per dimension of shape."""
    for akey, rec, z in _arrays(ctx):
        if "chunks" in z and parse_array(ctx, rec).chunks is None:
            yield get("NCZ-ARRAY-CHUNKS").finding(_zkey(akey), f"chunks {z['chunks']!r} are not integers >= 1 "
                                                  f"matching shape {z.get('shape')!r}")


@rule("NCZ-ARRAY-DTYPE", Severity.ERROR, source="nczarr.md App. E")
def array_dtype(ctx: CheckContext) -> Iterator[Finding]:
    """dtype is a Zarr v2 dtype with a netCDF type: [<>|]i/u 1-8, f4/f8, S/U strings, |O with a vlen-utf8 or
    vlen-bytes first filter (string)."""
    for akey, _, z in _arrays(ctx):
        if "dtype" in z:
            try:
                array_storage(z, u1_is_char=ctx.nczarr)
            except NczarrError as exc:
                yield get("NCZ-ARRAY-DTYPE").finding(_zkey(akey), str(exc))


@rule("NCZ-ARRAY-ORDER", Severity.ERROR, source="Zarr v2 spec")
def array_order(ctx: CheckContext) -> Iterator[Finding]:
    """order is "C" or "F"."""
    for akey, _, z in _arrays(ctx):
        if "order" in z and z["order"] not in ("C", "F"):
            yield get("NCZ-ARRAY-ORDER").finding(_zkey(akey), f"order {z['order']!r}; 'C' or 'F' expected")


@rule("NCZ-ARRAY-SEPARATOR", Severity.ERROR, source="Zarr v2 spec")
def array_separator(ctx: CheckContext) -> Iterator[Finding]:
    """dimension_separator, when present, is "." or "/"."""
    for akey, _, z in _arrays(ctx):
        if "dimension_separator" in z and z["dimension_separator"] not in (".", "/"):
            yield get("NCZ-ARRAY-SEPARATOR").finding(_zkey(akey), f"dimension_separator {z['dimension_separator']!r}")


@rule("NCZ-ARRAY-FILL", Severity.ERROR, source="Zarr v2 spec")
def array_fill(ctx: CheckContext) -> Iterator[Finding]:
    """fill_value decodes for the dtype: null, a number in range, "NaN"/"Infinity"/"-Infinity", or a string."""
    for akey, rec, z in _arrays(ctx):
        storage = parse_array(ctx, rec).storage
        if storage is None or "fill_value" not in z:
            continue
        try:
            decode_fill(z["fill_value"], storage, base64_strings=not ctx.nczarr)
        except NczarrError as exc:
            yield get("NCZ-ARRAY-FILL").finding(_zkey(akey), f"{exc} for dtype {z.get('dtype')}")


@rule("NCZ-ARRAY-CODEC", Severity.ERROR, source='Zarr v2 spec "compressor"')
def array_codec(ctx: CheckContext) -> Iterator[Finding]:
    """compressor and every filter are known to numcodecs, with valid parameters."""
    for akey, rec, z in _arrays(ctx):
        storage = parse_array(ctx, rec).storage
        itemsize = storage.numpy.itemsize if storage is not None else 1
        filters = z.get("filters")
        if filters is not None and not isinstance(filters, list):
            yield get("NCZ-ARRAY-CODEC").finding(_zkey(akey), f"filters {filters!r}: a list or null expected")
            filters = []
        for config in [z.get("compressor"), *(filters or [])]:
            try:
                build(config, itemsize)
            except NczarrError as exc:
                yield get("NCZ-ARRAY-CODEC").finding(_zkey(akey), str(exc))


@rule("NCZ-ARRAY-HUGE", Severity.WARNING, source="nczarr-check: a guard before anyone allocates")
def array_huge(ctx: CheckContext) -> Iterator[Finding]:
    """The declared shape is plausible: more than 1 TiB, or a chunk over 2 GiB, is reported before anyone allocates it."""  # noqa: E501  (one line: --list-rules prints the first)
    for akey, rec, _ in _arrays(ctx):
        parsed = parse_array(ctx, rec)
        if parsed.shape is None or parsed.storage is None:
            continue
        total = math.prod(parsed.shape) * parsed.storage.numpy.itemsize
        if total > HUGE_BYTES:
            yield get("NCZ-ARRAY-HUGE").finding(_zkey(akey), f"shape {list(parsed.shape)} declares {total} bytes")
        if parsed.chunks is not None and math.prod(parsed.chunks) * parsed.storage.numpy.itemsize > 2**31:
            yield get("NCZ-ARRAY-HUGE").finding(_zkey(akey),
                                                f"chunks {list(parsed.chunks)} declare more than 2 GiB each")


@rule("NCZ-ARRAY-META", Severity.ERROR, source="nczarr.md")
def array_meta(ctx: CheckContext) -> Iterator[Finding]:
    """Every array of an NCZarr dataset carries _nczarr_array with its dimension references."""
    if not ctx.nczarr:
        return
    for akey, rec, _ in _arrays(ctx):
        info = rec.nczarr
        if info is None:
            yield get("NCZ-ARRAY-META").finding(keys.join(akey, ".zattrs"),
                                                "NCZarr array metadata (_nczarr_array) missing")
            continue
        refs = info.get("dimension_references", info.get("dimrefs", info.get("dimensions")))
        scalar = bool(info.get("scalar")) or info.get("storage") == "scalar"
        if refs is None and not scalar:
            yield get("NCZ-ARRAY-META").finding(keys.join(akey, ".zattrs"), "_nczarr_array has no dimension references")
        elif refs is not None and (not isinstance(refs, list) or not all(isinstance(r, str) for r in refs)):
            yield get("NCZ-ARRAY-META").finding(keys.join(akey, ".zattrs"), f"dimension references {refs!r} "
                                                "are not a list of names")


def _refs(rec: ArrayRecord) -> tuple[list[str], bool]:
    info = rec.nczarr or {}
    refs = info.get("dimension_references", info.get("dimrefs", info.get("dimensions"))) or []
    scalar = bool(info.get("scalar")) or info.get("storage") == "scalar"
    if not isinstance(refs, list):
        refs = []
    return [r if r.startswith("/") else "/" + r for r in refs if isinstance(r, str)], scalar


@rule("NCZ-DIM-REF", Severity.ERROR, source="nczarr.md")
def dim_ref(ctx: CheckContext) -> Iterator[Finding]:
    """Every dimension reference resolves to a dimension defined in that group's _nczarr_group."""
    for akey, refs, _, _ in _nczarr_arrays(ctx):
        for ref in refs:
            if ctx.dimension(ref) is None:
                yield get("NCZ-DIM-REF").finding(keys.join(akey, ".zattrs"), f"dimension {ref} is not defined")


def _nczarr_arrays(ctx: CheckContext) -> Iterator[tuple[str, list[str], bool, tuple[int, ...] | None]]:
    """(array key, dimension references, scalar?, shape) for each array of an NCZarr dataset."""
    if not ctx.nczarr:
        return
    for akey, rec, _ in _arrays(ctx):
        refs, scalar = _refs(rec)
        yield akey, refs, scalar, parse_array(ctx, rec).shape


@rule("NCZ-DIM-SIZE", Severity.ERROR, source="nczarr.md")
def dim_size(ctx: CheckContext) -> Iterator[Finding]:
    """An array's shape equals its dimensions' sizes; along an unlimited one it may be shorter, never longer."""
    for akey, refs, scalar, shape in _nczarr_arrays(ctx):
        if shape is None or scalar:
            continue
        if len(refs) != len(shape):
            yield get("NCZ-DIM-SIZE").finding(_zkey(akey), f"{len(refs)} dimension references for shape {list(shape)}")
            continue
        for ref, extent in zip(refs, shape, strict=True):
            dim = ctx.dimension(ref)
            if dim is None:
                continue
            size, unlimited = dim
            if extent > size or (extent != size and not unlimited):
                yield get("NCZ-DIM-SIZE").finding(_zkey(akey), f"extent {extent} along {ref} but the dimension is "
                                                  f"{size}{' (unlimited)' if unlimited else ''}")


@rule("NCZ-SCALAR-SHAPE", Severity.ERROR, source='nczarr.md "scalar variables"')
def scalar_shape(ctx: CheckContext) -> Iterator[Finding]:
    """A netCDF scalar is stored with shape [1] and no dimension references."""
    for akey, refs, scalar, shape in _nczarr_arrays(ctx):
        if scalar and (shape not in ((1,), ()) or refs):
            yield get("NCZ-SCALAR-SHAPE").finding(_zkey(akey), f"scalar with shape {list(shape or [])} and "
                                                  f"references {refs}; shape [1] and no references expected")


@rule("NCZ-XARRAY-DIMS", Severity.WARNING, source="xarray spec")
def xarray_dims(ctx: CheckContext) -> Iterator[Finding]:
    """_ARRAY_DIMENSIONS, when present, lists one name per axis and agrees with the NCZarr dimension names."""
    for akey, rec, _ in _arrays(ctx):
        names = rec.zattrs.get("_ARRAY_DIMENSIONS")
        if names is None:
            continue
        shape = parse_array(ctx, rec).shape
        refs, scalar = _refs(rec)
        where = keys.join(akey, ".zattrs")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            yield get("NCZ-XARRAY-DIMS").finding(where, f"_ARRAY_DIMENSIONS {names!r} is not a list of names",
                                                 Severity.ERROR)
        elif shape is not None and len(names) != len(shape) and not (scalar and names == []):
            yield get("NCZ-XARRAY-DIMS").finding(where, f"_ARRAY_DIMENSIONS has {len(names)} names for shape "
                                                 f"{list(shape)}; xarray refuses this array", Severity.ERROR)
        elif ctx.nczarr and not scalar and [keys.basename(r) for r in refs] != names:
            yield get("NCZ-XARRAY-DIMS").finding(where, f"_ARRAY_DIMENSIONS {names} disagrees with NCZarr "
                                                 f"dimensions {refs}")


@rule("NCZ-STRING-MAXSTRLEN", Severity.ERROR, source="nczarr.md App. E; netcdf-c 4.10.1's reads")
def string_maxstrlen(ctx: CheckContext) -> Iterator[Finding]:
    """A string array's _nczarr_maxstrlen, where present, agrees with its |Sn length (netcdf-c reads by the former)."""
    # netcdf-c 4.10.1 sizes a string array's chunks by _nczarr_maxstrlen when the attribute is there, and by the
    # |Sn dtype when it is not (_nczarr_default_maxstrlen only sizes what it writes): an absent attribute is no
    # disagreement (tests/check/test_check.py::test_string_maxstrlen_reads_as_netcdf_c_does).
    if not ctx.nczarr:
        return
    for akey, rec, _ in _arrays(ctx):
        storage = parse_array(ctx, rec).storage
        if storage is None or storage.nctype != "string" or storage.numpy.kind != "S":
            continue
        declared = rec.zattrs.get("_nczarr_maxstrlen")
        if declared is not None and declared != storage.maxstrlen:
            yield get("NCZ-STRING-MAXSTRLEN").finding(_zkey(akey), f"dtype |S{storage.maxstrlen} but _nczarr_maxstrlen "
                                                      f"is {declared}; netcdf-c sizes chunks by the latter")


@rule("NCZ-FILL-ATTR", Severity.WARNING, source='NUG "_FillValue"; Zarr v2 spec "fill_value"')
def fill_attr(ctx: CheckContext) -> Iterator[Finding]:
    """The _FillValue attribute and the .zarray fill_value agree (netCDF readers use one, Zarr readers the other)."""
    for akey, rec, z in _arrays(ctx):
        if "_FillValue" not in rec.zattrs or z.get("fill_value") is None:
            continue
        storage = parse_array(ctx, rec).storage
        if storage is None or storage.nctype in ("char", "string"):
            continue
        a, b = rec.zattrs["_FillValue"], z["fill_value"]
        a = a[0] if isinstance(a, list) and len(a) == 1 else a
        try:
            fa = decode_fill(a, storage, base64_strings=False)
            fb = decode_fill(b, storage, base64_strings=False)
        except NczarrError:
            continue
        same = (fa == fb) or (isinstance(fa, float) and isinstance(fb, float) and math.isnan(fa) and math.isnan(fb))
        if not same:
            yield get("NCZ-FILL-ATTR").finding(_zkey(akey), f"fill_value {b!r} but _FillValue {a!r}: netCDF and "
                                               "Zarr readers fill unwritten cells differently")


@rule("NCZ-XARRAY-DIMSIZE", Severity.ERROR, source="xarray data model; our reader and xarray refuse the group")
def xarray_dimsize(ctx: CheckContext) -> Iterator[Finding]:
    """In a pure Zarr dataset, a name in _ARRAY_DIMENSIONS has one size across the arrays of a group, and a name
    holding "/" (kerchunk's path from the root, "g1/y") names the array's group or an ancestor."""
    from nczarr_conformance.nczarr.reader import dimension_home

    if ctx.flavor != "zarr":
        return  # NCZarr readers take dimensions from _nczarr_group; NCZ-XARRAY-DIMS compares the two
    seen: dict[tuple[str, str], tuple[int, str]] = {}
    for akey, rec, _ in _arrays(ctx):
        names, shape = rec.zattrs.get("_ARRAY_DIMENSIONS"), parse_array(ctx, rec).shape
        if shape is None or not isinstance(names, list) or len(names) != len(shape):
            continue
        for name, extent in zip(names, shape, strict=True):
            if not isinstance(name, str) or not name:
                continue
            try:
                home = dimension_home(keys.parent(akey), name, ctx.groups, akey)
            except NczarrError as exc:
                yield get("NCZ-XARRAY-DIMSIZE").finding(keys.join(akey, ".zattrs"), f"{exc}; nczarr-dump refuses "
                                                        "the dataset")
                continue
            first = seen.setdefault(home, (extent, akey))
            if first[0] != extent:
                yield get("NCZ-XARRAY-DIMSIZE").finding(keys.join(akey, ".zattrs"), (
                    f"dimension {name!r} is {extent} long here but {first[0]} in {first[1]}; xarray and "
                    "nczarr-dump refuse this group"))
