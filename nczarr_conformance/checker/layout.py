"""Rules about the store and the dataset's layout: JSON objects, superblock, group lists."""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker.chunks import looks_like_chunk
from nczarr_conformance.checker.context import METADATA_NAMES, CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.nczarr.flavors import KNOWN_VERSIONS


@rule("NCZ-LAYOUT-NODATASET", Severity.ERROR, source='Zarr v2 spec, nczarr.md "Storage Format"')
def no_dataset(ctx: CheckContext) -> Iterator[Finding]:
    """There is a dataset at the URL: a root /.zgroup."""
    if ctx.flavor == "unknown":
        why = ctx.store.why_no_dataset() or "none of /.zgroup, /.zarray, /.nczarr (Zarr v2) or /zarr.json (Zarr v3)"
        yield get("NCZ-LAYOUT-NODATASET").finding(None, f"no dataset at this URL: {why}")


@rule("NCZ-STORE-UNSAFE", Severity.ERROR, source="zip slip / path traversal (CWE-22)")
def unsafe_members(ctx: CheckContext) -> Iterator[Finding]:
    """No object name escapes the store (`..`, absolute or backslash names) in a zip, on S3 or on disk; never read."""
    for name in ctx.unsafe_keys:
        yield get("NCZ-STORE-UNSAFE").finding(None, f"object {name!r} has a name that escapes the dataset; never read")


@rule("NCZ-STORE-KEYCLASH", Severity.ERROR, source="Zarr v2 spec \"Storage\"; a file system cannot hold both")
def key_clash(ctx: CheckContext) -> Iterator[Finding]:
    """No key is both an object and a prefix of other objects (possible in a zip or on S3 only)."""
    objects = ctx.object_set
    clashes: set[str] = set()
    for key in ctx.objects:
        parts = keys.split(key)
        for depth in range(1, len(parts)):
            prefix = keys.join(*parts[:depth])
            if prefix in objects:
                clashes.add(prefix)
    for key in sorted(clashes):
        yield get("NCZ-STORE-KEYCLASH").finding(
            key, "is an object and also holds objects under it: no directory store can hold this, and readers "
                 "disagree on which one they see")


@rule("NCZ-STORE-LEFTOVER", Severity.WARNING,
      source="nczarr-conformance writers (README: what a failure leaves behind)")
def leftovers(ctx: CheckContext) -> Iterator[Finding]:
    """No temporary output of a writer that died (SIGKILL, power loss) lies beside or inside the store."""
    from nczarr_conformance.safety import S3_MARKER, find_leftovers
    from nczarr_conformance.urls import parse

    try:
        spec = parse(ctx.url)
    except Exception:  # the store was opened, so the URL parsed; a stranger URL form has no leftovers to find
        return
    if spec.kind in ("file", "zip"):
        for path in find_leftovers(spec.path):
            yield get("NCZ-STORE-LEFTOVER").finding(
                None, f"{path}: left by a writer that is no longer running; the next conversion to this target "
                      "removes it (or delete it)")
    elif spec.kind == "s3" and ctx.store.exists(S3_MARKER):
        yield get("NCZ-STORE-LEFTOVER").finding(
            S3_MARKER, "a writer's marker is here: a write in progress or an interrupted one (over a complete "
                       "dataset the next --append or fix removes it; over none, the next write removes what it left)")


@rule("NCZ-STORE-READ", Severity.ERROR, source="nczarr-check; every reader needs the bytes", final=True)
def store_read(ctx: CheckContext) -> Iterator[Finding]:
    """Every listed object can be read: a broken link, a corrupt zip member, a refused GET is a finding."""
    for key, error in sorted(ctx.read_errors.items()):
        yield get("NCZ-STORE-READ").finding(key, f"cannot be read: {error}")


@rule("NCZ-JSON-SYNTAX", Severity.ERROR, source='Zarr v2 spec "Metadata"', final=True)
def json_syntax(ctx: CheckContext) -> Iterator[Finding]:
    """Every metadata object is UTF-8 JSON."""
    for key, error in sorted(ctx.json_errors.items()):
        yield get("NCZ-JSON-SYNTAX").finding(key, f"not valid JSON: {error}")


@rule("NCZ-JSON-DEPTH", Severity.ERROR, source="RFC 8259 §9 (parsers may limit nesting); Python json", final=True)
def json_depth(ctx: CheckContext) -> Iterator[Finding]:
    """Metadata nests at most 256 levels: Python's parser refuses ~1000, readers recursing over values fail sooner."""
    for key, why in sorted(ctx.too_deep.items()):
        yield get("NCZ-JSON-DEPTH").finding(key, f"{why}; readers refuse it")


@rule("NCZ-JSON-NAN", Severity.ERROR, source='RFC 8259 §6; Zarr v2 spec "fill_value"; TensorStore refuses',
      final=True)
