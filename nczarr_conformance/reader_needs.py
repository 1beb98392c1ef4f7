"""What each reader needs of a layout: the one table behind ``nc2nczarr --for``, ``nczarr-check --for`` and
``nczarr-fix --for``.

The matrix (reports/interop.md) shows, reader by reader, what each layout does; this module keeps that
knowledge where the converter can use it *before* writing. A layout is described by its :class:`Layout`
traits (Zarr format, flavor, container, char dtype, filters, codecs, scalars, …), which the converter
derives from the source and the options it would write with, and the checker from a store it reads. Each
:class:`Need` is one thing a reader cannot take, written as a predicate over those traits, what the reader
then loses, the layout choice that cures it (if any), the ``nczarr-check`` rule that predicts it, and the
test that runs that reader on exactly such a layout (tests/test_reader_needs.py holds every entry to it).

:func:`plan` chooses, among the layouts the converter can write, the one that loses least for the named
readers; where they cannot all be satisfied, the losses say which reader loses what, and ``prefer``
names the reader whose needs win.

Why a ground-floor module: the converter (conversion/), the checker and the fixer all consult it, and it
imports nothing of theirs; it is data and a small search.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

#: the layout choices :func:`plan` may make, and their defaults (what ``nc2nczarr`` writes unasked)
KNOBS: dict[str, tuple[object, ...]] = {
    "zarr_format": (2, 3),
    "flavor": ("nczarr-4.10", "zarr"),
    "char_as": (">S1", "S1"),
    "filters": ("keep", "none"),
    "compression": ("keep", "none"),
    "zip_entries": ("nested", "top"),
    "chunks": ("keep", "capped"),
    "default_fill": ("write", "null"),
}
DEFAULT_CHOICE: dict[str, object] = {name: values[0] for name, values in KNOBS.items()}

NCZARR_FLAVORS = frozenset({"nczarr-4.10", "nczarr-2", "nczarr-2-upper", "nczarr-v1"})


@dataclass(frozen=True)
class Source:
    """What a source holds that decides its layout's traits (derived from the canonical model)."""

    char: bool = False
    strings: bool = False
    scalars: bool = False
    groups: bool = False
    filters: frozenset[str] = frozenset()
    compressors: frozenset[str] = frozenset()
    #: the netCDF types of the attributes (``_FillValue`` aside)
    attribute_types: frozenset[str] = frozenset()
    #: the names of the variables' attributes
    variable_attributes: frozenset[str] = frozenset()
    #: a variable whose chunk is longer than its shape along some dimension (an unlimited dimension's 512)
    chunks_over_shape: bool = False
    #: an unlimited dimension
    unlimited: bool = False
    #: a big-endian numeric variable
    big_endian: bool = False
    #: a number variable without a _FillValue (the writer gives it netCDF's default fill, unless told not to)
    unfilled_numbers: bool = False
    #: a char variable without a _FillValue (its fill is NUL, unless the writer is told to write none)
    unfilled_chars: bool = False
    #: a float attribute holding NaN or an infinity (JSON has no such number: the Zarr convention writes text)
    nan_attributes: bool = False
    #: a dimension no variable uses (pure Zarr names dimensions only through its arrays' _ARRAY_DIMENSIONS)
    unused_dimensions: bool = False
    #: a sub-group defines dimensions of its own
    subgroup_dimensions: bool = False
    #: a _FillValue of a type JSON does not give back (a byte, short, float variable's)
    typed_fill_values: bool = False
    #: a float32 attribute a 64-bit reader of its JSON gets otherwise (0.1), or a float32 scale_factor/add_offset
    float32_attributes: bool = False
    #: a group attribute whose name starts with ``_nc`` in any case (``_NCPROPERTIES``, ``_nc_note``)
    nc_named_group_attributes: bool = False
    #: a variable attribute whose name starts with ``_nc`` in any case
    nc_named_variable_attributes: bool = False


#: the attribute types a reader infers back from JSON alone (a number without a point, one with, text)
JSON_TYPES = frozenset({"int", "double", "char"})
#: variable attributes GDAL takes as properties of its own (GetUnit, GetScale, GetOffset), not as attributes
GDAL_PROPERTIES = frozenset({"units", "scale_factor", "add_offset"})


