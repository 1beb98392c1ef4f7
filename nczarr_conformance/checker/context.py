"""What the rules look at: every object key, and the metadata parsed without ever raising.

The context reads each metadata object once (counting reads), records JSON that
does not parse instead of failing, and reconstructs the group/array tree both
from the NCZarr group lists and from the object keys, so rules can compare them.
Nothing here allocates by a declared shape, and nothing writes to the store.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.errors import FormatError, NczarrError, StoreUnavailableError
from nczarr_conformance.limits import MAX_JSON_DEPTH
from nczarr_conformance.nczarr import lenient_json
from nczarr_conformance.nczarr.flavors import find_piece
from nczarr_conformance.stores.base import Store

METADATA_NAMES = frozenset({".zgroup", ".zarray", ".zattrs", ".zmetadata", ".nczarr", ".nczgroup", ".nczarray",
                            ".nczvar", ".nczattrs", ".nczattr"})


@dataclass
class GroupRecord:
    key: str
    zgroup: dict[str, Any] | None
    zattrs: dict[str, Any]
    nczarr: dict[str, Any] | None  # the _nczarr_group piece
    listed_arrays: list[str] = field(default_factory=list)
    listed_groups: list[str] = field(default_factory=list)
    dims: dict[str, tuple[int, bool]] = field(default_factory=dict)


@dataclass
class ArrayRecord:
    key: str
    zarray: dict[str, Any] | None
    zattrs: dict[str, Any]
    nczarr: dict[str, Any] | None  # the _nczarr_array piece
    attr_types: dict[str, Any] | None


def is_safe_key(key: str) -> bool:
    """Whether a listed key stays inside the store (one that does not is never read: NCZ-STORE-UNSAFE's case)."""
    try:
        keys.validate(key)
    except FormatError:
        return False
    return True


def nesting(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class LenientMeta:
    """MetadataSource-compatible lookups that record bad JSON instead of raising."""

    def __init__(self, ctx: CheckContext) -> None:
        self.ctx = ctx
        self.consolidated = None

    def get(self, key: str) -> Any | None:
        value = self.ctx.json(key)
        return value if isinstance(value, dict) else None


class CheckContext:
    def __init__(self, store: Store, url: str, *, deep: bool = False) -> None:
        self.store = store
        self.url = url
        self.deep = deep
        self.objects_read = 0
        self._prefetched: dict[str, bytes] = {}
        self._json: dict[str, Any] = {}
        self.json_errors: dict[str, str] = {}
        self.control_chars: set[str] = set()
        self.not_objects: set[str] = set()
        self.too_deep: dict[str, str] = {}  # key -> why (parser gave up, or nesting over MAX_JSON_DEPTH)
        self.constants: dict[str, set[str]] = {}  # key -> bare NaN/Infinity/-Infinity literals found
        self.read_errors: dict[str, str] = {}  # key -> why the store could not give its bytes
        self.meta = LenientMeta(self)
        # List the store only when a dataset root is there: a wrong URL (say, a home
        # directory) must not walk a whole file system. A failure here means the store
        # cannot be opened at all (no bucket, no access): it raises, exit 2.
        roots = [k for k in ("/.zgroup", "/.zarray", "/.nczarr") if self._exists(k)]
        listed = store.list_prefix("/") if roots else []
        # Names that could escape the store are never read, whichever backend listed them
        # (the zip store sets them aside itself; S3 lists `..` keys as they are).
        self.unsafe_keys: list[str] = list(getattr(store, "unsafe_members", []))
        self.objects: list[str] = []
        for key in listed:
            (self.objects if is_safe_key(key) else self.unsafe_keys).append(key)
        self.object_set = set(self.objects)
        self.flavor = "unknown"
        self.superblock: dict[str, Any] | None = None
        self.groups: dict[str, GroupRecord] = {}
        self.arrays: dict[str, ArrayRecord] = {}
        self.ghosts: list[tuple[str, str, str]] = []  # (group key, kind, name)
        self._build()

    # ---- reading --------------------------------------------------------------------
    def _exists(self, key: str) -> bool:
        """Whether a root object is there. One that is there but cannot be read (a symlink, a
        FIFO, over the metadata cap) is a finding (NCZ-STORE-READ) when the store itself can be
        listed; when it cannot, the store cannot be opened at all and the error stands (exit 2)."""
        self.objects_read += 1
        try:
            raw = self.store.get(key)
        except StoreUnavailableError:
            raise  # the store did not answer: nothing is known about the object
        except NczarrError as exc:
            self.store.list_prefix("/")  # raises if the store itself is unreachable
            self.read_errors[key] = str(exc)
            return True
        if raw is not None:
            self._prefetched[key] = raw
        return raw is not None

    def raw(self, key: str) -> bytes | None:
        """An object's bytes; None when missing or unreadable (the reason is kept for NCZ-STORE-READ)."""
        self.objects_read += 1
        try:
            return self.store.get(key)
        except StoreUnavailableError:
            raise  # the store did not answer (5xx, cut-short bodies after retries): could not check, exit 2
        except Exception as exc:  # any backend failure on one object is a finding about that object
            self.read_errors[key] = str(exc) if isinstance(exc, NczarrError) else f"{type(exc).__name__}: {exc}"
            return None

    def json(self, key: str) -> Any | None:
        """Parsed JSON of a metadata object; None if missing or broken (recorded)."""
        key = keys.join(key)
        if key in self._json:
            return self._json[key]
        value: Any = None
        raw = self._prefetched.pop(key, None)
        if raw is None and key in self.object_set:
            raw = self.raw(key)
        if raw is not None:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.json_errors[key] = f"not UTF-8 ({exc.reason} at byte {exc.start})"
                text = None
            if text is not None:
                value = self._parse(key, text)
            if value is not None and not isinstance(value, dict):
                self.not_objects.add(key)
        self._json[key] = value
        return value

    def _parse(self, key: str, text: str) -> Any | None:
        """json.loads that records what it tolerated (control characters, NaN literals) or gave up on."""
        constants: set[str] = set()

        def constant(name: str) -> float:
            constants.add(name)
            return float(name)

        value: Any = None
        try:
            try:
                value = json.loads(text, parse_constant=constant)
            except ValueError:
                value = json.loads(text, strict=False, parse_constant=constant)
                self.control_chars.add(key)
        except ValueError as exc:
            self.json_errors[key] = str(exc)
            try:  # netcdf-c reads its own non-JSON numbers (``0.``): one finding, and the rules go on
                value, count = lenient_json.loads(text)
                self.json_errors[key] += f"; {count} non-JSON number(s) netcdf-c writes and reads (e.g. 0.)"
            except ValueError:
                pass
        except RecursionError:
            self.too_deep[key] = "nested deeper than a JSON parser follows (Python's gives up near 1000 levels)"
        if constants:
            self.constants[key] = constants
        depth = nesting(value)
        if depth > MAX_JSON_DEPTH:
            self.too_deep[key] = f"nested {depth} levels deep; more than {MAX_JSON_DEPTH}"
            value = None  # rules and readers would recurse into it: treat it as unreadable
        return value

    def obj(self, key: str) -> dict[str, Any] | None:
        value = self.json(key)
        return value if isinstance(value, dict) else None

    # ---- structure ----------------------------------------------------------------
    @property
    def nczarr(self) -> bool:
        return self.flavor.startswith("nczarr")

    def _detect(self) -> None:
        zgroup, zattrs = self.obj("/.zgroup"), self.obj("/.zattrs") or {}
        if isinstance(zattrs.get("_nczarr_superblock"), dict):
            self.flavor, self.superblock = "nczarr-4.10", zattrs["_nczarr_superblock"]
        elif zgroup is not None and isinstance(zgroup.get("_nczarr_superblock"), dict):
            self.flavor, self.superblock = "nczarr-2", zgroup["_nczarr_superblock"]
        elif zgroup is not None and isinstance(zgroup.get("_NCZARR_SUPERBLOCK"), dict):
            self.flavor, self.superblock = "nczarr-2-upper", zgroup["_NCZARR_SUPERBLOCK"]
        elif "/.nczarr" in self.object_set:
            self.flavor, self.superblock = "nczarr-v1", self.obj("/.nczarr") or {}
        elif zgroup is not None or "/.zgroup" in self.object_set:
            self.flavor = "zarr"

    def _build(self) -> None:
        self._detect()
        if self.flavor == "unknown":
            return
        if self.nczarr:
            self._walk_nczarr("/")
        for key in self.objects:
            name = keys.basename(key)
            node = keys.parent(key)
            if name == ".zgroup" and node not in self.groups:
                self._add_group(node)
            elif name == ".zarray" and node not in self.arrays:
                self._add_array(node)

    def _piece(self, node: str, what: str) -> dict[str, Any] | None:
        try:
            return find_piece(self.meta, node, what, with_v1=self.flavor == "nczarr-v1")  # type: ignore[arg-type]
        except FormatError:
            return None

    def _add_group(self, gkey: str) -> GroupRecord:
        piece = self._piece(gkey, "group") if self.nczarr else None
        rec = GroupRecord(gkey, self.obj(keys.join(gkey, ".zgroup")), self.obj(keys.join(gkey, ".zattrs")) or {}, piece)
        if piece is not None:
            arrays = piece.get("arrays", piece.get("vars", []))
            groups = piece.get("groups", [])
            rec.listed_arrays = [a for a in arrays if isinstance(a, str)] if isinstance(arrays, list) else []
            rec.listed_groups = [g for g in groups if isinstance(g, str)] if isinstance(groups, list) else []
            raw_dims = piece.get("dimensions", piece.get("dims", {}))
            if isinstance(raw_dims, dict):
                for name, spec in raw_dims.items():
                    if isinstance(spec, str) and spec.isdigit():
                        spec = int(spec)
                    if isinstance(spec, int) and not isinstance(spec, bool):
                        rec.dims[name] = (spec, False)
                    elif isinstance(spec, dict) and isinstance(spec.get("size"), int):
                        rec.dims[name] = (spec["size"], bool(spec.get("unlimited")))
        self.groups[gkey] = rec
        return rec

    def _add_array(self, akey: str) -> ArrayRecord:
        piece = self._piece(akey, "array") if self.nczarr else None
        attr_piece = self._piece(akey, "attr") if self.nczarr else None
        types = attr_piece.get("types") if isinstance(attr_piece, dict) else None
        rec = ArrayRecord(akey, self.obj(keys.join(akey, ".zarray")), self.obj(keys.join(akey, ".zattrs")) or {},
                          piece, types if isinstance(types, dict) else None)
        self.arrays[akey] = rec
        return rec

    def _walk_nczarr(self, gkey: str) -> None:
        rec = self._add_group(gkey)
        for name in rec.listed_arrays:
            akey = keys.join(gkey, name)
            if keys.join(akey, ".zarray") not in self.object_set:
                self.ghosts.append((gkey, "array", name))
                continue
            self._add_array(akey)
        for name in rec.listed_groups:
            child = keys.join(gkey, name)
            if keys.join(child, ".zgroup") not in self.object_set:
                self.ghosts.append((gkey, "group", name))
                continue
            if child not in self.groups:
                self._walk_nczarr(child)

    def dimension(self, fqn: str) -> tuple[int, bool] | None:
        owner, name = keys.parent(fqn), keys.basename(fqn)
        rec = self.groups.get(owner)
        return None if rec is None else rec.dims.get(name)

    def attr_types_of(self, node: str) -> dict[str, Any] | None:
        if node in self.arrays:
            return self.arrays[node].attr_types
        piece = self._piece(node, "attr") if self.nczarr else None
        types = piece.get("types") if isinstance(piece, dict) else None
        return types if isinstance(types, dict) else None


@dataclass
class ParsedArray:
    """The members of a .zarray that parsed; a member that did not is None."""

    shape: tuple[int, ...] | None
    chunks: tuple[int, ...] | None
    storage: Any | None  # StorageType
    order: str | None
    separator: str | None


def parse_array(ctx: CheckContext, rec: ArrayRecord) -> ParsedArray:
    from nczarr_conformance.nczarr.dtypes import array_storage

    z = rec.zarray or {}

    def ints(value: Any, minimum: int) -> tuple[int, ...] | None:
        if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                                           for v in value):
            return tuple(value)
        return None

    shape, chunks = ints(z.get("shape"), 0), ints(z.get("chunks"), 1)
    if shape is not None and chunks is not None and len(shape) != len(chunks):
        chunks = None
    try:
        storage = array_storage(z, u1_is_char=ctx.nczarr)
    except NczarrError:
        storage = None
    order = z.get("order", "C") if z.get("order", "C") in ("C", "F") else None
    sep = z.get("dimension_separator", ".") if z.get("dimension_separator", ".") in (".", "/") else None
    return ParsedArray(shape, chunks, storage, order, sep)
