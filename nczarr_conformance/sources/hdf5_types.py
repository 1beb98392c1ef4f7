"""What netCDF-4 cannot read in an HDF5 file, found with h5py before netCDF4-python touches it.

Why h5py first: netcdf-c 4.10.1 (netCDF4-python 1.7.5) handles HDF5 objects outside the
netCDF-4 data model in four ways, and three of them are silent or fatal:

* it hides them: a bitfield, reference or array-typed dataset, an attribute of float16,
  bitfield, reference or array type, a boolean (enum) attribute, a compound or vlen with
  such a member — gone from the netCDF view, so a conversion would lose them without a word;
* it shows them wrongly: a float16 or 128-bit float dataset appears as a ``str`` variable,
  and reading it crashes the process (``free(): invalid pointer``, exit 134, or a segfault);
* it crashes or refuses on the whole file: a fixed-length string dataset with an HDF5 fill
  value (every PyTables string array and index) segfaults ``nc_close`` even when never read;
  an attribute of rank 2 or of HDF5 time type, a dataset of time type or with a null
  dataspace, a named (committed) integer, float or bitfield datatype, a dangling soft or
  external link, a malformed ``DIMENSION_LIST``: the file does not open;
* a dataset whose filter netCDF-4's HDF5 lacks (blosc2, lzf, lzo…) opens, and its first read
  fails ("Filter error: undefined filter encountered");
* it hides objects of types it has, without a word: a named datatype (h5py's ``f["t"] =
  h5py.string_dtype()``, the user types netcdf-c commits), an attribute whose name netCDF-4
  keeps to itself when it is not netCDF-4's or HDF5 dimension scales' bookkeeping (PyTables'
  ``CLASS = "CARRAY"``), an attribute of a dataset netCDF-4 shows as a dimension only.

:func:`scan` walks every link, dataset and attribute with h5py (types and dataspaces only,
never values) and returns one :class:`Finding` per such object, named as netCDF names it
(``/g/var``, ``/g/var:attr``, ``/:attr``); it also lists every object h5py sees
(:attr:`Scan.objects`), and :func:`unseen` compares that list with the model netCDF-4 gave, so
whatever is in the file and not in the model is named too, including what no rule here
foresaw. :func:`without` makes a copy of the file with the
fatal ones removed, so ``--skip-unsupported`` can convert the rest. :func:`unwritten_value`
says what an unwritten element of a dataset reads as (its HDF5 fill value, zero unless the
writer set one), which is not always the fill netCDF-4 reports: netcdf-c reports an HDF5 fill
left at its default as NOFILL, or as netCDF's default fill.

This module knows HDF5 and h5py only: it imports nothing from the readers or the graded implementations.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from nczarr_conformance.stores import sniff

if TYPE_CHECKING:
    from nczarr_conformance.model import Group

#: the reasons a finding gives (what follows the object's name in a refusal or warning)
OUTSIDE = "outside the NCZarr model"
NO_TYPE = "netCDF-4 has no such type"
CRASHES = "netcdf-c crashes on it"
NO_OPEN = "netcdf-c cannot open a file holding it"
NO_FILTER = "netCDF-4's HDF5 cannot decode it"
NO_PYTHON = "netCDF4-python cannot open a file holding it"
NOT_SHOWN = "netCDF-4 does not show it"
RESERVED = "a name netCDF-4 keeps to itself"
NCZARR_NAME = "a name NCZarr keeps to itself: the store writes its own"
DIMENSION_ATTRIBUTE = "netCDF-4 shows its dataset as a dimension only"
NO_TYPES = "the NCZarr model keeps no type definitions"

#: attributes netcdf-c keeps to itself (never shown, whatever their type): HDF5 dimension scales'
#: bookkeeping and netCDF-4's own (checked against netcdf-c 4.10.1 through netCDF4-python)
HIDDEN_ATTRIBUTES = frozenset({
    "CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict",
    "_NCProperties", "_SuperblockVersion", "_IsNetcdf4", "_Format", "_Codecs", "_ARRAY_DIMENSIONS",
})
#: attributes netCDF-4 writes to keep its own books (netCDF-4 format specification, "Reserved
#: attributes"): what they say (dimension ids, the classic-model flag, provenance, codecs) the store
#: says its own way, so leaving them out loses nothing
NETCDF4_BOOKKEEPING = frozenset({"_Netcdf4Dimid", "_Netcdf4Coordinates", "_nc3_strict", "_NCProperties", "_Codecs"})
#: the NAME netCDF-4 gives a dimension scale that is a dimension and not a variable (netcdf-c's DIM_WITHOUT_VARIABLE)
DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
#: the prefix netCDF-4 gives a dataset named like a dimension it is not the coordinate of (netcdf-c's NON_COORD_PREPEND)
NON_COORD_PREFIX = "_nc4_non_coord_"
#: HDF5 filter ids registered with The HDF Group, for a name when the file stores none
FILTER_NAMES = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset",
                305: "lzo", 307: "bzip2", 32000: "lzf", 32001: "blosc", 32004: "lz4", 32008: "bitshuffle",
                32015: "zstd", 32026: "blosc2"}


#: what netcdf-c does with an object (Finding.effect)
FATAL = "fatal"  # cannot open (or crashes closing) the file while the object is in it
MISREAD = "misread"  # shows it, and reading it crashes or fails, or the model cannot take what it shows
HIDDEN = "hidden"  # hides it: nothing to leave out, only to say
SHOWN = "shown"  # shows it as a user-defined type (compound, vlen, enum, opaque): the model has none
# holds no variable's values (a type definition, an attribute netCDF-4 keeps to itself): named, never refused
NOTED = "noted"


@dataclass(frozen=True)
class Finding:
    """One object netCDF-4 or the NCZarr model cannot hold."""

    path: str  # the HDF5 object (dataset, group or link), "/" for the root group
    attribute: str | None  # the attribute's name, or None when the finding is the object itself
    what: str  # "float16", "array int32[3]", "filter 32026 (blosc2)", …
    why: str  # one of OUTSIDE, NO_TYPE, CRASHES, NO_OPEN, NO_FILTER
    effect: str  # FATAL, MISREAD, HIDDEN or SHOWN

    @property
    def fatal(self) -> bool:
        """netcdf-c cannot open the file while it is there: leaving it out takes a copy without it."""
        return self.effect == FATAL

    @property
    def noted(self) -> bool:
        """Named in the conversion's one warning line and left out, never refused: no variable's values go."""
        return self.effect == NOTED

    @property
    def breaks_reading(self) -> bool:
        """Reading the file through netCDF-4 into the model fails, or crashes, because of it."""
        return self.effect in (FATAL, MISREAD)

    @property
    def where(self) -> str:
        """As netCDF names it: ``/g/var``, ``/g/var:attr``, ``/:attr`` for a root attribute."""
        return self.path if self.attribute is None else f"{self.path}:{self.attribute}"

    @property
    def listed(self) -> str:
        """The refusal's item: ``/h (float16: netCDF-4 has no such type)``, ``/c (compound)``."""
        return f"{self.where} ({self.what})" if self.why == OUTSIDE else f"{self.where} ({self.what}: {self.why})"

    @property
    def left_out(self) -> str:
        """The warning's text after the file name."""
        if self.why == OUTSIDE:
            return f"{self.where} left out: {self.what} is {OUTSIDE}"
        copied = " (converted from a copy of the file without it)" if self.fatal else ""
        return f"{self.where} left out: {self.what}: {self.why}{copied}"


