"""Rules for kerchunk references (stores/references.py) and Icechunk virtual chunks (stores/icechunk_store.py):
the targets, the ranges, the codecs.

References are only as good as the files they point into: a target removed, rewritten or
truncated since they were made reads as wrong values through any reader that does not check
(fsspec does not), or fails only when a chunk is read (icechunk). These rules find that before a reader
does. They act only on a reference store or an Icechunk repository and find nothing elsewhere.

Kerchunk references are JSON we read: every ``[url, offset, length]`` is checked against its target. icechunk
1.1.21's API says less of a virtual chunk: the files the snapshot's virtual chunks lie in
(``Session.all_virtual_chunk_locations``), which chunks are virtual (``chunk_type``) and each one's length
(``getsize``), but neither a chunk's offset nor its file, nor the modification time a reference records
(``VirtualChunkSpec.last_updated_at_checksum``, which our writer sets). What it does is fetch: so each virtual chunk
checked is *probed*, its last byte fetched through icechunk (``IcechunkStore.probe_virtual``), and icechunk's
refusal says why (the file is gone; modified after the recorded time; shorter than the chunk's offset + length).
Without ``--deep`` the first and the last virtual chunk of each array (grid order) are probed; with ``--deep``
every one.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from nczarr_conformance import keys
from nczarr_conformance.checker.chunks import chunk_objects
from nczarr_conformance.checker.context import CheckContext
from nczarr_conformance.checker.rules import Finding, Severity, get, rule
from nczarr_conformance.checker.v3 import nodes
from nczarr_conformance.errors import FormatError, NczarrError
from nczarr_conformance.stores.icechunk_store import IcechunkStore, VirtualFault
from nczarr_conformance.stores.references import (
    ReferenceStore,
    TargetLooks,
    local_path,
    opened_target,
    target_problem,
    target_size,
)
from nczarr_conformance.stores.s3_object import is_s3_url
from nczarr_conformance.zarr3.metadata import parse_key_encoding

#: HDF5 filter id → the numcodecs id that reads its bytes (as filter or compressor)
HDF5_TO_ZARR = {1: "zlib", 2: "shuffle"}
#: findings of one rule about one array or target before the rest are summed up in one line
PER_ARRAY = 3
#: the rules of this module: nczarr-check runs them on a Zarr v3 store too (an Icechunk repository is one)
REF_RULES = ("NCZ-REF-TARGET", "NCZ-REF-RANGE", "NCZ-REF-CODECS")
#: what each rule's ``source`` says it stands on, for both kinds of references
BOTH = "kerchunk references and Icechunk virtual chunks"


def _store(ctx: CheckContext) -> ReferenceStore | None:
    return ctx.store if isinstance(ctx.store, ReferenceStore) else None


def _looks(ctx: CheckContext) -> TargetLooks:
    """This run's one look at each target, shared by the three rules (an S3 target HEADed once per check, not once
    per rule and array): the reference store's own, or one made for the run."""
    store = _store(ctx)
    if store is not None:
        return store.looks
    looks = ctx.__dict__.setdefault("target_looks", TargetLooks())
    assert isinstance(looks, TargetLooks)
    return looks


def _refs(ctx: CheckContext, store: ReferenceStore) -> Iterator[tuple[str, str, list[Any]]]:
    """(array key, chunk key, reference) of every chunk that is a byte range of a file; a malformed one is left
    out here and named by NCZ-REF-RANGE (:func:`_malformed`)."""
    for akey in sorted(ctx.arrays):
        for ckey in chunk_objects(ctx, akey):
            try:
                ref = store.reference(ckey)
            except FormatError as exc:
                ctx.__dict__.setdefault("malformed_refs", {})[ckey] = str(exc).split(f"{ckey}: ", 1)[-1]
                continue
            if isinstance(ref, (list, tuple)) and ref:
                yield akey, ckey, list(ref)


def _malformed(ctx: CheckContext) -> dict[str, str]:
    """chunk key → why its reference is malformed, of the chunks :func:`_refs` left out."""
    found: dict[str, str] = ctx.__dict__.get("malformed_refs", {})
    return found


