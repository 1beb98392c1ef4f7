"""The NCZarr layouts that exist in the wild, their detection, and metadata lookup.

=============  ==============================================================
flavor         where the NCZarr metadata lives
=============  ==============================================================
nczarr-v1      separate objects .nczarr / .nczgroup / .nczarray (.nczvar) / .nczattrs (.nczattr), 2020
nczarr-2-upper ``_NCZARR_*`` keys inside .zgroup / .zarray / .zattrs (4.8–4.9.0)
nczarr-2       ``_nczarr_*`` keys inside .zgroup / .zarray / .zattrs (4.9.1–4.9.2)
nczarr-4.10    every ``_nczarr_*`` key inside .zattrs (netcdf-c ≥ 4.9.3)
zarr           pure Zarr v2, optionally with xarray's ``_ARRAY_DIMENSIONS``
=============  ==============================================================

Lookups are lenient (they try every location) because real stores mix them,
e.g. a 4.9.2 dataset whose .zattrs still carries ``_nczarr_attr``.
"""
from __future__ import annotations

import json
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.errors import FormatError, NoDatasetError
from nczarr_conformance.limits import LimitError, check_json_depth
from nczarr_conformance.nczarr import lenient_json
from nczarr_conformance.stores.base import Store

FLAVORS = ("nczarr-v1", "nczarr-2-upper", "nczarr-2", "nczarr-4.10", "zarr", "unknown")
KNOWN_VERSIONS = ("1.0.0", "2.0.0")


def load_json(raw: bytes, key: str) -> Any:
    """Parse a metadata object; raw control characters in strings are accepted
    (netcdf-c 4.10.1 writes them unescaped; nczarr-check reports it). The store capped
    its size; its nesting is capped here (limits.MAX_JSON_DEPTH)."""
    check_json_depth(raw, key)  # before the parser recurses into it
    try:
        text = raw.decode("utf-8")
        try:
            return json.loads(text, strict=False)
        except ValueError as exc:
            try:  # the non-JSON numbers netcdf-c writes and reads (lenient_json.py)
                return lenient_json.loads(text)[0]
            except ValueError:
                raise exc from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"{key}: not valid JSON ({exc})") from exc


#: What an object holding a web page instead of JSON is called: a "soft 404" (a server answering 200 and an
#: HTML page for a key it does not have) makes every probe of an optional object look like this.
SOFT_404 = "an HTML page, not JSON (a web server answering 200 for a missing object?)"


def looks_like_html(raw: bytes) -> bool:
    """Whether ``raw`` is a web page: JSON cannot start with ``<``, a page does (after blanks or a BOM)."""
    return raw[:512].lstrip(b" \t\r\n\xef\xbb\xbf")[:1] == b"<"


class MetadataSource:
    """Metadata objects as JSON, from ``.zmetadata`` when present, else one GET each.

    A web page where an object was probed for is read as absent (a "soft 404" server answers 200 and a
    page for every key it lacks; the objects a reader needs then say so by name: :meth:`missing`). So is a
    ``/.zmetadata`` that is not JSON at all, with a warning: it only summarises the objects, which are then
    read one by one. Any other object that is not JSON stays a :class:`FormatError` naming its key. A chunk
    is bytes, not JSON: a page served for a missing chunk cannot be told from data, and is refused by its
    size or its codec, naming the chunk.
    """

    def __init__(self, store: Store, use_consolidated: bool = True) -> None:
        self.store = store
        self.consolidated: dict[str, Any] | None = None
        self.cache: dict[str, Any] = {}
        self.pages: set[str] = set()  # keys answered with a web page (a soft 404): absent
        if use_consolidated:
            raw = store.get("/.zmetadata")
            if raw is not None and looks_like_html(raw):
                self.pages.add("/.zmetadata")  # the probe of an optional object on a soft-404 server: absent
            elif raw is not None:
                try:
                    doc = load_json(raw, "/.zmetadata")
                except LimitError:
                    raise
                except FormatError as exc:
                    import warnings

                    warnings.warn(f"{exc}; read as absent (each object is read instead)",
                                  UserWarning, stacklevel=2)
                    return
                meta = doc.get("metadata") if isinstance(doc, dict) else None
                if not isinstance(meta, dict):
                    raise FormatError("/.zmetadata: no 'metadata' object")
                self.consolidated = {keys.join(k): v for k, v in meta.items()}

    def missing(self, key: str) -> str:
        """How a needed object that is absent is worded: "missing", or the web page that stood in for it."""
        return SOFT_404 if keys.join(key) in self.pages else "missing"

    def get(self, key: str) -> Any | None:
        key = keys.join(key)
        if key in self.cache:
            return self.cache[key]
        if self.consolidated is not None:
            value = self.consolidated.get(key)  # authoritative: one GET serves all metadata
        else:
            raw = self.store.get(key)
            if raw is not None and looks_like_html(raw):
                self.pages.add(key)
                raw = None
            value = None if raw is None else load_json(raw, key)
        if value is not None and not isinstance(value, dict):
            raise FormatError(f"{key}: JSON object expected, found {type(value).__name__}")
        self.cache[key] = value
        return value