@dataclass
class Scan:
    """What :func:`scan` found: the findings, each dataset's filters and HDF5 fill value."""

    findings: list[Finding] = field(default_factory=list)
    #: dataset path → (filter id, name) of every filter in its pipeline
    filters: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    #: dataset path → the fill value its writer set in HDF5 (standard numeric types only): what netcdf-c
    #: reports as the variable's fill when no _FillValue attribute says otherwise
    fills: dict[str, Any] = field(default_factory=dict)
    #: every object h5py sees, (HDF5 path, attribute name or None) → its kind (GROUP, DATASET, DIMENSION,
    #: "named datatype string", ATTRIBUTE), parents first; netCDF-4's and dimension scales' bookkeeping
    #: attributes are not objects (their meaning, the dimensions, is in the model)
    objects: dict[tuple[str, str | None], str] = field(default_factory=dict)


#: kinds of Scan.objects
GROUP = "group"
DATASET = "dataset"
DIMENSION = "dimension"  # a dimension scale netCDF-4 shows as a dimension only
ATTRIBUTE = "attribute"


def is_hdf5(path: str) -> bool:
    """The HDF5 signature at offset 0, 512, 1024, 2048… (a user block moves it), in a regular file
    (never opened otherwise: opening a FIFO would wait for a writer). stores/sniff.py says it for every command."""
    return sniff.is_hdf5(path)


