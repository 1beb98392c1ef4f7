"""Plan the edits a store needs: run the chosen fixes in memory, diff what they left.

A plan holds every metadata object to write (its old and new bytes and the fixes behind it)
and the arrays whose chunks must be re-encoded. Nothing is written here; :mod:`.apply`
carries a plan out, and ``--dry-run`` prints :func:`render_diff`.
"""
from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.codecs import Pipeline
from nczarr_conformance.errors import FormatError
from nczarr_conformance.fix import fixes  # noqa: F401  (registers the fixes)
from nczarr_conformance.fix.context import FixContext, dumps
from nczarr_conformance.fix.registry import FIXES, READERS, Change
from nczarr_conformance.nczarr.dtypes import parse_dtype
from nczarr_conformance.nczarr.flavors import load_json
from nczarr_conformance.stores.base import Store
from nczarr_conformance.zarr3.reader import is_v3

#: nczarr-fix's last line on a Zarr v3 store (``--to-v3`` migrates v2 → v3; the fixes are v2's)
V3_NOTHING = "Zarr v3 store: nothing to fix"


@dataclass(frozen=True, slots=True)
class ObjectEdit:
    """One metadata object to write (``new``) or to remove (``new`` None); ``old`` None: it is created."""

    key: str
    old: bytes | None
    new: bytes | None
    fixes: tuple[str, ...]


@dataclass
class Recode:
    """An array whose chunks are decoded with the old chain and encoded with the new one."""

    node: str
    old: dict[str, Any]
    new: dict[str, Any]
    chunks: list[str] = field(default_factory=list)

    def pipelines(self) -> tuple[Pipeline, Pipeline, int]:
        """(old chain, new chain, decoded bytes of one chunk)."""
        itemsize = parse_dtype(self.old.get("dtype"), u1_is_char=True).numpy.itemsize
        size = itemsize * math.prod(int(c) for c in self.old.get("chunks") or [])
        return (Pipeline(self.old.get("compressor"), self.old.get("filters"), itemsize),
                Pipeline(self.new.get("compressor"), self.new.get("filters"), itemsize), size)

    def reencode(self, key: str, data: bytes) -> bytes:
        """The chunk encoded with the new chain; FormatError (naming the key) if it does not decode.

        Any exception of the codecs counts: a chunk is untrusted data, and numcodecs' codecs each raise
        their own types (zlib.error, RuntimeError, ValueError…).
        """
        try:
            old, new, size = self.pipelines()
            decoded = old.decode(data, limit=size)
            if len(decoded) != size:
                raise FormatError(f"decodes to {len(decoded)} bytes, not the {size} its .zarray declares")
            return new.encode(np.frombuffer(decoded, dtype=np.uint8))
        except Exception as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise FormatError(f"{key}: cannot re-encode the chunk without filters: {detail}") from exc


@dataclass
class Plan:
    flavor: str
    targets: frozenset[str]
    edits: list[ObjectEdit]
    recodes: list[Recode]
    changes: list[Change]
    notes: list[str]
    #: every object key of the store the plan was made from (the reader check samples it)
    all_keys: list[str] = field(default_factory=list)
    #: the metadata objects as read when planning (key → stored bytes), so the check need not read them again
    raw: dict[str, bytes] = field(default_factory=dict)
    #: array node → what a reader loses there (FixContext.losses): printed, and the one loss the check accepts
    losses: dict[str, str] = field(default_factory=dict)
    #: what a reader named with --for still cannot read, with the flag that would (FixContext.unmet)
    unmet: list[str] = field(default_factory=list)
    #: the line that ends a run with no edit
    nothing: str = "nothing to fix"

    @property
    def empty(self) -> bool:
        return not self.edits and not self.recodes

    def chunk_keys(self) -> set[str]:
        return {k for r in self.recodes for k in r.chunks}


