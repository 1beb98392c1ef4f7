"""What an implementation says it can do: the capability vocabulary of ``--caps`` and of a peer's
``capabilities``.

The matrix chooses the cases a writer writes and a reader reads, and the spec rules that grade an
implementation, by these names and never by an implementation's id: an implementation added from
outside (a command adapter, an entry point) is graded exactly as a built-in one that declares the
same capabilities.

Two kinds of names:

- *features* (``FEATURES``): what the data of a case needs. A case lists the features it needs
  (conformance/cases.py ``Case.requires``); a cell runs only when both its writer and its reader
  declare every one of them, and is otherwise recorded as skipped, naming what is not declared.
- *conventions* (``CONVENTIONS``): which format an implementation speaks. They decide how a cell
  compares (``nczarr``: the whole netCDF model, else arrays and untyped attributes; ``attributes``:
  attributes at all) and which spec rules apply to it (conformance/rules.py).

The Zarr format is a pair of them: a writer that declares the convention ``writes-zarr-v3`` writes
Zarr v3 (``zarr.json``), so every case it writes also needs the feature ``zarr-v3`` of its reader
(``requirements``); a reader without it (no released netcdf-c reads v3) has those cells skipped,
as for any feature it does not declare. ``writes-zarr-v3`` is not part of ``all``: an
implementation that says nothing writes Zarr v2, as every one did before v3.
"""
from __future__ import annotations

FEATURES: dict[str, str] = {
    "groups": "nested groups, with dimensions defined in an ancestor (cases groups-nested, nczarr-v1)",
    "strings": "variable-length string variables and attributes (string-var, long-string, string-attr)",
    "char": "char variables: NC_CHAR arrays with NUL padding (char-var)",
    "scalars": "scalar (0-d) variables (scalar, nczarr-v1)",
    "unlimited": "unlimited dimensions (unlimited-dim)",
    "fill": "_FillValue, and unwritten chunks read as the fill (fill-partial, default-fill, "
            "corpus-ref_byte_fill_value_null)",
    "filters": "the shuffle filter and the zlib compressor (shuffle-zlib)",
    "endianness": "big-endian data (big-endian)",
    "int64": "64-bit integers, signed and unsigned, as data and as attributes (numeric-types, typed-attrs)",
    "separator": "chunk keys with the '/' dimension separator (slash-separator)",
    "order": "chunks stored in Fortran order (f-order)",
    "zarr-v3": "reads Zarr v3 stores (zarr.json, dimension_names): every cell of a writer that declares "
               "writes-zarr-v3 needs it (no released netcdf-c reads v3: 4.10.1 says \"Unknown file format\")",
    "legacy": "older NCZarr layouts: netcdf-c 4.9.3's keys, lower-case keys, NCZarr v1 (corpus-ref_oldformat, "
              "corpus-ref_oldkeys, nczarr-v1)",
    "references": "reads kerchunk references (a .json file or a .parq directory whose chunks are byte ranges of "
                  "other files): every cell of a writer that declares writes-references needs it; not part of all "
                  "(a reader says it opens them)",
    "icechunk": "reads Icechunk repositories (a Zarr v3 store whose chunks may be virtual: byte ranges of other "
                "files): every cell of a writer that declares writes-icechunk needs it; not part of all (a reader says "
                "it opens them)",
}

CONVENTIONS: dict[str, str] = {
    "nczarr": "speaks NCZarr: named shared dimensions and typed attributes, so a cell compares the whole netCDF "
              "model (without it: each array's values and each attribute's value, untyped); the spec rules of "
              "nczarr.md Appendices D and E, X.dims and Z.scalar (writers), D.read and Z.infer (readers) apply",
    "attributes": "writes or returns attributes (without it a cell compares arrays only)",
    "appendix-d": "writes the layout of nczarr.md Appendices D and E (netcdf-c 4.9.1 on, 2022-08); an NCZarr "
                  "writer without it writes the 4.8-4.9.0 layout, so the D.write and E rules do not apply",
    "netcdf-fill": "writes netCDF's default fill as fill_value when a variable has no _FillValue (rule Z.fill)",
    "writes-zarr-v3": "writes Zarr v3 (zarr.json) rather than v2: each case it writes needs zarr-v3 of the reader "
                      "too; not part of all (a writer that says nothing writes v2)",
    "writes-references": "writes kerchunk references into the case's netCDF-4 file rather than a store: each case it "
                         "writes needs references of the reader; not part of all",
    "writes-icechunk": "writes an Icechunk repository (virtual chunks into the case's netCDF-4 file) rather than a "
                       "store: each case it writes needs icechunk of the reader; not part of all",
}

#: the conventions that name what a writer writes, which ``all`` does not claim (see the module's text)
WRITER_FORMATS: frozenset[str] = frozenset({"writes-zarr-v3", "writes-references", "writes-icechunk"})
#: what ``all`` does not claim: the writer formats, and reading references or Icechunk repositories (a reader says
#: it opens them)
OPT_IN: frozenset[str] = WRITER_FORMATS | {"references", "icechunk"}

CAPABILITIES: dict[str, str] = {**FEATURES, **CONVENTIONS}

#: every capability: what an implementation that says nothing is taken to claim (its cells then show
#: what it really does, rather than being left out)
ALL: frozenset[str] = frozenset(CAPABILITIES) - OPT_IN
#: a pure-Zarr implementation (zarr-python, xarray, GDAL, TensorStore): every feature, no NCZarr convention
PURE_ZARR: frozenset[str] = ALL - {"nczarr", "appendix-d", "netcdf-fill"}
#: a pure-Zarr v3 writer (ours-zarr-v3, zarr-python and xarray with zarr_format=3)
PURE_ZARR_V3: frozenset[str] = PURE_ZARR | {"writes-zarr-v3"}


def requirements(case_needs: frozenset[str], writer_caps: frozenset[str]) -> frozenset[str]:
    """What a cell of a case needing ``case_needs`` asks of its reader (and its writer), given what the
    writer declares: the case's features, ``zarr-v3`` when the writer writes Zarr v3, ``references`` when it
    writes references, ``icechunk`` when it writes an Icechunk repository."""
    return (case_needs | ({"zarr-v3"} if "writes-zarr-v3" in writer_caps else frozenset())
            | ({"references"} if "writes-references" in writer_caps else frozenset())
            | ({"icechunk"} if "writes-icechunk" in writer_caps else frozenset()))


def parse(text: str | list[str] | tuple[str, ...], *, where: str = "--caps") -> frozenset[str]:
    """The capabilities named in ``groups,strings,…`` (or a list of names); ``all`` names every one,
    and ``all,-filters`` every one but filters. An unknown name is refused (ValueError) naming the
    known ones, so a typo never silently turns a feature off."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    out: set[str] = set()
    for name in [n for n in names if n]:
        drop = name.startswith("-")
        bare = name[1:] if drop else name
        if bare == "all":
            chosen = set(ALL)
        elif bare in CAPABILITIES:
            chosen = {bare}
        else:
            raise ValueError(f"{where}: unknown capability {bare!r}; known: all, {', '.join(CAPABILITIES)}")
        out = out - chosen if drop else out | chosen
    return frozenset(out)


def spelled(caps: frozenset[str]) -> str:
    """``caps`` in the vocabulary's order, comma-separated (what ``--caps`` would take back)."""
    return ",".join(name for name in CAPABILITIES if name in caps)