@dataclass(frozen=True)
class Layout:
    """The traits of a store that decide whether a reader reads it (from a source and options, or a store)."""

    zarr_format: int = 2
    flavor: str = "nczarr-4.10"
    #: "directory", "zip-nested" (netcdf-c's: the dataset under a folder named after the zip), "zip-top"
    #: (zarr-python's ZipStore: the dataset at the top), "s3", "http"
    container: str = "directory"
    #: the dtype of char arrays (">S1", "|S1", "<U1", or a v3 data type name), None when there is none
    char_dtype: str | None = None
    #: filter ids on any array (netcdf-c's and nccopy's "shuffle", …)
    filters: frozenset[str] = frozenset()
    #: compressor ids on any array
    compressors: frozenset[str] = frozenset()
    #: some array's chunk is longer than its shape
    chunks_over_shape: bool = False
    #: number and char arrays without a _FillValue carry fill_value null (``default_fill: null``), not the default
    null_default_fill: bool = False
    #: what the data holds, whatever the layout
    source: Source = Source()

    @property
    def nczarr(self) -> bool:
        return self.flavor in NCZARR_FLAVORS

    @property
    def zip(self) -> bool:
        return self.container.startswith("zip")

    @property
    def codecs(self) -> frozenset[str]:
        return self.filters | self.compressors

    @property
    def strings(self) -> bool:
        return self.source.strings

    @property
    def scalars(self) -> bool:
        return self.source.scalars

    @property
    def groups(self) -> bool:
        return self.source.groups

    @property
    def typed_attributes(self) -> bool:
        """Attributes of a type JSON does not give back (anything but int, double, char), _FillValue included."""
        return bool(self.source.attribute_types - JSON_TYPES) or self.source.typed_fill_values


@dataclass(frozen=True)
class Need:
    """One thing a reader cannot take: where ``when`` holds, the reader ``loses`` what it says."""

    id: str
    when: Callable[[Layout], bool]
    #: what the reader does with such a layout, in the words a user reads ("cannot open the store: …")
    loses: str
    #: layout choices (KNOBS names → values) that cure it, or a container the user must choose; None: no
    #: layout we write cures it
    cure: Mapping[str, object] | None
    #: the nczarr-check rule that predicts it (None: the check has no rule for it yet)
    rule: str | None
    #: the test that runs this reader on exactly such a layout
    evidence: str
    #: the whole store is lost (the reader cannot open it), not only some variables
    fatal: bool = True


@dataclass(frozen=True)
class Reader:
    """A reader of the matrix (its implementation id) and what it needs."""

    id: str
    name: str
    needs: tuple[Need, ...]
    #: how a user opens a store with it, printed after a conversion for it
    how: str = ""


READERS: dict[str, Reader] = {}


def register(reader: Reader) -> Reader:
    """Add a reader; an id twice (a reader, or a need within the table) is refused."""
    if reader.id in READERS:
        raise ValueError(f"reader {reader.id!r} is in the reader table twice")
    seen = {n.id for r in READERS.values() for n in r.needs}
    for need in reader.needs:
        if need.id in seen:
            raise ValueError(f"need {need.id!r} of reader {reader.id!r} is in the reader table twice")
        seen.add(need.id)
    READERS[reader.id] = reader
    return reader


EVIDENCE = "tests/test_reader_needs.py"
_DIRECTORY = {"container": "directory"}

