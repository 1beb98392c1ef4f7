"""FixContext: every metadata object of a store, parsed once, edited by the fixes in memory.

Nothing is written here. The context holds the objects as stored (``original``) and as the
fixes leave them (``docs``); the plan (:mod:`.plan`) diffs the two. A fix that must change
chunk bytes does not touch chunks: it records the array's new ``.zarray`` in ``recode`` and the
plan re-encodes that array's chunks.
"""
from __future__ import annotations

import copy
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.errors import NO_DATASET, FormatError, NoDatasetError
from nczarr_conformance.nczarr.attrs import unparse
from nczarr_conformance.nczarr.flavors import MetadataSource, detect, load_json
from nczarr_conformance.stores.base import Store

#: The Zarr v2 metadata objects a fix reads and may rewrite.
META_NAMES = (".zgroup", ".zarray", ".zattrs", ".zmetadata")


def dumps(doc: Any) -> bytes:
    """An edited object's bytes: netcdf-c's own JSON layout, numbers kept as netcdf-c wrote them."""
    return unparse(doc).encode("utf-8")


class FixContext:
    """The metadata of one store and the readers the fixes serve (``targets``)."""

    def __init__(self, store: Store, targets: frozenset[str], *, can_rewrite_chunks: bool = True,
                 named: bool = False) -> None:
        self.store = store
        self.targets = targets
        #: the user named the readers (``--for``): a fix that cannot serve one of them is a refusal, not a note
        self.named = named
        self.can_rewrite_chunks = can_rewrite_chunks
        self.all_keys = store.list_prefix("/")
        self.raw: dict[str, bytes] = {}
        self.original: dict[str, Any] = {}
        for key in self.all_keys:
            if keys.basename(key) not in META_NAMES:
                continue
            data = store.get(key)
            if data is None:
                continue
            doc = load_json(data, key)
            if not isinstance(doc, dict):
                raise FormatError(f"{key}: JSON object expected, found {type(doc).__name__}; cannot fix it")
            self.raw[key] = data
            self.original[key] = doc
        if "/.zgroup" not in self.original and "/.zarray" not in self.original:
            raise NoDatasetError(NO_DATASET)  # make_plan took a v3 store before: zarr.json was looked for too
        self.flavor, _ = detect(MetadataSource(store, use_consolidated=False))
        self.docs: dict[str, Any] = copy.deepcopy(self.original)
        #: array node → the new .zarray its chunks are re-encoded for
        self.recode: dict[str, dict[str, Any]] = {}
        #: what a fix could not do, and why (printed, never silent)
        self.notes: list[str] = []
        #: array node → what a reader loses there by a fix the user chose (printed; the reader check accepts
        #: exactly that loss, a char array read as string with the same text, and refuses any other)
        self.losses: dict[str, str] = {}
        #: what a reader named with ``--for`` still cannot read after the fixes, and the conversion flag that
        #: would make it readable: nczarr-fix refuses then (a named reader is never left with "nothing to fix")
        self.unmet: list[str] = []

    # ---- nodes ------------------------------------------------------------------------
    def arrays(self) -> list[str]:
        """Node keys of every array ("/g/v"), in key order."""
        return sorted(keys.parent(k) for k in self.docs if keys.basename(k) == ".zarray")

    def groups(self) -> list[str]:
        return sorted(keys.parent(k) for k in self.docs if keys.basename(k) == ".zgroup")

    def zarray(self, node: str) -> dict[str, Any]:
        doc = self.docs[keys.join(node, ".zarray")]
        assert isinstance(doc, dict)
        return doc

    def zattrs(self, node: str) -> dict[str, Any] | None:
        doc = self.docs.get(keys.join(node, ".zattrs"))
        return doc if isinstance(doc, dict) else None

    def nczarr_array(self, node: str) -> dict[str, Any] | None:
        """The node's NCZarr array piece wherever its flavor keeps it (None in pure Zarr)."""
        for obj, member in ((".zattrs", "_nczarr_array"), (".zarray", "_nczarr_array"),
                            (".zarray", "_NCZARR_ARRAY"), (".zattrs", "_NCZARR_ARRAY")):
            doc = self.docs.get(keys.join(node, obj))
            if isinstance(doc, dict) and isinstance(doc.get(member), dict):
                piece = doc[member]
                assert isinstance(piece, dict)
                return piece
        return None

    def attr_types(self, node: str) -> dict[str, Any]:
        """``_nczarr_attr.types`` (or the upper-case spelling) of the node's .zattrs, else {}."""
        doc = self.zattrs(node) or {}
        for member in ("_nczarr_attr", "_NCZARR_ATTR"):
            piece = doc.get(member)
            if isinstance(piece, dict) and isinstance(piece.get("types"), dict):
                types = piece["types"]
                assert isinstance(types, dict)
                return types
        return {}

    def changed(self, key: str) -> bool:
        """True when the fixes left ``key`` different from what is stored (compared as written);
        a stored object the fixes dropped from ``docs`` is removed."""
        if key not in self.docs:
            return key in self.original
        if key not in self.original:
            return True
        return dumps(self.docs[key]) != dumps(self.original[key])