#: Where each flavor keeps a group's dimensions/arrays/groups: (object, member; "" = the whole object).
GROUP_PLACE = {
    "nczarr-4.10": (".zattrs", "_nczarr_group"),
    "nczarr-2": (".zgroup", "_nczarr_group"),
    "nczarr-2-upper": (".zgroup", "_NCZARR_GROUP"),
    "nczarr-v1": (".nczgroup", ""),
}

#: Every place a piece may be found, newest first.
_SEARCH = {
    "group": [(".zattrs", "_nczarr_group"), (".zgroup", "_nczarr_group"), (".zgroup", "_NCZARR_GROUP"),
              (".zattrs", "_NCZARR_GROUP"), (".nczgroup", "")],
    "array": [(".zattrs", "_nczarr_array"), (".zarray", "_nczarr_array"), (".zarray", "_NCZARR_ARRAY"),
              (".zattrs", "_NCZARR_ARRAY"), (".nczarray", ""), (".nczvar", "")],
    "attr": [(".zattrs", "_nczarr_attr"), (".zattrs", "_NCZARR_ATTR"), (".zattrs", "_nczarr_attrs"),
             (".zattrs", "_NCZARR_ATTRS"), (".nczattrs", ""), (".nczattr", "")],
}


def find_piece(meta: MetadataSource, node: str, piece: str, *, with_v1: bool) -> Any | None:
    """The NCZarr ``piece`` (group/array/attr) of the node at key ``node``, or None."""
    for obj, member in _SEARCH[piece]:
        if obj.startswith(".ncz") and not with_v1:
            continue
        doc = meta.get(keys.join(node, obj))
        if doc is None:
            continue
        value = doc if member == "" else doc.get(member)
        if value is not None:
            if not isinstance(value, dict):
                raise FormatError(f"{keys.join(node, obj)}: {member or obj} must be a JSON object")
            return value
    return None


def detect(meta: MetadataSource) -> tuple[str, dict[str, Any] | None]:
    """(flavor, superblock) of the dataset at the store root; raises if there is none."""
    zgroup = meta.get("/.zgroup")
    zattrs = meta.get("/.zattrs") if zgroup is not None else None
    if zattrs is not None and isinstance(zattrs.get("_nczarr_superblock"), dict):
        return "nczarr-4.10", zattrs["_nczarr_superblock"]
    if zgroup is not None:
        for member, flavor in (("_nczarr_superblock", "nczarr-2"), ("_NCZARR_SUPERBLOCK", "nczarr-2-upper")):
            if isinstance(zgroup.get(member), dict):
                return flavor, zgroup[member]
        v1 = meta.get("/.nczarr")
        if v1 is not None:
            return "nczarr-v1", v1
        if zattrs is not None and isinstance(zattrs.get("_NCZARR_SUPERBLOCK"), dict):
            return "nczarr-2-upper", zattrs["_NCZARR_SUPERBLOCK"]
        return "zarr", None
    if meta.get("/.zarray") is not None:
        return "zarr", None
    raise NoDatasetError("no dataset here: neither /.zgroup nor /.zarray exists")  # open_reader adds v3's zarr.json
