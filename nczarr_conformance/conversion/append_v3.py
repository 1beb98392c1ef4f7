"""``nc2nczarr --append`` onto a Zarr v3 store (xarray's and zarr-python 3's layout, issue #25), and
``--zarr-format 3 --concat`` (:func:`concat_v3`: the first file converted, the others appended).

Several files are appended in coordinate order in one transaction, in this process (the v2
path's dask cluster plans v2 chunks and metadata: not used here).

What is shared with the v2 append (conversion/append.py) and used as it is: the writer lock
taken before the store is read, the input's :class:`Stamp` checked again just before the
commit, :func:`check_coordinates` (numbers, increasing, after the store's last value, no gap),
the check that variables without the dimension hold the same values, and the stores' own
transaction (a directory is rebuilt aside from hard links and swapped in; a zip is rewritten
under a temporary name and renamed): readers see the old dataset or the new one.

What differs in v3, and why:

* dimensions are ``dimension_names``, shared by name within a group as xarray means them: the
  append dimension is every dimension of that name, in every group (xarray appends group by
  group along the name); each of them must have the store's length;
* attributes are compared as the JSON values a v3 writer stores for the new file's attributes
  (netCDF attribute types do not survive JSON, so model types cannot be compared);
* chunks are encoded with the array's own codec chain read from its ``zarr.json`` (``transpose``,
  ``bytes`` with its byte order or ``vlen-utf8``/``vlen-bytes``, the bytes→bytes codecs), so an
  xarray-written store grows with its own codecs; a chunk (or shard) that becomes all fill and
  was never written is not written, as the v3 writer leaves it out (numbers; string chunks are written);
* ``sharding_indexed``: the unit written is the whole shard. Appending into a partly filled last
  shard reads that shard's inner chunks, merges the new rows and writes the shard again (its
  inner chunks and its index, with ``crc32c`` when the array has it), inside the same
  transaction as everything else;
* metadata: each grown array's ``zarr.json`` with its new ``shape`` (nothing else changed, key
  order kept), then the root ``zarr.json`` with the consolidated metadata updated, last.

On S3 the store's own transaction is the prefix's marker and the order of PUTs (stores/s3.py):
the chunks and rewritten shards first (outside the old shapes, or holding the old values), then
the root ``zarr.json`` deleted, the arrays' ``zarr.json`` PUT, the root's last; a kill leaves the
old dataset or, inside that last phase, one no reader opens (never a readable mix), and the
next append removes the dead one's chunks outside every grid.

Refused in one line (exit 2), store untouched: a store in netcdf-c's draft NCZarr v3 layout
(its dimensions live in ``_nczarr_*`` attributes a shape change alone would leave stale), one
declaring NZ-1.0 (typed attributes and ``_FillValue`` in NZ's forms, which the comparison and the
chunk fill of a pure v3 append do not speak) and an array whose chunk grid is not regular.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.codecs import crc32c_codec
from nczarr_conformance.conversion.append import (
    OTHER_LAYOUTS,
    AppendStats,
    InputChanged,
    Stamp,
    _check_unchanged,
    _check_values,
    check_coordinates,
    refuse_if_changed,
    rewritten_zip,
)
from nczarr_conformance.conversion.attribute_json import _same_json, _written_attributes, _xarray_encoding_added
from nczarr_conformance.conversion.from_netcdf import _header
from nczarr_conformance.errors import FormatError, StoreError, UnsupportedError, UsageError
from nczarr_conformance.model import Dataset, Group, is_internal_attribute
from nczarr_conformance.nczarr.writer import _all_fill, _to_storage
from nczarr_conformance.sources import netcdf4 as nc4
from nczarr_conformance.stores import ZipStore, open_store
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.staged import StagedWrite, publish, stage_write
from nczarr_conformance.urls import StoreSpec, parse
from nczarr_conformance.zarr3 import nz
from nczarr_conformance.zarr3.chain import MAX_UINT64, Chain, Sharding
from nczarr_conformance.zarr3.metadata import ZARR_JSON
from nczarr_conformance.zarr3.reader import V3ArrayInfo, V3Reader, is_v3


def is_v3_store(dst: str) -> bool:
    """Whether ``dst`` holds a Zarr v3 dataset (a root ``zarr.json`` and no v2 root)."""
    spec = parse(dst)
    try:
        store = open_store(spec, "r")
    except Exception:  # the v2 path reports a missing or unreadable store in its own words
        return False
    try:
        return is_v3(store)
    finally:
        store.close()


# ---- encoding with an array's own chain -------------------------------------------------------------
def encode_chunk(chain: Chain, arr: np.ndarray, fill: Any) -> bytes:
    """One chunk (C order of ``chain.chunk_shape``, storage dtype) → its stored bytes: transposes, the
    array→bytes codec, the bytes→bytes codecs, in the order :meth:`Chain.decode` undoes them."""
    for order in chain.transposes:
        arr = arr.transpose(order)
    if chain.sharding is not None:
        buf: Any = encode_shard(chain.sharding, arr, fill)
    elif chain.array_to_bytes == "vlen-utf8":
        import numcodecs  # here, not at the top: the conversion package imports this module for every command

        buf = numcodecs.VLenUTF8().encode(np.ascontiguousarray(arr).ravel())
    elif chain.array_to_bytes == "vlen-bytes":
        import numcodecs

        flat = [v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")
                for v in np.ascontiguousarray(arr).ravel().tolist()]
        buf = numcodecs.VLenBytes().encode(np.array(flat, dtype=object))
    else:
        # kept typed: blosc takes its typesize (the shuffle's element size) from the buffer's item size
        buf = np.ascontiguousarray(arr.astype(chain.dtype.numpy_for(chain.endian), copy=False))
    for codec in chain.compressors:
        buf = codec.encode(buf)
    return buf if isinstance(buf, bytes) else np.ascontiguousarray(buf).tobytes()


def encode_shard(sharding: Sharding, arr: np.ndarray, fill_value: Any) -> bytes:
    """A whole shard: its inner chunks that are not all fill (C order), then (or before) the index."""
    fill = np.full(sharding.inner.chunk_shape, fill_value, dtype=arr.dtype)
    table = np.full((*sharding.per_shard, 2), MAX_UINT64, dtype="<u8")
    parts: list[bytes] = []
    offset = sharding.index_nbytes if sharding.index_at_start else 0
    shape = sharding.inner.chunk_shape
    for pos in np.ndindex(*sharding.per_shard):
        block = arr[tuple(slice(p * c, (p + 1) * c) for p, c in zip(pos, shape, strict=True))]
        if is_fill(block, fill):
            continue
        payload = encode_chunk(sharding.inner, np.ascontiguousarray(block), fill_value)
        table[pos] = (offset, len(payload))
        parts.append(payload)
        offset += len(payload)
    index = table.astype(">u8" if sharding.index_endian == "big" else "<u8").tobytes()
    if sharding.index_crc:
        index = bytes(crc32c_codec().encode(index))
    return index + b"".join(parts) if sharding.index_at_start else b"".join(parts) + index


def is_fill(block: np.ndarray, fill: np.ndarray) -> bool:
    """Whether every value of ``block`` is the fill (bytewise for numbers: NaN fills count)."""
    if block.dtype.kind == "O":
        return bool(np.all(block == fill.ravel()[0]))
    return _all_fill(np.ascontiguousarray(block), fill)


# ---- the plan ----------------------------------------------------------------------------------------
@dataclass
class Grown:
    """One array that grows: its axis along the dimension, its ``zarr.json``, its unit (chunk or shard)."""

    key: str
    axis: int
    info: V3ArrayInfo
    doc: dict[str, Any]
    unit: tuple[int, ...]

    @property
    def chain(self) -> Chain:
        assert self.info.chain is not None
        return self.info.chain


@dataclass
class Piece:
    """One input file: its stamp, open handle, variables, records and where they go among the new ones."""

    path: str
    stamp: Stamp
    nc: Any = None
    variables: dict[str, Any] = field(default_factory=dict)
    length: int = 0
    offset: int = 0


def append_v3(srcs: str | list[str], dst: str, dim_name: str, *, allow_gaps: bool = False) -> AppendStats:
    """Append the records of the netCDF file(s) ``srcs`` to the Zarr v3 store ``dst`` along the
    dimension named ``dim_name``, several files in coordinate order and in one transaction.

    The caller holds the store's writer lock (conversion/append.py's :func:`append` and
    conversion/concat.py's multi-file ``--append`` take it and call this when the store is v3).
    """
    started = time.perf_counter()
    paths = [srcs] if isinstance(srcs, str) else list(srcs)
    spec = parse(dst)
    pieces = [Piece(path, Stamp.of(path)) for path in paths]
    try:
        stats = _append(pieces, spec, dst, dim_name, allow_gaps)
    except Exception as exc:
        if not isinstance(exc, InputChanged):
            for piece in pieces:
                refuse_if_changed(piece.path, piece.stamp)  # a read error from a file being rewritten is that
        raise
    stats.seconds = time.perf_counter() - started
    return stats


def _append(pieces: list[Piece], spec: StoreSpec, dst: str, dim_name: str, allow_gaps: bool) -> AppendStats:
    stats = AppendStats()
    reader_store = open_store(spec, "r")
    try:
        reader = V3Reader(reader_store)
        _refuse_layout(reader_store)
        name = keys.basename(dim_name) if dim_name.startswith("/") else dim_name
        old_len, grown = 0, dict[str, Grown]()
        for piece in pieces:
            piece.nc = nc4.open_nc(piece.path, check="all")  # what netCDF-4 hides would be lost: refused
            with nc4.LOCK:
                new = Dataset(_header(piece.nc, "/", piece.variables))
            old_len, grown = _plan(reader, reader_store, new, name, piece.path, piece.variables)
            piece.length = _new_length(new, name, piece.path)
        pieces[:] = _ordered(reader, pieces, dim_name, name, dst, allow_gaps)
        n_new = 0
        for piece in pieces:
            piece.offset, n_new = n_new, n_new + piece.length
            for gkey, group in reader.dataset.root.walk():
                for vname in group.variables:
                    vkey = keys.join(gkey, vname)
                    if vkey not in grown:
                        _check_unchanged(reader, vkey, piece.variables[vkey])
            for vkey, g in grown.items():
                _check_values(reader, vkey, g.axis, piece.variables[vkey])
        units = {vkey: _units(g, old_len, n_new) for vkey, g in grown.items()}
        metadata = _metadata(reader_store, reader, grown, old_len + n_new)
        replaced = {g.info.encoding.key(vkey, i) for vkey, g in grown.items() for i in units[vkey]} | set(metadata)
        writer_store = _open_for_append(spec, reader_store, replaced)
        try:
            for vkey, g in grown.items():
                for index in units[vkey]:
                    data = _merged_unit(reader, g, index, old_len, n_new, pieces)
                    if data is None:
                        continue
                    writer_store.put(g.info.encoding.key(vkey, index), data)
                    stats.chunks_written += 1
            for key, payload in metadata.items():
                writer_store.put(key, payload)  # the root's zarr.json is the last of them
                stats.metadata_written += 1
            stats.objects_written = writer_store.writes
            for piece in pieces:  # every read is done: the records written are the ones checked
                refuse_if_changed(piece.path, piece.stamp)
            writer_store.commit()
        except BaseException:
            writer_store.abort()
            raise
        stats.records = n_new
    finally:
        for piece in pieces:
            if piece.nc is not None:
                nc4.close_nc(piece.nc)
        reader_store.close()
    return stats


def _ordered(reader: V3Reader, pieces: list[Piece], dim_name: str, name: str, dst: str,
             allow_gaps: bool) -> list[Piece]:
    """The files in coordinate order, after :func:`check_coordinates` (the v2 append's rules) passed."""
    coord = _coordinate(reader, dim_name, name)
    if coord is None or any(coord not in p.variables for p in pieces):
        return pieces
    files = [(p.path, nc4.read_values(p.variables[coord])) for p in pieces]
    order = check_coordinates(name, files, stored=reader.read_variable(coord), store=dst, allow_gaps=allow_gaps)
    return [pieces[n] for n in order]


def _refuse_layout(store: Store) -> None:
    root = json.loads(store.get(keys.join("/", ZARR_JSON)) or b"{}")
    attributes = root.get("attributes") or {}
    if any(str(k).startswith("_nczarr") for k in attributes):
        raise UnsupportedError("/zarr.json: netcdf-c's draft NCZarr v3 layout (_nczarr_* attributes); --append "
                               "grows pure Zarr v3 stores only (issue #25)")
    if nz.claims(root):
        raise UnsupportedError("/zarr.json: the NZ-1.0 layout (its attribute types and _FillValue are NZ's, not "
                               "what a pure Zarr v3 append compares and writes); --append grows pure Zarr v3 stores "
                               "only (issue #25)")


def _new_length(new: Dataset, name: str, src: str) -> int:
    sizes = {d.size for _, group in new.root.walk() for n, d in group.dimensions.items() if n == name}
    if not sizes:
        raise UsageError(f"{src}: no dimension {name!r}")
    if len(sizes) > 1:
        raise UsageError(f"{src}: dimension {name!r} has lengths {sorted(sizes)} in different groups")
    n_new = int(sizes.pop())
    if n_new == 0:
        raise UsageError(f"{src}: dimension {name} is empty; nothing to append")
    return n_new


def _coordinate(reader: V3Reader, dim_name: str, name: str) -> str | None:
    group = keys.parent(dim_name) if dim_name.startswith("/") else "/"
    vkey = keys.join(group, name)
    return vkey if vkey in reader.arrays else None


def _plan(reader: V3Reader, store: Store, new: Dataset, name: str, src: str,
          variables: dict[str, Any]) -> tuple[int, dict[str, Grown]]:
    """The store's length along ``name`` and each array that grows; UsageError on any mismatch.
    ``variables``: the new file's netCDF4 variables by key (a few values are read to judge a calendar)."""
    problems: list[str] = []
    _compare(reader.dataset.root, new.root, "/", name, problems, store, variables)
    if problems:
        raise UsageError(f"cannot append {src}: {problems[0]}" + (f" (and {len(problems) - 1} more)"
                                                                  if len(problems) > 1 else ""))
    grown: dict[str, Grown] = {}
    lengths: dict[int, str] = {}
    for gkey, group in reader.dataset.root.walk():
        for vname, var in group.variables.items():
            vkey = keys.join(gkey, vname)
            axes = [i for i, d in enumerate(var.dimensions) if keys.basename(d) == name]
            if not axes:
                continue
            info = reader.arrays[vkey]
            assert isinstance(info, V3ArrayInfo)
            if info.chain is None:
                raise UnsupportedError(info.unavailable or f"{vkey}: no codec chain")
            doc = _own_doc(store, vkey)
            unit = tuple(int(c) for c in doc["chunk_grid"]["configuration"]["chunk_shape"])
            grown[vkey] = Grown(vkey, axes[0], info, doc, unit)
            lengths.setdefault(info.zshape[axes[0]], vkey)
    if not grown:
        raise UsageError(f"no dimension {name!r} in the store")
    if len(lengths) > 1:
        (a, va), (b, vb) = list(lengths.items())[:2]
        raise UsageError(f"dimension {name!r} has length {a} in {va} and {b} in {vb}: the store is not one "
                         "dataset along it")
    return next(iter(lengths)), grown


def _own_doc(store: Store, vkey: str) -> dict[str, Any]:
    """The array's own ``zarr.json`` (not its consolidated copy): the object rewritten."""
    key = keys.join(vkey, ZARR_JSON)
    raw = store.get(key)
    if raw is None:
        raise FormatError(f"{key}: missing (the consolidated metadata names an array that is not there)")
    doc = json.loads(raw)
    grid = doc.get("chunk_grid")
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        raise UnsupportedError(f"{key}: chunk grid {grid!r}; --append grows regular grids only")
    return dict(doc)


def _stored_attributes(doc: dict[str, Any] | None) -> dict[str, Any]:
    raw = (doc or {}).get("attributes") or {}
    return {k: v for k, v in raw.items() if not is_internal_attribute(k) and k != "_ARRAY_DIMENSIONS"}


def _compare(old: Group, new: Group, path: str, name: str, problems: list[str], store: Store,
             variables: dict[str, Any]) -> None:
    """append.py's comparison in v3 terms: dimensions by name, attributes as stored JSON (less what
    xarray adds on its own: :func:`_xarray_encoding_added`). Chunk shapes are not compared: the new
    rows are read by region and encoded into the store's own grid, as xarray's append does."""
    if set(old.groups) != set(new.groups):
        problems.append(f"{path}: groups {sorted(old.groups)} in the store, {sorted(new.groups)} in the new file")
    if set(old.variables) != set(new.variables):
        problems.append(f"{path}: variables {sorted(old.variables)} in the store, {sorted(new.variables)} in the file")
    group_doc = json.loads(store.get(keys.join(path, ZARR_JSON)) or b"null")
    if not _same_json(_stored_attributes(group_doc), _written_attributes(new.attributes, None)):
        problems.append(f"{path}: group attributes differ")
    for vname in sorted(set(old.variables) & set(new.variables)):
        a, b = old.variables[vname], new.variables[vname]
        vkey = keys.join(path, vname)
        if a.type != b.type:
            problems.append(f"{vkey}: type {a.type} in the store, {b.type} in the new file")
        names_a = [keys.basename(d) for d in a.dimensions]
        names_b = [keys.basename(d) for d in b.dimensions]
        if names_a != names_b:
            problems.append(f"{vkey}: dimensions {names_a} in the store, {names_b} in the new file")
        else:
            for dname, sa, sb in zip(names_a, a.shape, b.shape, strict=True):
                if dname != name and sa != sb:
                    problems.append(f"{keys.join(path, dname)}: size {sa} in the store, {sb} in the new file")
        doc = json.loads(store.get(keys.join(vkey, ZARR_JSON)) or b"null")
        written = _written_attributes(b.attributes, b.type)
        stored = _xarray_encoding_added(_stored_attributes(doc), written, b.type, variables.get(vkey))
        if not _same_json(stored, written):
            problems.append(f"{vkey}: attributes differ")
    for gname in sorted(set(old.groups) & set(new.groups)):
        _compare(old.groups[gname], new.groups[gname], keys.join(path, gname), name, problems, store, variables)


# ---- the chunks ---------------------------------------------------------------------------------------
def _units(g: Grown, old_len: int, n_new: int) -> list[tuple[int, ...]]:
    """The grid units (chunks, or shards) holding any new record: from the one the old data ends in."""
    shape = list(g.info.zshape)
    shape[g.axis] = old_len + n_new
    grid = [math.ceil(s / c) if s else 0 for s, c in zip(shape, g.unit, strict=True)]
    first = old_len // g.unit[g.axis]
    ranges = [range(first, n) if i == g.axis else range(n) for i, n in enumerate(grid)]
    return list(itertools.product(*ranges))


def _merged_unit(reader: V3Reader, g: Grown, index: tuple[int, ...], old_len: int, n_new: int,
                 pieces: list[Piece]) -> bytes | None:
    """The stored bytes of one unit: the store's values (inner chunk by inner chunk), the new rows
    over them from each file they come from; None when it is all fill and was never written."""
    info = g.info
    inner = info.chunks
    per = tuple(u // c for u, c in zip(g.unit, inner, strict=True))
    unit = np.full(g.unit, info.fill, dtype=info.storage.numpy)
    existed = False
    lo = [i * u for i, u in zip(index, g.unit, strict=True)]
    if lo[g.axis] < old_len:  # the unit the old data ends in: read what it holds
        for pos in np.ndindex(*per):
            at = tuple(i * p + q for i, p, q in zip(index, per, pos, strict=True))
            chunk = reader.read_chunk(info, at)
            if chunk is not None:
                existed = True
                unit[tuple(slice(q * c, (q + 1) * c) for q, c in zip(pos, inner, strict=True))] = chunk
    shape = list(info.zshape)
    shape[g.axis] = old_len + n_new
    hi = [min(start + u, s) for start, u, s in zip(lo, g.unit, shape, strict=True)]
    for piece in pieces:  # each file's rows inside [lo, hi) along the axis
        first = max(lo[g.axis], old_len + piece.offset)
        last = min(hi[g.axis], old_len + piece.offset + piece.length)
        if first >= last:
            continue
        base = old_len + piece.offset
        src_region = tuple(slice(first - base, last - base) if i == g.axis else slice(a, b)
                           for i, (a, b) in enumerate(zip(lo, hi, strict=True)))
        values = nc4.read_values(piece.variables[g.key], src_region)
        block = _to_storage(values, info.storage.nctype, info.storage.numpy, g.key)
        dst = tuple(slice(first - lo[g.axis], last - lo[g.axis]) if i == g.axis else slice(0, b - a)
                    for i, (a, b) in enumerate(zip(lo, hi, strict=True)))
        unit[dst] = block
    fill = np.full(g.unit, info.fill, dtype=info.storage.numpy)
    if not existed and _all_fill(unit, fill):  # the v3 writer's rule, strings included (those it writes)
        return None
    return encode_chunk(g.chain, unit, info.fill)


# ---- the metadata -------------------------------------------------------------------------------------
def _metadata(store: Store, reader: V3Reader, grown: dict[str, Grown], total: int) -> dict[str, bytes]:
    """Every ``zarr.json`` that changes, in writing order: the arrays, then groups holding consolidated
    metadata (deepest first), the root last."""
    shapes: dict[str, list[int]] = {}
    out: dict[str, bytes] = {}
    for vkey, g in grown.items():
        shape = list(g.info.zshape)
        shape[g.axis] = total
        shapes[vkey] = shape
        out[keys.join(vkey, ZARR_JSON)] = _dump(dict(g.doc, shape=shape))
    groups = [gkey for gkey, _ in reader.dataset.root.walk()]
    for gkey in sorted(groups, key=lambda k: (-len(keys.split(k)), k)):
        key = keys.join(gkey, ZARR_JSON)
        raw = store.get(key)
        if raw is None:
            continue
        doc = json.loads(raw)
        if _update_consolidated(doc, gkey, shapes):
            out[key] = _dump(doc)
    return out


def _update_consolidated(doc: dict[str, Any], gkey: str, shapes: dict[str, list[int]]) -> bool:
    """Set the new shapes in ``doc``'s consolidated metadata (and in nested groups' copies); whether any changed."""
    block = doc.get("consolidated_metadata")
    if not isinstance(block, dict) or not isinstance(block.get("metadata"), dict):
        return False
    changed = False
    for path, entry in block["metadata"].items():
        if not isinstance(entry, dict):
            continue
        node = keys.join(gkey, path)
        if node in shapes and entry.get("node_type") == "array":
            entry["shape"] = shapes[node]
            changed = True
        elif entry.get("node_type") == "group":
            changed = _update_consolidated(entry, node, shapes) or changed
    return changed


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False, allow_nan=False, indent=2).encode("utf-8")


def _open_for_append(spec: StoreSpec, reader_store: Store, replaced: set[str]) -> Store:
    """In place for a directory (rebuilt aside by the store), a rewritten copy for a zip (write-once):
    every entry but those about to be written is copied as stored, under the same layout (entries at
    the top of the zip, as zarr-python reads them, or in a folder)."""
    if spec.kind != "zip":
        return stage_write(spec, append=True).store
    at_top = getattr(reader_store, "prefix", None) in ("", "/")  # the reader's "/" is the top of the zip
    return rewritten_zip(spec, reader_store, replaced, at_top=at_top)


# ---- --concat into a new Zarr v3 store ------------------------------------------------------------------
def concat_v3(files: list[str], dst: str, dim_name: str, *, overwrite: bool = False, allow_gaps: bool = False,
              shard: int | None = None, consolidate: bool | None = None,
              flavor: str = "zarr") -> tuple[AppendStats, list[str]]:
    """``nc2nczarr --zarr-format 3 --concat``: the files in coordinate order into a new v3 store ``dst``;
    the stats and the first conversion's warnings (what v3 does not keep).

    Built as its definition says: the first file converted, the others appended (:func:`append_v3`,
    one transaction), in a private directory beside ``dst`` (``.NAME.partial-PID-…``, a dead run's
    leftovers are removed by the next writer; for S3, in the system's temporary directory); then
    every input's stamp is checked and the result is written into ``dst`` as any new store is (a
    directory built aside and swapped in, a zip under a temporary name, S3 objects with every
    ``zarr.json`` held until the chunks are up), under the writer lock held from the start.
    A refusal or an interrupt leaves ``dst`` as it was. Runs in this process (no cluster).
    """
    from nczarr_conformance import safety
    from nczarr_conformance.conversion.from_netcdf import convert
    from nczarr_conformance.stores import lock_for_writing

    started = time.perf_counter()
    spec = parse(dst)
    if spec.kind in ("file", "zip") and not overwrite and os.path.lexists(spec.path):
        raise StoreError(f"{spec.path}: exists (use --overwrite to replace it)")
    with lock_for_writing(spec):
        # S3: the prefix opened for writing now, so a dataset there without --overwrite is refused before any work
        target = stage_write(spec, overwrite=overwrite) if spec.kind == "s3" else None
        stamps = [(path, Stamp.of(path)) for path in files]
        try:
            ordered = _files_in_order(files, dim_name, allow_gaps)
            # the stage: beside a local store (same file system, swapped in), in the temporary directory for S3
            work = Path(tempfile.mkdtemp(prefix=".nczarr-concat-")) if target is not None \
                else safety.make_temp_dir(Path(os.path.realpath(spec.path)))
        except BaseException:
            if target is not None:
                target.abort()
            raise
        try:
            stage = str(work / "stage.zarr")
            first = convert(ordered[0], stage, flavor=flavor, zarr_format=3, shard=shard, consolidate=consolidate)
            stats = append_v3(ordered[1:], stage, dim_name, allow_gaps=allow_gaps) if len(ordered) > 1 \
                else AppendStats()
            stats.records = _length_of(stage, dim_name)
            for path, stamp in stamps:
                refuse_if_changed(path, stamp)
            stats.objects_written = _publish(stage, target or stage_write(spec, overwrite=overwrite))
        except BaseException:
            if target is not None:
                target.abort()  # (an abort after a commit or an abort does nothing)
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    stats.seconds = time.perf_counter() - started
    return stats, first.warnings


def _files_in_order(files: list[str], dim_name: str, allow_gaps: bool) -> list[str]:
    """The files ordered by their coordinate along the dimension (check_coordinates' rules), or as given
    when they have no such coordinate variable."""
    name = keys.basename(dim_name) if dim_name.startswith("/") else dim_name
    coords = []
    for path in files:
        nc = nc4.open_nc(path)
        try:
            var = nc.variables.get(name)
            if var is None:
                return files
            coords.append((path, nc4.read_values(var)))
        finally:
            nc4.close_nc(nc)
    return [files[n] for n in check_coordinates(name, coords, allow_gaps=allow_gaps)]


def _length_of(stage: str, dim_name: str) -> int:
    store = open_store(stage, "r")
    try:
        reader = V3Reader(store)
        name = keys.basename(dim_name) if dim_name.startswith("/") else dim_name
        sizes = [d.size for _, g in reader.dataset.root.walk() for n, d in g.dimensions.items() if n == name]
        return int(sizes[0]) if sizes else 0
    finally:
        store.close()


def _publish(stage: str, target: StagedWrite) -> int:
    """Every object of the staged store into ``target`` (opened for writing a new store), the ``zarr.json``
    objects last (the root's at the very end); committed, or aborted on any error. Returns the objects written."""
    source = open_store(stage, "r")
    try:
        if isinstance(target.store, ZipStore):
            target.store.entries_at_top()  # where zarr-python's ZipStore looks, as the v3 writer puts it
        return publish(source, target, lambda k: (keys.basename(k) == ZARR_JSON, k == keys.join("/", ZARR_JSON), k))
    finally:
        source.close()


OTHER_LAYOUTS.append((is_v3_store, append_v3))  # append.py's append() hands a v3 store over to append_v3()
