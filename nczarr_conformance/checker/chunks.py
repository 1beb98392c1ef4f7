"""--deep rules: every chunk object is inside its array's grid and decodes to exactly its size.

Chunks are checked by one thread per core (zlib and the other codecs release the GIL), each
read with the byte bound its codecs allow for the declared chunk size and decoded no further
than that size, so memory stays bounded by one chunk per thread whatever the declared shape,
and a chunk that inflates past its size is a finding. Outcomes are kept in the order of the
chunk list, so the report does not depend on the threads (nor on a dask cluster, see
checker/parallel.py).
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nczarr_conformance import keys, limits
from nczarr_conformance.checker.context import METADATA_NAMES, CheckContext, parse_array
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.codecs import InflateError, Pipeline, decode_vlen
from nczarr_conformance.errors import FormatError, NczarrError, StoreUnavailableError
from nczarr_conformance.nczarr.dtypes import vlen_codec
from nczarr_conformance.stores.base import Store


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
        grid = tuple(math.ceil(s / c) for s, c in zip(parsed.shape, parsed.chunks, strict=True))
        for key in chunk_objects(ctx, akey):
            rel = key[len(akey.rstrip("/")) + 1:]
            if not looks_like_chunk(rel):
                continue  # reported by NCZ-STORE-STRAY
            index = chunk_index(rel, parsed.separator, len(parsed.shape))
            if index is not None and any(i >= g for i, g in zip(index, grid, strict=True)):
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


@dataclass(frozen=True, slots=True)
class DecodeJob:
    """One chunk to read and decode: all a worker needs, without the context."""

    key: str
    expected: int  # decoded bytes the declared chunk holds
    compressor: dict[str, Any] | None
    filters: list[dict[str, Any]] | None
    itemsize: int
    label: str  # "4x90x180 <f4", for messages
    #: an |O array's variable-length codec (``vlen-utf8``/``vlen-bytes``, its first filter, left out of
    #: ``filters``): the rest of the chain is undone within the in-memory budget, then the items are counted
    vlen: str | None = None
    count: int = 0  # the items a vlen chunk holds (its declared shape's)


#: what decoding one chunk found: None (fine or missing), ("read-error", key, message),
#: or (rule id, key, message)
Outcome = tuple[str, str, str] | None
#: runs jobs somewhere (a dask cluster, see checker/parallel.py) and gives their outcomes in order
DecodeMap = Callable[[list[DecodeJob]], list[Outcome]]


def _jobs(ctx: CheckContext) -> list[DecodeJob]:
    jobs: list[DecodeJob] = []
    pipelines: dict[str, bool] = {}
    for akey, parsed, key, index, _ in _valid_chunks(ctx):
        if index is None or parsed.storage is None:  # type: ignore[attr-defined]
            continue
        storage = parsed.storage  # type: ignore[attr-defined]
        expected = math.prod(parsed.chunks or (1,)) * storage.numpy.itemsize  # type: ignore[attr-defined]
        if expected > limits.max_in_memory_bytes():
            continue  # a declared chunk this big is not held in memory to be verified
        z = ctx.arrays[akey].zarray or {}
        if akey not in pipelines:
            try:
                Pipeline(z.get("compressor"), z.get("filters"), storage.numpy.itemsize)
                pipelines[akey] = True
            except NczarrError:
                pipelines[akey] = False
        if not pipelines[akey]:
            continue
        shape = "x".join(str(c) for c in parsed.chunks) or "scalar"  # type: ignore[attr-defined]
        vlen = vlen_codec(z) if storage.numpy.kind == "O" else None
        if vlen is not None:  # decoded as the reader does (nczarr/reader.py VlenArrayInfo), never by numcodecs alone
            jobs.append(DecodeJob(key, limits.max_in_memory_bytes(), z.get("compressor"), (z.get("filters") or [])[1:],
                                  1, f"{shape} {z.get('dtype')}", vlen, expected // storage.numpy.itemsize))
            continue
        jobs.append(DecodeJob(key, expected, z.get("compressor"), z.get("filters"), storage.numpy.itemsize,
                              f"{shape} {z.get('dtype')}"))
    return jobs


_PIPELINES: dict[str, Pipeline] = {}


def decode_one(store: Store, job: DecodeJob) -> Outcome:
    """Read one chunk within the bound its codecs allow and decode it no further than its size."""
    cache_key = json.dumps([job.compressor, job.filters, job.itemsize], sort_keys=True, default=str)
    pipeline = _PIPELINES.get(cache_key)
    if pipeline is None:
        pipeline = _PIPELINES[cache_key] = Pipeline(job.compressor, job.filters, job.itemsize)
    try:
        raw = store.get(job.key, limit=pipeline.max_encoded(job.expected))
    except limits.LimitError as exc:
        return "NCZ-CHUNK-SIZE", job.key, f"stored object too big for its declared chunk: {exc}"
    except StoreUnavailableError:
        raise  # the store did not answer: not a finding about this chunk
    except NczarrError as exc:  # unreadable (symlink, FIFO, refused GET): the same finding as for metadata
        return "read-error", job.key, str(exc)
    if raw is None:
        return None
    try:
        decoded = pipeline.decode(raw, job.expected)
    except InflateError as exc:
        return "NCZ-CHUNK-SIZE", job.key, f"chunk {exc} for {job.label}"
    except Exception as exc:  # any codec failure is a corrupt chunk
        return "NCZ-CHUNK-DECODE", job.key, f"does not decode: {type(exc).__name__}: {exc}"
    if job.vlen is not None:  # the item count held to the chunk's before numcodecs allocates an item
        try:
            decode_vlen(job.vlen, decoded, job.count, job.key)
        except FormatError as exc:
            return "NCZ-CHUNK-DECODE", job.key, f"does not decode: {exc}"
        return None
    if len(decoded) != job.expected:
        return "NCZ-CHUNK-SIZE", job.key, (f"chunk holds {len(decoded)} bytes after decoding; {job.expected} "
                                           f"expected for {job.label}")
    return None


def decode_all(store: Store, jobs: list[DecodeJob]) -> list[Outcome]:
    """Every job's outcome, in order, decoded by one thread per core."""
    if len(jobs) < 2:
        return [decode_one(store, job) for job in jobs]
    with ThreadPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda job: decode_one(store, job), jobs))


def _decode_all(ctx: CheckContext) -> Iterator[tuple[str, str, str]]:
    jobs = _jobs(ctx)
    run: DecodeMap | None = ctx.__dict__.get("decode_map")
    outcomes = run(jobs) if run is not None else decode_all(ctx.store, jobs)
    ctx.objects_read += len(jobs)
    for outcome in outcomes:
        if outcome is None:
            continue
        rule_id, key, message = outcome
        if rule_id == "read-error":
            ctx.read_errors[key] = message
        else:
            yield rule_id, key, message


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
        total = math.prod(math.ceil(s / c) for s, c in zip(parsed.shape, parsed.chunks, strict=True))
        missing = total - present.get(akey, 0)
        if missing > 0:
            yield get("NCZ-CHUNK-MISSING").finding(keys.join(akey, ".zarray"),
                                                   f"{missing} of {total} chunks never written; they read as fill")