# ---- types ------------------------------------------------------------------------------------

def is_standard(tid: Any) -> bool:
    """An integer of 1, 2, 4 or 8 bytes using all its bits, or an IEEE float32/float64 (either byte order).

    Only such a type's stored bytes are the numpy dtype's bytes: a 20-bit integer in 4 bytes, or
    a 3-byte one, reads right through HDF5's conversion but not as raw chunk bytes.
    """
    import h5py

    klass = tid.get_class()
    if klass == h5py.h5t.INTEGER:
        return bool(tid.get_size() in (1, 2, 4, 8) and tid.get_precision() == 8 * tid.get_size()
                    and tid.get_offset() == 0)
    if klass == h5py.h5t.FLOAT:
        return any(tid.equal(t) for t in (h5py.h5t.IEEE_F32LE, h5py.h5t.IEEE_F32BE,
                                           h5py.h5t.IEEE_F64LE, h5py.h5t.IEEE_F64BE))
    return False


def _float_name(tid: Any) -> str:
    return "float16" if tid.get_size() == 2 else f"{tid.get_precision()}-bit float in {tid.get_size()} bytes"


def _base_name(tid: Any) -> str:
    """A short name for an atomic HDF5 type (``int32``, ``float16``, ``bitfield``…)."""
    import h5py

    klass = tid.get_class()
    if klass == h5py.h5t.INTEGER:
        signed = tid.get_sign() != h5py.h5t.SGN_NONE
        return f"{'' if signed else 'u'}int{tid.get_precision()}"
    if klass == h5py.h5t.FLOAT:
        return "float32" if tid.get_size() == 4 and is_standard(tid) else (
            "float64" if is_standard(tid) else _float_name(tid))
    names = {h5py.h5t.STRING: "string", h5py.h5t.BITFIELD: "bitfield", h5py.h5t.OPAQUE: "opaque",
             h5py.h5t.REFERENCE: "reference", h5py.h5t.TIME: "time", h5py.h5t.COMPOUND: "compound",
             h5py.h5t.ENUM: "enum", h5py.h5t.VLEN: "vlen", h5py.h5t.ARRAY: "array"}
    return names.get(klass, f"HDF5 type class {klass}")


