"""``nczarr-fix --to-v3``: a Zarr v2 store's metadata (any NCZarr flavor our reader reads, or pure Zarr)
rewritten as pure Zarr v3, every chunk object kept under its key, byte for byte.

Why a plan like the fixes' (:class:`~nczarr_conformance.fix.plan.Plan`): the apply path of
``fix/apply.py`` then carries it out with the same guarantees (in place the old store or the
migrated one, never a mix; a backup beside the store; ``--out``; ``--dry-run`` prints the diff).
The plan creates one ``zarr.json`` per group and array and removes every v2 metadata object
(``.zarray``, ``.zattrs``, ``.zgroup``, ``.zmetadata`` and NCZarr 1.0's ``.ncz*`` objects); chunks
are neither read nor written.

The ``zarr.json`` documents are the v3 writer's own (:class:`~nczarr_conformance.zarr3.writer.V3Writer`:
key order, ``dimension_names``, attributes and ``_FillValue`` as xarray encodes them, groups,
consolidated metadata in the root, and its one line naming what v3 does not keep); only what must
differ for the chunk bytes to stay is planned here (:class:`MigrationWriter`):

* ``chunk_key_encoding`` ``v2`` with the array's ``dimension_separator``, so every chunk keeps its key;
* the data type from the chunk's numpy dtype: numbers by name with ``bytes`` in the stored byte order,
  char (``>S1``, NCZarr 1.0's one-byte ``<U1``) and NCZarr strings (``|S<n>``, Appendix E) as
  ``null_terminated_bytes`` of their width (the bytes as stored; the v3 writer's ``string`` +
  ``vlen-utf8`` would need the chunks re-encoded), ``<U<n>`` as ``fixed_length_utf32``;
* the codecs: ``order: "F"`` as a ``transpose``, then ``bytes``, then the v2 filters and compressor
  as bytes→bytes codecs holding the same bytes: ``blosc``, ``zstd``, ``gzip`` as the core codecs
  (their frames are numcodecs', as in v2), every other one as ``numcodecs.<id>`` (``zlib``,
  ``shuffle`` with netcdf-c's ``elementsize`` 0 read as the element size, as netcdf-c reads it…),
  which zarr-python reads. A filter that works on array values (``delta``, ``fixedscaleoffset``…)
  or a codec zarr-python has no v3 form of is refused in one line naming the array and the codec:
  this migration never re-encodes a chunk;
* ``fill_value`` the value unwritten cells read as in v2 (our reader's, which is netcdf-c's:
  the ``.zarray`` fill, else ``_FillValue``, else netCDF's default), in v3's JSON form;
* a netCDF scalar (NCZarr's shape ``[1]``) a 0-d array, whose v2-encoded chunk key is ``0`` as before.
"""
from __future__ import annotations

import base64
import copy
import json
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import NO_DATASET, FormatError, NoDatasetError, UnsupportedError, UsageError
from nczarr_conformance.fix.plan import ObjectEdit, Plan
from nczarr_conformance.fix.registry import READERS, Change
from nczarr_conformance.model import Variable
from nczarr_conformance.nczarr.flavors import load_json
from nczarr_conformance.nczarr.reader import ArrayInfo, DatasetReader
from nczarr_conformance.stores.base import Store
from nczarr_conformance.stores.memory import MemoryStore
from nczarr_conformance.zarr3.metadata import ZARR_JSON, KeyEncoding
from nczarr_conformance.zarr3.nz_writer import NzWriter
from nczarr_conformance.zarr3.v3_writer import (
    BLOSC_SHUFFLE,
    DATA_TYPES,
    V3Plan,
    V3Writer,
    fill_json,
    refuse_flavor,
)

#: the label of the migration's changes and backup manifest (not a registered fix: it runs only when asked)
TO_V3 = "NCZ-FIX-TO-V3"
#: every Zarr v2 / NCZarr metadata object name: removed when the migration commits
V2_METADATA = frozenset({".zarray", ".zattrs", ".zgroup", ".zmetadata",
                         ".nczarr", ".nczgroup", ".nczarray", ".nczvar", ".nczattrs", ".nczattr"})
