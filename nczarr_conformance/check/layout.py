"""Rules about the store and the dataset's layout: JSON objects, superblock, group lists."""
from __future__ import annotations

from collections.abc import Iterator

from .. import keys
from ..nczarr.flavors import KNOWN_VERSIONS
from .chunks import looks_like_chunk
from .context import METADATA_NAMES, CheckContext
from .rules import Finding, Severity, get, rule


@rule("NCZ-LAYOUT-NODATASET", Severity.ERROR)
def no_dataset(ctx: CheckContext) -> Iterator[Finding]:
    """There is a dataset at the URL: a root /.zgroup (Zarr v2 spec, nczarr.md "Storage Format")."""
    if ctx.flavor == "unknown":
        yield get("NCZ-LAYOUT-NODATASET").finding(None, "no dataset at this URL: no /.zgroup (nor /.zarray, /.nczarr)")


@rule("NCZ-STORE-UNSAFE", Severity.ERROR)
def unsafe_members(ctx: CheckContext) -> Iterator[Finding]:
    """No zip member escapes the store (`..`, absolute or backslash names); such members are never read."""
    for name in getattr(ctx.store, "unsafe_members", []):
        yield get("NCZ-STORE-UNSAFE").finding(None, f"zip member {name!r} points outside the dataset; ignored")


@rule("NCZ-JSON-SYNTAX", Severity.ERROR)
def json_syntax(ctx: CheckContext) -> Iterator[Finding]:
    """Every metadata object is UTF-8 JSON (Zarr v2 spec "Metadata")."""
    for key, error in sorted(ctx.json_errors.items()):
        yield get("NCZ-JSON-SYNTAX").finding(key, f"not valid JSON: {error}")


@rule("NCZ-JSON-CONTROL", Severity.WARNING)
def json_control(ctx: CheckContext) -> Iterator[Finding]:
    """JSON strings hold no raw control characters (RFC 8259 §7; netcdf-c 4.10.1 writes them, strict parsers reject them)."""
    for key in sorted(ctx.control_chars):
        yield get("NCZ-JSON-CONTROL").finding(key, "raw control characters inside a JSON string; "
                                              "strict JSON parsers (zarr-python) reject this object")


@rule("NCZ-JSON-OBJECT", Severity.ERROR)
def json_object(ctx: CheckContext) -> Iterator[Finding]:
    """Every metadata object is a JSON object, not an array or scalar (Zarr v2 spec "Metadata")."""
    for key in sorted(ctx.not_objects):
        yield get("NCZ-JSON-OBJECT").finding(key, f"JSON {type(ctx.json(key)).__name__} found; an object is required")


@rule("NCZ-GROUP-FORMAT", Severity.ERROR)
def group_format(ctx: CheckContext) -> Iterator[Finding]:
    """Every .zgroup says "zarr_format": 2 (Zarr v2 spec "Groups")."""
    for gkey, rec in sorted(ctx.groups.items()):
        if rec.zgroup is not None and rec.zgroup.get("zarr_format") != 2:
            yield get("NCZ-GROUP-FORMAT").finding(keys.join(gkey, ".zgroup"),
                                                  f"zarr_format is {rec.zgroup.get('zarr_format')!r}; 2 expected")


@rule("NCZ-SUPERBLOCK-VERSION", Severity.ERROR)
def superblock_version(ctx: CheckContext) -> Iterator[Finding]:
    """The NCZarr superblock names a known version, 1.0.0 or 2.0.0 (nczarr.md "_nczarr_superblock")."""
    if ctx.nczarr and ctx.superblock is not None:
        version = ctx.superblock.get("version", ctx.superblock.get("nczarr_version"))
        if version not in KNOWN_VERSIONS:
            where = {"nczarr-4.10": "/.zattrs", "nczarr-v1": "/.nczarr"}.get(ctx.flavor, "/.zgroup")
            yield get("NCZ-SUPERBLOCK-VERSION").finding(where, f"superblock version {version!r}; known: "
                                                        f"{', '.join(KNOWN_VERSIONS)}")