def _problem(tid: Any) -> tuple[str, str] | None:
    """Why netCDF-4 cannot hold a value of this type as it stands: (what, why), or None when it can.

    User-defined types netCDF-4 has (compound, vlen, enum, opaque) are "outside the NCZarr
    model"; one holding a type netCDF-4 lacks is named by that member. An HDF5 time type,
    anywhere, keeps netcdf-c from opening the file.
    """
    import h5py

    klass = tid.get_class()
    if klass == h5py.h5t.INTEGER or klass == h5py.h5t.STRING:
        return None
    if klass == h5py.h5t.FLOAT:
        return None if is_standard(tid) else (_float_name(tid), NO_TYPE)
    if klass == h5py.h5t.TIME:
        return ("time", NO_OPEN)
    if klass in (h5py.h5t.BITFIELD, h5py.h5t.REFERENCE):
        return (_base_name(tid), NO_TYPE)
    if klass == h5py.h5t.ARRAY:
        inner = _problem(tid.get_super())
        if inner is not None and inner[1] == NO_OPEN:
            return (f"array of {inner[0]}", NO_OPEN)
        return (f"array {_base_name(tid.get_super())}{list(tid.get_array_dims())}", NO_TYPE)
    members: list[Any] = []
    if klass == h5py.h5t.COMPOUND:
        members = [tid.get_member_type(i) for i in range(tid.get_nmembers())]
    elif klass in (h5py.h5t.VLEN, h5py.h5t.ENUM):
        members = [tid.get_super()]
    for member in members:
        inner = _member_problem(member)
        if inner is not None:
            return (f"{_base_name(tid)} with a {inner[0]} member", inner[1])
    return (_base_name(tid), OUTSIDE)


def _member_problem(tid: Any) -> tuple[str, str] | None:
    """A member of a user type: arrays are allowed there (netCDF-4 compounds hold them)."""
    import h5py

    if tid.get_class() == h5py.h5t.ARRAY:
        return _member_problem(tid.get_super())
    found = _problem(tid)
    return None if found is None or found[1] == OUTSIDE else found


def nests_compound_arrays(tid: Any) -> bool:
    """A compound holding an array of compounds, at any depth: numpy's structured dtypes cannot say it, and
    netCDF4-python raises TypeError ("nested structured dtype arrays not supported") opening a file where such
    a type is committed or held by any attribute or variable."""
    import h5py

    klass = tid.get_class()
    if klass == h5py.h5t.ARRAY:
        return nests_compound_arrays(tid.get_super())
    if klass in (h5py.h5t.VLEN, h5py.h5t.ENUM):
        return nests_compound_arrays(tid.get_super())
    if klass != h5py.h5t.COMPOUND:
        return False
    for i in range(tid.get_nmembers()):
        member = tid.get_member_type(i)
        if member.get_class() == h5py.h5t.ARRAY and _holds_compound(member.get_super()):
            return True
        if nests_compound_arrays(member):
            return True
    return False


def _holds_compound(tid: Any) -> bool:
    import h5py

    klass = tid.get_class()
    if klass == h5py.h5t.ARRAY:
        return _holds_compound(tid.get_super())
    return bool(klass == h5py.h5t.COMPOUND)


def _named_type_problem(tid: Any) -> str | None:
    """A committed (named) datatype netcdf-c cannot open a file with: every one but a string, an opaque
    and a compound, vlen or enum of types it has (the user types netCDF-4 itself commits)."""
    import h5py

    klass = tid.get_class()
    if klass in (h5py.h5t.STRING, h5py.h5t.OPAQUE):
        return None
    problem = _problem(tid)
    if problem is not None and problem[1] == OUTSIDE:
        return None
    return problem[0] if problem is not None else _base_name(tid)


def _effect(why: str, shown: bool) -> str:
    if why == NO_OPEN:
        return FATAL
    if why == OUTSIDE:
        return SHOWN if shown else HIDDEN
    return MISREAD if shown else HIDDEN


# ---- fill values ------------------------------------------------------------------------------

def unwritten_value(dataset: Any) -> Any | None:
    """What an unwritten element of ``dataset`` reads as through HDF5, or None when that is undefined.

    HDF5 returns the dataset's fill value (its own default, zero, unless the writer set one)
    for storage never written, unless the fill value is undefined or the fill time is NEVER
    (netcdf-c's NOFILL): then the bytes are whatever the buffer held. Only for standard
    integer and float datasets: their fill is one value of the dataset's dtype.
    """
    import h5py

    tid = dataset.id.get_type()
    if not is_standard(tid):
        return None
    plist = dataset.id.get_create_plist()
    if plist.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED or plist.get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
        return None
    value = np.zeros((), dtype=dataset.dtype)
    plist.get_fill_value(value)
    return value[()]