register(Reader("netcdf-c-4.10", "netcdf-c 4.10.1 (netCDF4-python's wheel)", (
    Need("c410-v3", lambda lay: lay.zarr_format == 3, "cannot open the store: no released netcdf-c reads Zarr v3",
         {"zarr_format": 2}, "NCZ-V3-INTEROP-NETCDFC", EVIDENCE),
    Need("c410-zip", lambda lay: lay.zip, "cannot open the store: netCDF4-python's netcdf-c is built without "
         "libzip (\"Attempt to use feature that was not turned on\")", _DIRECTORY, "NCZ-INTEROP-ZIP-LIBZIP",
         EVIDENCE),
    Need("c410-char-s1", lambda lay: lay.zarr_format == 2 and lay.char_dtype == "|S1",
         "reads char variables as strings (|S1 is a string of length 1 to netcdf-c)", {"char_as": ">S1"},
         "NCZ-INTEROP-C410-PURECHAR", EVIDENCE, fatal=False),
    Need("c410-zarr-scalar", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.scalars,
         "does not show scalar variables (a pure-Zarr array of shape [], netcdf-c issue #3108): a CF grid "
         "mapping such as crs is lost", {"flavor": "nczarr-4.10"}, "NCZ-INTEROP-C410-ZARRSCALAR", EVIDENCE,
         fatal=False),
    Need("c410-zarr-unlimited", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.source.unlimited,
         "reads unlimited dimensions as fixed: pure Zarr has none", {"flavor": "nczarr-4.10"}, None, EVIDENCE,
         fatal=False),
    Need("c410-zarr-dims", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.source.unused_dimensions,
         "loses dimensions no variable uses: pure Zarr names dimensions only through its arrays' "
         "_ARRAY_DIMENSIONS", {"flavor": "nczarr-4.10"}, None, EVIDENCE, fatal=False),
    Need("c410-zarr-types", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.typed_attributes,
         "reads attribute types as their JSON suggests (short -> int, float -> double, string -> char): pure Zarr "
         "keeps no netCDF types", {"flavor": "nczarr-4.10"}, None, EVIDENCE, fatal=False),
), how="netCDF4.Dataset('file://PATH#mode=nczarr,file')"))

register(Reader("netcdf-c-4.9", "netcdf-c 4.9.0 (Debian's ncdump)", (
    Need("c490-v3", lambda lay: lay.zarr_format == 3, "shows an empty dataset: netcdf-c 4.9.0 reads no Zarr v3",
         {"zarr_format": 2}, "NCZ-V3-INTEROP-NETCDFC", EVIDENCE, fatal=False),
    Need("c490-410-keys", lambda lay: lay.zarr_format == 2 and lay.flavor in ("nczarr-4.10", "nczarr-2"),
         "shows the _nczarr_* keys of the 4.9.1+ layouts as attributes and reads the store as pure Zarr (it predates "
         "them)", {"flavor": "zarr"}, "NCZ-INTEROP-C490-KEYS", EVIDENCE, fatal=False),
    Need("c490-zarr-dims", lambda lay: lay.zarr_format == 2 and lay.flavor != "nczarr-2-upper" and (
         lay.source.unused_dimensions or lay.source.subgroup_dimensions),
         "loses dimensions no variable uses and reads a sub-group's dimensions as the root's: it reads every layout "
         "but its own as pure Zarr", None, None, EVIDENCE, fatal=False),
    Need("c490-zarr-types", lambda lay: lay.zarr_format == 2 and lay.flavor != "nczarr-2-upper"
         and lay.typed_attributes,
         "reads attribute types as their JSON suggests: it reads every layout but its own as pure Zarr", None, None,
         EVIDENCE, fatal=False),
    Need("c490-zip", lambda lay: lay.zip, "cannot open the store: Debian's netcdf-c 4.9.0 is built without libzip",
         _DIRECTORY, "NCZ-INTEROP-ZIP-LIBZIP", EVIDENCE),
    Need("c490-codec", lambda lay: lay.zarr_format == 2 and bool(lay.codecs),
         "reads compressed chunk bytes as data, silently: Debian's netcdf-c 4.9.0 has no Zarr codecs",
         {"filters": "none", "compression": "none"}, "NCZ-INTEROP-C490-CODEC", EVIDENCE, fatal=False),
    Need("c490-char", lambda lay: lay.zarr_format == 2 and lay.char_dtype in (">S1", "|S1"),
         "crashes (SIGSEGV) on char arrays stored as >S1 or |S1 (it wrote <U1: nc2nczarr --flavor nczarr-2-upper)",
         None, "NCZ-INTEROP-C490-CHAR", EVIDENCE),
    Need("c490-string", lambda lay: lay.zarr_format == 2 and lay.strings,
         "crashes (SIGSEGV) on string variables, in every layout", None, "NCZ-INTEROP-C490-STRING", EVIDENCE),
    Need("c490-unlimited", lambda lay: lay.zarr_format == 2 and lay.source.unlimited,
         "reads unlimited dimensions as fixed: it reads the 4.9.1+ layouts as pure Zarr, and its own has none", None,
         None, EVIDENCE, fatal=False),
    Need("c490-chunk-over", lambda lay: lay.zarr_format == 2 and lay.chunks_over_shape,
         "cannot open the store (\"NCZarr error\"): an array's chunk is longer than its shape (an unlimited "
         "dimension's chunk of 512)", {"chunks": "capped"}, "NCZ-INTEROP-C490-CHUNKOVER", EVIDENCE),
    Need("c490-byteorder", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.source.big_endian,
         "reads big-endian arrays byte-swapped: it ignores a pure-Zarr dtype's byte order", {"flavor": "nczarr-4.10"},
         "NCZ-INTEROP-C490-BYTEORDER", EVIDENCE, fatal=False),
    Need("c490-string-attrs", lambda lay: lay.zarr_format == 2 and not lay.nczarr and "string" in
         lay.source.attribute_types, "cannot open the store (\"Invalid argument\"): a pure-Zarr attribute that is a "
         "list of texts (a netCDF string attribute)", {"flavor": "nczarr-4.10"}, "NCZ-INTEROP-C490-STRATTR", EVIDENCE),
    Need("c490-zarr-scalar", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.scalars,
         "crashes (SIGSEGV) on a Zarr array of shape [] (a pure-Zarr scalar)", {"flavor": "nczarr-4.10"},
         "NCZ-INTEROP-C490-SCALAR", EVIDENCE),
), how="ncdump 'file://PATH#mode=nczarr,file'"))