@rule("NCZ-REF-TARGET", Severity.ERROR, source=f"{BOTH}: a chunk is a byte range of its target file")
def target_unchanged(ctx: CheckContext) -> Iterator[Finding]:
    """Every file the references point into is there and unchanged (size, mtime) since they were made.

    In an Icechunk repository every target icechunk lists is looked for; "changed since" is icechunk's own
    verdict on a probed chunk (its target modified after the time the reference records; a reference
    recording none, as VirtualiZarr's by default, cannot be found "changed"), so a target only unprobed chunks lie in
    is checked with ``--deep`` alone."""
    ice = _icechunk(ctx)
    if ice is not None:
        yield from _ice_targets(ctx, ice)
        return
    store = _store(ctx)
    if store is None:
        return
    urls = sorted({str(ref[0]) for _, _, ref in _refs(ctx, store)} | set(store.targets))
    for url in urls:
        problem = target_problem(url, store.targets.get(url), _looks(ctx))
        if problem is not None:
            yield get("NCZ-REF-TARGET").finding(None, f"{problem}: its references would read wrong bytes or fail")


@rule("NCZ-REF-RANGE", Severity.ERROR, source=f"{BOTH}: [url, offset, length] inside url")
def ranges_inside(ctx: CheckContext) -> Iterator[Finding]:
    """Every reference's byte range lies inside its target file.

    In an Icechunk repository: every probed virtual chunk's last byte is inside its target (icechunk tells
    where the chunk ends and how long the file is only when it is not; a range inside the file is not seen)."""
    ice = _icechunk(ctx)
    if ice is not None:
        yield from _ice_ranges(ctx, ice)
        return
    store = _store(ctx)
    if store is None:
        return
    sizes: dict[str, int | None] = {}
    outside: dict[str, list[str]] = {}
    for akey, ckey, ref in _refs(ctx, store):
        url = str(ref[0])
        if url not in sizes:
            recorded = store.targets.get(url)
            # None: missing or unreachable (NCZ-REF-TARGET names it)
            sizes[url] = target_size(url, recorded is not None and recorded.anonymous, _looks(ctx))
        size = sizes[url]
        if size is None or len(ref) < 3:
            continue
        offset, length = int(ref[1]), int(ref[2])
        if offset < 0 or length < 0 or offset + length > size:
            outside.setdefault(akey, []).append(f"{ckey} reads bytes {offset}-{offset + length} of {url} ({size} "
                                                "bytes)")
    for ckey, why in sorted(_malformed(ctx).items()):
        outside.setdefault(keys.parent(ckey), []).append(f"{ckey} {why}")
    for akey, lines in outside.items():
        for line in lines[:PER_ARRAY]:
            yield get("NCZ-REF-RANGE").finding(line.split(" ", 1)[0], line.split(" ", 1)[1])
        if len(lines) > PER_ARRAY:
            yield get("NCZ-REF-RANGE").finding(akey, f"and {len(lines) - PER_ARRAY} more chunks outside their target")


@rule("NCZ-REF-CODECS", Severity.ERROR,
      source=f"HDF5 filters (H5Z) and the numcodecs codecs reading their bytes; {BOTH}")
def codecs_match_hdf5(ctx: CheckContext) -> Iterator[Finding]:
    """An array referencing an HDF5 dataset declares that dataset's filters as its codecs, and each chunk
    reference is a chunk of the dataset's chunk index (or its contiguous extent).

    In an Icechunk repository whose virtual chunks all lie in one local file (icechunk does not say which file
    a chunk lies in): each array with virtual chunks against the HDF5 dataset at its path, its codecs after
    ``bytes`` (``numcodecs.*``) against the dataset's filters, and each probed chunk's length against the
    length of the dataset's chunk at its grid place (its offset is not known: icechunk does not expose it)."""
    ice = _icechunk(ctx)
    if ice is not None:
        yield from _ice_codecs(ctx, ice)
        return
    store = _store(ctx)
    if store is None:
        return
    by_array: dict[str, dict[str, list[tuple[str, int, int]]]] = {}
    for akey, ckey, ref in _refs(ctx, store):
        if len(ref) >= 3:
            by_array.setdefault(akey, {}).setdefault(str(ref[0]), []).append((ckey, int(ref[1]), int(ref[2])))
    looks = _looks(ctx)
    by_target: dict[str, list[str]] = {}
    for akey, targets in by_array.items():
        for url in targets:
            if (local_path(url) is None and not is_s3_url(url)) or target_problem(url, store.targets.get(url), looks):
                continue  # remote but not S3: not opened here; missing or changed: NCZ-REF-TARGET
            by_target.setdefault(url, []).append(akey)
    found: dict[tuple[str, str], list[Finding]] = {}
    for url, akeys in sorted(by_target.items()):  # each target opened once, for every array in it
        recorded = store.targets.get(url)
        datasets = _hdf5(sorted(akeys), url, recorded is not None and recorded.anonymous, looks)
        for akey, facts in datasets:
            found[(akey, url)] = list(_against_hdf5(akey, url, _declared(ctx, akey), by_array[akey][url], facts))
    for pair in sorted(found):  # array by array, then target by target
        yield from found[pair]


