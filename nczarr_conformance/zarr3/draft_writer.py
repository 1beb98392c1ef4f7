"""Canonical model → netcdf-c's DRAFT NCZarr v3 layout (netcdf-c PR #3068, unmerged), as zformat3.c writes it.

``--zarr-format 3 --flavor nczarr-v3-draft``. The v3 writer's plan and chunk loop (zarr3/writer.py)
are reused; what differs follows ``libnczarr/zformat3.c`` of DennisHeimbigner/netcdf-c ``v3plug.dmh``
(zformat3.c blob 718d69c; zarr3/draft.py says where each key is read):

* every group's attributes hold ``_nczarr_group`` (dimensions ``{name: {size, unlimited}}``, ``arrays``,
  ``groups``) and the root's ``_nczarr_superblock`` ``{"version": "3.0.0"}`` (ZF3_encode_nczarr_group,
  ZF3_encode_superblock); every array's ``_nczarr_array`` (``dimension_references`` by full name,
  ``scalar: 1`` on a 0-d variable, ``storage: "chunked"``, ``nczarr_type`` for char and string)
  (ZF3_encode_nczarr_array); every node's ``_nczarr_attrs.attribute_types`` ``{name: type}``, the
  ``_nczarr_*`` entries typed ``json`` (ZF3_encode_attributes);
* char as ``uint8``, string as raw bits ``r<8*maxstrlen>`` NUL padded, the length in the variable's
  ``_nczarr_maxstrlen`` (128, or the longest value when longer, as our v2 writer sizes ``|S``);
* a ``bytes`` codec with its ``endian`` first in every chain, the ``default`` key encoding with ``/``,
  ``fill_value`` in every array (``null`` for NOFILL, as zformat3.c writes it).

One deliberate difference: zformat3.c writes a char or string fill as a JSON string, which the v3
spec does not allow for ``uint8`` or ``r<bits>`` (zarr-python 3.1.6 refuses to open such an array:
"Invalid type: ... Expected an integer"); we write the spec's forms, an integer and a list of bytes,
which zarr3/draft.py reads too (nczarr-check's NCZ-V3-DRAFT-FILL names the code's form).
No shards: the draft has none.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from nczarr_conformance import keys
from nczarr_conformance.errors import UsageError
from nczarr_conformance.model import Attribute, Group, Variable, is_internal_attribute
from nczarr_conformance.nczarr import attrs as attr_codec
from nczarr_conformance.nczarr.dtypes import DEFAULT_FILL, DEFAULT_MAXSTRLEN
from nczarr_conformance.nczarr.writer import ArrayPlan, ChunkEncoder, _to_storage
from nczarr_conformance.zarr3.draft import ARRAY, ATTRS, GROUP, SUPERBLOCK
from nczarr_conformance.zarr3.v3_writer import DATA_TYPES, ChunkCodec, V3Plan, V3Writer, fill_json

#: zformat3.c ZF3_encode_superblock: ``"%d.0.0"`` of the NCZarr format 3
SUPERBLOCK_VALUE = {"version": "3.0.0"}


def attribute_type(nctype: str) -> str:
    """The type zformat3.c records for an attribute: its alias for char/string, else the v3 data type."""
    return nctype if nctype in ("char", "string") else DATA_TYPES[nctype]


def encode_attributes(attributes: dict[str, Attribute], bookkeeping: dict[str, Any]) -> dict[str, Any]:
    """User attributes, then the ``_nczarr_*`` objects, then ``_nczarr_attrs`` typing all of them (itself too)."""
    out: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, attr in attributes.items():
        if is_internal_attribute(name):
            continue
        value, _ = attr_codec.encode(attr, json_convention=False)
        out[name] = value
        types[name] = attribute_type(attr.type)
    for name, value in bookkeeping.items():
        out[name] = value
        types[name] = "json"
    types[ATTRS] = "json"
    out[ATTRS] = {"attribute_types": types}
    return out


class DraftWriter(V3Writer):
    """:class:`V3Writer` writing the draft NCZarr v3 layout (no shards, no consolidated metadata)."""

    def __init__(self, *args: Any, shard: int | None = None, **kwargs: Any) -> None:
        if shard is not None:
            raise UsageError("--shard: the draft NCZarr v3 layout (netcdf-c PR #3068) has no shards")
        kwargs["flavor"] = "zarr"  # V3Writer's machinery; the layout is this class's
        kwargs["consolidate"] = False  # zformat3.c writes none
        super().__init__(*args, **kwargs)

    def _not_kept(self) -> list[str]:
        """The draft keeps unlimited dimensions, dimensions by full name and attribute types; only NOFILL
        is written in a form other v3 readers refuse."""
        nofill = [keys.join(g, v) for g, group in self.ds.root.walk() for v, var in group.variables.items()
                  if var.no_fill]
        return [f"NOFILL written as fill_value null, as zformat3.c writes it (the v3 spec and zarr-python "
                f"refuse it): {', '.join(nofill)}"] if nofill else []

    def _plan_array(self, akey: str, var: Variable) -> ArrayPlan:
        plan = super()._plan_array(akey, var)
        assert isinstance(plan, V3Plan)
        endian = "big" if var.endianness == "big" else "little"
        codecs = [{"name": "bytes", "configuration": {"endian": endian}}, *plan.codecs[1:]]
        fill = var.fill_value if var.fill_value is not None else var.storage_fill
        if fill is None:
            fill = b"\x00" if var.type == "char" else DEFAULT_FILL[var.type]
        if var.type == "char":
            plan.storage, plan.data_type = np.dtype("S1"), "uint8"
            raw = fill if isinstance(fill, bytes) else str(fill).encode("latin-1")
            plan.fill_json = (raw[:1] or b"\x00")[0]
        elif var.type == "string":
            width = max(DEFAULT_MAXSTRLEN, self._longest_string(akey, var))
            plan.storage, plan.data_type, plan.maxstrlen = np.dtype(f"S{width}"), f"r{8 * width}", width
            plan.fill_storage = _to_storage(np.array(str(fill), dtype=object), "string", plan.storage, akey)
            plan.fill_json = list(str(fill).encode("utf-8").ljust(width, b"\0"))
        else:
            plan.fill_json = fill_json(var.type, fill)
        if var.no_fill:
            plan.fill_json = None
        plan.dtype_text = json.dumps(plan.data_type)
        plan.codecs = codecs
        return plan

    def _pipeline(self, plan: ArrayPlan) -> ChunkEncoder:
        """``bytes`` then the compressors, strings included (fixed-width raw bits, not vlen-utf8)."""
        assert isinstance(plan, V3Plan)
        return ChunkCodec(plan.codec_objects, vlen=False, nbytes=math.prod(plan.chunks) * plan.storage.itemsize)

    # ---- metadata ----------------------------------------------------------------------------------
    def write_metadata(self) -> None:
        for akey, plan in self.plans.items():
            assert isinstance(plan, V3Plan)
            self._put_node(akey, self._draft_array_doc(plan))
        for gkey, group in reversed(list(self.ds.root.walk())):
            self._put_node(gkey, self._group_doc(gkey, group))

    def _group_doc(self, gkey: str, group: Group) -> dict[str, Any]:
        """ZF3_encode_group's keys, then ``attributes`` (ZF3_upload_grp)."""
        info = {"dimensions": {n: {"size": d.size, "unlimited": 1 if d.unlimited else 0}
                               for n, d in group.dimensions.items()},
                "arrays": list(group.variables), "groups": list(group.groups)}
        bookkeeping: dict[str, Any] = {GROUP: info}
        if gkey == "/":
            bookkeeping[SUPERBLOCK] = dict(SUPERBLOCK_VALUE)
        return {"node_type": "group", "zarr_format": 3,
                "attributes": encode_attributes(group.attributes, bookkeeping)}

    def _draft_array_doc(self, plan: V3Plan) -> dict[str, Any]:
        """ZF3_encode_var's keys in its order, then ``attributes`` (ZF3_upload_var)."""
        var = plan.var
        info: dict[str, Any] = {"dimension_references": list(var.dimensions)}
        if var.is_scalar:
            info["scalar"] = 1
        info["storage"] = "chunked"
        if var.type in ("char", "string"):
            info["nczarr_type"] = var.type
        attributes = dict(var.attributes)
        if var.type == "string":
            attributes["_nczarr_maxstrlen"] = Attribute("int", np.array([plan.maxstrlen], dtype="i4"))
        encoded = encode_attributes({n: a for n, a in attributes.items() if n != "_nczarr_maxstrlen"},
                                    {ARRAY: info})
        if var.type == "string":  # a dual attribute netcdf-c keeps as an ordinary int attribute
            encoded = {"_nczarr_maxstrlen": plan.maxstrlen, **encoded}
            encoded[ATTRS]["attribute_types"] = {"_nczarr_maxstrlen": "int32", **encoded[ATTRS]["attribute_types"]}
        return {"node_type": "array", "zarr_format": 3, "data_type": plan.data_type, "fill_value": plan.fill_json,
                "shape": list(plan.zshape),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(plan.chunks)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "dimension_names": [keys.basename(d) for d in var.dimensions],
                "codecs": plan.codecs, "attributes": encoded}
