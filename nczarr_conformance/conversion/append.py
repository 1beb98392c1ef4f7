"""Extend an existing NCZarr store along a dimension with a new netCDF file (the Pangeo use case).

Everything is checked before anything is written: the new file must have the same groups,
variables, types, dimensions (but the one appended along), chunking and attributes, its
coordinate along the dimension must pass :func:`check_coordinates` (the one rule set
``--concat`` and a multi-file ``--append`` use too: numbers, no NaN, strictly increasing,
after the store's last value so the same append twice is refused, no gap), and its strings
must fit the store's ``maxstrlen``. The input is stamped (:class:`Stamp`) before it is
read and refused if it changed before the commit. A refusal leaves the store
byte-identical. Then only the chunks that change are written: new ones and the edge chunk
the old data ended in; the metadata (.zarray shapes, the dimension's size, ``.zmetadata``
when the store has one) is written last. Directory and zip stores
are rebuilt aside and swapped in (readers see the old dataset or the new one); S3 holds
the metadata back until commit (see stores/s3.py).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.conversion.from_netcdf import _header
from nczarr_conformance.errors import StoreError, UnsupportedError, UsageError
from nczarr_conformance.model import Attribute, Dataset, Group, Variable, is_internal_attribute
from nczarr_conformance.nczarr.consolidated import CONSOLIDATED_KEY, with_updates
from nczarr_conformance.nczarr.flavors import GROUP_PLACE
from nczarr_conformance.nczarr.reader import DatasetReader
from nczarr_conformance.nczarr.writer import _to_storage
from nczarr_conformance.sources import netcdf4 as nc4
from nczarr_conformance.stores import lock_for_writing, open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.staged import rewrite_zip, stage_write
from nczarr_conformance.urls import parse
from nczarr_conformance.zarr3.reader import object_limits

MAX_COMPARE_BYTES = 64 * 1024**2
STRING_SLAB = 1_000_000  # elements read at once when checking incoming strings
GAP_FACTOR = 1.5  # a step between two pieces this many times the median step is a gap


# ---- inputs that change ----------------------------------------------------------------------------
class InputChanged(StoreError):
    """An input changed between its checks and the commit: what was checked is not what would be stored."""


@dataclass(frozen=True)
class Stamp:
    """What identifies an input's content when it was checked.

    A file replaced by rename has another inode (or device); one rewritten in place or
    still being written has another size or modification time. Workers on other hosts may
    see another device number for the same shared file, so they compare without it.
    """

    size: int
    mtime_ns: int
    inode: int
    device: int

    @classmethod
    def of(cls, path: str) -> Stamp:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise StoreError(f"{path}: no such file or directory") from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
        return cls(st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)

    def changes(self, now: Stamp, *, device: bool = True) -> list[str]:
        """How ``now`` differs from this stamp, in words (empty: size, mtime and inode, and device unless told not to,
        are as stamped; a stamp cannot see content rewritten with all of them kept)."""
        out = []
        if self.inode != now.inode or (device and self.device != now.device):
            out.append("replaced by another file")
        if self.size != now.size:
            out.append(f"size {self.size} -> {now.size} bytes")
        if self.mtime_ns != now.mtime_ns:
            out.append("modified")
        return out


def refuse_if_changed(path: str, stamp: Stamp, *, device: bool = True) -> None:
    """InputChanged naming ``path`` when it is gone or differs from ``stamp`` (before any commit)."""
    try:
        now = Stamp.of(path)
    except StoreError:
        changes = ["removed or unreadable"]
    else:
        changes = stamp.changes(now, device=device)
    if changes:
        raise InputChanged(f"{path}: changed since it was checked ({', '.join(changes)}); refused before the "
                           "commit, the output is unchanged")


# ---- coordinate rules (single-file --append, multi-file --append, --concat) ---------------------------
def _check_one(where: str, values: np.ndarray, dim: str) -> None:
    """A coordinate along DIM must be numbers, without NaN, strictly increasing."""
    if values.dtype.kind not in "iuf":  # strings, chars: no order along the dimension to keep
        what = "text" if values.dtype.kind in "OSU" else str(values.dtype)
        raise UsageError(f"{where}: coordinate {dim} holds {what}, not numbers; --concat and --append order "
                         "records by numeric coordinate values")
    if values.dtype.kind == "f" and np.isnan(values).any():
        at = int(np.flatnonzero(np.isnan(values))[0])
        raise UsageError(f"{where}: coordinate {dim} holds NaN (at index {at}): records cannot be ordered by it")
    if values.size > 1:
        down = np.flatnonzero(values[1:] <= values[:-1])  # compared, not np.diff: unsigned steps wrap
        if down.size:
            at = int(down[0]) + 1
            raise UsageError(f"{where}: coordinate {dim} is not increasing (index {at}: {values[at].item()} after "
                             f"{values[at - 1].item()})")


def check_coordinates(dim: str, files: list[tuple[str, np.ndarray]], *, stored: np.ndarray | None = None,
                      store: str = "the store", allow_gaps: bool = False) -> list[int]:
    """The order of ``files`` (path, coordinate values) along DIM; UsageError naming the file and the rule.

    The one rule set of ``--append`` (one file or several) and ``--concat``, so that
    appending files one by one and all at once accept and refuse the same inputs:

    * each file's values, and the store's, are numbers without NaN, strictly increasing.
      A store holding NaN is refused too (naming it): its last value, which new records
      must follow, is unknown, and taking the last finite one would let records dated
      before the NaN's true value in (CF also forbids missing coordinate values);
    * files are ordered by their first value; a file whose values overlap the previous
      one's is refused;
    * after a store (``stored``): a file holding any of the store's values is "already
      appended", one whose values start at or before the store's last value is refused;
    * a step between two pieces (the store, then each file) over ``GAP_FACTOR`` times the
      median step of all the values is a gap, refused unless ``allow_gaps``.
    """
    for where, values in files:
        _check_one(where, values, dim)
    if stored is not None:
        _check_one(store, stored, dim)
    order = sorted(range(len(files)), key=lambda n: files[n][1][0].item() if files[n][1].size else 0)
    pieces = [files[n] for n in order if files[n][1].size]
    for (prev, a), (path, b) in itertools.pairwise(pieces):
        if b[0] <= a[-1]:
            raise UsageError(f"{path}: coordinate {dim} values from {b[0].item()} overlap {prev} (up to "
                             f"{a[-1].item()})")
    if stored is not None and stored.size:
        _check_after(dim, pieces, stored)
        pieces = [(store, stored), *pieces]
    _check_gaps(dim, pieces, store, allow_gaps)
    return order


def _check_after(dim: str, pieces: list[tuple[str, np.ndarray]], stored: np.ndarray) -> None:
    last = stored[-1]
    for path, values in pieces:
        if values[0] > last:
            break
        if np.isin(values, stored).any():
            raise UsageError(f"{path}: coordinate {dim} values {values[:3].tolist()}… are already in the store: "
                             "this append was done already")
        raise UsageError(f"{path}: coordinate {dim} values from {values[0].item()} are not after the store's last "
                         f"value {last.item()}")


def _check_gaps(dim: str, pieces: list[tuple[str, np.ndarray]], store: str, allow_gaps: bool) -> None:
    if allow_gaps or len(pieces) < 2:
        return
    steps = np.diff(np.concatenate([np.asarray(v, dtype="f8") for _, v in pieces]))
    if steps.size < 2:
        return
    usual = float(np.median(steps))
    for (prev, a), (path, b) in itertools.pairwise(pieces):
        if float(b[0]) - float(a[-1]) > GAP_FACTOR * usual:
            where = "the store" if prev == store else prev
            raise UsageError(f"{path}: gap in coordinate {dim} before it ({a[-1].item()} in {where}, then "
                             f"{b[0].item()}; the usual step is {usual:g}); --allow-gaps accepts it")


@dataclass
class AppendStats:
    records: int = 0
    chunks_written: int = 0
    metadata_written: int = 0
    objects_written: int = 0
    seconds: float = 0.0


def _find_dim(model: Dataset, name: str) -> str:
    if name.startswith("/"):
        model.find_dimension(name)
        return name
    for gkey, group in model.root.walk():
        if name in group.dimensions:
            return keys.join(gkey, name)
    raise UsageError(f"no dimension {name!r} in the store")


def _attrs_json(attrs: dict[str, Any]) -> str:
    from nczarr_conformance.model import attribute_to_json

    return json.dumps({n: attribute_to_json(a) for n, a in sorted(attrs.items())}, sort_keys=True)


class PureZarrAttributes:
    """How a store without netCDF types (flavor ``zarr``: xarray's, zarr-python's, GDAL's) is compared with a
    new file: attributes as the JSON values stored in ``.zattrs`` (netCDF attribute types do not survive
    JSON, so a ``short`` in the file and the number read back cannot be compared by type), less what xarray's
    ``to_zarr`` adds on its own where it changes nothing the new values mean (append_v3's rules: a
    ``calendar: proleptic_gregorian`` on CF times from 1582-10-15 on, a NaN ``_FillValue``); and the file's
    ``_FillValue`` against the array's ``fill_value`` where the store keeps the fill there alone, as
    xarray does in Zarr v2 (every Zarr reader takes it as the fill, xarray as ``_FillValue``)."""

    def __init__(self, reader: DatasetReader, variables: dict[str, Any]) -> None:
        self.reader = reader
        self.variables = variables

    def _stored(self, key: str) -> dict[str, Any]:
        raw = self.reader.meta.get(keys.join(key, ".zattrs")) or {}
        return {k: v for k, v in raw.items() if not is_internal_attribute(k) and k != "_ARRAY_DIMENSIONS"}

    def differ(self, key: str, new: Group | Variable) -> bool:
        from nczarr_conformance.conversion.attribute_json import _same_json, _written_attributes, _xarray_encoding_added

        stored = self._stored(key)
        written = _written_attributes(new.attributes, None)  # no type given: _FillValue as a plain JSON value
        if isinstance(new, Variable):
            if "_FillValue" in written and "_FillValue" not in stored:
                if not self._fill_is(key, new.attributes["_FillValue"]):
                    return True
                del written["_FillValue"]
            stored = _xarray_encoding_added(stored, written, new.type, self.variables.get(key))
        return not _same_json(stored, written)

    def _fill_is(self, key: str, attr: Attribute) -> bool:
        """Whether the array's ``fill_value`` is the file's ``_FillValue`` (NaN equal to NaN)."""
        fill = self.reader.arrays[key].fill
        if fill is None or attr.type in ("char", "string"):
            return False
        ours, theirs = np.asarray(fill).ravel(), np.asarray(attr.value).ravel()[:1]
        if ours.dtype.kind not in "iuf" or ours.size != 1:
            return False
        return bool(np.array_equal(ours.astype("f8"), theirs.astype("f8"), equal_nan=True)
                    if ours.dtype.kind == "f" else ours.astype(theirs.dtype)[0] == theirs[0])


def _compare(old: Group, new: Group, path: str, dim: str, problems: list[str], *, chunks: bool = True,
             pure: PureZarrAttributes | None = None) -> None:
    """Every difference between the store's group ``old`` and the new file's ``new`` that an append refuses.

    ``chunks=False``: chunk shapes are not compared, for an append that reads the new rows by region and
    encodes them into the store's own grid (a single-file ``--append``); the multi-file path places file
    chunks as they are and needs them equal. ``pure``: the store has no netCDF types (see
    :class:`PureZarrAttributes`)."""
    if set(old.groups) != set(new.groups):
        problems.append(f"{path}: groups {sorted(old.groups)} in the store, {sorted(new.groups)} in the new file")
    if set(old.variables) != set(new.variables):
        problems.append(f"{path}: variables {sorted(old.variables)} in the store, {sorted(new.variables)} in the file")
    for name, dim_old in old.dimensions.items():
        fqn = keys.join(path, name)
        dim_new = new.dimensions.get(name)
        if dim_new is None:
            problems.append(f"{fqn}: dimension missing from the new file")
        elif fqn != dim and dim_old.size != dim_new.size:
            problems.append(f"{fqn}: size {dim_old.size} in the store, {dim_new.size} in the new file")
    if pure.differ(path, new) if pure is not None else _attrs_json(old.attributes) != _attrs_json(new.attributes):
        problems.append(f"{path}: group attributes differ")
    for name in sorted(set(old.variables) & set(new.variables)):
        a, b = old.variables[name], new.variables[name]
        vkey = keys.join(path, name)
        if a.type != b.type:
            problems.append(f"{vkey}: type {a.type} in the store, {b.type} in the new file")
        if a.dimensions != b.dimensions:
            problems.append(f"{vkey}: dimensions {a.dimensions} in the store, {b.dimensions} in the new file")
        if chunks and b.chunks and a.chunks and list(a.chunks) != list(b.chunks):
            problems.append(f"{vkey}: chunks {a.chunks} in the store, {b.chunks} in the new file")
        if pure.differ(vkey, b) if pure is not None else _attrs_json(a.attributes) != _attrs_json(b.attributes):
            problems.append(f"{vkey}: attributes differ")
    for name in sorted(set(old.groups) & set(new.groups)):
        _compare(old.groups[name], new.groups[name], keys.join(path, name), dim, problems, chunks=chunks, pure=pure)


def append(src: str, dst: str, dim_name: str, *, allow_gaps: bool = False) -> AppendStats:
    """Append the records of the netCDF file ``src`` to the store ``dst`` along ``dim_name``.

    The store's writer lock is held from before the checks read it until the new dataset is
    in place (or the write aborted): a second writer is refused at once, never appended over a
    dataset about to change. ``src`` is stamped before it is opened and checked again just
    before the commit: a file replaced, rewritten or still growing meanwhile is refused
    (:class:`InputChanged`), as is any read error while it changed, so no mix of two versions
    of it is ever committed.
    """
    with lock_for_writing(dst):
        for holds, append_to in OTHER_LAYOUTS:  # Zarr v3 (xarray's layout): its own chunks and zarr.json
            if holds(dst):
                return append_to(src, dst, dim_name, allow_gaps=allow_gaps)
        return _append_unlocked(src, dst, dim_name, allow_gaps=allow_gaps)


class LayoutAppend(Protocol):
    def __call__(self, srcs: str | list[str], dst: str, dim_name: str, *, allow_gaps: bool = False) -> AppendStats:
        ...


#: (does ``dst`` hold this layout, append to it) for each layout other than Zarr v2, tried first: append_v3.py
#: adds Zarr v3's when it is imported (the package's ``__init__`` imports it), so this module never imports it
OTHER_LAYOUTS: list[tuple[Callable[[str], bool], LayoutAppend]] = []


def _append_unlocked(src: str, dst: str, dim_name: str, *, allow_gaps: bool) -> AppendStats:
    started = time.perf_counter()
    spec = parse(dst)
    stamp = Stamp.of(src)
    try:
        stats = _append(src, spec, dst, dim_name, stamp, allow_gaps)
    except Exception as exc:
        if not isinstance(exc, InputChanged):
            refuse_if_changed(src, stamp)  # a read error from a file being rewritten is that, not a bug
        raise
    stats.seconds = time.perf_counter() - started
    return stats


def _append(src: str, spec: Any, dst: str, dim_name: str, stamp: Stamp, allow_gaps: bool) -> AppendStats:
    stats = AppendStats()
    reader_store = open_store(spec, "r")
    nc = nc4.open_nc(src, check="all")  # what netCDF-4 hides would be lost without a word: refused
    try:
        reader = DatasetReader(reader_store)
        old = reader.dataset
        variables: dict[str, Any] = {}
        with nc4.LOCK:
            new = Dataset(_header(nc, "/", variables))
        dim = _find_dim(old, dim_name)
        problems: list[str] = []
        # the new rows are read by region and encoded into the store's grid (_merged_chunk): chunks may differ
        _compare(old.root, new.root, "/", dim, problems, chunks=False,
                 pure=PureZarrAttributes(reader, variables) if reader.flavor == "zarr" else None)
        if problems:
            raise UsageError(f"cannot append {src}: {problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                                      if len(problems) > 1 else ""))
        old_len = old.find_dimension(dim).size
        n_new = new.find_dimension(dim).size  # the plan: every read below stays within these records
        if n_new == 0:
            raise UsageError(f"{src}: dimension {dim} is empty; nothing to append")
        if dim in variables and dim in reader.arrays:
            check_coordinates(dim, [(src, nc4.read_values(variables[dim]))], stored=reader.read_variable(dim),
                              store=dst, allow_gaps=allow_gaps)
        along = {}  # variable key → axis along dim
        for gkey, group in old.root.walk():
            for vname, var in group.variables.items():
                vkey = keys.join(gkey, vname)
                if dim in var.dimensions:
                    along[vkey] = var.dimensions.index(dim)
                else:
                    _check_unchanged(reader, vkey, variables[vkey])
        plan = {vkey: _affected_chunks(reader, vkey, axis, old_len, n_new) for vkey, axis in along.items()}
        for vkey, axis in along.items():
            _check_values(reader, vkey, axis, variables[vkey])
        meta_keys = _metadata_keys(reader, along, dim)
        if reader_store.get(CONSOLIDATED_KEY) is not None:
            meta_keys.append(CONSOLIDATED_KEY)  # rewritten below: a write-once zip must not copy the old one
        writer_store = _open_for_append(spec, reader_store, {k for v in plan.values() for k, _ in v} | set(meta_keys))
        try:
            for vkey, chunks in plan.items():
                for ckey, index in chunks:
                    data = _merged_chunk(reader, vkey, along[vkey], index, old_len, n_new, variables[vkey])
                    writer_store.put(ckey, reader.arrays[vkey].pipeline.encode(data))
                    stats.chunks_written += 1
            updated = _updated_metadata(reader, along, dim, old_len + n_new)
            consolidated = _updated_consolidated(reader_store, updated)
            if consolidated is not None:
                updated[CONSOLIDATED_KEY] = consolidated  # last: readers that trust it see the rest first
            for key, value in updated.items():
                writer_store.put(key, value)
                stats.metadata_written += 1
            stats.objects_written = writer_store.writes
            refuse_if_changed(src, stamp)  # every read is done: the records written are the ones checked
            writer_store.commit()
        except BaseException:
            writer_store.abort()
            raise
        stats.records = n_new
    finally:
        nc4.close_nc(nc)
        reader_store.close()
    return stats


def _check_unchanged(reader: DatasetReader, vkey: str, ncvar: Any) -> None:
    info = reader.arrays[vkey]
    if math.prod(info.zshape or (1,)) * info.storage.numpy.itemsize > MAX_COMPARE_BYTES:
        return
    stored = reader.read_variable(vkey)
    incoming = nc4.read_values(ncvar)
    same = stored.shape == incoming.shape and (
        (stored.dtype == object and stored.tolist() == incoming.tolist())
        or (stored.dtype != object
            and np.asarray(stored).tobytes() == np.asarray(incoming).astype(stored.dtype).tobytes()))
    if not same:
        raise UsageError(f"{vkey}: does not use the appended dimension but its values differ in the new file")


def _check_values(reader: DatasetReader, vkey: str, axis: int, ncvar: Any) -> None:
    """Every incoming value must be storable (strings within maxstrlen, no trailing NUL), before any write."""
    info = reader.arrays[vkey]
    if info.storage.nctype != "string":
        return
    shape = tuple(ncvar.shape)
    if not shape:
        _to_storage(nc4.read_values(ncvar), "string", info.storage.numpy, vkey)
        return
    rows = max(1, STRING_SLAB // max(1, math.prod(shape[1:])))
    for start in range(0, shape[0], rows):
        region = (slice(start, min(start + rows, shape[0])), *(slice(0, n) for n in shape[1:]))
        _to_storage(nc4.read_values(ncvar, region), "string", info.storage.numpy, vkey)


def _updated_consolidated(store: Store, updated: dict[str, bytes]) -> bytes | None:
    """The store's ``.zmetadata`` with the updated objects in it, or None when it has none."""
    raw = store.get(CONSOLIDATED_KEY)
    return None if raw is None else with_updates(raw, updated)


def _affected_chunks(reader: DatasetReader, vkey: str, axis: int, old_len: int,
                     n_new: int) -> list[tuple[str, tuple[int, ...]]]:
    info = reader.arrays[vkey]
    shape = list(info.zshape)
    shape[axis] = old_len + n_new
    grid = [math.ceil(s / c) if s else 0 for s, c in zip(shape, info.chunks, strict=True)]
    first = old_len // info.chunks[axis]
    ranges = [range(first, g) if i == axis else range(g) for i, g in enumerate(grid)]
    return [(info.chunk_key(index), index) for index in itertools.product(*ranges)]


def _merged_chunk(reader: DatasetReader, vkey: str, axis: int, index: tuple[int, ...], old_len: int, n_new: int,
                  ncvar: Any) -> np.ndarray:
    info = reader.arrays[vkey]
    existing = reader.read_chunk(info, index)
    chunk = existing.copy() if existing is not None else np.full(info.chunks, info.fill, dtype=info.storage.numpy)
    total = old_len + n_new
    shape = list(info.zshape)
    shape[axis] = total
    lo = [i * c for i, c in zip(index, info.chunks, strict=True)]
    hi = [min(start + c, s) for start, c, s in zip(lo, info.chunks, shape, strict=True)]
    start_new = max(lo[axis], old_len)
    if start_new >= hi[axis]:
        return chunk
    src_region = tuple(slice(start_new - old_len, hi[axis] - old_len) if i == axis else slice(start, stop)
                       for i, (start, stop) in enumerate(zip(lo, hi, strict=True)))
    values = nc4.read_values(ncvar, src_region)
    block = _to_storage(values, info.storage.nctype, info.storage.numpy, vkey)
    dst = tuple(slice(start_new - lo[axis], hi[axis] - lo[axis]) if i == axis else slice(0, stop - start)
                for i, (start, stop) in enumerate(zip(lo, hi, strict=True)))
    if info.order == "F":
        chunk = np.asfortranarray(chunk)
    chunk[dst] = block
    return np.ascontiguousarray(chunk) if info.order == "C" else np.asfortranarray(chunk)


def _group_object(reader: DatasetReader, gkey: str) -> tuple[str, str] | None:
    place = GROUP_PLACE.get(reader.flavor)
    if place is None:
        return None
    return keys.join(gkey, place[0]), place[1]


def _metadata_keys(reader: DatasetReader, along: dict[str, int], dim: str) -> list[str]:
    out = [keys.join(v, ".zarray") for v in along]
    where = _group_object(reader, keys.parent(dim))
    if where is not None:
        out.append(where[0])
    return out


def _updated_metadata(reader: DatasetReader, along: dict[str, int], dim: str, total: int) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for vkey, axis in along.items():
        zarray = dict(reader.arrays[vkey].zarray)
        shape = list(zarray["shape"])
        shape[axis] = total
        zarray["shape"] = shape
        out[keys.join(vkey, ".zarray")] = json.dumps(zarray, ensure_ascii=False).encode()
    where = _group_object(reader, keys.parent(dim))
    if where is not None:
        key, member = where
        doc = dict(reader.meta.get(key) or {})
        piece = doc if member == "" else dict(doc.get(member) or {})
        dims_member = "dimensions" if "dimensions" in piece else "dims"
        dims = dict(piece.get(dims_member) or {})
        unlimited = reader.dataset.find_dimension(dim).unlimited
        dims[keys.basename(dim)] = {"size": total, "unlimited": 1} if unlimited else total
        piece[dims_member] = dims
        if member:
            doc[member] = piece
        else:
            doc = piece
        out[key] = json.dumps(doc, ensure_ascii=False).encode()
    return out


def rewritten_zip(spec: Any, reader_store: Store, replaced: set[str], *, at_top: bool = False) -> Store:
    """A zip is write-once: a new one under a temporary name holding every entry of the old one but
    ``replaced`` (the objects about to be written), copied as stored (stores/staged.py's :func:`rewrite_zip`,
    held to the reader's size rule: a zip bomb is refused, not inflated whole)."""
    return rewrite_zip(spec, reader_store, replaced, object_limits(reader_store), at_top=at_top).store


def _open_for_append(spec: Any, reader_store: Store, replaced: set[str]) -> Store:
    """The store to write into: in place for directories and S3, a rewritten copy for zip (write-once)."""
    if spec.kind == "zip":
        return rewritten_zip(spec, reader_store, replaced)
    try:
        return stage_write(spec, append=True).store
    except StoreError:
        raise
    except Exception as exc:  # pragma: no cover - defensive
        raise UnsupportedError(f"cannot append to {spec.url}: {exc}") from exc
