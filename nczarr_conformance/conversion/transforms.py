"""nccopy's transforms for nc2nczarr (-d, -s, -c, -M, -u, -V, -G) plus ``--compressor``.

Why a module of its own: the converter reads the source header into the canonical
model; these transforms rewrite that model (which groups and variables, which
dimensions stay unlimited, each variable's chunks and codecs) *before* the writer
plans anything, so the writer, the direct chunk copy and the progress total all see
one decision.

The rules are nccopy 4.9.0's (its man page, checked against the Debian binary):

* ``-d N`` sets deflate level N on every non-scalar variable (0 removes every
  filter); ``-s`` adds shuffle, and only together with a compressor. The input's
  own codecs are replaced, as nccopy replaces them.
* ``-c`` takes nccopy's chunkspec forms: ``dim/n,dim/n`` (``dim/`` is the full
  length, a dimension outside the root is named by its full path ``/g/y/n``),
  the lone ``/`` (unchunk everything), ``var:n1,...,nn`` (one length per
  dimension), ``var:``, ``var:contiguous``, ``var:compact`` (no chunking).
  ``-c`` may be repeated; for one variable the first ``var:`` spec wins.
* Whenever -c, -d, -u, -M or --compressor is given, every variable's chunking is
  decided by nccopy's copy_chunking rules: var spec, then ``-c dim/n``, then the
  input's chunks, then defaults; compression and unlimited dimensions force
  chunking; a fixed-size variable whose chunk holds fewer than ``-M`` bytes
  (default 8192) is left "contiguous". NCZarr has no contiguous layout: such a
  variable, like one left to the library's default, gets the writer's automatic
  chunks (the whole array below 4 MiB, which is what netcdf-c picks for those).
* ``-u`` makes every unlimited dimension fixed.
* ``-V a,b`` keeps only those variables (no coordinate variables are added, as
  nccopy adds none) but every group and dimension; ``-G g1,g2`` keeps only the
  named groups (by name; a group needs its parent) and the root. An unlimited
  dimension no kept variable uses ends with length 0, as in nccopy's output.

``--compressor`` chooses the codec -d would set: ``zlib[:level]``, ``zstd[:level]``,
``bz2[:level]``, ``blosc[:cname[:clevel[:shuffle]]]`` or ``none`` — the numcodecs
codecs netcdf-c 4.10 reads back. szip has no numcodecs codec and is refused; an input's szip
(or blosc snappy) variable is decoded through HDF5 and written with a codec numcodecs has
(:func:`writable_codecs`, one warning each).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import Dataset, Group, Variable
from nczarr_conformance.nczarr.writer import ArrayPlan, RawSource, auto_chunks

NCCOPY_MIN_CHUNK_BYTES = 8192  # nccopy's CHUNK_THRESHOLD
NCCOPY_UNLIMITED_DEFAULT_BYTES = 4 * 1024 * 1024  # nccopy's DFALTUNLIMSIZE
DEFAULT_LEVEL = 4  # netCDF4-python's complevel default
BLOSC_CNAMES = ("blosclz", "lz4", "lz4hc", "zlib", "zstd")  # what netcdf-c's blosc filter builds in
LEVELS = {"zlib": range(0, 10), "bz2": range(1, 10), "zstd": range(1, 23), "blosc": range(0, 10)}
#: netCDF type sizes as netcdf-c's nc_inq_type reports them (a string is a char*)
TYPE_SIZES = {"byte": 1, "ubyte": 1, "char": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "float": 4,
              "int64": 8, "uint64": 8, "double": 8, "string": 8}


class TransformError(ValueError):
    """A transform option whose text does not parse; the CLI turns it into a usage error."""


@dataclass(frozen=True)
class DimChunk:
    length: int | None  # None: the dimension's own length ("dim/")
    spec: str  # the -c text it came from, for messages


@dataclass(frozen=True)
class VarChunk:
    lengths: tuple[int, ...] | None  # None: contiguous ("var:", "var:contiguous", "var:compact")
    spec: str


@dataclass
class Transforms:
    """What the command line asked for; an empty Transforms changes nothing."""

    recompress: bool = False  # -d or --compressor given: every variable's codecs are replaced
    compressor: dict[str, Any] | None = None  # the codec they are replaced with (None: uncompressed)
    shuffle: bool = False
    dim_chunks: dict[str, DimChunk] = field(default_factory=dict)  # dimension FQN → length
    var_chunks: dict[str, VarChunk] = field(default_factory=dict)  # variable FQN → lengths
    unchunk_all: bool = False  # "-c /"
    min_chunk_bytes: int | None = None  # -M
    fix_unlimited: bool = False
    variables: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None

    @property
    def relayout(self) -> bool:
        """True when nccopy's chunking rules decide every variable's chunks."""
        return bool(self.recompress or self.dim_chunks or self.var_chunks or self.unchunk_all
                    or self.fix_unlimited or self.min_chunk_bytes is not None)

    @property
    def empty(self) -> bool:
        return not (self.relayout or self.variables is not None or self.groups is not None)


# ---- parsing --------------------------------------------------------------------------------

def parse(*, deflate: str | None = None, shuffle: bool = False, chunkspecs: list[str] | None = None,
          min_chunk_bytes: str | None = None, fix_unlimited: bool = False, variables: str | None = None,
          groups: str | None = None, compressor: str | None = None) -> Transforms:
    """Transforms from the option texts, or TransformError naming the bad one."""
    t = Transforms(shuffle=shuffle, fix_unlimited=fix_unlimited)
    if deflate is not None and compressor is not None:
        raise TransformError("-d and --compressor both choose the compressor; give one")
    if deflate is not None:
        level = _int(deflate, f"-d {deflate!r}: a deflate level is an integer 0 to 9")
        if level not in LEVELS["zlib"]:
            raise TransformError(f"-d {deflate!r}: a deflate level is an integer 0 to 9")
        t.recompress = True
        t.compressor = {"id": "zlib", "level": level} if level else None
    if compressor is not None:
        t.recompress = True
        t.compressor = parse_compressor(compressor)
    for spec in chunkspecs or []:
        _parse_chunkspec(spec, t)
    if min_chunk_bytes is not None:
        t.min_chunk_bytes = _int(min_chunk_bytes, f"-M {min_chunk_bytes!r}: a byte count is a non-negative integer")
        if t.min_chunk_bytes < 0:
            raise TransformError(f"-M {min_chunk_bytes!r}: a byte count is a non-negative integer")
    if variables is not None:
        t.variables = _names(variables, "-V")
    if groups is not None:
        t.groups = _names(groups, "-G")
    return t


def parse_compressor(text: str) -> dict[str, Any] | None:
    """``zlib:4``, ``zstd:3``, ``bz2:9``, ``blosc:lz4:5[:shuffle]``, ``none`` → a numcodecs configuration."""
    parts = text.split(":")
    cid = parts[0].lower()
    bad = f"--compressor {text!r}"
    if cid == "none" and len(parts) == 1:
        return None
    if cid == "szip":
        raise TransformError(f"{bad}: szip has no numcodecs codec, so nothing could write its chunks; "
                             "choose zlib, zstd, blosc, bz2 or none")
    if cid in ("zlib", "zstd", "bz2"):
        if len(parts) > 2:
            raise TransformError(f"{bad}: expected {cid}[:level]")
        level = _level(parts[1] if len(parts) == 2 else None, cid, bad)
        return {"id": cid, "level": level}
    if cid == "blosc":
        if len(parts) > 4:
            raise TransformError(f"{bad}: expected blosc[:cname[:clevel[:shuffle]]]")
        cname = parts[1] if len(parts) > 1 and parts[1] else "lz4"
        if cname not in BLOSC_CNAMES:
            raise TransformError(f"{bad}: blosc compressor {cname!r} is not one of {', '.join(BLOSC_CNAMES)}")
        level = _level(parts[2] if len(parts) > 2 else None, "blosc", bad)
        shuffle = _int(parts[3], f"{bad}: blosc shuffle is 0 (none), 1 (byte) or 2 (bit)") if len(parts) > 3 else 1
        if shuffle not in (0, 1, 2):
            raise TransformError(f"{bad}: blosc shuffle is 0 (none), 1 (byte) or 2 (bit)")
        return {"id": "blosc", "cname": cname, "clevel": level, "shuffle": shuffle, "blocksize": 0}
    raise TransformError(f"{bad}: netcdf-c reads zlib, zstd, blosc and bz2 chunks (or none); {cid!r} is not one")


def _level(text: str | None, cid: str, bad: str) -> int:
    allowed = LEVELS[cid]
    if text is None or text == "":
        return max(DEFAULT_LEVEL, allowed.start)
    level = _int(text, f"{bad}: level must be an integer {allowed.start} to {allowed.stop - 1}")
    if level not in allowed:
        raise TransformError(f"{bad}: level must be an integer {allowed.start} to {allowed.stop - 1}")
    return level


def _int(text: str, message: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        raise TransformError(message)
    return int(text)


def _split(text: str, sep: str) -> list[str]:
    """Split on ``sep`` except where a backslash escapes it (nccopy's escaping); escapes are kept."""
    parts, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _last_unescaped(text: str, sep: str) -> int:
    pos, i = -1, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == sep:
            pos = i
        i += 1
    return pos


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _absolute(name: str) -> str:
    """nccopy looks a name without a leading '/' up from the root group."""
    return name if name.startswith("/") else "/" + name


def _parse_chunkspec(spec: str, t: Transforms) -> None:
    bad = f"-c {spec!r}"
    if not spec:
        raise TransformError(f"{bad}: empty chunkspec")
    colon = _last_unescaped(spec, ":")
    if colon >= 0:  # var:n1,...,nn | var: | var:contiguous | var:compact
        name, rest = spec[:colon], spec[colon + 1:]
        if not name:
            raise TransformError(f"{bad}: no variable name before ':'")
        fqn = _absolute(_unescape(name))
        if rest in ("", "contiguous", "compact"):
            lengths: tuple[int, ...] | None = None
        else:
            lengths = tuple(_chunk_length(n, bad) for n in rest.split(","))
        t.var_chunks.setdefault(fqn, VarChunk(lengths, spec))  # nccopy: later specs for a variable are ignored
        return
    if spec in ("/", "//"):  # nccopy's chunkspec.c: "//" is treated as equivalent to "/"
        t.unchunk_all = True
        return
    for item in _split(spec, ","):
        slash = _last_unescaped(item, "/")
        if slash <= 0 or (item.startswith("/") and slash == 0):
            raise TransformError(f"{bad}: {item!r} is not dim/length")
        name, length = item[:slash], item[slash + 1:]
        t.dim_chunks[_absolute(_unescape(name))] = DimChunk(_chunk_length(length, bad) if length else None, spec)


def _chunk_length(text: str, bad: str) -> int:
    n = _int(text, f"{bad}: chunk length {text!r} is not a positive integer") if text else 0
    if n < 1:
        raise TransformError(f"{bad}: chunk length {text!r} is not a positive integer")
    return n


def _names(text: str, flag: str) -> tuple[str, ...]:
    names = tuple(_unescape(n) for n in _split(text, ","))
    if not all(names):
        raise TransformError(f"{flag} {text!r}: an empty name in the list")
    return names


# ---- applying -------------------------------------------------------------------------------

def apply(t: Transforms, dataset: Dataset, where: str) -> frozenset[str]:
    """Rewrite ``dataset`` in place as ``t`` asks; return the keys of variables whose chunks or codecs changed.

    ``where`` (the source path) starts every error message. Names are checked against
    the source as nccopy checks them, before any selection.
    """
    before = {key: (_copy(var.chunks), _copy(var.filters)) for key, var in _variables(dataset.root)}
    _check_names(t, dataset, where)
    if t.groups is not None:
        _select_groups(dataset.root, set(t.groups), where)
    if t.variables is not None:
        _select_variables(dataset.root, t.variables)
    if t.groups is not None or t.variables is not None:
        _empty_unused_unlimited(dataset)
    unlimited = {keys.join(gkey, name): dim.unlimited and not t.fix_unlimited
                 for gkey, group in dataset.root.walk() for name, dim in group.dimensions.items()}
    if t.fix_unlimited:
        for _, group in dataset.root.walk():
            for dim in group.dimensions.values():
                dim.unlimited = False
    if t.relayout:
        for key, var in _variables(dataset.root):
            if var.is_scalar:
                continue  # nccopy neither chunks nor filters a scalar
            var.chunks = _decide_chunks(t, key, var, [unlimited[d] for d in var.dimensions], where)
            if t.recompress:
                var.filters = _codecs(t, var)
    return frozenset(key for key, var in _variables(dataset.root) if (var.chunks, var.filters) != before[key])


def writable_codecs(dataset: Dataset, where: str) -> tuple[frozenset[str], list[str]]:
    """Give each variable whose input codec numcodecs cannot write one netcdf-c reads; say so.

    netCDF-4's HDF5 decodes szip (libaec) and blosc's snappy, so the values are read as usual;
    only the output codec changes: zlib at :data:`DEFAULT_LEVEL` for szip (numcodecs has no szip
    codec), blosc lz4 at the same level and shuffle for snappy (numcodecs' blosc is built without
    it). Returns the keys changed (their chunks must be re-encoded) and one warning each.
    """
    changed: set[str] = set()
    notes: list[str] = []
    for key, var in _variables(dataset.root):
        codecs = var.filters or []  # the variable's own list, edited in place
        for i, cfg in enumerate(codecs):
            if cfg.get("id") == "szip":
                codecs[i] = {"id": "zlib", "level": DEFAULT_LEVEL}
                notes.append(f"{where}: {key}: szip chunks are decoded through HDF5 and written with zlib level "
                             f"{DEFAULT_LEVEL} (numcodecs has no szip codec; --compressor chooses another)")
            elif cfg.get("id") == "blosc" and cfg.get("cname") not in _blosc_compressors():
                codecs[i] = dict(cfg, cname="lz4")
                notes.append(f"{where}: {key}: blosc {cfg.get('cname')} chunks are decoded through HDF5 and written "
                             f"with blosc lz4 (numcodecs' blosc has no {cfg.get('cname')}; --compressor chooses "
                             "another)")
            else:
                continue
            changed.add(key)
    return frozenset(changed), notes


def _blosc_compressors() -> set[str]:
    """numcodecs' blosc compressors, asked only of a blosc variable: importing numcodecs costs a small
    conversion ~45 ms (an entry-point scan, multiprocessing), and the usual zlib chain never needs it."""
    from numcodecs import blosc

    return set(blosc.list_compressors())


def without_direct_copy(raw: RawSource | None, keys_: frozenset[str]) -> RawSource | None:
    """``raw`` refusing the variables in ``keys_``: their stored chunks no longer are what was asked for.

    sources/hdf5_chunks.py compares chunk shapes and filter ids, not levels: a chunk deflated at level
    5 would otherwise be copied into a variable the user asked to store at level 9.
    """
    if raw is None or not keys_:
        return raw
    inner: RawSource = raw

    def source(plan: ArrayPlan) -> Callable[[tuple[int, ...]], bytes | None] | None:
        return None if plan.key in keys_ else inner(plan)

    return source


def _copy(value: Any) -> Any:
    return None if value is None else [dict(v) if isinstance(v, dict) else v for v in value]


def _variables(root: Group) -> Iterator[tuple[str, Variable]]:
    for gkey, group in root.walk():
        for name, var in group.variables.items():
            yield keys.join(gkey, name), var


def _check_names(t: Transforms, dataset: Dataset, where: str) -> None:
    variables = dict(_variables(dataset.root))
    dims = {keys.join(gkey, name): dim for gkey, group in dataset.root.walk() for name, dim in group.dimensions.items()}
    for fqn, vc in t.var_chunks.items():
        var = variables.get(fqn)
        if var is None:
            raise UsageError(f"{where}: -c {vc.spec}: no variable {fqn}")
        if vc.lengths is not None and len(vc.lengths) != len(var.shape):
            raise UsageError(f"{where}: -c {vc.spec}: {fqn} has {len(var.shape)} dimensions, "
                             f"not {len(vc.lengths)}")
        for length, ref, size in zip(vc.lengths or (), var.dimensions, var.shape, strict=False):
            if not dims[ref].unlimited and 0 < size < length:
                raise UsageError(f"{where}: -c {vc.spec}: chunk length {length} exceeds dimension {ref} ({size})")
    for fqn, dc in t.dim_chunks.items():
        dim = dims.get(fqn)
        if dim is None:
            raise UsageError(f"{where}: -c {dc.spec}: no dimension {fqn}")
        if dc.length is not None and not dim.unlimited and 0 < dim.size < dc.length:
            raise UsageError(f"{where}: -c {dc.spec}: chunk length {dc.length} exceeds dimension {fqn} ({dim.size})")
    for name in t.variables or ():
        if not any(_matches(key, name) for key in variables):
            raise UsageError(f"{where}: -V {name}: no such variable")
    group_names = {keys.basename(gkey) for gkey, _ in dataset.root.walk() if gkey != "/"}
    for name in t.groups or ():
        if name not in group_names:
            raise UsageError(f"{where}: -G {name}: no such group")


def _matches(fqn: str, name: str) -> bool:
    """nccopy: an absolute name is one variable; a relative one ('var', 'grp/var') every variable it ends."""
    if name.startswith("/"):
        return fqn == name
    return fqn == "/" + name or fqn.endswith("/" + name)


def _select_groups(root: Group, names: set[str], where: str) -> None:
    def visit(group: Group, path: str, kept: bool) -> None:
        for name, child in list(group.groups.items()):
            cpath = keys.join(path, name)
            wanted = name in names
            if wanted and not kept:
                raise UsageError(f"{where}: -G: group {cpath} is selected but its parent {path} is not")
            visit(child, cpath, kept and wanted)
            if not (kept and wanted):
                del group.groups[name]

    visit(root, "/", True)


def _select_variables(root: Group, names: tuple[str, ...]) -> None:
    for gkey, group in root.walk():
        for name in list(group.variables):
            if not any(_matches(keys.join(gkey, name), n) for n in names):
                del group.variables[name]


def _empty_unused_unlimited(dataset: Dataset) -> None:
    """netCDF-4 derives an unlimited length from the records written; nccopy writes none for unused ones."""
    used = {ref for _, var in _variables(dataset.root) for ref in var.dimensions}
    for gkey, group in dataset.root.walk():
        for name, dim in group.dimensions.items():
            if dim.unlimited and keys.join(gkey, name) not in used:
                dim.size = 0


def _decide_chunks(t: Transforms, key: str, var: Variable, unlimited: list[bool], where: str) -> list[int] | None:
    """nccopy's copy_chunking for one variable; None stands for its "contiguous" and its library default."""
    ndims = len(var.shape)
    typesize = TYPE_SIZES[var.type]
    spec = t.var_chunks.get(key)
    chunks = [0] * ndims
    if spec is not None:
        chunked = spec.lengths is not None
        if spec.lengths is not None:
            chunks = list(spec.lengths)
    else:
        chunked = var.chunks is not None
    if t.compressor is not None or (var.filters and not t.recompress):
        chunked = True  # filters need chunks
    if t.unchunk_all:
        return None
    perdim = [0] * ndims
    dimlens = list(var.shape)
    is_unlimited = False
    for i, ref in enumerate(var.dimensions):
        if unlimited[i]:
            is_unlimited = True
            chunked = True
        dc = t.dim_chunks.get(ref)
        if dc is not None:
            perdim[i] = dc.length if dc.length is not None else max(1, var.shape[i])
            chunked = True
        if is_unlimited:
            dimlens[i] = min(dimlens[i], NCCOPY_UNLIMITED_DEFAULT_BYTES // typesize)
    defaults = auto_chunks(var.shape, typesize)  # our stand-in for netcdf-c's default chunk sizes
    ichunks = var.chunks or [0] * ndims
    for i in range(ndims):
        chunks[i] = chunks[i] or perdim[i] or int(ichunks[i]) or defaults[i] or dimlens[i] or 1
        if not unlimited[i] and var.shape[i] > 0:
            chunks[i] = min(chunks[i], var.shape[i])  # an input chunk longer than a now-fixed dimension
    threshold = NCCOPY_MIN_CHUNK_BYTES if t.min_chunk_bytes is None else t.min_chunk_bytes
    if math.prod(chunks) * typesize < threshold and not is_unlimited:
        chunked = False
    return chunks if chunked else None


def _codecs(t: Transforms, var: Variable) -> list[dict[str, Any]]:
    """filters first, compressor last, as the model keeps them; shuffle only with a compressor (nccopy -s)."""
    if t.compressor is None:
        return []
    out: list[dict[str, Any]] = []
    if t.shuffle and var.type != "string":  # a string chunk's element is its padded width, not a type size
        out.append({"id": "shuffle", "elementsize": TYPE_SIZES[var.type]})
    out.append(dict(t.compressor))
    return out