def _declared(ctx: CheckContext, akey: str) -> list[str]:
    """The numcodecs ids a v2 array's ``.zarray`` declares, filters first, then its compressor."""
    zarray = ctx.arrays[akey].zarray or {}
    declared = [str(f.get("id")) for f in (zarray.get("filters") or []) if isinstance(f, dict)]
    compressor = zarray.get("compressor")
    if isinstance(compressor, dict):
        declared.append(str(compressor.get("id")))
    return declared


def _against_hdf5(akey: str, url: str, declared: list[str], chunks: list[tuple[str, int, int]],
                  facts: _Hdf5Dataset | str) -> Iterator[Finding]:
    finding = get("NCZ-REF-CODECS").finding
    if isinstance(facts, str):
        yield finding(akey, facts)
        return
    problem = _filters_problem(akey, url, declared, facts.filters)
    if problem is not None:
        yield finding(akey, problem)
        if problem.endswith("no Zarr codec reads those bytes"):
            return
    extents = set(facts.stored.values())
    strays = [(ckey, offset, length) for ckey, offset, length in chunks if (offset, length) not in extents]
    for ckey, offset, length in strays[:PER_ARRAY]:
        yield finding(ckey, f"bytes {offset}-{offset + length} of {url} are no chunk of its dataset {akey}")
    if len(strays) > PER_ARRAY:
        yield finding(akey, f"and {len(strays) - PER_ARRAY} more references that are no chunk of {akey}")


@dataclass(frozen=True)
class _Hdf5Dataset:
    """What the checks need of one HDF5 dataset: its filters and where its chunks lie."""

    filters: list[tuple[int, str]]  # (H5Z filter id, name), in pipeline order
    chunks: tuple[int, ...] | None  # the chunk shape; None: contiguous
    stored: dict[tuple[int, ...], tuple[int, int]]  # element offset of each stored chunk -> (address, size)


def _hdf5(akeys: list[str], url: str, anonymous: bool = False,
          looks: TargetLooks | None = None) -> Iterator[tuple[str, _Hdf5Dataset | str]]:
    """Each HDF5 dataset ``akeys`` names in the target ``url`` (a local file, or an S3 object read by byte range,
    unsigned where ``anonymous``, held to the version ``looks`` saw), or the one line saying why there is none:
    the file opened once for all of them, one dataset's facts at a time."""
    import h5py

    from nczarr_conformance.sources.netcdf4 import LOCK

    done = 0
    try:
        with LOCK, opened_target(url, anonymous, looks) as target, h5py.File(target, "r") as f:
            for akey in akeys:
                try:
                    facts = _dataset_facts(f, akey, url)
                except (OSError, NczarrError) as exc:
                    facts = f"refers to {url}, which HDF5 cannot open ({exc})"
                yield akey, facts
                done += 1
    except (OSError, NczarrError) as exc:
        for akey in akeys[done:]:
            yield akey, f"refers to {url}, which HDF5 cannot open ({exc})"


def _dataset_facts(f: Any, akey: str, url: str) -> _Hdf5Dataset | str:
    """The filters and chunk extents of the dataset ``akey`` of the open HDF5 file ``f``, or why it has none."""
    import h5py

    dataset = f.get(akey.lstrip("/"))
    if not isinstance(dataset, h5py.Dataset):
        return f"refers to {url}, which holds no HDF5 dataset {akey}"
    plist = dataset.id.get_create_plist()
    filters = []
    for i in range(plist.get_nfilters()):
        fid, _, _, name = plist.get_filter(i)
        filters.append((int(fid), name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)))
    chunks = None if dataset.chunks is None else tuple(int(c) for c in dataset.chunks)
    return _Hdf5Dataset(filters, chunks, _extents(dataset, dataset.ndim))


