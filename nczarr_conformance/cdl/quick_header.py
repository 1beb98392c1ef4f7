"""``nczarr-dump -h STORE`` of a plain local NCZarr directory, read and printed without numpy.

Why: ``ncdump -h`` answers in about 10 ms, and loading numpy alone takes 40-100 ms; a loop
of ``nczarr-dump -h`` over an archive paid it once per store. An NCZarr header is JSON, so
this module reads it with the standard library and prints it through the same line
functions as the full writer (cdl/header_text.py).

It is a recognizer, not a second reader. It answers only for a store whose every piece it
vouches for: a local directory (no URL, fragment or zip), the layouts netcdf-c 4.8-4.10
write (nczarr-2-upper, nczarr-2, nczarr-4.10), consolidated or not, variables of the
atomic types, and attributes whose types ``_nczarr_attr`` records. Everything else, and every condition
under which the full reader (nczarr/reader.py) would refuse the store or read it
differently, answers None: the command then runs the full reader, with its checks and its
one-line errors. tests/test_quick_header.py holds the two outputs equal on every store
this module answers for, holds that it answers for netcdf-c's own stores, and holds that
it declines each hostile or unusual store the full reader treats otherwise.

Bounds, as the full reader's: each object is opened through no symlink below the root
and only as a regular file (O_NOFOLLOW, fstat), and one larger than :data:`MAX_OBJECT`
is left to the full reader with its configurable limits.
"""
from __future__ import annotations

import os
import stat

from nczarr_conformance import keys
from nczarr_conformance.cdl.header_text import (
    attribute_line,
    dimension_line,
    dimension_name,
    escape_name,
    group_attributes_heading,
    variable_line,
)

TYPE_CHECKING = False  # typing's constant without importing typing: 4 ms of ``nczarr-dump -h``'s start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: the flags ncdump and nczarr-dump take for "header only"
HEADER_FLAGS = frozenset({"-h", "--header", "-H"})
#: objects larger than this go to the full reader (its limit, limits.max_metadata_bytes, is 64 MiB unless configured)
MAX_OBJECT = 16 << 20
#: JSON nested deeper than this goes to the full reader (its cap, limits.MAX_JSON_DEPTH, is 256)
MAX_DEPTH = 32
#: whatever is larger is left to the full reader's int64 checks (limits.int64_overflow)
_BIG = 1 << 62
#: what the full reader never shows (model.STORAGE_INTERNAL, STORAGE_INTERNAL_PREFIXES; a test holds them equal)
INTERNAL = frozenset({"_NCProperties", "_ARRAY_DIMENSIONS", "_nczarr_maxstrlen", "_nczarr_default_maxstrlen"})
INTERNAL_PREFIXES = ("_nczarr", "_NCZARR")
#: where each layout keeps a node's NCZarr pieces (nczarr/flavors.py ``_SEARCH`` less v1's objects; a test holds
#: them equal)
PIECES = {
    "group": ((".zattrs", "_nczarr_group"), (".zgroup", "_nczarr_group"), (".zgroup", "_NCZARR_GROUP"),
              (".zattrs", "_NCZARR_GROUP")),
    "array": ((".zattrs", "_nczarr_array"), (".zarray", "_nczarr_array"), (".zarray", "_NCZARR_ARRAY"),
              (".zattrs", "_NCZARR_ARRAY")),
    "attr": ((".zattrs", "_nczarr_attr"), (".zattrs", "_NCZARR_ATTR"), (".zattrs", "_nczarr_attrs"),
             (".zattrs", "_NCZARR_ATTRS")),
}
#: Zarr v2 numeric type codes (nctypes.BY_CODE; a test holds them equal), and each integer type's range
NUMERIC = {"i1": "byte", "u1": "ubyte", "i2": "short", "u2": "ushort", "i4": "int", "u4": "uint", "i8": "int64",
           "u8": "uint64", "f4": "float", "f8": "double"}
INT_RANGE = {"byte": (-(2**7), 2**7 - 1), "ubyte": (0, 2**8 - 1), "short": (-(2**15), 2**15 - 1),
             "ushort": (0, 2**16 - 1), "int": (-(2**31), 2**31 - 1), "uint": (0, 2**32 - 1),
             "int64": (-(2**63), 2**63 - 1), "uint64": (0, 2**64 - 1)}