_ZARR_PYTHON_NEEDS = (
    ("zip", lambda lay: lay.container == "zip-nested",
     "cannot open the zip: the dataset sits in a folder inside it (netcdf-c's zip layout); zarr-python's ZipStore "
     "opens a zip's top", {"zip_entries": "top"}, None),
    ("char", lambda lay: lay.zarr_format == 2 and lay.char_dtype == ">S1",
     "cannot open the store: zarr-python 3 has no >S1 dtype (nczarr.md's char)", {"char_as": "S1"},
     "NCZ-INTEROP-ZARR-CHAR"),
)


def _zarr_python_needs(prefix: str, what: str) -> tuple[Need, ...]:
    return tuple(Need(f"{prefix}-{key}", when, loses.replace("cannot open the store", f"{what} cannot open the "
                                                                                       "store"), cure, rule, EVIDENCE)
                 for key, when, loses, cure, rule in _ZARR_PYTHON_NEEDS)


register(Reader("zarr-python", "zarr-python 3", _zarr_python_needs("zarr-python", "zarr-python"),
                how="zarr.open_group(PATH) (a zip: zarr.storage.ZipStore(PATH))"))
register(Reader("xarray", "xarray (open_zarr, one group)", (*_zarr_python_needs("xarray", "xarray"), *(
    Need("xarray-default-fill", lambda lay: lay.zarr_format == 2 and lay.source.unfilled_numbers
         and not lay.null_default_fill,
         "decodes variables without a _FillValue with netCDF's default fill masked: integers to float64, "
         "values at the default fill as NaN (it masks .zarray's fill_value; its netCDF4 engine does not)",
         {"default_fill": "null"}, "NCZ-INTEROP-XARRAY-FILL", EVIDENCE, fatal=False),
    Need("xarray-char-fill", lambda lay: lay.zarr_format == 2 and lay.source.unfilled_chars
         and not lay.null_default_fill,
         "decodes a char row that is all NUL (an empty string) as NaN: it masks the char fill_value",
         {"default_fill": "null"}, "NCZ-INTEROP-XARRAY-FILL", EVIDENCE, fatal=False),
    Need("xarray-strings", lambda lay: lay.zarr_format == 2 and lay.strings,
         "reads string variables as bytes, not text, and empty strings as NaN (Zarr v2 |Sn; v3's string type it "
         "reads as text)", {"zarr_format": 3}, "NCZ-INTEROP-XARRAY-STRINGS", EVIDENCE, fatal=False),
    Need("xarray-nan-attributes", lambda lay: lay.zarr_format == 2 and lay.source.nan_attributes,
         "reads a NaN or infinite float attribute as the text \"NaN\"/\"Infinity\" (JSON has no such number)", None,
         "NCZ-INTEROP-XARRAY-NANATTR", EVIDENCE, fatal=False),
    Need("xarray-float-attributes", lambda lay: lay.source.float32_attributes,
         "reads 32-bit float attributes as 64-bit (their JSON number), so packed variables decode to float64 and "
         "the attribute values differ past float32's precision", None, "NCZ-INTEROP-XARRAY-FLOATATTR", EVIDENCE,
         fatal=False),
    Need("xarray-nc-attributes", lambda lay: lay.source.nc_named_group_attributes or (
        lay.zarr_format == 2 and lay.source.nc_named_variable_attributes),
         "drops attributes whose name starts with _nc in any case (_NCPROPERTIES): it hides NCZarr's own that "
         "way: a group's in both formats, a Zarr v2 array's", None, None, EVIDENCE, fatal=False),
    Need("xarray-nczarr-scalar", lambda lay: lay.zarr_format == 2 and lay.nczarr and lay.scalars,
         "reads scalar variables as 1-element arrays along a dimension _scalar_ (NCZarr's shape-[1] scalar)",
         {"flavor": "zarr"}, "NCZ-INTEROP-XARRAY-SCALAR", EVIDENCE, fatal=False),
)),
                how="xarray.open_zarr(PATH) (a zip: xarray.open_zarr(zarr.storage.ZipStore(PATH)))"))
