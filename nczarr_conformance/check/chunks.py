"""--deep rules: every chunk object is inside its array's grid and decodes to exactly its size.

Chunks are checked one at a time, each read with the byte bound its codecs allow for the
declared chunk size and decoded no further than that size, so memory stays bounded by one
chunk whatever the declared shape, and a chunk that inflates past its size is a finding.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

from .. import keys
from .. import limits
from ..codecs import InflateError, Pipeline
from ..errors import NczarrError
from .context import METADATA_NAMES, CheckContext, parse_array
from .rules import Finding, Severity, get, rule



def chunk_objects(ctx: CheckContext, akey: str) -> list[str]:
    """The non-metadata objects under an array (its nearest enclosing array or group is akey)."""
    index = ctx.__dict__.get("_objects_by_array")
    if index is None:
        index = ctx.__dict__["_objects_by_array"] = _index_objects(ctx)
    return index.get(akey, [])


def _index_objects(ctx: CheckContext) -> dict[str, list[str]]:
    """One pass over the store's keys: each object under its nearest array (O(objects x depth))."""
    nodes = set(ctx.arrays) | set(ctx.groups)
    out: dict[str, list[str]] = {}
    for key in ctx.objects:
        if keys.basename(key) in METADATA_NAMES:
            continue
        node = keys.parent(key)
        while node != "/" and node not in nodes:
            node = keys.parent(node)
        if node in ctx.arrays:
            out.setdefault(node, []).append(key)
    return out


def looks_like_chunk(rel: str) -> bool:
    """Digits and separators only: an attempted chunk key (anything else is a stray object)."""
    return bool(rel) and all(c.isdigit() or c in "./" for c in rel)


def chunk_index(rel: str, separator: str, ndim: int) -> tuple[int, ...] | None:
    parts = rel.split(separator) if ndim else [rel]
    if ndim == 0:
        return () if rel == "0" else None
    if len(parts) != ndim or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def _valid_chunks(ctx: CheckContext) -> Iterator[tuple[str, object, str, tuple[int, ...] | None, tuple[int, ...]]]:
    for akey, rec in sorted(ctx.arrays.items()):
        parsed = parse_array(ctx, rec)
        if rec.zarray is None or parsed.shape is None or parsed.chunks is None or parsed.separator is None:
            continue
        grid = tuple(math.ceil(s / c) for s, c in zip(parsed.shape, parsed.chunks))
        for key in chunk_objects(ctx, akey):
            rel = key[len(akey.rstrip("/")) + 1:]
            if not looks_like_chunk(rel):
                continue  # reported by NCZ-STORE-STRAY
            index = chunk_index(rel, parsed.separator, len(parsed.shape))
            if index is not None and any(i >= g for i, g in zip(index, grid)):
                index = None
            yield akey, parsed, key, index, grid


@rule("NCZ-CHUNK-KEY", Severity.ERROR, deep=True, source='Zarr v2 spec "Chunk storage"')
def chunk_key(ctx: CheckContext) -> Iterator[Finding]:
    """Every object under an array is a chunk key inside the array's chunk grid."""
    for akey, _, key, index, grid in _valid_chunks(ctx):
        if index is None:
            yield get("NCZ-CHUNK-KEY").finding(key, f"not a chunk key of {akey} (grid {list(grid)})")


@rule("NCZ-CHUNK-DECODE", Severity.ERROR, deep=True, source="Zarr v2 spec")
def chunk_decode(ctx: CheckContext) -> Iterator[Finding]:
    """Every chunk decodes with the array's filters and compressor."""
    yield from _decode_findings(ctx, "NCZ-CHUNK-DECODE")


@rule("NCZ-CHUNK-SIZE", Severity.ERROR, deep=True, source="Zarr v2 spec")
def chunk_size(ctx: CheckContext) -> Iterator[Finding]:
    """Every chunk holds, decoded, exactly prod(chunks) x itemsize bytes; edge chunks are full size."""
    yield from _decode_findings(ctx, "NCZ-CHUNK-SIZE")


def _decode_findings(ctx: CheckContext, which: str) -> Iterator[Finding]:
    cache = ctx.__dict__.setdefault("_chunk_results", None)
    if cache is None:
        cache = ctx.__dict__["_chunk_results"] = list(_decode_all(ctx))
    for rule_id, key, message in cache:
        if rule_id == which:
            yield get(which).finding(key, message)


def _decode_all(ctx: CheckContext) -> Iterator[tuple[str, str, str]]:
    pipelines: dict[str, Pipeline | None] = {}
    for akey, parsed, key, index, _ in _valid_chunks(ctx):
        if index is None or parsed.storage is None:  # type: ignore[attr-defined]
            continue
        storage = parsed.storage  # type: ignore[attr-defined]
        expected = math.prod(parsed.chunks or (1,)) * storage.numpy.itemsize  # type: ignore[attr-defined]
        if expected > limits.max_in_memory_bytes():
            continue  # a declared chunk this big is not held in memory to be verified
        if akey not in pipelines:
            z = ctx.arrays[akey].zarray or {}
            try:
                pipelines[akey] = Pipeline(z.get("compressor"), z.get("filters"), storage.numpy.itemsize)
            except NczarrError:
                pipelines[akey] = None
        pipeline = pipelines[akey]
        if pipeline is None:
            continue
        ctx.objects_read += 1
        try:
            raw = ctx.store.get(key, limit=pipeline.max_encoded(expected))
        except limits.LimitError as exc:
            yield "NCZ-CHUNK-SIZE", key, f"stored object too big for its declared chunk: {exc}"
            continue
        except NczarrError as exc:  # unreadable (symlink, FIFO, refused GET): the same finding as for metadata
            ctx.read_errors[key] = str(exc)
            continue
        if raw is None:
            continue
        shape = "x".join(str(c) for c in parsed.chunks) or "scalar"  # type: ignore[attr-defined]
        dtype = (ctx.arrays[akey].zarray or {}).get("dtype")
        try:
            decoded = pipeline.decode(raw, expected)
        except InflateError as exc:
            yield "NCZ-CHUNK-SIZE", key, f"chunk {exc} for {shape} {dtype}"
            continue
        except Exception as exc:  # any codec failure is a corrupt chunk
            yield "NCZ-CHUNK-DECODE", key, f"does not decode: {type(exc).__name__}: {exc}"
            continue
        if len(decoded) != expected:
            yield "NCZ-CHUNK-SIZE", key, (f"chunk holds {len(decoded)} bytes after decoding; {expected} expected "
                                          f"for {shape} {dtype}")


@rule("NCZ-CHUNK-MISSING", Severity.INFO, deep=True, source="Zarr v2 spec")
def chunk_missing(ctx: CheckContext) -> Iterator[Finding]:
    """Chunks never written are reported: readers show the fill value there."""
    present: dict[str, int] = {}
    grids: dict[str, tuple[int, ...]] = {}
    for akey, _, _, index, grid in _valid_chunks(ctx):
        grids[akey] = grid
        if index is not None:
            present[akey] = present.get(akey, 0) + 1
    for akey, rec in sorted(ctx.arrays.items()):
        parsed = parse_array(ctx, rec)
        if parsed.shape is None or parsed.chunks is None:
            continue
        total = math.prod(math.ceil(s / c) for s, c in zip(parsed.shape, parsed.chunks))
        missing = total - present.get(akey, 0)
        if missing > 0:
            yield get("NCZ-CHUNK-MISSING").finding(keys.join(akey, ".zarray"),
                                                   f"{missing} of {total} chunks never written; they read as fill")