_FLOAT_FILLS = ("NaN", "Infinity", "-Infinity")
_SPECIAL_FLOATS = {"NaN": float("nan"), "nan": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf"),
                   "inf": float("inf"), "-inf": float("-inf")}
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DATASET_SUFFIXES = (".zip", ".file", ".zarr", ".nc", ".nc4")  # access/dataset.py dataset_name's; a test holds it


_JSON_SPACE = " \t\n\r"


class _ScanContext:
    """What ``json.JSONDecoder(strict=False)`` hands its C scanner: the full reader's parse (flavors.load_json)."""

    strict = False
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _c_scanner() -> Callable[[str, int], tuple[Any, int]] | None:
    """CPython's C scanner, the one ``json.loads`` runs, without importing json (and re: 5-10 ms of a ``-h``
    start); None on a Python without it, where :func:`loads` uses json itself."""
    try:
        from _json import make_scanner
    except ImportError:
        return None
    return make_scanner(_ScanContext())  # type: ignore[arg-type]  # (it reads the decoder's attributes only)


_scan = _c_scanner()


def loads(text: str) -> Any:
    """``json.loads(text, strict=False)``: the same value, or an exception where it raises one."""
    if _scan is None:
        import json

        return json.loads(text, strict=False)
    try:
        value, end = _scan(text, len(text) - len(text.lstrip(_JSON_SPACE)))
    except StopIteration:
        raise Decline("not JSON") from None
    if text[end:].lstrip(_JSON_SPACE):
        raise Decline("not JSON: extra data")
    return value


class Decline(Exception):
    """Something this module does not vouch for: the full reader takes the store."""


def header_request(argv: list[str]) -> str | None:
    """The store path when ``argv`` is exactly a header flag and a plain local path (either order), else None."""
    if len(argv) != 2 or sum(a in HEADER_FLAGS for a in argv) != 1:
        return None
    path = argv[1] if argv[0] in HEADER_FLAGS else argv[0]
    if not path or path.startswith(("-", "~")) or any(c in path for c in "#?\\") or "://" in path:
        return None
    if any(part in (".", "..") for part in path.split("/")) or path.lower().rstrip("/").endswith(".zip"):
        return None
    return path


def dataset_name(path: str) -> str:
    """ncdump's name of the dataset: the last path segment without its extension (access/dataset.py's rule
    for a plain path, which :func:`header_request` has made free of ``.``, ``..`` and ``~``)."""
    name = [part for part in path.split("/") if part][-1:] or [""]
    text = name[0]
    for ext in _DATASET_SUFFIXES:
        text = text.removesuffix(ext)
    return text or "dataset"


def quick_header(path: str) -> str | None:
    """The CDL header of the store at ``path`` exactly as the full writer prints it, or None (see the module)."""
    if any(name.startswith("NCZARR_") for name in os.environ):
        return None  # a configured limit or mode: the full reader applies it
    try:
        tree = _Tree(path)
    except (Decline, OSError):
        return None
    try:
        groups = _Reader(tree).read()
        lines: list[str] = [f"netcdf {escape_name(dataset_name(path))} {{\n"]
        _print_group(lines.append, "/", groups["/"], 0, lambda gpath, name: name in groups[gpath].dimensions)
        lines.append("}\n")
        return "".join(lines)
    except Exception:  # any surprise means "not vouched for": the full reader decides and words it
        return None
    finally:
        tree.close()