def parse_targets(text: str | None) -> frozenset[str]:
    """``--for`` (comma-separated reader ids); None is every reader."""
    from nczarr_conformance.errors import UsageError

    if text is None:
        return frozenset(READERS)
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in READERS]
    if unknown or not names:
        raise UsageError(f"--for {text!r}: readers are {', '.join(READERS)}")
    return frozenset(names)


def _is_chunk(key: str, node: str) -> bool:
    rest = key[len(node.rstrip("/")) + 1:]
    return bool(rest) and not any(part.startswith((".z", ".ncz")) for part in rest.split("/"))


def make_plan(store: Store, targets: frozenset[str], *, can_rewrite_chunks: bool = True,
              only: list[str] | None = None, named: bool = False) -> Plan:
    """Run every fix (``only``: these ids) serving ``targets`` over the store's metadata, in memory;
    ``named``: the user chose ``targets`` (``--for``).

    A Zarr v3 store has nothing to fix: every fix edits v2 metadata (``.zarray``, ``.zattrs``, ``.zmetadata``),
    so the plan is empty and says why, rather than the v2 context's "no dataset here"."""
    if is_v3(store):
        return Plan("zarr-v3", targets, [], [], [], [], nothing=V3_NOTHING)
    ctx = FixContext(store, targets, can_rewrite_chunks=can_rewrite_chunks, named=named)
    changes: list[Change] = []
    for fix_id, f in FIXES.items():
        if only is not None and fix_id not in only:
            continue
        if f.always or targets & set(f.readers):
            changes.extend(f.function(ctx))
    by_key: dict[str, list[str]] = {}
    for c in changes:
        by_key.setdefault(c.key, [])
        if c.fix not in by_key[c.key]:
            by_key[c.key].append(c.fix)
    edits = [ObjectEdit(key, ctx.raw.get(key), dumps(ctx.docs[key]) if key in ctx.docs else None,
                        tuple(by_key.get(key, ())))
             for key in sorted(set(ctx.docs) | set(ctx.original)) if ctx.changed(key)]
    recodes = []
    for node, new in sorted(ctx.recode.items()):
        old = ctx.original[keys.join(node, ".zarray")]
        prefix = node.rstrip("/") + "/"
        chunks = [k for k in ctx.all_keys if k.startswith(prefix) and _is_chunk(k, node)]
        recodes.append(Recode(node, old, new, chunks))
    return Plan(ctx.flavor, targets, edits, recodes, changes, ctx.notes, list(ctx.all_keys), dict(ctx.raw),
                dict(ctx.losses), list(ctx.unmet))


def _pretty(data: bytes | None, key: str) -> list[str]:
    if data is None:
        return []
    try:
        doc = load_json(data, key)
        text = json.dumps(doc, indent=2, ensure_ascii=False, default=str)
    except FormatError:
        text = data.decode("utf-8", "replace")
    return [line + "\n" for line in text.splitlines()]


def render_diff(plan: Plan) -> str:
    """The planned edits as one unified diff per object (pretty-printed JSON), then the chunk rewrites."""
    out: list[str] = []
    for edit in plan.edits:
        name = edit.key.lstrip("/")
        out.append(f"# {edit.key}: {', '.join(edit.fixes)}\n")
        out.extend(difflib.unified_diff(_pretty(edit.old, edit.key), _pretty(edit.new, edit.key),
                                        fromfile="/dev/null" if edit.old is None else f"a/{name}",
                                        tofile="/dev/null" if edit.new is None else f"b/{name}"))
    for r in plan.recodes:
        out.append(f"# {r.node}: {len(r.chunks)} chunk(s) re-encoded without filters (NCZ-FIX-NO-FILTERS)\n")
    return "".join(out)


def iter_changes(plan: Plan) -> Iterator[str]:
    """One line per change, then what a reader loses (stated, not silent), then the notes (what a fix could not do)."""
    for c in plan.changes:
        yield f"{c.fix} {c.key}: {c.message}"
    for node, loss in plan.losses.items():
        yield f"loss: {node}: {loss}"
    for note in plan.notes:
        yield f"note: {note}"