@rule("NCZ-GROUP-META", Severity.ERROR)
def group_meta(ctx: CheckContext) -> Iterator[Finding]:
    """Every group of an NCZarr dataset carries its _nczarr_group (dimensions, arrays, groups) (nczarr.md)."""
    if not ctx.nczarr:
        return
    for gkey, rec in sorted(ctx.groups.items()):
        if rec.nczarr is None:
            yield get("NCZ-GROUP-META").finding(keys.join(gkey, ".zattrs"),
                                                "NCZarr group metadata (_nczarr_group) missing: netcdf-c cannot "
                                                "list this group's dimensions, arrays or sub-groups")
        else:
            for member in ("arrays", "groups"):
                alt = {"arrays": "vars"}.get(member, member)
                value = rec.nczarr.get(member, rec.nczarr.get(alt, []))
                if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                    yield get("NCZ-GROUP-META").finding(keys.join(gkey, ".zattrs"),
                                                        f"_nczarr_group {member} is {value!r}; a list of names expected")


@rule("NCZ-DIM-DEF", Severity.ERROR)
def dim_def(ctx: CheckContext) -> Iterator[Finding]:
    """Every dimension in _nczarr_group has an integer size >= 0, or {"size": n, "unlimited": 1} (nczarr.md)."""
    for gkey, rec in sorted(ctx.groups.items()):
        if rec.nczarr is None:
            continue
        raw = rec.nczarr.get("dimensions", rec.nczarr.get("dims", {}))
        if not isinstance(raw, dict):
            yield get("NCZ-DIM-DEF").finding(keys.join(gkey, ".zattrs"), f"dimensions is {raw!r}; an object expected")
            continue
        for name, spec in raw.items():
            if name not in rec.dims or rec.dims[name][0] < 0:
                yield get("NCZ-DIM-DEF").finding(keys.join(gkey, ".zattrs"),
                                                 f"dimension {name!r} has no valid size ({spec!r})")


@rule("NCZ-GROUP-GHOST", Severity.ERROR)
def group_ghost(ctx: CheckContext) -> Iterator[Finding]:
    """Every array and group a _nczarr_group lists exists (nczarr.md: the lists replace searching)."""
    for gkey, kind, name in ctx.ghosts:
        obj = ".zarray" if kind == "array" else ".zgroup"
        yield get("NCZ-GROUP-GHOST").finding(keys.join(gkey, ".zattrs"),
                                             f"{kind} {name!r} is listed but {keys.join(gkey, name, obj)} does not exist")


@rule("NCZ-GROUP-UNLISTED", Severity.ERROR)
def group_unlisted(ctx: CheckContext) -> Iterator[Finding]:
    """Every array and group in the store is listed by its parent's _nczarr_group (else netcdf-c never sees it)."""
    if not ctx.nczarr:
        return
    for key in ctx.objects:
        name = keys.basename(key)
        if name not in (".zarray", ".zgroup"):
            continue
        node = keys.parent(key)
        if node == "/":
            continue
        parent = ctx.groups.get(keys.parent(node))
        if parent is None or parent.nczarr is None:
            continue
        listed = parent.listed_arrays if name == ".zarray" else parent.listed_groups
        if keys.basename(node) not in listed:
            kind = "array" if name == ".zarray" else "group"
            yield get("NCZ-GROUP-UNLISTED").finding(key, f"{kind} {node} exists but is not listed in "
                                                    f"{keys.join(keys.parent(node), '.zattrs')}; NCZarr readers ignore it")


@rule("NCZ-STORE-STRAY", Severity.INFO)
def stray_objects(ctx: CheckContext) -> Iterator[Finding]:
    """Objects that are neither metadata nor a chunk of a known array are reported (e.g. editor backups)."""
    for key in ctx.objects:
        name, node = keys.basename(key), keys.parent(key)
        if name in METADATA_NAMES:
            continue
        owner = node
        while owner != "/" and owner not in ctx.arrays:
            owner = keys.parent(owner)
        if owner in ctx.arrays and looks_like_chunk(key[len(owner.rstrip("/")) + 1:]):
            continue
        yield get("NCZ-STORE-STRAY").finding(key, "neither metadata nor a chunk key of an array; readers ignore it")