# ---- reading ---------------------------------------------------------------------------------------------------
class _Tree:
    """JSON objects of a directory store, each opened relative to the root through no symlink."""

    def __init__(self, path: str) -> None:
        self.root_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.cache: dict[str, dict[str, Any] | None] = {}
        self.consolidated: dict[str, Any] | None = None

    def close(self) -> None:
        os.close(self.root_fd)

    def consolidate(self) -> None:
        """flavors.MetadataSource: a ``/.zmetadata`` answers for every object (one read serves all)."""
        doc = self._load("/.zmetadata")
        if doc is not None:
            meta = doc.get("metadata")
            if not isinstance(meta, dict):
                raise Decline("/.zmetadata: no 'metadata' object")
            self.consolidated = {keys.join(k): v for k, v in meta.items()}

    def get(self, key: str) -> dict[str, Any] | None:
        """The JSON object at ``key``; None when nothing is there. Anything odd declines."""
        key = keys.join(key)
        if key not in self.cache:
            value = self._load(key) if self.consolidated is None else self.consolidated.get(key)
            if value is not None and not isinstance(value, dict):
                raise Decline(key)
            self.cache[key] = value
        return self.cache[key]

    def _load(self, key: str) -> dict[str, Any] | None:
        raw = self._read(keys.split(key))
        if raw is None:
            return None
        doc = loads(raw.decode("utf-8"))  # the full reader's first parse (flavors.load_json)
        if not isinstance(doc, dict) or _depth(doc) > MAX_DEPTH:
            raise Decline(key)  # (a .zmetadata the full reader reads past, with a warning, declines too)
        return doc

    def _read(self, parts: list[str]) -> bytes | None:
        fds: list[int] = []
        try:
            at = self.root_fd
            for name in parts[:-1]:
                try:
                    at = os.open(name, _DIR, dir_fd=at)
                except FileNotFoundError:
                    return None
                fds.append(at)
            try:
                fd = os.open(parts[-1], _READ, dir_fd=at)
            except FileNotFoundError:
                return None
            fds.append(fd)
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OBJECT:
                raise Decline("/".join(parts))  # a directory, FIFO, device or a large object: the full reader's
            with os.fdopen(os.dup(fd), "rb") as f:
                raw = f.read(MAX_OBJECT + 1)
            if len(raw) > MAX_OBJECT:
                raise Decline("/".join(parts))
            return raw
        finally:
            for fd in fds:
                os.close(fd)


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and objects (iteratively: a deep document cannot exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in item)
    return deepest


class _Variable:
    """A variable's header: type, dimension paths, shape and (name, type, value) attributes."""

    __slots__ = ("attributes", "dimensions", "nctype", "shape")

    def __init__(self, nctype: str, dimensions: list[str], shape: tuple[int, ...],
                 attributes: list[tuple[str, str, Any]]) -> None:  # (a dataclass costs ms to build at import)
        self.nctype, self.dimensions, self.shape, self.attributes = nctype, dimensions, shape, attributes


class _Group:
    """A group's header: dimensions (size, unlimited), variables, attributes and subgroups, in order."""

    __slots__ = ("attributes", "dimensions", "groups", "variables")

    def __init__(self, attributes: list[tuple[str, str, Any]]) -> None:
        self.attributes = attributes
        self.dimensions: dict[str, tuple[int, bool]] = {}
        self.variables: dict[str, _Variable] = {}
        self.groups: dict[str, _Group] = {}