register(Reader("xarray-datatree", "xarray open_datatree", _zarr_python_needs("xarray-datatree", "xarray"),
                how="xarray.open_datatree(PATH, engine='zarr')"))

register(Reader("tensorstore", "TensorStore (zarr and zarr3 drivers)", (
    Need("ts-zip", lambda lay: lay.zip, "cannot open a zip by its path (its kvstore takes directories here)",
         _DIRECTORY, None, EVIDENCE),
    Need("ts-filters", lambda lay: lay.zarr_format == 2 and bool(lay.filters),
         "cannot open arrays with filters (netcdf-c's shuffle): \"filters are not supported\"", {"filters": "none"},
         "NCZ-INTEROP-TS-FILTERS", EVIDENCE, fatal=False),
    Need("ts-char", lambda lay: lay.zarr_format == 2 and lay.char_dtype is not None,
         "loses char arrays in every Zarr v2 layout: a fill_value \"\" (netcdf-c's) is refused, and |S1 "
         "(zarr-python's) reads as empty strings", None, "NCZ-INTEROP-TS-STRINGFILL", EVIDENCE, fatal=False),
    Need("ts-string-fill", lambda lay: lay.zarr_format == 2 and lay.strings,
         "cannot open string arrays: their fill_value is \"\" (it wants base64 bytes of the full width)", None,
         "NCZ-INTEROP-TS-STRINGFILL", EVIDENCE, fatal=False),
    Need("ts-v3-text", lambda lay: lay.zarr_format == 3 and (lay.char_dtype is not None or lay.strings),
         "cannot open Zarr v3 char or string arrays (no null_terminated_bytes or string data type)", None,
         "NCZ-V3-INTEROP-TS-TEXT", EVIDENCE, fatal=False),
), how="tensorstore.open({'driver': 'zarr', 'kvstore': 'file://PATH/VAR'})"))