#: v2 codec ids whose numcodecs bytes are a v3 core codec's (zarr-python's own migration maps them so)
CORE = frozenset({"blosc", "zstd", "gzip"})
#: numcodecs ids zarr-python 3.1.6 reads as ``numcodecs.<id>`` bytes→bytes codecs (zarr/codecs/numcodecs)
NUMCODECS_BYTES = frozenset({"zlib", "shuffle", "bz2", "lzma", "lz4", "crc32", "crc32c", "adler32", "fletcher32",
                             "jenkins_lookup3"})
#: numcodecs ids that work on array values (v3 array→array codecs): no reader of ours decodes them in v3
ARRAY_FILTERS = frozenset({"delta", "fixedscaleoffset", "quantize", "bitround", "astype", "packbits", "categorize"})


def _refuse(akey: str, what: str) -> UnsupportedError:
    return UnsupportedError(f"{akey}: {what}; not migrated (the chunks would have to be re-encoded)")


def v3_codecs(akey: str, zarray: dict[str, Any], info: ArrayInfo) -> list[dict[str, Any]]:
    """The v3 codec chain decoding ``akey``'s stored chunks as its v2 ``.zarray`` decodes them."""
    itemsize = int(info.storage.numpy.itemsize)
    codecs: list[dict[str, Any]] = []
    if info.order == "F" and len(info.zshape) > 1:
        codecs.append({"name": "transpose", "configuration": {"order": list(range(len(info.zshape)))[::-1]}})
    numpy = info.storage.numpy
    if itemsize == 1 or numpy.kind == "S":
        codecs.append({"name": "bytes"})
    else:
        codecs.append({"name": "bytes", "configuration": {"endian": "big" if numpy.byteorder == ">" else "little"}})
    filters = zarray.get("filters") or []
    compressor = zarray.get("compressor")
    if not isinstance(filters, list) or not all(isinstance(f, dict) for f in filters) or \
            (compressor is not None and not isinstance(compressor, dict)):
        raise FormatError(f"{keys.join(akey, '.zarray')}: filters/compressor are not codec objects")
    for config in [*filters, *([compressor] if compressor is not None else [])]:
        codecs.append(_bytes_codec(akey, config, itemsize))  # v2 filters and compressor: on the bytes
    return codecs


def _bytes_codec(akey: str, config: dict[str, Any], itemsize: int) -> dict[str, Any]:
    cfg = copy.deepcopy(config)
    cid = cfg.pop("id", None)
    if not isinstance(cid, str):
        raise FormatError(f"{keys.join(akey, '.zarray')}: a codec without an 'id': {json.dumps(config)}")
    if cid in ARRAY_FILTERS:
        raise _refuse(akey, f"filter {cid!r} works on array values (a v3 array→array codec numcodecs.{cid}, which "
                            "this reader does not decode)")
    if cid == "blosc":
        shuffle = cfg.get("shuffle", 1)
        return {"name": "blosc", "configuration": {
            "typesize": itemsize, "cname": cfg.get("cname", "lz4"), "clevel": int(cfg.get("clevel", 5)),
            "shuffle": BLOSC_SHUFFLE.get(int(shuffle), "shuffle") if not isinstance(shuffle, str) else shuffle,
            "blocksize": int(cfg.get("blocksize", 0))}}
    if cid == "zstd":
        return {"name": "zstd", "configuration": {"level": int(cfg.get("level", 0)),
                                                  "checksum": bool(cfg.get("checksum", False))}}
    if cid == "gzip":
        return {"name": "gzip", "configuration": {"level": int(cfg.get("level", 1))}}
    if cid not in NUMCODECS_BYTES:
        raise _refuse(akey, f"codec {cid!r} has no Zarr v3 form zarr-python reads")
    if cid == "shuffle" and str(cfg.get("elementsize", 0)).strip() in ("0", ""):
        cfg["elementsize"] = itemsize  # netcdf-c's 0 means the element size (numcodecs reads 0 as no shuffle)
    return {"name": f"numcodecs.{cid}", "configuration": cfg}