def json_nan(ctx: CheckContext) -> Iterator[Finding]:
    """Array and group metadata holds no bare NaN/Infinity literals: they are not JSON; fill_value spells them "NaN"."""
    for key, literals in sorted(ctx.constants.items()):
        name = keys.basename(key)
        if name == ".zmetadata":
            for entry in _nonfinite_entries(ctx.json(key)):
                if keys.basename(entry) != ".zattrs":
                    yield get("NCZ-JSON-NAN").finding(key, f"entry {entry} holds a bare NaN or Infinity literal; "
                                                      "strict JSON parsers refuse it")
        elif name != ".zattrs":
            yield get("NCZ-JSON-NAN").finding(key, f"bare {', '.join(sorted(literals))} literal: not JSON; "
                                              "TensorStore and other strict parsers refuse this object")


@rule("NCZ-ATTR-NAN", Severity.WARNING, source="RFC 8259 §6; zarr-python and xarray write them", final=True)
def attr_nan(ctx: CheckContext) -> Iterator[Finding]:
    """Attribute values use no bare NaN/Infinity literals: zarr-python and netcdf-c read them, strict parsers do not."""
    for key, literals in sorted(ctx.constants.items()):
        if keys.basename(key) == ".zattrs":
            yield get("NCZ-ATTR-NAN").finding(key, f"bare {', '.join(sorted(literals))} literal: not JSON; "
                                              "strict JSON parsers refuse this object")