# ---- the walk -----------------------------------------------------------------------------------

def _join(path: str, name: str) -> str:
    return f"{path.rstrip('/')}/{name}"


def _attributes(obj: Any, path: str, names: list[str]) -> Iterator[Finding]:
    """Findings for ``obj``'s attributes ``names`` (types and dataspaces only: no value is read)."""
    import h5py

    attrs = obj.attrs
    for name in names:
        try:
            aid = attrs.get_id(name)
            tid, space = aid.get_type(), aid.get_space()
        except (KeyError, OSError, ValueError, TypeError):
            continue  # h5py cannot look at it: netcdf-c will say what it makes of it
        klass = tid.get_class()
        if nests_compound_arrays(tid):
            yield Finding(path, name, "compound holding an array of compounds", NO_PYTHON, FATAL)
            continue
        if name in HIDDEN_ATTRIBUTES:
            if name == "DIMENSION_LIST" and not (klass == h5py.h5t.VLEN
                                                 and tid.get_super().get_class() == h5py.h5t.REFERENCE):
                yield Finding(path, name, "DIMENSION_LIST that is not a list of references", CRASHES, FATAL)
            continue
        problem = _problem(tid)
        if problem is not None:
            what, why = problem
            # netcdf-c hides an attribute of a type it lacks, and an enum attribute h5py wrote (a bool)
            yield Finding(path, name, what, why, _effect(why, shown=why == OUTSIDE and klass != h5py.h5t.ENUM))
            continue
        kind = space.get_simple_extent_type()
        if kind == h5py.h5s.SIMPLE and space.get_simple_extent_ndims() > 1:
            yield Finding(path, name, f"{space.get_simple_extent_ndims()}-D attribute", NO_OPEN, FATAL)
        elif (kind == h5py.h5s.NULL or (kind == h5py.h5s.SIMPLE and space.get_simple_extent_npoints() == 0)) \
                and not (klass == h5py.h5t.STRING and not tid.is_variable_str()):
            # netcdf-c shows it (and writes such attributes itself), but the model holds none; a fixed
            # string of no characters is the empty text ""
            yield Finding(path, name, "zero-length attribute", OUTSIDE, MISREAD)


def _dataset(dset: Any, path: str, out: Scan) -> None:
    import h5py

    tid, space = dset.id.get_type(), dset.id.get_space()
    klass = tid.get_class()
    plist = dset.id.get_create_plist()
    # netcdf-c takes a fixed-length string longer than one byte (one byte is NC_CHAR) and a float it
    # does not know for NC_STRING: an HDF5 fill value of theirs is then freed as a string pointer
    # when the file closes
    fixed_string = klass == h5py.h5t.STRING and not tid.is_variable_str() and tid.get_size() > 1
    as_string = fixed_string or (klass == h5py.h5t.FLOAT and not is_standard(tid))
    user_fill = plist.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED
    problem = _problem(tid)
    if nests_compound_arrays(tid):
        out.findings.append(Finding(path, None, "compound holding an array of compounds", NO_PYTHON, FATAL))
    elif problem is not None:
        what, why = problem
        if as_string and user_fill:
            out.findings.append(Finding(path, None, f"{what} with an HDF5 fill value", CRASHES, FATAL))
        else:  # a float it does not know is shown as a string variable, whose reading crashes
            out.findings.append(Finding(path, None, what, why, _effect(why, shown=why == OUTSIDE or as_string)))
    elif space.get_simple_extent_type() == h5py.h5s.NULL:
        out.findings.append(Finding(path, None, "dataset with a null dataspace", NO_OPEN, FATAL))
    elif as_string and user_fill:
        out.findings.append(Finding(path, None, "fixed-length string with an HDF5 fill value", CRASHES, FATAL))
    out.filters[path] = [_filter(plist, i) for i in range(plist.get_nfilters())]
    if user_fill and is_standard(tid):
        value = np.zeros((), dtype=dset.dtype)
        plist.get_fill_value(value)
        out.fills[path] = value[()]
    names = list(dset.attrs)  # listed once: the findings and the inventory
    out.findings.extend(_attributes(dset, path, names))
    scale = _is_scale(dset)
    out.objects[(path, None)] = DIMENSION if scale and _dimension_only(dset) else DATASET
    _inventory(names, path, out, scale)