def v3_data_type(akey: str, info: ArrayInfo) -> Any:
    """The v3 data type holding the stored chunk bytes as they are."""
    numpy = info.storage.numpy
    if numpy.kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": int(numpy.itemsize)}}
    if numpy.kind == "U":
        return {"name": "fixed_length_utf32", "configuration": {"length_bytes": int(numpy.itemsize)}}
    if info.storage.nctype in DATA_TYPES:
        return DATA_TYPES[info.storage.nctype]
    raise _refuse(akey, f"its dtype {numpy.str} has no Zarr v3 data type")


def v3_fill(info: ArrayInfo) -> Any:
    """The fill unwritten cells read as in v2, in the v3 data type's JSON form."""
    numpy = info.storage.numpy
    if numpy.kind == "S":
        raw = info.fill if isinstance(info.fill, bytes) else str(info.fill).encode("utf-8")
        return base64.b64encode(raw[:numpy.itemsize]).decode("ascii")
    if numpy.kind == "U":
        return info.fill.decode("utf-8") if isinstance(info.fill, bytes) else str(info.fill)
    return fill_json(info.storage.nctype, info.fill)


class MigrationWriter(V3Writer):
    """The v3 writer's metadata for a store read by our v2 reader, planned so that every chunk stays."""

    def __init__(self, reader: DatasetReader, target: Store) -> None:
        super().__init__(reader.dataset, target, flavor="zarr")
        self.reader = reader

    def _plan_array(self, akey: str, var: Variable) -> V3Plan:
        info = self.reader.arrays[akey]
        codecs = v3_codecs(akey, info.zarray, info)
        data_type = v3_data_type(akey, info)
        zshape = () if var.is_scalar else tuple(info.zshape)
        chunks = () if var.is_scalar else tuple(info.chunks)
        numpy = info.storage.numpy
        return V3Plan(akey, var, zshape, chunks, json.dumps(data_type), numpy, v3_fill(info), None, None, None, 0,
                      data_type=data_type, codecs=codecs, codec_objects=[],
                      fill_attribute=var.attributes.get("_FillValue"),
                      key_encoding=KeyEncoding("v2", info.separator))

    def _array_doc(self, plan: V3Plan) -> dict[str, Any]:
        """The writer's document; in pure Zarr without ``_ARRAY_DIMENSIONS`` no ``dimension_names`` (the
        reader's ``_Anonymous_Dim_<size>`` are netcdf-c's reading, not names the store holds)."""
        doc = super()._array_doc(plan)
        if self.reader.flavor == "zarr" and "dimension_names" in doc:
            zattrs = self.reader.meta.get(keys.join(plan.key, ".zattrs")) or {}
            if "_ARRAY_DIMENSIONS" not in zattrs:
                del doc["dimension_names"]
        return doc

    def _not_kept(self) -> list[str]:
        lines = super()._not_kept()
        one_byte = [k for k, i in self.reader.arrays.items() if i.storage.nctype == "string"
                    and i.storage.numpy == np.dtype("S1")]
        if one_byte:
            lines.append("strings of length 1 (|S1) are one-byte null_terminated_bytes in v3, read back as char: "
                         + ", ".join(one_byte))
        return lines

    def migrate(self) -> tuple[dict[str, bytes], list[str]]:
        """Every ``zarr.json`` (key → bytes) and the lines naming what v3 does not keep."""
        self.validate()
        self.plan()
        self.write_metadata()
        assert isinstance(self.store, MemoryStore)
        docs = {k: self.store.get(k) for k in self.store.list_prefix("/") if keys.basename(k) == ZARR_JSON}
        return {k: v for k, v in docs.items() if v is not None}, list(self.notes)