register(Reader("gdal", "GDAL 3.6 (Zarr driver)", (
    Need("gdal-zip", lambda lay: lay.zip, "cannot open the zip by its path (gdalmdiminfo: not recognized)",
         _DIRECTORY, None, EVIDENCE),
    Need("gdal-v3", lambda lay: lay.zarr_format == 3,
         "shows no arrays: GDAL 3.6 reads an older Zarr v3 draft", {"zarr_format": 2}, "NCZ-V3-INTEROP-GDAL", EVIDENCE,
         fatal=False),
    Need("gdal-char-nul", lambda lay: lay.char_dtype is not None,
         "reads the NUL padding of char arrays as empty strings (its strings end at a NUL), in every layout", None,
         "NCZ-INTEROP-GDAL-CHARNUL", EVIDENCE, fatal=False),
    Need("gdal-properties", lambda lay: bool(lay.source.variable_attributes & GDAL_PROPERTIES),
         "shows units, scale_factor and add_offset as properties of its own (GetUnit, GetScale, GetOffset), not as "
         "attributes", None, None, EVIDENCE, fatal=False),
    Need("gdal-int64-attributes", lambda lay: bool(lay.source.attribute_types & {"int64", "uint64"}),
         "reads 64-bit integer attributes as doubles (values past 2**53 rounded)", None, "NCZ-INTEROP-GDAL-INT64ATTR",
         EVIDENCE, fatal=False),
    Need("gdal-shuffle", lambda lay: lay.zarr_format == 2 and "shuffle" in lay.filters,
         "drops arrays with the shuffle filter (\"Filter shuffle not handled\")", {"filters": "none"}, None,
         EVIDENCE, fatal=False),
), how="gdalmdiminfo PATH"))

register(Reader("ours", "nczarr_conformance (this package)", (
    # the nczarr-4.10 layout marks a |S1 char (_nczarr_array.nczarr_type: char), which ours reads as char; the
    # 4.9.1–4.9.2 layout's .zarray _nczarr_array is not written with it (netcdf-c 4.9's parser is not tried)
    Need("ours-char-s1", lambda lay: lay.zarr_format == 2 and lay.flavor == "nczarr-2" and lay.char_dtype == "|S1",
         "reads char variables of the 4.9.1–4.9.2 layout as strings of length 1 (in NCZarr, |S1 is nczarr.md "
         "Appendix E's string, as netcdf-c reads it; the nczarr-4.10 layout marks it char)", {"char_as": ">S1"}, None,
         EVIDENCE, fatal=False),
    Need("ours-zarr-unlimited", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.source.unlimited,
         "reads unlimited dimensions as fixed: pure Zarr has none", {"flavor": "nczarr-4.10"}, None, EVIDENCE,
         fatal=False),
    Need("ours-zarr-dims", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.source.unused_dimensions,
         "loses dimensions no variable uses: pure Zarr names dimensions only through its arrays' "
         "_ARRAY_DIMENSIONS", {"flavor": "nczarr-4.10"}, None, EVIDENCE, fatal=False),
    Need("ours-zarr-types", lambda lay: lay.zarr_format == 2 and not lay.nczarr and lay.typed_attributes,
         "reads attribute types as their JSON suggests: pure Zarr keeps no netCDF types", {"flavor": "nczarr-4.10"},
         None, EVIDENCE, fatal=False),
), how="nczarr_conformance.open(PATH)"))


@dataclass(frozen=True)
class Loss:
    """A reader that loses something in a layout."""

    reader: str
    need: Need

    def __str__(self) -> str:
        return f"{self.reader}: {self.need.loses}"


def losses(reader_ids: Iterable[str], layout: Layout) -> list[Loss]:
    """What each named reader loses in ``layout``, in the order the readers are named."""
    return [Loss(rid, need) for rid in reader_ids for need in READERS[rid].needs if need.when(layout)]


def unknown(reader_ids: Iterable[str]) -> list[str]:
    """The names among ``reader_ids`` that are not in the table."""
    return [r for r in reader_ids if r not in READERS]


def parse_readers(text: str, *, where: str = "--for") -> list[str]:
    """``a,b`` → reader ids; an unknown name is refused (ValueError) naming the known ones."""
    ids = [r.strip() for r in text.split(",") if r.strip()]
    bad = unknown(ids)
    if bad or not ids:
        raise ValueError(f"{where}: unknown reader {', '.join(map(repr, bad)) or '(none named)'}; "
                         f"known: {', '.join(READERS)}")
    return list(dict.fromkeys(ids))