def _nonfinite_entries(doc: Any) -> Iterator[str]:
    """Keys of the .zmetadata entries holding a NaN or infinite float."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    for entry, value in sorted(meta.items()) if isinstance(meta, dict) else ():
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, float) and not math.isfinite(item):
                yield keys.join(entry)
                break
            if isinstance(item, (list, dict)):
                stack.extend(item.values() if isinstance(item, dict) else item)


@rule("NCZ-JSON-CONTROL", Severity.WARNING, source="RFC 8259 §7; strict parsers (zarr-python) reject", final=True)
def json_control(ctx: CheckContext) -> Iterator[Finding]:
    """JSON strings hold no raw control characters (netcdf-c 4.10.1 writes them)."""
    for key in sorted(ctx.control_chars):
        yield get("NCZ-JSON-CONTROL").finding(key, "raw control characters inside a JSON string; "
                                              "strict JSON parsers (zarr-python) reject this object")


@rule("NCZ-JSON-OBJECT", Severity.ERROR, source='Zarr v2 spec "Metadata"', final=True)
def json_object(ctx: CheckContext) -> Iterator[Finding]:
    """Every metadata object is a JSON object, not an array or scalar."""
    for key in sorted(ctx.not_objects):
        yield get("NCZ-JSON-OBJECT").finding(key, f"JSON {type(ctx.json(key)).__name__} found; an object is required")


CONSOLIDATED_NAMES = (".zgroup", ".zarray", ".zattrs")


@rule("NCZ-CONSOLIDATED-MATCH", Severity.ERROR, source="zarr-python consolidate_metadata; our reader trusts it")
def consolidated_match(ctx: CheckContext) -> Iterator[Finding]:
    """A /.zmetadata holds every .zgroup, .zarray and .zattrs as stored: readers that use it see nothing else."""
    if "/.zmetadata" not in ctx.object_set:
        return
    doc = ctx.obj("/.zmetadata")
    if doc is None:
        return  # not JSON, or not an object: NCZ-JSON-SYNTAX / NCZ-JSON-OBJECT
    finding = get("NCZ-CONSOLIDATED-MATCH").finding
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        yield finding("/.zmetadata", "no 'metadata' object: readers that consolidate refuse the dataset")
        return
    entries = {keys.join(k): v for k, v in meta.items() if isinstance(k, str)}
    for entry, value in sorted(entries.items()):
        if keys.basename(entry) not in CONSOLIDATED_NAMES:
            continue
        if entry not in ctx.object_set:
            yield finding("/.zmetadata", f"entry {entry} has no object: readers using .zmetadata see a node "
                          "that does not exist")
            continue
        stored = ctx.json(entry)
        differing = None if stored is None else _differing_keys(value, stored, ctx.nczarr)
        if differing:
            yield finding("/.zmetadata", f"entry {entry} is stale, it differs from the object in "
                          f"{differing}: readers using .zmetadata (ours by default, netcdf-c "
                          "with mode=consolidated) see other metadata than readers that do not (netcdf-c by default)")
    for key in ctx.objects:
        if keys.basename(key) in CONSOLIDATED_NAMES and key not in entries:
            yield finding("/.zmetadata", f"{key} is missing: readers using .zmetadata do not see it")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _differing_keys(consolidated: Any, stored: Any, nczarr: bool) -> str:
    """The top-level keys whose values differ (``+k`` only in the object, ``-k`` only in .zmetadata); "" if none.

    Values are compared as parsed, so spelling alone never differs: a .zarray's ``fill_value``
    by what it means for the dtype (bare ``NaN`` and ``"NaN"`` are one fill, as every Zarr
    reader takes them), everything else as canonical JSON (``NaN`` equals ``NaN``; ``1`` and
    ``1.0`` differ, since untyped attribute readers infer an integer from one, a float from the other).
    """
    if not isinstance(consolidated, dict) or not isinstance(stored, dict):
        return "" if _canonical(consolidated) == _canonical(stored) else "its whole value"
    names = []
    for k in sorted(set(consolidated) | set(stored)):
        if k not in consolidated:
            names.append(f"+{k}")
        elif k not in stored:
            names.append(f"-{k}")
        elif _canonical(consolidated[k]) != _canonical(stored[k]) and not (
                k == "fill_value" and _same_fill(consolidated, stored, nczarr)):
            names.append(k)
    return ", ".join(names)


def _same_fill(consolidated: dict[str, Any], stored: dict[str, Any], nczarr: bool) -> bool:
    """Whether two .zarray fill_values of one dtype mean the same fill (NaN as NaN, sign of zero kept)."""
    from nczarr_conformance.errors import NczarrError
    from nczarr_conformance.nczarr.dtypes import array_storage
    from nczarr_conformance.nczarr.reader import decode_fill

    if _canonical(consolidated.get("dtype")) != _canonical(stored.get("dtype")):
        return False
    try:
        storage = array_storage(stored, u1_is_char=nczarr)
        a, b = (decode_fill(doc["fill_value"], storage, base64_strings=not nczarr) for doc in (consolidated, stored))
    except NczarrError:
        return False  # a fill that does not decode is compared by its spelling (NCZ-ARRAY-FILL reports it)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


@rule("NCZ-GROUP-FORMAT", Severity.ERROR, source='Zarr v2 spec "Groups"')
def group_format(ctx: CheckContext) -> Iterator[Finding]:
    """Every .zgroup says "zarr_format": 2."""
    for gkey, rec in sorted(ctx.groups.items()):
        if rec.zgroup is not None and rec.zgroup.get("zarr_format") != 2:
            yield get("NCZ-GROUP-FORMAT").finding(keys.join(gkey, ".zgroup"),
                                                  f"zarr_format is {rec.zgroup.get('zarr_format')!r}; 2 expected")


@rule("NCZ-SUPERBLOCK-VERSION", Severity.ERROR, source='nczarr.md "_nczarr_superblock"')
def superblock_version(ctx: CheckContext) -> Iterator[Finding]:
    """The NCZarr superblock names a known version, 1.0.0 or 2.0.0."""
    if ctx.nczarr and ctx.superblock is not None:
        version = ctx.superblock.get("version", ctx.superblock.get("nczarr_version"))
        if version not in KNOWN_VERSIONS:
            where = {"nczarr-4.10": "/.zattrs", "nczarr-v1": "/.nczarr"}.get(ctx.flavor, "/.zgroup")
            yield get("NCZ-SUPERBLOCK-VERSION").finding(where, f"superblock version {version!r}; known: "
                                                        f"{', '.join(KNOWN_VERSIONS)}")


@rule("NCZ-GROUP-META", Severity.ERROR, source="nczarr.md")
def group_meta(ctx: CheckContext) -> Iterator[Finding]:
    """Every group of an NCZarr dataset carries its _nczarr_group (dimensions, arrays, groups)."""
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
                    yield get("NCZ-GROUP-META").finding(
                        keys.join(gkey, ".zattrs"), f"_nczarr_group {member} is {value!r}; a list of names expected")


@rule("NCZ-DIM-DEF", Severity.ERROR, source="nczarr.md")
def dim_def(ctx: CheckContext) -> Iterator[Finding]:
    """Every dimension in _nczarr_group has an integer size >= 0, or {"size": n, "unlimited": 1}."""
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


@rule("NCZ-GROUP-GHOST", Severity.ERROR, source="nczarr.md")
def group_ghost(ctx: CheckContext) -> Iterator[Finding]:
    """Every array and group a _nczarr_group lists exists: the lists replace searching."""
    for gkey, kind, name in ctx.ghosts:
        obj = ".zarray" if kind == "array" else ".zgroup"
        yield get("NCZ-GROUP-GHOST").finding(
            keys.join(gkey, ".zattrs"), f"{kind} {name!r} is listed but {keys.join(gkey, name, obj)} does not exist")


@rule("NCZ-GROUP-UNLISTED", Severity.ERROR, source="nczarr.md; netcdf-c reads only listed nodes")
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
            yield get("NCZ-GROUP-UNLISTED").finding(
                key, f"{kind} {node} exists but is not listed in "
                     f"{keys.join(keys.parent(node), '.zattrs')}; NCZarr readers ignore it")


@rule("NCZ-STORE-STRAY", Severity.INFO, source='Zarr v2 spec "Storage"')
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