class NzMigrationWriter(MigrationWriter, NzWriter):
    """``--to-v3 --flavor nz``: the migration's arrays (every chunk kept) with NZ-1.0's attributes on
    every node (zarr3/nz_writer.py: ``conventions``, the ``zarr_conventions`` registration,
    ``_FillValue`` apart from ``fill_value``, ``_nczarr_attr`` types), checked as nc2nczarr's NZ
    output is (one length per dimension label within a group, no char, no float attribute mixing numbers with
    NaN, else refused in one line), and refuses string arrays, whose kept chunks need a data_type object."""

    def validate(self) -> None:
        super().validate()
        kept = [k for k, i in self.reader.arrays.items() if i.storage.nctype == "string"]
        if kept:
            # refused, not written: the store would fail NZ's own validator (issue 34)
            raise UnsupportedError(
                f"NZ-1.0 cannot hold the strings of {', '.join(kept)} as --to-v3 keeps their chunks "
                "(null_terminated_bytes of their stored width: a data_type object NZ-1.0's schema.json refuses); "
                "nc2nczarr --zarr-format 3 --flavor nz writes them as string")


#: the v3 layouts --to-v3 writes, each by its writer
MIGRATION_WRITERS: dict[str, type[MigrationWriter]] = {"zarr": MigrationWriter, "nz": NzMigrationWriter}


def plan_to_v3(store: Store, flavor: str = "zarr") -> Plan:
    """The migration of ``store`` as a plan (nothing written): ``zarr.json`` objects created, the v2
    metadata objects removed. UnsupportedError (one line) when a chunk could not stay as it is."""
    refuse_flavor(flavor)
    if flavor not in MIGRATION_WRITERS:  # the draft: its strings and char types are not the v2 chunks' bytes
        raise UsageError(f"--flavor {flavor} is not written by --to-v3; nc2nczarr --zarr-format 3 "
                         f"--flavor {flavor} writes it from the source netCDF file")
    all_keys = store.list_prefix("/")
    raw: dict[str, bytes] = {}
    for key in all_keys:
        if keys.basename(key) in V2_METADATA or keys.basename(key) == ZARR_JSON:
            data = store.get(key)
            if data is not None:
                raw[key] = data
    if "/.zgroup" not in raw and "/.zarray" not in raw:
        if "/zarr.json" in raw:  # a run that committed (a rerun after a kill lands here): nothing left to do
            return Plan("zarr-v3", frozenset(READERS), [], [], [], ["already Zarr v3 (/zarr.json, no /.zgroup): "
                                                                    "nothing to migrate"], list(all_keys), raw)
        raise NoDatasetError(NO_DATASET)
    if "/.zgroup" not in raw:
        raise UnsupportedError("a single array at the root (no /.zgroup) is not migrated; only datasets (groups)")
    _refuse_stale_consolidated(raw)
    reader = DatasetReader(store)
    docs, notes = MIGRATION_WRITERS[flavor](reader, MemoryStore()).migrate()
    edits = [ObjectEdit(key, raw.get(key), data, (TO_V3,)) for key, data in sorted(docs.items())]
    edits += [ObjectEdit(key, data, None, (TO_V3,)) for key, data in sorted(raw.items())
              if keys.basename(key) in V2_METADATA]
    changes = [Change(TO_V3, e.key, "created" if e.old is None else ("removed" if e.new is None else "rewritten"))
               for e in edits]
    return Plan(reader.flavor, frozenset(READERS), edits, [], changes, notes, list(all_keys), raw)


def _refuse_stale_consolidated(raw: dict[str, bytes]) -> None:
    """The v2 reader trusts ``/.zmetadata``: a stale one would be migrated instead of the objects."""
    if "/.zmetadata" not in raw:
        return
    doc = load_json(raw["/.zmetadata"], "/.zmetadata")
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        raise FormatError("/.zmetadata: no 'metadata' object; run nczarr-fix (NCZ-FIX-CONSOLIDATE) first")
    for key, data in raw.items():
        if keys.basename(key) in (".zarray", ".zattrs", ".zgroup") and meta.get(key.lstrip("/")) != \
                load_json(data, key):
            raise UsageError(f"/.zmetadata is stale ({key.lstrip('/')} differs): run nczarr-fix first "
                             "(NCZ-FIX-CONSOLIDATE), then --to-v3")


__all__ = ["TO_V3", "MigrationWriter", "plan_to_v3", "v3_codecs"]