def layout_of(source: Source, choice: Mapping[str, object], container: str = "directory") -> Layout:
    """The layout that writing ``source`` with ``choice`` (KNOBS → values) into ``container`` makes."""
    v3 = choice.get("zarr_format") == 3
    flavor = str(choice.get("flavor", "nczarr-4.10"))
    char = None
    if source.char:
        # unasked, each flavor writes its own char: nczarr.md's >S1, the pure-Zarr flavor numpy's |S1
        char_as = choice.get("char_as") or ("S1" if flavor == "zarr" else ">S1")
        char = "null_terminated_bytes" if v3 else (">S1" if char_as == ">S1" else "|S1")
        if flavor == "nczarr-2-upper":
            char = "<U1"
    if container == "zip":
        container = "zip-top" if v3 or choice.get("zip_entries") == "top" else "zip-nested"
    filters = frozenset() if choice.get("filters") == "none" or choice.get("compression") == "none" \
        else source.filters
    compressors = frozenset() if choice.get("compression") == "none" else source.compressors
    return Layout(zarr_format=3 if v3 else 2, flavor="zarr" if v3 else flavor, container=container,
                  char_dtype=char, filters=filters, compressors=compressors,
                  chunks_over_shape=source.chunks_over_shape and choice.get("chunks") != "capped", source=source,
                  null_default_fill=not v3 and choice.get("default_fill") == "null")


@dataclass
class Plan:
    """The layout choices for the named readers and what each reader still loses."""

    readers: list[str]
    choice: dict[str, object]
    layout: Layout
    losses: list[Loss] = field(default_factory=list)

    def changed(self) -> dict[str, object]:
        """The choices that differ from the default conversion."""
        return {k: v for k, v in self.choice.items() if DEFAULT_CHOICE.get(k) != v}

    def losers(self) -> dict[str, list[Loss]]:
        out: dict[str, list[Loss]] = {}
        for loss in self.losses:
            out.setdefault(loss.reader, []).append(loss)
        return out


def _choices(fixed: Mapping[str, object], container: str) -> Iterator[dict[str, object]]:
    names = list(KNOBS)
    for values in itertools.product(*(KNOBS[n] if n not in fixed else (fixed[n],) for n in names)):
        choice = dict(zip(names, values, strict=True))
        if container != "zip" and choice["zip_entries"] != DEFAULT_CHOICE["zip_entries"]:
            continue  # not a zip: the choice means nothing
        if choice["zarr_format"] == 3 and (choice["flavor"] != fixed.get("flavor", KNOBS["flavor"][0])
                                           or choice["char_as"] != fixed.get("char_as", ">S1")):
            continue  # v3's char and flavor are the v3 writer's own: one v3 candidate per codec choice
        yield choice


def _cost(found: list[Loss], choice: Mapping[str, object], readers: list[str], prefer: list[str]) -> tuple[int, ...]:
    """Readers are served in order (``prefer`` first, then as named): the first loses least, whole stores before
    anything else; what remains is broken by the fewest changes from the default (giving up compression costs
    more than giving up a filter)."""
    order = [*prefer, *(r for r in readers if r not in prefer)]
    cost: list[int] = []
    for reader in order:
        mine = [loss for loss in found if loss.reader == reader]
        cost += [sum(1 for loss in mine if loss.need.fatal), len(mine)]
    cost.append(sum(2 if k == "compression" else 1 for k, v in choice.items() if DEFAULT_CHOICE.get(k) != v))
    return tuple(cost)


def plan(source: Source, readers: list[str], *, container: str = "directory", prefer: Iterable[str] = (),
         fixed: Mapping[str, object] | None = None) -> Plan:
    """The layout choices that serve ``readers`` in order (``prefer`` first): each loses as little as the readers
    before it allow; ties go to the fewest changes from the default.

    ``fixed`` holds choices the user made explicitly (``--zarr-format 3``, ``--flavor zarr``, ``--char-as``): they
    are kept, and what they cost a reader is a loss like any other. ``prefer``: readers whose losses count first.
    """
    prefer = list(prefer)
    best: tuple[tuple[int, ...], dict[str, object], Layout, list[Loss]] | None = None
    for choice in _choices(dict(fixed or {}), container):
        layout = layout_of(source, choice, container)
        found = losses(readers, layout)
        cost = _cost(found, choice, readers, prefer)
        if best is None or cost < best[0]:
            best = (cost, choice, layout, found)
    assert best is not None
    _, choice, layout, found = best
    return Plan(readers, choice, layout, found)