def _filters_problem(akey: str, url: str, declared: list[str], filters: list[tuple[int, str]]) -> str | None:
    """Why ``declared`` (numcodecs ids) does not read the bytes the HDF5 ``filters`` wrote, or None."""
    unknown = [f"{name} (HDF5 filter {fid})" for fid, name in filters if fid not in HDF5_TO_ZARR]
    if unknown:
        return f"{url}{akey} is stored with {', '.join(unknown)}: no Zarr codec reads those bytes"
    wanted = [HDF5_TO_ZARR[fid] for fid, _ in filters]
    if declared != wanted:
        return f"declares codecs {declared or 'none'} but {url}{akey} is stored with {wanted or 'no filter'}"
    return None


def _extents(dataset: Any, ndim: int) -> dict[tuple[int, ...], tuple[int, int]]:
    """(offset, size) of every stored chunk of ``dataset`` by its element offset, or of its contiguous storage
    (at the origin)."""
    from nczarr_conformance.sources.hdf5_chunks import DirectChunks

    if dataset.chunks is None:
        offset = dataset.id.get_offset()
        return {} if offset is None else {(0,) * ndim: (int(offset), int(dataset.id.get_storage_size()))}
    return {at: (s.address, s.size) for at, s in DirectChunks._stored(dataset).items()}


# ---- Icechunk virtual chunks -------------------------------------------------------------------------------------
def _icechunk(ctx: CheckContext) -> IcechunkStore | None:
    return ctx.store if isinstance(ctx.store, IcechunkStore) else None


def _virtual(ctx: CheckContext, store: IcechunkStore) -> dict[str, list[tuple[tuple[int, ...], str]]]:
    """Array node -> (grid index, key) of each virtual chunk the rules probe: the first and the last of each
    array, every one with ``--deep`` (asked once per check)."""
    cached = ctx.__dict__.get("icechunk_virtual")
    if isinstance(cached, dict):
        return cached
    out: dict[str, list[tuple[tuple[int, ...], str]]] = {}
    for node, doc in sorted(nodes(ctx).docs.items()):
        if not isinstance(doc, dict) or doc.get("node_type") != "array":
            continue
        try:
            encoding = parse_key_encoding(doc.get("chunk_key_encoding"), node)
        except NczarrError:
            continue  # NCZ-V3-SCHEMA names it
        virtual = store.virtual_chunks(node)
        if not ctx.deep and len(virtual) > 2:
            virtual = [virtual[0], virtual[-1]]
        if virtual:
            out[node] = [(index, encoding.key(node, index)) for index in virtual]
    ctx.__dict__["icechunk_virtual"] = out
    return out


def _faults(ctx: CheckContext, store: IcechunkStore) -> list[VirtualFault]:
    """What icechunk refused of the probed virtual chunks (each probed once per check)."""
    cached = ctx.__dict__.get("icechunk_faults")
    if isinstance(cached, list):
        return cached
    probed = [key for chunks in _virtual(ctx, store).values() for _, key in chunks]
    faults = store.probe_virtual(probed)
    ctx.__dict__["icechunk_faults"] = faults
    return faults


def _ice_targets(ctx: CheckContext, store: IcechunkStore) -> Iterator[Finding]:
    finding = get("NCZ-REF-TARGET").finding
    gone: set[str] = set()
    for url in store.virtual_targets():
        problem = target_problem(url, None, _looks(ctx))  # recorded nothing: reachable or not
        if problem is not None:
            gone.add(url)
            yield finding(None, f"{problem}: its virtual chunks would fail")
    changed = sorted({f.target for f in _faults(ctx, store) if f.kind == "changed" and f.target is not None} - gone)
    for url in changed:
        local = local_path(url)
        when = ""
        if local is not None:
            with contextlib.suppress(OSError):  # gone meanwhile: the finding without its time
                when = f" (modified at {os.stat(local).st_mtime:.3f}, after the time they record)"
        yield finding(None, f"target {url} changed since the virtual references were made{when}: icechunk "
                            "refuses its virtual chunks")