def _is_scale(dset: Any) -> bool:
    """An HDF5 dimension scale (its CLASS attribute says DIMENSION_SCALE)."""
    import h5py

    try:
        return bool(h5py.h5ds.is_scale(dset.id))
    except (OSError, ValueError, TypeError, RuntimeError):
        return False


def _dimension_only(dset: Any) -> bool:
    """A scale netCDF-4 shows as a dimension and not as a variable (its NAME says so; NAME is a short
    string: a larger one is not netCDF-4's and is not read)."""
    try:
        if "NAME" not in dset.attrs or dset.attrs.get_id("NAME").get_storage_size() > 1024:
            return False
        value = dset.attrs["NAME"]
    except (KeyError, OSError, ValueError, TypeError):
        return False
    raw = value.encode("utf-8", "replace") if isinstance(value, str) else bytes(np.asarray(value).tobytes())
    return raw.startswith(DIMENSION_ONLY)


def _bookkeeping(name: str, scale: bool) -> bool:
    """An attribute that only encodes what the model holds another way: netCDF-4's own, an HDF5
    dimension scale's CLASS, NAME and REFERENCE_LIST, any DIMENSION_LIST (a malformed one is a finding)."""
    if name in NETCDF4_BOOKKEEPING or name == "DIMENSION_LIST":
        return True
    return scale and name in ("CLASS", "NAME", "REFERENCE_LIST")


def _inventory(names: list[str], path: str, out: Scan, scale: bool = False) -> None:
    """Every attribute of ``names`` (an object's) that is more than bookkeeping, into ``out.objects``."""
    for name in names:
        if not _bookkeeping(name, scale):
            out.objects[(path, name)] = ATTRIBUTE


def _filter(plist: Any, index: int) -> tuple[int, str]:
    fid, _, _, name = plist.get_filter(index)
    text = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    return int(fid), text.strip() or FILTER_NAMES.get(int(fid), "unnamed")


def _walk(group: Any, path: str, out: Scan, seen: set[Any]) -> None:
    """Every link below ``group`` (soft links by their own name, as netcdf-c shows them)."""
    import h5py

    names = list(group.attrs)
    out.findings.extend(_attributes(group, path, names))
    _inventory(names, path, out)
    for name in group:
        where = _join(path, name)
        try:
            obj = group[name]
        except (KeyError, OSError, ValueError):
            try:  # the link is looked at only when it does not resolve
                link = group.get(name, getlink=True)
            except (KeyError, OSError, ValueError):
                continue
            kind = "external link" if isinstance(link, h5py.ExternalLink) else "soft link"
            target = (f"{link.filename}:{link.path}" if isinstance(link, h5py.ExternalLink)
                      else getattr(link, "path", "?"))
            out.findings.append(Finding(where, None, f"{kind} to {target} that does not resolve", NO_OPEN, FATAL))
            continue
        if isinstance(obj, h5py.Dataset):
            _dataset(obj, where, out)
        elif isinstance(obj, h5py.Datatype):
            out.objects[(where, None)] = f"named datatype {_base_name(obj.id)}"
            problem = _named_type_problem(obj.id)
            if nests_compound_arrays(obj.id):
                out.findings.append(Finding(where, None, "named datatype: compound holding an array of compounds",
                                            NO_PYTHON, FATAL))
            elif problem is not None:
                out.findings.append(Finding(where, None, f"named datatype {problem}", NO_OPEN, FATAL))
        elif isinstance(obj, h5py.Group):
            address = obj.id.__hash__()
            if address in seen:
                continue  # a group linked twice (or into its own ancestor): walked once
            seen.add(address)
            out.objects[(where, None)] = GROUP
            _walk(obj, where, out, seen)


