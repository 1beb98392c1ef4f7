"""Rules for kerchunk references (stores/references.py): the targets, the ranges, the codecs.

References are only as good as the files they point into: a target removed, rewritten or
truncated since they were made reads as wrong values through any reader that does not check
(fsspec does not). These rules find that before a reader does. They act only on a reference
store and find nothing elsewhere.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from nczarr_conformance.checker.chunks import chunk_objects
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.stores.references import ReferenceStore, local_path, target_problem

#: HDF5 filter id → the numcodecs id that reads its bytes (as filter or compressor)
HDF5_TO_ZARR = {1: "zlib", 2: "shuffle"}
#: findings of one rule about one array or target before the rest are summed up in one line
PER_ARRAY = 3


def _store(ctx: CheckContext) -> ReferenceStore | None:
    return ctx.store if isinstance(ctx.store, ReferenceStore) else None


def _refs(ctx: CheckContext, store: ReferenceStore) -> Iterator[tuple[str, str, list[Any]]]:
    """(array key, chunk key, reference) of every chunk that is a byte range of a file."""
    for akey in sorted(ctx.arrays):
        for ckey in chunk_objects(ctx, akey):
            ref = store.reference(ckey)
            if isinstance(ref, (list, tuple)) and ref:
                yield akey, ckey, list(ref)


@rule("NCZ-REF-TARGET", Severity.ERROR, source="kerchunk references: a chunk is a byte range of its target file")
def target_unchanged(ctx: CheckContext) -> Iterator[Finding]:
    """Every file the references point into is there and unchanged (size, mtime) since they were made."""
    store = _store(ctx)
    if store is None:
        return
    urls = sorted({str(ref[0]) for _, _, ref in _refs(ctx, store)} | set(store.targets))
    for url in urls:
        problem = target_problem(url, store.targets.get(url))
        if problem is not None:
            yield get("NCZ-REF-TARGET").finding(None, f"{problem}: its references would read wrong bytes or fail")


@rule("NCZ-REF-RANGE", Severity.ERROR, source="kerchunk references: [url, offset, length] inside url")
def ranges_inside(ctx: CheckContext) -> Iterator[Finding]:
    """Every reference's byte range lies inside its target file."""
    store = _store(ctx)
    if store is None:
        return
    sizes: dict[str, int | None] = {}
    outside: dict[str, list[str]] = {}
    for akey, ckey, ref in _refs(ctx, store):
        url = str(ref[0])
        if url not in sizes:
            local = local_path(url)
            try:
                sizes[url] = os.stat(local).st_size if local is not None else None
            except OSError:
                sizes[url] = None  # NCZ-REF-TARGET names it
        size = sizes[url]
        if size is None or len(ref) < 3:
            continue
        offset, length = int(ref[1]), int(ref[2])
        if offset < 0 or length < 0 or offset + length > size:
            outside.setdefault(akey, []).append(f"{ckey} reads bytes {offset}-{offset + length} of {url} ({size} "
                                                "bytes)")
    for akey, lines in outside.items():
        for line in lines[:PER_ARRAY]:
            yield get("NCZ-REF-RANGE").finding(line.split(" ", 1)[0], line.split(" ", 1)[1])
        if len(lines) > PER_ARRAY:
            yield get("NCZ-REF-RANGE").finding(akey, f"and {len(lines) - PER_ARRAY} more chunks outside their target")


@rule("NCZ-REF-CODECS", Severity.ERROR, source="HDF5 filters (H5Z) and the numcodecs codecs reading their bytes")
def codecs_match_hdf5(ctx: CheckContext) -> Iterator[Finding]:
    """An array referencing an HDF5 dataset declares that dataset's filters as its codecs, and each chunk
    reference is a chunk of the dataset's chunk index (or its contiguous extent)."""
    store = _store(ctx)
    if store is None:
        return
    by_array: dict[str, dict[str, list[tuple[str, int, int]]]] = {}
    for akey, ckey, ref in _refs(ctx, store):
        if len(ref) >= 3:
            by_array.setdefault(akey, {}).setdefault(str(ref[0]), []).append((ckey, int(ref[1]), int(ref[2])))
    for akey, targets in sorted(by_array.items()):
        zarray = ctx.arrays[akey].zarray or {}
        declared = [str(f.get("id")) for f in (zarray.get("filters") or []) if isinstance(f, dict)]
        compressor = zarray.get("compressor")
        if isinstance(compressor, dict):
            declared.append(str(compressor.get("id")))
        for url, chunks in sorted(targets.items()):
            local = local_path(url)
            if local is None or target_problem(url, store.targets.get(url)) is not None:
                continue  # remote: not opened here; missing or changed: NCZ-REF-TARGET
            yield from _against_hdf5(akey, url, local, declared, chunks)


def _against_hdf5(akey: str, url: str, local: str, declared: list[str],
                  chunks: list[tuple[str, int, int]]) -> Iterator[Finding]:
    import h5py

    from nczarr_conformance.sources.netcdf4 import LOCK

    finding = get("NCZ-REF-CODECS").finding
    try:
        with LOCK, h5py.File(local, "r") as f:
            dataset = f.get(akey.lstrip("/"))
            if not isinstance(dataset, h5py.Dataset):
                yield finding(akey, f"refers to {url}, which holds no HDF5 dataset {akey}")
                return
            plist = dataset.id.get_create_plist()
            filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
            extents = _extents(dataset)
    except OSError as exc:
        yield finding(akey, f"refers to {url}, which HDF5 cannot open ({exc})")
        return
    unknown = [f"{name.decode('ascii', 'replace') if isinstance(name, bytes) else name} (HDF5 filter {fid})"
               for fid, _, _, name in filters if int(fid) not in HDF5_TO_ZARR]
    if unknown:
        yield finding(akey, f"{url}{akey} is stored with {', '.join(unknown)}: no Zarr codec reads those bytes")
        return
    wanted = [HDF5_TO_ZARR[int(fid)] for fid, _, _, _ in filters]
    if declared != wanted:
        yield finding(akey, f"declares codecs {declared or 'none'} but {url}{akey} is stored with "
                            f"{wanted or 'no filter'}")
    strays = [(ckey, offset, length) for ckey, offset, length in chunks if (offset, length) not in extents]
    for ckey, offset, length in strays[:PER_ARRAY]:
        yield finding(ckey, f"bytes {offset}-{offset + length} of {url} are no chunk of its dataset {akey}")
    if len(strays) > PER_ARRAY:
        yield finding(akey, f"and {len(strays) - PER_ARRAY} more references that are no chunk of {akey}")


def _extents(dataset: Any) -> set[tuple[int, int]]:
    """(offset, size) of every stored chunk of ``dataset``, or of its contiguous storage."""
    from nczarr_conformance.sources.hdf5_chunks import DirectChunks

    if dataset.chunks is None:
        offset = dataset.id.get_offset()
        return set() if offset is None else {(int(offset), int(dataset.id.get_storage_size()))}
    return {(s.address, s.size) for s in DirectChunks._stored(dataset).values()}