class _Reader:
    """nczarr/reader.py's ``DatasetReader`` for the header, restricted to what it vouches for: each step
    mirrors one of the full reader's, and where the full reader would raise or branch elsewhere, it declines."""

    def __init__(self, tree: _Tree) -> None:
        self.tree = tree

    def read(self) -> dict[str, _Group]:
        """Every group by its path (``/`` the root), checked as the full reader checks them."""
        tree = self.tree
        tree.consolidate()
        zgroup = tree.get("/.zgroup")
        zattrs = tree.get("/.zattrs") if zgroup is not None else None
        if zgroup is None:
            raise Decline("no /.zgroup")
        if not (isinstance((zattrs or {}).get("_nczarr_superblock"), dict)
                or isinstance(zgroup.get("_nczarr_superblock"), dict)
                or isinstance(zgroup.get("_NCZARR_SUPERBLOCK"), dict)):
            raise Decline("not a layout of netcdf-c 4.8-4.10")  # v1, pure Zarr: the full reader's
        groups = dict(_walk("/", self._group("/")))
        self._check_dimension_references(groups)
        return groups

    def _piece(self, node: str, piece: str) -> dict[str, Any] | None:
        """nczarr/flavors.py ``find_piece``."""
        for obj, member in PIECES[piece]:
            doc = self.tree.get(keys.join(node, obj))
            value = None if doc is None else doc.get(member)
            if value is not None:
                if not isinstance(value, dict):
                    raise Decline(f"{node}: {member}")
                return value
        return None

    def _group(self, gkey: str) -> _Group:
        if self.tree.get(keys.join(gkey, ".zgroup")) is None:
            raise Decline(f"{gkey}: no .zgroup")
        group = _Group(attributes=self._attributes(gkey, self.tree.get(keys.join(gkey, ".zattrs")) or {}))
        info = self._piece(gkey, "group")
        if info is None:
            raise Decline(f"{gkey}: no _nczarr_group")
        group.dimensions = _dimensions(info)
        arrays, subgroups = info.get("arrays", info.get("vars", [])), info.get("groups", [])
        for names in (arrays, subgroups):
            if not isinstance(names, list) or not all(isinstance(n, str) and n and "/" not in n for n in names):
                raise Decline(f"{gkey}: member names")
        for name, key in keys.members(gkey, arrays):
            group.variables[name] = self._variable(key)
        for name, key in keys.members(gkey, subgroups):
            group.groups[name] = self._group(key)
        return group

    def _attributes(self, node: str, zattrs: dict[str, Any]) -> list[tuple[str, str, Any]]:
        piece = self._piece(node, "attr")
        types = (piece.get("types", {}) or {}) if piece is not None else {}
        if not isinstance(types, dict) or "" in zattrs:
            raise Decline(f"{node}: attribute types or names")
        out = []
        for name, value in zattrs.items():
            if name in INTERNAL or name.startswith(INTERNAL_PREFIXES) or types.get(name) == "|J0":
                continue
            out.append((name, *_attribute_value(value, _attribute_type(types.get(name)))))
        return out

    def _variable(self, akey: str) -> _Variable:
        zarray = self.tree.get(keys.join(akey, ".zarray"))
        if zarray is None or zarray.get("zarr_format") != 2:
            raise Decline(f"{akey}: .zarray")
        zshape, chunks = _extents(zarray.get("shape"), 0), _extents(zarray.get("chunks"), 1)
        info = self._piece(akey, "array") or {}
        nctype, itemsize = _variable_type(zarray.get("dtype"), info.get("nczarr_type"))
        if len(zshape) != len(chunks) or len(zshape) > 64 or _beyond_int64(zshape, chunks, itemsize):
            raise Decline(f"{akey}: geometry")
        if zarray.get("order", "C") not in ("C", "F") or zarray.get("dimension_separator", ".") not in (".", "/"):
            raise Decline(f"{akey}: order or separator")
        filters = zarray.get("filters")
        if filters is not None and not isinstance(filters, list):
            raise Decline(f"{akey}: filters")
        for config in [*(filters or []), zarray.get("compressor")]:  # codecs.check_chain
            if config is not None and not (isinstance(config, dict) and isinstance(config.get("id"), str)):
                raise Decline(f"{akey}: codec configuration")
        attributes = self._attributes(akey, self.tree.get(keys.join(akey, ".zattrs")) or {})
        refs = info.get("dimension_references", info.get("dimrefs", info.get("dimensions")))
        scalar = not zshape or bool(info.get("scalar")) or info.get("storage") == "scalar"
        if refs is None and not scalar:
            raise Decline(f"{akey}: no dimension references")
        refs = [] if refs is None else refs
        if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            raise Decline(f"{akey}: dimension references")
        if (scalar and zshape not in ((), (1,))) or (not scalar and len(refs) != len(zshape)):
            raise Decline(f"{akey}: dimension references against the shape")
        if any(name == "_FillValue" and t != nctype for name, t, _ in attributes):
            raise Decline(f"{akey}: _FillValue of another type")
        _check_fill(zarray.get("fill_value"), nctype)
        dimensions = [r if r.startswith("/") else "/" + r for r in ([] if scalar else refs)]
        return _Variable(nctype, dimensions, () if scalar else zshape, attributes)

    @staticmethod
    def _check_dimension_references(groups: dict[str, _Group]) -> None:
        """reader.py ``_check_dimrefs``: every reference is defined and no array is longer than its dimension."""
        for group in groups.values():
            for var in group.variables.values():
                for ref, size in zip(var.dimensions, var.shape, strict=True):
                    owner = groups.get(keys.parent(ref))
                    dim = None if owner is None else owner.dimensions.get(keys.basename(ref))
                    if dim is None or size > dim[0]:
                        raise Decline(f"dimension {ref}")