def readable_by(layout: Layout, reader_ids: Iterable[str] | None = None) -> tuple[list[str], dict[str, list[Need]]]:
    """(readers that lose nothing, readers → what they lose) for ``layout``."""
    ok: list[str] = []
    lost: dict[str, list[Need]] = {}
    for rid in reader_ids or READERS:
        found = [loss.need for loss in losses([rid], layout)]
        if found:
            lost[rid] = found
        else:
            ok.append(rid)
    return ok, lost


#: nczarr-check's prediction rules (by id prefix) → the readers they speak of: ``nczarr-check --for`` keeps a
#: prediction when it speaks of a named reader (rules of other families are not predictions and always stay)
RULE_PREFIX_READERS: dict[str, tuple[str, ...]] = {
    "NCZ-INTEROP-C490-": ("netcdf-c-4.9",),
    "NCZ-INTEROP-C410-": ("netcdf-c-4.10",),
    "NCZ-INTEROP-ZARR-": ("zarr-python", "xarray", "xarray-datatree"),
    "NCZ-INTEROP-SHUFFLE0": ("zarr-python", "xarray", "xarray-datatree"),
    "NCZ-INTEROP-XARRAY-": ("xarray", "xarray-datatree"),
    "NCZ-INTEROP-TS-": ("tensorstore",),
    "NCZ-INTEROP-GDAL-": ("gdal",),
    "NCZ-INTEROP-ZIP-LIBZIP": ("netcdf-c-4.10", "netcdf-c-4.9"),
    "NCZ-INTEROP-ZIP-NESTED": ("zarr-python", "xarray", "xarray-datatree"),
    "NCZ-INTEROP-U1CHAR-ZARR": ("zarr-python", "xarray", "xarray-datatree", "gdal", "tensorstore"),
    "NCZ-V3-INTEROP-NETCDFC": ("netcdf-c-4.10", "netcdf-c-4.9"),
    "NCZ-V3-INTEROP-GDAL": ("gdal",),
    "NCZ-V3-INTEROP-TS-": ("tensorstore",),
}


def readers_of_rule(rule_id: str) -> tuple[str, ...] | None:
    """The readers a prediction rule speaks of; None for a rule that is not a prediction about readers."""
    for prefix, readers in RULE_PREFIX_READERS.items():
        if rule_id.startswith(prefix):
            return readers
    return None


def render_markdown() -> str:
    """docs/readers.md: the table as users read it (tests/test_reader_needs.py checks the page is this)."""
    knob_words = {"zarr_format": "--zarr-format", "flavor": "--flavor", "char_as": "--char-as",
                  "filters": "filters", "compression": "compression", "zip_entries": "zip entries",
                  "chunks": "chunks", "container": "output"}
    lines = ["# What each reader needs (`nc2nczarr --for`, `nczarr-check --for`)", "",
             "Generated from `nczarr_conformance/reader_needs.py`; each row is run against its reader by",
             "`tests/test_reader_needs.py` (the layout it fires on, then the layout its cure names). `nc2nczarr --for",
             "READER,...` picks, before writing, the layout that serves the named readers in the order named (the",
             "first loses least, then the next; ties: the fewest changes from the default), says what each named",
             "reader still loses, and `--prefer READER` puts a reader first; `--verify` then opens the output with",
             "each reader and compares it with netCDF4-python reading the source (xarray also decoded as xarray",
             "decodes it, against its netCDF4 engine reading the source). `nczarr-check --for READER,...` keeps",
             "the predictions about those readers; `nczarr-check --readers` tries each reader for real beside what",
             "the findings predict.", ""]
    for reader in READERS.values():
        lines += [f"## `{reader.id}`: {reader.name}", "", f"Opened here as `{reader.how}`.", ""]
        if not reader.needs:
            lines += ["Reads every layout `nc2nczarr` writes.", ""]
            continue
        lines += ["| need | what the reader does | cure | predicted by |", "|---|---|---|---|"]
        for need in reader.needs:
            cure = ", ".join(f"{knob_words.get(k, k)} {v}" for k, v in need.cure.items()) if need.cure else "none"
            rule = f"`{need.rule}`" if need.rule else "-"
            lines.append(f"| `{need.id}` | {need.loses.replace('|', '&#124;')} | {cure} | {rule} |")
        lines.append("")
    return "\n".join(lines)