def scan(path: str | BinaryIO) -> Scan:
    """Every object of the HDF5 file ``path`` (or a file object over one: an S3 object's ranged reads) that
    netCDF-4 or the NCZarr model cannot hold.

    An empty Scan for a file that is not HDF5 or that h5py cannot open: netCDF4-python then
    says what it makes of it.
    """
    out = Scan()
    if isinstance(path, str) and not is_hdf5(path):
        return out
    try:
        import h5py
    except ImportError:
        return out
    try:
        with h5py.File(path, "r") as f:
            _walk(f, "/", out, {f.id.__hash__()})
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return Scan()
    return out


def unavailable_filters(found: Scan, available: Callable[[int], bool]) -> list[Finding]:
    """A finding for each dataset using a filter ``available(id)`` says the reader's HDF5 lacks."""
    missing: list[Finding] = []
    verdicts: dict[int, bool] = {}
    for path, filters in found.filters.items():
        for fid, name in filters:
            if fid not in verdicts:
                verdicts[fid] = available(fid)
            if not verdicts[fid]:
                missing.append(Finding(path, None, f"filter {fid} ({name})", NO_FILTER, MISREAD))
                break
    return missing


# ---- what the model does not hold --------------------------------------------------------------------

def _held(root: Group) -> tuple[set[str], set[tuple[str, str]], set[tuple[str, str]]]:
    """The model's groups and variables (paths), dimensions (group path, name), attributes (owner, name)."""
    paths: set[str] = set()
    dims: set[tuple[str, str]] = set()
    attrs: set[tuple[str, str]] = set()
    for gkey, group in root.walk():
        paths.add(gkey)
        dims.update((gkey, name) for name in group.dimensions)
        attrs.update((gkey, name) for name in group.attributes)
        for vname, var in group.variables.items():
            vkey = _join(gkey, vname)
            paths.add(vkey)
            attrs.update((vkey, name) for name in var.attributes)
    return paths, dims, attrs


def _netcdf_name(path: str) -> str:
    """The path netCDF-4 shows a dataset at: ``/g/_nc4_non_coord_y`` is ``/g/y``."""
    parent, _, name = path.rpartition("/")
    return f"{parent}/{name.removeprefix(NON_COORD_PREFIX)}" if name.startswith(NON_COORD_PREFIX) else path


def _unheld_attribute(path: str, name: str, owner_kind: str) -> Finding:
    """Why an attribute h5py sees is not in the model, and whether that is only noted or refused."""
    from nczarr_conformance.model import is_internal_attribute

    if owner_kind == DIMENSION:
        return Finding(path, name, ATTRIBUTE, DIMENSION_ATTRIBUTE, NOTED)
    if name in HIDDEN_ATTRIBUTES:
        return Finding(path, name, ATTRIBUTE, RESERVED, NOTED)
    if is_internal_attribute(name):
        return Finding(path, name, ATTRIBUTE, NCZARR_NAME, NOTED)
    return Finding(path, name, ATTRIBUTE, NOT_SHOWN, HIDDEN)  # nothing foreseen: refused unless skipped


def _within(path: str, gone: set[str], *, inclusive: bool) -> bool:
    """``path`` lies inside an object of ``gone`` (or is one, when ``inclusive``)."""
    if inclusive and path in gone:
        return True
    return any(path.startswith(_join(g, "")) for g in gone if g != "/")