def _ice_ranges(ctx: CheckContext, store: IcechunkStore) -> Iterator[Finding]:
    outside = [f for f in _faults(ctx, store) if f.kind == "outside" and f.end is not None]
    if not outside:
        return
    sizes: dict[int, list[str]] = {}
    for url in store.virtual_targets():
        local = local_path(url)
        try:
            if local is not None:
                sizes.setdefault(os.stat(local).st_size, []).append(url)
        except OSError:
            continue  # NCZ-REF-TARGET names it
    by_array: dict[str, list[str]] = {}
    for f in outside:
        size = f.size if f.size is not None else -1
        named = sizes.get(size, [])
        url = named[0] if len(named) == 1 else "its target"
        length = store.get_range(f.key, 0, 0)
        start = f.end - length[1] if length is not None and f.end is not None else None
        span = f"bytes {start}-{f.end}" if start is not None else f"bytes up to {f.end}"
        akey = f.key.rsplit("/c/", 1)[0] if "/c/" in f.key else f.key.rsplit("/", 1)[0]
        by_array.setdefault(akey, []).append(f"{f.key} reads {span} of {url} ({size} bytes)")
    finding = get("NCZ-REF-RANGE").finding
    for akey, lines in sorted(by_array.items()):
        for line in lines[:PER_ARRAY]:
            yield finding(line.split(" ", 1)[0], line.split(" ", 1)[1])
        if len(lines) > PER_ARRAY:
            yield finding(akey, f"and {len(lines) - PER_ARRAY} more chunks outside their target")


def _ice_codecs(ctx: CheckContext, store: IcechunkStore) -> Iterator[Finding]:
    targets = store.virtual_targets()
    if len(targets) != 1:
        return  # icechunk does not say which file each chunk lies in
    url = targets[0]
    local = local_path(url)
    if local is None or target_problem(url, None, _looks(ctx)) is not None:
        return  # remote: not opened here; missing: NCZ-REF-TARGET
    if any(f.kind in ("changed", "outside") for f in _faults(ctx, store)):
        return  # NCZ-REF-TARGET, NCZ-REF-RANGE: what the file holds now is not what was referenced
    finding = get("NCZ-REF-CODECS").finding
    docs = nodes(ctx).docs
    virtual = _virtual(ctx, store)
    for akey, facts in _hdf5(sorted(virtual), url, looks=_looks(ctx)):
        chunks = virtual[akey]
        if isinstance(facts, str):
            yield finding(akey, facts)
            continue
        problem = _filters_problem(akey, url, _v3_declared(docs.get(akey)), facts.filters)
        if problem is not None:
            yield finding(akey, problem)
            continue
        wrong = [line for index, key in chunks if (line := _length_problem(store, akey, url, facts, index, key))]
        for line in wrong[:PER_ARRAY]:
            yield finding(line.split(" ", 1)[0], line.split(" ", 1)[1])
        if len(wrong) > PER_ARRAY:
            yield finding(akey, f"and {len(wrong) - PER_ARRAY} more virtual chunks that are no chunk of {akey}")


def _v3_declared(doc: Any) -> list[str]:
    """The numcodecs ids of a v3 array's bytes-to-bytes codecs (after ``bytes``), as HDF5's filters compare."""
    codecs = doc.get("codecs") if isinstance(doc, dict) else None
    names = [str(c.get("name")) for c in codecs if isinstance(c, dict)] if isinstance(codecs, list) else []
    after = names[names.index("bytes") + 1:] if "bytes" in names else names
    return [name.removeprefix("numcodecs.") for name in after]


def _length_problem(store: IcechunkStore, akey: str, url: str, facts: _Hdf5Dataset, index: tuple[int, ...],
                    key: str) -> str | None:
    """Why the virtual chunk ``key`` cannot be the HDF5 chunk at its grid place (its length differs, or there is
    none), or None."""
    sized = store.get_range(key, 0, 0)
    if sized is None:
        return None
    length = sized[1]
    if facts.chunks is None:
        extent = next(iter(facts.stored.values()), None)
        if extent is not None and length > extent[1]:
            return f"{key} {length} bytes, more than {url}{akey}'s contiguous {extent[1]}"
        return None
    at = tuple(i * c for i, c in zip(index, facts.chunks, strict=False))
    stored = facts.stored.get(at)
    if stored is None:
        return f"{key} refers into {url}, whose {akey} stores no chunk at {list(at)}"
    if stored[1] != length:
        return f"{key} {length} bytes, but {url}{akey}'s chunk at {list(at)} is {stored[1]} bytes (at byte {stored[0]})"
    return None