def _dimensions(info: dict[str, Any]) -> dict[str, tuple[int, bool]]:
    """reader.py ``_parse_dims``: each dimension's (size, unlimited)."""
    raw = info.get("dimensions", info.get("dims", {}))
    if not isinstance(raw, dict):
        raise Decline("dimensions")
    dims = {}
    for name, spec in raw.items():
        if isinstance(spec, str) and spec.isdigit():
            spec = int(spec)
        if type(spec) is int and spec >= 0:
            dims[name] = (spec, False)
        elif isinstance(spec, dict) and type(spec.get("size")) is int and spec["size"] >= 0:
            dims[name] = (spec["size"], bool(spec.get("unlimited", 0)))
        else:
            raise Decline(f"dimension {name!r}")
    return dims


def _extents(value: Any, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int and v >= minimum for v in value):
        raise Decline("shape or chunks")
    return tuple(value)


def _beyond_int64(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int) -> bool:
    """Whether any quantity limits.int64_overflow checks comes near int64 (the full reader then words it)."""
    elements, chunk = 1, itemsize
    for n, c in zip(shape, chunks, strict=True):
        elements, chunk = elements * n, chunk * c
        if n >= _BIG or c >= _BIG or -(-n // c) * c >= _BIG:
            return True
    return elements * itemsize >= _BIG or chunk >= _BIG


def _dtype_parts(text: Any) -> tuple[str, str, int]:
    """(byte order, kind, size) of a Zarr v2 dtype string such as ``<f4``, as dtypes' ``\\d+`` reads it (a digit of
    any script; ``int`` refuses the rest, a decline); declines the forms it reads otherwise (no order mark, ``=``,
    a trailing newline). By hand: ``re`` costs 5 ms to import."""
    if not isinstance(text, str) or len(text) < 3 or text[0] not in "<>|" or not text[1].isascii() \
            or not text[1].isalpha() or not text[2:].isdigit():
        raise Decline(f"dtype {text!r}")
    return text[0], text[1], int(text[2:])


def _variable_type(text: Any, nczarr_type: Any) -> tuple[str, int]:
    """A Zarr v2 dtype's netCDF type and item size as reader.py reads an NCZarr array (dtypes.parse_dtype with
    ``u1_is_char``, then our ``|S1`` char by its ``nczarr_type``); an object or other dtype declines."""
    order, kind, size = _dtype_parts(text)
    if kind in "iuf" and f"{kind}{size}" in NUMERIC:
        return NUMERIC[f"{kind}{size}"], size
    if kind == "S" and size >= 1:
        char = size == 1 and (order == ">" or nczarr_type == "char")
        return ("char", 1) if char else ("string", size)
    if kind == "U" and size >= 1:
        return ("char", 1) if size == 1 else ("string", 4 * size)
    raise Decline(f"dtype {text!r}")


def _attribute_type(text: Any) -> str:
    """dtypes.parse_attr_type for a recorded type; an untyped attribute declines (its type is inferred)."""
    if text in (">S1", "<U1", "|U1", ">U1"):
        return "char"
    order, kind, size = _dtype_parts(text)
    if kind in "iuf" and f"{kind}{size}" in NUMERIC:
        return NUMERIC[f"{kind}{size}"]
    if kind == "S" and size >= 1:
        return "char" if size == 1 and order == ">" else "string"
    if kind == "U" and size >= 1:
        return "string"
    raise Decline(f"attribute type {text!r}")


def _attribute_value(value: Any, nctype: str) -> tuple[str, Any]:
    """attrs.decode for a typed attribute: (type, value), text for char and a list of Python values for the rest;
    a char value stored as JSON (Appendix D case 3) and any value holding lists or objects read back as text."""
    items = value if isinstance(value, list) else [value]
    if nctype == "char" or not items or any(isinstance(v, (dict, list)) for v in items):
        text = value if isinstance(value, str) else _unparse(value)
        text.encode("utf-8", "surrogateescape")  # text ncdump cannot print as bytes declines (UnicodeError)
        return "char", text
    if nctype == "string":
        texts = [v if isinstance(v, str) else _unparse(v) for v in items]
        for v in texts:
            v.encode("utf-8", "surrogateescape")
        return "string", texts
    return nctype, [_number(v, nctype) for v in items]


def _unparse(value: Any) -> str:
    """attrs.unparse (netcdf-c's JSON layout), imported only for a value stored as JSON (it loads json and re)."""
    from nczarr_conformance.nczarr.lenient_json import unparse

    return unparse(value)


def _number(v: Any, nctype: str) -> Any:
    """attrs._number then numpy's cast to the attribute's type, for the values it takes without a doubt."""
    if nctype in ("float", "double"):
        if type(v) is str:  # Zarr's NaN, Infinity, -Infinity (and numbers spelled as text), as attrs._number
            x = _SPECIAL_FLOATS[v] if v in _SPECIAL_FLOATS else float(v)  # ValueError declines
        elif type(v) not in (int, float) or (type(v) is int and abs(v) > 2**53):
            raise Decline("float attribute value")
        else:
            x = float(v)
        return _float32(x) if nctype == "float" else x
    if type(v) is bool or (type(v) is float and v.is_integer()):
        v = int(v)
    if type(v) is not int or not INT_RANGE[nctype][0] <= v <= INT_RANGE[nctype][1]:
        raise Decline("integer attribute value")
    return v


def _float32(x: float) -> float:
    """``x`` rounded to float32 as numpy's cast rounds it (IEEE nearest-even); past float32's range an
    OverflowError, which declines (numpy would make it infinite, with a warning)."""
    import struct  # (only a float attribute needs it)

    value: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return value


def _check_fill(value: Any, nctype: str) -> None:
    """reader.py ``decode_fill`` accepts ``value`` for the variable's type (text for char and string)."""
    if nctype in ("char", "string"):
        if value is not None and not isinstance(value, str):
            raise Decline(f"fill_value {value!r}")
        return
    if value is None or (nctype in ("float", "double") and (value in _FLOAT_FILLS if isinstance(value, str)
                                                            else type(value) in (int, float))):
        return
    integral = type(value) is int or (type(value) is float and value.is_integer())
    if nctype not in ("float", "double") and integral and INT_RANGE[nctype][0] <= int(value) <= INT_RANGE[nctype][1]:
        return
    raise Decline(f"fill_value {value!r}")


# ---- printing --------------------------------------------------------------------------------------------------
def _walk(path: str, group: _Group) -> list[tuple[str, _Group]]:
    found = [(path, group)]
    for name, sub in group.groups.items():
        found += _walk(path.rstrip("/") + "/" + name, sub)
    return found


def _print_group(w: Callable[[str], object], gpath: str, group: _Group, indent: int,
                 defines: Callable[[str, str], bool]) -> None:
    """cdl/writer.py ``CdlWriter._group`` with ``-h`` and no other option, line for line."""
    ind = " " * indent
    if group.dimensions:
        w(f"{ind}dimensions:\n")
        for name, (size, unlimited) in group.dimensions.items():
            w(dimension_line(ind, name, size, unlimited))
    if group.variables:
        w(f"{ind}variables:\n")
    for vname, var in group.variables.items():
        w(variable_line(ind, var.nctype, vname, [dimension_name(gpath, ref, defines) for ref in var.dimensions]))
        for aname, nctype, value in var.attributes:
            w(attribute_line(ind, vname, aname, nctype, value, 7, 15) + "\n")
    if group.attributes:
        w(group_attributes_heading(ind, gpath == "/"))
    for aname, nctype, value in group.attributes:
        w(attribute_line(ind, "", aname, nctype, value, 7, 15) + "\n")
    for gname, sub in group.groups.items():
        w(f"\n{ind}group: {escape_name(gname)} {{\n")
        _print_group(w, gpath.rstrip("/") + "/" + gname, sub, indent + 2, defines)
        w(f"{ind}  }} // group {escape_name(gname)}\n")