def _unheld(path: str, attr: str | None, kind: str, kinds: dict[str, str], paths: set[str],
            dims: set[tuple[str, str]], attrs: set[tuple[str, str]]) -> Finding | None:
    """The finding for one object h5py saw, or None when the model holds it."""
    if attr is not None:
        return None if (_netcdf_name(path), attr) in attrs else _unheld_attribute(path, attr, kinds.get(path, GROUP))
    if kind.startswith("named datatype"):
        return Finding(path, None, kind, NO_TYPES, NOTED)
    parent, _, name = path.rpartition("/")
    if kind == DIMENSION and (parent or "/", name) in dims:
        return None
    if _netcdf_name(path) in paths:
        return None
    return Finding(path, None, kind, NOT_SHOWN, HIDDEN)


def unseen(found: Scan, root: Group, known: Iterable[Finding]) -> list[Finding]:
    """A finding for each object h5py saw that the model ``root`` (what netCDF-4 showed, as the
    converter read it) does not hold and no finding in ``known`` names already.

    A named datatype, an attribute of a name netCDF-4 or NCZarr keeps to itself, an attribute of a
    dimension-only scale: NOTED (named in one warning, never refused: no variable's values go).
    A dataset, group or other attribute nothing here foresaw netCDF-4 hiding: HIDDEN, refused unless
    the caller skips unsupported objects. What lies inside an object left out is not named again.
    """
    paths, dims, attrs = _held(root)
    gone = {f.path for f in known if f.attribute is None}  # objects left out: what is in them goes with them
    named = {(f.path, f.attribute) for f in known}
    kinds = {path: kind for (path, attr), kind in found.objects.items() if attr is None}
    missing: list[Finding] = []
    for (path, attr), kind in found.objects.items():
        if (path, attr) in named or _within(path, gone, inclusive=attr is not None):
            continue
        finding = _unheld(path, attr, kind, kinds, paths, dims, attrs)
        if finding is not None:
            missing.append(finding)
            if attr is None:
                gone.add(path)
    return missing


# ---- a copy without the fatal objects ---------------------------------------------------------------

def _detach_scale(f: Any, path: str) -> None:
    """Detach the dataset at ``path`` from every dataset it is a dimension scale of: netcdf-c cannot open
    a file whose DIMENSION_LIST points at a removed object (the dimension then has no coordinate)."""
    import h5py

    try:
        scale = f[path]
        if not isinstance(scale, h5py.Dataset) or "REFERENCE_LIST" not in scale.attrs:
            return
        for ref, index in scale.attrs["REFERENCE_LIST"].tolist():
            f[ref].dims[int(index)].detach_scale(scale)
    except (KeyError, OSError, ValueError, TypeError, RuntimeError):
        return  # not a scale h5py understands: netcdf-c will say what it makes of the rest


def without(path: str, findings: list[Finding], folder: str | None = None) -> str:
    """A copy of ``path`` (in a new temporary folder under ``folder``) with the fatal findings' objects removed.

    The copy is byte for byte the file, then the objects are unlinked in place: every other
    object keeps its address, so dimension scales and references still resolve. The caller
    removes the folder (``os.path.dirname`` of the result).
    """
    import h5py

    where = tempfile.mkdtemp(prefix="nc2nczarr-", dir=folder)
    copy = os.path.join(where, os.path.basename(path) or "input.h5")
    try:
        shutil.copyfile(path, copy)
        removed = {f.path for f in findings if f.fatal and f.attribute is None}
        with h5py.File(copy, "r+") as f:
            for finding in findings:
                if not finding.fatal or (finding.attribute is not None and finding.path in removed):
                    continue  # an attribute goes with its object
                if finding.attribute is not None:
                    target = f if finding.path == "/" else f[finding.path]
                    del target.attrs[finding.attribute]
                else:
                    _detach_scale(f, finding.path)
                    parent, _, name = finding.path.rpartition("/")
                    del (f[parent] if parent else f)[name]
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    return copy
